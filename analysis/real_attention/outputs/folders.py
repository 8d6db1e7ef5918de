"""Where each command writes under --out, in one place: the folder names a command owns, and the checks that keep
one command's name from reaching another command's folder.

    results/<lang>/, figures/<lang>/               run (LANG-norm, ... for the other measures)
    results/lesson/, figures/lesson/               lesson
    results/corpus/<name>/, figures/corpus/<name>/ heads --corpus, merge
    results/syntax/<name>/, figures/syntax/<name>/ syntax
    figures/show/<lang>/                           show

A new command that writes a folder of its own under results/ or figures/ adds its name to OWNED.
"""
from __future__ import annotations

from ..engine.errors import InputError

# The longest name a folder under --out may have: file systems allow 255 bytes, and the hidden folders beside it
# add about 40 (`.NAME-value-zeroing.staging-abcd1234`, `NAME-shard-12-of-64`).
MAX_NAME_BYTES = 128

# folder name under results/ or figures/ -> the command that owns it
OWNED = {
    "corpus": "heads --corpus and merge",
    "lesson": "lesson",
    "syntax": "syntax",
    "show": "show",
}


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


def run_folder_name(lang: str, what: str = "--lang") -> str:
    """The folder of `run --lang LANG` under results/ and figures/: LANG itself, unless another command owns that
    name (compared without case, as macOS and Windows file systems do) or it ends like another measure's folder."""
    from ..engine.measures import check_own_folder

    name = check_own_folder(plain_folder_name(lang, what), what)
    owner = OWNED.get(name.casefold())
    if owner is not None:
        raise InputError(f"{what} {name!r} names the folder that `{owner}` writes (results/{name.casefold()}/); "
                         "choose another name")
    return name
