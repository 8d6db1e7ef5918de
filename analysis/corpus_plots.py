"""The label grid of a corpus run: one cell per head, coloured and lettered by its label."""
from __future__ import annotations

import numpy as np

from analysis.figio import plt  # Agg is selected there, before pyplot

# One colour per label, in LABELS order (previous, next, self, cls, sep, punct, markers, broad, mixed).
COLOURS = ("#1f77b4", "#ff7f0e", "#9467bd", "#d62728", "#2ca02c", "#8c564b", "#bcbd22", "#17becf", "#dddddd")
SHORT = {"previous": "prev", "next": "next", "self": "self", "cls": "CLS", "sep": "SEP", "punct": "punct",
         "markers": "mark", "broad": "broad", "mixed": ""}


def label_grid(labels: np.ndarray, names: tuple[str, ...], title: str):
    """(layers, heads) array of labels from `names` -> a Figure: layers down, heads across, both from 1."""
    from matplotlib.colors import BoundaryNorm, ListedColormap
    from matplotlib.patches import Patch

    assert labels.ndim == 2, labels.shape
    assert len(names) <= len(COLOURS), names
    layers, heads = labels.shape
    codes = np.vectorize(names.index, otypes=[np.int64])(labels)  # (layers, heads)
    colours = ListedColormap(COLOURS[:len(names)])
    norm = BoundaryNorm(np.arange(len(names) + 1) - 0.5, len(names))
    fig, ax = plt.subplots(figsize=(1.0 + 0.55 * heads + 1.6, 1.2 + 0.45 * layers))
    ax.imshow(codes, cmap=colours, norm=norm, aspect="auto", interpolation="nearest")
    for layer in range(layers):
        for head in range(heads):
            ax.text(head, layer, SHORT.get(labels[layer, head], labels[layer, head]), ha="center",
                    va="center", fontsize=7)
    ax.set_xticks(range(heads), [str(h + 1) for h in range(heads)])
    ax.set_yticks(range(layers), [str(l + 1) for l in range(layers)])
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title(title, fontsize=9)
    handles = [Patch(facecolor=COLOURS[i], edgecolor="grey", label=name) for i, name in enumerate(names)]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    fig.tight_layout()
    return fig
