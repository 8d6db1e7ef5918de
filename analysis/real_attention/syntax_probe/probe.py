"""The syntax probe's data flow: treebank -> given-words encoding -> length-sorted batches -> one forward pass ->
word maps of each layer as it ends -> predictions -> exact counts -> tables, examples and files.

    read_treebank (checked TreeSentences) -> extract.encode_words (units: the treebank's words + specials)
    -> engine.batches.length_batches -> extract.pad_batch -> measures.forward_measured -> words.merge_maps
    (word maps without the specials) -> scoring.predict -> SyntaxCounts -> heads.csv, best.csv, baselines.csv,
    summary.json and the figures.

Memory holds one bucket of sentences and one layer's maps of one batch, whatever the treebank's size.
"""
from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pandas as pd

from ..engine.batches import MAX_BATCH_SIZE
from ..engine.checks import flag, path_arg, whole_number
from ..engine.errors import InputError
from ..engine.measures import WEIGHTS, check_measure
from .scoring import (
    DEFAULT_MIN_COUNT,
    DIRECTIONS,
    GoldBatch,
    SyntaxCounts,
    baselines_frame,
    best_frame,
    heads_frame,
)
from ..engine.hashing import file_sha256
from .treebank import TreeSentence, check_treebank, read_treebank

if TYPE_CHECKING:
    from ..engine.models import LoadedModel
    from ..engine.progress import Progress

DEFAULT_BATCH_SIZE = 32
KEEP_SENTENCES = 20_000  # a checked treebank of at most this many sentences is kept in memory (a few MB)
EXAMPLE_RELATIONS = ("det", "nsubj", "obj")  # each gets a figure of EXAMPLES sentences for its best head
EXAMPLES = 2
EXAMPLE_WORDS = (6, 14)  # an example sentence has this many words at least and at most (readable arcs)

RELATIONS_BASIC = "the DEPREL before ':' (obl:tmod is obl), nmod:poss as poss"
RELATIONS_SUBTYPES = "the whole DEPREL, subtypes apart (acl:relcl is not acl), nmod:poss as poss"
SUBTYPES_SUFFIX = "-subtypes"  # the default folder of a --subtypes run: NAME-subtypes


@dataclass(frozen=True)
class Treebank:
    """A checked treebank file: every sentence read once (up to the limit), before any model work."""

    path: Path
    sha256: str  # of the whole file, every byte
    sentences: int  # sentences the run will read (the first `limit`, if given)
    limit: int | None
    # The sentences themselves when there are at most KEEP_SENTENCES (a treebank's dev or test split): the run
    # then scores them without reading the file again. A bigger treebank is read again, as a stream, so memory
    # stays flat whatever its size.
    kept: tuple[TreeSentence, ...] | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.path.name


def scan_treebank(path: str | Path, limit: int | None = None) -> Treebank:
    """Check the treebank (every sentence up to `limit`) and count its sentences; TreebankError names the file
    and line of a problem, InputError a bad limit."""
    if limit is not None:
        limit = whole_number(limit, "limit (--limit)")  # numpy ints as int: the summary is JSON
    path = check_treebank(path)
    kept: list[TreeSentence] | None = []
    count = 0
    for sentence in read_treebank(path, limit):
        count += 1
        if kept is not None:
            kept.append(sentence)
            if len(kept) > KEEP_SENTENCES:
                kept = None
    return Treebank(path=path, sha256=file_sha256(path), sentences=count, limit=limit,
                    kept=None if kept is None else tuple(kept))


def check_options(batch_size: int, min_count: int) -> tuple[int, int]:
    """InputError naming a bad option; -> the two as Python ints (numpy ones are taken: the summary is JSON)."""
    return (whole_number(batch_size, "batch_size (--batch-size)", 1, MAX_BATCH_SIZE),
            whole_number(min_count, "min_count (--min-count)"))


@dataclass(frozen=True)
class Example:
    """One sentence with the predictions of one relation's best head, for examples_<relation>.png."""

    relation: str
    layer: int  # counted from 1
    head: int  # counted from 1
    direction: str  # one of scoring.DIRECTIONS
    words: tuple[str, ...]  # (W,)
    gold: tuple[int, ...]  # (W,) 0-based gold head, -1 for the root
    predicted: tuple[int, ...]  # (W,) 0-based predicted head
    relations: tuple[str, ...]  # (W,)


@dataclass(frozen=True, eq=False)
class SyntaxResult:
    """What `ra.syntax` computed: the tables as DataFrames, the summary and the example sentences."""

    heads: pd.DataFrame  # heads.csv: relation, direction, layer, head, correct, total, accuracy
    best: pd.DataFrame  # best.csv: relation, total, layer, head, direction, accuracy (and its interval), ties, baseline_*
    baselines: pd.DataFrame  # baselines.csv: relation, offset, correct, total, accuracy
    summary: dict[str, Any]  # summary.json
    examples: tuple[Example, ...]  # up to EXAMPLES sentences for each of EXAMPLE_RELATIONS that best.csv reports
    treebank_path: Path | None = field(default=None, repr=False)  # what was read: write_syntax never replaces it

    def __repr__(self) -> str:
        counts = self.summary["counts"]
        return (f"<SyntaxResult: {self.summary['model']} on {self.summary['treebank']['name']}, "
                f"{counts['sentences']} sentences, {counts['words']} words, {len(self.best)} relations reported>")


def word_units(batch) -> np.ndarray:
    """(B, t) each piece's word among the sentence's words (0-based), -1 for special tokens and pads."""
    from ..engine.words import PUNCT, WORD

    is_word = np.isin(batch.kinds, (WORD, PUNCT))  # (B, n)
    word_of_unit = np.where(is_word, np.cumsum(is_word, axis=1) - 1, -1)  # (B, n)
    pieces = np.take_along_axis(word_of_unit, np.maximum(batch.units, 0), axis=1)  # (B, t)
    return np.where(batch.units >= 0, pieces, -1)


def _is_example(sentence: TreeSentence, relation: str) -> bool:
    low, high = EXAMPLE_WORDS
    return low <= len(sentence.words) <= high and relation in sentence.relations


class PreparedBucket(NamedTuple):
    """One bucket of treebank sentences, encoded and cut into padded batches (by the background reader)."""

    left_out: tuple[int, int]  # sentences over the model's maximum length, and with a word of no piece
    kept: list[TreeSentence]  # the bucket's sentences that run, in file order
    # each batch: its sentences' trees, the padded batch, and (B, t) each piece's word (word_units)
    batches: list[tuple[list[TreeSentence], Any, np.ndarray]]


def prepared_buckets(loaded, sentences: Iterable[TreeSentence], batch_size: int) -> Iterator[PreparedBucket]:
    """Read, encode by the given-words rule, sort into length batches and pad, one bucket at a time: what can run
    ahead of the model (the counts grow their relations as they meet them, so the gold trees stay with it)."""
    from ..engine.batches import length_batches
    from ..engine.extract import encode_words, pad_batch
    from ..statistics.streaming import BUCKET_BATCHES

    pad_id = loaded.tokenizer.pad_token_id or 0
    stream = iter(sentences)
    while bucket := list(itertools.islice(stream, batch_size * BUCKET_BATCHES)):
        encoded, too_long, missing = encode_words(loaded.tokenizer, [s.words for s in bucket], loaded.max_tokens)
        left_out = {i for i, _ in too_long} | {i for i, _ in missing}
        kept = [s for i, s in enumerate(bucket) if i not in left_out]
        tree_of = {id(e): s for e, s in zip(encoded, kept)}
        batches = []
        for batch_sentences in length_batches(encoded, batch_size):
            batch = pad_batch(batch_sentences, pad_id)
            batches.append(([tree_of[id(e)] for e in batch_sentences], batch, word_units(batch)))
        yield PreparedBucket((len(too_long), len(missing)), kept, batches)


def syntax_counts(loaded, sentences: Iterable[TreeSentence], batch_size: int = DEFAULT_BATCH_SIZE,
                  measure: str = WEIGHTS, progress: Progress | None = None) -> tuple[SyntaxCounts, dict[str, list[TreeSentence]]]:
    """Stream the sentences through the model in length-sorted batches and count every head's correct
    predictions. -> (the counts, the first EXAMPLES candidate sentences of each EXAMPLE_RELATIONS, in file
    order). `progress`: tqdm's update(n), one per sentence. The next bucket is read, encoded and padded in a
    background thread while the model runs this one (statistics.streaming.read_ahead)."""
    import torch

    from ..engine.extract import to_device
    from ..engine.measures import forward_measured
    from ..engine.words import assignment, merge_maps
    from ..statistics.streaming import layers_at_once, read_ahead
    from .scoring import predict

    counts = SyntaxCounts(loaded.layers, loaded.heads)
    correct = torch.zeros((len(DIRECTIONS), loaded.layers, loaded.heads, 0), dtype=torch.int64,
                          device=loaded.device)  # (2, L, H, R) exact counts on the model's device
    candidates: dict[str, list[TreeSentence]] = {relation: [] for relation in EXAMPLE_RELATIONS}
    device = torch.device(loaded.device)
    together = layers_at_once(device)
    for bucket in read_ahead(prepared_buckets(loaded, sentences, batch_size)):
        too_long, missing = bucket.left_out
        counts.skipped += too_long
        counts.no_piece += missing
        if progress is not None and (too_long or missing):
            progress.update(too_long + missing)
        for relation, found in candidates.items():
            found += [s for s in bucket.kept if _is_example(s, relation)][:EXAMPLES - len(found)]
        for trees, batch, units in bucket.batches:
            gold = GoldBatch.of(trees, counts.relation_ids)
            counts.add_gold(gold)
            pieces = to_device(units, device)  # (B, t)
            lengths = to_device(gold.lengths, device)
            words = int(gold.lengths.max())
            gold_tensors = gold.tensors(device)
            matrices = assignment(pieces, words, torch.float32)  # the merge's, once for every layer

            waiting: list = []  # together: the maps of the layers run so far

            def on_layer(layer: int, maps, pieces=pieces, words=words, gold=gold_tensors, lengths=lengths,
                         matrices=matrices, waiting=waiting) -> None:
                # the counts stay on the device. The CPU: as each layer ends (its maps die with it); a GPU: every
                # layer at once after the last (statistics.streaming.layers_at_once: one set of launches a batch)
                nonlocal correct
                if together:
                    waiting.append(maps)
                    if layer < loaded.layers - 1:
                        return
                    maps = torch.cat(waiting, dim=1)  # (B, L * H, t, t)
                    waiting.clear()
                word_maps = merge_maps(maps.float(), pieces, words, matrices)  # (B, H, W, W) without the specials
                predictions = predict(word_maps, lengths, scratch=True)
                correct = (counts.add_layers_on_device(gold, predictions, correct) if together else
                           counts.add_layer_on_device(layer, gold, predictions, correct))

            forward_measured(loaded, batch, on_layer, measure, batch_size=batch_size)
            if progress is not None:
                progress.update(len(trees))
    counts.take_device_counts(correct)  # the only copy of the counts to the host
    return counts, candidates


def predict_cpu(word_maps, lengths) -> np.ndarray:
    from .scoring import predict

    return predict(word_maps, lengths).cpu().numpy()


def examples(loaded, best: pd.DataFrame, candidates: dict[str, list[TreeSentence]], measure: str) -> tuple[Example, ...]:
    """The predictions of each example relation's best head on its candidate sentences (one small forward pass)."""
    import torch

    from ..engine.pipeline import attend_with_sums
    from ..engine.words import SPECIAL_KINDS

    chosen = [(relation, s) for relation, found in candidates.items() if relation in set(best["relation"])
              for s in found]
    if not chosen:
        return ()
    attentions = attend_with_sums(loaded, None, words=[s.words for _, s in chosen], measure=measure)[0]
    rows = best.set_index("relation")
    result = []
    for (relation, sentence), attention in zip(chosen, attentions):
        row = rows.loc[relation]
        keep = ~np.isin(np.array(attention.kinds), SPECIAL_KINDS)
        head_map = attention.checked_weights()[row["layer"] - 1, row["head"] - 1][np.ix_(keep, keep)]  # (W, W)
        maps = torch.from_numpy(np.ascontiguousarray(head_map))[None, None]  # (1, 1, W, W)
        predicted = predict_cpu(maps, torch.tensor([len(sentence.words)]))[DIRECTIONS.index(row["direction"]), 0, 0]
        result.append(Example(relation, int(row["layer"]), int(row["head"]), row["direction"], sentence.words,
                              tuple(sentence.heads.tolist()), tuple(predicted.tolist()), sentence.relations))
    return tuple(result)


def syntax(model: LoadedModel, treebank: str | Path | Treebank, *, measure: str = WEIGHTS, min_count: int = DEFAULT_MIN_COUNT,
           limit: int | None = None, batch_size: int = DEFAULT_BATCH_SIZE, progress: Progress | None = None,
           subtypes: bool = False) -> SyntaxResult:
    """Which head best predicts each dependency relation of a CoNLL-U treebank, against fixed-offset baselines.

    model: a LoadedModel (ra.load). treebank: a .conllu file (or scan_treebank's record of one). Each sentence's
    units are its words plus the special tokens (the given-words rule); sentences longer than the model takes are
    skipped and counted, never cut. measure: "weights", "norm" or "value-zeroing". min_count: the fewest words of a relation that
    best.csv reports. limit: the first N sentences only. progress: tqdm's update(n), one per sentence.
    subtypes: score UD's relation subtypes apart (acl:relcl, nmod:unmarked, compound:prt), not merged into the
    relation before ':' (nmod:poss is Clark's poss either way).
    Returns a SyntaxResult; raises TreebankError (naming the file and line) or InputError.
    """
    from ..engine.pipeline import versions

    from ..engine.checks import loaded_model

    loaded_model(model, "syntax")
    if not isinstance(treebank, Treebank):
        path_arg(treebank, "treebank")
    check_measure(measure)
    batch_size, min_count = check_options(batch_size, min_count)
    subtypes = flag(subtypes, "subtypes")
    if progress is not None and not callable(getattr(progress, "update", None)):  # it failed after the first batch
        raise InputError(f"progress must be a tqdm-like bar with update(n), or None, not {type(progress).__name__}")
    if not isinstance(treebank, Treebank):
        treebank = scan_treebank(treebank, limit)
    elif limit is not None and limit != treebank.limit:
        raise InputError(f"the treebank was scanned with limit {treebank.limit}, not {limit}")
    if measure != WEIGHTS:
        from ..engine.measures import check_supported

        check_supported(model, measure)
    sentences = treebank.kept if treebank.kept is not None else read_treebank(treebank.path, treebank.limit)
    if subtypes:
        sentences = (sentence.with_subtypes() for sentence in sentences)
    counts, candidates = syntax_counts(model, sentences, batch_size, measure, progress)
    if counts.sentences == 0:
        raise InputError(f"{treebank.path}: no sentence to score: {counts.skipped} too long for "
                         f"{model.choice.short} (at most {model.max_tokens} tokens), {counts.no_piece} with a word "
                         "the tokenizer gives no piece")
    best = best_frame(counts, min_count)
    summary = {
        "model": model.choice.name,
        "revision": model.revision,
        "treebank": {"name": treebank.name, "sha256": treebank.sha256},
        "limit": treebank.limit,
        "counts": {"sentences": counts.sentences, "words": counts.words, "skipped": counts.skipped,
                   "no_piece": counts.no_piece},
        "skipped": counts.skipped + counts.no_piece,
        "min_count": min_count,
        "relations": RELATIONS_SUBTYPES if subtypes else RELATIONS_BASIC,
        "measure": measure,
        "layers": model.layers,
        "heads_per_layer": model.heads,
        "causal": model.causal,
        "versions": versions(),
        "device": str(model.device),  # the torch device the model ran on (--device auto resolved)
        "batch_size": batch_size,  # the maps' last float32 bits depend on the batch: a near-tie may flip a count
    }
    return SyntaxResult(heads=heads_frame(counts), best=best, baselines=baselines_frame(counts), summary=summary,
                        examples=examples(model, best, candidates, measure), treebank_path=treebank.path)


# --- files ---------------------------------------------------------------------------------------------------

BEST_FIGURE, RELATIONS_FIGURE = "best", "relations"


def folder_name(name: str, measure: str = WEIGHTS) -> str:
    """results/syntax/<folder_name>: one plain folder name, plus '-norm' for the norm measure."""
    from ..engine.measures import check_own_folder, folder_suffix
    from ..outputs.staging import plain_folder_name

    return check_own_folder(plain_folder_name(name, "name (--name)"), "name (--name)") + folder_suffix(measure)


def output_name(name: str | None, treebank: str | Path, measure: str, subtypes: bool = False) -> str:
    """The folder name of `syntax`: --name if given, else the treebank's stem (with -subtypes for --subtypes, so
    that it never replaces the basic run's); InputError if it cannot be one, saying where a default came from (the
    user named a file, not --name)."""
    if name is not None:
        folder_name(name, measure)
        return name
    check_treebank(treebank)  # "." is a folder, not a treebank whose name is ''
    name = default_name(treebank) + (SUBTYPES_SUFFIX if subtypes else "")
    try:
        folder_name(name, measure)
    except InputError as error:
        raise InputError(f"the name taken from {Path(treebank).name!r} cannot be a folder name ({error}); pass "
                         "--name NAME") from None
    return name


def default_name(treebank: str | Path | Treebank) -> str:
    """The treebank file's stem: en_ewt-ud-dev for en_ewt-ud-dev.conllu."""
    return (treebank.path if isinstance(treebank, Treebank) else Path(treebank)).stem


def write_syntax(result: SyntaxResult, out: str | Path = ".", name: str | None = None,
                 *, formats: str | tuple[str, ...] = ("png",), wait: bool = True) -> tuple[Path, Path]:
    """Write OUT/results/syntax/NAME/ (heads.csv, best.csv, baselines.csv, summary.json) and
    OUT/figures/syntax/NAME/ (best, relations and examples_<relation> figures in each format), all at once
    (staged). NAME: the treebank's stem by default ('-norm' added for the norm measure). wait=False: an error
    instead of waiting when another run writes the same folders. -> the two folders."""
    from ..outputs.figio import save_figure
    from ..outputs.formats import writer_options
    from ..outputs.staging import staged_outputs
    from ..outputs.files import write_csv, write_json
    from .figures import best_figure, example_figure, relations_figure

    if not isinstance(result, SyntaxResult):
        raise InputError(f"write_syntax takes what ra.syntax returns, not {type(result).__name__}")
    out, formats, wait = writer_options(out, formats, wait)
    subtypes = result.summary.get("relations") == RELATIONS_SUBTYPES
    folder = folder_name(Path(result.summary["treebank"]["name"]).stem + (SUBTYPES_SUFFIX if subtypes else "")
                         if name is None else name, result.summary["measure"])
    title = f"{Path(result.summary['model']).name} on {result.summary['treebank']['name']}"
    with staged_outputs(wait=wait, inputs=[result.treebank_path] if result.treebank_path else []) as staging:
        results = staging.folder(out / "results" / "syntax" / folder)
        figures = staging.folder(out / "figures" / "syntax" / folder)
        write_csv(result.heads, results / "heads.csv")
        write_csv(result.best, results / "best.csv")
        write_csv(result.baselines, results / "baselines.csv")
        write_json(result.summary, results / "summary.json")
        for fmt in formats:
            save_figure(best_figure(result.best, title, result.summary["measure"]), figures / f"{BEST_FIGURE}.{fmt}")
            save_figure(relations_figure(result.heads, result.best, title), figures / f"{RELATIONS_FIGURE}.{fmt}")
            for relation in EXAMPLE_RELATIONS:
                chosen = [e for e in result.examples if e.relation == relation]
                if chosen:
                    save_figure(example_figure(chosen, title), figures / f"examples_{relation}.{fmt}")
    return out / "results" / "syntax" / folder, out / "figures" / "syntax" / folder


def describe(result: SyntaxResult) -> str:
    """The human summary: counts and the best table."""
    counts = result.summary["counts"]
    lines = [f"{counts['sentences']} sentence(s), {counts['words']} words; {counts['skipped']} too long skipped"
             + (f", {counts['no_piece']} with a word without pieces skipped" if counts["no_piece"] else "")]
    for row in result.best.itertuples(index=False):
        lines.append(f"{row.relation:<10} {row.total:>6}  L{row.layer}H{row.head} {row.direction:<9} "
                     f"{100 * row.accuracy:5.1f}%   baseline {row.baseline_offset:+d}: {100 * row.baseline_accuracy:5.1f}%")
    shown = {example.relation for example in result.examples}
    totals = result.heads.drop_duplicates("relation").set_index("relation")["total"]
    for relation in EXAMPLE_RELATIONS:  # say why a figure the help names is not there
        if relation in shown:
            continue
        if relation not in totals.index:
            why = "no word of the sentences scored has it"
        elif relation not in set(result.best["relation"]):
            why = (f"{totals[relation]} word(s) have it, fewer than min_count (--min-count) "
                   f"{result.summary['min_count']}")
        else:
            why = f"no sentence scored of {EXAMPLE_WORDS[0]} to {EXAMPLE_WORDS[1]} words has it"
        lines.append(f"no examples_{relation} figure: {why}")
    return "\n".join(lines)
