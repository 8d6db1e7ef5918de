"""Write the result tables of a run: attention.csv, focus.csv, heads.csv and summary.json."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ..engine.focus import FocusedSentence
from ..engine.heads import STATISTICS, HeadReport
from ..engine.measures import MEASURE_TEXT, WEIGHTS
from ..engine.pipeline import RunResult
from ..engine.words import WordAttention
from .jsonio import write_json

FLOAT_FORMAT = "%.6f"
ATTENTION_COLUMNS = ["sentence", "layer", "head", "query_index", "query", "key_index", "key", "weight"]
FOCUS_COLUMNS = ["sentence", "layer", "head", "top_key", "top_weight", "sense_weight", "marker_weight"]
HEADS_COLUMNS = ["layer", "head", "sense_head", "marker_head", *STATISTICS]
ROLLOUT_COLUMNS = ["sentence", "layer", "query_index", "query", "key_index", "key", "weight"]


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    frame.to_csv(path, index=False, float_format=FLOAT_FORMAT, lineterminator="\n")


def write_csv_chunks(frames, path: Path) -> None:
    """Write the frames one after another as one CSV (one header), without holding more than one in memory;
    the bytes are those of write_csv on their concatenation."""
    with open(path, "w", encoding="utf-8", newline="") as handle:
        for number, frame in enumerate(frames):
            frame.to_csv(handle, header=number == 0, index=False, float_format=FLOAT_FORMAT, lineterminator="\n")


def attention_frames(attentions: list[WordAttention]):
    """attention.csv's rows, one sentence's frame at a time (sorted within, and in sentence order)."""
    for number, attention in enumerate(attentions, start=1):
        weights = attention.weights  # (layers, heads, n, n)
        layer, head, query, key = np.indices(weights.shape).reshape(4, -1)  # C order: already sorted
        words = np.array(attention.words, dtype=object)
        yield pd.DataFrame(
            {
                "sentence": number,
                "layer": layer + 1,
                "head": head + 1,
                "query_index": query,
                "query": words[query],
                "key_index": key,
                "key": words[key],
                "weight": weights.reshape(-1).astype(np.float64),
            }
        )[ATTENTION_COLUMNS]


def attention_frame(attentions: list[WordAttention]) -> pd.DataFrame:
    """Long format: one row per sentence, layer, head, query and key; layer and head from 1."""
    return pd.concat(list(attention_frames(attentions)), ignore_index=True)


def rollout_frame(result: RunResult) -> pd.DataFrame:
    """Long format of the word-level rollout (real_attention.engine.rollout): one row per sentence, layer, query and key."""
    as_one_head = [WordAttention(s.attention.text, s.attention.words, s.attention.kinds, rolled[:, None])
                   for s, rolled in zip(result.sentences, result.rollout)]  # (layers, 1, n, n) each
    return attention_frame(as_one_head)[ROLLOUT_COLUMNS]


def focus_frame(sentences: list[FocusedSentence], report: HeadReport) -> pd.DataFrame:
    """One row per sentence and head: where the focus word looks most, and its sense and marker weight."""
    count, layers, heads = report.top_key.shape
    sentence, layer, head = np.indices((count, layers, heads)).reshape(3, -1)
    top_words = np.concatenate(
        [np.array(s.attention.words, dtype=object)[report.top_key[i].reshape(-1)] for i, s in enumerate(sentences)]
    )
    return pd.DataFrame(
        {
            "sentence": sentence + 1,
            "layer": layer + 1,
            "head": head + 1,
            "top_key": top_words,
            "top_weight": report.top_weight.reshape(-1).astype(np.float64),
            "sense_weight": report.sense_weight.reshape(-1).astype(np.float64),
            "marker_weight": report.marker_weight.reshape(-1).astype(np.float64),
        }
    )[FOCUS_COLUMNS]


def heads_frame(report: HeadReport) -> pd.DataFrame:
    """One row per head: its two focus-word labels and the pooled statistics (those of `heads --corpus`)."""
    layer, head = np.indices(report.shape).reshape(2, -1)
    flag = np.array(["false", "true"])
    frame = pd.DataFrame(
        {
            "layer": layer + 1,
            "head": head + 1,
            "sense_head": flag[report.sense_head.reshape(-1).astype(int)],
            "marker_head": flag[report.marker_head.reshape(-1).astype(int)],
        }
    )
    for name in STATISTICS:
        frame[name] = getattr(report, name).reshape(-1).astype(np.float64)
    return frame[HEADS_COLUMNS]


def _rounded(value: float) -> float:
    return round(float(value), 6)


def _head(position: tuple[int, int], score: float) -> dict | None:
    """The head and its score; None when the score does not exist (a mean over no units is NaN): JSON has no NaN."""
    if not np.isfinite(score):
        return None
    return {"layer": position[0] + 1, "head": position[1] + 1, "score": _rounded(score)}


def summary(result: RunResult) -> dict:
    """The run's headline numbers, layers and heads counted from 1."""
    from ..engine.categories import categories_for, category_counts, focus_categories

    sentence_set, report = result.sentence_set, result.report
    layers, heads = report.shape
    best = report.best_sense_head
    next_head = report.next_head
    return {
        "model": result.model,
        "revision": result.revision,
        "weights": result.weights_note,  # how they differ from the published ones (None: they do not)
        # a decoder: each word sees only itself and the words before it (no next-word head, no next category)
        "causal": result.causal,
        "categories": list(categories_for(result.causal)),  # the overview's and the report's, in precedence order
        "category_counts": category_counts(focus_categories(report, result.sentences), result.causal),
        "lang": sentence_set.lang,
        "focus": sentence_set.focus,
        "sentences": [{"text": s.text, "sense": s.sense} for s in sentence_set.sentences],
        # Unit indices as in attention.csv, so a reader of the tables needs no word search.
        "word_positions": [{"focus_index": s.focus, "sense_index": s.sense} for s in result.sentences],
        "layers": layers,
        "heads_per_layer": heads,
        "heads_total": layers * heads,
        "sense_heads": [[int(l) + 1, int(h) + 1] for l, h in np.argwhere(report.sense_head)],
        "sense_head_count": int(report.sense_head.sum()),
        "best_sense_head": None
        if best is None
        else {
            "layer": best[0] + 1,
            "head": best[1] + 1,
            "weights": [_rounded(w) for w in report.sense_weight[:, best[0], best[1]]],
        },
        "marker_head_count": int(report.marker_head.sum()),
        "marker_head_count_per_sentence": report.marker_head_count_per_sentence,
        "prev_head": _head(report.prev_head, report.prev[report.prev_head]),
        "next_head": None if next_head is None else _head(next_head, report.next[next_head]),
        "first_head": _head(report.first_head, report.first[report.first_head]),
        "strongest_markers_head": _head(report.marker_score_head, report.markers[report.marker_score_head]),
        "measure": result.measure,
        "measure_text": MEASURE_TEXT[result.measure],
        "versions": result.versions,
        "units": result.units,
        # pieces that straddle units of the text rule join them: sentence (from 1), the units, the piece
        "joined_units": [{"sentence": number, "units": list(join.units), "piece": join.piece}
                         for number, s in enumerate(result.sentences, start=1) for join in s.attention.joined],
    }


def write_results(folder: Path, result: RunResult) -> dict:
    """Write the result files into `folder` (rollout.csv when the rollout was computed); returns the summary."""
    sentences, report = list(result.sentences), result.report
    write_csv_chunks(attention_frames([s.attention for s in sentences]), folder / "attention.csv")
    if result.rollout:
        write_csv(rollout_frame(result), folder / "rollout.csv")
    write_csv(focus_frame(sentences, report), folder / "focus.csv")
    write_csv(heads_frame(report), folder / "heads.csv")
    data = summary(result)
    write_json(data, folder / "summary.json")
    return data


def _percentages(weights: list[float]) -> str:
    parts = [f"{round(100 * w)} %" for w in weights]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def describe(data: dict) -> str:
    """The human summary line, e.g. 'sense-word heads: 4 of 144 (best: layer 1, head 4: 44 % and 65 %); ...'."""
    total = data["heads_total"]
    best = data["best_sense_head"]
    best_text = (
        f" (best: layer {best['layer']}, head {best['head']}: {_percentages(best['weights'])})" if best else ""
    )
    measure = data.get("measure", WEIGHTS)
    lines = [] if measure == WEIGHTS else [f"measure: {measure} ({MEASURE_TEXT[measure]})"]
    lines += [
        f"sense-word heads: {data['sense_head_count']} of {total}{best_text}; "
        f"marker heads: {data['marker_head_count']} of {total}",
        "marker heads per sentence: " + ", ".join(str(c) for c in data["marker_head_count_per_sentence"]),
    ]
    heads = [("prev_head", "previous-word"), ("next_head", "next-word"), ("strongest_markers_head", "marker")]
    if data.get("causal"):
        heads.append(("first_head", "first-token"))
    for key, name in heads:
        head = data[key]
        if head is None:  # a decoder has no next-word head
            continue
        lines.append(f"{name} head: layer {head['layer']}, head {head['head']} (mean weight {head['score']:.2f})")
    return "\n".join(lines)


def sense_head_note(result: RunResult) -> str | None:
    """A line for the user when there is no sense head, so the sense figures were skipped; else None."""
    if result.report.best_sense_head is not None:
        return None
    return ("no sense-word head: the focus word's top key is not the sense word in every sentence in any head; "
            "skipped the sense heatmaps and the focus bars")
