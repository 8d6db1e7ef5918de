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

import functools
import re
import sys
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
CJK_CLASS = "".join(f"{chr(low)}-{chr(high)}" for low, high in CJK_RANGES)
CJK_CHARACTER = re.compile(f"[{CJK_CLASS}]")
# Every punctuation character (Unicode category P*) of Unicode 14.0.0 (Python 3.11's unicodedata), as hex code
# points and ranges; another Unicode version computes its own (punctuation_class), so the rule is always
# unicodedata's.
PUNCT_UNICODE = "14.0.0"
PUNCT_RANGES = (
    "21-23 25-2A 2C-2F 3A-3B 3F-40 5B-5D 5F 7B 7D A1 A7 AB B6-B7 BB BF 37E 387 55A-55F 589-58A 5BE 5C0 5C3 5C6 "
    "5F3-5F4 609-60A 60C-60D 61B 61D-61F 66A-66D 6D4 700-70D 7F7-7F9 830-83E 85E 964-965 970 9FD A76 AF0 C77 C84 DF4 "
    "E4F E5A-E5B F04-F12 F14 F3A-F3D F85 FD0-FD4 FD9-FDA 104A-104F 10FB 1360-1368 1400 166E 169B-169C 16EB-16ED "
    "1735-1736 17D4-17D6 17D8-17DA 1800-180A 1944-1945 1A1E-1A1F 1AA0-1AA6 1AA8-1AAD 1B5A-1B60 1B7D-1B7E 1BFC-1BFF "
    "1C3B-1C3F 1C7E-1C7F 1CC0-1CC7 1CD3 2010-2027 2030-2043 2045-2051 2053-205E 207D-207E 208D-208E 2308-230B "
    "2329-232A 2768-2775 27C5-27C6 27E6-27EF 2983-2998 29D8-29DB 29FC-29FD 2CF9-2CFC 2CFE-2CFF 2D70 2E00-2E2E "
    "2E30-2E4F 2E52-2E5D 3001-3003 3008-3011 3014-301F 3030 303D 30A0 30FB A4FE-A4FF A60D-A60F A673 A67E A6F2-A6F7 "
    "A874-A877 A8CE-A8CF A8F8-A8FA A8FC A92E-A92F A95F A9C1-A9CD A9DE-A9DF AA5C-AA5F AADE-AADF AAF0-AAF1 ABEB "
    "FD3E-FD3F FE10-FE19 FE30-FE52 FE54-FE61 FE63 FE68 FE6A-FE6B FF01-FF03 FF05-FF0A FF0C-FF0F FF1A-FF1B FF1F-FF20 "
    "FF3B-FF3D FF3F FF5B FF5D FF5F-FF65 10100-10102 1039F 103D0 1056F 10857 1091F 1093F 10A50-10A58 10A7F "
    "10AF0-10AF6 10B39-10B3F 10B99-10B9C 10EAD 10F55-10F59 10F86-10F89 11047-1104D 110BB-110BC 110BE-110C1 "
    "11140-11143 11174-11175 111C5-111C8 111CD 111DB 111DD-111DF 11238-1123D 112A9 1144B-1144F 1145A-1145B 1145D "
    "114C6 115C1-115D7 11641-11643 11660-1166C 116B9 1173C-1173E 1183B 11944-11946 119E2 11A3F-11A46 11A9A-11A9C "
    "11A9E-11AA2 11C41-11C45 11C70-11C71 11EF7-11EF8 11FFF 12470-12474 12FF1-12FF2 16A6E-16A6F 16AF5 16B37-16B3B "
    "16B44 16E97-16E9A 16FE2 1BC9F 1DA87-1DA8B 1E95E-1E95F"
)


class UnitError(InputError):
    """A piece of the tokenizer straddles a focus or sense word and its neighbour, or a focus and a sense word
    overlap in the text; the message names both."""


@dataclass(frozen=True)
class Joined:
    """Units of the text rule that one piece straddles, joined into one unit."""

    units: tuple[str, ...]  # the units joined, as written
    piece: str  # the text the straddling piece covers


def joined_notes(joined: Sequence[Sequence[Joined]]) -> tuple[str, ...]:
    """(S,) each sentence's Joined -> one note per join, for a reader: "sentence 2: '$Q$' and ',' are one word here:
    the piece '$Q$,' spans them"."""
    return tuple(f"sentence {number}: {' and '.join(repr(unit) for unit in join.units)} are one word here: the "
                 f"piece {join.piece!r} spans them" for number, joins in enumerate(joined, start=1) for join in joins)


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
    return [match.span() for match in _unit_pattern().finditer(text)]


# Invisible characters that separate words as whitespace does (Python's \s leaves them out): the zero-width
# space (a word break in Thai or Khmer text, and stray in web text) and the byte-order mark (a zero-width no-break
# space in old text). The zero-width joiner and non-joiner stay inside words: emoji sequences and scripts need them.
INVISIBLE_SPACES = "\u200b\ufeff"


def is_blank(char: str) -> bool:
    """Whether a character separates words: whitespace or one of INVISIBLE_SPACES."""
    return char.isspace() or char in INVISIBLE_SPACES


def punctuation_class() -> str:
    """The characters of Unicode category P*, as the inside of a regex character class."""
    if unicodedata.unidata_version == PUNCT_UNICODE:
        pairs = [item.split("-") for item in "".join(PUNCT_RANGES).split()]
        bounds = [(int(pair[0], 16), int(pair[-1], 16)) for pair in pairs]
    else:  # about 0.2 s, once per process
        codes = [code for code in range(sys.maxunicode + 1) if unicodedata.category(chr(code)).startswith("P")]
        bounds = []
        for code in codes:
            if bounds and bounds[-1][1] == code - 1:
                bounds[-1] = (bounds[-1][0], code)
            else:
                bounds.append((code, code))
    return "".join(re.escape(chr(low)) + ("" if low == high else "-" + re.escape(chr(high))) for low, high in bounds)


@functools.cache
def _unit_pattern() -> re.Pattern:
    """One regex whose matches are the rule's units, in order: an ideograph; a run of punctuation (a word's
    leading or trailing run, or a word of only punctuation); or a word's middle, from its first to its last
    character that is neither punctuation nor an ideograph (punctuation inside it stays). Whitespace matches
    nothing, so it separates words; an ideograph ends the word before it."""
    punct = punctuation_class()
    middle = f"[^\\s{INVISIBLE_SPACES}{punct}{CJK_CLASS}]"
    return re.compile(f"[{CJK_CLASS}]|[{punct}]+|{middle}(?:[^\\s{INVISIBLE_SPACES}{CJK_CLASS}]*{middle})?")


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
    ordered = sorted(found)
    for (s1, e1), (s2, e2) in zip(ordered, ordered[1:]):
        if s1 < s2 < e1 < e2:  # neither holds the other: the word between them would be in two units
            raise UnitError(f"the words {text[s1:e1]!r} and {text[s2:e2]!r} overlap in {text!r} (both hold "
                            f"{text[s2:e1]!r}); the focus and sense words must be different words of the sentence")
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


def _visible(text: str, start: int, end: int) -> tuple[int, int]:
    """A piece's (start, end) character span without the whitespace at its ends (byte-level BPE and SentencePiece
    offsets may include the space before a word); start >= end for a piece of only whitespace."""
    start, end = min(max(start, 0), len(text)), min(max(end, 0), len(text))
    while start < end and is_blank(text[start]):
        start += 1
    while end > start and is_blank(text[end - 1]):
        end -= 1
    return start, end


def assign(text: str, tokens: Sequence[str], special: np.ndarray | Sequence[bool],
           offsets: np.ndarray | Sequence[Sequence[int]],
           required: Sequence[str] = ()) -> tuple[np.ndarray, list[tuple[int, int]], tuple[Joined, ...]]:
    """Assign the non-special pieces to the units of the text rule.

    special (t,) bool, offsets (t, 2) character spans in `text` (arrays or lists). -> (group (t,) int64: the
    index of each piece's unit in the spans returned, -1 for specials; the (start, end) span of every unit in
    order; the joins). Units no piece covers (cut off by truncation, dropped by the tokenizer) are left out.
    """
    # Plain Python over the t pieces and the characters: a sentence has a few dozen of each, and the dozens of
    # small numpy calls this replaced cost several times more (the rule runs on every line of a corpus).
    spans = text_spans(text)
    required_set: set[tuple[int, int]] = set()
    if required:
        spans, required_set = required_spans(text, spans, required)
    specials = special.tolist() if isinstance(special, np.ndarray) else list(special)
    pairs = offsets.tolist() if isinstance(offsets, np.ndarray) else offsets
    t = len(specials)
    if not spans:  # no unit in the text (only whitespace): all its pieces make one
        return np.array([-1 if flag else 0 for flag in specials], dtype=np.int64), [(0, len(text))], ()
    char_unit = [-1] * (len(text) + 1)  # the unit of each character
    for index, (s, e) in enumerate(spans):
        char_unit[s:e] = [index] * (e - s)
    first = [-1] * t  # the unit of each piece's first and last visible character; -1: no unit's character
    linked = [False] * len(spans)  # linked[k]: unit k is joined to unit k + 1
    joins: dict[tuple[int, int], Joined] = {}  # by the units joined: one record per join
    size = len(text)
    for piece in range(t):
        if specials[piece]:
            continue
        s, e = pairs[piece]
        if not (0 <= s < e <= size) or is_blank(text[s]) or is_blank(text[e - 1]):  # most pieces: neither
            s, e = _visible(text, s, e)
            if s >= e:
                continue
        a, b = char_unit[s], char_unit[e - 1]
        if a < 0 or b < 0:
            continue
        first[piece] = a
        if a < b:  # a piece that touches units a..b links a to a+1, ..., b-1 to b
            covered = text[s:e]
            touched = [text[u:v] for u, v in spans[a:b + 1]]
            if required_set and any(spans[k] in required_set for k in range(a, b + 1)):
                word = text[spans[a][0]:spans[b][1]]
                raise UnitError(
                    f"the piece {covered!r} (token {tokens[piece]!r}) spans the units "
                    f"{', '.join(map(repr, touched))} of {text!r}, but the focus or sense word must be a unit of its "
                    f"own; name the whole word {word!r} instead"
                )
            linked[a:b] = [True] * (b - a)
            joins.setdefault((a, b), Joined(units=tuple(touched), piece=covered))
    merged = [0] * len(spans)  # the joined unit of each rule unit
    for k in range(1, len(spans)):
        merged[k] = merged[k - 1] + (0 if linked[k - 1] else 1)
    # a piece with no unit (only whitespace: SentencePiece's lone "▁") takes the next such piece's unit, else the
    # previous one's
    group = [0] * t
    following = -1
    for piece in range(t - 1, -1, -1):
        following = first[piece] if first[piece] >= 0 else following
        group[piece] = following
    preceding = -1
    for piece in range(t):
        preceding = first[piece] if first[piece] >= 0 else preceding
        unit = group[piece] if group[piece] >= 0 else preceding
        group[piece] = -1 if specials[piece] else 0 if unit < 0 else merged[unit]
    # the span of each merged unit, from its first to its last rule unit
    unit_spans = [(len(text), 0)] * (merged[-1] + 1)
    for k, (s, e) in enumerate(spans):
        lo, hi = unit_spans[merged[k]]
        unit_spans[merged[k]] = (min(lo, s), max(hi, e))
    return np.array(group, dtype=np.int64), unit_spans, tuple(joins.values())


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


def given_assign(text: str, spans: Sequence[tuple[int, int]], special: np.ndarray | Sequence[bool],
                 offsets: np.ndarray | Sequence[Sequence[int]]) -> np.ndarray:
    """Assign the non-special pieces to given words: each to the word whose span contains the piece's first
    character (the space before a word, which byte-level BPE offsets include, does not count).

    spans: (W,) the words' character spans in `text` (join_words); special (t,) bool; offsets (t, 2) (arrays or
    lists).
    -> (t,) int64 word index of each piece, -1 for specials. A piece of only whitespace (SentencePiece's lone
    "▁") takes the next piece's word, else the previous one's. MissingWord names a word no piece starts in.
    """
    # Plain Python over the t pieces: a sentence has a few dozen, and a dozen small numpy calls cost 8x more.
    char_word = [-1] * (len(text) + 1)  # the word of each character
    for index, (s, e) in enumerate(spans):
        char_word[s:e] = [index] * (e - s)
    specials = special.tolist() if isinstance(special, np.ndarray) else list(special)
    firsts = []  # each piece's word by its first visible character; -1: a special or only whitespace
    for is_special, (s, e) in zip(specials, offsets.tolist() if isinstance(offsets, np.ndarray) else offsets):
        while s < e and is_blank(text[s]):
            s += 1
        while e > s and is_blank(text[e - 1]):
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
    seen = set(pieces)
    missing = [k for k in range(len(spans)) if k not in seen]
    if missing:
        k = missing[0]
        raise MissingWord(f"word {k + 1} ({text[spans[k][0]:spans[k][1]]!r}) gets no piece from the tokenizer")
    return np.array(pieces, dtype=np.int64)
