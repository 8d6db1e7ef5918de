"""Each sentence's piece-level maps, layer by layer: ALTI, value zeroing, and value zeroing per head."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .alti import alti_raw
from .layers import each_layer, scale_rows
from .value_zeroing import head_maps, layer_map


@dataclass(frozen=True)
class PieceMixing:
    """One sentence's piece-level maps (float64 numpy), each row summing to 1; None where not asked for."""

    alti: np.ndarray | None  # (layers, t, t)
    value_zeroing: np.ndarray | None  # (layers, t, t)
    heads: np.ndarray | None  # (layers, heads, t, t) per-head value zeroing
    raw_sums: np.ndarray | None  # (layers, t) value zeroing's row sums before scaling


def piece_mixing(loaded, sentences: list[np.ndarray], *, alti: bool = True, zeroing: bool = True,
                 heads: bool = False, chunk: int | None = None, progress: Callable | None = None
                 ) -> list[PieceMixing]:
    """The piece-level maps of each sentence's (t,) piece ids (no pads), layer by layer: each layer is copied in
    float64 once to the model's device (mixing_device) and re-run there for every sentence. chunk: zeroings per
    pass (None: within the memory budget); progress: a factory progress(total=, desc=) of a tqdm-like bar, one step
    per layer and sentence."""
    import torch

    count, h = len(sentences), loaded.heads
    maps: dict[str, list[list]] = {name: [[] for _ in range(count)] for name in
                                   ("alti", "value_zeroing", "heads", "raw_sums")}
    for layer, given_each in each_layer(loaded, sentences, progress):
        for s, on_host in enumerate(given_each):
            given = on_host.to(layer.device)
            reference, recorded = layer.run(given, given.hidden, record=alti)  # (1, t, hidden)
            if alti:
                maps["alti"][s].append(scale_rows(alti_raw(layer, given, h, recorded), loaded.causal)[0])
            del recorded
            if zeroing:
                scaled, sums = layer_map(layer, given, reference, h, loaded.causal, chunk)
                maps["value_zeroing"][s].append(scaled)
                maps["raw_sums"][s].append(sums)
            if heads:
                maps["heads"][s].append(head_maps(layer, given, reference, h, loaded.causal, chunk)[0])
    stacked = {name: [torch.stack(rows).cpu().numpy() if rows else None for rows in per] for name, per in maps.items()}
    return [PieceMixing(**{name: stacked[name][s] for name in stacked}) for s in range(count)]

