"""Per-head statistics, defined once, and labels: where the focus word looks, which heads look back, ahead, at markers.

`kernel` is the one merge-and-statistics kernel of `run` and `heads --corpus`: a batch of piece maps of one
layer in, unit maps and/or per-sentence totals out. `sentence_totals` is the only definition of every statistic; each
is pooled: its sum over every qualifying query unit of every sentence, over the number of such units.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypedDict

import numpy as np

from .checks import is_number, is_whole, shown
from .errors import InputError
from .models import float64_device
from .words import FIRST_SPECIAL, LAST_SPECIAL, MARKER_KINDS, PAD, PUNCT, WordAttention, assignment, merge_maps

# "Previous" and "next" are defined here, once: the key sits at query index + offset.
PREVIOUS_OFFSET = -1
NEXT_OFFSET = +1

# The per-head statistics, in table order:
#   prev / next / self: W[i, i-1] / W[i, i+1] / W[i, i] (prev over query units i >= 1, next over i <= n-2);
#   first: the row's weight on the first unit, whatever it is ([CLS], <s>, or the first word when the tokenizer
#   adds no special token): the attention sink of decoders (Xiao et al. 2023);
#   first_special / last_special / punct: the row's weight on the special token the tokenizer put first ([CLS],
#   <s>, ...) / last ([SEP], </s>, ...) / on punctuation-only words;
#   markers: the row's weight on every marker (real_attention.engine.words.MARKER_KINDS: every special token the
#   tokenizer added, and punctuation-only words);
#   entropy: the row's entropy in nats, 0 log 0 = 0.
STATISTICS = ("prev", "next", "self", "first", "first_special", "last_special", "punct", "markers", "entropy")
PAIR_STATISTICS = ("prev", "next")  # pooled over query units that have a previous (a next) unit: n - 1 each
# A decoder (causal=True) sees only the keys up to the query: W[i, j] = 0 for j > i. Its first unit sees only
# itself (its row is one 1), so it enters no statistic: every statistic is pooled over query units i >= 1, and
# the weight on the next unit is 0 by construction. Entropy is compared with uniform attention over the keys a
# row sees: ln(i + 1) for query unit i (an encoder's row sees all n: ln n).


def first_query(causal: bool) -> int:
    """The first query unit that enters the statistics: 1 for a decoder (unit 0 sees only itself), else 0."""
    return 1 if causal else 0


# --- exact sums ----------------------------------------------------------------------------------------------
# Pooled sums must not depend on how a corpus is split (shards, Dask partitions, the order sentences are added in).
# Each sentence's totals (float64, one per statistic and head) are rounded to a whole multiple of 2**-FIXED_BITS
# and carried as integers: int64 on the device, Python ints (unbounded) on the host and in sums.json. Integers add
# exactly in any order, so the pooled sums are a function of the per-sentence values alone. (Those values are the
# model's float32 arithmetic: on a CPU, a sentence's maps can differ in the last bits with the shape of its batch;
# see docs/device.md.) The rounding moves a mean by at most 2**-33 per query unit, far below the 6 decimals written.
FIXED_BITS = 32
FIXED_SCALE = float(2**FIXED_BITS)
# The largest unit count whose sums stay exact in float64: a sentence's entropy total n ln n times 2**FIXED_BITS
# below 2**53 (n ln n < 2**21: n up to about 170,000 units).
EXACT_UNITS = 150_000


def to_fixed(values):
    """float64 tensor -> the same shape, integer-valued float64: round(values * 2**FIXED_BITS), half to even."""
    return values.mul(FIXED_SCALE).round_()


def fixed_sum(values) -> int:
    """The exact sum of floats (any iterable) in fixed point: sum of round(v * 2**FIXED_BITS), a Python int."""
    return sum(int(round(float(v) * FIXED_SCALE)) for v in values)


def from_fixed(fixed) -> np.ndarray:
    """Python ints (an object array or a number) -> float64 value(s): fixed / 2**FIXED_BITS, correctly rounded."""
    array = np.asarray(fixed, dtype=object)
    return np.vectorize(lambda v: int(v) / (1 << FIXED_BITS), otypes=[np.float64])(array) if array.size else \
        np.zeros(array.shape)


def entropy_terms(rows):
    """-p ln p of every element of float rows (any shape), 0 ln 0 = 0: summed over a row, its entropy in nats
    (Clark et al. 2019, Sec. 3.3). The one definition of the `entropy` statistic (sentence_totals sums it)."""
    return _p_log_p(rows).neg_()


def _p_log_p(rows):
    """p ln p elementwise, 0 ln 0 = 0 (the clamp keeps log finite; 0 times it is 0): one temporary, `rows` kept."""
    import torch

    return rows.clamp(min=torch.finfo(rows.dtype).tiny).log_().mul_(rows)


def key_sets(kinds, dtype):
    """(B, n) Kind codes -> (B, 5, n) the keys of first, first_special, last_special, punct and markers, as 0/1 in
    `dtype`: the same for every layer of a batch."""
    import torch

    markers = torch.zeros_like(kinds, dtype=torch.bool)
    for kind in MARKER_KINDS:  # not torch.isin: its tensor of kinds would be a copy to the device, which waits
        markers |= kinds == kind
    first = torch.zeros_like(markers)
    first[:, 0] = True  # the first unit of every sentence (a batch has no empty sentence)
    return torch.stack([first, kinds == FIRST_SPECIAL, kinds == LAST_SPECIAL, kinds == PUNCT, markers],
                       dim=1).to(dtype)  # (B, 5, n)


def sentence_totals(maps, kinds, causal: bool = False, keys=None):
    """Every statistic of one layer for each sentence of a batch, in torch on the maps' device.

    maps: (B, H, n, n) unit maps (query x key), all-zero rows and columns for pads; kinds: (B, n) Kind codes,
    PAD for pads; causal: a decoder's maps, whose query unit 0 enters no statistic; keys: key_sets(kinds,
    maps.dtype) if the caller has it. Returns
    (B, len(STATISTICS), H) int64: each sentence's totals (summed over its query units in the maps' dtype, then
    float64) rounded to fixed point, 2**-FIXED_BITS, so that any grouping of sentences adds them up exactly; the
    weight on a set of keys is the sum of its keys' received weights each rounded so (exact in any order).
    Pads add exactly 0. (On MPS, which has no float64, the totals come back on the CPU.)
    """
    import torch

    assert maps.shape[-1] <= EXACT_UNITS, maps.shape
    start = first_query(causal)
    queries = maps[:, :, start:, :]  # (B, H, n - start, n) a view: row r is query unit r + start
    per_row = [
        torch.diagonal(queries, PREVIOUS_OFFSET + start, dim1=2, dim2=3).sum(dim=-1),  # prev: W[i, i-1], (B, H)
        torch.diagonal(queries, NEXT_OFFSET + start, dim1=2, dim2=3).sum(dim=-1),  # next: W[i, i+1]
        torch.diagonal(queries, start, dim1=2, dim2=3).sum(dim=-1),  # self: W[i, i]
        -_p_log_p(queries).sum(dim=(2, 3)),  # entropy in nats: entropy_terms, negated after the sum
    ]
    rows = torch.stack(per_row, dim=1)  # (B, 4, H)
    keys = key_sets(kinds, maps.dtype) if keys is None else keys  # (B, 5, n)
    received = queries.sum(dim=2)  # (B, H, key n): the weight each key gets from all queries
    # float64 where the device has it (on MPS these few numbers move to the CPU: models.float64_device)
    wide = float64_device(maps.device)
    # Each key's weight in fixed point before the key sets add them: whole numbers below 2**53 (they sum to at most
    # n * 2**FIXED_BITS) add exactly in float64 in any order. A float32 product would not: MKL's batched product
    # sums a row's keys in an order that depends on the batch's size and the thread count (markers, many keys).
    on_keys = torch.bmm(keys.to(wide, torch.float64), to_fixed(received.to(wide, torch.float64)).transpose(1, 2))
    values = to_fixed(rows.to(wide, torch.float64))  # (B, 4, H)
    fixed = torch.cat([values[:, :3], on_keys, values[:, 3:]], dim=1)  # (B, 9, H) in STATISTICS order
    return fixed.to(torch.int64)


class KernelBatch(NamedTuple):
    """What the kernel needs of a batch besides its maps, made once for all its layers (kernel_batch)."""

    units: Any  # (B, t) unit of each piece, -1 for pads
    kinds: Any  # (B, n) Kind codes, PAD for pads
    matrices: Any  # words.assignment(units, n, float32): the merge's (B, n, t) matrices
    keys: Any  # key_sets(kinds, float32): the (B, 5, n) key sets of the statistics


def kernel_batch(units, kinds) -> KernelBatch:
    """units (B, t), kinds (B, n) on the maps' device -> the KernelBatch of every layer of the batch."""
    import torch

    return KernelBatch(units, kinds, assignment(units, kinds.shape[1], torch.float32), key_sets(kinds, torch.float32))


def kernel(weights, units, kinds=None, keep_maps: bool = False, causal: bool = False):
    """The one merge-and-statistics kernel: one layer's piece maps of a batch -> (unit maps or None, totals).

    weights: (B, H, t, t) post-softmax piece weights; units: (B, t) unit of each piece, -1 for pads, and
    kinds: (B, n) Kind codes, PAD for pads; or units: a KernelBatch (kernel_batch) and no kinds: the same, with
    what every layer shares made once. All on one device; causal: a decoder's maps. Returns the (B, H, n, n) unit
    maps if keep_maps, and the (B, len(STATISTICS), H) int64 fixed-point totals of each sentence
    (sentence_totals), in float32 whatever precision the model computes in (as `run` does).
    """
    batch = units if isinstance(units, KernelBatch) else kernel_batch(units, kinds)
    maps = merge_maps(weights.float(), batch.units, batch.kinds.shape[1], batch.matrices)
    return (maps if keep_maps else None), sentence_totals(maps, batch.kinds, causal, batch.keys)


class SentenceCounts(TypedDict):
    """The counts that sentences add to HeadSums, by field name (a plain dict at run time)."""

    sentences: int
    units: int
    pairs: int
    uniform_fixed: int  # the uniform entropy in fixed point, 2**-FIXED_BITS
    tokens: int


def sentence_counts(units: list[int], pieces: int = 0, causal: bool = False) -> SentenceCounts:
    """The counts that sentences of `units` units each add to HeadSums; pieces: their pieces, if known.

    An encoder's n query units each see n keys (uniform entropy ln n each); a decoder's query units 1..n-1
    each see i + 1 keys (ln(i + 1) each, ln n! in all; its unit 0 enters no statistic). `uniform_fixed`: the sum
    of each sentence's uniform entropy rounded to 2**-FIXED_BITS (exact, whatever the split).
    """
    sizes = [int(size) for size in units]
    if causal:
        uniform = fixed_sum(math.lgamma(size + 1) for size in sizes)  # sum of ln(i + 1), i = 1..n-1
    else:
        uniform = fixed_sum(size * math.log(size) for size in sizes)
    return {
        "sentences": len(sizes),
        "units": sum(sizes) - first_query(causal) * len(sizes),
        "pairs": sum(sizes) - len(sizes),
        "uniform_fixed": uniform,
        "tokens": pieces,
    }


def sentence_bound(units: list[int]) -> int:
    """An upper bound of any statistic's fixed-point total over sentences of `units` units each (for the int64
    accumulator): a sentence's weights sum to at most n (one per query row), its entropy to at most n ln n."""
    return sum((int(size * max(1.0, math.log(size))) + 2) << FIXED_BITS for size in units)


class FixedAccumulator:
    """Per-head running sums in int64 fixed point on the maps' device (on MPS the CPU, where sentence_totals leaves
    them), moved to host Python ints (unbounded) before they could overflow: only (len(STATISTICS), layers, heads)
    integers ever travel to the host."""

    LIMIT = 1 << 62

    def __init__(self, layers: int, heads: int, device) -> None:
        import torch

        self.device = float64_device(device)
        self.sums = torch.zeros((len(STATISTICS), layers, heads), dtype=torch.int64, device=self.device)
        self.host = np.zeros((len(STATISTICS), layers, heads), dtype=object)
        self.host[...] = 0
        self.bound = 0

    def reserve(self, units: list[int]) -> None:
        """Make room for a batch of sentences of `units` units each (call before adding their totals)."""
        batch = sentence_bound(units)
        assert batch < self.LIMIT, "a batch whose sums could overflow int64"
        if self.bound + batch >= self.LIMIT:
            self.flush()
        self.bound += batch

    def add(self, layer: int, totals) -> None:
        """totals: (B, len(STATISTICS), H) int64 sentence_totals of one layer."""
        self.sums[:, layer] += totals.sum(dim=0)

    def add_layers(self, totals) -> None:
        """totals: (B, len(STATISTICS), layers, H) int64 sentence_totals of every layer."""
        self.sums += totals.sum(dim=0)

    def flush(self) -> None:
        self.host = self.host + self.sums.cpu().numpy().astype(object)
        self.sums.zero_()
        self.bound = 0

    def result(self) -> np.ndarray:
        """(len(STATISTICS), layers, heads) object array of Python ints: the exact fixed-point totals."""
        self.flush()
        return self.host


def _to_fixed_ints(values) -> np.ndarray:
    """float totals -> object array of Python ints, round(v * 2**FIXED_BITS) (half to even)."""
    array = np.asarray(values, dtype=np.float64)
    result = np.empty(array.shape, dtype=object)
    result.reshape(-1)[:] = [int(round(v * FIXED_SCALE)) for v in array.reshape(-1).tolist()]
    return result


def _as_ints(values) -> np.ndarray:
    array = np.asarray(values, dtype=object)
    result = np.empty(array.shape, dtype=object)
    result.reshape(-1)[:] = [int(v) for v in array.reshape(-1).tolist()]
    return result


@dataclass(frozen=True)
class HeadSums:
    """Exact running sums over (part of) a corpus. `a + b` is the sums over both parts, exactly: the same bits
    in any order and for any split (every total is an integer number of 2**-FIXED_BITS, `fixed`)."""

    # (len(STATISTICS), layers, heads) float64: each statistic summed over its query units, fixed / 2**FIXED_BITS.
    # Given alone (no `fixed`), it is rounded to fixed point.
    totals: np.ndarray = field(default_factory=lambda: np.zeros((len(STATISTICS), 0, 0)))
    sentences: int = 0  # sentences run through the model
    units: int = 0  # query units that enter the statistics: the denominator of every statistic but prev and next
    pairs: int = 0  # query units with a previous unit (as many have a next one): the denominator of prev, next
    uniform: float = 0.0  # sum over query units of ln(keys it sees): the entropy of uniform attention, for "broad"
    tokens: int = 0  # pieces run through the model, specials included, pads not
    lines: int = 0  # lines of the file read for this shard, blank ones included
    blank: int = 0  # blank lines, skipped
    skipped: int = 0  # lines over the model's maximum length, skipped
    truncated: int = 0  # lines over the model's maximum length, cut (with --truncate)
    causal: bool = False  # a decoder's sums: query unit 0 of each sentence left out, uniform entropy ln(i + 1)
    # The exact totals: (len(STATISTICS), layers, heads) object array of Python ints, in units of 2**-FIXED_BITS.
    fixed: np.ndarray | None = field(default=None, repr=False, compare=False)
    uniform_fixed: int | None = None  # `uniform` in units of 2**-FIXED_BITS

    def __post_init__(self) -> None:
        fixed = _to_fixed_ints(self.totals) if self.fixed is None else _as_ints(self.fixed)
        assert fixed.ndim == 3 and fixed.shape[0] == len(STATISTICS), fixed.shape
        uniform = int(round(float(self.uniform) * FIXED_SCALE)) if self.uniform_fixed is None else int(self.uniform_fixed)
        object.__setattr__(self, "fixed", fixed)
        object.__setattr__(self, "totals", from_fixed(fixed).reshape(fixed.shape))
        object.__setattr__(self, "uniform_fixed", uniform)
        object.__setattr__(self, "uniform", uniform / (1 << FIXED_BITS))

    @classmethod
    def zeros(cls, layers: int, heads: int) -> HeadSums:
        return cls(totals=np.zeros((len(STATISTICS), layers, heads)))

    @property
    def exact(self) -> np.ndarray:
        """The (len(STATISTICS), layers, heads) fixed-point totals as Python ints."""
        assert self.fixed is not None
        return self.fixed

    @property
    def shape(self) -> tuple[int, int]:
        return self.exact.shape[1], self.exact.shape[2]

    def __add__(self, other: HeadSums) -> HeadSums:
        if self.shape != other.shape:
            raise InputError(f"cannot add sums of {self.shape} heads to sums of {other.shape} heads")
        if self.causal != other.causal:
            raise InputError("cannot add the sums of a decoder (causal) to those of an encoder")
        counts = {name: getattr(self, name) + getattr(other, name) for name in COUNT_FIELDS if name != "uniform"}
        return HeadSums(fixed=self.exact + other.exact, uniform_fixed=self.uniform_fixed + other.uniform_fixed,  # type: ignore[operator]
                        causal=self.causal, **counts)

    def means(self) -> dict[str, np.ndarray]:
        """Each statistic's pooled mean, (layers, heads) float64: the exact total over the count of its units,
        correctly rounded (a function of the exact sums alone)."""
        result = {}
        for index, name in enumerate(STATISTICS):
            count = self.pairs if name in PAIR_STATISTICS else self.units
            if count:
                scale = count << FIXED_BITS
                result[name] = np.array([v / scale for v in self.exact[index].reshape(-1).tolist()],
                                        dtype=np.float64).reshape(self.shape)
            else:
                result[name] = np.full(self.shape, np.nan)
        return result

    @property
    def uniform_entropy(self) -> float:
        """The mean row entropy that uniform attention over the same rows would have, in nats."""
        assert self.uniform_fixed is not None
        return self.uniform_fixed / (self.units << FIXED_BITS) if self.units else math.nan

    def to_json(self) -> dict:
        """Every sum and count; totals and uniform as whole numbers of 2**-fixed_point_bits (exact)."""
        layers, heads = self.shape
        data: dict = {name: getattr(self, name) for name in COUNT_FIELDS}
        data.update(uniform=self.uniform_fixed, fixed_point_bits=FIXED_BITS, layers=layers, heads=heads,
                    causal=self.causal, totals={name: self.exact[i].tolist() for i, name in enumerate(STATISTICS)})
        return data

    @classmethod
    def from_json(cls, data: dict) -> HeadSums:
        """The sums of to_json, checked (check_sums_json): ValueError names the first field that is wrong. Sums
        written before fixed point (float totals, no fixed_point_bits) are rounded to it."""
        check_sums_json(data)
        counts = {name: data[name] for name in COUNT_FIELDS if name != "uniform"}
        if "fixed_point_bits" in data:
            fixed = np.empty((len(STATISTICS), data["layers"], data["heads"]), dtype=object)
            for i, name in enumerate(STATISTICS):
                fixed[i] = [[int(v) for v in row] for row in data["totals"][name]]
            return cls(fixed=fixed, uniform_fixed=data["uniform"], causal=data.get("causal", False), **counts)
        totals = np.array([data["totals"][name] for name in STATISTICS], dtype=np.float64)
        return cls(totals=totals, uniform=data["uniform"], causal=data.get("causal", False), **counts)


COUNT_FIELDS = ("sentences", "units", "pairs", "uniform", "tokens", "lines", "blank", "skipped", "truncated")
# A sum of weights may exceed its count by the rounding of rows that sum to 1 (float32; a half-precision model's
# rows are rounded to 8 bits), never by more than this fraction.
SUM_SLACK = 1e-2


def _finite(value: int | float) -> bool:
    """Whether a JSON number is a finite float64: JSON's whole numbers have no bound, and 10**400 is too large
    for one (math.isfinite and `/` raise OverflowError on it)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def check_sums_json(data) -> None:
    """ValueError naming the field of a sums.json (HeadSums.to_json) that no corpus run can have written.

    Every number must be finite and >= 0, every count a whole number, a statistic's total at most its count
    (each query unit's weights sum to 1) and the entropy's total at most that of uniform attention. Sums that
    break one of these would give NaN, infinite or above-1 means. With `fixed_point_bits` (sums written since the
    exact accumulator), `uniform` and every total are whole numbers of 2**-fixed_point_bits.
    """
    if not isinstance(data, dict):
        raise ValueError("it is not a JSON object")
    for name in ("layers", "heads"):
        if not is_whole(data.get(name)) or data[name] < 1:
            raise ValueError(f"field {name!r} is {data.get(name)!r}, not a whole number >= 1")
    bits = data.get("fixed_point_bits")
    if bits is not None and bits != FIXED_BITS:
        raise ValueError(f"field 'fixed_point_bits' is {bits!r}, not {FIXED_BITS} (the fixed point this version writes)")
    fixed = bits is not None
    scale = float(2**FIXED_BITS) if fixed else 1.0
    for name in COUNT_FIELDS:
        value: Any = data.get(name)
        if name == "uniform" and fixed:
            if not is_whole(value) or value < 0:
                raise ValueError(f"field 'uniform' is {value!r}, not a whole number >= 0 (of 2**-{bits})")
        elif name == "uniform":
            if not is_number(value) or not _finite(value) or value < 0:
                raise ValueError(f"field 'uniform' is {shown(value)}, not a finite number >= 0")
        elif not is_whole(value) or value < 0:
            raise ValueError(f"field {name!r} is {value!r}, not a whole number >= 0")
        if not _finite(value):  # a whole number beyond float64 (the means divide by it)
            raise ValueError(f"field {name!r} is {shown(value)}, more than a float64 holds")
    causal = data.get("causal", False)  # sums written before decoders were supported: an encoder's
    if not isinstance(causal, bool):
        raise ValueError(f"field 'causal' is {causal!r}, not true or false")
    if not causal and data["units"] < data["sentences"]:  # an encoder's sentence has at least one query unit
        raise ValueError(f"field 'units' is {data['units']}, fewer than the {data['sentences']} sentences")
    if data["pairs"] > data["units"]:
        raise ValueError(f"field 'pairs' is {data['pairs']}, more than the {data['units']} units")
    if data["truncated"] > data["sentences"]:
        raise ValueError(f"field 'truncated' is {data['truncated']}, more than the {data['sentences']} sentences")
    read = data["blank"] + data["sentences"] + data["skipped"]  # each line read is one of these (or left out)
    if data["lines"] and read > data["lines"]:  # 0: lines not counted (sums of sentences given, not of a corpus)
        raise ValueError(f"fields 'blank', 'sentences' and 'skipped' add up to {read}, more than the "
                         f"{data['lines']} lines read")
    totals = data.get("totals")
    if not isinstance(totals, dict):
        raise ValueError("field 'totals' is not an object of the statistics")
    shape = (data["layers"], data["heads"])
    for name in STATISTICS:
        field = f"totals.{name}"
        rows = totals.get(name)
        if (not isinstance(rows, list) or len(rows) != shape[0]
                or any(not isinstance(row, list) or len(row) != shape[1] for row in rows)):
            raise ValueError(f"field {field!r} is not {shape[0]} lists of {shape[1]} numbers (layers x heads)")
        bad = [(l, h, v) for l, row in enumerate(rows) for h, v in enumerate(row)
               if (not is_whole(v) if fixed else not is_number(v)) or not _finite(v) or v < 0]
        if bad:
            layer, head, value = bad[0]
            why = ("more than a float64 holds" if is_whole(value) and value > 0 else
                   f"not a whole number >= 0 (of 2**-{bits})" if fixed else "not a finite number >= 0")
            raise ValueError(f"field {field!r} is {shown(value)} at layer {layer + 1}, head {head + 1}, {why}")
        count = data["uniform"] / scale if name == "entropy" else data["pairs"] if name in PAIR_STATISTICS \
            else data["units"]
        most = max(max(row) for row in rows) / scale  # every total and count is a finite float64 (checked above)
        if most > count * (1 + SUM_SLACK) + SUM_SLACK:
            what = "the entropy of uniform attention, 'uniform'" if name == "entropy" else (
                f"its count, {'pairs' if name in PAIR_STATISTICS else 'units'}")
            raise ValueError(f"field {field!r} reaches {most!r}, above {what} ({count!r}): a mean above "
                             f"{'uniform' if name == 'entropy' else '1'}")


def word_sums(attentions: list[WordAttention], causal: bool = False) -> HeadSums:
    """Pooled sums of every statistic over word-level maps, without a model (sentence_totals on a padded batch)."""
    import torch

    assert attentions, "at least one sentence"
    layers, heads = attentions[0].layers, attentions[0].heads
    n = max(len(a.words) for a in attentions)
    weights = np.zeros((len(attentions), layers, heads, n, n), dtype=np.float32)  # (B, L, H, n, n), zero pads
    kinds = np.full((len(attentions), n), PAD, dtype=np.int64)
    for row, attention in enumerate(attentions):
        size = len(attention.words)
        weights[row, :, :, :size, :size] = attention.weights
        kinds[row, :size] = attention.kinds
    kinds_t = torch.from_numpy(kinds)
    accumulator = FixedAccumulator(layers, heads, "cpu")
    accumulator.reserve([len(a.words) for a in attentions])
    for layer in range(layers):
        accumulator.add(layer, sentence_totals(torch.from_numpy(weights[:, layer]), kinds_t, causal))
    return HeadSums(fixed=accumulator.result(), causal=causal,
                    **sentence_counts([len(a.words) for a in attentions], causal=causal))


@dataclass(frozen=True)
class HeadReport:
    """Every head's scores over S sentences. Indices are 0-based; tables add 1."""

    top_key: np.ndarray  # (S, layers, heads) int, unit index of the focus row's largest weight
    top_weight: np.ndarray  # (S, layers, heads) that largest weight
    sense_weight: np.ndarray  # (S, layers, heads) the focus row's weight on the sense word
    marker_weight: np.ndarray  # (S, layers, heads) the focus row's weight summed over markers
    top_is_marker: np.ndarray  # (S, layers, heads) bool
    sense_head: np.ndarray  # (layers, heads) bool: top key is the sense word in every sentence
    marker_head: np.ndarray  # (layers, heads) bool: top key is a marker in every sentence
    # The pooled statistics of sentence_totals, each (layers, heads) float64, over every sentence's query units.
    prev: np.ndarray
    next: np.ndarray
    self: np.ndarray
    first: np.ndarray
    first_special: np.ndarray
    last_special: np.ndarray
    punct: np.ndarray
    markers: np.ndarray
    entropy: np.ndarray
    causal: bool = False  # a decoder's heads: no query sees the next word

    @property
    def shape(self) -> tuple[int, int]:
        return self.sense_head.shape

    @property
    def best_sense_head(self) -> tuple[int, int] | None:
        """The sense head with the largest summed sense weight; ties go to the lowest (layer, head)."""
        if not self.sense_head.any():
            return None
        total = np.where(self.sense_head, self.sense_weight.sum(axis=0), -np.inf)
        return _first_argmax(total)

    @property
    def prev_head(self) -> tuple[int, int]:
        return _first_argmax(self.prev)

    @property
    def next_head(self) -> tuple[int, int] | None:
        """The strongest next-word head; None for a decoder, whose heads cannot see the next word."""
        return None if self.causal else _first_argmax(self.next)

    @property
    def first_head(self) -> tuple[int, int]:
        """The head that puts the most weight on the first unit (the attention sink of decoders)."""
        return _first_argmax(self.first)

    @property
    def marker_score_head(self) -> tuple[int, int]:
        return _first_argmax(self.markers)

    @property
    def marker_head_count_per_sentence(self) -> list[int]:
        return [int(count) for count in self.top_is_marker.sum(axis=(1, 2))]


def _first_argmax(scores: np.ndarray) -> tuple[int, int]:
    """(layers, heads) -> the (layer, head) of the largest score; np.argmax keeps the first, the lowest."""
    layer, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
    return int(layer), int(head)


SCORES = ("top_key", "top_weight", "sense_weight", "marker_weight", "top_is_marker")  # HeadReport's per-sentence fields


def focus_scores(sentences: list) -> dict[str, np.ndarray]:
    """Where the focus word of each FocusedSentence looks, in every head: SCORES, each (S, layers, heads).

    Needs the sentences' maps; a run of many sentences scores them batch by batch and joins the scores
    (report_from_scores), so no more than a batch of maps is held at once.
    """
    top_key, top_weight, sense_weight, marker_weight, top_is_marker = [], [], [], [], []
    for sentence in sentences:
        is_marker = sentence.attention.markers  # (n,)
        focus_row = sentence.attention.weights[:, :, sentence.focus, :]  # (layers, heads, n)
        top = focus_row.argmax(axis=-1)  # (layers, heads)
        top_key.append(top)
        top_weight.append(focus_row.max(axis=-1))
        sense_weight.append(focus_row[:, :, sentence.sense])
        marker_weight.append(focus_row[:, :, is_marker].sum(axis=-1))
        top_is_marker.append(is_marker[top])
    return dict(zip(SCORES, map(np.stack, (top_key, top_weight, sense_weight, marker_weight, top_is_marker))))


def report_from_scores(scores: dict[str, np.ndarray], senses: np.ndarray, sums: HeadSums,
                       causal: bool = False) -> HeadReport:
    """Label every head from focus_scores over S sentences, the (S,) unit index of each sense word and the pooled
    sums of the same sentences."""
    top_key = scores["top_key"]
    return HeadReport(
        **scores,
        sense_head=(top_key == senses[:, None, None]).all(axis=0),
        marker_head=np.all(scores["top_is_marker"], axis=0),
        **sums.means(),
        causal=causal,
    )


def classify(sentences: list, sums: HeadSums | None = None, causal: bool = False) -> HeadReport:
    """Score and label every head over FocusedSentences (real_attention.engine.focus).

    sums: the pooled sums of the same sentences if already computed (real_attention.engine.pipeline gets them from the
    forward pass); otherwise word_sums computes them from the word-level maps. causal: a decoder's maps.
    """
    assert sentences, "at least one sentence"
    shapes = {(s.attention.layers, s.attention.heads) for s in sentences}
    assert len(shapes) == 1, shapes
    if sums is None:
        sums = word_sums([s.attention for s in sentences], causal)
    return report_from_scores(focus_scores(sentences), np.array([s.sense for s in sentences]), sums, causal)
