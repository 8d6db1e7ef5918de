"""What `ra.mixing` and `run --mixing` give back: each sentence's maps at the level of its units, and the two
tables (mixing.csv, mixing_agreement.csv) the outputs write."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, overload

import numpy as np
import pandas as pd

from ..norm import NORM
from . import value_zeroing
from .value_zeroing import KEY as VALUE_ZEROING_KEY  # value zeroing as a map key and in the tables

ATTENTION, ALTI = "attention", "alti"
MIXING_MEASURES = (ATTENTION, NORM, ALTI, VALUE_ZEROING_KEY)
DEFINITIONS = {
    ATTENTION: "the head average of the post-softmax weights; rolled: attention rollout with 0.5 A + 0.5 I "
               "(Abnar and Zuidema, 2020)",
    NORM: "the head average of the norm-based maps ||alpha f(x)||, rows scaled to 1 (Kobayashi et al., 2020); "
          "rolled with 0.5 A + 0.5 I",
    ALTI: "c_ij = max(0, ||y_i||_1 - ||y_i - T_i(x_j)||_1), rows scaled to 1, T_i(x_j) the attention block's "
          "output for token i decomposed per source token j, residual and layer norm included (Ferrando, "
          "Gallego and Costa-jussa, 2022); rolled: R^l = C^l R^(l-1)",
    VALUE_ZEROING_KEY: value_zeroing.DEFINITION,
}
SOURCES = {
    ATTENTION: "Abnar and Zuidema (2020), Quantifying Attention Flow in Transformers, ACL",
    NORM: "Kobayashi, Kuribayashi, Yokoi and Inui (2020), Attention is Not Only a Weight, EMNLP",
    ALTI: "Ferrando, Gallego and Costa-jussa (2022), Measuring the Mixing of Contextual Information in the "
          "Transformer, EMNLP; reference code github.com/mt-upc/transformer-contributions",
    VALUE_ZEROING_KEY: value_zeroing.SOURCE,
}
MIXING_COLUMNS = ["sentence", "measure", "layer", "query_index", "query", "key_index", "key", "value", "rolled"]
AGREEMENT_COLUMNS = ["layer", "measure_a", "measure_b", "layer_spearman", "rolled_spearman", "cells"]


@dataclass(frozen=True, eq=False)
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


@dataclass(frozen=True, eq=False, repr=False)
class Mixing(Sequence[SentenceMixing]):
    """The context-mixing maps of S sentences: `mix[i].maps["alti"]` is sentence i's (layers, n, n) ALTI."""

    sentences: tuple[SentenceMixing, ...]
    model: str
    revision: str
    causal: bool
    measures: tuple[str, ...] = MIXING_MEASURES
    smallest_raw_row_sum: dict[str, Any] = field(default_factory=dict)  # value zeroing: value, sentence, layer, query (from 1)
    near_zero_rows: tuple[tuple[Any, ...], ...] = ()  # (sentence, layer from 1, query_index, query) of raw sums below NEAR_ZERO

    @overload
    def __getitem__(self, index: int) -> SentenceMixing: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[SentenceMixing, ...]: ...

    def __getitem__(self, index):
        return self.sentences[index]

    def __len__(self) -> int:
        return len(self.sentences)

    def __repr__(self) -> str:  # the maps are many numbers: a notebook shows what they are, not each one
        return (f"<Mixing: {len(self)} sentence(s) of {self.model}, measures {', '.join(self.measures)}"
                f"{', causal' if self.causal else ''}>")

    def frame(self) -> pd.DataFrame:
        """The table of mixing.csv."""
        return mixing_frame(self)

    def agreement(self) -> pd.DataFrame:
        """The table of mixing_agreement.csv: Spearman's rank correlation per layer and pair of measures."""
        return agreement_frame(self)


def mixing_frame(mixing: Mixing) -> pd.DataFrame:
    """Long format: one row per sentence, measure, layer (from 1), query and key; value: the layer's map,
    rolled: the aggregate up to and including that layer. Sorted by sentence, measure, layer, query, key."""
    frames = []
    for number, sentence in enumerate(mixing.sentences, start=1):
        words = np.array(sentence.words, dtype=object)
        for measure in sorted(mixing.measures):
            maps, rolled = sentence.maps[measure], sentence.rolled[measure]  # (layers, n, n)
            layer, query, key = np.indices(maps.shape).reshape(3, -1)  # C order: sorted
            frames.append(pd.DataFrame({
                "sentence": number, "measure": measure, "layer": layer + 1, "query_index": query,
                "query": words[query], "key_index": key, "key": words[key],
                "value": maps.reshape(-1), "rolled": rolled.reshape(-1),
            })[MIXING_COLUMNS])
    return pd.concat(frames, ignore_index=True)


def _visible(mixing: Mixing, n: int) -> np.ndarray:
    """(n, n) bool: the cells a statistic looks at: all of them, or for a decoder those with key <= query in the
    rows of query units 1 and on (the first unit sees only itself: its row is the same in every map)."""
    if not mixing.causal:
        return np.ones((n, n), dtype=bool)
    visible = np.tril(np.ones((n, n), dtype=bool))
    visible[0] = False
    return visible


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (average ranks for ties); NaN when either side is constant."""
    ranks_a = pd.Series(a).rank(method="average").to_numpy()
    ranks_b = pd.Series(b).rank(method="average").to_numpy()
    if ranks_a.std() == 0 or ranks_b.std() == 0:
        return float("nan")
    return float(np.corrcoef(ranks_a, ranks_b)[0, 1])


def agreement_frame(mixing: Mixing) -> pd.DataFrame:
    """Per layer (from 1) and pair of measures: Spearman over all (query, key) cells of all sentences, of the
    layer maps and of the rolled maps; a decoder's cells above the diagonal (always 0) and its first unit's row
    (always all on itself) are left out, as the statistics leave them out."""
    layers = mixing.sentences[0].maps[mixing.measures[0]].shape[0]
    cells: dict[str, dict[str, list]] = {kind: {m: [] for m in mixing.measures} for kind in ("maps", "rolled")}
    for sentence in mixing.sentences:
        visible = _visible(mixing, len(sentence.words))
        for kind in cells:
            for measure in mixing.measures:
                cells[kind][measure].append(getattr(sentence, kind)[measure][:, visible])  # (layers, cells)
    joined = {kind: {m: np.concatenate(v, axis=1) for m, v in per.items()} for kind, per in cells.items()}
    rows = []
    for layer in range(layers):
        for a, b in combinations(mixing.measures, 2):
            rows.append({"layer": layer + 1, "measure_a": a, "measure_b": b,
                         "layer_spearman": spearman(joined["maps"][a][layer], joined["maps"][b][layer]),
                         "rolled_spearman": spearman(joined["rolled"][a][layer], joined["rolled"][b][layer]),
                         "cells": joined["maps"][a].shape[1]})
    return pd.DataFrame(rows, columns=AGREEMENT_COLUMNS)
