"""A sentence's whole path: model -> pieces -> words -> located focus -> head labels, as one RunResult."""
from __future__ import annotations

import platform
from dataclasses import dataclass

import numpy as np

from analysis.focus import FocusedSentence, focus_sentences
from analysis.heads import STATISTICS, HeadReport, HeadSums, classify, kernel, sentence_counts
from analysis.sentences import SentenceSet
from analysis.words import WordAttention


@dataclass(frozen=True)
class RunResult:
    """Everything `run` computed; tables, figures and the report are drawn from this."""

    sentence_set: SentenceSet
    sentences: tuple[FocusedSentence, ...]  # (S,) word-level maps with focus and sense located
    report: HeadReport
    model: str  # the model as the user named it
    revision: str  # resolved commit, or sha256 of local weights
    versions: dict[str, str]  # python, torch, transformers
    causal: bool = False  # a decoder's maps: W[i, j] = 0 for j > i
    weights_note: str | None = None  # how the model's weights differ from the original (e.g. dequantised)


def versions() -> dict[str, str]:
    import torch
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__}


def attend_with_sums(loaded, texts: list[str]) -> tuple[list[WordAttention], HeadSums]:
    """One batched forward pass over the texts; each layer is merged into word maps, and its statistics
    summed, by the kernel as the layer ends. -> (one WordAttention per text, pooled sums over all of them).

    SentenceTooLong names the first text over the model's maximum length.
    """
    import torch

    from analysis.extract import SentenceTooLong, encode, forward_layers, pad_batch

    encoded, too_long = encode(loaded.tokenizer, texts, loaded.max_tokens)
    if too_long:
        index, count = too_long[0]
        raise SentenceTooLong(
            f"sentence {index + 1} has {count} tokens; {loaded.choice.short} takes at most {loaded.max_tokens}"
        )
    batch = pad_batch(encoded, loaded.tokenizer.pad_token_id or 0)
    units = torch.from_numpy(batch.units).to(loaded.device)
    kinds = torch.from_numpy(batch.kinds).to(loaded.device)
    sizes = [len(sentence.words) for sentence in encoded]
    weights = [np.empty((loaded.layers, loaded.heads, n, n), dtype=np.float32) for n in sizes]  # (L, H, n, n) each
    totals = np.zeros((len(STATISTICS), loaded.layers, loaded.heads))  # float64

    def on_layer(layer: int, piece_maps) -> None:
        maps, layer_totals = kernel(piece_maps.float(), units, kinds, keep_maps=True,
                                    causal=loaded.causal)  # (B, H, n, n), (len(STATISTICS), H)
        maps = maps.cpu().numpy()
        for row, n in enumerate(sizes):
            weights[row][layer] = maps[row, :, :n, :n]
        totals[:, layer] = layer_totals.cpu().numpy()

    forward_layers(loaded, batch, on_layer)
    attentions = [WordAttention(s.text, s.words, tuple(s.kinds), w) for s, w in zip(encoded, weights)]
    counts = sentence_counts(sizes, pieces=int(batch.attention_mask.sum()), causal=loaded.causal)
    return attentions, HeadSums(totals=totals, causal=loaded.causal, **counts)


def attend_words(loaded, texts: list[str]) -> list[WordAttention]:
    """Word-level attention of every head for each text: (layers, heads, n, n) float32 maps, rows sum to 1."""
    return attend_with_sums(loaded, texts)[0]


def classify_words(attentions: list[WordAttention], sentence_set: SentenceSet, model: str = "", revision: str = "",
                   versions: dict[str, str] | None = None, sums: HeadSums | None = None, causal: bool = False,
                   weights_note: str | None = None) -> RunResult:
    """Locate the focus and sense words in word-level maps and classify every head; no model needed.

    sums: the pooled statistics of these maps if the forward pass already gave them; else computed here.
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
        causal=causal,
        weights_note=weights_note,
    )


def analyse(loaded, sentence_set: SentenceSet) -> RunResult:
    """Run the model on every sentence and classify every head."""
    texts = [sentence.text for sentence in sentence_set.sentences]
    attentions, sums = attend_with_sums(loaded, texts)
    return classify_words(attentions, sentence_set, model=loaded.choice.name, revision=loaded.revision,
                          versions=versions(), sums=sums, causal=loaded.causal,
                          weights_note=loaded.choice.weights_note)
