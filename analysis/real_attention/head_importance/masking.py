"""Head masking: ξ(l, h) multiplies head h's attention weights in layer l, so its output before the output
projection (Michel, Levy and Neubig, 2019; transformers' former `head_mask`).

The model runs with its own eager attention, wrapped: `masked_attention` is registered in transformers'
attention-function registry (and the eager mask function under the same name), and while `masking` is active the
model's config names it. It calls the model file's own `eager_attention_forward` (so every family keeps its
scaling, grouped key/value heads, soft-capping and sliding windows) and multiplies the per-head output (N, t, H, d)
and the weights (N, H, t, t) by ξ of that layer. As out = weights @ values is linear in the weights, this is
exactly "multiply the weights by ξ" (in eval mode, where dropout is the identity); with ξ = 1 the output is the
intact model's, bit for bit. ξ may be a tensor that requires grad (Taylor scores).

Families whose attention does not go through the registry (MPNet, DeBERTa compute it inline) are masked one step
later, where the definition puts ξ too: a forward pre-hook on each layer's output projection multiplies its input,
the heads' outputs side by side (N, t, H x d), head by head.
"""
from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ..engine.errors import InputError

ATTENTION_FUNCTION = "real_attention_head_mask"  # its name in transformers' attention-function registry


@dataclass
class MaskState:
    """What the wrapped attention reads during one forward pass.

    xi: (R, layers, heads) tensor, R the batch rows or 1 (broadcast); layer_of: id(attention module) -> layer
    from 0; calls: the layers masked so far (a check that every layer went through the wrapper)."""

    xi: Any
    layer_of: dict[int, int]
    layers: int
    calls: list[int] = field(default_factory=list)


_STATE: ContextVar[MaskState | None] = ContextVar("real_attention_head_mask", default=None)
_EAGER: dict[str, Any] = {}  # module name -> its eager_attention_forward


def _eager_of(module) -> Any:
    """The eager attention function of the model file that defines `module`'s class."""
    name = type(module).__module__
    if name not in _EAGER:
        found = getattr(sys.modules.get(name), "eager_attention_forward", None)
        if found is None:
            raise InputError(f"{type(module).__name__} has no eager attention function that head masking can wrap")
        _EAGER[name] = found
    return _EAGER[name]


def masked_attention(module, query, key, value, attention_mask, **kwargs):
    """The model's own eager attention, then head h's output and weights multiplied by ξ(layer, h).

    query (N, H, t, d); -> ((N, t, H, d) output, (N, H, t, t) weights), as eager_attention_forward."""
    output, weights = _eager_of(module)(module, query, key, value, attention_mask, **kwargs)
    state = _STATE.get()
    if state is None:
        return output, weights
    layer = state.layer_of.get(id(module))
    if layer is None:  # a family without a module list: the call order is the layer order
        layer = len(state.calls) % state.layers
    state.calls.append(layer)
    xi = state.xi[:, layer].to(output.dtype)  # (R, H)
    assert xi.shape[-1] == output.shape[2], (xi.shape, output.shape)
    output = output * xi[:, None, :, None]
    if weights is not None:
        weights = weights * xi[:, :, None, None].to(weights.dtype)
    return output, weights


def register() -> None:
    """Register masked_attention and the eager mask under ATTENTION_FUNCTION (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface, eager_mask

    if ATTENTION_FUNCTION not in AttentionInterface._global_mapping:
        AttentionInterface.register(ATTENTION_FUNCTION, masked_attention)
    if ATTENTION_FUNCTION not in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping:
        AttentionMaskInterface.register(ATTENTION_FUNCTION, eager_mask)


INLINE_PROJECTIONS = ("attention.attn.o", "attention.output.dense")  # MPNet, DeBERTa: the output projection


def uses_interface(base) -> bool:
    """Whether the model file's attention goes through transformers' attention-function registry."""
    return getattr(sys.modules.get(type(base).__module__), "eager_attention_forward", None) is not None


def output_projections(base, layers: int) -> list:
    """Each layer's output projection, for a model that computes its attention inline; InputError if not found."""
    found = []
    for name, module in base.named_modules():
        if name.endswith(INLINE_PROJECTIONS) and hasattr(module, "weight"):
            found.append(module)
    if len(found) != layers:
        raise InputError(f"{type(base).__name__} computes its attention outside transformers' attention interface "
                         "and has no per-layer output projection that head masking knows, so its heads cannot be "
                         "masked; use a BERT-, RoBERTa-, XLM-R-, MPNet- or Llama-, GPT-2-, Gemma-style model")
    return found


def _projection_hook(layer: int, heads: int):
    def hook(module, args):
        state = _STATE.get()
        if state is None:
            return None
        state.calls.append(layer)
        heads_out = args[0]
        shape = heads_out.shape  # (N, t, H x d)
        xi = state.xi[:, layer].to(heads_out.dtype)  # (R, H)
        scaled = (heads_out.reshape(*shape[:-1], heads, -1) * xi[:, None, :, None]).reshape(shape)
        return (scaled, *args[1:])
    return hook


def layer_map(base, layers: int) -> dict[int, int]:
    """id(attention module) -> layer from 0, for a model that names its attention modules; else {}."""
    from ..engine.anatomy import attention_modules

    modules = attention_modules(base)
    if modules is None or len(modules) != layers:
        return {}
    return {id(module): layer for layer, module in enumerate(modules)}


@contextmanager
def masking(base, xi, layers: int, layer_of: dict[int, int] | None = None) -> Iterator[MaskState]:
    """While active, forward passes of `base` (a model loaded with eager attention) multiply head h of layer l by
    xi[:, l, h]; xi (R, layers, heads), R the batch rows or 1. The config is put back afterwards, even on error.
    Yields the MaskState, whose `calls` says which layers were masked."""
    register()
    config = base.config
    before = config._attn_implementation
    if before != "eager":
        raise InputError(f"head masking needs the model loaded with eager attention, not {before!r}")
    state = MaskState(xi=xi, layer_of=layer_map(base, layers) if layer_of is None else layer_of, layers=layers)
    token = _STATE.set(state)
    handles = []
    if uses_interface(base):
        config._attn_implementation = ATTENTION_FUNCTION
    else:
        heads = int(xi.shape[-1])
        handles = [module.register_forward_pre_hook(_projection_hook(layer, heads))
                   for layer, module in enumerate(output_projections(base, layers))]
    try:
        yield state
    finally:
        for handle in handles:
            handle.remove()
        config._attn_implementation = before
        _STATE.reset(token)


def check_calls(state: MaskState, model, passes: int = 1) -> None:
    """InputError unless every layer went through the wrapper once per forward pass."""
    if sorted(state.calls) != sorted(list(range(state.layers)) * passes):
        raise InputError(f"{type(model).__name__} computes its attention outside transformers' attention interface "
                         f"(layers masked: {sorted(set(state.calls))} of {state.layers}), so its heads cannot be "
                         "masked; use a BERT-, RoBERTa-, XLM-R-, MPNet- or Llama-, GPT-2-, Gemma-style model")
