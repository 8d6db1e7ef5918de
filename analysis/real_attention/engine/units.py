"""Units from the text, by one rule that does not depend on the tokenizer; pieces are assigned to them by offsets.

The rule:
  - whitespace separates words;
  - a run of punctuation (Unicode category P*) at a word's start or end is a unit of its own;
  - punctuation inside a word stays in it (don't, l'eau, e-mail, 3.14);
  - each CJK ideograph is a unit, as in BERT's basic tokenizer;
  - special tokens are units of their own (real_attention.engine.words.group places them);
  - a required word (the focus or sense word) is always one unit: `bank` inside `bank's` splits that unit,
    `银行` joins two ideographs.
A piece that straddles units joins them into one (recorded as a Joined), unless one of them is a required
word: then the sentence cannot be analysed as configured, and UnitError says which word to name instead.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .errors import InputError

UNIT_RULES = ("text", "tokenizer")  # --units: the text rule here, or the tokenizer's own words (word_ids)
DEFAULT_UNITS = "text"
GIVEN_WORDS = "words"  # the third rule: words the caller gives (ra.attend(words=...), a treebank); see given_assign

# BERT's basic tokenizer's CJK ideograph blocks (the "CJK Unified Ideographs" and their extensions).
CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
              (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
# One character class of them: text_spans finds the ideographs of a word with one regex search, not a test per
# character (the text rule runs on every line of a corpus).
CJK_CHARACTER = re.compile("[" + "".join(f"{chr(low)}-{chr(high)}" for low, high in CJK_RANGES) + "]")


class UnitError(InputError):
    """A piece of the tokenizer straddles a focus or sense word and its neighbour; the message names both."""


@dataclass(frozen=True)
class Joined:
    """Units of the text rule that one piece straddles, joined into one unit."""

    units: tuple[str, ...]  # the units joined, as written
    piece: str  # the text the straddling piece covers


def check_rule(rule: str) -> str:
    """The unit rule's name, or InputError naming the known ones."""
    if rule not in UNIT_RULES:
        raise InputError(f"unknown units {rule!r}: use one of {', '.join(UNIT_RULES)}")
    return rule


def is_punct_char(char: str) -> bool:
    return unicodedata.category(char).startswith("P")


def _edges(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """A whitespace-free segment -> its leading punctuation run, the word, its trailing punctuation run."""
    if start >= end:
        return []
    lead, trail = start, end
    while lead < end and is_punct_char(text[lead]):
        lead += 1
    if lead == end:  # only punctuation: one unit
        return [(start, end)]
    while is_punct_char(text[trail - 1]):
        trail -= 1
    return [span for span in ((start, lead), (lead, trail), (trail, end)) if span[0] < span[1]]


def text_spans(text: str) -> list[tuple[int, int]]:
    """The units of `text` by the rule, as (start, end) character spans in order (required words aside)."""
    spans: list[tuple[int, int]] = []
    for match in re.finditer(r"\S+", text):
        start, end = match.span()
        segment = start
        for ideograph in CJK_CHARACTER.finditer(text, start, end):
            i = ideograph.start()
            spans += _edges(text, segment, i)
            spans.append((i, i + 1))
            segment = i + 1
        spans += _edges(text, segment, end)
    return spans


def _occurrences(text: str, word: str) -> list[tuple[int, int]]:
    """Spans of `word` in `text`, ignoring case, in either Unicode normal form."""
    forms = {unicodedata.normalize(form, word) for form in ("NFC", "NFD")}
    pattern = "|".join(re.escape(form) for form in sorted(forms, key=len, reverse=True))
    return [match.span() for match in re.finditer(pattern, text, re.IGNORECASE)]


def required_spans(text: str, spans: list[tuple[int, int]],
                   words: Sequence[str]) -> tuple[list[tuple[int, int]], set[tuple[int, int]]]:
    """Make each occurrence of each required word one unit: cut the units it starts or ends inside, join the
    units it covers. An occurrence counts where it starts and ends at a unit's edge or next to punctuation
    (`bank` in `bank's`, `eau` in `l'eau`), not inside letters (`bank` in `banker`).
    -> (the new spans, the set of spans that are required words)."""
    starts = {s for s, _ in spans}
    ends = {e for _, e in spans}
    found = set()
    for word in words:
        for s, e in _occurrences(text, word.strip()):
            if s >= e:
                continue
            after_edge = s in starts or (s > 0 and is_punct_char(text[s - 1]))
            before_edge = e in ends or (e < len(text) and is_punct_char(text[e]))
            if after_edge and before_edge:
                found.add((s, e))
    if not found:
        return spans, set()
    cuts = sorted({edge for span in found for edge in span})
    pieces = []
    for s, e in spans:  # cut every unit at the edges of the required words inside it
        edges = [s] + [c for c in cuts if s < c < e] + [e]
        pieces += list(zip(edges[:-1], edges[1:]))
    result, required = [], set()
    for s, e in pieces:
        covering = [span for span in found if span[0] <= s and e <= span[1]]
        if not covering:
            result.append((s, e))
            continue
        whole = max(covering, key=lambda span: span[1] - span[0])  # overlapping words: the longest wins
        if not result or result[-1] != whole:
            result.append(whole)
        required.add(whole)
    return result, required


def _stripped(text: str, offsets: np.ndarray) -> np.ndarray:
    """(t, 2) piece spans without the whitespace at their ends (byte-level BPE and SentencePiece offsets may
    include the space before a word); a piece of only whitespace becomes empty (start >= end)."""
    visible = np.array([not char.isspace() for char in text] + [True], dtype=bool)  # (len + 1,) not a space
    # next_word[i]: the first non-space index >= i; last_word[i]: one past the last non-space index < i
    positions = np.arange(len(text) + 1)
    next_word = np.minimum.accumulate(np.where(visible, positions, len(text))[::-1])[::-1]
    last_word = np.maximum.accumulate(np.concatenate([[0], np.where(visible[:-1], positions[1:], 0)]))
    starts = next_word[np.clip(offsets[:, 0], 0, len(text))]
    ends = last_word[np.clip(offsets[:, 1], 0, len(text))]
    return np.stack([starts, ends], axis=1)


def assign(text: str, tokens: Sequence[str], special: np.ndarray, offsets: np.ndarray,
           required: Sequence[str] = ()) -> tuple[np.ndarray, list[tuple[int, int]], tuple[Joined, ...]]:
    """Assign the non-special pieces to the units of the text rule.

    special (t,) bool, offsets (t, 2) character spans in `text`. -> (group (t,) int64: the index of each
    piece's unit in the spans returned, -1 for specials; the (start, end) span of every unit in order; the
    joins). Units no piece covers (cut off by truncation, dropped by the tokenizer) are left out.
    """
    spans, required_set = required_spans(text, text_spans(text), required)
    char_unit = np.full(len(text) + 1, -1, dtype=np.int64)  # (len + 1,) the unit of each character
    for index, (s, e) in enumerate(spans):
        char_unit[s:e] = index
    stripped = _stripped(text, offsets)
    first = char_unit[np.clip(stripped[:, 0], 0, len(text))]
    last = char_unit[np.clip(stripped[:, 1] - 1, 0, len(text))]
    empty = special | (stripped[:, 0] >= stripped[:, 1]) | (first < 0) | (last < 0)  # no character of a unit
    first, last = np.where(empty, -1, first), np.where(empty, -1, last)
    # joins: a piece that touches units a..b links a to a+1, ..., b-1 to b
    linked = np.zeros(len(spans), dtype=bool)  # linked[k]: unit k is joined to unit k + 1
    joins: dict[tuple[int, int], Joined] = {}  # by the units joined: one record per join
    for piece in np.flatnonzero(first < last).tolist():
        a, b = int(first[piece]), int(last[piece])
        covered = text[stripped[piece, 0]:stripped[piece, 1]]
        touched = [text[s:e] for s, e in spans[a:b + 1]]
        if any(spans[k] in required_set for k in range(a, b + 1)):
            word = text[spans[a][0]:spans[b][1]]
            raise UnitError(
                f"the piece {covered!r} (token {tokens[piece]!r}) spans the units {', '.join(map(repr, touched))} "
                f"of {text!r}, but the focus or sense word must be a unit of its own; name the whole word "
                f"{word!r} instead"
            )
        linked[a:b] = True
        joins.setdefault((a, b), Joined(units=tuple(touched), piece=covered))
    if not spans:  # no unit in the text (only whitespace): all its pieces make one
        return np.where(special, -1, 0).astype(np.int64), [(0, len(text))], ()
    merged = np.concatenate([[0], np.cumsum(~linked[:-1])])  # (units,) the joined unit of each rule unit
    # a piece of only whitespace (SentencePiece's lone "▁") belongs to the next piece's unit, else the previous
    t = len(special)
    pieces = np.arange(t)
    following = np.minimum.accumulate(np.where(empty, t, pieces)[::-1])[::-1]  # (t,) next non-empty piece, or t
    preceding = np.maximum.accumulate(np.where(empty, -1, pieces))  # (t,) last non-empty piece so far, or -1
    source = np.where(following < t, following, preceding)  # (t,) the piece whose unit each piece takes
    group = np.where(source < 0, 0, merged[np.maximum(first[np.clip(source, 0, t - 1)], 0)])
    group = np.where(special, -1, group).astype(np.int64)
    # the span of each merged unit, from its first to its last rule unit
    count = int(merged[-1]) + 1
    unit_spans = [(len(text), 0)] * count
    for k, (s, e) in enumerate(spans):
        lo, hi = unit_spans[merged[k]]
        unit_spans[merged[k]] = (min(lo, s), max(hi, e))
    return group, unit_spans, tuple(joins.values())


# --- the given-words rule ------------------------------------------------------------------------------------


class MissingWord(InputError):
    """A given word that no piece of the tokenizer starts in (the tokenizer dropped every character of it)."""


def join_words(words: Sequence[str]) -> tuple[str, list[tuple[int, int]]]:
    """Given words -> (their text, joined by single spaces; each word's (start, end) character span in it)."""
    spans, start = [], 0
    for word in words:
        spans.append((start, start + len(word)))
        start += len(word) + 1
    return " ".join(words), spans


def given_assign(text: str, spans: Sequence[tuple[int, int]], special: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Assign the non-special pieces to given words: each to the word whose span contains the piece's first
    character (the space before a word, which byte-level BPE offsets include, does not count).

    spans: (W,) the words' character spans in `text` (join_words); special (t,) bool; offsets (t, 2).
    -> (t,) int64 word index of each piece, -1 for specials. A piece of only whitespace (SentencePiece's lone
    "▁") takes the next piece's word, else the previous one's. MissingWord names a word no piece starts in.
    """
    # Plain Python over the t pieces: a sentence has a few dozen, and a dozen small numpy calls cost 8x more.
    char_word = [-1] * (len(text) + 1)  # the word of each character
    for index, (s, e) in enumerate(spans):
        char_word[s:e] = [index] * (e - s)
    specials = special.tolist()
    firsts = []  # each piece's word by its first visible character; -1: a special or only whitespace
    for is_special, (s, e) in zip(specials, offsets.tolist()):
        while s < e and text[s].isspace():
            s += 1
        while e > s and text[e - 1].isspace():
            e -= 1
        firsts.append(-1 if is_special or s >= e else char_word[s])
    following = [-1] * len(firsts)  # the word of the next piece with one, at or after each piece
    current = -1
    for i in range(len(firsts) - 1, -1, -1):
        current = firsts[i] if firsts[i] >= 0 else current
        following[i] = current
    pieces, preceding = [], -1
    for i, first in enumerate(firsts):
        preceding = first if first >= 0 else preceding
        pieces.append(-1 if specials[i] else following[i] if following[i] >= 0 else preceding)
    word = np.array(pieces, dtype=np.int64)
    missing = np.setdiff1d(np.arange(len(spans)), word)
    if missing.size:
        k = int(missing[0])
        raise MissingWord(f"word {k + 1} ({text[spans[k][0]:spans[k][1]]!r}) gets no piece from the tokenizer")
    return word
