"""The importance figures: a layer x head heatmap of one score, and the pruning curves.

Every figure is a bare Figure (outputs.figio.new_figure): no pyplot, no backend change.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..outputs.figio import new_figure

ORDER_COLOURS = {"taylor": "#1f5fa8", "ablation": "#d9730d", "random": "#7f7f7f"}
ANNOTATE_CELLS = 160  # write each cell's value when the grid has at most this many heads


def score_heatmap(heads: pd.DataFrame, column: str, title: str, label: str):
    """heads.csv's `column` as a layer x head grid, layers and heads counted from 1; the top head framed."""
    layers, per_layer = int(heads["layer"].max()), int(heads["head"].max())
    grid = np.full((layers, per_layer), np.nan)
    grid[heads["layer"].to_numpy() - 1, heads["head"].to_numpy() - 1] = heads[column].to_numpy(dtype=float)
    fig = new_figure(figsize=(1.6 + 0.5 * per_layer, 1.4 + 0.32 * layers), layout="constrained")
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
                ax.text(head, layer, f"{value:.2g}", ha="center", va="center", fontsize=6,
                        color="black" if diverging or value > low + 0.5 * (high - low) else "white")
    ax.set_xticks(range(per_layer), [str(h + 1) for h in range(per_layer)], fontsize=7)
    ax.set_yticks(range(layers), [str(la + 1) for la in range(layers)], fontsize=7)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    fig.colorbar(image, ax=ax, label=label, shrink=0.9)
    ax.set_title(title, fontsize=9)
    return fig


def pruning_figure(pruning: pd.DataFrame, intact: float, title: str, objective_label: str):
    """The objective against the fraction of heads pruned, one line per order; the intact objective dotted."""
    fig = new_figure(figsize=(6.5, 4.2), layout="constrained")
    ax = fig.add_subplot()
    for order, part in pruning.groupby("order", sort=False):
        ax.plot(part["fraction"] * 100, part["objective"], marker="o", markersize=3,
                color=ORDER_COLOURS.get(str(order)), label=f"{order} order")
    ax.axhline(intact, color="black", linestyle=":", linewidth=1, label="intact model")
    ax.set_xlabel("heads pruned (%)")
    ax.set_ylabel(objective_label)
    ax.set_xlim(0, 100)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    return fig
