"""What the library asks of a progress bar: tqdm's `update(n)`. A tqdm bar, or any object with that method, fits."""
from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    """A progress bar: `update(n)` advances it by n (sentences or lines, as each function says)."""

    def update(self, n: int = 1, /) -> object: ...


class ProgressBar(Progress, Protocol):
    """A progress bar the library made (from a factory such as ra.corpus's `progress`) and closes when done."""

    def close(self) -> object: ...
