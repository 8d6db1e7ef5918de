"""The figures of `compare` (MDS map, distance matrix, layer x layer means) and of `detect` (layer x head grids).

Each returns a bare matplotlib Figure (outputs.figio.new_figure: no pyplot, no global state).
"""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..outputs.figio import new_figure

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from .compare import CompareResult

MARKERS = ("o", "^", "s", "D", "v", "P", "X", "*")  # one per model, in the order given
DEPTH_CMAP = "viridis"
LEGEND_GREY = "0.6"  # the MDS legend's markers: it shows each model's shape, not a depth
POINT_AREA = 30  # an MDS point's area, points^2
DISTANCE_CMAP = "magma_r"  # dark: far apart
WHITE_FROM = 0.41  # the share of DISTANCE_CMAP's scale from which white text reads better than dark (4.1 against 4.0:1)


def _title(text: str, width: float) -> str:
    return textwrap.fill(text, max(30, int(width * 11)))


def mds_figure(result: CompareResult) -> Figure:
    """Clark et al.'s Figure 6: a point per head at its MDS coordinates, coloured by its layer's depth (layer / the
    model's layers, so models of different depths share the scale), a marker per model."""
    from matplotlib import colormaps
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.lines import Line2D

    # the legend sits below the axes, one line per model: the figure grows with it so that none is cut off
    legend = 0.15 + 0.2 * len(result.models)  # inches
    height = 5.6 + legend
    bottom, top = (0.5 + legend) / height, 1 - 1.0 / height
    fig = new_figure(figsize=(7.5, height))
    ax = fig.add_axes((0.1, bottom, 0.68, top - bottom))
    cmap = colormaps[DEPTH_CMAP]
    mds = result.mds
    shapes = []  # the legend's: each model's marker in one neutral colour (the colour is depth, on the colourbar)
    for index, model in enumerate(result.models):
        rows = mds[mds["model"] == model.name]
        depth = (rows["layer"].to_numpy() - 1) / max(1, model.layers - 1)
        marker = MARKERS[index % len(MARKERS)]
        ax.scatter(rows["x"], rows["y"], c=cmap(depth), marker=marker, s=POINT_AREA, edgecolors="black",
                   linewidths=0.3)
        shapes.append(Line2D([], [], linestyle="", marker=marker, markersize=POINT_AREA ** 0.5,
                             markerfacecolor=LEGEND_GREY, markeredgecolor="black", markeredgewidth=0.3,
                             label=f"{model.name} ({model.layers} x {model.heads})"))
    fig.legend(handles=shapes, loc="lower left", bbox_to_anchor=(0.1, 0.08 / height), fontsize=8, frameon=False,
               ncol=1, borderaxespad=0)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_xlabel("MDS 1", fontsize=9)
    ax.set_ylabel("MDS 2", fontsize=9)
    bar = fig.add_axes((0.82, bottom, 0.025, top - bottom))
    colours = fig.colorbar(ScalarMappable(norm=Normalize(0, 1), cmap=cmap), cax=bar)
    colours.set_ticks([0, 1], labels=["first layer", "last layer"])
    colours.ax.tick_params(labelsize=8)
    fig.suptitle(_title(f"Heads by Jensen-Shannon divergence of their word rows, {result.summary['counts']['sentences']} "
                        f"sentences ({result.summary['measure']}): points close together attend alike", 7.5),
                 fontsize=10, y=0.97, va="top")
    return fig


def distance_figure(result: CompareResult) -> Figure:
    """The (N, N) JS matrix as a heatmap, heads ordered by model, layer and head; lines between models, ticks at
    each model's layers."""
    matrix = result.matrix
    n = matrix.shape[0]
    side = float(np.clip(n * 0.03, 5.0, 11.0))
    fig = new_figure(figsize=(side + 2.1, side + 1.0))
    width, height = fig.get_size_inches()
    ax = fig.add_axes((1.0 / width, 0.6 / height, side / width, side / height))
    image = ax.imshow(matrix, cmap=DISTANCE_CMAP, vmin=0.0, vmax=float(np.log(2)), interpolation="nearest")
    starts = np.cumsum([0] + [m.layers * m.heads for m in result.models])
    ticks, labels = [], []
    for index, model in enumerate(result.models):
        if index:
            ax.axhline(starts[index] - 0.5, color="white", linewidth=1.2)
            ax.axvline(starts[index] - 0.5, color="white", linewidth=1.2)
        step = max(1, model.layers // 6)
        for layer in range(0, model.layers, step):
            ticks.append(starts[index] + layer * model.heads)
            labels.append(f"{index + 1}:L{layer + 1}")
    ax.set_xticks(ticks, labels, fontsize=7, rotation=90)
    ax.set_yticks(ticks, labels, fontsize=7)
    ax.tick_params(length=2)
    cax = fig.add_axes(((side + 1.15) / width, 0.6 / height, 0.18 / width, side / height))
    bar = fig.colorbar(image, cax=cax)
    bar.set_label("JS (nats; ln 2 = most different)", fontsize=8)
    bar.ax.tick_params(labelsize=7)
    names = "; ".join(f"{i + 1}: {m.name}" for i, m in enumerate(result.models))
    fig.suptitle(_title(f"JS between every two heads, by model, layer, head ({names})", width), fontsize=9,
                 y=1 - 0.08 / height, va="top")
    return fig


def layers_figure(result: CompareResult) -> Figure:
    """For two models: the mean JS between each layer of the first (rows) and each layer of the second (columns)."""
    from ..outputs.plots import INK, WHITE, label_cells

    first, second = result.models[:2]
    block = result.block(0, 1).reshape(first.layers, first.heads, second.layers, second.heads)
    means = block.mean(axis=(1, 3))  # (layers a, layers b)
    cell = 0.42 if max(means.shape) <= 16 else 0.22
    body_w, body_h = cell * second.layers, cell * first.layers
    width, height = body_w + 2.4, body_h + 1.8
    fig = new_figure(figsize=(width, height))
    ax = fig.add_axes((0.9 / width, 0.7 / height, body_w / width, body_h / height))
    # the distance matrix's fixed scale, 0 to ln 2: a scale stretched to these means would show 0.2061 and 0.2062 as
    # black and pale yellow, structure that is not there
    most = float(np.log(2))
    image = ax.imshow(means, cmap=DISTANCE_CMAP, vmin=0.0, vmax=most, interpolation="nearest", aspect="equal")
    if cell >= 0.4:  # two decimals; white from 0.41 of the scale, where it reads better than ink on magma_r
        label_cells(ax, np.vectorize(lambda v: f"{v:.2f}", otypes=[object])(means),
                    [WHITE if v > WHITE_FROM * most else INK for v in means.reshape(-1)], 5.5)
    ax.set_xticks(np.arange(second.layers), [str(i + 1) for i in range(second.layers)], fontsize=7)
    ax.set_yticks(np.arange(first.layers), [str(i + 1) for i in range(first.layers)], fontsize=7)
    # a model given as a long path: its last part, wrapped to the axis, so that the labels do not run into each other
    # (two checkpoints .../a/final and .../b/final keep their whole names, or they would read alike)
    short = [Path(m.name).name for m in (first, second)]
    shown = short if short[0] != short[1] else [first.name, second.name]
    ax.set_xlabel(textwrap.fill(f"layer of {shown[1]}", max(20, int(body_w * 13))), fontsize=8)
    ax.set_ylabel(textwrap.fill(f"layer of {shown[0]}", max(20, int(body_h * 13))), fontsize=8)
    cax = fig.add_axes(((body_w + 1.1) / width, 0.7 / height, 0.15 / width, body_h / height))
    bar = fig.colorbar(image, cax=cax)
    bar.set_label("mean JS (nats)", fontsize=8)
    bar.ax.tick_params(labelsize=7)
    fig.suptitle(_title("Mean JS between the heads of each pair of layers (low: alike)", width), fontsize=9,
                 y=1 - 0.08 / height, va="top")
    return fig


PANEL_TITLE_WIDTH = 2.3  # inches: a detect grid's title, 'induction (%): best L12H12, 100' at 9 pt


def detect_figure(heads: pd.DataFrame, title: str) -> Figure:
    """Two layer x head grids side by side: each head's induction and previous-token scores (0 to 1), and one colour
    bar in percent (the cells of a grid over 16 layers or heads are too small to carry their numbers)."""
    from ..outputs.plots import HEATMAP_CMAP, annotate_cells, percent_colour_bar

    layers, per_layer = int(heads["layer"].max()), int(heads["head"].max())
    cell = 0.42 if layers <= 16 and per_layer <= 16 else 0.26
    panel_w, panel_h = cell * per_layer, cell * layers
    slot = max(panel_w, PANEL_TITLE_WIDTH)  # each grid centred in a slot that its title fits (one head: 0.42 in)
    gap, left, bottom, bar_space = 0.7, 0.6, 0.5, 1.0
    width = left + 2 * slot + gap + bar_space
    title = _title(title, width)
    top = 1.1 + 0.18 * title.count("\n")
    fig = new_figure(figsize=(width, bottom + panel_h + top))
    height = fig.get_size_inches()[1]
    for index, name in enumerate(("induction", "previous")):
        grid = heads[name].to_numpy().reshape(layers, per_layer)
        x = left + index * (slot + gap) + (slot - panel_w) / 2
        ax = fig.add_axes((x / width, bottom / height, panel_w / width, panel_h / height))
        image = ax.imshow(grid, cmap=HEATMAP_CMAP, vmin=0.0, vmax=1.0, interpolation="nearest", aspect="equal")
        if cell >= 0.4:
            annotate_cells(ax, grid, 7)
        ax.set_xticks(np.arange(per_layer), [str(h + 1) for h in range(per_layer)], fontsize=7)
        ax.set_yticks(np.arange(layers), [str(layer + 1) for layer in range(layers)], fontsize=7)
        ax.tick_params(length=0)
        ax.set_xlabel("head", fontsize=9)
        ax.set_ylabel("layer", fontsize=9)
        best = int(np.argmax(grid))
        ax.set_title(f"{name} (%): best L{best // per_layer + 1}H{best % per_layer + 1}, "
                     f"{100 * grid.reshape(-1)[best]:.0f}", fontsize=9)  # in percent, as the cells
    cax = fig.add_axes(((width - bar_space + 0.25) / width, bottom / height, 0.15 / width, panel_h / height))
    percent_colour_bar(fig, image, cax, "weight")
    cax.tick_params(labelsize=7)
    fig.suptitle(title, fontsize=10, y=1 - 0.12 / height, va="top")
    return fig
