"""The norm-based measure (Kobayashi, Kuribayashi, Yokoi and Inui, 2020): its one owner.

N_ij = ||alpha_ij f_h(x_j)|| with f_h(x_j) = (x_j W_V^h + b_V^h) W_O^h (eq. 6, per head), x_j the layer's input
and W_O^h the head's slice of the output projection; the output bias is added once, not per token, so it is left
out. Since alpha >= 0, N_ij = alpha_ij ||f_h(x_j)||. Each row is then normalised to sum to 1 at piece level, so
the merge rule, statistics, labels, figures and report are unchanged.

f_h comes from the model's own modules: a forward hook on the value projection captures x_j W_V + b_V as the
layer runs, and the output projection's weight gives W_O^h; the layer is never re-implemented.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import ModelUnavailable
from .anatomy import attention_parts

from .measure_names import NORM  # noqa: E402, F401  (re-exported; --measure norm, folders <lang>-norm; run --mixing's "norm" map)
TEXT = ("Norm-based: each weight times the length of what that word adds, ||\u03b1 f(x)|| (Kobayashi et al., "
        "2020), each row rescaled to sum to 1 (100 %).")
TITLE = "norm-based weight \u2016\u03b1f(x)\u2016"

@dataclass(frozen=True)
class Projections:
    """One layer's value projection (hooked) and its output projection's per-head slices."""

    value: Any  # the torch module whose output holds x W_V + b_V, (B, t, kv_heads * d) at `columns`
    gram: Any  # (heads, d, d) float32 tensor W_O^h W_O^h^T, so that ||v W_O^h||^2 = v W_O^h W_O^h^T v^T
    group: int  # query heads per key/value head (grouped-query attention; 1 otherwise)
    columns: slice | None = None  # where the values are in the module's output (GPT-2's c_attn gives q, k, v)


def _fused(module, heads: int) -> Projections | None:
    """GPT-2-style attention: one Conv1D `c_attn` gives queries, keys and values side by side (the values are
    its last third), and the Conv1D `c_proj` is the output projection, its weight stored (in, out)."""
    qkv, output = getattr(module, "c_attn", None), getattr(module, "c_proj", None)
    if qkv is None or output is None or getattr(module, "is_cross_attention", False):
        return None
    hidden = output.weight.shape[0]  # Conv1D: (in = heads * d, out = hidden)
    d = hidden // heads
    if qkv.weight.shape[1] != 3 * hidden or d * heads != hidden:
        return None
    per_head = output.weight.detach().cpu().reshape(heads, d, output.weight.shape[1]).double()  # (heads, d, hidden)
    gram = (per_head @ per_head.transpose(1, 2)).float()
    return Projections(value=qkv, gram=gram, group=1, columns=slice(2 * hidden, 3 * hidden))


def projections(model, heads: int) -> list[Projections]:
    """Every layer's value and output projections (real_attention.engine.anatomy finds them)."""
    parts = attention_parts(model)
    layers = getattr(getattr(model, "config", None), "num_hidden_layers", None)
    if parts is None or (layers is not None and len(parts) != layers):
        # MPNet and DeBERTa name no attention module; ALBERT shares one across its layers
        why = ("gives its maps only through output_attentions" if parts is None
               else "shares one attention module across its layers")
        raise ModelUnavailable(f"measure (--measure) norm needs one attention module per layer with a value and an output "
                               f"projection; {type(model).__name__} {why}. Use measure (--measure) weights")
    found = []
    for part in parts:
        module, value, output = part.attention, part.value, part.output
        fused = _fused(module, heads)
        if fused is not None:
            found.append(fused)
            continue
        if value is None or output is None or not hasattr(output, "weight"):
            raise ModelUnavailable(f"{type(module).__name__} has no value or output projection that measure "
                                   "(--measure) norm knows (BERT's value and output.dense, v_proj and o_proj, or "
                                   "GPT-2's c_attn and c_proj)")
        weight = output.weight  # (hidden, heads * d): torch's Linear stores W_O transposed
        d = weight.shape[1] // heads
        kv_heads = value.weight.shape[0] // d
        if not (d * heads == weight.shape[1] and kv_heads * d == value.weight.shape[0] and heads % kv_heads == 0):
            raise ModelUnavailable(f"{type(module).__name__}: its value and output projections do not split into "
                                   f"{heads} heads, so measure (--measure) norm cannot take them apart")
        # (heads, d, hidden): W_O^h, in float64 on the CPU (MPS has no float64)
        per_head = weight.detach().cpu().T.reshape(heads, d, weight.shape[0]).double()
        gram = (per_head @ per_head.transpose(1, 2)).float()  # (heads, d, d), in float64 then rounded once
        found.append(Projections(value=value, gram=gram, group=heads // kv_heads))
    return found


def value_norms(values, layer: Projections):
    """(B, t, kv_heads * d) values x W_V + b_V -> (B, heads, t) ||f_h(x_j)|| = ||v_j^h W_O^h||.

    Through the Gram matrix: ||v W_O^h||^2 = v (W_O^h W_O^h^T) v^T, a d x d product instead of d x hidden.
    """
    import torch

    heads, d, _ = layer.gram.shape
    batch, t, _ = values.shape
    per_head = values.reshape(batch, t, heads // layer.group, d).transpose(1, 2)  # (B, kv_heads, t, d)
    per_head = per_head.repeat_interleave(layer.group, dim=1)  # (B, heads, t, d): query heads share kv heads
    squared = (torch.matmul(per_head, layer.gram.to(values.device)) * per_head).sum(dim=-1)  # (B, heads, t)
    return squared.clamp(min=0).sqrt()


def norm_maps(weights, norms):
    """(B, H, t, t) alpha and (B, H, t) ||f|| of each key -> (B, H, t, t) N = alpha ||f||, rows summing to 1.

    A row whose every key adds nothing (all N = 0) stays all zero."""
    norm = weights * norms[:, :, None, :]  # (B, H, t, t), the one new map
    total = norm.sum(dim=-1, keepdim=True)  # (B, H, t, 1)
    return norm.div_(total.clamp_(min=1e-30))


class NormHooks:
    """The norm-based maps as each layer ends: use it as a context manager around the forward pass. It hooks every
    layer's value projection; `maps(layer, weights)` then turns that layer's (B, H, t, t) post-softmax weights
    into norm-based maps."""

    def __init__(self, loaded):
        self.layers = projections(loaded.model, loaded.heads)
        self.values: dict[int, Any] = {}
        self._handles: list = []

    def __enter__(self) -> NormHooks:
        def hook(layer: int):
            columns = self.layers[layer].columns

            def call(module, args, output):
                self.values[layer] = output if columns is None else output[..., columns]
            return call

        self._handles = [p.value.register_forward_hook(hook(i)) for i, p in enumerate(self.layers)]
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles, self.values = [], {}

    def maps(self, layer: int, weights):
        """(B, H, t, t) post-softmax weights of `layer` -> (B, H, t, t) norm-based maps."""
        values = self.values.pop(layer)
        return norm_maps(weights.float(), value_norms(values.float(), self.layers[layer]))
