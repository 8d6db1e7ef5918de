"""Head statistics over a corpus: stream sentences, batch them by length, pool per-head sums, label every head.

The data flow of `real-attention heads --corpus`:

    CorpusReader (lines of a shard) -> extract.encode (pieces, units, unit kinds) -> length buckets -> padded
    batch -> extract.forward_layers (one forward pass) -> heads.kernel as each layer ends (word merge and
    statistics, on the model's device) -> HeadSums (exact float64 running sums; `+` merges shards)
    -> label_heads -> heads.csv, summary.json

The encoding, the merge and every statistic are those of `run`: the same functions, not copies.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO
from collections.abc import Iterable, Iterator

import numpy as np
import pandas as pd

from ..engine.errors import InputError
from ..engine.extract import Encoded
from ..engine.heads import COUNT_FIELDS, STATISTICS, HeadSums, kernel, sentence_counts  # noqa: F401  (re-exported)
from ..outputs.files import write_csv, write_json
from ..engine.units import DEFAULT_UNITS
from .sums_checks import validate_sums_json

CORPUS_HEADS_COLUMNS = ["layer", "head", "label", *STATISTICS, "n_sentences", "n_words"]

DEFAULT_BATCH_SIZE = 32
BUCKET_BATCHES = 32  # sentences read ahead and sorted by length: this many batches
PAIR_TOKENS = 40  # batches of sentences longer than this many pieces hold fewer sentences (length_batches)


class CorpusError(InputError):
    """Bad corpus input (missing file, bad line, empty corpus, bad shard); the message says what to fix."""


# --- labels -------------------------------------------------------------------------------------------------

# The labels a head can get, in order of precedence: the first rule a head meets decides its label.
# "first" (the first unit, whatever it is) comes after the markers: when the first unit is a special token, its
# heads are first_special heads; it names the attention sink of a decoder whose tokenizer adds no special token.
LABELS = ("previous", "next", "self", "first_special", "last_special", "punct", "markers", "first", "broad", "mixed")


@dataclass(frozen=True)
class Thresholds:
    """When a head gets a label; defaults follow Clark et al. (2019), "What Does BERT Look At?".

    Precedence, first match wins: previous, next, self, first_special, last_special, punct, markers, first,
    broad, otherwise mixed.
    """

    # previous / next / self: mean weight on the unit at PREVIOUS_OFFSET / NEXT_OFFSET / the query itself
    # above this. Clark et al. Sec. 3.1 name the heads that put "> 50% of their attention" on the
    # previous or next token.
    position: float = 0.5
    # first_special / last_special / punct / markers / first: mean weight on the first special token ([CLS], <s>) /
    # the last one ([SEP], </s>) / punctuation-only words / every marker / the first unit, whatever it is
    # above this. Clark et al. Sec. 3.2: "over half of BERT's attention" in layers 6-10 goes to [SEP].
    marker: float = 0.5
    # broad: mean row entropy at least this fraction of the entropy of uniform attention over the same rows
    # (the mean of ln n). Clark et al. Sec. 3.3: broad heads "spend at most 10% of their attention mass on
    # any single word" and come close to their uniform-attention baseline.
    broad: float = 0.8

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not 0.0 <= value <= 1.0:
                raise CorpusError(f"threshold {name} = {value} is not between 0 and 1")

    @classmethod
    def parse(cls, settings: Iterable[str]) -> Thresholds:
        """The defaults with NAME=VALUE settings (--threshold) applied; CorpusError names a bad one."""
        names = list(asdict(cls()))
        values: dict[str, float] = {}
        for setting in settings:
            name, equals, text = setting.partition("=")
            name = name.strip()
            if not equals or name not in names:
                raise CorpusError(f"--threshold {setting!r}: expected NAME=VALUE with NAME one of {', '.join(names)}")
            try:
                value = float(text)
            except ValueError:
                raise CorpusError(f"--threshold {setting!r}: {text.strip()!r} is not a number") from None
            if not 0.0 <= value <= 1.0:
                raise CorpusError(f"--threshold {setting!r}: {name} must be between 0 and 1")
            values[name] = value
        return cls(**values)


def label_heads(means: dict[str, np.ndarray], uniform_entropy: float, thresholds: Thresholds) -> np.ndarray:
    """Pooled means, each (layers, heads) -> (layers, heads) array of labels from LABELS."""
    rules = [  # in LABELS order
        ("previous", means["prev"] > thresholds.position),
        ("next", means["next"] > thresholds.position),
        ("self", means["self"] > thresholds.position),
        ("first_special", means["first_special"] > thresholds.marker),
        ("last_special", means["last_special"] > thresholds.marker),
        ("punct", means["punct"] > thresholds.marker),
        ("markers", means["markers"] > thresholds.marker),
        ("first", means["first"] > thresholds.marker),
        ("broad", means["entropy"] >= thresholds.broad * uniform_entropy),
    ]
    assert [name for name, _ in rules] == list(LABELS[:-1])
    labels = np.full(means["prev"].shape, LABELS[-1], dtype=object)
    for name, hit in reversed(rules):  # the earlier rule is written last, so it wins
        labels[hit] = name
    return labels


# --- reading the corpus -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count`: lines index, index + count, index + 2 count, ... (lines counted from 1)."""

    index: int = 1
    count: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count:
            raise CorpusError(f"shard {self.index}/{self.count} does not exist; use --shard i/N with 1 <= i <= N")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """'2/4' -> Shard(2, 4)."""
        parts = text.split("/")
        if len(parts) != 2 or not all(part.strip().isdigit() for part in parts):
            raise CorpusError(f"--shard {text!r} is not of the form i/N, e.g. 1/4")
        return cls(int(parts[0]), int(parts[1]))

    def takes(self, line_number: int) -> bool:
        return (line_number - self.index) % self.count == 0

    def lines_of(self, total_lines: int) -> int:
        """How many of a file's total_lines fall in this shard."""
        return max(0, (total_lines - self.index) // self.count + 1)


def corpus_format(path: str, fmt: str = "auto") -> str:
    """'text' or 'jsonl': `fmt` unless it is 'auto', then by the file's suffix."""
    if fmt != "auto":
        return fmt
    return "jsonl" if path.lower().endswith(".jsonl") else "text"


def count_lines(path: Path) -> int:
    """The number of lines of a file, a last line without a newline included (for the progress bar)."""
    count, last = 0, b"\n"
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            count += block.count(b"\n")
            last = block[-1:]
    return count + (last != b"\n")


class CorpusReader:
    """Iterate over the sentences of one shard of a stream; hashes every byte and counts the lines.

    Text: one sentence per line. JSONL: one object per line with a string field "text". Blank lines (and
    empty texts) are skipped and counted. After the iteration, `sha256` is the digest of the whole stream.
    """

    def __init__(self, stream: BinaryIO | Iterable[bytes], fmt: str = "text", shard: Shard = Shard(), source: str = "the corpus"):
        if fmt not in ("text", "jsonl"):
            raise CorpusError(f"unknown corpus format {fmt!r}: use text or jsonl")
        self.stream, self.fmt, self.shard, self.source = stream, fmt, shard, source
        self._digest = hashlib.sha256()
        self.lines = 0  # lines of this shard read so far
        self.blank = 0

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()

    def __iter__(self) -> Iterator[str]:
        for number, raw in enumerate(self.stream, start=1):
            self._digest.update(raw)
            if not self.shard.takes(number):
                continue
            self.lines += 1
            text = self._text(raw, number)
            if text:
                yield text
            else:
                self.blank += 1

    def _text(self, raw: bytes, number: int) -> str:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CorpusError(f"line {number} of {self.source} is not UTF-8 ({error.reason} at byte {error.start})") from None
        if number == 1:
            line = line.removeprefix("\ufeff")
        if self.fmt == "text" or not line.strip():
            return self._checked(line.strip(), number)
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise CorpusError(f"line {number} of {self.source} is not JSON: {error.msg} (column {error.colno})") from None
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            raise CorpusError(f'line {number} of {self.source} has no string field "text"')
        return self._checked(record["text"].strip(), number)

    def _checked(self, text: str, number: int) -> str:
        """The text, or CorpusError if it holds a NUL character: no sentence does, a binary or corrupt file does
        (skipping such lines would pool statistics over what is left of a damaged file without a word)."""
        if "\x00" in text:
            raise CorpusError(f"line {number} of {self.source} holds a NUL byte (\\x00): the file is binary or "
                              "damaged; remove the NUL bytes (e.g. tr -d '\\000' < FILE > CLEAN) and run again")
        return text


# --- batching ----------------------------------------------------------------------------------------------


def length_batches(sentences: list[Encoded], batch_size: int) -> list[list[Encoded]]:
    """Sort by piece count (a stable sort: ties keep their order) and cut into batches: little padding.

    A batch has at most batch_size sentences, and fewer when they are long: at most batch_size * PAIR_TOKENS**2
    query-key pairs per head, so the maps of a batch of long sentences take no more memory than a full batch
    of PAIR_TOKENS-piece ones.
    """
    budget = batch_size * PAIR_TOKENS**2
    batches: list[list[Encoded]] = []
    for sentence in sorted(sentences, key=lambda s: len(s.ids)):
        t = len(sentence.ids)  # the longest so far: the batch's padded length
        if not batches or len(batches[-1]) == batch_size or (len(batches[-1]) + 1) * t * t > budget:
            batches.append([])
        batches[-1].append(sentence)
    return batches


def _advance(progress, shown: int, lines: int) -> int:
    if progress is not None and lines:
        progress.update(lines)
    return shown + lines


def corpus_sums(
    loaded,
    reader: CorpusReader,
    batch_size: int = DEFAULT_BATCH_SIZE,
    truncate: bool = False,
    progress=None,
    units: str = DEFAULT_UNITS,
    measure: str = "weights",
) -> HeadSums:
    """Stream the reader's sentences through the model in length-sorted batches; return the pooled sums.

    Memory holds one bucket of encoded sentences and one batch of maps, whatever the corpus size.
    `progress`, if given, has tqdm's `update(n)` and advances by one per line read. `units`: the unit rule
    ("text" or "tokenizer", real_attention.engine.words.group); a corpus names no required words. measure: the maps the
    statistics pool, "weights" or "norm" (real_attention.engine.measures).
    """
    import torch

    from ..engine.extract import encode, pad_batch
    from ..engine.measures import forward_measured

    if batch_size < 1:
        raise CorpusError(f"--batch-size must be at least 1, not {batch_size}")
    device = torch.device(loaded.device)
    totals = torch.zeros((len(STATISTICS), loaded.layers, loaded.heads), dtype=torch.float64, device=device)
    counts: dict[str, Any] = dict.fromkeys(("sentences", "units", "pairs", "tokens", "skipped", "truncated"), 0)
    counts["uniform"] = 0.0
    pad_id = loaded.tokenizer.pad_token_id or 0
    sentences = iter(reader)
    shown = 0  # lines the progress bar has counted
    while True:
        lines_before = reader.lines
        texts = list(itertools.islice(sentences, batch_size * BUCKET_BATCHES))
        if not texts:
            break
        encoded, too_long = encode(loaded.tokenizer, texts, loaded.max_tokens, truncate, units)
        counts["truncated" if truncate else "skipped"] += len(too_long)
        shown = _advance(progress, shown, reader.lines - lines_before - len(encoded))  # blank, skipped
        for batch_sentences in length_batches(encoded, batch_size):
            batch = pad_batch(batch_sentences, pad_id)
            piece_units = torch.from_numpy(batch.units).to(device)  # not `units`: that is the rule's name
            kinds = torch.from_numpy(batch.kinds).to(device)

            def on_layer(layer: int, weights) -> None:  # as each layer ends: its maps die with it
                # float32, as `run`: a model loaded in bf16 or fp16 gives its maps in that precision
                # called within this iteration's forward pass: this batch's piece_units and kinds
                totals[:, layer] += kernel(weights.float(), piece_units, kinds, causal=loaded.causal)[1]  # noqa: B023

            forward_measured(loaded, batch, on_layer, measure)
            sizes = [len(s.kinds) for s in batch_sentences]
            for name, value in sentence_counts(sizes, int(batch.attention_mask.sum()), loaded.causal).items():
                counts[name] += value
            shown = _advance(progress, shown, len(batch_sentences))
    _advance(progress, shown, reader.lines - shown)  # blank lines after the last sentence
    return HeadSums(totals=totals.cpu().numpy(), lines=reader.lines, blank=reader.blank, causal=loaded.causal,
                    **counts)


# --- results ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CorpusRun:
    """What identifies a corpus result: the model, the corpus and how it was read."""

    model: str  # the model as the user named it
    revision: str  # resolved commit, or sha256 of local weights
    name: str  # the corpus name: the output folder under results/corpus/ (shards add a suffix)
    sha256: str  # of the whole corpus file, every byte
    format: str  # "text" or "jsonl"
    truncate: bool
    versions: dict[str, str]  # python, torch, transformers
    shard: Shard | None = None  # None for a whole corpus
    thresholds: Thresholds = field(default_factory=Thresholds)
    engine: dict | None = None  # how it was computed (real_attention.statistics.cluster.engine_record, or merge_shards)
    units: str = DEFAULT_UNITS  # the unit rule: "text" or "tokenizer"
    measure: str = "weights"  # the maps the statistics pool (real_attention.engine.measures)

    @property
    def folder_name(self) -> str:
        return folder_name(self.name, self.shard, self.measure)


def folder_name(name: str, shard: Shard | None, measure: str = "weights") -> str:
    """results/corpus/<folder_name>: the corpus name, plus '-norm' for the norm measure and '-shard-i-of-N' for a
    shard, so measures and shards can share --out."""
    from ..outputs.folders import plain_folder_name
    from ..engine.measures import check_own_folder, folder_suffix

    check_own_folder(plain_folder_name(name, "corpus name (--name)"), "corpus name (--name)")
    if re.search(r"-shard-\d+-of-\d+$", name):  # where `--shard i/N` of another corpus writes
        raise CorpusError(f"corpus name (--name) {name!r} ends like the folder of a shard (-shard-i-of-N); "
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
        "corpus": {"name": run.name, "sha256": run.sha256, "format": run.format},
        "shard": None if run.shard is None else {"index": run.shard.index, "count": run.shard.count},
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


LABELS_FIGURE = "labels"  # the label grid
STATISTICS_FIGURE = "statistics"  # every pooled statistic as a layer x head heatmap


def check_analysable(sums: HeadSums, what: str) -> None:
    """CorpusError unless some word of some sentence enters the statistics (means of nothing are no result)."""
    if sums.sentences == 0:
        hint = "; pass --truncate to cut long lines" if sums.skipped else ""
        raise CorpusError(f"{what} has no sentences to analyse: {sums.lines} line(s) read, {sums.blank} blank, "
                          f"{sums.skipped} too long{hint}")
    if sums.units == 0:  # a decoder's first word sees only itself and enters no statistic
        raise CorpusError(f"{what} has no word that enters the statistics: {sums.sentences} sentence(s) of one "
                          "word each, and a decoder's first word sees only itself; give sentences of two words or more")


def write_corpus(results_folder: Path, figures_folder: Path, run: CorpusRun, sums: HeadSums,
                 formats: tuple[str, ...] = ("png",)) -> dict:
    """Write heads.csv, summary.json, sums.json (exact, for merge), the label grid and the statistics figure
    (in each of `formats`); returns the summary."""
    from ..outputs.corpus_figures import label_grid, statistics_grid
    from ..outputs.figio import save_figure

    if run.shard is None:  # an empty shard is fine: the merge may still have sentences
        check_analysable(sums, f"the corpus {run.name!r}")
    labels = label_heads(sums.means(), sums.uniform_entropy, run.thresholds)
    write_csv(corpus_heads_frame(sums, labels), results_folder / "heads.csv")
    data = corpus_summary(run, sums, labels)
    write_json(data, results_folder / "summary.json")
    write_json(sums.to_json(), results_folder / "sums.json")
    from ..engine.measures import MEASURE_TITLE, WEIGHTS

    measured = "" if run.measure == WEIGHTS else f", by {MEASURE_TITLE[run.measure]}"
    title = f"{Path(run.model).name or run.model} on {run.folder_name}: {sums.sentences} sentences{measured}"
    for fmt in formats:
        save_figure(label_grid(labels, LABELS, title), figures_folder / f"{LABELS_FIGURE}.{fmt}")
        save_figure(statistics_grid(sums.means(), sums.uniform_entropy, title),
                    figures_folder / f"{STATISTICS_FIGURE}.{fmt}")
    return data


# --- merging shards -----------------------------------------------------------------------------------------


def read_shard(folder: Path) -> tuple[dict, HeadSums]:
    """A shard's summary and exact sums; CorpusError if the folder is not a corpus result."""
    folder = Path(folder)
    paths = [folder / "summary.json", folder / "sums.json"]
    if not all(path.is_file() for path in paths):
        raise CorpusError(
            f"{folder} is not a corpus result folder (no summary.json and sums.json); "
            "pass results/corpus/NAME/ folders written by `heads --shard`"
        )
    try:
        data, sums = (json.loads(path.read_text(encoding="utf-8")) for path in paths)
    except (OSError, ValueError) as error:
        raise CorpusError(f"{folder} holds an unreadable summary.json or sums.json ({error})") from None
    check_summary(folder, data)
    try:
        validate_sums_json(sums)
        head_sums = HeadSums.from_json(sums)
    except ValueError as error:  # check_sums_json names the field
        raise CorpusError(f"{folder / 'sums.json'}: {error}; merge takes the sums.json that `heads --shard` "
                          "wrote, unchanged") from None
    if head_sums.shape != (data["layers"], data["heads_per_layer"]):
        raise CorpusError(f"{folder}: sums.json has {head_sums.shape} heads but summary.json says "
                          f"({data['layers']}, {data['heads_per_layer']})")
    return data, head_sums


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# What merge reads from a shard's summary.json: field -> (check, what it must be).
SUMMARY_FIELDS = {
    "model": (lambda v: isinstance(v, str) and v, "a model name"),
    "revision": (lambda v: isinstance(v, str) and v, "a revision string"),
    "corpus": (lambda v: isinstance(v, dict) and all(isinstance(v.get(k), str) for k in ("name", "sha256"))
               and v.get("format") in ("text", "jsonl"), 'an object with string "name", "sha256" and "format"'),
    "shard": (lambda v: v is None or (isinstance(v, dict) and _is_int(v.get("index")) and _is_int(v.get("count"))
                                      and 1 <= v["index"] <= v["count"]),
              'null or an object with whole numbers "index" and "count", 1 <= index <= count'),
    "truncate": (lambda v: isinstance(v, bool), "true or false"),
    "thresholds": (lambda v: isinstance(v, dict) and set(v) == set(asdict(Thresholds()))
                   and all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 1 for x in v.values()),
                   f"an object of {', '.join(asdict(Thresholds()))} between 0 and 1"),
    "layers": (lambda v: _is_int(v) and v >= 1, "a whole number >= 1"),
    "heads_per_layer": (lambda v: _is_int(v) and v >= 1, "a whole number >= 1"),
    "versions": (lambda v: isinstance(v, dict), "an object"),
}


def check_summary(folder: Path, data) -> None:
    """CorpusError naming the folder and the first field of summary.json that merge cannot use."""
    if not isinstance(data, dict):
        raise CorpusError(f"{folder}/summary.json is not a JSON object")
    for name, (valid, expected) in SUMMARY_FIELDS.items():
        if name not in data:
            raise CorpusError(f"{folder}/summary.json has no field {name!r}")
        if not valid(data[name]):
            raise CorpusError(f"{folder}/summary.json: field {name!r} is {data[name]!r}, expected {expected}")


SAME_IN_EVERY_SHARD = ("model", "revision", "corpus", "truncate", "units", "thresholds", "layers", "heads_per_layer",
                       "measure")


def merge_shards(folders: Iterable[Path]) -> tuple[CorpusRun, HeadSums]:
    """Add up the sums of every shard of one corpus run; the result is that of the unsharded run."""
    shards = [(Path(folder), *read_shard(folder)) for folder in folders]
    if not shards:
        raise CorpusError("merge needs at least one shard folder")
    first_folder, first, _ = shards[0]
    for folder, data, _ in shards:
        if data.get("shard") is None:
            raise CorpusError(f"{folder} was not written with --shard; merge takes the shards of one run")
        for key in SAME_IN_EVERY_SHARD:
            if data.get(key) != first.get(key):
                raise CorpusError(f"{folder} and {first_folder} differ in {key}; merge takes the shards of one run")
        if data["shard"]["count"] != first["shard"]["count"]:
            raise CorpusError(f"{folder} and {first_folder} come from runs with different shard counts")
    count = first["shard"]["count"]
    by_index: dict[int, tuple[Path, HeadSums]] = {}
    for folder, data, sums in shards:
        index = data["shard"]["index"]
        if index in by_index:
            raise CorpusError(f"{folder} and {by_index[index][0]} are both shard {index}/{count}")
        by_index[index] = (folder, sums)
    missing = sorted(set(range(1, count + 1)) - set(by_index))
    if missing:
        raise CorpusError(f"shard(s) {', '.join(f'{i}/{count}' for i in missing)} missing; merge needs all {count}")
    total = by_index[1][1]
    for index in range(2, count + 1):  # shard order, whatever the argument order: the same bits every time
        total = total + by_index[index][1]
    run = CorpusRun(
        model=first["model"],
        revision=first["revision"],
        name=first["corpus"]["name"],
        sha256=first["corpus"]["sha256"],
        format=first["corpus"]["format"],
        truncate=first["truncate"],
        versions=first["versions"],
        thresholds=Thresholds(**first["thresholds"]),
        engine={"name": "merge", "shards": count},
        units=first.get("units", "tokenizer"),  # results from before the text rule used the tokenizer's words
        measure=first.get("measure", "weights"),
    )
    return run, total


def describe_corpus(data: dict) -> str:
    """The human summary: counts, labels and the strongest heads."""
    counts = data["counts"]
    measure = data.get("measure", "weights")
    lines = [] if measure == "weights" else [f"measure: {measure} (the statistics pool the norm-based maps)"]
    lines += [
        f"{counts['sentences']} sentence(s), {counts['words']} words; "
        f"{counts['skipped']} line(s) too long skipped, {counts['truncated']} cut, {counts['blank']} blank",
        "labels: " + ", ".join(f"{label} {n}" for label, n in data["labels"].items() if n)
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
