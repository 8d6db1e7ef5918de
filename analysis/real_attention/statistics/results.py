"""What a corpus run is and says: its identity (CorpusRun, folder names), the heads table, the summary and the
human description. Writing the files is real_attention.outputs.corpus_files's job."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from ..engine.heads import STATISTICS, HeadSums
from ..engine.units import DEFAULT_UNITS
from .labels import LABELS, Thresholds
from .reading import CorpusError, Shard

CORPUS_HEADS_COLUMNS = ["layer", "head", "label", *STATISTICS, "n_sentences", "n_words"]



@dataclass(frozen=True)
class CorpusRun:
    """What identifies a corpus result: the model, the corpus and how it was read."""

    model: str  # the model as the user named it
    revision: str  # resolved commit, or sha256 of local weights
    name: str  # the corpus name: the output folder under results/corpus/ (shards add a suffix)
    sha256: str  # of the whole corpus (its first `limit` lines with a limit), every byte
    format: str  # "text" or "jsonl", "mixed" for inputs of both
    truncate: bool
    versions: dict[str, str]  # python, torch, transformers
    shard: Shard | None = None  # None for a whole corpus
    thresholds: Thresholds = field(default_factory=Thresholds)
    engine: dict | None = None  # how it was computed (real_attention.statistics.cluster.engine_record, or merge_shards)
    units: str = DEFAULT_UNITS  # the unit rule: "text" or "tokenizer"
    measure: str = "weights"  # the maps the statistics pool (real_attention.engine.measures)
    # A shard's input layout (statistics.inputs.CorpusText.layout): merge refuses shards of one corpus read as other
    # inputs. None for a whole corpus, or a shard written before it was recorded.
    inputs: dict | None = None
    limit: int | None = None  # --limit: the corpus's first `limit` lines only (sha256 is theirs); None: every line

    @property
    def folder_name(self) -> str:
        return folder_name(self.name, self.shard, self.measure)


def folder_name(name: str, shard: Shard | None, measure: str = "weights") -> str:
    """results/corpus/<folder_name>: the corpus name, plus '-norm' for the norm measure and '-shard-i-of-N' for a
    shard, so measures and shards can share --out."""
    from ..engine.measures import check_own_folder, folder_suffix
    from ..engine.naming import plain_folder_name

    check_own_folder(plain_folder_name(name, "name (--name)"), "name (--name)")
    if re.search(r"-shard-\d+-of-\d+$", name):  # where `--shard i/N` of another corpus writes
        raise CorpusError(f"name (--name) {name!r} ends like the folder of a shard (-shard-i-of-N); "
                          "choose another name")
    name += folder_suffix(measure)
    return name if shard is None else f"{name}-shard-{shard.index}-of-{shard.count}"


def corpus_heads_frame(sums: HeadSums, labels: np.ndarray) -> pd.DataFrame:
    """One row per head, layer and head counted from 1: label, pooled means and counts."""
    layers, heads = sums.shape
    layer, head = np.indices((layers, heads)).reshape(2, -1)
    means = sums.means()
    frame = pd.DataFrame({"layer": layer + 1, "head": head + 1, "label": labels.reshape(-1)})
    for name in STATISTICS:
        frame[name] = means[name].reshape(-1)
    frame["n_sentences"] = sums.sentences
    frame["n_words"] = sums.units
    return frame[CORPUS_HEADS_COLUMNS]


def _strongest(score: np.ndarray) -> dict | None:
    """The head of the largest score; None if the statistic has no value (its mean over no units: NaN)."""
    if not np.isfinite(score).all():
        return None
    layer, head = np.unravel_index(int(np.argmax(score)), score.shape)  # ties: the lowest (layer, head)
    return {"layer": int(layer) + 1, "head": int(head) + 1, "score": round(float(score[layer, head]), 6)}


def corpus_summary(run: CorpusRun, sums: HeadSums, labels: np.ndarray) -> dict:
    """The run's headline numbers; layers and heads counted from 1."""
    layers, heads = sums.shape
    means = sums.means()
    return {
        "model": run.model,
        "revision": run.revision,
        "corpus": {"name": run.name, "sha256": run.sha256, "format": run.format,
                   **({} if run.limit is None else {"limit": run.limit})},
        "shard": None if run.shard is None else {"index": run.shard.index, "count": run.shard.count,
                                                 **({} if run.inputs is None else {"inputs": run.inputs})},
        "truncate": run.truncate,
        "units": run.units,
        "measure": run.measure,
        "counts": {
            "lines": sums.lines,
            "blank": sums.blank,
            "sentences": sums.sentences,
            "skipped": sums.skipped,
            "truncated": sums.truncated,
            "words": sums.units,
            "tokens": sums.tokens,
        },
        "layers": layers,
        "heads_per_layer": heads,
        "heads_total": layers * heads,
        "causal": sums.causal,  # a decoder: statistics over query units i >= 1, nothing sees the next word
        "labels": {label: int((labels == label).sum()) for label in LABELS},
        # a decoder's head cannot see the next word: no "strongest next" of all zeros, as `run`'s next_head
        "strongest": {name: None if name == "next" and sums.causal else _strongest(means[name])
                      for name in STATISTICS if name != "entropy"}
        if sums.sentences else None,
        "uniform_entropy": round(sums.uniform_entropy, 6) if sums.units else None,
        "thresholds": asdict(run.thresholds),
        "label_precedence": list(LABELS),
        "versions": run.versions,
        "engine": run.engine,
    }


def check_analysable(sums: HeadSums, what: str) -> None:
    """CorpusError unless some word of some sentence enters the statistics (means of nothing are no result)."""
    if sums.sentences == 0:
        hint = "; pass truncate=True (--truncate) to cut long lines" if sums.skipped else ""
        raise CorpusError(f"{what} has no sentences to analyse: {sums.lines} line(s) read, {sums.blank} blank, "
                          f"{sums.skipped} too long{hint}")
    if sums.units == 0:  # a decoder's first word sees only itself and enters no statistic
        raise CorpusError(f"{what} has no word that enters the statistics: {sums.sentences} sentence(s) of one "
                          "word each, and a decoder's first word sees only itself; give sentences of two words or more")



def describe_corpus(data: dict) -> str:
    """The human summary: counts, labels and the strongest heads."""
    counts = data["counts"]
    measure = data.get("measure", "weights")
    lines = [] if measure == "weights" else [f"measure: {measure} (the statistics pool the norm-based maps)"]
    lines += [
        f"{counts['sentences']} sentence(s), {counts['words']} words; "
        f"{counts['skipped']} line(s) too long skipped, {counts['truncated']} cut, {counts['blank']} blank",
        "labels: " + (", ".join(f"{label} {n}" for label, n in data["labels"].items() if n)
                      or "none: no word entered the statistics (merge adds this shard's zero sums)")
        + f" (of {data['heads_total']} heads)",
    ]
    # The strongest head of each kind that some head is labelled with: a "strongest sep" head that is no
    # sep head would mislead.
    for name, label in (("prev", "previous"), ("next", "next"), ("self", "self"), ("first_special", "first_special"),
                        ("last_special", "last_special"), ("punct", "punct"), ("first", "first")):
        if data["strongest"] and data["labels"].get(label) and data["strongest"].get(name):
            head = data["strongest"][name]
            lines.append(f"strongest {label}: layer {head['layer']}, head {head['head']} "
                         f"(mean weight {head['score']:.2f})")
    return "\n".join(lines)
