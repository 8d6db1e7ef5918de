"""Heads as dependency parsers (Clark et al. 2019, Sec. 4, on Universal Dependencies): predictions, counts, best heads.

For every layer, head and direction, each word's predicted head is the word the head's word map points to most:
  - `dep->head`: the map as it is, row i (what word i attends to most);
  - `head->dep`: its transpose, row i of the transpose = column i (the word that attends most to word i);
after the diagonal is set to 0 and the special tokens' rows and columns are dropped. The root is never
predicted (a prediction is always a word). Possessives (Clark's special case): when a word's relation is
`poss` and the next word is 's, s', ’s or s’, the next word's prediction is scored instead.
Baselines: the word at a fixed offset i + k, k = -3..+2, as Clark's offset_predictor has it: past the sentence's
end, the last word; before its start, the root, which is never a correct head here (the probe scores word heads
only, and no attention head can predict the root either, so the baselines get no credit the heads cannot get).
Counts are exact integers accumulated per relation, direction, layer and head; no map is kept.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .treebank import POSS, TreeSentence

ROOT = -1  # a baseline's prediction of the root (a word before the sentence's start); never counted correct
DIRECTIONS = ("dep->head", "head->dep")  # the word map as it is; its transpose
OFFSETS = (-3, -2, -1, 0, 1, 2)  # the fixed-offset baselines
# The possessive words after a poss word, compared lower-cased; UD writes a plural's as ' alone ("soldiers '")
POSS_MARKERS = ("'s", "s'", "'", "\u2019s", "s\u2019", "\u2019")
BARE_QUOTES = ("'", "\u2019")  # the possessive only as the poss word's `case`: else a closing quotation mark
ALL = "all"  # the relation of every word
UNREPORTED = ("root", "punct")  # never in best.csv: no head predicts the root; punctuation is no relation of words
DEFAULT_MIN_COUNT = 100

HEADS_COLUMNS = ["relation", "direction", "layer", "head", "correct", "total", "accuracy"]
BEST_COLUMNS = ["relation", "total", "layer", "head", "direction", "accuracy", "accuracy_low", "accuracy_high", "ties",
                "baseline_offset", "baseline_accuracy", "baseline_low", "baseline_high"]
WILSON_Z = 1.959964  # the 95% interval's z


def wilson(correct: int, total: int) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion correct / total (total > 0): it stays inside [0, 1] and is
    sound near 0 and 1 and for small totals, where the normal approximation is not."""
    assert total > 0, total
    p, z2 = correct / total, WILSON_Z ** 2
    centre = (p + z2 / (2 * total)) / (1 + z2 / total)
    half = WILSON_Z * np.sqrt(p * (1 - p) / total + z2 / (4 * total ** 2)) / (1 + z2 / total)
    low, high = float(centre - half), float(centre + half)
    return (0.0 if correct == 0 else max(0.0, low)), (1.0 if correct == total else min(1.0, high))
BASELINE_COLUMNS = ["relation", "offset", "correct", "total", "accuracy"]


def predict(maps, lengths, scratch: bool = False):
    """Every head's predictions in both directions, in torch on the maps' device.

    maps: (B, H, W, W) word maps (query rows x key columns) without the special tokens, zero-padded after each
    sentence's words; lengths: (B,) words per sentence; scratch: the maps are the caller's temporary, overwritten
    here instead of copied. Returns (2, B, H, W) int64: in DIRECTIONS order, the predicted head of each word (pads:
    anything; W: no prediction, when no word but itself gets weight). The diagonal counts as 0 and pads are never
    predicted; ties go to the first word.
    """
    import torch

    _, _, words, _ = maps.shape
    valid = torch.arange(words, device=maps.device)[None, :] < lengths[:, None]  # (B, W)
    scores = maps.float()  # (B, H, W, W): a copy unless the maps are float32 already
    if scores is maps and not scratch:
        scores = scores.clone()
    scores.diagonal(dim1=2, dim2=3).zero_()
    # pad keys: never a prediction of dep->head; pad queries: never a prediction of head->dep (one pass for both)
    scores.masked_fill_(~(valid[:, None, :, None] & valid[:, None, None, :]), -1.0)
    # max(...).indices is argmax with the same first-index ties, and several times faster across dim 2 on the CPU.
    # A row or column with no weight off the diagonal predicts nothing (W, never a gold head): a decoder's last word
    # is attended by no later word, and its all-zero column would otherwise predict the first word, with credit.
    predictions = []
    for found in (scores.max(dim=3), scores.max(dim=2)):
        predictions.append(torch.where(found.values > 0, found.indices, words))
    return torch.stack(predictions)  # (2, B, H, W)


def scored_index(words: Sequence[str], relations: Sequence[str]) -> np.ndarray:
    """(W,) the word whose prediction is scored for each word: itself, or the next word for a poss word followed
    by a possessive 's (Clark's special case)."""
    index = np.arange(len(words))
    for i in range(len(words) - 1):  # a sentence-final poss word has no next word: scored as itself
        marker = words[i + 1].lower()
        if relations[i] == POSS and marker in POSS_MARKERS and (marker not in BARE_QUOTES or relations[i + 1] == "case"):
            index[i] = i + 1
    return index


@dataclass(frozen=True)
class GoldBatch:
    """The gold trees of a batch of B sentences, padded to W words."""

    heads: np.ndarray  # (B, W) int64 gold head index, -1 for the root, -2 for pads (never equal to a prediction)
    scored: np.ndarray  # (B, W) int64 the word whose prediction is scored (scored_index), 0 for pads
    relations: np.ndarray  # (B, W) int64 relation id, -1 for pads
    lengths: np.ndarray  # (B,) int64 words per sentence

    @classmethod
    def of(cls, sentences: Sequence[TreeSentence], relation_id) -> GoldBatch:
        """relation_id: name -> int id (SyntaxCounts.relation_ids)."""
        lengths = np.array([len(s.words) for s in sentences], dtype=np.int64)
        size, words = len(sentences), int(lengths.max())
        heads = np.full((size, words), -2, dtype=np.int64)
        scored = np.zeros((size, words), dtype=np.int64)
        relations = np.full((size, words), -1, dtype=np.int64)
        for row, sentence in enumerate(sentences):
            n = len(sentence.words)
            heads[row, :n] = sentence.heads
            scored[row, :n] = scored_index(sentence.words, sentence.relations)
            relations[row, :n] = relation_id(sentence.relations)
        return cls(heads, scored, relations, lengths)

    def counts(self, predictions: np.ndarray, relations: int) -> np.ndarray:
        """(..., B, W) predictions -> (..., relations) int64 correct predictions per relation."""
        lead = predictions.shape[:-2]
        scored = np.broadcast_to(self.scored, predictions.shape)
        picked = np.take_along_axis(predictions, scored, axis=-1)  # (..., B, W)
        # pads: gold -2 never hit; the root (ROOT, a baseline's word before the start) is never a correct head
        hit = (picked == self.heads) & (self.relations >= 0) & (picked != ROOT)
        onehot = np.zeros((self.relations.size, relations))  # (B * W, R) float64: exact counts through BLAS
        real = self.relations.reshape(-1) >= 0
        onehot[np.flatnonzero(real), self.relations.reshape(-1)[real]] = 1.0
        counts = hit.reshape(-1, self.relations.size).astype(np.float64) @ onehot  # (prod(lead), R)
        return np.rint(counts).astype(np.int64).reshape(*lead, relations)

    def tensors(self, device):
        """(heads, scored, relations) as torch tensors on `device`, for device_counts."""
        from ..engine.extract import to_device

        return tuple(to_device(array, device) for array in (self.heads, self.scored, self.relations))

    def baseline_predictions(self) -> np.ndarray:
        """(len(OFFSETS), B, W) int64: the word at i + offset; past the end of its sentence the last word, before
        its start ROOT (Clark's offset_predictor: max(0, min(i + offset + 1, n)), counted from 1 with 0 the root)."""
        index = np.arange(self.heads.shape[1])
        last = np.maximum(self.lengths - 1, 0)[None, :, None]
        shifted = index[None, None, :] + np.array(OFFSETS)[:, None, None]  # (O, 1, W)
        return np.clip(shifted, ROOT, last)


def device_counts(gold, predictions, relations: int):
    """GoldBatch.counts in torch on the predictions' device: (..., B, W) int64 predictions and the batch's
    (heads, scored, relations) tensors (GoldBatch.tensors) -> (..., relations) int64 correct predictions per
    relation (integer scatter-add: exact)."""
    import torch

    heads, scored, relation = gold
    lead = predictions.shape[:-2]
    picked = torch.gather(predictions, -1, scored.expand(*lead, *scored.shape))  # (..., B, W)
    hit = (picked == heads) & (relation >= 0)  # pads: gold -2 never hit; the root (-1) never either
    index = relation.clamp(min=0).reshape(-1).expand(*lead, relation.numel())  # (..., B * W)
    counts = torch.zeros((*lead, relations), dtype=torch.int64, device=predictions.device)
    return counts.scatter_add_(-1, index, hit.reshape(*lead, -1).to(torch.int64))


@dataclass
class SyntaxCounts:
    """Exact running counts over the sentences seen so far; relations get ids as they first appear."""

    layers: int
    heads: int
    relations: list[str] = field(default_factory=list)  # (R,) names, in order of first appearance
    correct: np.ndarray = field(init=False)  # (2, layers, heads, R) int64 correct predictions per direction and head
    baseline: np.ndarray = field(init=False)  # (len(OFFSETS), R) int64 correct predictions per offset
    totals: np.ndarray = field(init=False)  # (R,) int64 words per relation
    sentences: int = 0  # sentences scored
    skipped: int = 0  # sentences over the model's maximum length, skipped (never cut)
    no_piece: int = 0  # sentences with a word the tokenizer gives no piece, skipped

    def __post_init__(self) -> None:
        self.correct = np.zeros((len(DIRECTIONS), self.layers, self.heads, 0), dtype=np.int64)
        self.baseline = np.zeros((len(OFFSETS), 0), dtype=np.int64)
        self.totals = np.zeros(0, dtype=np.int64)

    def relation_ids(self, names: Sequence[str]) -> np.ndarray:
        """(W,) int64 ids of the relations named, registering new ones (the count arrays grow by a column)."""
        known = {name: i for i, name in enumerate(self.relations)}
        new = [name for name in dict.fromkeys(names) if name not in known]
        if new:
            for name in new:
                known[name] = len(self.relations)
                self.relations.append(name)
            grow = len(new)
            self.correct = np.concatenate([self.correct, np.zeros((*self.correct.shape[:3], grow), np.int64)], axis=3)
            self.baseline = np.concatenate([self.baseline, np.zeros((len(OFFSETS), grow), np.int64)], axis=1)
            self.totals = np.concatenate([self.totals, np.zeros(grow, np.int64)])
        return np.array([known[name] for name in names], dtype=np.int64)

    def add_gold(self, gold: GoldBatch) -> None:
        """Count the batch's words per relation and score the baselines on them."""
        real = gold.relations[gold.relations >= 0]
        self.totals += np.bincount(real, minlength=len(self.relations))
        self.baseline += gold.counts(gold.baseline_predictions(), len(self.relations))
        self.sentences += len(gold.lengths)

    def add_layer(self, layer: int, gold: GoldBatch, predictions: np.ndarray) -> None:
        """predictions: (2, B, H, W) of one layer (predict) -> added to the correct counts of that layer."""
        per_head = np.moveaxis(predictions, 2, 1)  # (2, H, B, W)
        self.correct[:, layer] += gold.counts(per_head, len(self.relations))

    def add_layer_on_device(self, layer: int, gold, predictions, device_correct):
        """predictions: (2, B, H, W) torch tensor of one layer (predict), gold: GoldBatch.tensors on the same
        device -> added to device_correct, the (2, layers, heads, R) int64 counts on the device (grown to R
        columns if relations were added since); returns it. Nothing leaves the device."""
        device_correct = self._grown(device_correct)
        device_correct[:, layer] += device_counts(gold, predictions.transpose(1, 2), len(self.relations))  # (2, H, R)
        return device_correct

    def _grown(self, device_correct):
        """The device's (2, layers, heads, R') counts with a zero column for each relation added since (R)."""
        import torch

        grow = len(self.relations) - device_correct.shape[-1]
        if grow <= 0:
            return device_correct
        return torch.cat([device_correct, device_correct.new_zeros((*device_correct.shape[:3], grow))], dim=3)

    def add_layers_on_device(self, gold, predictions, device_correct):
        """add_layer_on_device for every layer at once: predictions (2, B, layers * heads, W), layer by layer."""
        device_correct = self._grown(device_correct)
        found = device_counts(gold, predictions.transpose(1, 2), len(self.relations))  # (2, layers * heads, R)
        device_correct += found.view(found.shape[0], self.layers, self.heads, -1)
        return device_correct

    def take_device_counts(self, device_correct) -> None:
        """Add the device's (2, layers, heads, R') counts into `correct` (R' <= R columns)."""
        columns = device_correct.shape[-1]
        self.correct[..., :columns] += device_correct.cpu().numpy()

    @property
    def words(self) -> int:
        return int(self.totals.sum())


def ordered_relations(counts: SyntaxCounts) -> list[str]:
    """`all` first, then every relation seen, by name."""
    return [ALL, *sorted(counts.relations)]


def _with_all(counts: SyntaxCounts) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """-> (relation names, correct (2, L, H, R+1), baseline (O, R+1), totals (R+1,)) in ordered_relations order."""
    names = ordered_relations(counts)
    order = [counts.relations.index(name) for name in names[1:]]
    correct = np.concatenate([counts.correct.sum(axis=3, keepdims=True), counts.correct[..., order]], axis=3)
    baseline = np.concatenate([counts.baseline.sum(axis=1, keepdims=True), counts.baseline[:, order]], axis=1)
    totals = np.concatenate([[counts.totals.sum()], counts.totals[order]])
    return names, correct, baseline, totals


def heads_frame(counts: SyntaxCounts) -> pd.DataFrame:
    """heads.csv: one row per relation (all first, then by name), direction, layer and head (from 1)."""
    names, correct, _, totals = _with_all(counts)
    relation, direction, layer, head = np.indices((len(names), *correct.shape[:3])).reshape(4, -1)  # C order
    hits = np.moveaxis(correct, 3, 0).reshape(-1)  # (R, 2, L, H) flattened, as the indices
    total = totals[relation]
    return pd.DataFrame({
        "relation": np.array(names, dtype=object)[relation],
        "direction": np.array(DIRECTIONS, dtype=object)[direction],
        "layer": layer + 1,
        "head": head + 1,
        "correct": hits,
        "total": total,
        "accuracy": hits / total,
    })[HEADS_COLUMNS]


def baselines_frame(counts: SyntaxCounts) -> pd.DataFrame:
    """baselines.csv: one row per relation (all first, then by name) and offset."""
    names, _, baseline, totals = _with_all(counts)
    relation, offset = np.indices((len(names), len(OFFSETS))).reshape(2, -1)
    hits = baseline.T.reshape(-1)
    return pd.DataFrame({
        "relation": np.array(names, dtype=object)[relation],
        "offset": np.array(OFFSETS)[offset],
        "correct": hits,
        "total": totals[relation],
        "accuracy": hits / totals[relation],
    })[BASELINE_COLUMNS]


def best_frame(counts: SyntaxCounts, min_count: int = DEFAULT_MIN_COUNT) -> pd.DataFrame:
    """best.csv: for `all` and each relation with at least min_count words (not root, not punct), the best
    (layer, head, direction) against the best offset. Ties: the lowest (layer, head), then dep->head (`ties`: how
    many other head directions score the same); the lowest offset. `*_low`, `*_high`: the 95% Wilson interval of
    each accuracy, as if the head had been chosen beforehand (it was chosen as the best of all of them: its accuracy
    on other sentences is likely lower)."""
    names, correct, baseline, totals = _with_all(counts)
    rows = []
    for r, name in enumerate(names):
        if name != ALL and (name in UNREPORTED or totals[r] < min_count):
            continue
        by_head = np.moveaxis(correct[..., r], 0, 2)  # (L, H, 2): C order is (layer, head, direction)
        layer, head, direction = np.unravel_index(int(np.argmax(by_head)), by_head.shape)  # first maximum
        offset = int(np.argmax(baseline[:, r]))
        best, fixed, total = int(by_head[layer, head, direction]), int(baseline[offset, r]), int(totals[r])
        rows.append({
            "relation": name, "total": total, "layer": int(layer) + 1, "head": int(head) + 1,
            "direction": DIRECTIONS[direction], "accuracy": best / total,
            **dict(zip(("accuracy_low", "accuracy_high"), wilson(best, total))),
            "ties": int((by_head == best).sum()) - 1,
            "baseline_offset": OFFSETS[offset], "baseline_accuracy": fixed / total,
            **dict(zip(("baseline_low", "baseline_high"), wilson(fixed, total))),
        })
    return pd.DataFrame(rows, columns=BEST_COLUMNS)
