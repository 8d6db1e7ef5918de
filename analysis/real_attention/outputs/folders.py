"""Where each command writes under --out, in one place: the folder names a command owns, and the checks that keep
one command's name from reaching another command's folder.

    results/<lang>/, figures/<lang>/               run (LANG-norm, ... for the other measures)
    results/lesson/, figures/lesson/               lesson
    results/corpus/<name>/, figures/corpus/<name>/ heads --corpus, merge
    results/syntax/<name>/, figures/syntax/<name>/ syntax
    results/compare/<name>/, figures/compare/<name>/ compare
    results/detect/<name>/, figures/detect/<name>/ detect
    results/importance/<name>/, figures/importance/<name>/ importance
    figures/show/<lang>/                           show

A new command that writes a folder of its own under results/ or figures/ adds its name to OWNED.
"""
from __future__ import annotations

from ..engine.errors import InputError
from ..engine.naming import MAX_NAME_BYTES, plain_folder_name

__all__ = ["MAX_NAME_BYTES", "OWNED", "plain_folder_name", "run_folder_name"]

# folder name under results/ or figures/ -> the command that owns it
OWNED = {
    "corpus": "`heads --corpus` and `merge` write (results/corpus/, figures/corpus/)",
    "lesson": "`lesson` writes (results/lesson/, figures/lesson/)",
    "syntax": "`syntax` writes (results/syntax/, figures/syntax/)",
    "compare": "`compare` writes (results/compare/, figures/compare/)",
    "detect": "`detect` writes (results/detect/, figures/detect/)",
    "importance": "`importance` writes (results/importance/, figures/importance/)",
    "show": "`show` writes (figures/show/)",
}


def run_folder_name(lang: str, what: str = "lang (--lang)") -> str:
    """The folder of `run --lang LANG` under results/ and figures/: LANG itself, unless another command owns that
    name (compared without case, as macOS and Windows file systems do) or it ends like another measure's folder."""
    from ..engine.measures import check_own_folder

    name = check_own_folder(plain_folder_name(lang, what), what)
    owner = OWNED.get(name.casefold())
    if owner is not None:
        raise InputError(f"{what} {name!r} names the folder that {owner}; choose another name")
    return name
