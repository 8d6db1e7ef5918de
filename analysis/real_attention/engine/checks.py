"""Argument checks shared by every stage: each returns the checked value or raises one InputError that names the
argument and says what it must be (a subclass such as ConfigError where the caller passes one)."""
from __future__ import annotations

import numbers
import os
from collections.abc import Iterable, Mapping, Set as AbstractSet
from typing import TYPE_CHECKING, TypeGuard

from .errors import InputError
from .text import check_text

if TYPE_CHECKING:
    from .models import LoadedModel


def kind(value: object) -> str:
    """How a message names a value's type: "None", "str", "float", ..."""
    return "None" if value is None else type(value).__name__


def described(value: object) -> str:
    """A value of the wrong kind for a message: "None", or its type and its repr cut to 60 characters."""
    return "None" if value is None else f"{kind(value)} {value!r:.60}"


def is_whole(value: object) -> TypeGuard[int]:
    """A Python int that is not a bool (JSON's whole numbers, unbounded)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> TypeGuard[int | float]:
    """A Python int or float that is not a bool (any JSON number)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def shown(value: object, limit: int = 80) -> str:
    """A value of unknown size for a message (a hand-edited file may hold anything): a whole number of more than
    64 bits by its digit count, any other value's repr cut to `limit` characters, saying how long it was."""
    if is_whole(value) and value.bit_length() > 64:
        return f"a number of {len(str(abs(value)))} digits"
    text = repr(value)
    if len(text) <= limit:
        return text
    if isinstance(value, str):  # the cut string's own repr: it keeps its closing quote
        return f"{value[:max(1, limit - 24)]!r}... ({len(value):,} characters)"
    return f"{text[:limit - 20]}... ({len(text)} characters)"


def path_arg(value: object, name: str) -> str | os.PathLike:
    """A file or folder path as the API takes them (a str or a pathlib.Path, any os.PathLike of text); InputError
    naming the argument otherwise (None, a number, bytes: a bytes path is decoded first)."""
    if isinstance(value, str) or (isinstance(value, os.PathLike) and isinstance(os.fspath(value), str)):
        if not os.fspath(value).strip():  # Path("") is the current folder: an unset variable would write there
            raise InputError(f"{name} is empty; give a path ('.' for the current folder)")
        check_name_length(os.fspath(value), name)
        return value
    raise InputError(f"{name} must be a path (a str or a pathlib.Path), not {described(value)}")


NAME_MAX, PATH_MAX = 255, 4096  # bytes: the longest file name and path Linux (and most file systems) take


def _fs_bytes(part: str) -> bytes:
    """A name as the file system stores it: an undecodable byte (\udcff, surrogateescape) is one byte again."""
    try:
        return os.fsencode(part)
    except UnicodeEncodeError:  # a lone surrogate no byte decodes to: as UTF-8 would write it
        return part.encode("utf-8", "surrogatepass")


def check_name_length(path: str, name: str) -> None:
    """InputError if no file system could hold `path` (a part over NAME_MAX bytes, or the whole over PATH_MAX):
    asking whether it exists raises OSError (ENAMETOOLONG) rather than answering no."""
    parts = [len(_fs_bytes(part)) for part in path.replace(os.sep, "/").split("/")]
    if max(parts, default=0) > NAME_MAX or sum(parts) + len(parts) - 1 >= PATH_MAX:
        raise InputError(f"{name} {path[:40]!r}... ({len(path):,} characters) is too long for a path: a file or "
                         f"folder name holds at most {NAME_MAX} bytes, a path {PATH_MAX - 1}")


def loaded_model(model: object, function: str) -> LoadedModel:
    """The model, if it is one that ra.load returned; InputError naming `function` otherwise."""
    from .models import LoadedModel  # here, not at the top: models imports this module

    if not isinstance(model, LoadedModel):
        raise InputError(f"{function}: model must be a loaded model (model = ra.load(\"minilm\")), "
                         f"not {kind(model)} {model!r:.60}")
    return model


def callable_or_none(value: object, name: str, what: str) -> None:
    """InputError unless `value` is None or callable (a progress-bar factory, a callback); `what` says what it is."""
    if value is not None and not callable(value):
        raise InputError(f"{name} must be {what} or None, not {described(value)}")


def whole_number(value: object, name: str, low: int = 1, high: int | None = None,
                 error: type[InputError] = InputError) -> int:
    """Any integral number (int, numpy int64, ...; not bool) from `low` to `high` (None: no limit) as an int;
    otherwise `error` naming `name`: "NAME must be a whole number, at least 1, not ..." or "NAME 0 is out of range:
    at least 1"."""
    span = f"at least {low}" if high is None else f"{low} to {high}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise error(f"{name} must be a whole number, {span}, not {kind(value)} {value!r:.60}")
    number = int(value)
    if number < low or (high is not None and number > high):
        raise error(f"{name} {number} is out of range: {span}")
    return number


def text(value: object, name: str, what: str) -> str:
    """A non-empty string, or InputError naming the argument and saying `what` it should be."""
    if not isinstance(value, str) or not value.strip():
        shown = "an empty string" if isinstance(value, str) else f"{kind(value)} {value!r:.60}"
        raise InputError(f"{name} must be a non-empty string ({what}), not {shown}")
    return check_text(value, name)


def optional_text(value: object, name: str, what: str) -> str | None:
    """None, or a non-empty string (text)."""
    return None if value is None else text(value, name, what)


def not_a_file(path) -> str | None:
    """What stands at `path` when it is there but is no regular file ("a folder", "a link to nothing", "not a
    regular file": a pipe, a device), so a reader does not take it for an absent file; None otherwise."""
    from pathlib import Path

    path = Path(path)
    if not (path.exists() or path.is_symlink()) or path.is_file():
        return None
    return "a folder" if path.is_dir() else "a link to nothing" if not path.exists() else "not a regular file"


def model_arg(value: object, name: str = "model") -> str | None:
    """A model argument: None, or a packaged name, Hub id or folder as a non-empty string or a path (os.PathLike)."""
    import os

    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    text = optional_text(value, name, "a packaged name such as \"minilm\", a Hub id or a folder")
    if text is not None:
        check_name_length(text, name)
    return text


def flag(value: object, name: str) -> bool:
    """True or False (1 and 0 too, numpy's included) as a bool; InputError otherwise."""
    if not isinstance(value, (bool, numbers.Integral)) or value not in (0, 1):
        raise InputError(f"{name} must be True or False, not {kind(value)} {value!r:.60}")
    return bool(value)


def strings(values: object, name: str, item: str = "sentence") -> list[str]:
    """A string (one item) or an iterable of non-empty strings as a list; InputError names the argument and
    the item. bytes are refused (decode them first), as is any item that is no string: None and 3 are never
    "None" and "3"."""
    if isinstance(values, (bytes, bytearray, memoryview)):
        raise InputError(f"{name} must be a string or a list of strings, not bytes; decode them first "
                         "(e.g. data.decode('utf-8'))")
    if not isinstance(values, (str, Iterable)):
        raise InputError(f"{name} must be a string or a list of strings, not {kind(values)} {values!r:.60}")
    if isinstance(values, (Mapping, AbstractSet)):  # a dict's keys would pass as sentences; a set has no order
        raise InputError(f"{name} must be a string or a list of strings, not a {type(values).__name__} (a set has no "
                         "order, a dict's keys are not its sentences): pass a list")
    items = [values] if isinstance(values, str) else list(values)  # one string is one item, checked as each is
    for number, value in enumerate(items, start=1):
        if not isinstance(value, str):
            raise InputError(f"{name}: {item} {number} is {kind(value)} {value!r:.60}, not a string")
        if not value.strip():
            raise InputError(f"{name}: {item} {number} is empty; pass non-empty strings")
        check_text(value, f"{name}: {item} {number}")
    return items
