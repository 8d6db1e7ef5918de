"""Deterministic figure saving: same inputs, same bytes (no software version, no dates, fixed dpi)."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # before pyplot: no display, and the same raster on every machine

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

DPI = 100

# Per format, the metadata keys that would carry a version or a date; None drops them.
_METADATA: dict[str, dict[str, None]] = {
    ".png": {"Software": None},
    ".svg": {"Creator": None, "Date": None},
    ".pdf": {"Creator": None, "Producer": None, "CreationDate": None},
}


def save_figure(fig: Figure, path: str | Path, dpi: int = DPI) -> Path:
    """Save fig to path (.png, .svg or .pdf) byte-for-byte reproducibly, then close it. Returns the path."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in _METADATA:
        raise ValueError(f"cannot save a figure as {suffix!r}; use one of {', '.join(sorted(_METADATA))}")
    # svg ids are random unless salted
    with matplotlib.rc_context({"svg.hashsalt": "real-attention", "svg.fonttype": "path"}):
        fig.savefig(path, dpi=dpi, metadata=_METADATA[suffix])
    plt.close(fig)
    return path
