"""The importance figures: a layer x head heatmap of one score, and the pruning curves.

Every figure is a bare Figure (outputs.figio.new_figure): no pyplot, no backend change.
"""
from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd

from ..outputs.figio import new_figure

ORDER_COLOURS = {"taylor": "#1f5fa8", "ablation": "#d9730d", "random": "#7f7f7f"}
ANNOTATE_CELLS = 160  # write each cell's value when the grid has at most this many heads


def score_heatmap(heads: pd.DataFrame, column: str, title: str, label: str):
    """heads.csv's `column` as a layer x head grid, layers and heads counted from 1; the top head (the largest
    value, the first in layer-then-head order on ties) framed; each cell's value written in black or white,
    whichever its colour's lightness calls for; the title wrapped to the figure's width."""
    from matplotlib.patches import Rectangle

    layers, per_layer = int(heads["layer"].max()), int(heads["head"].max())
    grid = np.full((layers, per_layer), np.nan)
    grid[heads["layer"].to_numpy() - 1, heads["head"].to_numpy() - 1] = heads[column].to_numpy(dtype=float)
    width = max(4.2, 1.6 + 0.5 * per_layer)  # a model of few heads still has room for the title and the colour bar
    fig = new_figure(figsize=(width, 1.4 + 0.32 * layers), layout="constrained")
    ax = fig.add_subplot()
    finite = grid[np.isfinite(grid)]
    low, high = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    diverging = low < 0 < high
    bound = max(abs(low), abs(high)) or 1.0
    image = ax.imshow(grid, cmap="RdBu_r" if diverging else "viridis", aspect="auto",
                      vmin=-bound if diverging else low, vmax=bound if diverging else (high if high > low else low + 1))
    if layers * per_layer <= ANNOTATE_CELLS and finite.size:
        for (layer, head), value in np.ndenumerate(grid):
            if np.isfinite(value):
                red, green, blue, _ = image.cmap(image.norm(value))
                light = 0.299 * red + 0.587 * green + 0.114 * blue > 0.5
                ax.text(head, layer, f"{value:.2g}", ha="center", va="center", fontsize=6,
                        color="black" if light else "white")
    if finite.size:
        layer, head = np.unravel_index(int(np.nanargmax(grid)), grid.shape)
        ax.add_patch(Rectangle((head - 0.5, layer - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=1.6))
    ax.set_xticks(range(per_layer), [str(h + 1) for h in range(per_layer)], fontsize=7)
    ax.set_yticks(range(layers), [str(la + 1) for la in range(layers)], fontsize=7)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    fig.colorbar(image, ax=ax, label=label, shrink=0.9)
    # the title is centred over the grid, which the colour bar and the layer labels leave about width - 1.6 inches
    ax.set_title(textwrap.fill(title, max(20, int((width - 1.6) * 72 / (9 * 0.6)))), fontsize=9)
    return fig


def pruning_figure(pruning: pd.DataFrame, intact: float, title: str, objective_label: str,
                   intact_accuracy: float | None = None):
    """The objective against the fraction of heads pruned, one line per order; the intact objective dotted. With
    an `accuracy` column (the label objective), a second panel: accuracy, the measure Michel et al. plot."""
    panels = 2 if "accuracy" in pruning.columns else 1
    fig = new_figure(figsize=(6.5, 4.2 * panels), layout="constrained")
    axes = fig.subplots(panels, 1, squeeze=False)[:, 0]
    shown = [("objective", objective_label, intact), ("accuracy", "accuracy", intact_accuracy)][:panels]
    for ax, (column, axis_label, reference) in zip(axes, shown):
        for order, part in pruning.groupby("order", sort=False):
            ax.plot(part["fraction"] * 100, part[column], marker="o", markersize=3,
                    color=ORDER_COLOURS.get(str(order)), label=f"{order} order")
        if reference is not None:
            ax.axhline(reference, color="black", linestyle=":", linewidth=1, label="intact model")
        ax.set_xlabel("heads pruned (%)")
        ax.set_ylabel(axis_label)
        ax.set_xlim(0, 100)
        ax.legend(fontsize=8)
    axes[0].set_title(title, fontsize=9)
    return fig
