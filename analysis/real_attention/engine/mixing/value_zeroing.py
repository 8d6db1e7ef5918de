"""Value zeroing (Mohebbi, Zuidema, Chrupała and Alishahi, 2023): the one owner of the measure, its name, its
texts, and its maps, per layer (run --mixing) and per head (--measure value-zeroing).

C_ij = max(0, 1 - cos(layer output of i with token j's values zeroed, layer output of i)), rows divided by their
sum; per head, only head h's view of token j's value is zeroed. The n (or heads x n) zeroings of a layer run as
one batch, in chunks that bound the memory (MEMORY_BUDGET), each chunk's value masks built as it runs.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .layers import Layer64, LayerInput, each_layer, scale_rows

from ..measure_names import VALUE_ZEROING  # noqa: E402  (--measure value-zeroing, folders <lang>-value-zeroing)
KEY = VALUE_ZEROING.replace("-", "_")  # the same name as an identifier: run --mixing's map key, mixing.csv's
# measure column and summary.json's value_zeroing_* keys (written so since they first were)
TEXT = ("Value zeroing per head: how much the layer's output for each word changes (1 - cosine) when this head "
        "alone no longer sees that word's value vector (Mohebbi et al., 2023), each row rescaled to sum to 1 "
        "(100 %).")
TITLE = "value zeroing (per head)"
DEFINITION = ("C_ij = max(0, 1 - cos(layer output of i with token j's values zeroed in every head, layer output "
              "of i)), rows divided by their sum (Mohebbi, Zuidema, Chrupala and Alishahi, 2023); rolled: "
              "R^l = C^l R^(l-1)")
SOURCE = ("Mohebbi, Zuidema, Chrupala and Alishahi (2023), Quantifying Context Mixing in Transformers, EACL; "
          "reference code github.com/hmohebbi/ValueZeroing")
MEMORY_BUDGET = 256 * 2**20  # bytes of float64 activations one chunk of zeroings may take
NEAR_ZERO = 1e-4  # a raw value-zeroing row sum below this is reported as near zero


def _chunk(t: int, heads: int, hidden: int, layer) -> int:
    """How many zeroings of a t-piece sentence one pass takes within MEMORY_BUDGET."""
    widest = max((m.out_features for m in layer.modules() if hasattr(m, "out_features")), default=4 * hidden)
    per_zeroing = 8 * t * (3 * heads * t + 8 * hidden + 3 * widest)
    return max(1, MEMORY_BUDGET // per_zeroing)


def token_keep(t: int, heads: int, per_head: bool, start: int = 0, stop: int | None = None, device="cpu"):
    """(Z, H, t) value masks on `device`, rows start .. stop - 1 of them: Z = t zeroings of token j in every head,
    or Z = H * t of token j in head h (row h * t + j)."""
    import torch

    stop = (heads * t if per_head else t) if stop is None else stop
    rows = torch.arange(start, stop, device=device)
    keep = torch.ones(stop - start, heads, t, dtype=torch.float64, device=device)
    if per_head:
        keep[rows - start, rows // t, rows % t] = 0
    else:
        keep[rows - start, :, rows] = 0
    return keep


def zeroed_scores(layer: Layer64, given: LayerInput, reference, heads: int, per_head: bool,
                  chunk: int | None = None):
    """Raw scores 1 - cos(zeroed output_i, reference_i), clipped at 0, of each zeroing of token_keep(t, heads,
    per_head) -> (Z, t): the layer runs on copies of its input at once, `chunk` at a time (None: within
    MEMORY_BUDGET)."""
    import torch

    x = given.hidden  # (1, t, hidden)
    t = x.shape[1]
    zeroings = heads * t if per_head else t
    size = chunk or _chunk(t, heads, x.shape[-1], layer.layer)
    scores = []
    one_input: dict = {}  # the input's attention, computed in the first chunk, kept for the others
    for start in range(0, zeroings, size):
        part = token_keep(t, heads, per_head, start, min(start + size, zeroings), x.device)
        out, _ = layer.run(given, x.expand(part.shape[0], -1, -1), keep=part, one_input=one_input)  # (z, t, hidden)
        scores.append(1 - torch.nn.functional.cosine_similarity(out, reference, dim=-1, eps=1e-300))
    return torch.cat(scores).clamp(min=0)  # (Z, t)


def layer_map(layer: Layer64, given: LayerInput, reference, heads: int, causal: bool, chunk: int | None = None):
    """One layer's value zeroing of one sentence -> ((t, t) rows summing to 1, (t,) raw row sums)."""
    raw = zeroed_scores(layer, given, reference, heads, False, chunk).T  # (t_i, t_j)
    return scale_rows(raw, causal)


def head_maps(layer: Layer64, given: LayerInput, reference, heads: int, causal: bool, chunk: int | None = None):
    """One layer's per-head value zeroing of one sentence -> ((H, t, t) rows summing to 1, (H, t) raw sums)."""
    t = given.hidden.shape[1]
    raw = zeroed_scores(layer, given, reference, heads, True, chunk)  # (H * t_j, t_i)
    return scale_rows(raw.reshape(heads, t, t).transpose(1, 2), causal)


def head_value_zeroing(loaded, batch, progress: Callable | None = None):
    """--measure value-zeroing: (B, layers, H, t, t) float32 per-head value zeroing of a padded Batch
    (real_attention.engine.extract.Batch), zero at the pads, on the model's device. `progress`: as each_layer's."""
    import torch

    lengths = batch.attention_mask.sum(axis=1)
    sentences = [np.asarray(ids[:n]) for ids, n in zip(batch.input_ids, lengths)]
    size, t = batch.input_ids.shape
    out = torch.zeros((size, loaded.layers, loaded.heads, t, t), dtype=torch.float32)
    for number, (layer, given_each) in enumerate(each_layer(loaded, sentences, progress)):
        for row, (on_host, n) in enumerate(zip(given_each, lengths)):
            given = on_host.to(layer.device)
            reference, _ = layer.run(given, given.hidden)  # (1, t, hidden)
            scaled, _ = head_maps(layer, given, reference, loaded.heads, loaded.causal)
            out[row, number, :, :n, :n] = scaled.to("cpu", torch.float32)
    return out.to(loaded.device)
