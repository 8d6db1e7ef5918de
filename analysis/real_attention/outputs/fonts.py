"""Fonts for text in any script: a fallback family for the characters the default font lacks (CJK and others).

Latin-only text keeps matplotlib's default font untouched (the same bytes as ever); text with characters the
default font lacks gets the default family followed by an installed font that has them (matplotlib >= 3.6 falls
back glyph by glyph). When none is installed, `missing_glyphs_note` gives one line naming the package to install.

The one global change this tool makes (documented in docs/python.md): the first time a text
needs a fallback, fonts installed after matplotlib built its font cache are added to matplotlib's shared
`font_manager.fontManager` (`_load_new_system_fonts`, once per process). Adding a font changes no rcParams and no
default family, so every figure that does not ask for those fonts draws as before; matplotlib has no way to
register a font for one figure only, and removing it again would make the next figure rescan the system.
"""
from __future__ import annotations

import functools
import unicodedata
from collections.abc import Iterable

from matplotlib import font_manager, rcParams

# Fallback families, most wanted first; Debian's fonts-noto-cjk installs the Noto Sans CJK ones.
FALLBACK_FAMILIES = ("Noto Sans CJK SC", "Noto Sans CJK JP", "Noto Sans CJK KR", "Noto Sans CJK TC",
                     "Source Han Sans SC", "WenQuanYi Zen Hei", "Droid Sans Fallback", "Noto Sans",
                     "Noto Sans Devanagari", "Noto Sans Thai", "Noto Sans Arabic", "Noto Sans Hebrew")
CJK_PACKAGE = "fonts-noto-cjk"  # Debian/Ubuntu
OTHER_PACKAGE = "fonts-noto-core"


@functools.cache
def _charmap(path: str, index: int = 0) -> frozenset[int]:
    from matplotlib.ft2font import FT2Font

    return frozenset(FT2Font(path, face_index=index).get_charmap())


def _font_chars(family: str) -> frozenset[int] | None:
    """The code points of an installed family, or None when it is not installed."""
    try:
        path = font_manager.findfont(family, fallback_to_default=False)
    except ValueError:
        return None
    return _charmap(str(path), getattr(path, "face_index", 0))


def _default_chars() -> frozenset[int]:
    return _charmap(str(font_manager.findfont(font_manager.FontProperties())))


@functools.lru_cache(maxsize=1)
def _load_new_system_fonts() -> None:
    """Add fonts installed after matplotlib built its font cache (it never rescans on its own)."""
    known = {entry.fname for entry in font_manager.fontManager.ttflist}
    for path in font_manager.findSystemFonts():
        if path not in known and any(key in path for key in ("CJK", "Han", "WenQuanYi", "Fallback", "Noto")):
            try:
                font_manager.fontManager.addfont(path)
            except (OSError, RuntimeError):  # an unreadable file: skip it
                continue


def _is_cjk(char: str) -> bool:
    return unicodedata.name(char, "").startswith(("CJK", "HIRAGANA", "KATAKANA", "HANGUL", "IDEOGRAPHIC",
                                                  "FULLWIDTH", "HALFWIDTH"))


def _missing(texts: Iterable[str], chars: frozenset[int]) -> set[str]:
    return {c for text in texts if not text.isascii() for c in text if ord(c) not in chars and c.isprintable()}


@functools.lru_cache(maxsize=256)
def _families(missing: frozenset[str]) -> tuple[tuple[str, ...] | None, frozenset[str]]:
    """(fallback families that cover `missing`, the characters no installed font has)."""
    left, chosen = set(missing), []
    for attempt in range(2):
        for family in FALLBACK_FAMILIES:
            chars = _font_chars(family)
            if chars is not None and any(ord(c) in chars for c in left):
                chosen.append(family)
                left = {c for c in left if ord(c) not in chars}
            if not left:
                break
        if not left or attempt:
            break
        _load_new_system_fonts()  # none found: maybe installed after matplotlib's cache was built
        left, chosen = set(missing), []
    return (tuple(chosen) or None), frozenset(left)


def text_families(texts: Iterable[str]) -> list[str] | None:
    """The font.family for figures that show `texts`: None when the default font has every glyph (change
    nothing), else the default family followed by installed fonts that have the missing glyphs."""
    missing = _missing(texts, _default_chars())
    if not missing:
        return None
    families, _ = _families(frozenset(missing))
    return None if families is None else [*rcParams["font.family"], *families]


def missing_glyphs_note(texts: Iterable[str]) -> str | None:
    """One line for the user when no installed font has some of the characters of `texts`, naming the package
    to install; None when every character can be drawn."""
    missing = _missing(list(texts), _default_chars())
    if not missing:
        return None
    _, left = _families(frozenset(missing))
    if not left:
        return None
    sample = "".join(sorted(left)[:8])
    package = CJK_PACKAGE if any(_is_cjk(c) for c in left) else OTHER_PACKAGE
    return (f"no installed font has the glyphs for {sample!r} ({len(left)} character(s)): they show as boxes in "
            f"the figures; install a font that has them, e.g. `apt-get install {package}` (the HTML report is unaffected)")
