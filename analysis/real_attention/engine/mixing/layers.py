"""Re-running a model's layers one by one in float64 on the model's device, on the inputs the model itself gave them.

- the model runs once per sentence in its own dtype; a pre-hook keeps each layer's input (and the masks and
  position embeddings the model hands it) on the host in float64: `layer_inputs`;
- each layer is then copied in float64 to the device that re-runs it (`mixing_device`: the model's own, or the
  CPU where the device has no float64, as Apple's MPS) and re-run there one sentence at a time, the sentence's
  input moved there as it is used (`Layer64`, `LayerInput.to`), its attention computed by
  `mixing_attention` (registered with transformers' attention-function registry), which expands the values to one
  per query head (grouped-query attention), may zero some of them, and records the weights and the values it used.

ALTI (real_attention.engine.mixing.alti) decomposes a recorded re-run; value zeroing
(real_attention.engine.mixing.value_zeroing) re-runs with some values zeroed.
"""
from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import InputError
from ..models import float64_device
from ..anatomy import attention_parts

ATTENTION_FUNCTION = "real_attention_mixing"  # its name in transformers' attention-function registry


def _unsupported(loaded, why: str) -> InputError:
    """The error for a model whose layers cannot be re-run; it names the norm measure only where that works. (It
    names what the user asked for, not an argument: ra.mixing, ra.attend and `run` reach it by different ones.)"""
    from ..errors import ModelUnavailable
    from ..norm import projections

    try:
        projections(loaded.model, loaded.heads)
        instead = "the weights and norm measures work"
    except ModelUnavailable:
        instead = "the weights measure works"
    return InputError(f"context mixing and the value-zeroing measure re-run each layer, so they need one attention "
                      f"module per layer inside one layer module; {type(loaded.model).__name__} {why}. Only "
                      f"{instead} with it, without context mixing")


@dataclass(frozen=True)
class Block:
    """Where one layer's parts are, as dotted names inside its layer module (so a copy finds them too)."""

    layer: Any  # the layer module, re-run for value zeroing
    attention: str  # the module that calls the attention function
    output: str  # the output projection: a Linear (out, in) or GPT-2's Conv1D (in, out)
    after: str | None  # post: the LayerNorm over residual + attention (BERT); sandwich: the norm on the attention
    # output alone (Gemma 2); None for a pre-LN block
    kind: str  # "post", "pre" or "sandwich"


def blocks(loaded) -> list[Block]:
    """Every layer's Block; InputError for a model whose layers cannot be re-run one by one (MPNet, DeBERTa:
    no attention module is named; ALBERT: one module shared by every layer)."""
    model = loaded.model
    records = getattr(model, "_can_record_outputs", None) or {}
    spec = records.get("hidden_states")
    layer_class = getattr(spec, "target_class", spec)
    parts = attention_parts(model)
    if parts is None or not isinstance(layer_class, type):
        raise _unsupported(loaded, "gives its maps only through output_attentions")
    layers: list[Any] = [module for module in model.modules() if isinstance(module, layer_class)]
    if len(layers) != loaded.layers or len(parts) != loaded.layers:
        raise _unsupported(loaded, "shares one attention module across its layers")
    found = []
    for layer, part in zip(layers, parts):
        names = {id(m): name for name, m in layer.named_modules()}
        if id(part.attention) not in names or (part.output is not None and id(part.output) not in names):
            raise _unsupported(loaded, "has an attention module outside its layer module")
        attention = names[id(part.attention)]
        output = None if part.output is None else names[id(part.output)]
        after, kind = None, "pre"
        if part.beside is not None:  # BERT: attention.output.dense, then attention.output.LayerNorm
            if not hasattr(part.beside, "LayerNorm"):
                raise _unsupported(loaded, "has no LayerNorm after its attention output")
            after, kind = names[id(part.beside.LayerNorm)], "post"
        elif hasattr(layer, "pre_feedforward_layernorm") and hasattr(layer, "post_attention_layernorm"):
            after, kind = "post_attention_layernorm", "sandwich"  # Gemma 2 and 3: a norm on the attention output
        if output is None:
            raise _unsupported(loaded, "has no output projection that context mixing knows (o_proj, out_proj, "
                                      "c_proj or BERT's output.dense)")
        found.append(Block(layer=layer, attention=attention, output=output, after=after, kind=kind))
    return found


def check_supported(loaded) -> None:
    """InputError now, before any work, if --mixing or --measure value-zeroing cannot run on this model."""
    blocks(loaded)


def mixing_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, softcap=None,
                     **kwargs):
    """Eager attention in the inputs' dtype, with the values expanded to one per query head.

    query (N, H, t, d); key and value (N, kv_heads, t, d): query head h reads key/value head h // (H / kv_heads),
    as transformers' repeat_kv has it. `module._mixing_keep` (N, H, t), if set, multiplies each query head's view
    of each token's value (0: zeroed); `module._mixing_seen`, if a list, receives (weights, values) as used;
    `module._mixing_one_input`, if a dict, says the N inputs are copies of one (value zeroing): its weights and
    values are computed once and kept there for the next chunk of zeroings of the same input.
    -> ((N, t, H, d) output, (N, H, t, t) weights), as transformers' eager_attention_forward.
    """
    import torch

    keep = getattr(module, "_mixing_keep", None)
    seen = getattr(module, "_mixing_seen", None)
    one_input = getattr(module, "_mixing_one_input", None)
    if keep is not None and seen is None and one_input is not None:
        if "weights" not in one_input:  # the first chunk: the one input's attention (the first copy's)
            if attention_mask is not None and attention_mask.shape[0] > 1:
                attention_mask = attention_mask[:1]
            one_input["weights"], one_input["value"] = _weights(query[:1], key[:1], value[:1], attention_mask,
                                                                scaling, softcap)
            one_input["output"] = torch.matmul(one_input["weights"][0], one_input["value"][0])  # (H, t, d)
        one = _one_token_zeroings(one_input["weights"], one_input["value"], one_input["output"], keep)
        if one is not None:
            return one
    weights, value = _weights(query, key, value, attention_mask, scaling, softcap)
    if keep is not None:
        value = value * keep[..., None].to(value.dtype)
    if seen is not None:
        seen.append((weights, value))
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


def _weights(query, key, value, attention_mask, scaling, softcap):
    """Eager attention's (N, H, t, t) weights and (N, H, t, d) values, one per query head."""
    import torch

    groups = query.shape[1] // key.shape[1]
    key = key.repeat_interleave(groups, dim=1)  # (N, H, t, d)
    value = value.repeat_interleave(groups, dim=1)  # (N, H, t, d): each query head's own view
    scores = torch.matmul(query, key.transpose(2, 3)) * (query.shape[-1] ** -0.5 if scaling is None else scaling)
    if softcap is not None:  # Gemma 2
        scores = torch.tanh(scores / softcap) * softcap
    if attention_mask is not None:
        mask = attention_mask[..., : key.shape[-2]]
        scores = scores.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else scores + mask
    return torch.softmax(scores, dim=-1), value  # (N, H, t, t), (N, H, t, d)


def _one_token_zeroings(weights, value, output, keep):
    """The attention output of N zeroings of one input ((1, H, t, t) weights, (1, H, t, d) values, (H, t, d) their
    product), each zeroing one token's value in some heads: (N, t, H, d) and the (N, H, t, t) weights (a view),
    or None if a row of `keep` zeroes more than one token. Zeroing token j changes W V by the rank-one term W[:, j] V[j] in each
    zeroed head, so the t zeroings of a layer cost t^2 d, not the t^3 d of t products W (V * keep)."""
    import torch

    drop = (1 - keep).to(value.dtype)  # (N, H, t)
    touched = drop.abs().sum(dim=1)  # (N, t)
    if bool(((touched != 0).sum(dim=-1) > 1).any()):
        return None
    zeroings = keep.shape[0]
    token = touched.argmax(dim=-1)  # (N,) the token each zeroing drops (any, when it drops none)
    dropped = drop[torch.arange(zeroings, device=keep.device), :, token]  # (N, H): the share each head loses
    w, v = weights[0], value[0]  # (H, t, t), (H, t, d)
    column = w[:, :, token].permute(2, 0, 1)  # (N, H, t): W[h, i, j_n]
    row = v[:, token, :].permute(1, 0, 2)  # (N, H, d): V[h, j_n]
    out = output - (dropped[:, :, None] * column)[..., None] * row[:, :, None, :]  # (N, H, t, d)
    return out.transpose(1, 2).contiguous(), weights.expand(zeroings, -1, -1, -1)


def _register() -> None:
    from transformers import AttentionInterface

    if ATTENTION_FUNCTION not in AttentionInterface._global_mapping:
        AttentionInterface.register(ATTENTION_FUNCTION, mixing_attention)


# The torch.device that re-runs the layers in float64 for a model on a device: the device itself where it computes
# in float64 (the CPU, CUDA), else the CPU (Apple's MPS has no float64).
mixing_device = float64_device


def _moved(item, device, float64: bool = False):
    """Every tensor in `item` (nested tuples, lists, dicts) on `device`, detached; floats in float64 if asked."""
    import torch

    if isinstance(item, torch.Tensor):
        return item.detach().to(device, torch.float64 if float64 and item.is_floating_point() else item.dtype)
    if isinstance(item, tuple):
        return tuple(_moved(i, device, float64) for i in item)
    if isinstance(item, list):
        return [_moved(i, device, float64) for i in item]
    if isinstance(item, dict):
        return {k: _moved(v, device, float64) for k, v in item.items()}
    return item


@dataclass
class LayerInput:
    """What the model handed one layer for one sentence, floats in float64 (kept on the host: `to` moves it)."""

    args: tuple
    kwargs: dict

    def to(self, device) -> LayerInput:
        """The same input on `device` (itself where it is there already)."""
        return LayerInput(_moved(self.args, device), _moved(self.kwargs, device))

    @property
    def hidden(self):
        """(1, t, hidden) the layer's input x."""
        return self.args[0] if self.args else self.kwargs["hidden_states"]

    def call(self, layer, hidden):
        """layer(hidden, the rest as the model passed it) -> (N, t, hidden) the layer's output."""
        if self.args:
            out = layer(hidden, *self.args[1:], **self.kwargs)
        else:
            out = layer(**{**self.kwargs, "hidden_states": hidden})
        return out[0] if isinstance(out, tuple) else out


def layer_inputs(loaded, blocks_: list[Block], ids: np.ndarray) -> list[LayerInput]:
    """One forward pass of one sentence (t,) piece ids -> each layer's input, as the model computed it."""
    import inspect

    import torch

    seen: list[LayerInput] = []

    def hook(module, args, kwargs):
        seen.append(LayerInput(_moved(args, "cpu", True), _moved(kwargs, "cpu", True)))

    handles = [b.layer.register_forward_pre_hook(hook, with_kwargs=True) for b in blocks_]
    ids_t = torch.from_numpy(np.asarray(ids, dtype=np.int64))[None].to(loaded.device)
    options = {"input_ids": ids_t, "attention_mask": torch.ones_like(ids_t)}
    if "use_cache" in inspect.signature(loaded.model.forward).parameters:
        options["use_cache"] = False  # a cache would be handed to each layer, and a re-run would extend it
    try:
        with torch.inference_mode():
            loaded.model(**options)
    finally:
        for handle in handles:
            handle.remove()
    assert len(seen) == len(blocks_), (len(seen), len(blocks_))
    return seen


class Norm64:
    """Builds the float64 stand-in of an RMSNorm that computes in float32 (Llama's, Gemma's casts its input to
    float32), so that a float64 re-run is float64 throughout."""

    @staticmethod
    def replace_all(layer) -> None:
        import torch

        for name, module in list(layer.named_modules()):
            if not name or isinstance(module, torch.nn.LayerNorm):
                continue
            eps = next((getattr(module, n) for n in ("eps", "variance_epsilon") if getattr(module, n, None) is not None),
                       None)
            weight = getattr(module, "weight", None)
            if eps is None or weight is None or weight.dim() != 1 or list(module.children()):
                continue
            probe = torch.randn(4, weight.shape[0], dtype=torch.float64,
                                generator=torch.Generator().manual_seed(0)).to(weight.device)
            with torch.inference_mode():
                out = module(probe)
            exact = next((m for m in Norm64.candidates(module, float(eps))
                          if float((m(probe) - out).abs().max()) <= 1e-4 * (1 + float(out.abs().max()))), None)
            if exact is not None:
                parent, _, child = name.rpartition(".")
                setattr(layer.get_submodule(parent) if parent else layer, child, exact)

    @staticmethod
    def candidates(module, eps: float) -> list:
        import torch

        weight = module.weight.detach().to(torch.float64)
        bias = getattr(module, "bias", None)
        bias = None if bias is None else bias.detach().to(torch.float64)

        class Exact(torch.nn.Module):
            def __init__(self, gain, centred: bool):
                super().__init__()
                self.weight, self.bias, self.eps, self.centred = gain, bias, eps, centred

            def forward(self, x):
                if self.centred:
                    x = x - x.mean(dim=-1, keepdim=True)
                out = x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + self.eps) * self.weight
                return out if self.bias is None else out + self.bias

        return [Exact(weight, False), Exact(1 + weight, False), Exact(weight, True)]


class Layer64:
    """A float64 copy of one layer on `device` (mixing_device's) whose attention runs through mixing_attention."""

    def __init__(self, block: Block, device="cpu"):
        import torch

        _register()
        self.block = block
        self.device = torch.device(device)
        self.layer = copy.deepcopy(block.layer).to(self.device, torch.float64).eval()
        Norm64.replace_all(self.layer)
        self.attention = self.layer.get_submodule(block.attention)
        config = getattr(self.attention, "config", None)
        if config is None:
            raise InputError(f"{type(self.attention).__name__} has no config, so context mixing cannot set its "
                             "attention function")
        config._attn_implementation = ATTENTION_FUNCTION  # the copy's own config: the model's is untouched
        self.output = self.layer.get_submodule(block.output)
        self.after = None if block.after is None else self.layer.get_submodule(block.after)

    def output_weights(self, heads: int):
        """-> ((heads, d, hidden) W_O^h, (hidden,) b_O) of the output projection."""
        import torch

        weight = self.output.weight.detach()
        if getattr(self.output, "nf", None) is None:  # Linear: (out = hidden, in = heads * d)
            weight = weight.T
        hidden = weight.shape[1]
        bias = self.output.bias
        bias = torch.zeros(hidden, dtype=torch.float64, device=weight.device) if bias is None else bias.detach()
        return weight.reshape(heads, -1, hidden), bias

    def run(self, given: LayerInput, hidden, keep=None, record: bool = False, one_input: dict | None = None):
        """Re-run on `hidden` (N, t, hidden) with value mask `keep` (N, H, t) -> (output (N, t, hidden), recorded);
        one_input: a dict kept across the calls whose N rows of `hidden` are all copies of one input (the input's
        attention is computed in the first and kept there). `recorded` holds, when `record`, the attention's
        (weights, values) and output, the `after` norm's (input, output), and the input of each of the layer's own
        children ("inputs": name -> (N, t, hidden))."""
        import torch

        recorded: dict = {"inputs": {}}
        self.attention._mixing_keep = keep
        self.attention._mixing_one_input = one_input
        self.attention._mixing_seen = [] if record else None
        handles = []
        if record:
            def after(module, args, output):
                recorded["after"] = (args[0], output)

            def attention_out(module, args, output):
                recorded["attention_out"] = output[0] if isinstance(output, tuple) else output

            def child_input(name: str):
                def hook(module, args, kwargs):
                    first = args[0] if args else kwargs.get("hidden_states")
                    if isinstance(first, torch.Tensor):
                        recorded["inputs"][name] = first
                return hook

            if self.after is not None:
                handles.append(self.after.register_forward_hook(after))
            handles.append(self.attention.register_forward_hook(attention_out))
            handles += [child.register_forward_pre_hook(child_input(name), with_kwargs=True)
                        for name, child in self.layer.named_children()]
        try:
            with torch.inference_mode():
                out = given.call(self.layer, hidden)
        finally:
            for handle in handles:
                handle.remove()
            self.attention._mixing_keep = None
            self.attention._mixing_one_input = None
            seen, self.attention._mixing_seen = self.attention._mixing_seen, None
        if record:
            recorded["weights"], recorded["values"] = seen[0]
        return out, recorded


def scale_rows(raw, causal: bool):
    """(..., t, t) raw scores -> (scaled, (..., t) raw row sums): rows divided by their sum, a causal model's
    cells above the diagonal exactly 0. A row with no score at all (sum 0) keeps the token itself."""
    import torch

    if causal:
        raw = torch.tril(raw)
    sums = raw.sum(dim=-1)  # (..., t)
    t = raw.shape[-1]
    eye = torch.eye(t, dtype=raw.dtype, device=raw.device).expand_as(raw)
    scaled = torch.where(sums[..., None] > 0, raw / sums[..., None].clamp(min=1e-300), eye)
    return scaled, sums


def each_layer(loaded, sentences: list[np.ndarray], progress: Callable | None = None
               ) -> Iterator[tuple[Layer64, list[LayerInput]]]:
    """(the float64 copy of layer l on mixing_device, each sentence's input to it on the host) for l = 1, 2, ...:
    one forward pass per sentence, then each layer copied once. `progress`: a factory progress(total=, desc=) of
    a tqdm-like bar, advanced by one per layer and sentence as the caller takes the next layer (None: no bar)."""
    found = blocks(loaded)
    device = mixing_device(loaded.device)
    inputs = [layer_inputs(loaded, found, ids) for ids in sentences]  # (S,) of (layers,)
    bar = None if progress is None else progress(total=len(found) * len(sentences), desc="context mixing")
    try:
        for number, block in enumerate(found):
            layer = Layer64(block, device)
            yield layer, [per_layer[number] for per_layer in inputs]
            del layer
            if bar is not None:
                bar.update(len(sentences))
    finally:
        if bar is not None:
            bar.close()
