"""A sentence's whole path: model -> pieces -> words -> located focus -> head labels, as one RunResult."""
from __future__ import annotations

import platform
from dataclasses import dataclass

import numpy as np

from .focus import FocusedSentence, focus_sentences
from .heads import STATISTICS, HeadReport, HeadSums, classify, kernel, sentence_counts
from .measures import WEIGHTS
from .sentences import SentenceSet
from .units import DEFAULT_UNITS
from .words import WordAttention


@dataclass(frozen=True)
class RunResult:
    """Everything `run` computed; tables, figures and the report are drawn from this."""

    sentence_set: SentenceSet
    sentences: tuple[FocusedSentence, ...]  # (S,) word-level maps with focus and sense located
    report: HeadReport
    model: str  # the model as the user named it
    revision: str  # resolved commit, or sha256 of local weights
    versions: dict[str, str]  # python, torch, transformers
    units: str = DEFAULT_UNITS  # the unit rule: "text" or "tokenizer"
    measure: str = WEIGHTS  # what the maps measure: "weights" or "norm" (real_attention.engine.measures)
    rollout: tuple[np.ndarray, ...] = ()  # (S,) each (layers, n, n) float32 word-level rollout; () if not computed
    causal: bool = False  # a decoder's maps: W[i, j] = 0 for j > i
    weights_note: str | None = None  # how the model's weights differ from the original (e.g. dequantised)
    mixing: object | None = None  # real_attention.engine.mixing.Mixing of the same sentences (run --mixing); None if not


def versions() -> dict[str, str]:
    import torch
    import transformers

    # str(): torch's version is a TorchVersion, which would make unpickling a RunResult import torch (a drawing
    # worker gets one for the report)
    return {"python": platform.python_version(), "torch": str(torch.__version__),
            "transformers": str(transformers.__version__)}


def attend_with_sums(loaded, texts: list[str], *, units: str = DEFAULT_UNITS,
                     required: list[tuple[str, ...]] | None = None, measure: str = WEIGHTS
                     ) -> tuple[list[WordAttention], HeadSums, list[np.ndarray]]:
    """One batched forward pass over the texts; each layer's maps of `measure` are merged into word maps, and
    their statistics summed, by the kernel as the layer ends. -> (one WordAttention per text, pooled sums over
    all of them, each text's (layers, n, n) rollout of the same maps; real_attention.engine.rollout).
    units: the unit rule; required[i]: the words that must be units of text i (real_attention.engine.extract.encode).

    SentenceTooLong names the first text over the model's maximum length.
    """
    import torch

    from .extract import SentenceTooLong, encode, pad_batch
    from .measures import forward_measured
    from .rollout import word_rollout

    encoded, too_long = encode(loaded.tokenizer, texts, loaded.max_tokens, units=units, required=required)
    if too_long:
        index, count = too_long[0]
        raise SentenceTooLong(
            f"sentence {index + 1} has {count} tokens; {loaded.choice.short} takes at most {loaded.max_tokens}"
        )
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


def analyse(loaded, sentence_set: SentenceSet, *, units: str = DEFAULT_UNITS, measure: str = WEIGHTS) -> RunResult:
    """Run the model on every sentence and classify every head by the maps of `measure`; the focus and sense
    words are units."""
    texts = [sentence.text for sentence in sentence_set.sentences]
    required = [(sentence_set.focus, sentence.sense) for sentence in sentence_set.sentences]
    attentions, sums, rollouts = attend_with_sums(loaded, texts, units=units, required=required, measure=measure)
    return classify_words(attentions, sentence_set, model=loaded.choice.name, revision=loaded.revision,
                          versions=versions(), sums=sums, units=units, measure=measure, rollout=tuple(rollouts),
                          causal=loaded.causal, weights_note=loaded.choice.weights_note)
