"""Per-head statistics, defined once, and labels: where the focus word looks, which heads look back, ahead, at markers.

`kernel` is the one merge-and-statistics kernel of `run` and `heads --corpus`: a batch of piece maps of one
layer in, unit maps and/or per-head totals out. `unit_totals` is the only definition of every statistic; each
is pooled: its sum over every qualifying query unit of every sentence, over the number of such units.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TypedDict, TypeGuard

import numpy as np

from .errors import InputError
from .words import FIRST_SPECIAL, LAST_SPECIAL, MARKER_KINDS, PAD, PUNCT, WordAttention, merge_maps

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


def unit_totals(maps, kinds, causal: bool = False):
    """Every statistic of one layer, summed over the query units of a batch that enter them, in torch.

    maps: (B, H, n, n) unit maps (query x key), all-zero rows and columns for pads; kinds: (B, n) Kind codes,
    PAD for pads; causal: a decoder's maps, whose query unit 0 enters no statistic. Returns
    (len(STATISTICS), H) float64 totals on the maps' device. Pads add exactly 0.
    """
    import torch

    start = first_query(causal)
    queries = maps[:, :, start:, :]  # (B, H, n - start, n) a view: row r is query unit r + start
    per_row = [
        torch.diagonal(queries, PREVIOUS_OFFSET + start, dim1=2, dim2=3).sum(dim=-1),  # prev: W[i, i-1], (B, H)
        torch.diagonal(queries, NEXT_OFFSET + start, dim1=2, dim2=3).sum(dim=-1),  # next: W[i, i+1]
        torch.diagonal(queries, start, dim1=2, dim2=3).sum(dim=-1),  # self: W[i, i]
        # entropy in nats, 0 log 0 = 0 (the clamp keeps log finite; 0 times it is 0); in place: one temporary
        -queries.clamp(min=torch.finfo(maps.dtype).tiny).log_().mul_(queries).sum(dim=(2, 3)),
    ]
    rows = torch.stack(per_row).to(torch.float64).sum(dim=1)  # (4, H): per (b, h) in the maps' dtype, then b in float64
    markers = torch.isin(kinds, torch.tensor(MARKER_KINDS, device=kinds.device))
    first = torch.zeros_like(markers)
    first[:, 0] = True  # the first unit of every sentence (a batch has no empty sentence)
    key_sets = torch.stack([first, kinds == FIRST_SPECIAL, kinds == LAST_SPECIAL, kinds == PUNCT, markers],
                           dim=-1).to(torch.float64)  # (B, n, 5)
    received = queries.sum(dim=2).to(torch.float64)  # (B, H, key n): the weight each key gets from all queries
    on_keys = torch.einsum("bhk,bkc->ch", received, key_sets)  # (5, H): first, first_special, last_special, punct, markers
    return torch.cat([rows[:3], on_keys, rows[3:]])  # (9, H) in STATISTICS order


def kernel(weights, units, kinds, keep_maps: bool = False, causal: bool = False):
    """The one merge-and-statistics kernel: one layer's piece maps of a batch -> (unit maps or None, totals).

    weights: (B, H, t, t) post-softmax piece weights; units: (B, t) unit of each piece, -1 for pads;
    kinds: (B, n) Kind codes, PAD for pads; all on one device; causal: a decoder's maps. Returns the
    (B, H, n, n) unit maps if keep_maps, and the (len(STATISTICS), H) float64 totals of unit_totals.
    """
    maps = merge_maps(weights, units, kinds.shape[1])
    return (maps if keep_maps else None), unit_totals(maps, kinds, causal)


class SentenceCounts(TypedDict):
    """The counts that sentences add to HeadSums, by field name (a plain dict at run time)."""

    sentences: int
    units: int
    pairs: int
    uniform: float
    tokens: int


def sentence_counts(units: list[int], pieces: int = 0, causal: bool = False) -> SentenceCounts:
    """The counts that sentences of `units` units each add to HeadSums; pieces: their pieces, if known.

    An encoder's n query units each see n keys (uniform entropy ln n each); a decoder's query units 1..n-1
    each see i + 1 keys (ln(i + 1) each, ln n! in all; its unit 0 enters no statistic).
    """
    sizes = np.array(units, dtype=np.int64)
    if causal:
        uniform = float(sum(math.lgamma(size + 1) for size in sizes.tolist()))  # sum of ln(i + 1), i = 1..n-1
    else:
        uniform = float((sizes * np.log(sizes)).sum())
    return {
        "sentences": len(sizes),
        "units": int((sizes - first_query(causal)).sum()),
        "pairs": int((sizes - 1).sum()),
        "uniform": uniform,
        "tokens": pieces,
    }


@dataclass(frozen=True)
class HeadSums:
    """Exact running sums over (part of) a corpus. `a + b` is the sums over both parts."""

    totals: np.ndarray  # (len(STATISTICS), layers, heads) float64: each statistic summed over its query units
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

    def __post_init__(self) -> None:
        assert self.totals.ndim == 3 and self.totals.shape[0] == len(STATISTICS), self.totals.shape
        assert self.totals.dtype == np.float64

    @classmethod
    def zeros(cls, layers: int, heads: int) -> HeadSums:
        return cls(totals=np.zeros((len(STATISTICS), layers, heads)))

    @property
    def shape(self) -> tuple[int, int]:
        return self.totals.shape[1], self.totals.shape[2]

    def __add__(self, other: HeadSums) -> HeadSums:
        if self.shape != other.shape:
            raise InputError(f"cannot add sums of {self.shape} heads to sums of {other.shape} heads")
        if self.causal != other.causal:
            raise InputError("cannot add the sums of a decoder (causal) to those of an encoder")
        counts = {name: getattr(self, name) + getattr(other, name) for name in COUNT_FIELDS}
        return HeadSums(totals=self.totals + other.totals, causal=self.causal, **counts)

    def means(self) -> dict[str, np.ndarray]:
        """Each statistic's pooled mean, (layers, heads) float64: the total over the count of its units."""
        result = {}
        for index, name in enumerate(STATISTICS):
            count = self.pairs if name in PAIR_STATISTICS else self.units
            result[name] = self.totals[index] / count if count else np.full(self.shape, np.nan)
        return result

    @property
    def uniform_entropy(self) -> float:
        """The mean row entropy that uniform attention over the same rows would have, in nats."""
        return self.uniform / self.units if self.units else math.nan

    def to_json(self) -> dict:
        """Every sum and count; json writes floats with repr, so reading it back is exact."""
        layers, heads = self.shape
        data = {name: getattr(self, name) for name in COUNT_FIELDS}
        data.update(layers=layers, heads=heads, causal=self.causal,
                    totals={name: self.totals[i].tolist() for i, name in enumerate(STATISTICS)})
        return data

    @classmethod
    def from_json(cls, data: dict) -> HeadSums:
        """The sums of to_json, checked (check_sums_json): ValueError names the first field that is wrong."""
        check_sums_json(data)
        totals = np.array([data["totals"][name] for name in STATISTICS], dtype=np.float64)
        counts = {name: data[name] for name in COUNT_FIELDS}
        return cls(totals=totals, causal=data.get("causal", False), **counts)


COUNT_FIELDS = ("sentences", "units", "pairs", "uniform", "tokens", "lines", "blank", "skipped", "truncated")
# A sum of weights may exceed its count by the rounding of rows that sum to 1 (float32; a half-precision model's
# rows are rounded to 8 bits), never by more than this fraction.
SUM_SLACK = 1e-2


def _whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_sums_json(data) -> None:
    """ValueError naming the field of a sums.json (HeadSums.to_json) that no corpus run can have written.

    Every number must be finite and >= 0, every count a whole number, a statistic's total at most its count
    (each query unit's weights sum to 1) and the entropy's total at most that of uniform attention. Sums that
    break one of these would give NaN, infinite or above-1 means.
    """
    if not isinstance(data, dict):
        raise ValueError("it is not a JSON object")
    for name in ("layers", "heads"):
        if not _whole(data.get(name)) or data[name] < 1:
            raise ValueError(f"field {name!r} is {data.get(name)!r}, not a whole number >= 1")
    for name in COUNT_FIELDS:
        value = data.get(name)
        if name == "uniform":
            if not _number(value) or not math.isfinite(value) or value < 0:
                raise ValueError(f"field 'uniform' is {value!r}, not a finite number >= 0")
        elif not _whole(value) or value < 0:
            raise ValueError(f"field {name!r} is {value!r}, not a whole number >= 0")
    causal = data.get("causal", False)  # sums written before decoders were supported: an encoder's
    if not isinstance(causal, bool):
        raise ValueError(f"field 'causal' is {causal!r}, not true or false")
    if not causal and data["units"] < data["sentences"]:  # an encoder's sentence has at least one query unit
        raise ValueError(f"field 'units' is {data['units']}, fewer than the {data['sentences']} sentences")
    if data["pairs"] > data["units"]:
        raise ValueError(f"field 'pairs' is {data['pairs']}, more than the {data['units']} units")
    if data["truncated"] > data["sentences"]:
        raise ValueError(f"field 'truncated' is {data['truncated']}, more than the {data['sentences']} sentences")
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
               if not _number(v) or not math.isfinite(v) or v < 0]
        if bad:
            layer, head, value = bad[0]
            raise ValueError(f"field {field!r} is {value!r} at layer {layer + 1}, head {head + 1}, "
                             "not a finite number >= 0")
        count = data["uniform"] if name == "entropy" else data["pairs"] if name in PAIR_STATISTICS else data["units"]
        most = max(max(row) for row in rows)
        if most > count * (1 + SUM_SLACK) + SUM_SLACK:
            what = "the entropy of uniform attention, 'uniform'" if name == "entropy" else (
                f"its count, {'pairs' if name in PAIR_STATISTICS else 'units'}")
            raise ValueError(f"field {field!r} reaches {most!r}, above {what} ({count!r}): a mean above "
                             f"{'uniform' if name == 'entropy' else '1'}")


def word_sums(attentions: list[WordAttention], causal: bool = False) -> HeadSums:
    """Pooled sums of every statistic over word-level maps, without a model (unit_totals on a padded batch)."""
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
    totals = np.stack([unit_totals(torch.from_numpy(weights[:, layer]), kinds_t, causal).numpy()
                       for layer in range(layers)], axis=1)  # (len(STATISTICS), layers, heads)
    return HeadSums(totals=totals, causal=causal, **sentence_counts([len(a.words) for a in attentions], causal=causal))


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
    # The pooled statistics of unit_totals, each (layers, heads) float64, over every sentence's query units.
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
