"""The syntax probe's figures: the best head per relation against the baseline (Clark et al.'s Table 1 as bars),
the layer x head accuracy grids of the most frequent relations, and example sentences with predicted and gold arcs.

Every figure is a bare Figure (outputs.figio.new_figure): no pyplot, no backend change.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..outputs.figio import new_figure
from .scoring import ALL, DIRECTIONS, UNREPORTED

HEAD_COLOUR, BASELINE_COLOUR = "#1f5fa8", "#a0a0a0"
PREDICTED_COLOUR, GOLD_COLOUR = "#1f5fa8", "#d9730d"
GRID_RELATIONS = 8
ARROW = {"dep->head": "dep\u2192head", "head->dep": "head\u2192dep"}


def head_name(layer: int, head: int, direction: str) -> str:
    return f"L{layer}H{head} {ARROW[direction]}"


def best_figure(best: pd.DataFrame, title: str, measure: str = "weights"):
    """One bar pair per relation of best.csv: the best head's accuracy (named on its bar) and the best offset's."""
    rows = len(best)
    fig = new_figure(figsize=(8.5, 1.2 + 0.55 * rows), layout="constrained")
    ax = fig.add_subplot()
    y = np.arange(rows)
    ax.barh(y - 0.2, best["accuracy"] * 100, height=0.38, color=HEAD_COLOUR, label="best head")
    ax.barh(y + 0.2, best["baseline_accuracy"] * 100, height=0.38, color=BASELINE_COLOUR, label="best fixed offset")
    labels = []  # (text, the bar's end in %, its colour inside the bar)
    for i, row in enumerate(best.itertuples(index=False)):
        labels.append((ax.text(1, i - 0.2, f"{head_name(row.layer, row.head, row.direction)}  {100 * row.accuracy:.1f}%",
                               va="center", ha="left", color="white", fontsize=8, fontweight="bold"),
                       100 * row.accuracy))
        labels.append((ax.text(1, i + 0.2, f"offset {row.baseline_offset:+d}  {100 * row.baseline_accuracy:.1f}%",
                               va="center", ha="left", color="black", fontsize=8), 100 * row.baseline_accuracy))
    ax.set_yticks(y, [f"{r} ({t:,})" for r, t in zip(best["relation"], best["total"])])
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("accuracy (%)")
    ax.legend(loc="lower right", fontsize=8)
    measured = "" if measure == "weights" else f", by {measure}"
    ax.set_title(f"{title}: the best head per relation{measured}", fontsize=10)
    _place_bar_labels(fig, ax, labels)
    return fig


def _place_bar_labels(fig, ax, labels) -> None:
    """Each label inside its bar where it fits (1 % from the bar's start), else just after the bar's end in
    black: a short bar's label never spills out of it in white onto the white background."""
    fig.draw_without_rendering()  # the constrained layout fixes the axes' size
    renderer = fig.canvas.get_renderer()
    pad = 4 * fig.dpi / 72  # pixels: 4 points
    for text, end in labels:
        width = text.get_window_extent(renderer).width
        start_px, end_px = ax.transData.transform([(1, 0), (end, 0)])[:, 0]
        if start_px + width + pad > end_px:
            text.set_x(end + 1)
            text.set_color("black")


def relations_figure(heads: pd.DataFrame, best: pd.DataFrame, title: str):
    """For the GRID_RELATIONS most frequent relations (not all, root or punct): each head's accuracy in its better
    direction, as a layer x head grid; the best head framed."""
    totals = heads.drop_duplicates("relation").set_index("relation")["total"]
    totals = totals.drop([ALL, *UNREPORTED], errors="ignore")
    chosen = sorted(totals.index, key=lambda r: (-totals[r], r))[:GRID_RELATIONS]
    layers, per_layer = int(heads["layer"].max()), int(heads["head"].max())
    columns = min(4, max(len(chosen), 1))
    rows = max(1, -(-len(chosen) // columns))
    fig = new_figure(figsize=(3.2 * columns + 0.8, 0.3 * layers * rows + 1.0 * rows + 0.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, columns, squeeze=False)).reshape(-1)
    image = None
    for ax, relation in zip(axes, chosen):
        part = heads[heads["relation"] == relation]
        grid = np.zeros((len(DIRECTIONS), layers, per_layer))
        grid[part["direction"].map(DIRECTIONS.index), part["layer"] - 1, part["head"] - 1] = part["accuracy"]
        image = ax.imshow(grid.max(axis=0) * 100, vmin=0, vmax=100, cmap="viridis", aspect="auto")
        top = np.unravel_index(int(np.argmax(np.moveaxis(grid, 0, 2))), (layers, per_layer, len(DIRECTIONS)))
        ax.add_patch(_frame(int(top[1]), int(top[0])))
        arrow = DIRECTIONS[top[2]].replace("->", "→")  # the framed head's direction: the grid shows the better one
        ax.set_title(f"{relation} ({int(totals[relation]):,}): L{top[0] + 1}H{top[1] + 1} {arrow} "
                     f"{100 * grid[top[2], top[0], top[1]]:.0f}%", fontsize=9)
        ax.set_xticks(range(per_layer), [str(h + 1) for h in range(per_layer)], fontsize=6)
        ax.set_yticks(range(layers), [str(la + 1) for la in range(layers)], fontsize=6)
        ax.set_xlabel("head", fontsize=7)
        ax.set_ylabel("layer", fontsize=7)
    for ax in axes[len(chosen):]:
        ax.set_axis_off()
    if not chosen:  # a treebank of root and punct arcs alone: say so rather than draw an empty page
        axes[0].text(0.5, 0.5, f"no relation but {' and '.join(UNREPORTED)} in these sentences", ha="center",
                     va="center", fontsize=9, transform=axes[0].transAxes)
    if image is not None:
        fig.colorbar(image, ax=list(axes), label="accuracy (%), better direction", shrink=0.8)
    fig.suptitle(f"{title}: accuracy of every head on the {len(chosen)} most frequent relations" if chosen else
                 f"{title}: no relation to draw", fontsize=10)
    return fig


def _frame(x: int, y: int):
    from matplotlib.patches import Rectangle

    return Rectangle((x - 0.5, y - 0.5), 1, 1, fill=False, edgecolor="red", linewidth=1.5)


def _arc(ax, start: int, end: int, above: bool, colour: str, width: float, scale: float) -> None:
    """A half ellipse from word `start` to word `end`, above or below the words, with a dot at `end`."""
    from matplotlib.patches import Arc

    span = abs(end - start)
    height = min(0.35 + 0.3 * span, 2.6) * scale
    theta = (0, 180) if above else (180, 360)
    ax.add_patch(Arc(((start + end) / 2, 0), span, 2 * height, theta1=theta[0], theta2=theta[1], color=colour,
                     linewidth=width))
    ax.plot([end], [0.12 if above else -0.12], "o", color=colour, markersize=3 + width)


def example_figure(examples: Sequence, title: str):
    """Each example sentence: arcs above the words from every word to its predicted head (the relation's best
    head), arcs below to its gold head; the relation's words and arcs are bold, a dot marks the head end."""
    first = examples[0]
    width = max(len(e.words) for e in examples)
    fig = new_figure(figsize=(max(7.0, 0.85 * width), 2.9 * len(examples) + 0.6), layout="constrained")
    axes = np.atleast_1d(fig.subplots(len(examples), 1, squeeze=False)).reshape(-1)
    for ax, example in zip(axes, examples):
        ours = [i for i, r in enumerate(example.relations) if r == example.relation]
        for i, (gold, predicted) in enumerate(zip(example.gold, example.predicted)):
            bold = i in ours
            if predicted < len(example.words):  # else no prediction: nothing but the word itself got weight
                _arc(ax, i, predicted, True, PREDICTED_COLOUR, 2.2 if bold else 0.7, 1.0)
            if gold >= 0:
                _arc(ax, i, gold, False, GOLD_COLOUR, 2.2 if bold else 0.7, 1.0)
            else:  # the root has no gold head among the words
                ax.text(i, -0.45, "root", ha="center", va="top", fontsize=7, color=GOLD_COLOUR)
        for i, word in enumerate(example.words):
            ax.text(i, 0, word, ha="center", va="center", fontsize=9, fontweight="bold" if i in ours else "normal",
                    bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none"})
        right = sum(example.predicted[i] == example.gold[i] for i in ours)
        ax.set_title(f"{example.relation}: {right} of {len(ours)} right in this sentence", fontsize=9)
        ax.set_xlim(-0.7, len(example.words) - 0.3)
        ax.set_ylim(-3.0, 3.0)
        ax.set_axis_off()
    handles = [_line(PREDICTED_COLOUR, f"predicted by {head_name(first.layer, first.head, first.direction)} (above)"),
               _line(GOLD_COLOUR, "gold head (below)")]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, fontsize=8, frameon=False)
    fig.suptitle(f"{title}: {first.relation}, the best head L{first.layer}H{first.head}", fontsize=10)
    return fig


def _line(colour: str, label: str):
    from matplotlib.lines import Line2D

    return Line2D([], [], color=colour, linewidth=2, label=label)
