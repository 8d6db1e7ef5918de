"""A sentence's whole path: model -> pieces -> words -> located focus -> head labels, as one RunResult."""
from __future__ import annotations

import platform
from dataclasses import dataclass, replace

import numpy as np

from .focus import FocusedSentence, focus_sentences
from .heads import (STATISTICS, HeadReport, HeadSums, classify, focus_scores, kernel, report_from_scores,
                    sentence_counts)
from .measures import WEIGHTS
from .sentences import SentenceSet
from .units import DEFAULT_UNITS
from .words import WordAttention


@dataclass(frozen=True)
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

    @property
    def maps_kept(self) -> int:
        """How many of the first sentences carry their maps (every one unless analyse was given keep_maps)."""
        return next((i for i, s in enumerate(self.sentences) if s.attention.weights is None), len(self.sentences))


def versions() -> dict[str, str]:
    import torch
    import transformers

    # str(): torch's version is a TorchVersion, which would make unpickling a RunResult import torch (a drawing
    # worker gets one for the report)
    return {"python": platform.python_version(), "torch": str(torch.__version__),
            "transformers": str(transformers.__version__)}


def encode_checked(loaded, texts: list[str], *, units: str = DEFAULT_UNITS,
                   required: list[tuple[str, ...]] | None = None) -> list:
    """Every text's pieces and units (real_attention.engine.extract.encode), before any forward pass: UnitError
    and SentenceTooLong name the first bad sentence, so a long run fails before it computes anything."""
    from .extract import SentenceTooLong, encode

    encoded, too_long = encode(loaded.tokenizer, texts, loaded.max_tokens, units=units, required=required)
    if too_long:
        index, count = too_long[0]
        raise SentenceTooLong(
            f"sentence {index + 1} has {count} tokens; {loaded.choice.short} takes at most {loaded.max_tokens}"
        )
    return encoded


def forward_words(loaded, encoded: list, *, measure: str = WEIGHTS
                  ) -> tuple[list[WordAttention], HeadSums, list[np.ndarray]]:
    """One batched forward pass over encoded sentences; each layer's maps of `measure` are merged into word maps,
    and their statistics summed, by the kernel as the layer ends. -> (one WordAttention per sentence, pooled sums
    over all of them, each sentence's (layers, n, n) rollout of the same maps; real_attention.engine.rollout)."""
    import torch

    from .extract import pad_batch
    from .measures import forward_measured
    from .rollout import word_rollout

    batch = pad_batch(encoded, loaded.tokenizer.pad_token_id or 0)
    piece_units = torch.from_numpy(batch.units).to(loaded.device)  # (B, t)
    kinds = torch.from_numpy(batch.kinds).to(loaded.device)
    sizes = [len(sentence.words) for sentence in encoded]
    weights = [np.empty((loaded.layers, loaded.heads, n, n), dtype=np.float32) for n in sizes]  # (L, H, n, n) each
    totals = np.zeros((len(STATISTICS), loaded.layers, loaded.heads))  # float64
    t = batch.input_ids.shape[1]
    layer_means = torch.zeros((len(sizes), loaded.layers, t, t), device=loaded.device)  # (B, L, t, t) for rollout

    def on_layer(layer: int, piece_maps) -> None:
        piece_maps = piece_maps.float()
        layer_means[:, layer] = piece_maps.mean(dim=1)
        maps, layer_totals = kernel(piece_maps, piece_units, kinds, keep_maps=True,
                                    causal=loaded.causal)  # (B, H, n, n), (len(STATISTICS), H)
        maps = maps.cpu().numpy()
        for row, n in enumerate(sizes):
            weights[row][layer] = maps[row, :, :n, :n]
        totals[:, layer] = layer_totals.cpu().numpy()

    forward_measured(loaded, batch, on_layer, measure)
    attentions = [WordAttention(s.text, s.words, tuple(s.kinds), w, s.joined) for s, w in zip(encoded, weights)]
    counts = sentence_counts(sizes, pieces=int(batch.attention_mask.sum()), causal=loaded.causal)
    rolled = word_rollout(layer_means, piece_units, kinds.shape[1]).cpu().numpy()  # (B, L, n, n)
    rollouts = [np.ascontiguousarray(rolled[row, :, :n, :n]) for row, n in enumerate(sizes)]
    return attentions, HeadSums(totals=totals, causal=loaded.causal, **counts), rollouts


def attend_with_sums(loaded, texts: list[str], *, units: str = DEFAULT_UNITS,
                     required: list[tuple[str, ...]] | None = None, measure: str = WEIGHTS
                     ) -> tuple[list[WordAttention], HeadSums, list[np.ndarray]]:
    """forward_words over the texts, in one batch: (one WordAttention per text, pooled sums, rollouts).
    units: the unit rule; required[i]: the words that must be units of text i (real_attention.engine.extract.encode).

    SentenceTooLong names the first text over the model's maximum length.
    """
    return forward_words(loaded, encode_checked(loaded, texts, units=units, required=required), measure=measure)


def attend_words(loaded, texts: list[str], *, units: str = DEFAULT_UNITS,
                 measure: str = WEIGHTS) -> list[WordAttention]:
    """Word-level maps of `measure` of every head for each text: (layers, heads, n, n) float32, rows sum to 1."""
    return attend_with_sums(loaded, texts, units=units, measure=measure)[0]


def classify_words(attentions: list[WordAttention], sentence_set: SentenceSet, model: str = "", revision: str = "",
                   versions: dict[str, str] | None = None, sums: HeadSums | None = None,
                   units: str = DEFAULT_UNITS, measure: str = WEIGHTS, rollout: tuple[np.ndarray, ...] = (),
                   causal: bool = False, weights_note: str | None = None) -> RunResult:
    """Locate the focus and sense words in word-level maps and classify every head; no model needed.

    sums: the pooled statistics of these maps if the forward pass already gave them; else computed here.
    measure: what the maps measure; rollout: their (layers, n, n) rollout per sentence, if computed.
    causal: the maps of a decoder, whose focus word must come after its sense word.
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
    )


RUN_BATCH = 32  # sentences per forward pass of a run: a run of many sentences never holds all their maps at once


def analyse(loaded, sentence_set: SentenceSet, *, units: str = DEFAULT_UNITS, measure: str = WEIGHTS,
            keep_maps: int | None = None, on_sentence=None, batch_size: int = RUN_BATCH) -> RunResult:
    """Run the model on every sentence and classify every head by the maps of `measure`; the focus and sense
    words are units.

    The sentences go through the model `batch_size` at a time, in order. As each batch ends, on_sentence(number
    from 1, FocusedSentence, its (layers, n, n) rollout) gets each of its sentences (to write their table rows),
    the focus word's scores and the pooled sums are kept, and the maps are dropped unless the sentence is one of
    the first `keep_maps` (None: every one). So memory holds one batch of maps and the kept ones, whatever the
    number of sentences: the result's other sentences keep their words and positions, with weights None, and
    result.rollout holds the kept sentences' rollouts.
    """
    configured = sentence_set.sentences
    texts = [sentence.text for sentence in configured]
    required = [(sentence_set.focus, sentence.sense) for sentence in configured]
    encoded = encode_checked(loaded, texts, units=units, required=required)  # every sentence checked first
    located, rollouts, scores, sums = [], [], [], None
    for start in range(0, len(encoded), batch_size):
        attentions, batch_sums, batch_rollouts = forward_words(loaded, encoded[start:start + batch_size],
                                                               measure=measure)
        part = SentenceSet(lang=sentence_set.lang, focus=sentence_set.focus,
                           sentences=configured[start:start + batch_size])
        focused = focus_sentences(attentions, part, loaded.causal, first=start + 1)
        scores.append(focus_scores(focused))
        sums = batch_sums if sums is None else sums + batch_sums
        for index, (sentence, rolled) in enumerate(zip(focused, batch_rollouts), start=start):
            if on_sentence is not None:
                on_sentence(index + 1, sentence, rolled)
            if keep_maps is None or index < keep_maps:
                located.append(sentence)
                rollouts.append(rolled)
            else:
                located.append(replace(sentence, attention=sentence.attention.without_maps()))
    joined = {name: np.concatenate([part[name] for part in scores]) for name in scores[0]}
    report = report_from_scores(joined, np.array([s.sense for s in located]), sums, loaded.causal)
    return RunResult(sentence_set=sentence_set, sentences=tuple(located), report=report, model=loaded.choice.name,
                     revision=loaded.revision, versions=versions(), units=units, measure=measure,
                     rollout=tuple(rollouts), causal=loaded.causal, weights_note=loaded.choice.weights_note)
