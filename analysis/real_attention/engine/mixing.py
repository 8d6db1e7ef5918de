"""Context mixing beyond attention: ALTI (Ferrando, Gállego and Costa-jussà, 2022) and value zeroing (Mohebbi,
Zuidema, Chrupała and Alishahi, 2023), one map per layer, and value zeroing per head.

Every map is computed at piece level in float64 from the model's own layers, re-run on their true inputs:

- the model runs once per sentence in its own dtype; a pre-hook keeps each layer's input (and the masks and
  position embeddings the model hands it);
- each layer is then copied to the CPU in float64 and re-run there, its attention computed by `mixing_attention`
  (registered with transformers' attention-function registry), which expands the values to one per query head
  (grouped-query attention), may zero some of them, and records the weights and the values it used.

ALTI: T_i(x_j) = L_i(sum_h alpha^h_ij W_O^h v^h_j + delta_ij x_i) for a post-LN block (BERT), with L_i the
LayerNorm's linear part at token i's own statistics; sum_h alpha^h_ij W_O^h v^h_j + delta_ij x_i for a pre-LN
block (Llama, GPT-2, Gemma); L_i(sum_h ...) + delta_ij x_i where a norm sits on the attention output alone
(Gemma 2). c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), rows scaled to sum to 1.

Value zeroing: C_ij = max(0, 1 - cos(layer output of i with token j's values zeroed, layer output of i)), rows
divided by their sum; per head, only head h's view of token j's value is zeroed. The n (or heads x n) zeroings
of a layer run as one batch (in chunks that bound the memory).

Rolled maps: R^l = C^l R^{l-1}, R^1 = C^1, for ALTI and value zeroing (the residual is inside both); the head
average of the weights and of the norm maps is rolled with 0.5 A + 0.5 I, as real_attention.engine.rollout does.
Everything is merged into units by the one merge rule (real_attention.engine.words.merge_maps).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import InputError

ATTENTION, NORM, ALTI, VALUE_ZEROING = "attention", "norm", "alti", "value_zeroing"
MIXING_MEASURES = (ATTENTION, NORM, ALTI, VALUE_ZEROING)
DEFINITIONS = {
    ATTENTION: "the head average of the post-softmax weights; rolled: attention rollout with 0.5 A + 0.5 I "
               "(Abnar and Zuidema, 2020)",
    NORM: "the head average of the norm-based maps ||alpha f(x)||, rows scaled to 1 (Kobayashi et al., 2020); "
          "rolled with 0.5 A + 0.5 I",
    ALTI: "c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), rows scaled to 1, T_i(x_j) the attention block's "
          "output for token i decomposed per source token j, residual and layer norm included (Ferrando, "
          "Gallego and Costa-jussa, 2022); rolled: R^l = C^l R^(l-1)",
    VALUE_ZEROING: "C_ij = max(0, 1 - cos(layer output of i with token j's values zeroed in every head, layer "
                   "output of i)), rows divided by their sum (Mohebbi, Zuidema, Chrupala and Alishahi, 2023); "
                   "rolled: R^l = C^l R^(l-1)",
}
SOURCES = {
    ATTENTION: "Abnar and Zuidema (2020), Quantifying Attention Flow in Transformers, ACL",
    NORM: "Kobayashi, Kuribayashi, Yokoi and Inui (2020), Attention is Not Only a Weight, EMNLP",
    ALTI: "Ferrando, Gallego and Costa-jussa (2022), Measuring the Mixing of Contextual Information in the "
          "Transformer, EMNLP; reference code github.com/mt-upc/transformer-contributions",
    VALUE_ZEROING: "Mohebbi, Zuidema, Chrupala and Alishahi (2023), Quantifying Context Mixing in Transformers, "
                   "EACL; reference code github.com/hmohebbi/ValueZeroing",
}
ATTENTION_FUNCTION = "real_attention_mixing"  # its name in transformers' attention-function registry
MEMORY_BUDGET = 256 * 2**20  # bytes of float64 activations one chunk of zeroings may take
NEAR_ZERO = 1e-4  # a raw value-zeroing row sum below this is reported as near zero


def _unsupported(model, why: str) -> InputError:
    return InputError(f"--mixing and --measure value-zeroing re-run each layer, so they need one attention module "
                      f"per layer inside one layer module; {type(model).__name__} {why}. Use --measure weights "
                      "or norm without --mixing")


# ---------------------------------------------------------------------------------------------- the layers


@dataclass(frozen=True)
class Block:
    """Where one layer's parts are, as dotted names inside its layer module (so a copy finds them too)."""

    layer: Any  # the layer module, re-run for value zeroing
    attention: str  # the module that calls the attention function
    output: str  # the output projection: a Linear (out, in) or GPT-2's Conv1D (in, out)
    after: str | None  # post: the LayerNorm over residual + attention (BERT); sandwich: the norm on the attention
    # output alone (Gemma 2); None for a pre-LN block
    kind: str  # "post", "pre" or "sandwich"


OUTPUT_NAMES = ("o_proj", "out_proj", "c_proj")  # inside the attention module; BERT's is beside it


def blocks(loaded) -> list[Block]:
    """Every layer's Block; InputError for a model whose layers cannot be re-run one by one (MPNet, DeBERTa:
    no attention module is named; ALBERT: one module shared by every layer)."""
    from .extract import attention_modules

    model = loaded.model
    records = getattr(model, "_can_record_outputs", None) or {}
    spec = records.get("hidden_states")
    layer_class = getattr(spec, "target_class", spec)
    modules = attention_modules(model)
    if modules is None or not isinstance(layer_class, type):
        raise _unsupported(model, "gives its maps only through output_attentions")
    layers: list[Any] = [module for module in model.modules() if isinstance(module, layer_class)]
    if len(layers) != loaded.layers or len(modules) != loaded.layers:
        raise _unsupported(model, "shares one attention module across its layers")
    found = []
    for layer, module in zip(layers, modules):
        names = {id(m): name for name, m in layer.named_modules()}
        if id(module) not in names:
            raise _unsupported(model, "has an attention module outside its layer module")
        attention = names[id(module)]
        parent = attention.rpartition(".")[0]
        owner = layer.get_submodule(parent) if parent else layer
        output = next((f"{attention}.{o}" for o in OUTPUT_NAMES if hasattr(module, o)), None)
        after, kind = None, "pre"
        if output is None and hasattr(getattr(owner, "output", None), "dense"):  # BERT: attention.output.dense
            output = f"{parent}.output.dense".lstrip(".")
            after, kind = f"{parent}.output.LayerNorm".lstrip("."), "post"
            if not hasattr(owner.output, "LayerNorm"):
                raise _unsupported(model, "has no LayerNorm after its attention output")
        elif hasattr(layer, "pre_feedforward_layernorm") and hasattr(layer, "post_attention_layernorm"):
            after, kind = "post_attention_layernorm", "sandwich"  # Gemma 2 and 3: a norm on the attention output
        if output is None:
            raise _unsupported(model, "has no output projection that --mixing knows (o_proj, out_proj, c_proj or "
                                      "BERT's output.dense)")
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
    of each token's value (0: zeroed); `module._mixing_seen`, if a list, receives (weights, values) as used.
    -> ((N, t, H, d) output, (N, H, t, t) weights), as transformers' eager_attention_forward.
    """
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
    weights = torch.softmax(scores, dim=-1)  # (N, H, t, t)
    keep = getattr(module, "_mixing_keep", None)
    if keep is not None:
        value = value * keep[..., None].to(value.dtype)
    seen = getattr(module, "_mixing_seen", None)
    if seen is not None:
        seen.append((weights, value))
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


def _register() -> None:
    from transformers import AttentionInterface

    if ATTENTION_FUNCTION not in AttentionInterface._global_mapping:
        AttentionInterface.register(ATTENTION_FUNCTION, mixing_attention)


def _to_cpu64(item):
    import torch

    if isinstance(item, torch.Tensor):
        return item.detach().to("cpu", torch.float64 if item.is_floating_point() else item.dtype)
    if isinstance(item, tuple):
        return tuple(_to_cpu64(i) for i in item)
    if isinstance(item, list):
        return [_to_cpu64(i) for i in item]
    if isinstance(item, dict):
        return {k: _to_cpu64(v) for k, v in item.items()}
    return item


@dataclass
class LayerInput:
    """What the model handed one layer for one sentence, on the CPU, floats in float64."""

    args: tuple
    kwargs: dict

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
        seen.append(LayerInput(_to_cpu64(args), _to_cpu64(kwargs)))

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
            probe = torch.randn(4, weight.shape[0], dtype=torch.float64, generator=torch.Generator().manual_seed(0))
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
    """A float64 CPU copy of one layer whose attention runs through mixing_attention."""

    def __init__(self, block: Block):
        import torch

        _register()
        self.block = block
        self.layer = copy.deepcopy(block.layer).to("cpu", torch.float64).eval()
        Norm64.replace_all(self.layer)
        self.attention = self.layer.get_submodule(block.attention)
        config = getattr(self.attention, "config", None)
        if config is None:
            raise InputError(f"{type(self.attention).__name__} has no config, so --mixing cannot set its attention "
                             "function")
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
        bias = torch.zeros(hidden, dtype=torch.float64) if bias is None else bias.detach()
        return weight.reshape(heads, -1, hidden), bias

    def run(self, given: LayerInput, hidden, keep=None, record: bool = False):
        """Re-run on `hidden` (N, t, hidden) with value mask `keep` (N, H, t) -> (output (N, t, hidden), recorded):
        recorded holds, when `record`, the attention's (weights, values) and output, the `after` norm's (input,
        output), and the input of each of the layer's own children ("inputs": name -> (N, t, hidden))."""
        import torch

        recorded: dict = {"inputs": {}}
        self.attention._mixing_keep = keep
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
            seen, self.attention._mixing_seen = self.attention._mixing_seen, None
        if record:
            recorded["weights"], recorded["values"] = seen[0]
        return out, recorded


# ---------------------------------------------------------------------------------------------- ALTI


@dataclass(frozen=True)
class NormPart:
    """A norm's output as gain * P(s) * scale + bias, P centring (LayerNorm) or not (RMSNorm)."""

    gain: Any  # (hidden,) float64
    bias: Any  # (hidden,) float64
    centred: bool
    scale: Any  # (t,) 1 / sigma_i of each token's own input

    def linear(self, z):
        """(t, ..., hidden) -> L_i(z) with token i's statistics on the first axis."""
        if self.centred:
            z = z - z.mean(dim=-1, keepdim=True)
        scale = self.scale.reshape(-1, *([1] * (z.dim() - 1)))
        return z * self.gain * scale


def norm_part(module, s, out) -> NormPart:
    """The linear part of the norm `module` at each token's statistics: (t, hidden) input s and output out, in
    float64. LayerNorm: gamma (s - mean) / sqrt(var + eps) + beta (biased variance, as torch computes it); RMSNorm:
    w s / sqrt(mean(s^2) + eps), with w the weight or 1 + weight (Gemma). The form that gives the module's own
    output is taken; InputError if none does."""
    import torch

    hidden = s.shape[-1]
    eps = next((float(getattr(module, n)) for n in ("eps", "variance_epsilon") if getattr(module, n, None) is not None),
               None)
    weight = getattr(module, "weight", None)
    weight = torch.ones(hidden, dtype=torch.float64) if weight is None else weight.detach().to(torch.float64)
    bias = getattr(module, "bias", None)
    bias = torch.zeros(hidden, dtype=torch.float64) if bias is None else bias.detach().to(torch.float64)
    if eps is None:
        raise InputError(f"ALTI does not know the norm {type(module).__name__} (no eps)")
    centred = s - s.mean(dim=-1, keepdim=True)
    candidates = [
        NormPart(weight, bias, True, 1 / torch.sqrt((centred ** 2).mean(dim=-1) + eps)),
        NormPart(weight, bias, False, 1 / torch.sqrt((s ** 2).mean(dim=-1) + eps)),
        NormPart(1 + weight, bias, False, 1 / torch.sqrt((s ** 2).mean(dim=-1) + eps)),
    ]
    tolerance = 1e-8 * (1 + float(out.abs().max()))
    for part in candidates:
        if float((part.linear(s) + part.bias - out).abs().max()) <= tolerance:
            return part
    raise InputError(f"ALTI does not know the norm {type(module).__name__}: it is neither a LayerNorm nor an RMSNorm")


@dataclass(frozen=True)
class Decomposition:
    """One layer's attention block for one sentence: y_i = sum_j T_i(x_j) + bias_i (float64 tensors)."""

    parts: Any  # (t, t, hidden) T_i(x_j), query i by source j
    bias: Any  # (t, hidden): L_i(b_O) + beta (post-LN, sandwich) or b_O (pre-LN)
    real: Any  # (t, hidden) the block's output as the layer computed it (post-LN: after the LayerNorm; pre-LN:
    # the residual stream before the MLP)

    @property
    def output(self):
        """(t, hidden) y_i, the decomposed output."""
        return self.parts.sum(dim=1) + self.bias


def decompose(layer: Layer64, given: LayerInput, heads: int, recorded: dict) -> Decomposition:
    """ALTI's decomposition of one layer's attention block from a recorded plain re-run."""
    import torch

    weights = recorded["weights"][0]  # (H, t, t)
    values = recorded["values"][0]  # (H, t, d), each query head's view
    w_out, b_out = layer.output_weights(heads)  # (H, d, hidden), (hidden,)
    x = given.hidden[0]  # (t, hidden)
    moved = torch.einsum("htd,hdk->htk", values, w_out)  # (H, t, hidden) W_O^h v^h_j
    parts = torch.einsum("hij,hjk->ijk", weights, moved)  # (t, t, hidden) sum_h alpha^h_ij W_O^h v^h_j
    t = x.shape[0]
    diagonal = torch.arange(t)
    if layer.block.kind == "pre":
        parts[diagonal, diagonal] += x
        real = _residual_after_attention(layer, recorded, x + recorded["attention_out"][0])
        return Decomposition(parts, b_out.expand(t, -1), real)
    s, out = (item[0] for item in recorded["after"])  # the norm's (t, hidden) input and output
    part = norm_part(layer.after, s, out)
    if layer.block.kind == "post":  # LN(x + attention): the residual goes through L_i too
        parts[diagonal, diagonal] += x
        parts = part.linear(parts)
        return Decomposition(parts, part.linear(b_out.expand(t, -1)) + part.bias, out)
    parts = part.linear(parts)  # sandwich: x + N(attention)
    parts[diagonal, diagonal] += x
    real = _residual_after_attention(layer, recorded, x + out)
    return Decomposition(parts, part.linear(b_out.expand(t, -1)) + part.bias, real)


def _residual_after_attention(layer: Layer64, recorded: dict, expected):
    """(t, hidden) the residual stream after the attention, as the layer hands it on: the input of one of its
    children (Llama's post_attention_layernorm, GPT-2's ln_2, Gemma 2's pre_feedforward_layernorm) that equals
    `expected`. InputError where none does: the block is not x + attention (OLMo 2 normalises the attention
    output alone; Phi adds attention and MLP in parallel), so ALTI's decomposition would not hold."""
    tolerance = 1e-9 * (1 + float(expected.abs().max()))
    for value in recorded["inputs"].values():
        if value.shape[-2:] == expected.shape and float((value[0] - expected).abs().max()) <= tolerance:
            return value[0]
    raise InputError(f"ALTI needs the residual stream x + attention(x) after each attention block; no part of "
                     f"{type(layer.layer).__name__} receives it, so its block is of another form. Leave out --mixing")


def alti_contributions(decomposition: Decomposition):
    """(t, t) raw c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), y_i the decomposed output."""
    y = decomposition.output  # (t, hidden)
    distance = (y[:, None, :] - decomposition.parts).abs().sum(dim=-1)  # (t, t), exact L1
    return (y.abs().sum(dim=-1)[:, None] - distance).clamp(min=0)


# ---------------------------------------------------------------------------------------------- value zeroing


def _chunk(t: int, heads: int, hidden: int, layer) -> int:
    """How many zeroings of a t-piece sentence one pass takes within MEMORY_BUDGET."""
    widest = max((m.out_features for m in layer.modules() if hasattr(m, "out_features")), default=4 * hidden)
    per_zeroing = 8 * t * (3 * heads * t + 8 * hidden + 3 * widest)
    return max(1, MEMORY_BUDGET // per_zeroing)


def zeroed_scores(layer: Layer64, given: LayerInput, reference, keep, chunk: int | None = None):
    """Raw scores 1 - cos(zeroed output_i, reference_i), clipped at 0, of each zeroing in keep (Z, H, t)
    -> (Z, t): the layer runs on Z copies of its input at once, `chunk` at a time (None: within MEMORY_BUDGET)."""
    import torch

    x = given.hidden  # (1, t, hidden)
    zeroings, heads, t = keep.shape
    size = chunk or _chunk(t, heads, x.shape[-1], layer.layer)
    scores = []
    for start in range(0, zeroings, size):
        part = keep[start:start + size]
        out, _ = layer.run(given, x.expand(part.shape[0], -1, -1), keep=part)  # (z, t, hidden)
        scores.append(1 - torch.nn.functional.cosine_similarity(out, reference, dim=-1, eps=1e-300))
    return torch.cat(scores).clamp(min=0)  # (Z, t)


def token_keep(t: int, heads: int, per_head: bool):
    """(Z, H, t) value masks: Z = t zeroings of token j in every head, or Z = H * t of token j in head h
    (row h * t + j)."""
    import torch

    if not per_head:
        keep = torch.ones(t, heads, t, dtype=torch.float64)
        keep[torch.arange(t), :, torch.arange(t)] = 0
        return keep
    keep = torch.ones(heads * t, heads, t, dtype=torch.float64)
    rows = torch.arange(heads * t)
    keep[rows, rows // t, rows % t] = 0
    return keep


def scale_rows(raw, causal: bool):
    """(..., t, t) raw scores -> (scaled, (..., t) raw row sums): rows divided by their sum, a causal model's
    cells above the diagonal exactly 0. A row with no score at all (sum 0) keeps the token itself."""
    import torch

    if causal:
        raw = torch.tril(raw)
    sums = raw.sum(dim=-1)  # (..., t)
    t = raw.shape[-1]
    eye = torch.eye(t, dtype=raw.dtype).expand_as(raw)
    scaled = torch.where(sums[..., None] > 0, raw / sums[..., None].clamp(min=1e-300), eye)
    return scaled, sums


# ---------------------------------------------------------------------------------------------- per sentence


@dataclass(frozen=True)
class PieceMixing:
    """One sentence's piece-level maps (float64 numpy), each row summing to 1; None where not asked for."""

    alti: np.ndarray | None  # (layers, t, t)
    value_zeroing: np.ndarray | None  # (layers, t, t)
    heads: np.ndarray | None  # (layers, heads, t, t) per-head value zeroing
    raw_sums: np.ndarray | None  # (layers, t) value zeroing's row sums before scaling
    head_raw_sums: np.ndarray | None  # (layers, heads, t) per head


def piece_mixing(loaded, sentences: list[np.ndarray], *, alti: bool = True, zeroing: bool = True,
                 heads: bool = False, chunk: int | None = None) -> list[PieceMixing]:
    """The piece-level maps of each sentence's (t,) piece ids (no pads), layer by layer: each layer is copied in
    float64 once and re-run for every sentence."""
    import torch

    found = blocks(loaded)
    inputs = [layer_inputs(loaded, found, ids) for ids in sentences]  # (S,) of (layers,)
    count, h = len(sentences), loaded.heads
    maps: dict[str, list[list]] = {name: [[] for _ in range(count)] for name in
                                   ("alti", "value_zeroing", "heads", "raw_sums", "head_raw_sums")}
    for number, block in enumerate(found):
        layer = Layer64(block)
        for s, given in enumerate(per_layer[number] for per_layer in inputs):
            t = given.hidden.shape[1]
            reference, recorded = layer.run(given, given.hidden, record=True)  # (1, t, hidden)
            if alti:
                raw = alti_contributions(decompose(layer, given, h, recorded))
                maps["alti"][s].append(scale_rows(raw, loaded.causal)[0])
            if zeroing:
                raw = zeroed_scores(layer, given, reference, token_keep(t, h, False), chunk).T  # (t_i, t_j)
                scaled, sums = scale_rows(raw, loaded.causal)
                maps["value_zeroing"][s].append(scaled)
                maps["raw_sums"][s].append(sums)
            if heads:
                raw = zeroed_scores(layer, given, reference, token_keep(t, h, True), chunk)  # (H * t_j, t_i)
                scaled, sums = scale_rows(raw.reshape(h, t, t).transpose(1, 2), loaded.causal)
                maps["heads"][s].append(scaled)
                maps["head_raw_sums"][s].append(sums)
        del layer
    stacked = {name: [torch.stack(rows).numpy() if rows else None for rows in per] for name, per in maps.items()}
    return [PieceMixing(**{name: stacked[name][s] for name in stacked}) for s in range(count)]


def head_value_zeroing(loaded, batch):
    """--measure value-zeroing: (B, layers, H, t, t) float32 per-head value zeroing of a padded Batch
    (real_attention.engine.extract.Batch), zero at the pads, on the model's device."""
    import torch

    lengths = batch.attention_mask.sum(axis=1)
    found = piece_mixing(loaded, [ids[:n] for ids, n in zip(batch.input_ids, lengths)], alti=False, zeroing=False,
                         heads=True)
    size, t = batch.input_ids.shape
    out = torch.zeros((size, loaded.layers, loaded.heads, t, t), dtype=torch.float32)
    for row, (piece, n) in enumerate(zip(found, lengths)):
        out[row, :, :, :n, :n] = torch.from_numpy(piece.heads)
    return out.to(loaded.device)


# ---------------------------------------------------------------------------------------------- words


def rolled(layer_maps: np.ndarray) -> np.ndarray:
    """(L, t, t) maps whose rows sum to 1 -> (L, t, t) R^l = C^l R^{l-1}, R^1 = C^1, in float64."""
    out = np.empty_like(layer_maps, dtype=np.float64)
    current = None
    for layer, current_map in enumerate(layer_maps.astype(np.float64)):
        current = current_map if current is None else current_map @ current
        out[layer] = current
    return out


@dataclass(frozen=True)
class SentenceMixing:
    """One sentence's maps at the level of its units: per measure, (layers, n, n) float64, rows summing to 1."""

    text: str
    words: tuple[str, ...]  # (n,)
    kinds: tuple[int, ...]  # (n,) Kind codes
    maps: dict[str, np.ndarray]  # measure -> (layers, n, n) the layer's own map
    rolled: dict[str, np.ndarray]  # measure -> (layers, n, n) the aggregate up to and including that layer

    def __post_init__(self) -> None:
        n = len(self.words)
        for arrays in (self.maps, self.rolled):
            assert all(a.ndim == 3 and a.shape[1:] == (n, n) for a in arrays.values()), n


@dataclass(frozen=True)
class Mixing:
    """The context-mixing maps of S sentences: `mix[i].maps["alti"]` is sentence i's (layers, n, n) ALTI."""

    sentences: tuple[SentenceMixing, ...]
    model: str
    revision: str
    causal: bool
    measures: tuple[str, ...] = MIXING_MEASURES
    smallest_raw_row_sum: dict = field(default_factory=dict)  # value zeroing: value, sentence, layer, query (from 1)
    near_zero_rows: tuple = ()  # (sentence, layer, query) from 1, query a piece's unit, of raw sums below NEAR_ZERO

    def __getitem__(self, index: int) -> SentenceMixing:
        return self.sentences[index]

    def __len__(self) -> int:
        return len(self.sentences)

    def frame(self):
        """The table of mixing.csv (real_attention.outputs.mixing)."""
        from ..outputs.mixing import mixing_frame

        return mixing_frame(self)

    def agreement(self):
        """The table of mixing_agreement.csv: Spearman's rank correlation per layer and pair of measures."""
        from ..outputs.mixing import agreement_frame

        return agreement_frame(self)


def compute_mixing(loaded, texts: list[str], *, units: str = "text",
                   required: list[tuple[str, ...]] | None = None, chunk: int | None = None) -> Mixing:
    """Attention, norm, ALTI and value zeroing of each text, layer by layer and rolled, merged into units."""
    import torch

    from .extract import SentenceTooLong, encode, pad_batch
    from .measures import NORM as NORM_MEASURE
    from .measures import WEIGHTS, forward_measured
    from .rollout import rollout
    from .words import merge_maps

    check_supported(loaded)
    encoded, too_long = encode(loaded.tokenizer, texts, loaded.max_tokens, units=units, required=required)
    if too_long:
        index, count = too_long[0]
        raise SentenceTooLong(
            f"sentence {index + 1} has {count} tokens; {loaded.choice.short} takes at most {loaded.max_tokens}")
    batch = pad_batch(encoded, loaded.tokenizer.pad_token_id or 0)
    size, t = batch.input_ids.shape
    means = {}  # measure -> (B, L, t, t) head-averaged piece maps, as rollout.csv has them
    for name, measure in ((ATTENTION, WEIGHTS), (NORM, NORM_MEASURE)):
        layer_means = torch.zeros((size, loaded.layers, t, t), device=loaded.device)

        def on_layer(layer: int, piece_maps, layer_means=layer_means) -> None:
            layer_means[:, layer] = piece_maps.float().mean(dim=1)

        forward_measured(loaded, batch, on_layer, measure)
        means[name] = layer_means
    # (B, L, t, t) rolled in float64, then float32 as real_attention.engine.rollout.word_rollout merges them, so
    # these rows are rollout.csv's to the last digit
    rolled_means = {name: rollout(m).to(torch.float32) for name, m in means.items()}
    pieces = piece_mixing(loaded, [s.ids for s in encoded], chunk=chunk)
    sentences, smallest, near = [], None, []
    for row, (sentence, piece) in enumerate(zip(encoded, pieces)):
        n, length = len(sentence.words), len(sentence.ids)
        assert piece.alti is not None and piece.value_zeroing is not None and piece.raw_sums is not None  # asked
        unit = torch.from_numpy(sentence.units)[None]  # (1, t)
        layer_maps = {name: means[name][row, :, :length, :length].cpu() for name in (ATTENTION, NORM)}
        rolled_maps = {name: rolled_means[name][row, :, :length, :length].cpu() for name in (ATTENTION, NORM)}
        for name, array in ((ALTI, piece.alti), (VALUE_ZEROING, piece.value_zeroing)):
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
            near.append((row + 1, int(layer) + 1, sentence.words[sentence.units[piece_index]]))
    return Mixing(tuple(sentences), loaded.choice.name, loaded.revision, loaded.causal,
                  smallest_raw_row_sum=smallest or {}, near_zero_rows=tuple(dict.fromkeys(near)))


def decompositions(loaded, ids: np.ndarray) -> list[Decomposition]:
    """ALTI's decomposition of every layer's attention block for one sentence's (t,) piece ids (for checks)."""
    found = blocks(loaded)
    out = []
    for block, given in zip(found, layer_inputs(loaded, found, ids)):
        layer = Layer64(block)
        _, recorded = layer.run(given, given.hidden, record=True)
        out.append(decompose(layer, given, loaded.heads, recorded))
    return out


def run_mixing(loaded, sentence_set, *, units: str = "text") -> Mixing:
    """compute_mixing on a run's sentences, with their focus and sense words as units (run --mixing)."""
    texts = [sentence.text for sentence in sentence_set.sentences]
    required: list[tuple[str, ...]] = [(sentence_set.focus, sentence.sense) for sentence in sentence_set.sentences]
    return compute_mixing(loaded, texts, units=units, required=required)
