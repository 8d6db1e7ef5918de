"""Figures without global state, and deterministic saving: same inputs, same bytes (no version, no date, fixed dpi).

Nothing here selects a backend or touches pyplot: `new_figure` makes a bare `Figure` on an Agg canvas of its
own, so importing and drawing leave the user's backend, rcParams and pyplot's figure list as they were.
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 100  # fixed: the same pixel size on every machine

# Per format, the metadata keys that would carry a version or a date; None drops them.
_METADATA: dict[str, dict[str, None]] = {
    ".png": {"Software": None},
    ".svg": {"Creator": None, "Date": None},
    ".pdf": {"Creator": None, "Producer": None, "CreationDate": None},
}


def readable_texts(fig: Figure) -> None:
    """Replace each lone surrogate in the figure's texts with U+FFFD: a file name that is not UTF-8 (Python reads
    b"bad\\xff" as "bad\\udcff") in a title made FreeType raise a TypeError while laying the figure out."""
    from matplotlib.text import Text

    from ..engine.text import SURROGATE

    for text in fig.findobj(Text):
        value = text.get_text()
        if SURROGATE.search(value):
            try:  # the bytes of a file name, read back as UTF-8 where they are
                value = value.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            except UnicodeEncodeError:  # a surrogate that stands for no byte (a JSON "\\ud83d")
                value = SURROGATE.sub("\ufffd", value)
            text.set_text(value)


class ShownFigure(Figure):
    """A Figure that Jupyter shows as a PNG by itself (bare Figures outside pyplot show only their repr); its texts
    are made readable before every layout and drawing (readable_texts)."""

    def draw(self, renderer) -> None:
        readable_texts(self)
        super().draw(renderer)

    def tight_layout(self, *args, **kwargs) -> None:
        readable_texts(self)
        super().tight_layout(*args, **kwargs)

    def _repr_png_(self) -> bytes:
        import io

        buffer = io.BytesIO()
        self.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
        return buffer.getvalue()


def new_figure(**kwargs) -> Figure:
    """A `Figure(**kwargs)` at DPI drawn by its own Agg canvas: not registered with pyplot, whatever its backend."""
    fig = ShownFigure(dpi=DPI, **kwargs)
    FigureCanvasAgg(fig)  # attaches itself as fig.canvas; tight/constrained layout and savefig render with Agg
    return fig


def save_figure(fig: Figure, path: str | Path, dpi: int = DPI) -> Path:
    """Save fig to path (.png, .svg or .pdf) byte-for-byte reproducibly, then close it. Returns the path."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in _METADATA:
        raise ValueError(f"cannot save a figure as {suffix!r}; use one of {', '.join(sorted(_METADATA))}")
    if not isinstance(fig.canvas, FigureCanvasAgg):  # a pyplot figure of another backend: render with Agg too
        FigureCanvasAgg(fig)
    # svg ids are random unless salted
    # Missing glyphs are reported once, as a line naming the font to install (real_attention.outputs.fonts), not per glyph.
    with rc_context({"svg.hashsalt": "real-attention", "svg.fonttype": "path"}), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        fig.savefig(path, dpi=dpi, metadata=_METADATA[suffix])
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:  # a figure made with pyplot is closed there too; a bare Figure is simply dropped
        pyplot.close(fig)
    return path
