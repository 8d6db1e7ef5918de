"""The one rule for what text can be a sentence (or a word), applied by every entry point: `run`'s config,
the API (`ra.attend`, `ra.mixing`, `ra.corpus`, `ra.corpus_stats`), `heads --corpus`, `serve` and `syntax`.

A text is refused when it holds
- a NUL character (\\x00): no sentence does; a binary or damaged file does;
- an unpaired surrogate (U+D800 to U+DFFF): half of a UTF-16 pair, e.g. an emoji cut in two by a scraper's
  "\\ud83d" escape; no tokenizer can encode it;
- no visible character: only whitespace, zero-width characters (Unicode category Cf, e.g. U+200B) or control
  characters (Cc, e.g. \\x01). Such a text has no words, so it has no maps.
A corpus skips lines of the third kind and counts them as blank lines; the first two stop it with the line's
number, as a line that is not UTF-8 does.
"""
from __future__ import annotations

import re
import unicodedata

from .errors import InputError

INVISIBLE = ("Cc", "Cf", "Zs", "Zl", "Zp")  # control, format (zero-width), and space separators


SURROGATE = re.compile("[\ud800-\udfff]")  # a lone UTF-16 half: no UTF-8 text holds one


def _first_surrogate(text: str) -> int | None:
    found = SURROGATE.search(text)
    return None if found is None else found.start()


def text_problem(text: str) -> str | None:
    """Why `text` cannot be a sentence (a phrase that follows "it ..."), or None when it can."""
    if "\x00" in text:
        return (f"holds a NUL character (\\x00 at character {text.index(chr(0)) + 1}): no sentence does; the source "
                "is binary or damaged")
    surrogate = _first_surrogate(text)
    if surrogate is not None:
        return (f"holds an unpaired surrogate (\\u{ord(text[surrogate]):04x} at character {surrogate + 1}): half "
                "of a UTF-16 pair, e.g. a cut emoji; fix the source")
    if not any(unicodedata.category(char) not in INVISIBLE for char in text):
        return ("has no visible character (it is empty, or only whitespace, zero-width or control characters), "
                "so it has no words")
    return None


def is_blank(text: str) -> bool:
    """True for a text with no visible character (no NUL or surrogate in it): a corpus skips it as blank."""
    return text_problem(text) is not None and "\x00" not in text and _first_surrogate(text) is None


def check_text(text: str, what: str) -> str:
    """`text` if it can be a sentence; InputError "<what> <problem>" otherwise (what: e.g. "texts: sentence 2")."""
    problem = text_problem(text)
    if problem is not None:
        raise InputError(f"{what} {problem}")
    return text
