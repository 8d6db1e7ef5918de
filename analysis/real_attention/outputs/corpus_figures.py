"""The corpus figures: the label grid (one cell per head, coloured and lettered by its label) and the statistics."""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from .figio import new_figure
from .plots import label_cells

# One colour per label, in LABELS order (previous, next, self, first_special, last_special, punct, markers, first,
# broad, mixed).
COLOURS = ("#1f77b4", "#ff7f0e", "#9467bd", "#d62728", "#2ca02c", "#8c564b", "#bcbd22", "#e377c2", "#17becf",
           "#dddddd")
SHORT = {"previous": "prev", "next": "next", "self": "self", "first_special": "1st sp", "last_special": "last sp",
         "punct": "punct", "markers": "mark", "first": "first", "broad": "broad", "mixed": ""}


def label_grid(labels: np.ndarray, names: tuple[str, ...], title: str) -> Figure:
    """(layers, heads) array of labels from `names` -> a Figure: layers down, heads across, both from 1."""
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.patches import Patch

    assert labels.ndim == 2, labels.shape
    assert len(names) <= len(COLOURS), names
    layers, heads = labels.shape
    codes = np.vectorize(names.index, otypes=[np.int64])(labels)  # (layers, heads)
    colours = ListedColormap(COLOURS[:len(names)])
    norm = BoundaryNorm(np.arange(len(names) + 1) - 0.5, len(names))
    fig = new_figure(figsize=(1.0 + 0.55 * heads + 1.6, 1.2 + 0.45 * layers))
    ax = fig.subplots()
    ax.imshow(codes, cmap=colours, norm=norm, aspect="auto", interpolation="nearest")
    short = np.vectorize(lambda label: SHORT.get(label, label), otypes=[object])(labels)  # (layers, heads)
    label_cells(ax, short, ["black"] * short.size, 7)
    ax.set_xticks(range(heads), [str(h + 1) for h in range(heads)])
    ax.set_yticks(range(layers), [str(l + 1) for l in range(layers)])
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(title, fontsize=9)
    handles = [Patch(facecolor=COLOURS[i], edgecolor="grey", label=name) for i, name in enumerate(names)]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    fig.tight_layout()
    return fig


def _short_number(value: float) -> str:
    """.87 for 0.87, 1.0 for 1.0; nothing for a mean of no rows (an empty shard's NaN)."""
    if value != value:
        return ""
    return f"{value:.2f}"[1:] if 0 <= value < 1 else f"{value:.1f}"


NUMBER_SIZE = 7  # points: the cells' numbers (7 pt is about 10 px at the figures' 100 dpi)
CELL_WIDTH, CELL_HEIGHT = 0.4, 0.34  # inches per head and per layer: room for ".87" at NUMBER_SIZE


def statistics_grid(means: dict[str, np.ndarray], uniform_entropy: float, title: str) -> Figure:
    """Each pooled statistic as a (layers, heads) heatmap, one panel per statistic -> a Figure.

    Weights share one 0-1 scale; entropy is shown as a fraction of the uniform-attention entropy
    (the quantity the "broad" threshold compares), so every panel reads on the same 0-1 scale.
    """
    names = list(means)
    layers, heads = means[names[0]].shape
    columns = 4
    rows = -(-len(names) // columns)
    fig = new_figure(figsize=(columns * (0.9 + CELL_WIDTH * heads), rows * (0.9 + CELL_HEIGHT * layers) + 0.5),
                     layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False)
    image = None
    for ax, name in zip(axes.flat, names):
        values = means[name] / uniform_entropy if name == "entropy" else means[name]  # (layers, heads)
        image = ax.imshow(values, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
        if heads <= 16:  # room for the numbers
            numbers = np.array([_short_number(float(value)) for value in values.reshape(-1)], dtype=object)
            label_cells(ax, numbers.reshape(values.shape),
                        ["black" if value > 0.6 else "white" for value in values.reshape(-1).tolist()], NUMBER_SIZE)
        ax.set_title("entropy / uniform" if name == "entropy" else name, fontsize=9)
        ax.set_xticks(range(heads), [str(h + 1) for h in range(heads)], fontsize=6)
        ax.set_yticks(range(layers), [str(l + 1) for l in range(layers)], fontsize=6)
        ax.set_xlabel("head", fontsize=7)
        ax.set_ylabel("layer", fontsize=7)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.suptitle(title, fontsize=10)
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.8, label="pooled mean")
    return fig
