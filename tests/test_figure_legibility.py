"""Text in figures is legible and stays where it belongs (issue 27.15): statistics.png's cell numbers are at least
7 pt at the saved dpi and fit their cells; best.png's labels sit inside their bar where they fit, else after its
end, never spilling out of a short bar in white. Checked on the artists, not on pixels."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from real_attention.engine.heads import STATISTICS
from real_attention.outputs.corpus_figures import statistics_grid
from real_attention.outputs.figio import DPI
from real_attention.outputs.plots import CellLabels
from real_attention.syntax_probe.figures import best_figure


@pytest.mark.parametrize("layers, heads", [(6, 12), (12, 12), (3, 4), (30, 9)])
def test_statistics_numbers_are_7_pt_and_fit_their_cells(layers, heads):
    rng = np.random.default_rng(0)
    means = {name: rng.random((layers, heads)) for name in STATISTICS}
    means[STATISTICS[0]][0, 0] = 1.0  # the widest label, "1.0"
    fig = statistics_grid(means, 1.0, "tiny on corpus: 10 sentences")
    fig.draw_without_rendering()
    cells = [c for ax in fig.axes for c in ax.collections if isinstance(c, CellLabels)]
    assert len(cells) == len(STATISTICS)
    for labels in cells:
        assert labels.size >= 7 and fig.dpi == DPI
        box = labels.axes.get_window_extent()
        cell_w, cell_h = box.width / heads, box.height / layers  # pixels
        for path in labels.get_paths():
            extent = path.get_extents()  # points
            assert extent.width * DPI / 72 <= cell_w, (extent.width, cell_w)
            assert extent.height * DPI / 72 <= cell_h, (extent.height, cell_h)
        assert max(p.get_extents().height for p in labels.get_paths()) * DPI / 72 >= 6.5  # digits ~7 px high


def best_frame(accuracies, baselines) -> pd.DataFrame:
    n = len(accuracies)
    return pd.DataFrame({"relation": [f"rel{i}" for i in range(n)], "total": [100] * n,
                         "accuracy": accuracies, "layer": [12] * n, "head": [11] * n,
                         "direction": ["head->dep"] * n, "baseline_accuracy": baselines, "baseline_offset": [-2] * n})


def test_best_labels_sit_inside_long_bars_and_after_short_ones():
    best = best_frame([0.9, 0.02, 0.3, 0.0, 0.12], [0.5, 0.01, 0.06, 0.0, 0.99])
    fig = best_figure(best, "tiny on ewt")
    fig.draw_without_rendering()
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    axes_box = ax.get_window_extent(renderer)
    texts = [t for t in ax.texts]
    assert len(texts) == 2 * len(best)
    ends = [v * 100 for pair in zip(best["accuracy"], best["baseline_accuracy"]) for v in pair]
    inside = []
    for text, end in zip(texts, ends):
        box = text.get_window_extent(renderer)
        end_px = ax.transData.transform((end, 0))[0]
        assert axes_box.x0 <= box.x0 and box.x1 <= axes_box.x1, text.get_text()  # within the axes
        if box.x0 < end_px:  # inside its bar: wholly
            assert box.x1 <= end_px, text.get_text()
            inside.append(text.get_text())
        else:  # after it, in black
            assert text.get_color() == "black"
    assert any("90.0%" in t for t in inside) and not any("2.0%" in t for t in inside)
    assert any("99.0%" in t for t in inside) and not any(" 0.0%" in t for t in inside)


@pytest.mark.parametrize("layers, heads", [(3, 4), (6, 12), (2, 1)])
def test_importance_heatmaps_keep_their_title_and_colour_bar_inside_the_figure(layers, heads):
    """With 4 heads the figure was 3.6 inches wide and its title, wrapped to the figure rather than the grid, ran
    off the left edge; the colour bar's label off the right."""
    from real_attention.head_importance.figures import score_heatmap

    layer, head = np.indices((layers, heads)).reshape(2, -1) + 1
    frame = pd.DataFrame({"layer": layer, "head": head, "taylor": np.linspace(2.6e-5, 2.3e-4, layers * heads)})
    fig = score_heatmap(frame, "taylor", "bert_mlm on corpus3.txt (3 sentences), objective mlm: Taylor score "
                        "E|dL/dξ|", "taylor")
    fig.draw_without_rendering()
    page = fig.bbox
    texts = [fig.axes[0].title, *(ax.yaxis.label for ax in fig.axes)]
    for text in texts:
        box = text.get_window_extent()
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and box.y1 <= page.y1, (text.get_text(), box, page)
