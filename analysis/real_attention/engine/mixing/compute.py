"""Attention, norm, ALTI and value zeroing of each sentence, layer by layer and rolled, merged into its units.

Rolled maps: R^l = C^l R^{l-1}, R^1 = C^1, for ALTI and value zeroing (the residual is inside both); the head
average of the weights and of the norm maps is rolled with 0.5 A + 0.5 I, as real_attention.engine.rollout does.
Everything is merged into units by the one merge rule (real_attention.engine.words.merge_maps).

Time grows with the square of the length (value zeroing runs each layer once per piece, on every piece; ALTI's
decomposition is pieces x pieces x hidden), so a sentence of LONG_PIECES pieces or more is announced first.
"""
from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from ..errors import RealAttentionWarning
from ..extract import OutOfDeviceMemory, SentenceTooLong, encode, forward_layers, is_out_of_memory, \
    out_of_memory_as_error, pad_batch
from ..norm import NORM, NormHooks
from ..rollout import rollout
from ..words import merge_maps
from .layers import check_supported
from .pieces import piece_mixing
from .result import ALTI, ATTENTION, MIXING_MEASURES, VALUE_ZEROING_KEY, Mixing, SentenceMixing
from .value_zeroing import NEAR_ZERO

LONG_PIECES = 160  # a sentence this long takes a minute or more on a laptop's CPU (100 words: about 48 s)


def rolled(layer_maps: np.ndarray) -> np.ndarray:
    """(L, t, t) maps whose rows sum to 1 -> (L, t, t) R^l = C^l R^{l-1}, R^1 = C^1, in float64."""
    out = np.empty_like(layer_maps, dtype=np.float64)
    current = None
    for layer, current_map in enumerate(layer_maps.astype(np.float64)):
        current = current_map if current is None else current_map @ current
        out[layer] = current
    return out


def long_note(lengths: list[int], layers: int) -> str | None:
    """The line said before the work starts when a sentence has LONG_PIECES pieces or more, else None."""
    long = [(number, t) for number, t in enumerate(lengths, start=1) if t >= LONG_PIECES]
    if not long:
        return None
    number, t = max(long, key=lambda item: item[1])
    more = f" (and {len(long) - 1} more of {LONG_PIECES} pieces or more)" if len(long) > 1 else ""
    return (f"sentence {number} has {t} word pieces{more}: context mixing re-runs each of the {layers} layers "
            f"{t} times on all {t} pieces (value zeroing) and decomposes {t} x {t} contributions (ALTI), so it takes "
            "minutes (time grows with the square of the length); memory stays bounded")


def head_means(loaded, batch, measure: str):
    """(B, L, t, t) float32 head averages of the weights (ATTENTION) or of the norm-based maps (NORM)."""
    import torch

    size, t = batch.input_ids.shape
    layer_means = torch.zeros((size, loaded.layers, t, t), device=loaded.device)

    def on_layer(layer: int, piece_maps) -> None:
        layer_means[:, layer] = piece_maps.float().mean(dim=1)

    if measure == ATTENTION:
        forward_layers(loaded, batch, on_layer)
    else:
        with NormHooks(loaded) as hooks:
            forward_layers(loaded, batch, lambda layer, weights: on_layer(layer, hooks.maps(layer, weights)))
    return layer_means


def rolled_head_means(loaded, encoded, batch_size: int | None) -> list[dict[str, tuple]]:
    """Each sentence's head averages of the weights and of the norm maps, as they are and rolled, in the batches
    of `run` (batch_size sentences at a time, in order; None: all at once), whose padding gives the same float32
    bits as rollout.csv's: one {ATTENTION, NORM: ((L, t, t) layer maps, (L, t, t) rolled)} per sentence, on the
    CPU. OutOfDeviceMemory names the batch and says to lower --batch-size."""
    import torch

    size = batch_size or max(len(encoded), 1)
    per_sentence: list[dict[str, tuple]] = []
    for start in range(0, len(encoded), size):
        part = encoded[start:start + size]
        batch = pad_batch(part, loaded.tokenizer.pad_token_id or 0)
        with out_of_memory_as_error(loaded.device, size, batch):
            means = {name: head_means(loaded, batch, name) for name in (ATTENTION, NORM)}  # as rollout.csv's
            # (B, L, t, t) rolled in float64, then float32 as real_attention.engine.rollout.word_rollout merges them,
            # so these rows are rollout.csv's to the last digit
            rolled_means = {name: rollout(m).to(torch.float32) for name, m in means.items()}
        for row, sentence in enumerate(part):
            length = len(sentence.ids)
            per_sentence.append({name: (means[name][row, :, :length, :length].cpu(),
                                        rolled_means[name][row, :, :length, :length].cpu())
                                 for name in (ATTENTION, NORM)})
    return per_sentence


def compute_mixing(loaded, texts: list[str], *, units: str = "text",
                   required: list[tuple[str, ...]] | None = None, chunk: int | None = None,
                   progress: Callable | None = None, note: Callable[[str], None] | None = None,
                   batch_size: int | None = None, check_words: Callable[[list], object] | None = None) -> Mixing:
    """Attention, norm, ALTI and value zeroing of each text, layer by layer and rolled, merged into units.

    progress: a factory progress(total=, desc=) of a tqdm-like bar, one step per layer and sentence (None: no
    bar); note: told the long-sentence line (long_note) before the work starts (None: a UserWarning);
    batch_size: sentences per forward pass of the attention and norm maps (None: one pass), as `run` batches
    them; check_words: called with the encoded sentences before any work (to find the focus and sense words)."""
    import torch

    check_supported(loaded)
    encoded, too_long = encode(loaded.tokenizer, texts, loaded.max_tokens, units=units, required=required)
    if too_long:
        index, count = too_long[0]
        raise SentenceTooLong(
            f"sentence {index + 1} has {count} tokens; {loaded.choice.short} takes at most {loaded.max_tokens}")
    if check_words is not None:
        check_words(encoded)
    line = long_note([len(s.ids) for s in encoded], loaded.layers)
    if line is not None:
        if note is None:
            warnings.warn(line, RealAttentionWarning, stacklevel=2)
        else:
            note(line)
    head_maps = rolled_head_means(loaded, encoded, batch_size)
    try:
        pieces = piece_mixing(loaded, [s.ids for s in encoded], chunk=chunk, progress=progress)
    except Exception as error:
        if not is_out_of_memory(error):
            raise
        longest = max(len(s.ids) for s in encoded)
        raise OutOfDeviceMemory(
            f"the device {loaded.device} ran out of memory in the context mixing, which re-runs each layer in float64 "
            f"one sentence at a time (the longest has {longest} pieces); use shorter sentences, or load the model on "
            "the CPU (--device cpu; ra.load(..., device=\"cpu\"))"
        ) from None
    sentences, smallest, near = [], None, []
    for row, (sentence, piece) in enumerate(zip(encoded, pieces)):
        assert piece.alti is not None and piece.value_zeroing is not None and piece.raw_sums is not None
        n = len(sentence.words)
        unit = torch.from_numpy(sentence.units)[None]  # (1, t)
        layer_maps = {name: head_maps[row][name][0] for name in (ATTENTION, NORM)}
        rolled_maps = {name: head_maps[row][name][1] for name in (ATTENTION, NORM)}
        for name, array in ((ALTI, piece.alti), (VALUE_ZEROING_KEY, piece.value_zeroing)):
            layer_maps[name] = torch.from_numpy(array)
            rolled_maps[name] = torch.from_numpy(rolled(array))
        merged = {k: merge_maps(v[None], unit, n)[0].double().numpy() for k, v in layer_maps.items()}
        merged_rolled = {k: merge_maps(v[None], unit, n)[0].double().numpy() for k, v in rolled_maps.items()}
        if loaded.causal:  # exactly 0 above the diagonal, whatever the rounding
            merged = {k: np.tril(v) for k, v in merged.items()}
            merged_rolled = {k: np.tril(v) for k, v in merged_rolled.items()}
        sentences.append(SentenceMixing(sentence.text, sentence.words, tuple(int(k) for k in sentence.kinds),
                                        {k: merged[k] for k in MIXING_MEASURES},
                                        {k: merged_rolled[k] for k in MIXING_MEASURES}))
        sums = piece.raw_sums  # (L, t)
        layer, piece_index = np.unravel_index(np.argmin(sums), sums.shape)
        if smallest is None or sums[layer, piece_index] < smallest["value"]:
            smallest = {"value": float(sums[layer, piece_index]), "sentence": row + 1, "layer": int(layer) + 1,
                        "query_index": int(sentence.units[piece_index]),
                        "query": sentence.words[sentence.units[piece_index]]}
        for layer, piece_index in np.argwhere(sums < NEAR_ZERO):
            unit = int(sentence.units[piece_index])
            near.append((row + 1, int(layer) + 1, unit, sentence.words[unit]))
    return Mixing(tuple(sentences), loaded.choice.name, loaded.revision, loaded.causal,
                  smallest_raw_row_sum=smallest or {}, near_zero_rows=tuple(dict.fromkeys(near)))


def run_mixing(loaded, sentence_set, *, units: str = "text", progress: Callable | None = None,
               note: Callable[[str], None] | None = None, batch_size: int | None = None) -> Mixing:
    """compute_mixing on a run's sentences, with their focus and sense words as units (run --mixing): a sentence
    without them (or, for a decoder, with its sense word after its focus word) is a SentenceError before the
    work, as `run` would find it after."""
    from ..focus import focus_sentences, without_maps

    texts = [sentence.text for sentence in sentence_set.sentences]
    required: list[tuple[str, ...]] = [(sentence_set.focus, sentence.sense) for sentence in sentence_set.sentences]
    return compute_mixing(loaded, texts, units=units, required=required, progress=progress, note=note,
                          batch_size=batch_size,
                          check_words=lambda encoded: focus_sentences(without_maps(encoded), sentence_set,
                                                                      loaded.causal))
