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
from .files import FLOAT_FORMAT, csv_flags, write_csv, write_csv_chunks, write_json  # noqa: F401  (re-exported)
from .table_checks import table_records

ATTENTION_COLUMNS = ["sentence", "layer", "head", "query_index", "query", "key_index", "key", "weight"]
FOCUS_COLUMNS = ["sentence", "layer", "head", "top_key_index", "top_key", "top_weight", "sense_weight", "marker_weight"]
HEADS_COLUMNS = ["layer", "head", "sense_head", "marker_head", *STATISTICS]
ROLLOUT_COLUMNS = ["sentence", "layer", "query_index", "query", "key_index", "key", "weight"]


TABLE_FORMATS = ("csv", "parquet")  # run --table-format: how attention and rollout are stored
PARQUET_ROWS = 500_000  # rows buffered per Parquet row group


def sentence_frame(number: int, words: tuple[str, ...], weights: np.ndarray) -> pd.DataFrame:
    """One sentence's rows of attention.csv (number from 1): weights (layers, heads, n, n), in C order, which
    is already the table's order."""
    layer, head, query, key = np.indices(weights.shape).reshape(4, -1)
    labels = np.array(words, dtype=object)
    return pd.DataFrame(
        {
            "sentence": number,
            "layer": layer + 1,
            "head": head + 1,
            "query_index": query,
            "query": labels[query],
            "key_index": key,
            "key": labels[key],
            "weight": weights.reshape(-1).astype(np.float64),
        }
    )[ATTENTION_COLUMNS]


def attention_frames(attentions: list[WordAttention]):
    """attention.csv's rows, one sentence's frame at a time (sorted within, and in sentence order)."""
    for number, attention in enumerate(attentions, start=1):
        yield sentence_frame(number, attention.words, attention.checked_weights())


def attention_frame(attentions: list[WordAttention]) -> pd.DataFrame:
    """Long format: one row per sentence, layer, head, query and key; layer and head from 1."""
    return pd.concat(list(attention_frames(attentions)), ignore_index=True)


def rollout_sentence_frame(number: int, words: tuple[str, ...], rolled: np.ndarray) -> pd.DataFrame:
    """One sentence's rows of rollout.csv: rolled (layers, n, n)."""
    return sentence_frame(number, words, rolled[:, None])[ROLLOUT_COLUMNS]


def rollout_frame(result: RunResult) -> pd.DataFrame:
    """Long format of the word-level rollout (real_attention.engine.rollout): one row per sentence, layer, query and key."""
    return pd.concat([rollout_sentence_frame(number, s.attention.words, rolled)
                      for number, (s, rolled) in enumerate(zip(result.sentences, result.rollout), start=1)],
                     ignore_index=True)


def _parquet_schema(columns: list[str]):
    import pyarrow as pa

    types = {"sentence": pa.int32(), "layer": pa.int16(), "head": pa.int16(), "query_index": pa.int16(),
             "key_index": pa.int16(), "query": pa.dictionary(pa.int32(), pa.string()),
             "key": pa.dictionary(pa.int32(), pa.string()), "weight": pa.float32()}
    return pa.schema([(name, types[name]) for name in columns])


class _ParquetTable:
    """attention.parquet or rollout.parquet, written a row group at a time (PARQUET_ROWS rows)."""

    def __init__(self, path: Path, columns: list[str]):
        import pyarrow.parquet as pq

        self.columns, self.schema = columns, _parquet_schema(columns)
        self.writer = pq.ParquetWriter(path, self.schema, compression="zstd", use_dictionary=True)
        self.pending: list[tuple[int, tuple[str, ...], np.ndarray]] = []  # (number, words, (layers, heads, n, n))
        self.rows = 0

    def add(self, number: int, words: tuple[str, ...], weights: np.ndarray) -> None:
        self.pending.append((number, words, weights))
        self.rows += weights.size
        if self.rows >= PARQUET_ROWS:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa

        if not self.pending:
            return
        vocabulary = np.unique(np.array([w for _, words, _ in self.pending for w in words], dtype=object).astype(str))
        parts: dict[str, list[np.ndarray]] = {name: [] for name in ATTENTION_COLUMNS}
        for number, words, weights in self.pending:
            layer, head, query, key = np.indices(weights.shape).reshape(4, -1)
            codes = np.searchsorted(vocabulary, np.array(words, dtype=str)).astype(np.int32)  # (n,) word -> code
            parts["sentence"].append(np.full(layer.size, number, dtype=np.int32))
            parts["layer"].append((layer + 1).astype(np.int16))
            parts["head"].append((head + 1).astype(np.int16))
            parts["query_index"].append(query.astype(np.int16))
            parts["query"].append(codes[query])
            parts["key_index"].append(key.astype(np.int16))
            parts["key"].append(codes[key])
            parts["weight"].append(weights.reshape(-1).astype(np.float32))
        dictionary = pa.array(vocabulary, type=pa.string())
        arrays = []
        for name in self.columns:
            values = np.concatenate(parts[name])
            if name in ("query", "key"):
                arrays.append(pa.DictionaryArray.from_arrays(pa.array(values, type=pa.int32()), dictionary))
            else:
                arrays.append(pa.array(values))
        self.writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema))
        self.pending, self.rows = [], 0

    def close(self) -> None:
        self.flush()
        self.writer.close()


class _CsvTable:
    """attention.csv or rollout.csv, a sentence at a time: the bytes of write_csv on the whole table."""

    def __init__(self, path: Path, columns: list[str]):
        self.columns = columns
        self.handle = open(path, "w", encoding="utf-8", newline="")  # noqa: SIM115  closed in close()
        self.header = True

    def add(self, number: int, words: tuple[str, ...], weights: np.ndarray) -> None:
        frame = sentence_frame(number, words, weights)[self.columns]
        frame.to_csv(self.handle, header=self.header, index=False, float_format=FLOAT_FORMAT, lineterminator="\n")
        self.header = False

    def close(self) -> None:
        self.handle.close()


def check_table_format(table_format: str) -> str:
    """The format, or InputError; parquet needs pyarrow (the parquet extra)."""
    from ..engine.errors import InputError, MissingPackage

    if table_format not in TABLE_FORMATS:
        raise InputError(f"table format {table_format!r} is not one of {', '.join(TABLE_FORMATS)}")
    if table_format == "parquet":
        from importlib.util import find_spec

        if find_spec("pyarrow") is None:
            raise MissingPackage("table_format (--table-format) parquet needs pyarrow: pip install "
                                 "\"real-attention[parquet]\"")
    return table_format


class SentenceTables:
    """The per-sentence tables of a run, attention and rollout, written as each sentence is done (so a run of
    many sentences never holds all their maps): FOLDER/attention.{csv,parquet} and rollout.{csv,parquet}.

    `add` is real_attention.engine.pipeline.analyse's on_sentence. CSV: the bytes of write_results. Parquet:
    sentence int32; layer, head, query_index, key_index int16; query, key dictionary-encoded strings; weight
    float32 (the CSV's weights have 6 decimals). A context manager; the files are complete once it closes.
    """

    def __init__(self, folder: Path, table_format: str = "csv"):
        kind = _ParquetTable if check_table_format(table_format) == "parquet" else _CsvTable
        self.attention = kind(Path(folder) / f"attention.{table_format}", ATTENTION_COLUMNS)
        self.rollout = kind(Path(folder) / f"rollout.{table_format}", ROLLOUT_COLUMNS)

    def add(self, number: int, sentence: FocusedSentence, rolled: np.ndarray | None = None) -> None:
        """Sentence `number` (from 1): its (layers, heads, n, n) maps, and its (layers, n, n) rollout if given."""
        self.attention.add(number, sentence.attention.words, sentence.attention.checked_weights())
        if rolled is not None:
            self.rollout.add(number, sentence.attention.words, rolled[:, None])  # (layers, 1, n, n)

    def __enter__(self) -> SentenceTables:
        return self

    def __exit__(self, *error) -> None:
        self.attention.close()
        self.rollout.close()


def focus_frame(sentences: list[FocusedSentence], report: HeadReport) -> pd.DataFrame:
    """One row per sentence and head: where the focus word looks most (the unit's index from 0, as attention.csv's
    key_index, and its word: a word may occur twice), and its sense and marker weight."""
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
            "top_key_index": report.top_key.reshape(-1).astype(np.int64),
            "top_key": top_words,
            "top_weight": report.top_weight.reshape(-1).astype(np.float64),
            "sense_weight": report.sense_weight.reshape(-1).astype(np.float64),
            "marker_weight": report.marker_weight.reshape(-1).astype(np.float64),
        }
    )[FOCUS_COLUMNS]


def heads_frame(report: HeadReport) -> pd.DataFrame:
    """One row per head: its two focus-word labels and the pooled statistics (those of `heads --corpus`)."""
    layer, head = np.indices(report.shape).reshape(2, -1)
    frame = pd.DataFrame(
        {
            "layer": layer + 1,
            "head": head + 1,
            "sense_head": report.sense_head.reshape(-1).astype(bool),  # bool; write_csv writes true/false
            "marker_head": report.marker_head.reshape(-1).astype(bool),
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
        "device": result.device,
        "units": result.units,
        # pieces that straddle units of the text rule join them: sentence (from 1), the units, the piece
        "joined_units": [{"sentence": number, "units": list(join.units), "piece": join.piece}
                         for number, s in enumerate(result.sentences, start=1) for join in s.attention.joined],
    }


def write_results(folder: Path, result: RunResult, *, tables_written: bool = False) -> dict:
    """Write the result files into `folder` (rollout.csv when the rollout was computed); returns the summary,
    whose "tables" records the row count and sha256 of attention and rollout as written.

    tables_written: attention and rollout are there already (a SentenceTables wrote them as the run went);
    write the others only. Otherwise the result must hold every sentence's maps.
    """
    sentences, report = list(result.sentences), result.report
    if not tables_written:
        assert result.maps_kept == len(sentences), "a streamed run's tables come from its SentenceTables"
        write_csv_chunks(attention_frames([s.attention for s in sentences]), folder / "attention.csv")
        if result.rollout:
            write_csv(rollout_frame(result), folder / "rollout.csv")
    write_csv(focus_frame(sentences, report), folder / "focus.csv")
    write_csv(heads_frame(report), folder / "heads.csv")
    data = summary(result)
    layers, heads = report.shape
    # The per-sentence tables' row counts and sha256, which every reader checks (outputs/table_checks.py)
    data["tables"] = table_records(folder, [s.attention.words for s in sentences], layers, heads)
    write_json(data, folder / "summary.json")
    return data


def _percentages(weights: list[float]) -> str:
    parts = [f"{round(100 * w)} %" for w in weights]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def describe_run(data: dict) -> str:
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
        "marker heads per sentence: " + _counts(data["marker_head_count_per_sentence"]),
    ]
    counts = data.get("category_counts")
    if data.get("causal") and isinstance(counts, dict) and "first" in counts:  # a decoder's largest group, mostly
        lines.append(f"first-token heads (the focus word rests on the first word): {counts['first']} of {total}")
    heads = [("prev_head", "previous-word"), ("next_head", "next-word"),
             ("strongest_markers_head", "top marker-weight")]
    if data.get("causal"):
        heads.append(("first_head", "first-token"))
    for key, name in heads:
        head = data[key]
        if head is None:  # a decoder has no next-word head
            continue
        lines.append(f"{name} head: layer {head['layer']}, head {head['head']} (mean weight {head['score']:.2f})")
    return "\n".join(lines)


def _counts(counts: list[int]) -> str:
    """Up to 20 counts as a list; more as their range and median, so 2,000 sentences take one short line."""
    if len(counts) <= 20:
        return ", ".join(str(c) for c in counts)
    ordered = sorted(counts)
    middle = len(ordered) // 2
    median = ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
    return f"{ordered[0]} to {ordered[-1]}, median {median:g}, over {len(counts):,} sentences"


def sense_head_note(result: RunResult) -> str | None:
    """A line for the user when there is no sense head, so the sense figures were skipped; else None."""
    if result.report.best_sense_head is not None:
        return None
    return ("no sense-word head: the focus word's top key is not the sense word in every sentence in any head; "
            "skipped the sense heatmaps and the focus bars")
