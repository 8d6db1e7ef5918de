"""The figure formats every command and function draws: one list, one check (light: the CLI imports it)."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ..engine.errors import InputError

FIGURE_FORMATS = ("png", "svg", "pdf")


def check_formats(formats: str | Sequence[str]) -> tuple[str, ...]:
    """The figure formats, each once in the order given (a repeated --format draws once); InputError for an
    unknown one or for none."""
    if not isinstance(formats, (str, list, tuple)):  # None, a number, a set (no order to keep)
        raise InputError(f"formats must be {', '.join(map(repr, FIGURE_FORMATS))} or a list of them, not "
                         f"{type(formats).__name__}")
    items = tuple(dict.fromkeys((formats,) if isinstance(formats, str) else formats))
    strange = [item for item in items if not isinstance(item, str)]
    if strange:
        raise InputError(f"formats must be strings such as 'png', not {type(strange[0]).__name__}")
    unknown = [item for item in items if item not in FIGURE_FORMATS]
    if unknown:
        raise InputError(f"unknown figure format(s) {', '.join(map(repr, unknown))}: use {', '.join(FIGURE_FORMATS)}")
    if not items:
        raise InputError("give at least one figure format")
    return items


def writer_options(out: object, formats: object, wait: object) -> tuple[Path, tuple[str, ...], bool]:
    """The checked arguments of a result writer (ra.write_syntax, write_compare, write_detect, write_importance):
    `out` a path, `formats` one figure format or several, or an empty list or tuple for the tables alone, `wait`
    True or False; InputError naming the argument otherwise (None is no format list: it would read as 'no
    figures' by accident)."""
    from ..engine.checks import flag, path_arg

    folder = Path(path_arg(out, "out"))
    chosen = () if isinstance(formats, (list, tuple)) and not formats else check_formats(formats)  # type: ignore[arg-type]
    return folder, chosen, flag(wait, "wait")
