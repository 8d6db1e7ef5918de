"""`real-attention compare` and `ra.compare`: every head of several models against every other, by the
Jensen-Shannon divergence of their word-level rows over the same sentences (Clark et al. 2019, Sec. 6).

Data flow:

    sentences -> a first pass that only tokenizes (extract.encode per model): the sentences every model takes
    and spells alike, and the units rule (rows as they are if every model gives the same units, else words only)
    -> a second pass: buckets sorted by word count -> per batch, each model in turn: pad_batch ->
    measures.forward_measured -> words.merge_maps as each layer ends -> jsd.Packed (the compared elements)
    -> jsd.block_sums for every pair of models (a running float64 sum per head pair)
    -> JS matrix -> distances.csv, matching.csv (Hungarian), mds.csv (classical MDS), summary.json, figures.

Memory holds one bucket of encoded sentences, one batch of every model's word maps and the (heads x heads) sums,
whatever the number of sentences.
"""
from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..engine.batches import MAX_BATCH_SIZE
from ..engine.checks import callable_or_none, whole_number
from ..engine.errors import InputError, RealAttentionWarning
from ..engine.measures import NORM, WEIGHTS, check_measure
from ..engine.units import DEFAULT_UNITS, check_rule

if TYPE_CHECKING:
    from ..engine.models import LoadedModel
    from ..engine.progress import ProgressBar

DEFAULT_BATCH_SIZE = 32
BUCKET_BATCHES = 32  # sentences read ahead and sorted by word count: this many batches
PAIR_WORDS = 40  # a batch holds at most batch_size * PAIR_WORDS**2 word pairs (fewer long sentences)
AS_IS, WORDS_ONLY = "as-is", "words"
ALL_ROWS, CAUSAL_ROWS = "all", "causal"
ROWS = (ALL_ROWS, CAUSAL_ROWS)  # rows="causal": every encoder row cut to the words up to its query, renormalised
CAUSAL_SUFFIX = "-causal"  # the default folder of a rows="causal" comparison: NAME-causal
MAX_MODEL_NAME = 200  # characters of a name given to compare (names=, --name is the folder's)
RULE_TEXT = {
    AS_IS: "every model gave the same units (the same words and special tokens) for every sentence: the rows are "
           "compared as they are",
    WORDS_ONLY: "the models' units differ (their special tokens, or words one model's piece joins): each row and "
                "column of a special token is dropped, words a piece joins in one model are joined in every model "
                "(counts.joined sentences), and each row is renormalised over the words",
}
MEASURES = (WEIGHTS, NORM)


@dataclass(frozen=True)
class ComparedModel:
    """One model of a comparison, as the tables name it."""

    name: str  # as given (with @revision when one was given), unique within the comparison
    model: str  # the loaded model's name (a Hub id or a folder)
    revision: str  # resolved commit, or sha256 of a folder's weights
    layers: int
    heads: int
    causal: bool
    given: str = ""  # the name as given, before a repeated one was told apart ('@' revision, '#2'): the folder's


@dataclass(frozen=True, eq=False)
class CompareResult:
    """What `ra.compare` computed. Heads are ordered by model (as given), then layer, then head.

    matrix: (N, N) float64 JS in nats between every two heads, symmetric, 0 on the diagonal, N = all heads.
    distances: distances.csv, one row per pair of distinct heads (the first before the second in that order);
    matching: matching.csv; mds: mds.csv; summary: summary.json; heads: heads.csv, what each head's compared rows
    were like (word_share, later_share).
    """

    models: tuple[ComparedModel, ...]
    matrix: np.ndarray
    distances: pd.DataFrame
    matching: pd.DataFrame
    mds: pd.DataFrame
    summary: dict[str, Any]
    corpus_path: Path | None = field(default=None, repr=False)  # what was read: write_compare never replaces it
    heads: pd.DataFrame | None = field(default=None, repr=False)  # heads.csv (None: a result made without it)

    def __repr__(self) -> str:
        names = " x ".join(f"{m.name} ({m.layers * m.heads} heads)" for m in self.models)
        return (f"<CompareResult: {names}; {self.summary['counts']['sentences']} sentences, "
                f"{self.summary['counts']['words']} rows, rule {self.summary['rule']}>")

    def block(self, a: int, b: int) -> np.ndarray:
        """The (heads of model a, heads of model b) part of the matrix (models counted from 0 as given, as in
        `models`; -1 is the last)."""
        count = len(self.models)
        for name, value in (("a", a), ("b", b)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not -count <= value < count:
                raise InputError(f"block: {name} must be a model's index, 0 to {count - 1} (or -{count} to -1), "
                                 f"not {value!r:.60}")
        a, b = int(a) % count, int(b) % count
        starts = np.cumsum([0] + [m.layers * m.heads for m in self.models])
        return self.matrix[starts[a]:starts[a + 1], starts[b]:starts[b + 1]]


CORPUS_PATH = "--corpus"  # how messages name CorpusLines' file: the compare command's option (ra.compare takes sentences)


class CorpusLines:
    """A corpus file's sentences, read afresh on each iteration (compare reads them twice): text with one
    sentence per line, or JSONL with a "text" field; blank lines skipped. A name ending in .gz, .bz2, .xz or .zst is
    decompressed as it is read, as `heads --corpus` does. `sha256`: of the whole (decompressed) file, as heads
    records it. Errors name a line as "line N of FILE", N counting every line, blank ones too."""

    def __init__(self, path: str | Path, fmt: str = "auto"):
        from ..statistics.inputs import plain_name, refuse_treebank
        from ..statistics.sums import corpus_format

        from ..engine.checks import check_name_length

        check_name_length(str(path), CORPUS_PATH)
        self.path = Path(path)
        refuse_treebank(str(self.path), CORPUS_PATH)
        if self.path.is_dir():
            raise InputError(f"{CORPUS_PATH} {self.path} is a folder; pass a text or .jsonl file")
        if self.path.exists() and not self.path.is_file():  # a device or a pipe: compare reads it twice
            raise InputError(f"{CORPUS_PATH} {self.path} is not a regular file; pass a text or .jsonl file")
        if not self.path.is_file():
            raise InputError(f"{CORPUS_PATH} {self.path}: no such file")
        self.fmt = corpus_format(plain_name(str(self.path)), fmt)  # corpus.jsonl.gz: JSONL

    @property
    def sha256(self) -> str:
        import hashlib

        from ..statistics.inputs import Input, compression

        if compression(str(self.path)) is None:
            from ..engine.hashing import file_sha256

            return file_sha256(self.path)
        from ..statistics.inputs import READ_ERRORS

        digest = hashlib.sha256()  # the decompressed text's, so corpus.txt.gz and corpus.txt are one corpus
        with Input(str(self.path), self.fmt, CORPUS_PATH).open() as handle:
            try:  # the whole file, even when a limit read fewer lines: its damage past them is one error too
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            except READ_ERRORS as error:
                raise InputError(f"cannot read {CORPUS_PATH} {self.path}: {error or type(error).__name__}") from None
        return digest.hexdigest()

    def check_has_sentence(self) -> None:
        """InputError unless the file has a line that is not blank (read up to the first one)."""
        if next(iter(self), None) is None:
            raise InputError(f"{CORPUS_PATH} {self.path} has no sentence (it is empty or every line is blank)")

    def numbered(self) -> Iterator[tuple[int, str]]:
        """(line number from 1, blank lines counted; the sentence) of every line that is not blank."""
        from ..statistics.inputs import CorpusText, Input

        corpus = CorpusText([Input(str(self.path), self.fmt, CORPUS_PATH)])  # decompresses; a damaged archive is one error
        for text in corpus:
            yield corpus.lines, text  # one input, no shard: the lines read so far are this line's number

    def __iter__(self) -> Iterator[str]:
        for _, text in self.numbered():
            yield text


def model_names(models: Sequence, names: Sequence[str] | None) -> list[str]:
    """Each model's name in the tables: names[i] if given, else its loaded name; a repeated name gets
    '@' and its short revision, and if that repeats too, '#2', '#3', ..."""
    from ..engine.naming import short_revision

    if names is not None:
        if len(names) != len(models) or not all(isinstance(n, str) and n.strip() for n in names):
            raise InputError(f"names must be {len(models)} non-empty strings, one per model")
        from ..engine.text import text_problem

        for number, given in enumerate(names, 1):  # they go into the tables and summary.json as they are
            problem = text_problem(given)
            if problem is not None or len(given) > MAX_MODEL_NAME:
                raise InputError(f"names: name {number} {given[:40]!r} "
                                 f"{problem or f'is {len(given):,} characters long; at most {MAX_MODEL_NAME}'}")
        labels = [n.strip() for n in names]
    else:
        labels = [m.choice.name for m in models]
    if len(set(labels)) < len(labels):
        labels = [f"{label}@{short_revision(m.revision)}" if labels.count(label) > 1 else label
                  for label, m in zip(labels, models)]
    seen: dict[str, int] = {}
    unique = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        unique.append(label if seen[label] == 1 else f"{label}#{seen[label]}")
    return unique


# --- the units of each sentence -----------------------------------------------------------------------------


def _is_word(kinds: np.ndarray) -> np.ndarray:
    from ..engine.words import PUNCT, WORD

    return np.isin(kinds, (WORD, PUNCT))


def _words(encoded) -> tuple[str, ...]:
    keep = _is_word(encoded.kinds)
    return tuple(w for w, k in zip(encoded.words, keep) if k)


def common_words(words: Sequence[Sequence[str]]) -> tuple[list[np.ndarray], int]:
    """Each model's words of one sentence -> (for each model, (its words,) int64 index of the common word each
    falls in; the number of common words). The common words are the finest ones that every model's words make
    up: where one model's piece straddles two units of the text rule and joins them ("$Q$," against "$Q$" ","),
    the others' units are joined the same way. ValueError (with the word number) if the models' words do not
    spell the same characters (spaces aside)."""
    ends = []
    for sequence in words:
        lengths = [len("".join(word.split())) for word in sequence]
        ends.append(np.cumsum(lengths, dtype=np.int64))
    spelled = ["".join("".join(word.split()) for word in sequence) for sequence in words]
    for index, text in enumerate(spelled[1:], start=1):
        if text != spelled[0]:
            at = next((i for i, (x, y) in enumerate(zip(spelled[0], text)) if x != y), min(len(text), len(spelled[0])))
            word = int(np.searchsorted(ends[0], at, side="right"))
            raise ValueError(f"model {index + 1} spells it differently from model 1 at word {word + 1}")
    common = ends[0]
    for other in ends[1:]:
        common = np.intersect1d(common, other)  # sorted, unique: the boundaries every model has
    return [np.searchsorted(common, e, side="left").astype(np.int64) for e in ends], len(common)


def _encode_bucket(models, texts: list[str], units: str):
    """Each model's encoding of the texts -> (per text: the encodings of every model, or None if it is too
    long for some model; the number too long)."""
    from ..engine.extract import encode

    per_model = []
    for loaded in models:
        encoded, too_long = encode(loaded.tokenizer, texts, loaded.max_tokens, units=units)
        long_ones = {index for index, _ in too_long}
        kept = iter(encoded)
        per_model.append([None if i in long_ones else next(kept) for i in range(len(texts))])
    rows = [tuple(encodings) for encodings in zip(*per_model)]
    kept_rows = [row if all(e is not None for e in row) else None for row in rows]
    return kept_rows, sum(row is None for row in kept_rows)


def _snippet(text: str) -> str:
    return repr(text if len(text) <= 40 else text[:39] + "\u2026")


def _aligned(row) -> tuple[list[np.ndarray], int] | None:
    """common_words of one sentence's encodings (one per model), or None if the models' words spell it
    differently."""
    try:
        return common_words([_words(e) for e in row])
    except ValueError:
        return None


def _scan(models, names, sentences: Iterable[str], units: str, limit: int | None, bucket: int) -> dict:
    """The first pass: tokenize only. -> counts (common: the rows the words rule compares; joined: sentences
    where a model's piece joins words; mismatched: sentences two models' words spell differently, left out),
    the rule (from the sentences compared) and `first`: where the first mismatched sentence is and why, or None.
    Words that one model's piece joins are joined in all (common_words)."""
    rule = AS_IS
    counts = {"lines": 0, "sentences": 0, "skipped": 0, "mismatched": 0, "words": 0, "common": 0, "joined": 0}
    first_mismatch = None
    stream = itertools.islice(_clean(sentences), None if limit is None else min(limit, sys.maxsize))
    while items := list(itertools.islice(stream, bucket)):
        rows, skipped = _encode_bucket(models, [text for _, text in items], units)
        counts["lines"] += len(items)
        counts["skipped"] += skipped
        for (place, text), row in zip(items, rows):
            if row is None:
                continue
            try:
                _, common = common_words([_words(e) for e in row])
            except ValueError as error:  # a character one tokenizer gives no piece (U+00AD, U+200D, ...)
                counts["mismatched"] += 1
                if first_mismatch is None:
                    first_mismatch = f"{place} ({_snippet(text)}): {error}"
                continue
            first = row[0]
            if not all(e.words == first.words and np.array_equal(e.kinds, first.kinds) for e in row[1:]):
                rule = WORDS_ONLY
            counts["sentences"] += 1
            counts["words"] += len(first.words)
            counts["common"] += common
            counts["joined"] += int(any(len(_words(e)) != common for e in row))
    return {"rule": rule, "counts": counts, "first_mismatch": first_mismatch}


# --- the streaming pass --------------------------------------------------------------------------------------


def _batches(rows: list, sizes: list[int], batch_size: int) -> list[list[int]]:
    """Indices of the rows sorted by size (stable) and cut into batches of at most batch_size, fewer when long."""
    budget = batch_size * PAIR_WORDS ** 2
    batches: list[list[int]] = []
    for index in sorted(range(len(rows)), key=lambda i: sizes[i]):
        n = sizes[index]
        if not batches or len(batches[-1]) == batch_size or (len(batches[-1]) + 1) * n * n > budget:
            batches.append([])
        batches[-1].append(index)
    return batches


def _word_units(batch) -> np.ndarray:
    """(B, t) each piece's word among the sentence's words (0-based), -1 for special tokens and pads."""
    is_word = _is_word(batch.kinds)  # (B, n)
    word_of_unit = np.where(is_word, np.cumsum(is_word, axis=1) - 1, -1)
    pieces = np.take_along_axis(word_of_unit, np.maximum(batch.units, 0), axis=1)
    return np.where(batch.units >= 0, pieces, -1)


def word_rows(loaded, encoded: list, rule: str, measure: str, n: int, common: list | None = None,
              batch_size: int | None = None, causal_view: bool = False):
    """One forward pass over a batch -> ((B, layers * heads, n, n) float32 word rows on the model's device: the
    maps of ra.attend (rule as-is), or of the common words without the special tokens, each row renormalised
    (rule words; common[b]: sentence b's word -> common word, common_words); (layers * heads,) float64 the sum
    over the batch's rows of each row's weight before renormalising: what the rows kept). batch_size: the run's
    --batch-size, named if the device runs out of memory. causal_view: each row cut to the words up to its
    query and renormalised (an encoder compared as a decoder sees)."""
    import torch

    from ..engine.extract import pad_batch, to_device
    from ..engine.measures import forward_measured
    from ..engine.models import float64_device
    from ..engine.words import merge_maps

    batch = pad_batch(encoded, loaded.tokenizer.pad_token_id or 0)
    units = batch.units
    if rule == WORDS_ONLY:
        words = _word_units(batch)  # (B, t) each piece's word, -1 for specials and pads
        units = np.full_like(words, -1)
        for row, mapping in enumerate(common or []):
            inside = words[row] >= 0
            units[row, inside] = mapping[words[row, inside]]
    pieces = to_device(units, loaded.device)  # (B, t)
    heads = loaded.heads
    out = torch.zeros((len(encoded), loaded.layers * heads, n, n), device=loaded.device)
    wide = float64_device(loaded.device)  # the sums are float64: on MPS, the CPU's
    kept = torch.zeros(loaded.layers * heads, dtype=torch.float64, device=wide)

    def on_layer(layer: int, maps) -> None:
        merged = merge_maps(maps.float(), pieces, n)  # (B, H, n, n)
        row_sums = merged.sum(dim=-1).to(wide, torch.float64)  # (B, H, n): each row's weight before renormalising
        kept[layer * heads:(layer + 1) * heads] = row_sums.sum(dim=(0, 2))  # pads add 0
        if causal_view:
            merged = torch.tril(merged)
        if rule == WORDS_ONLY or causal_view:
            merged = merged / merged.sum(dim=-1, keepdim=True).clamp(min=torch.finfo(merged.dtype).tiny)
        out[:, layer * heads:(layer + 1) * heads] = merged

    forward_measured(loaded, batch, on_layer, measure, batch_size=batch_size)
    return out, kept


def compare(models: Sequence[LoadedModel], sentences: Iterable[str], *, names: Sequence[str] | None = None,
            measure: str = WEIGHTS, units: str = DEFAULT_UNITS, batch_size: int = DEFAULT_BATCH_SIZE,
            limit: int | None = None, progress: Callable[..., ProgressBar] | None = None,
            rows: str = ALL_ROWS) -> CompareResult:
    """Every pair of heads of two or more models, by the Jensen-Shannon divergence (nats, 0 to ln 2) between
    their word-level rows, averaged over every query word of every sentence.

    models: two or more LoadedModels (ra.load); the same model twice, or two revisions of one, is fine.
    sentences: strings, one sentence each (blank ones skipped), read twice: first only tokenized (which sentences
    every model takes, which rule), then run; a list, or a re-iterable such as CorpusLines(path); a one-shot
    iterator is read into a list. names: how the tables name each model (default: its loaded name).
    measure: "weights" or "norm"; units: the unit rule ("text" or "tokenizer"); batch_size: sentences per
    forward pass; limit: the first N sentences only; progress: a factory `progress(total=, desc=)` of a
    tqdm-like bar, made after the first pass and advanced by one per sentence (None: no bar).
    Rows: as they are when every model gives the same units for every sentence; otherwise the special tokens'
    rows and columns are dropped and each row renormalised over the words (summary["rule"] says which). A
    decoder's causal rows are compared as they are; rows="causal" cuts every encoder row to the words up to its
    query and renormalises it, so that an encoder and a decoder are compared on what both see (the weight an
    encoder puts on later words otherwise puts a floor under its distance to every decoder head). A sentence too
    long for a model (counts.skipped), or whose words two models spell differently (a character one tokenizer
    gives no piece, such as U+00AD; one RealAttentionWarning
    for all of them, counts.mismatched), is left out for every model. Raises InputError for fewer than two models,
    an item that is not a string (named by its place, blank ones counted, or by its corpus line), or no sentence
    left to compare.
    """
    from ..engine.models import LoadedModel
    from ..engine.pipeline import versions

    if not isinstance(models, (list, tuple)):
        raise InputError(f"compare takes the models as a list, not {type(models).__name__}")
    if rows not in ROWS:
        raise InputError(f"rows (--rows) must be one of {', '.join(ROWS)}, not {rows!r:.60}")
    if sentences is None or isinstance(sentences, (bytes, bytearray, int, float, dict, set, frozenset)):
        raise InputError(f"compare takes the sentences as a string or a list of strings, not "
                         f"{type(sentences).__name__}" + (" (a set has no order, a dict's keys are not its sentences)"
                                                          if isinstance(sentences, (dict, set, frozenset)) else ""))
    if names is not None and not isinstance(names, (list, tuple)):
        raise InputError(f"names must be a list of strings, one per model, not {type(names).__name__}")
    callable_or_none(progress, "progress", "a factory progress(total=, desc=) of a tqdm-like bar")
    models = list(models)
    if len(models) < 2:
        raise InputError(f"compare needs at least two models (got {len(models)}); give two or more models (--model) "
                         "(the same model twice compares it with itself)")
    for number, model in enumerate(models, start=1):
        if not isinstance(model, LoadedModel):
            raise InputError(f"compare: model {number} must be a loaded model (ra.load(...)), not "
                             f"{type(model).__name__}")
    if check_measure(measure) not in MEASURES:
        raise InputError(f"compare takes measure (--measure) weights or norm, not {measure}")
    check_rule(units)
    batch_size = whole_number(batch_size, "batch_size (--batch-size)", 1, MAX_BATCH_SIZE)  # numpy ints as int
    if limit is not None:
        limit = whole_number(limit, "limit (--limit)")
    if measure == NORM:
        from ..engine.measures import check_supported

        for model in models:
            check_supported(model, measure)
    labels = model_names(models, names)
    if isinstance(sentences, str):
        sentences = [sentences]
    else:
        try:
            one_shot = iter(sentences) is sentences
        except TypeError:
            raise InputError(f"compare takes the sentences as a string or a list of strings, not "
                             f"{type(sentences).__name__}") from None
        if one_shot:  # a one-shot iterator: read it once
            sentences = list(sentences)
    bucket = batch_size * BUCKET_BATCHES
    scan = _scan(models, labels, sentences, units, limit, bucket)
    counts, rule = scan["counts"], scan["rule"]
    rows_total = counts["words"] if rule == AS_IS else counts["common"]
    if counts["lines"] == 0:
        raise InputError("no sentences to compare: the corpus is empty or every line is blank")
    spelled = f"that the models' words spell differently (the first: {scan['first_mismatch']})"
    if counts["sentences"] == 0 or rows_total == 0:
        mismatched = f", {counts['mismatched']} {spelled}" if counts["mismatched"] else ""
        raise InputError(f"no words in common: of {counts['lines']} sentence(s), {counts['skipped']} too long for "
                         f"some model{mismatched}, none left to compare")
    if counts["mismatched"]:
        import warnings

        warnings.warn(f"compare left out {counts['mismatched']} sentence(s) {spelled}; a character that one "
                      "tokenizer gives no piece (a soft hyphen U+00AD, a zero-width joiner U+200D, a lone combining "
                      "mark) does this; summary.json counts them (counts.mismatched)", RealAttentionWarning, stacklevel=2)
    bar = None if progress is None else progress(total=counts["lines"], desc="compare")
    try:
        sums, rows_of = _stream(models, sentences, rule, measure, units, limit, batch_size, bucket, bar, rows)
    finally:
        if bar is not None:
            bar.close()
    matrix = _matrix(models, sums, rows_total)
    from .jsd import mds_fit

    given = [m.choice.name for m in models] if names is None else [n.strip() for n in names]
    if names is None:  # one model at two revisions is two models: X-vs-X is a model compared with itself
        from ..engine.naming import short_revision

        revisions = {name: {m.revision for m, other in zip(models, given) if other == name} for name in given}
        given = [f"{name}@{short_revision(m.revision)}" if len(revisions[name]) > 1 else name
                 for name, m in zip(given, models)]
    compared = tuple(ComparedModel(name=label, model=m.choice.name, revision=m.revision, layers=m.layers,
                                   heads=m.heads, causal=m.causal, given=first)
                     for label, first, m in zip(labels, given, models))
    heads = heads_frame(compared)
    coords = classical_coordinates(matrix)
    summary = {
        "models": [{"name": m.name, "model": m.model, "revision": m.revision, "layers": m.layers,
                    "heads_per_layer": m.heads, "causal": m.causal} for m in compared],
        "measure": measure,
        "units": units,
        "rule": rule,
        "rule_text": RULE_TEXT[rule],
        "rows": rows,  # "causal": every encoder row cut to the words up to its query and renormalised
        "distance": "Jensen-Shannon divergence in nats (0 to ln 2), mean over every compared query row",
        "counts": {"lines": counts["lines"], "sentences": counts["sentences"], "skipped": counts["skipped"],
                   "mismatched": counts["mismatched"], "words": rows_total,
                   "joined": counts["joined"] if rule == WORDS_ONLY else 0},
        "corpus": ({"name": sentences.path.name, "sha256": sentences.sha256}
                   if isinstance(sentences, CorpusLines) else None),
        "limit": limit,
        "mds": {"method": "classical (Torgerson) scaling of the JS matrix, deterministic signs", "dimensions": 2,
                # shown: the positive eigenvalues' share the 2 axes hold; negative: the share clipped (JS is no metric)
                **mds_fit(matrix, 2)},
        "matching": "scipy.optimize.linear_sum_assignment on the JS block of each pair of models",
        "versions": versions(),
        # a sentence's maps are padded to its batch's longest: the 6th decimal of a distance can move with it
        "batch_size": batch_size,
        "device": (str(models[0].device) if len({str(m.device) for m in models}) == 1
                   else [str(m.device) for m in models]),  # one per model when they differ (the API allows it)
    }
    return CompareResult(models=compared, matrix=matrix, distances=distances_frame(heads, matrix),
                         matching=matching_frame(compared, heads, matrix),
                         mds=heads.assign(x=coords[:, 0], y=coords[:, 1]), summary=summary,
                         corpus_path=sentences.path if isinstance(sentences, CorpusLines) else None,
                         heads=heads.assign(**{name: np.concatenate([totals[k].cpu().numpy() / rows_total
                                                                     for totals in rows_of])
                                              for k, name in enumerate(HEAD_SHARES)}))


def _clean(sentences: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(where, the text stripped) of each sentence that is not blank (nothing visible: whitespace, zero-width or
    control characters only, as a corpus file's blank lines): what both passes read. where: "line N of FILE" for
    CorpusLines (its reader checks each line), else "sentence N", N its place in the sequence, blank ones counted;
    an item that is not a string, or no sentence (engine.text.check_text), is an InputError naming it."""
    from ..engine.text import check_text, is_blank

    if isinstance(sentences, CorpusLines):
        for line, text in sentences.numbered():
            yield f"line {line} of {sentences.path}", text
        return
    for number, text in enumerate(sentences, start=1):
        if not isinstance(text, str):
            raise InputError(f"sentences: sentence {number} is {type(text).__name__}, not a string")
        text = text.strip()
        if not is_blank(text):
            yield f"sentence {number}", check_text(text, f"sentences: sentence {number}")


def _stream(models, sentences, rule: str, measure: str, units: str, limit: int | None, batch_size: int,
            bucket: int, progress, row_view: str = ALL_ROWS) -> tuple[dict[tuple[int, int], Any], list[list[Any]]]:
    """The second pass: every block's (Ha, Hb) float64 running sum of JS over the compared rows, and per model
    [kept, later]: (layers * heads,) float64 sums over the rows of the weight each kept before renormalising and
    of the weight it puts on later words (keys after the query: an encoder's, which no decoder row has)."""
    import torch

    from .jsd import Packed, block_sums

    from ..engine.models import float64_device

    cut = row_view == CAUSAL_ROWS  # every row is causal: an encoder's cut to the words up to its query
    any_causal = cut or any(m.causal for m in models)
    device = float64_device(models[0].device)  # the JS sums are float64: on MPS, the CPU
    sums: dict[tuple[int, int], Any] = {}
    rows_of: list[list[Any]] = [[0.0, 0.0] for _ in models]
    stream = itertools.islice(_clean(sentences), None if limit is None else min(limit, sys.maxsize))
    while items := list(itertools.islice(stream, bucket)):
        rows, _ = _encode_bucket(models, [text for _, text in items], units)
        pairs = [(row, aligned) for row in rows if row is not None and (aligned := _aligned(row)) is not None]
        if progress is not None and len(pairs) < len(items):  # too long for a model, or spelled differently
            progress.update(len(items) - len(pairs))
        kept = [row for row, _ in pairs]
        if rule == AS_IS:  # every model has the same words
            mappings: list = [None] * len(kept)
            sizes = [len(row[0].words) for row in kept]
        else:
            mappings, sizes = [a[0] for _, a in pairs], [a[1] for _, a in pairs]
        for indices in _batches(kept, sizes, batch_size):
            n = max(sizes[i] for i in indices)
            lengths = torch.tensor([sizes[i] for i in indices], device=device)
            positions = torch.arange(n, device=device)
            inside = positions[None, :] < lengths[:, None]  # (B, n)
            full_mask = inside[:, :, None] & inside[:, None, :]  # (B, n, n)
            lower_mask = full_mask & (positions[None, :] <= positions[:, None])[None] if any_causal else None
            packed = []
            for index, loaded in enumerate(models):
                common = None if rule == AS_IS else [mappings[i][index] for i in indices]
                maps, kept_sums = word_rows(loaded, [kept[i][index] for i in indices], rule, measure, n, common,
                                            batch_size, causal_view=cut and not loaded.causal)
                maps = maps.to(device)
                rows_of[index][0] = rows_of[index][0] + kept_sums.to(device)
                rows_of[index][1] = rows_of[index][1] + torch.triu(maps, diagonal=1).sum(dim=(0, 2, 3),
                                                                                           dtype=torch.float64)
                packed.append(Packed.of(maps, full_mask, lower_mask, loaded.causal or cut))
                del maps
            for a, b in itertools.combinations_with_replacement(range(len(models)), 2):
                block = block_sums(packed[a], packed[b], same=a == b)
                sums[(a, b)] = block if (a, b) not in sums else sums[(a, b)] + block
            if progress is not None:
                progress.update(len(indices))
    return sums, rows_of


def _matrix(models, sums, rows: int) -> np.ndarray:
    """The (N, N) float64 mean JS, symmetric, exactly 0 from a head to itself, clipped to [0, ln 2] (rounding)."""
    from .jsd import LN2

    sizes = [m.layers * m.heads for m in models]
    starts = np.cumsum([0] + sizes)
    matrix = np.zeros((starts[-1], starts[-1]))
    for (a, b), block in sums.items():
        values = block.cpu().numpy() / rows
        matrix[starts[a]:starts[a + 1], starts[b]:starts[b + 1]] = values
        matrix[starts[b]:starts[b + 1], starts[a]:starts[a + 1]] = values.T
    matrix = np.clip((matrix + matrix.T) / 2, 0.0, LN2)
    np.fill_diagonal(matrix, 0.0)
    return matrix


# --- tables --------------------------------------------------------------------------------------------------

DISTANCES_COLUMNS = ["model_a", "layer_a", "head_a", "model_b", "layer_b", "head_b", "js"]
HEAD_SHARES = ("word_share", "later_share")  # heads.csv's columns after model, layer, head
MATCHING_COLUMNS = DISTANCES_COLUMNS + ["rank", "mutual", "nearest_layer", "nearest_head", "nearest_js"]


def heads_frame(models: Sequence[ComparedModel]) -> pd.DataFrame:
    """One row per head in matrix order: model, layer, head (from 1)."""
    parts = []
    for m in models:
        layer, head = np.indices((m.layers, m.heads)).reshape(2, -1)
        parts.append(pd.DataFrame({"model": m.name, "layer": layer + 1, "head": head + 1}))
    return pd.concat(parts, ignore_index=True)


def distances_frame(heads: pd.DataFrame, matrix: np.ndarray) -> pd.DataFrame:
    """distances.csv: one row per pair of distinct heads i < j in matrix order."""
    first, second = np.triu_indices(len(heads), k=1)
    a = heads.iloc[first].reset_index(drop=True)
    b = heads.iloc[second].reset_index(drop=True)
    return pd.DataFrame({"model_a": a["model"], "layer_a": a["layer"], "head_a": a["head"],
                         "model_b": b["model"], "layer_b": b["layer"], "head_b": b["head"],
                         "js": matrix[first, second]})[DISTANCES_COLUMNS]


def matching_frame(models: Sequence[ComparedModel], heads: pd.DataFrame, matrix: np.ndarray) -> pd.DataFrame:
    """matching.csv: for each pair of models (in the order given), one row per head of the first: its partner in
    the one-to-one matching of least total JS (Hungarian; when the first model has more heads, those left without
    a partner have empty layer_b, head_b, js and rank), the partner's rank among the second model's heads by JS from
    this head (1: its nearest), whether the two are each other's nearest (mutual), and its nearest head in the
    second model (ties: the first in layer, head order)."""
    from scipy.optimize import linear_sum_assignment

    starts = np.cumsum([0] + [m.layers * m.heads for m in models])
    parts = []
    for a, b in itertools.combinations(range(len(models)), 2):
        block = matrix[starts[a]:starts[a + 1], starts[b]:starts[b + 1]]
        first = heads.iloc[starts[a]:starts[a + 1]].reset_index(drop=True)
        second = heads.iloc[starts[b]:starts[b + 1]].reset_index(drop=True)
        matched = np.full(block.shape[0], -1)
        rows, columns = linear_sum_assignment(block)
        matched[rows] = columns
        has = matched >= 0
        nearest = np.argmin(block, axis=1)
        partner_js = block[np.arange(len(block)), np.maximum(matched, 0)]
        # 1: the partner is the head's nearest; k: k - 1 heads of the second model are nearer (an assignment that
        # must give every head a partner gives some a far one: the rank says how far)
        rank = 1 + (block < partner_js[:, None]).sum(axis=1)
        # by value, not by argmin's index: a partner tied with the nearest is as near (rank 1), and mutual then too
        mutual = has & (partner_js <= block.min(axis=1)) & (partner_js <= block.min(axis=0)[np.maximum(matched, 0)])
        frame = pd.DataFrame({
            "model_a": first["model"], "layer_a": first["layer"], "head_a": first["head"],
            "model_b": models[b].name,
            "layer_b": pd.array(np.where(has, second["layer"].to_numpy()[matched], 0), dtype="Int64"),
            "head_b": pd.array(np.where(has, second["head"].to_numpy()[matched], 0), dtype="Int64"),
            "js": np.where(has, partner_js, np.nan),
            "rank": pd.array(np.where(has, rank, 0), dtype="Int64"),
            "mutual": mutual,
            "nearest_layer": second["layer"].to_numpy()[nearest],
            "nearest_head": second["head"].to_numpy()[nearest],
            "nearest_js": block[np.arange(len(block)), nearest],
        })
        frame.loc[~has, ["layer_b", "head_b", "rank"]] = pd.NA
        parts.append(frame)
    return pd.concat(parts, ignore_index=True)[MATCHING_COLUMNS]


def classical_coordinates(matrix: np.ndarray) -> np.ndarray:
    from .jsd import classical_mds

    return classical_mds(matrix, 2)


# --- files ---------------------------------------------------------------------------------------------------

MDS_FIGURE, DISTANCES_FIGURE, LAYERS_FIGURE = "mds", "distances", "layers"


def default_name(models: Sequence[ComparedModel] | Sequence[str]) -> str:
    """The models' last path parts joined by '-vs-' (e.g. all-MiniLM-L6-v2-vs-SmolLM2-135M-Instruct), each as given:
    `--model minilm --model minilm` and ra.compare(..., names=["minilm", "minilm"]) both write minilm-vs-minilm."""
    names = [(m.given or m.name) if isinstance(m, ComparedModel) else m for m in models]
    from ..engine.naming import MAX_NAME_BYTES, plain_name

    parts = [plain_name(name.rstrip("/").split("/")[-1]) for name in names]
    room = (MAX_NAME_BYTES - len("-norm") - len("-vs-") * (len(parts) - 1)) // len(parts)  # ASCII: a byte each
    if len("-vs-".join(parts)) + len("-norm") > MAX_NAME_BYTES:  # long names: each cut to its share of a folder name
        parts = [part[:max(1, room)].rstrip("-.") or "model" for part in parts]
    return "-vs-".join(parts)


def folder_name(name: str, measure: str = WEIGHTS) -> str:
    """results/compare/<folder_name>: one plain folder name, plus '-norm' for the norm measure."""
    from ..engine.measures import check_own_folder, folder_suffix
    from ..outputs.folders import plain_folder_name

    return check_own_folder(plain_folder_name(name, "name (--name)"), "name (--name)") + folder_suffix(measure)


def write_compare(result: CompareResult, out: str | Path = ".", name: str | None = None,
                  *, formats: str | tuple[str, ...] = ("png",), wait: bool = True) -> tuple[Path, Path]:
    """Write OUT/results/compare/NAME/ (distances.csv, matching.csv, mds.csv, heads.csv, summary.json) and
    OUT/figures/compare/NAME/ (mds, distances and, for two models, layers; in each format), all at once
    (staged). NAME: the models' short names joined by '-vs-' by default. -> the two folders."""
    from ..outputs.figio import save_figure
    from ..outputs.files import write_csv, write_json
    from ..outputs.formats import writer_options
    from ..outputs.staging import staged_outputs
    from .figures import distance_figure, layers_figure, mds_figure

    if not isinstance(result, CompareResult):
        raise InputError(f"write_compare takes the result of ra.compare(...), not {type(result).__name__}")
    out, formats, wait = writer_options(out, formats, wait)  # formats=(): the tables alone
    causal = result.summary.get("rows") == CAUSAL_ROWS  # its own default folder: it never replaces the all-rows run's
    folder = folder_name(default_name(result.models) + (CAUSAL_SUFFIX if causal else "") if name is None else name,
                         result.summary["measure"])
    with staged_outputs(wait=wait, inputs=[result.corpus_path] if result.corpus_path else []) as staging:
        results = staging.folder(out / "results" / "compare" / folder)
        figures = staging.folder(out / "figures" / "compare" / folder)
        write_csv(result.distances, results / "distances.csv")
        write_csv(result.matching, results / "matching.csv")
        write_csv(result.mds, results / "mds.csv")
        if result.heads is not None:
            write_csv(result.heads, results / "heads.csv")
        write_json(result.summary, results / "summary.json")
        for fmt in formats:
            save_figure(mds_figure(result), figures / f"{MDS_FIGURE}.{fmt}")
            save_figure(distance_figure(result), figures / f"{DISTANCES_FIGURE}.{fmt}")
            if len(result.models) == 2:
                save_figure(layers_figure(result), figures / f"{LAYERS_FIGURE}.{fmt}")
    return out / "results" / "compare" / folder, out / "figures" / "compare" / folder


def describe(result: CompareResult) -> str:
    """The human summary: what was compared, the rule and, per pair of models, the matching's mean JS."""
    counts = result.summary["counts"]
    skipped = f"{counts['skipped']} too long for some model skipped"
    if counts.get("mismatched"):
        skipped += f", {counts['mismatched']} spelled differently by the models' words skipped"
    lines = [f"{counts['sentences']} sentence(s), {counts['words']} rows compared; {skipped}",
             f"rows: {result.summary['rule_text']}"]
    for a, b in itertools.combinations(range(len(result.models)), 2):
        block = result.block(a, b)
        part = result.matching[(result.matching["model_a"] == result.models[a].name)
                               & (result.matching["model_b"] == result.models[b].name)]
        lines.append(f"{result.models[a].name} x {result.models[b].name}: mean JS {block.mean():.4f}, matched "
                     f"heads' mean JS {part['js'].mean():.4f} (ln 2 = {np.log(2):.4f})")
    return "\n".join(lines)

