"""Merge word pieces into words: sum over the attended-to pieces, mean over the attending ones.

Units: each special token the tokenizer added is a unit of its own; the words come from the text by the
rule of real_attention.engine.units (or, by the "tokenizer" rule, are the pieces of one word id), labelled as written.
`merge_maps` is the only implementation of the merge.
"""
from __future__ import annotations

import functools
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

import numpy as np

from .errors import InputError
from .units import DEFAULT_UNITS, GIVEN_WORDS, Joined, assign, given_assign


class Kind(IntEnum):
    """The kinds of unit, one small int code each (numpy and torch arrays hold the codes)."""

    PAD = -1  # padding in a batch: no unit
    WORD = 0
    PUNCT = 1  # a word made only of punctuation
    FIRST_SPECIAL = 2  # a token the tokenizer added at the very start ([CLS], <s>, <bos>, ...)
    LAST_SPECIAL = 3  # a token the tokenizer added at the very end ([SEP], </s>, <eos>, ...)
    SPECIAL = 4  # any other token the tokenizer added

    @property
    def group(self) -> str:
        """'special', 'punct' or 'word': how the report and figures tell units apart."""
        return "special" if self in SPECIAL_KINDS else self.name.lower()


PAD, WORD, PUNCT, SPECIAL = Kind.PAD, Kind.WORD, Kind.PUNCT, Kind.SPECIAL
FIRST_SPECIAL, LAST_SPECIAL = Kind.FIRST_SPECIAL, Kind.LAST_SPECIAL
SPECIAL_KINDS = (FIRST_SPECIAL, LAST_SPECIAL, SPECIAL)
# Markers: every special token the tokenizer added, and every punctuation-only word.
MARKER_KINDS = (*SPECIAL_KINDS, PUNCT)
MARKERS_TEXT = "special tokens the tokenizer added (every one: [CLS], [SEP], <s>, </s>, ...) and words made only of punctuation"


@dataclass(frozen=True, eq=False)
class WordAttention:
    """One sentence at the level of units: each special token alone, each word with its pieces."""

    text: str
    words: tuple[str, ...]  # (n,) each word as written in the sentence; specials keep the tokenizer's text
    kinds: tuple[Kind, ...]  # (n,) the Kind of each unit
    # (layers, heads, n, n) float32, query rows x key columns, each row sums to 1. None only in the RunResult of a
    # run that streamed its maps to the tables and kept those of the first sentences alone
    # (real_attention.engine.pipeline.analyse, keep_maps); the words, kinds and labels are all there.
    weights: np.ndarray | None
    joined: tuple[Joined, ...] = ()  # units of the text rule that one piece straddles, joined into one
    # On request (ra.attend(..., pieces=True)): the model's own pieces, to compare with bertviz or TransformerLens.
    pieces: tuple[str, ...] = ()  # (t,) the tokenizer's pieces, specials included; () when not kept
    piece_weights: np.ndarray | None = None  # (layers, heads, t, t) float32 piece-level maps of the same measure

    def __post_init__(self) -> None:
        n = len(self.words)
        object.__setattr__(self, "kinds", tuple(Kind(int(kind)) for kind in self.kinds))
        # a public class: checked with InputError, which python -O keeps
        if len(self.kinds) != n or PAD in self.kinds:
            raise InputError(f"WordAttention: {len(self.kinds)} kinds (no PAD) for {n} words")
        if self.weights is None:  # a streamed run's sentence past the kept ones: no maps at all
            if self.piece_weights is not None:
                raise InputError("WordAttention: piece_weights without weights")
            return
        shape: tuple = getattr(self.weights, "shape", ())
        if getattr(self.weights, "dtype", None) != np.float32 or len(shape) != 4 or shape[2:] != (n, n):
            raise InputError(f"WordAttention: weights must be float32 (layers, heads, {n}, {n}), not "
                             f"{getattr(self.weights, 'dtype', type(self.weights).__name__)} {shape}")
        if self.piece_weights is not None:
            t = len(self.pieces)
            if getattr(self.piece_weights, "shape", None) != (*shape[:2], t, t):
                raise InputError(f"WordAttention: piece_weights must be (layers, heads, {t}, {t}) for {t} pieces")

    def without_maps(self) -> WordAttention:
        """The same sentence without its maps (weights and piece maps None): what a streamed run keeps of most
        sentences."""
        return WordAttention(self.text, self.words, self.kinds, None, self.joined, self.pieces)

    @property
    def markers(self) -> np.ndarray:
        """(n,) bool: which units are markers."""
        return np.isin(np.array(self.kinds), MARKER_KINDS)

    def checked_weights(self) -> np.ndarray:
        """The (layers, heads, n, n) maps; InputError if this sentence's were not kept (weights None)."""
        if self.weights is None:
            raise InputError("this sentence's maps were not kept: a run of many sentences keeps only those its "
                             "report and figures show, and wrote all of them to its attention table "
                             "(read it with ra.read_attention)")
        return self.weights

    @property
    def layers(self) -> int:
        return self.checked_weights().shape[0]

    @property
    def heads(self) -> int:
        return self.checked_weights().shape[1]


@dataclass(frozen=True, eq=False)
class WordMaps(WordAttention):
    """A WordAttention whose maps are there: `weights` is the (layers, heads, n, n) float32 array, never None.
    Each sentence of an ra.Attention is one, so that editors and type checkers know `att[i].weights` is an array."""

    weights: np.ndarray

    def __post_init__(self) -> None:
        super().__post_init__()
        self.checked_weights()  # a WordMaps without maps (made so, or by dataclasses.replace) is refused

    @classmethod
    def of(cls, sentence: WordAttention) -> WordMaps:
        """The same sentence as WordMaps (no copy of its arrays); InputError if its maps were not kept."""
        if isinstance(sentence, WordMaps):
            return sentence
        sentence.checked_weights()
        maps = object.__new__(cls)  # the fields were checked when `sentence` was made
        maps.__dict__.update(sentence.__dict__)
        return maps


@functools.lru_cache(maxsize=1 << 16)  # a corpus repeats its words: most labels are looked up, not recomputed
def is_punctuation(word: str) -> bool:
    """True for a word made only of punctuation characters (Unicode category P*)."""
    return bool(word) and all(unicodedata.category(char).startswith("P") for char in word)


def unit_ids(word_ids: np.ndarray) -> np.ndarray:
    """(t,) word ids (-1 for specials) -> (t,) unit index: a special starts a unit, so does a new word."""
    previous = np.concatenate([[-2], word_ids[:-1]])
    starts = (word_ids == -1) | (word_ids != previous)
    return np.cumsum(starts) - 1


class Grouping(NamedTuple):
    """The pieces of one sentence assigned to units, with each unit's Kind and label."""

    units: np.ndarray  # (t,) int64 unit index of each piece
    kinds: np.ndarray  # (n,) int64 Kind code of each unit
    words: tuple[str, ...]  # (n,) each unit as written; specials keep the tokenizer's text
    joined: tuple[Joined, ...]  # units of the text rule that one piece straddles, joined (none by the tokenizer)


def group(text: str, tokens: list[str], word_ids: np.ndarray | Sequence[int] | None, special: np.ndarray | Sequence[bool],
          offsets: np.ndarray | Sequence[Sequence[int]], rule: str = DEFAULT_UNITS, required: Sequence[str] = (),
          given: Sequence[tuple[int, int]] = ()) -> Grouping:
    """Assign pieces to units, and give each unit its Kind and its label as written.

    tokens (t,), word_ids (t,) int (-1 where the tokenizer has none; only the "tokenizer" rule reads them),
    special (t,) bool (the tokenizer's special_tokens_mask), offsets (t, 2) character spans in `text` (arrays or
    lists). rule "text": the units of real_attention.engine.units,
    with each `required` word (the focus and sense words) one unit; "tokenizer": the tokenizer's own words
    (its word_ids), as Clark et al.'s code does; "words": the given words, whose character spans in `text`
    are `given` (units.join_words; units.given_assign places the pieces). Specials are units of their own, told
    apart by position, never by name: the first unit is FIRST_SPECIAL and the last LAST_SPECIAL when the
    tokenizer added them.
    """
    # Plain Python over the t pieces (a few dozen): the text rule runs on every line of a corpus, and a dozen
    # small numpy calls per sentence cost more than the loops.
    specials = special.tolist() if isinstance(special, np.ndarray) else list(special)
    if rule == GIVEN_WORDS:
        spans, joined = list(given), tuple[Joined, ...]()
        pieces = given_assign(text, spans, specials, offsets).tolist()
    elif rule == "text":
        assigned, spans, joined = assign(text, tokens, specials, offsets, required)
        pieces = assigned.tolist()
    else:
        assert word_ids is not None, "the tokenizer rule reads the word ids"
        pieces, joined = [-1 if flag else int(w) for flag, w in zip(specials, np.asarray(word_ids).tolist())], ()
        pieces = _blank_words_joined(text, pieces, offsets)
    # a new unit at every special (a key of its own) and wherever the key changes
    units, firsts, previous = [], [], None
    for piece, (flag, key) in enumerate(zip(specials, pieces)):
        if flag or key < 0 or key != previous:
            firsts.append(piece)
        units.append(len(firsts) - 1)
        previous = None if flag or key < 0 else key
    n = len(firsts)
    by_key = rule in ("text", GIVEN_WORDS)  # a unit's span is that of its key; else of its pieces' offsets
    if not by_key:  # a tokenizer word spans its pieces' offsets
        pairs = np.asarray(offsets).reshape(-1, 2).tolist()
        ends = firsts[1:] + [len(pieces)]
        spans = [(min(p[0] for p in pairs[a:b]), max(p[1] for p in pairs[a:b])) for a, b in zip(firsts, ends)]
    kinds, words = [], []
    for unit, piece in enumerate(firsts):  # labels only; the weights are merged by merge_maps
        if specials[piece] or pieces[piece] < 0:
            words.append(tokens[piece])
            kinds.append(FIRST_SPECIAL if unit == 0 else LAST_SPECIAL if unit == n - 1 else SPECIAL)
        else:
            start, end = spans[pieces[piece]] if by_key else spans[unit]
            word = text[start:end].strip()  # byte-level BPE offsets may hold the space before a word
            words.append(word)
            kinds.append(PUNCT if is_punctuation(word) else WORD)
    return Grouping(np.array(units, dtype=np.int64), np.array(kinds, dtype=np.int64), tuple(words), joined)


def _blank_words_joined(text: str, pieces: list[int], offsets) -> list[int]:
    """The tokenizer's word ids with each word of whitespace alone joined to the word after it (before it at the
    end of a sentence): byte-level BPE makes a word of an extra space, tab or no-break space (`Ġ`), which would be
    a unit without a label, and the "previous word" of the word after it."""
    pairs = np.asarray(offsets).reshape(-1, 2).tolist()
    blank: dict[int, bool] = {}
    for key, (start, end) in zip(pieces, pairs):
        if key >= 0:
            blank[key] = blank.get(key, True) and not text[start:end].strip()
    if not any(blank.values()):
        return pieces
    joined = list(pieces)
    _take_nearest(joined, blank, range(len(pieces) - 1, -1, -1))  # the word after a blank one
    _take_nearest(joined, blank, range(len(pieces)))  # a blank word at the end of a run: the word before it
    return joined


def _take_nearest(keys: list[int], blank: dict[int, bool], order) -> None:
    """In place: each piece of a blank word takes the key of the nearest word that is not blank, met earlier in
    `order` within one run of words (a special, key < 0, ends a run)."""
    nearest = -1
    for piece in order:
        key = keys[piece]
        if key < 0:
            nearest = -1
        elif not blank[key]:
            nearest = key
        elif nearest >= 0:
            keys[piece] = nearest


def assignment(units, n: int, dtype):
    """(B, t) unit of each piece, -1 for pads -> ((B, n, t) 0/1 assignment A, (B, n, t) A over each unit's piece
    count): what merge_maps multiplies by, the same for every layer of a batch (make it once: merge_maps(...,
    matrices=))."""
    import torch

    matrix = (torch.arange(n, device=units.device)[None, :, None] == units[:, None, :]).to(dtype)  # (B, n, t)
    return matrix, matrix / matrix.sum(dim=-1, keepdim=True).clamp(min=1)


def merge_maps(weights, units, n: int, matrices=None):
    """Piece maps -> unit maps, batched, in torch, in the maps' dtype.

    weights: (B, H, t, t) post-softmax piece weights; units: (B, t) int64 unit of each piece, -1 for pads;
    matrices: assignment(units, n, weights.dtype) if the caller has it (one per batch, not one per layer).
    Returns (B, H, n, n), query units x key units (a permuted view: no copy of the maps).
    Keys: the pieces of a word are summed (right product with A^T).
    Queries: the rows of a word's pieces are averaged (left product with A / piece count).
    Rows that summed to 1 still sum to 1; pad units get all-zero rows and columns.
    """
    import torch

    batch, heads, t, _ = weights.shape
    matrix, mean_rows = assignment(units, n, weights.dtype) if matrices is None else matrices  # (B, n, t) each
    # One bmm over all heads for the keys, one for the queries; no copy of the piece maps.
    keyed = torch.bmm(weights.reshape(batch, heads * t, t), matrix.transpose(1, 2))  # (B, H*t, n)
    keyed = keyed.view(batch, heads, t, n).transpose(1, 2).reshape(batch, t, heads * n)  # (B, t, H*n)
    merged = torch.bmm(mean_rows, keyed).view(batch, n, heads, n)  # (B, query n, H, key n)
    return merged.transpose(1, 2)  # (B, H, n, n)
