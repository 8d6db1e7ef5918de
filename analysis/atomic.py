"""Write output folders all at once: stage them beside their targets, then swap them in by renaming."""
from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from analysis.errors import OutputError  # noqa: F401  (re-exported: raised here)


class Staging:
    """Collects staged folders; `commit` renames each over its target, `discard` removes them."""

    def __init__(self) -> None:
        self._staged: list[tuple[Path, Path]] = []  # (staging folder, target)

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

    def commit(self) -> None:
        for staging, target in self._staged:
            backup = None
            if target.exists():
                backup = target.with_name(f".{target.name}.old-{os.getpid()}")
                os.rename(target, backup)
            os.rename(staging, target)
            if backup is not None:
                shutil.rmtree(backup, ignore_errors=True)
        self._staged.clear()

    def discard(self) -> None:
        for staging, _ in self._staged:
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
    staging.commit()
