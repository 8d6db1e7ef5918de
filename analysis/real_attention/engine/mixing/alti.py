"""ALTI (Ferrando, Gállego and Costa-jussà, 2022): each layer's attention block decomposed per source token.

T_i(x_j) = L_i(sum_h alpha^h_ij W_O^h v^h_j + delta_ij x_i) for a post-LN block (BERT), with L_i the LayerNorm's
linear part at token i's own statistics; sum_h alpha^h_ij W_O^h v^h_j + delta_ij x_i for a pre-LN block (Llama,
GPT-2, Gemma); L_i(sum_h ...) + delta_ij x_i where a norm sits on the attention output alone (Gemma 2).
c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), rows scaled to sum to 1.

The decomposition of a t-piece sentence is a (t, t, hidden) float64 array: 0.8 GB at 512 pieces on MiniLM, and
a few copies of it while the L1 distances are taken. `alti_raw` therefore works through the queries in chunks of
rows whose arrays fit ALTI_BUDGET, whatever the length; a sentence that fits in one chunk is computed exactly as
one array (the same numbers to the last bit), and chunks change each row's numbers by rounding only (the same
sums over the same terms).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from ..errors import InputError
from .layers import Layer64, LayerInput

ALTI_BUDGET = 256 * 2**20  # bytes of float64 (rows, t, hidden) arrays one chunk of ALTI's queries may take
LIVE_COPIES = 5  # such arrays alive at once at the peak: the parts, and the norm's temporaries or the distances


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
    weight = torch.ones(hidden, dtype=torch.float64, device=s.device) if weight is None else \
        weight.detach().to(torch.float64)
    bias = getattr(module, "bias", None)
    bias = torch.zeros(hidden, dtype=torch.float64, device=s.device) if bias is None else \
        bias.detach().to(torch.float64)
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

    parts: Any  # (rows, t, hidden) T_i(x_j), query i by source j (rows: every query, or a chunk of them)
    bias: Any  # (rows, hidden): L_i(b_O) + beta (post-LN, sandwich) or b_O (pre-LN)
    real: Any  # (rows, hidden) the block's output as the layer computed it (post-LN: after the LayerNorm; pre-LN:
    # the residual stream before the MLP)

    @property
    def output(self):
        """(rows, hidden) y_i, the decomposed output."""
        return self.parts.sum(dim=1) + self.bias


class Decomposer:
    """What one layer's decomposition needs for one sentence, computed once from a recorded plain re-run; `rows`
    gives the decomposition of any range of queries."""

    def __init__(self, layer: Layer64, given: LayerInput, heads: int, recorded: dict) -> None:
        import torch

        self.kind = layer.block.kind
        self.weights = recorded["weights"][0]  # (H, t, t)
        values = recorded["values"][0]  # (H, t, d), each query head's view
        w_out, b_out = layer.output_weights(heads)  # (H, d, hidden), (hidden,)
        self.x = given.hidden[0]  # (t, hidden)
        self.moved = torch.bmm(values.contiguous(), w_out.contiguous())  # (H, t, hidden) W_O^h v^h_j
        self.moved_by_key = self.moved.transpose(0, 1).contiguous()  # (t_j, H, hidden)
        t = self.x.shape[0]
        self.part: NormPart | None = None
        if self.kind == "pre":
            self.bias = b_out.expand(t, -1)
            self.real = _residual_after_attention(layer, recorded, self.x + recorded["attention_out"][0])
            return
        s, out = (item[0] for item in recorded["after"])  # the norm's (t, hidden) input and output
        self.part = norm_part(layer.after, s, out)
        self.bias = self.part.linear(b_out.expand(t, -1)) + self.part.bias
        # post: LN(x + attention), the residual through L_i too; sandwich: x + N(attention)
        self.real = out if self.kind == "post" else _residual_after_attention(layer, recorded, self.x + out)

    @property
    def pieces(self) -> int:
        return int(self.x.shape[0])

    def rows(self, start: int, stop: int) -> Decomposition:
        """The decomposition of queries start .. stop - 1: parts (stop - start, t, hidden)."""
        import torch

        # sum_h alpha^h_ij W_O^h v^h_j as one batched product over keys j: (j, i, h) @ (j, h, hidden). The same
        # products and sums as torch.einsum("hij,hjk->ijk"), whose strided float64 path is 20x slower.
        by_key = self.weights[:, start:stop].permute(2, 1, 0).contiguous()  # (t_j, rows, H)
        parts = torch.bmm(by_key, self.moved_by_key).permute(1, 0, 2)  # (rows, t_j, hidden)
        rows = torch.arange(stop - start, device=parts.device)
        if self.kind == "pre":
            parts[rows, rows + start] += self.x[start:stop]
        else:
            assert self.part is not None
            part = replace(self.part, scale=self.part.scale[start:stop])
            if self.kind == "post":  # the residual goes through L_i too
                parts[rows, rows + start] += self.x[start:stop]
                parts = part.linear(parts)
            else:  # sandwich: x + N(attention)
                parts = part.linear(parts)
                parts[rows, rows + start] += self.x[start:stop]
        return Decomposition(parts, self.bias[start:stop], self.real[start:stop])


def decompose(layer: Layer64, given: LayerInput, heads: int, recorded: dict) -> Decomposition:
    """ALTI's decomposition of one layer's attention block from a recorded plain re-run: every query at once,
    a (t, t, hidden) array (for checks; alti_raw works in chunks)."""
    decomposer = Decomposer(layer, given, heads, recorded)
    return decomposer.rows(0, decomposer.pieces)


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
                     f"{type(layer.layer).__name__} receives it, so its block is of another form: context mixing "
                     "cannot run on this model")


def alti_contributions(decomposition: Decomposition):
    """(rows, t) raw c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), y_i the decomposed output."""
    y = decomposition.output  # (rows, hidden)
    distance = (y[:, None, :] - decomposition.parts).abs().sum(dim=-1)  # (rows, t), exact L1
    return (y.abs().sum(dim=-1)[:, None] - distance).clamp(min=0)


def _contributions_in_place(decomposition: Decomposition):
    """alti_contributions with the distances taken in the parts' own memory (the same numbers: -p + y is y - p
    to the bit); the decomposition's parts are used up."""
    parts = decomposition.parts
    y = parts.sum(dim=1) + decomposition.bias  # (rows, hidden), as Decomposition.output
    distance = parts.neg_().add_(y[:, None, :]).abs_().sum(dim=-1)  # (rows, t)
    return (y.abs().sum(dim=-1)[:, None] - distance).clamp(min=0)


def alti_rows(t: int, hidden: int, budget: int = ALTI_BUDGET) -> int:
    """How many queries of a t-piece sentence one chunk takes within `budget` bytes (at least 1)."""
    return max(1, budget // (LIVE_COPIES * 8 * t * hidden))


def alti_raw(layer: Layer64, given: LayerInput, heads: int, recorded: dict, budget: int = ALTI_BUDGET):
    """(t, t) raw ALTI contributions of one layer, the queries taken in chunks of alti_rows(t, hidden, budget)."""
    import torch

    decomposer = Decomposer(layer, given, heads, recorded)
    t, hidden = decomposer.pieces, int(decomposer.x.shape[-1])
    size = alti_rows(t, hidden, budget)
    if size >= t:  # one chunk: the whole array
        return _contributions_in_place(decomposer.rows(0, t))
    return torch.cat([_contributions_in_place(decomposer.rows(start, min(start + size, t)))
                      for start in range(0, t, size)])
