"""Write output folders all at once: stage them beside their targets, then swap them in by renaming."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Iterator

from ..engine.errors import InputError, OutputError


def plain_folder_name(name: str, what: str) -> str:
    """`name` if it is one plain folder name (no separator, not `.` or `..`, not absolute), else InputError.

    Names that become folders under --out (a language, a corpus) must never lead out of it.
    """
    if not name or name.strip() != name or name in (".", "..") or any(char in name for char in "/\\\0:"):
        raise InputError(f"{what} {name!r} cannot be a folder name: use one plain name without slashes, "
                         "like es or my-corpus")
    return name


class Staging:
    """Collects staged folders; `commit` renames each over its target, `discard` removes them.

    A target given to `remove` is deleted on commit: a folder that must hold exactly what this run wrote,
    when this run writes nothing there. After commit, `leftovers` lists old folders that could not be deleted
    (each named with the reason), for the caller to report: nothing is left behind silently.
    """

    def __init__(self) -> None:
        self._staged: list[tuple[Path | None, Path]] = []  # (staging folder or None to remove, target)
        self.leftovers: list[str] = []

    def folder(self, target: str | Path) -> Path:
        """A fresh, empty staging folder that will become `target` on commit."""
        target = Path(target)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.staging-", dir=target.parent))
            staging.chmod(0o755)
        except OSError as error:
            raise OutputError(
                f"cannot write to {target.parent}: {error.strerror or error}. Choose a writable folder with --out."
            ) from None
        self._staged.append((staging, target))
        return staging

    def remove(self, target: str | Path) -> None:
        """Delete `target` on commit, if it exists."""
        self._staged.append((None, Path(target)))

    def commit(self) -> None:
        for staging, target in self._staged:
            backup = None
            if target.exists():
                backup = target.with_name(f".{target.name}.old-{os.getpid()}")
                try:
                    os.rename(target, backup)
                except OSError as error:
                    raise OutputError(f"cannot replace {target}: {error.strerror or error}") from None
            if staging is not None:
                os.rename(staging, target)
            if backup is not None:
                problems: list[str] = []
                remove_tree(backup, problems)
                if backup.exists():
                    reason = problems[0] if problems else "unknown reason"
                    self.leftovers.append(f"could not delete the old {target} (moved to {backup}; {reason}); "
                                          "delete it by hand")
        self._staged.clear()

    def discard(self) -> None:
        for staging, _ in self._staged:
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
        self._staged.clear()


@contextmanager
def staged_outputs() -> Iterator[Staging]:
    """Everything written into the staged folders lands only if the block finishes; else nothing does."""
    staging = Staging()
    try:
        yield staging
    except BaseException:  # Ctrl-C included: leave no partial files
        staging.discard()
        raise
    try:
        staging.commit()
    except BaseException:
        staging.discard()  # the targets not yet swapped in keep their old contents
        raise


def remove_tree(path: Path, problems: list[str]) -> None:
    """shutil.rmtree, noting each path it cannot remove and why in `problems` (onexc from Python 3.12, where
    onerror is deprecated; onerror before)."""
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=lambda _f, failed, error: problems.append(f"{failed}: {error}"))
    else:
        shutil.rmtree(path, onerror=lambda _f, failed, info: problems.append(f"{failed}: {info[1]}"))
