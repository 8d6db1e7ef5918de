"""A sentence's whole path: model -> pieces -> words -> located focus -> head labels, as one RunResult."""
from __future__ import annotations

import platform
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from .batches import index_batches
from .focus import FocusedSentence, focus_sentences
from .heads import (FixedAccumulator, HeadReport, HeadSums, classify, focus_scores, kernel, kernel_batch,
                    report_from_scores, sentence_counts)
from .measures import WEIGHTS
from .sentences import SentenceSet
from .units import DEFAULT_UNITS
from .words import WordAttention

if TYPE_CHECKING:
    from .mixing import Mixing


@dataclass(frozen=True, eq=False)
class RunResult:
    """Everything `run` computed; tables, figures and the report are drawn from this."""

    sentence_set: SentenceSet
    # (S,) word-level maps with focus and sense located; a streamed run keeps the maps of the first K only
    # (the others' weights are None; maps_kept is K)
    sentences: tuple[FocusedSentence, ...]
    report: HeadReport
    model: str  # the model as the user named it
    revision: str  # resolved commit, or sha256 of local weights
    versions: dict[str, str]  # python, torch, transformers
    units: str = DEFAULT_UNITS  # the unit rule: "text" or "tokenizer"
    measure: str = WEIGHTS  # what the maps measure: "weights" or "norm" (real_attention.engine.measures)
    # (K,) each (layers, n, n) float32 word-level rollout of the first K sentences: those that kept their maps
    # (all S but in a streamed run, analyse(keep_maps=K)); () if not computed
    rollout: tuple[np.ndarray, ...] = ()
    causal: bool = False  # a decoder's maps: W[i, j] = 0 for j > i
    weights_note: str | None = None  # how the model's weights differ from the original (e.g. dequantised)
    device: str = "cpu"  # the torch device the model ran on
    mixing: Mixing | None = None  # real_attention.engine.mixing.Mixing of the same sentences (run --mixing); None if not

    @property
    def maps_kept(self) -> int:
        """How many of the first sentences carry their maps (every one unless analyse was given keep_maps)."""
        return next((i for i, s in enumerate(self.sentences) if s.attention.weights is None), len(self.sentences))


def versions() -> dict[str, str]:
    import torch
    import transformers

    # str(): torch's version is a TorchVersion, which would make unpickling a RunResult import torch (a drawing
    # worker gets one for the report)
    from . import VERSION

    return {"real-attention": VERSION, "python": platform.python_version(), "torch": str(torch.__version__),
            "transformers": str(transformers.__version__)}


def check_length(loaded, too_long) -> None:
    """SentenceTooLong naming the first sentence of encode's too_long list, if any."""
    from .extract import SentenceTooLong

    if too_long:
        index, count = too_long[0]
        raise SentenceTooLong(
            f"sentence {index + 1} has {count} tokens; {loaded.choice.short} takes at most {loaded.max_tokens}"
        )


def attend_with_sums(loaded, texts: list[str] | None, *, units: str = DEFAULT_UNITS,
                     required: list[tuple[str, ...]] | None = None, measure: str = WEIGHTS,
                     batch_size: int | None = None, pieces: bool = False,
                     words: list[tuple[str, ...]] | None = None
                     ) -> tuple[list[WordAttention], HeadSums, list[np.ndarray]]:
    """Batched forward passes over the texts; each layer's maps of `measure` are merged into word maps, and
    their statistics summed, by the kernel as the layer ends. -> (one WordAttention per text, pooled sums over
    all of them, each text's (layers, n, n) rollout of the same maps; real_attention.engine.rollout), in the
    order of `texts`.
    units: the unit rule; required[i]: the words that must be units of text i (real_attention.engine.extract.encode).
    batch_size: at most this many texts per forward pass, fewer when they are long, sorted by length
    (real_attention.engine.batches.length_batches: memory stays bounded); None: one pass.
    pieces: keep each text's piece labels and (layers, heads, t, t) piece maps (WordAttention.pieces,
    .piece_weights).
    words: instead of texts, each sentence as its given words (the given-words rule, extract.encode_words);
    MissingWord names a word that gets no piece.

    SentenceTooLong names the first text over the model's maximum length.
    """
    from .extract import encode, encode_words
    from .units import MissingWord

    if words is not None:
        encoded, too_long, missing = encode_words(loaded.tokenizer, words, loaded.max_tokens)
        if missing and (not too_long or missing[0][0] < too_long[0][0]):
            raise MissingWord(f"sentence {missing[0][0] + 1}: {missing[0][1]}")
    else:
        assert texts is not None
        encoded, too_long = encode(loaded.tokenizer, texts, loaded.max_tokens, units=units, required=required)
    check_length(loaded, too_long)
    attentions: dict[int, WordAttention] = {}  # text index -> its maps, filled batch by batch
    rollouts: dict[int, np.ndarray] = {}
    accumulator = FixedAccumulator(loaded.layers, loaded.heads, loaded.device)
    tokens = 0
    for indices in index_batches([len(s.ids) for s in encoded], batch_size):
        batch_attentions, batch_rollouts, batch_tokens = _attend_batch(
            loaded, [encoded[i] for i in indices], measure, pieces, accumulator, batch_size)
        tokens += batch_tokens
        for i, attention, rolled in zip(indices, batch_attentions, batch_rollouts):
            attentions[i], rollouts[i] = attention, rolled
    counts = sentence_counts([len(s.words) for s in encoded], pieces=tokens, causal=loaded.causal)
    order = range(len(encoded))
    sums = HeadSums(fixed=accumulator.result(), causal=loaded.causal, **counts)
    return [attentions[i] for i in order], sums, [rollouts[i] for i in order]


def _attend_batch(loaded, encoded, measure: str, pieces: bool, accumulator: FixedAccumulator,
                  batch_size: int | None = None):
    """One forward pass over one padded batch -> (WordAttentions, (L, n, n) rollouts, pieces run); the batch's
    exact statistics are added to `accumulator`. batch_size: the run's, named if the device runs out of memory."""
    import torch

    from .extract import pad_batch, to_device
    from .measures import forward_measured
    from .rollout import word_rollout

    batch = pad_batch(encoded, loaded.tokenizer.pad_token_id or 0)
    piece_units = to_device(batch.units, loaded.device)  # (B, t)
    kinds = to_device(batch.kinds, loaded.device)
    shared = kernel_batch(piece_units, kinds)  # what every layer's kernel shares, made once
    sizes = [len(sentence.words) for sentence in encoded]
    lengths = [len(sentence.ids) for sentence in encoded]
    weights = [np.empty((loaded.layers, loaded.heads, n, n), dtype=np.float32) for n in sizes]  # (L, H, n, n) each
    piece_maps_kept = [np.empty((loaded.layers, loaded.heads, t, t), dtype=np.float32) for t in lengths] if pieces else []
    accumulator.reserve(sizes)
    t = batch.input_ids.shape[1]
    layer_means = torch.zeros((len(sizes), loaded.layers, t, t), device=loaded.device)  # (B, L, t, t) for rollout

    def on_layer(layer: int, piece_maps) -> None:
        piece_maps = piece_maps.float()
        layer_means[:, layer] = piece_maps.mean(dim=1)
        if pieces:
            kept = piece_maps.cpu().numpy()  # (B, H, t, t)
            for row, length in enumerate(lengths):
                piece_maps_kept[row][layer] = kept[row, :, :length, :length]
        maps, layer_totals = kernel(piece_maps, shared, keep_maps=True,
                                    causal=loaded.causal)  # (B, H, n, n), (B, len(STATISTICS), H)
        maps = maps.cpu().numpy()
        for row, n in enumerate(sizes):
            weights[row][layer] = maps[row, :, :n, :n]
        accumulator.add(layer, layer_totals)

    forward_measured(loaded, batch, on_layer, measure, batch_size=batch_size)
    labels = [tuple(loaded.tokenizer.convert_ids_to_tokens(s.ids.tolist())) for s in encoded] if pieces else []
    attentions = [
        WordAttention(s.text, s.words, tuple(s.kinds), w, s.joined,
                      pieces=labels[row] if pieces else (), piece_weights=piece_maps_kept[row] if pieces else None)
        for row, (s, w) in enumerate(zip(encoded, weights))
    ]
    rolled = word_rollout(layer_means, piece_units, kinds.shape[1]).cpu().numpy()  # (B, L, n, n)
    rollouts = [np.ascontiguousarray(rolled[row, :, :n, :n]) for row, n in enumerate(sizes)]
    return attentions, rollouts, int(batch.attention_mask.sum())


def classify_words(attentions: list[WordAttention], sentence_set: SentenceSet, model: str = "", revision: str = "",
                   versions: dict[str, str] | None = None, sums: HeadSums | None = None,
                   units: str = DEFAULT_UNITS, measure: str = WEIGHTS, rollout: tuple[np.ndarray, ...] = (),
                   causal: bool = False, weights_note: str | None = None, device: str = "cpu") -> RunResult:
    """Locate the focus and sense words in word-level maps and classify every head; no model needed.

    sums: the pooled statistics of these maps if the forward pass already gave them; else computed here.
    measure: what the maps measure; rollout: their (layers, n, n) rollout per sentence, if computed.
    causal: the maps of a decoder, whose focus word must come after its sense word. device: the torch device
    the maps were computed on (recorded in the summary).
    """
    located = focus_sentences(attentions, sentence_set, causal)
    return RunResult(
        sentence_set=sentence_set,
        sentences=tuple(located),
        report=classify(located, sums, causal),
        model=model,
        revision=revision,
        versions=versions or {},
        units=units,
        measure=measure,
        rollout=tuple(rollout),
        causal=causal,
        weights_note=weights_note,
        device=device,
    )


RUN_BATCH = 32  # sentences per forward pass of a streamed run: it never holds all their maps at once


def analyse(loaded, sentence_set: SentenceSet, *, units: str = DEFAULT_UNITS, measure: str = WEIGHTS,
            batch_size: int | None = None, pieces: bool = False, keep_maps: int | None = None,
            on_sentence: Callable | None = None) -> RunResult:
    """Run the model on every sentence and classify every head by the maps of `measure`; the focus and sense
    words are units. batch_size and pieces: as in attend_with_sums.

    Streamed (keep_maps or on_sentence given): the sentences go through the model batch_size (None: RUN_BATCH) at
    a time, in order. As each batch ends, on_sentence(number from 1, FocusedSentence, its (layers, n, n)
    rollout) gets each of its sentences (to write their table rows), the focus word's scores and the pooled
    sums are kept, and the maps are dropped unless the sentence is one of the first `keep_maps` (None: every
    one). Memory then holds one batch of maps and the kept ones, whatever the number of sentences: the result's
    other sentences keep their words and positions, with weights None, and result.rollout holds the kept
    sentences' rollouts.
    """
    texts = [sentence.text for sentence in sentence_set.sentences]
    required: list[tuple[str, ...]] = [(sentence_set.focus, sentence.sense) for sentence in sentence_set.sentences]
    if keep_maps is None and on_sentence is None:
        attentions, sums, every_rollout = attend_with_sums(loaded, texts, units=units, required=required,
                                                           measure=measure, batch_size=batch_size, pieces=pieces)
        return classify_words(attentions, sentence_set, model=loaded.choice.name, revision=loaded.revision,
                              versions=versions(), sums=sums, units=units, measure=measure, rollout=tuple(every_rollout),
                              causal=loaded.causal, weights_note=loaded.choice.weights_note,
                              device=str(loaded.device))
    from .extract import encode

    encoded, too_long = encode(loaded.tokenizer, texts, loaded.max_tokens, units=units, required=required)
    check_length(loaded, too_long)  # every sentence is checked before the first forward pass
    size = batch_size or RUN_BATCH
    configured = sentence_set.sentences
    located: list[FocusedSentence] = []
    rollouts: list[np.ndarray] = []
    scores: list[dict[str, np.ndarray]] = []
    accumulator = FixedAccumulator(loaded.layers, loaded.heads, loaded.device)
    tokens = 0
    for start in range(0, len(encoded), size):
        attentions, batch_rollouts, batch_tokens = _attend_batch(
            loaded, encoded[start:start + size], measure, pieces, accumulator, size)
        tokens += batch_tokens
        part = SentenceSet(lang=sentence_set.lang, focus=sentence_set.focus, sentences=configured[start:start + size])
        focused = focus_sentences(attentions, part, loaded.causal, first=start + 1)
        scores.append(focus_scores(focused))
        for index, (sentence, rolled) in enumerate(zip(focused, batch_rollouts), start=start):
            if on_sentence is not None:
                on_sentence(index + 1, sentence, rolled)
            if keep_maps is None or index < keep_maps:
                located.append(sentence)
                rollouts.append(rolled)
            else:
                located.append(replace(sentence, attention=sentence.attention.without_maps()))
    counts = sentence_counts([len(s.words) for s in encoded], pieces=tokens, causal=loaded.causal)
    sums = HeadSums(fixed=accumulator.result(), causal=loaded.causal, **counts)
    joined = {name: np.concatenate([part[name] for part in scores]) for name in scores[0]}
    report = report_from_scores(joined, np.array([s.sense for s in located]), sums, loaded.causal)
    return RunResult(sentence_set=sentence_set, sentences=tuple(located), report=report, model=loaded.choice.name,
                     revision=loaded.revision, versions=versions(), units=units, measure=measure,
                     rollout=tuple(rollouts), causal=loaded.causal, weights_note=loaded.choice.weights_note,
                     device=str(loaded.device))
