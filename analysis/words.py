"""Merge word pieces into words: sum over the attended-to pieces, mean over the attending ones."""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass

import numpy as np

from analysis.extract import TokenAttention

# The kinds of unit. Markers are special tokens and words made only of punctuation.
SPECIAL, PUNCT, WORD = "special", "punct", "word"
MARKER_KINDS = (SPECIAL, PUNCT)


@dataclass(frozen=True)
class WordAttention:
    """One sentence at the level of units: each special token alone, each word with its pieces."""

    text: str
    words: tuple[str, ...]  # (n,) each word as written in the sentence; specials keep the tokenizer's text
    kinds: tuple[str, ...]  # (n,) SPECIAL, PUNCT or WORD
    weights: np.ndarray  # (layers, heads, n, n) float32, query rows x key columns, each row sums to 1

    def __post_init__(self) -> None:
        n = len(self.words)
        assert len(self.kinds) == n
        assert self.weights.ndim == 4 and self.weights.shape[2:] == (n, n), self.weights.shape
        assert self.weights.dtype == np.float32

    @property
    def markers(self) -> np.ndarray:
        """(n,) bool: which units are markers."""
        return np.isin(np.array(self.kinds), MARKER_KINDS)

    @property
    def layers(self) -> int:
        return self.weights.shape[0]

    @property
    def heads(self) -> int:
        return self.weights.shape[1]


def unit_ids(word_ids: np.ndarray) -> np.ndarray:
    """(t,) word ids (-1 for specials) -> (t,) unit index: a special starts a unit, so does a new word."""
    previous = np.concatenate([[-2], word_ids[:-1]])
    starts = (word_ids == -1) | (word_ids != previous)
    return np.cumsum(starts) - 1


def assignment_matrix(units: np.ndarray) -> np.ndarray:
    """(t,) unit index -> (n, t) float64 matrix with a 1 where piece j belongs to unit i."""
    n = int(units.max()) + 1
    return (np.arange(n)[:, None] == units[None, :]).astype(np.float64)


def merge_weights(weights: np.ndarray, assignment: np.ndarray) -> np.ndarray:
    """(..., t, t) piece weights -> (..., n, n) unit weights.

    Keys: the pieces of a word are summed (right product with A^T).
    Queries: the rows of a word's pieces are averaged (left product with A / piece count).
    Rows that summed to 1 still sum to 1.
    """
    mean_rows = assignment / assignment.sum(axis=1, keepdims=True)  # (n, t)
    merged = mean_rows @ weights.astype(np.float64) @ assignment.T  # (..., n, n)
    return merged.astype(np.float32)


def is_punctuation(word: str) -> bool:
    """True for a word made only of punctuation characters (Unicode category P*)."""
    return bool(word) and all(unicodedata.category(char).startswith("P") for char in word)


def merge(tokens: TokenAttention) -> WordAttention:
    """Group the pieces of each word, label units by the text as written, and merge the weights."""
    units = unit_ids(tokens.word_ids)
    n = int(units[-1]) + 1
    first = np.searchsorted(units, np.arange(n))  # (n,) first piece of each unit
    starts = np.minimum.reduceat(tokens.offsets[:, 0], first)
    ends = np.maximum.reduceat(tokens.offsets[:, 1], first)
    special = tokens.word_ids[first] == -1
    words, kinds = [], []
    for unit in range(n):  # labels only; the weights are merged with matrix products below
        if special[unit]:
            words.append(tokens.tokens[first[unit]])
            kinds.append(SPECIAL)
        else:
            word = tokens.text[starts[unit]:ends[unit]]
            words.append(word)
            kinds.append(PUNCT if is_punctuation(word) else WORD)
    weights = merge_weights(tokens.weights, assignment_matrix(units))
    return WordAttention(text=tokens.text, words=tuple(words), kinds=tuple(kinds), weights=weights)
