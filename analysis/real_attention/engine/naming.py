"""How the tool writes model revisions for a reader (one format everywhere: titles, summaries, the CLI), and what a
folder name that a person gives may be."""
from __future__ import annotations

from .errors import InputError

# The longest name a folder under --out may have: file systems allow 255 bytes, and the hidden folders beside it
# add about 40 (`.NAME-value-zeroing.staging-abcd1234`, `NAME-shard-12-of-64`).
MAX_NAME_BYTES = 128


def short_revision(revision: str) -> str:
    """For titles: '3f076fdb1ab6...' -> '3f076fdb'; 'sha256:53aa51...' -> 'sha256:53aa5117'."""
    prefix, _, digest = revision.rpartition(":")
    return f"{prefix}:{digest[:8]}" if prefix else digest[:8]


def plain_name(text: str, empty: str = "model") -> str:
    """Any text as one plain folder name: each run of characters other than ASCII letters, digits, '.', '_' and '-'
    becomes '-', and '-' and '.' are stripped from its ends ('sst2:validation' -> 'sst2-validation'); `empty` if
    nothing is left."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.") or empty


def name_from_file(stem: str, source: str, what: str = "name (--name)") -> str:
    """The folder name a command takes from an input file's `stem` when no `what` is given: the stem without
    leading dots (".notes.txt" -> "notes"; "corpus" if nothing is left). InputError saying to pass `what` if it
    still cannot be a folder name: the user named a file (`source`), not that option."""
    name = stem.lstrip(".") or "corpus"
    try:
        return plain_folder_name(name, what)
    except InputError:
        raise InputError(f"the name taken from {source!r}, {name!r}, cannot be a folder name; pass {what}: one "
                         "plain name without slashes, like my-corpus") from None


def plain_folder_name(name: str, what: str) -> str:
    """`name` if it is one plain folder name (no separator, not `.` or `..`, not hidden, not absolute), else
    InputError. Names that become folders under --out (a language, a corpus) must never lead out of it, nor
    look like the hidden staging folders of a run (`.es.staging-...`)."""
    if not isinstance(name, str):
        raise InputError(f"{what} must be a string, not {type(name).__name__}")
    if (not name or name.strip() != name or name.startswith(".")
            or any(char in name for char in "/\\\0:") or any(ord(char) < 32 for char in name)):
        raise InputError(f"{what} {name!r} cannot be a folder name: use one plain name without slashes, "
                         "like es or my-corpus")
    size = len(name.encode("utf-8", "surrogatepass"))
    if size > MAX_NAME_BYTES:
        raise InputError(f"{what} {name[:24]!r}... is too long for a folder name: {size} bytes, at most "
                         f"{MAX_NAME_BYTES} (UTF-8); choose a shorter name")
    return name
