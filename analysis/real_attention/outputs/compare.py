"""`run --compare-measures`: every head by weight and by norm, side by side (a table, a line and a figure).

The lesson counts marker heads by weight; Kobayashi et al. (2020) ask whether those heads move anything.
One row per head: where the focus word looks most (real_attention.engine.categories) and the share of its row that goes to
markers, under each measure.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pandas as pd

from ..engine.categories import FIRST, focus_categories
from ..engine.measures import NORM, WEIGHTS
from ..engine.pipeline import RunResult

COMPARE_NAME = "measures"  # results/<lang>/measures.csv, figures/<lang>/measures.<fmt>
COMPARE_COLUMNS = ["layer", "head", "category_weights", "category_norm", "marker_head_weights", "marker_head_norm",
                   "marker_share_weights", "marker_share_norm"]


def marker_share(result: RunResult) -> np.ndarray:
    """(layers, heads) the focus word's row weight on markers, mean over the sentences."""
    return result.report.marker_weight.mean(axis=0)


def _check_pair(by_weight: RunResult, by_norm: RunResult) -> None:
    assert by_weight.measure == WEIGHTS and by_norm.measure == NORM, (by_weight.measure, by_norm.measure)
    assert by_weight.report.shape == by_norm.report.shape


def compare_frame(by_weight: RunResult, by_norm: RunResult) -> pd.DataFrame:
    """One row per head (layer and head from 1): its category, marker-head flag and marker share per measure."""
    _check_pair(by_weight, by_norm)
    layer, head = np.indices(by_weight.report.shape).reshape(2, -1)
    frame = pd.DataFrame({"layer": layer + 1, "head": head + 1})
    for result in (by_weight, by_norm):
        suffix = result.measure
        frame[f"category_{suffix}"] = focus_categories(result.report, result.sentences).reshape(-1)
        frame[f"marker_head_{suffix}"] = result.report.marker_head.reshape(-1).astype(bool)  # CSV: true/false
        frame[f"marker_share_{suffix}"] = marker_share(result).reshape(-1).astype(np.float64)
    return frame[COMPARE_COLUMNS]


def compare_line(by_weight: RunResult, by_norm: RunResult) -> str:
    """'marker heads: 58 of 144 by weight, K of 144 by norm; ...' and in how many heads norm lowers the share."""
    total = by_weight.report.marker_head.size
    lower = int((marker_share(by_norm) < marker_share(by_weight)).sum())
    line = (f"marker heads: {int(by_weight.report.marker_head.sum())} of {total} by weight, "
            f"{int(by_norm.report.marker_head.sum())} of {total} by norm; the focus word's share on markers is "
            f"lower by norm in {lower} of {total} heads")
    if by_weight.causal:  # a decoder's sink is its first token, which need not be a marker
        first = [int((focus_categories(r.report, r.sentences) == FIRST).sum()) for r in (by_weight, by_norm)]
        line += f"; first-token heads: {first[0]} of {total} by weight, {first[1]} of {total} by norm"
    return line


def draw_compare(by_weight: RunResult, by_norm: RunResult):
    """Two layers x heads grids side by side: the focus word's marker share by weight and by norm, marker
    heads framed; cells show whole percentages."""
    from matplotlib.patches import Rectangle

    from .figio import new_figure
    from ..engine.measures import MEASURE_TITLE
    from ..engine.naming import short_revision
    from .plots import EM, HEATMAP_CMAP, annotate_cells

    _check_pair(by_weight, by_norm)
    layers, heads = by_weight.report.shape
    cell = 0.42
    panel_w, panel_h = cell * heads, cell * layers
    gap, left, bottom = 0.6, 0.6, 0.5
    width = left + 2 * panel_w + gap + 0.3
    focus = by_weight.sentence_set.focus
    title = (f"{by_weight.model} @ {short_revision(by_weight.revision)}: share of «{focus}»'s attention on "
             "markers, mean over the sentences")
    title = textwrap.fill(title, max(30, int((width - 0.2) / (10 * EM))))  # a narrow grid clips no title
    top = 1.2 + 0.18 * title.count("\n")
    fig = new_figure(figsize=(width, bottom + panel_h + top))
    height = fig.get_size_inches()[1]
    for index, result in enumerate((by_weight, by_norm)):
        share = marker_share(result)
        x0 = left + index * (panel_w + gap)
        ax = fig.add_axes((x0 / width, bottom / height, panel_w / width, panel_h / height))
        ax.imshow(share, cmap=HEATMAP_CMAP, vmin=0.0, vmax=1.0, interpolation="nearest", aspect="equal")
        annotate_cells(ax, share, 7)
        for layer, head in np.argwhere(result.report.marker_head):
            ax.add_patch(Rectangle((head - 0.5, layer - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=1.5,
                                   gid="marker-head"))
        ax.set_xticks(np.arange(heads), [str(h + 1) for h in range(heads)], fontsize=8)
        ax.set_yticks(np.arange(layers), [str(l + 1) for l in range(layers)], fontsize=8)
        ax.tick_params(length=0)
        ax.set_xlabel("head", fontsize=9)
        ax.set_ylabel("layer", fontsize=9)
        count = int(result.report.marker_head.sum())
        ax.set_title(f"by {MEASURE_TITLE[result.measure]}\nmarker heads (framed): {count} of {layers * heads}",
                     fontsize=10)
    fig.suptitle(title, fontsize=10, y=1 - 0.12 / height, va="top")
    return fig


def write_compare(results_folder: Path, figures_folder: Path | None, by_weight: RunResult, by_norm: RunResult,
                  formats: tuple[str, ...] = ("png",)) -> list[Path]:
    """measures.csv into results_folder and, unless figures_folder is None, measures.<fmt>; returns the paths."""
    from .tables import write_csv

    paths = [Path(results_folder) / f"{COMPARE_NAME}.csv"]
    write_csv(compare_frame(by_weight, by_norm), paths[0])
    if figures_folder is not None:
        from .figio import save_figure

        for fmt in formats:
            paths.append(save_figure(draw_compare(by_weight, by_norm), Path(figures_folder) / f"{COMPARE_NAME}.{fmt}"))
    return paths
