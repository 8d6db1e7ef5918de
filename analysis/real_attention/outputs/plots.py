"""How the run's figures are drawn: word x word heatmaps, the overview of all heads, the focus bars, the rollout.

Which figures a run draws, and the processes that draw them, are real_attention.outputs.drawing. Figures are bare
`Figure`s on their own Agg canvas (real_attention.outputs.figio: no backend is selected, no pyplot state) and are saved
through real_attention.outputs.figio, so reruns give the same bytes. They are laid out with margins computed in inches from
the words, so their size grows with the sentence and nothing is left to a layout engine.
"""
from __future__ import annotations

import functools
import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
from matplotlib.collections import PathCollection
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle
from matplotlib.ticker import PercentFormatter
from matplotlib.transforms import Affine2D

from ..engine.categories import (
    HEATMAP_CMAP,
    HEATMAP_LIGHT_TEXT_FROM,
    CATEGORY_COLOURS,
    DARK_CATEGORIES,
    FOCUS_COLOUR,
    CATEGORY_LABELS,
    CATEGORY_NOTES,
    categories_for,
    category_counts,
)
from .figio import DPI, new_figure, save_figure
from .fonts import text_families
from ..engine.measures import MEASURE_TITLE, WEIGHTS
from ..engine.naming import short_revision

if TYPE_CHECKING:
    from matplotlib.typing import RcKeyType


SENSE_COLOUR = CATEGORY_COLOURS["sense"]
BAR_COLOUR = "#9DB4CC"

# Sizes in inches; text widths are estimated from character counts (DejaVu Sans, ~0.62 em per character).
CELL = 0.42  # one heatmap cell while the sentence is short
MAX_SIDE = 22.0  # the heatmap's side never grows past this; cells shrink instead
LABEL_SIZE = 10  # points, tick labels
CELL_TEXT_SIZE = 8  # points, cell annotations at CELL
MIN_CELL_TEXT_SIZE = 4.5  # below this, cells are left unannotated
TITLE_SIZE = 11
EM = 0.62 / 72  # inches per character per point
# Cell text colours as RGBA tuples: matplotlib parses a colour string on every call, a tuple almost for free.
WHITE, INK = (1.0, 1.0, 1.0, 1.0), (0.12, 0.12, 0.12, 1.0)



def _figure_text(draw):
    """Draw with mathtext off (a word with two '$' is text, not a formula) and, when the words need it, a
    fallback font that has their glyphs (real_attention.outputs.fonts; Latin-only figures keep the default font)."""
    @functools.wraps(draw)
    def wrapper(*args, **kwargs):
        texts = [value for value in (*args, *kwargs.values()) if isinstance(value, str)]
        texts += [item for value in (*args, *kwargs.values()) if isinstance(value, (list, tuple))
                  for item in value if isinstance(item, str)]
        style: dict[RcKeyType, Any] = {"text.parse_math": False}  # read when each Text is made, as is font.family
        families = text_families(texts)
        if families is not None:
            style["font.family"] = families
        with matplotlib.rc_context(style):
            return draw(*args, **kwargs)

    return wrapper


def percent(weight: float) -> str:
    """A weight in [0, 1] as a whole-number percentage, as the cells show it: 0.444 -> '44'."""
    return str(int(round(100 * float(weight))))


class CellLabels(PathCollection):
    """The labels of a grid's cells as one artist: each label's outline (a TextPath, centred on its cell),
    drawn in one pass. A Text artist per cell made up about a third of a heatmap's drawing time. Being
    outlines, the numbers of a PDF or SVG cannot be selected as text.

    `labels` (k,) are the labels as written and `positions` (k, 2) their (column, row) cells, row-major.
    """

    def __init__(self, ax, labels: list[str], positions: np.ndarray, colours: list[str], size: float):
        points_to_pixels = Affine2D().scale(1 / 72) + ax.figure.dpi_scale_trans  # follows savefig's dpi
        family = tuple(np.atleast_1d(matplotlib.rcParams["font.family"]).tolist())
        super().__init__([_centred_outline(label, size, family) for label in labels], offsets=positions,
                         offset_transform=ax.transData, transform=points_to_pixels, facecolors=colours,
                         edgecolors="none", linewidths=0, gid="cell", zorder=3)
        self.labels, self.positions, self.size = labels, positions, size  # size: the font size in points


@functools.lru_cache(maxsize=4096)
def _centred_outline(label: str, size: float, family: tuple[str, ...]):
    """A label's outline in points: centred across on its own width, and down on the middle of the font's line
    ("lp": ascender to descender), as va="center" centres a Text, so every label shares one baseline."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextPath

    outline = TextPath((0, 0), label, size=size, prop=FontProperties(family=list(family)))
    box = outline.get_extents()
    return outline.transformed(Affine2D().translate(-(box.x0 + box.x1) / 2, -_line_middle(size, family)))


@functools.lru_cache(maxsize=64)
def _line_middle(size: float, family: tuple[str, ...]) -> float:
    """The middle of the font's line ("lp": ascender to descender) in points above the baseline; one per size
    and family, not one per label."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextPath

    line = TextPath((0, 0), "lp", size=size, prop=FontProperties(family=list(family))).get_extents()
    return (line.y0 + line.y1) / 2


def label_cells(ax, labels: np.ndarray, colours: Sequence, size: float) -> CellLabels:
    """Write (rows, cols) strings `labels` in the cells of a (rows, cols) image, in `colours` (one per cell,
    row-major; empty labels are left out) -> the one artist that draws them."""
    rows, cols = np.indices(labels.shape).reshape(2, -1)
    texts, colours = [str(label) for label in labels.reshape(-1)], list(colours)
    shown = [i for i, text in enumerate(texts) if text]  # an empty label has no outline to draw
    cells = CellLabels(ax, [texts[i] for i in shown], np.column_stack([cols, rows])[shown].astype(float),
                       [colours[i] for i in shown], float(size))
    ax.add_collection(cells, autolim=False)
    return cells


def annotate_cells(ax, values: np.ndarray, size: float, dark: np.ndarray | None = None) -> CellLabels:
    """The whole percentage of every cell of a (rows, cols) image, white on the dark cells (by default those
    at or above HEATMAP_LIGHT_TEXT_FROM; or where `dark` (rows, cols) says) -> the one artist that draws them."""
    dark = (values >= HEATMAP_LIGHT_TEXT_FROM) if dark is None else dark
    labels = np.vectorize(percent, otypes=[object])(values)
    return label_cells(ax, labels, [WHITE if light else INK for light in dark.reshape(-1)], size)


def percent_colour_bar(fig, image, cax, label: str) -> None:
    """The colour bar of a 0-1 map in `cax`, its ticks in percent."""
    colourbar = fig.colorbar(image, cax=cax)
    colourbar.ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    colourbar.set_label(label, fontsize=LABEL_SIZE)


def _highlight(label, colour: str) -> None:
    """A tick label in bold, in the focus or sense word's colour."""
    label.set_fontweight("bold")
    label.set_color(colour)


def _text_width(text: str, size: float) -> float:
    return len(text) * size * EM


def _measure_note(measure: str) -> str:
    """What a title adds for a measure: nothing for the weights (the default), ' · by norm ...' otherwise."""
    return "" if measure == WEIGHTS else f" · by {MEASURE_TITLE[measure]}"


def _title(model: str, revision: str, layer: int, head: int, role: str, sentence_line: str | None,
           width: float, measure: str = WEIGHTS) -> str:
    """Model and revision, layer and head (counted from 1), role and measure, then the sentence, wrapped to
    `width` inches."""
    head_text = f"layer {layer + 1}, head {head + 1}" + (f" ({role})" if role else "") + _measure_note(measure)
    chars = max(30, int(width / (TITLE_SIZE * EM)))
    if model:
        model_text = f"{model} @ {short_revision(revision)}" if revision else model
        first = f"{model_text} · {head_text}"
        lines = [first] if len(first) <= chars else [model_text, head_text]
    else:  # maps drawn on their own (ra.heatmap without model=): no "model @" placeholder
        lines = [head_text]
    if sentence_line:
        lines.append(sentence_line)
    return "\n".join(textwrap.fill(line, chars) for line in lines)


def _title_height(title: str) -> float:
    """Inches taken by a title of that many lines, with its padding."""
    return 0.3 + (title.count("\n") + 1) * TITLE_SIZE * 1.3 / 72


def _frame(left: float, body_w: float, right: float, bottom: float, body_h: float, top: float,
           min_width: float = 0.0) -> tuple[Figure, float, float, float]:
    """A figure of the summed size; the body is centred if min_width makes it wider. Returns (fig, W, H, x0)."""
    width = left + body_w + right
    pad = max(0.0, min_width - width) / 2
    width += 2 * pad
    height = bottom + body_h + top
    return new_figure(figsize=(width, height)), width, height, pad + left


@_figure_text
def draw_heatmap(
    weights: np.ndarray,
    words: Sequence[str],
    *,
    focus: int | None,
    model: str,
    revision: str,
    layer: int,
    head: int,
    sentence: int,
    text: str,
    role: str = "",
    sense: int | None = None,
    measure: str = WEIGHTS,
) -> Figure:
    """Word x word heatmap of one head: (n, n) weights, rows the attending word, columns the attended-to word.

    layer, head and sentence count from 0 (titles add 1). Cells show whole-number percentages; the colour
    scale is fixed to [0, 1]; the focus word's row is framed; the sense word's column label is coloured.
    """
    n = len(words)
    assert weights.shape == (n, n), (weights.shape, n)
    cell = min(CELL, MAX_SIDE / n)
    side = cell * n
    longest = max(_text_width(w, LABEL_SIZE) for w in words)
    left = 0.3 + 0.45 + longest  # y label, ticks, words
    bottom = 0.3 + 0.45 + longest * math.sin(math.radians(45))  # x label, rotated words
    right = 0.15 + 0.18 + 0.75  # gap, colour bar, its ticks and label
    min_width = 6.5
    title = _title(model, revision, layer, head, role, f"sentence {sentence + 1}: {text}",
                   max(min_width, left + side + right) - 0.3, measure)
    fig, width, height, x0 = _frame(left, side, right, bottom, side, _title_height(title), min_width)
    ax = fig.add_axes((x0 / width, bottom / height, side / width, side / height))
    cax = fig.add_axes(((x0 + side + 0.15) / width, bottom / height, 0.18 / width, side / height))

    image = ax.imshow(weights, cmap=HEATMAP_CMAP, vmin=0.0, vmax=1.0, interpolation="nearest", aspect="equal")
    percent_colour_bar(fig, image, cax, MEASURE_TITLE[measure])

    ticks = np.arange(n)
    ax.set_xticks(ticks, list(words), rotation=45, ha="right", rotation_mode="anchor", fontsize=LABEL_SIZE)
    ax.set_yticks(ticks, list(words), fontsize=LABEL_SIZE)
    ax.tick_params(length=0)
    ax.set_xlabel("attended-to word (key)", fontsize=LABEL_SIZE)
    ax.set_ylabel("attending word (query)", fontsize=LABEL_SIZE)

    text_size = CELL_TEXT_SIZE * cell / CELL
    if text_size >= MIN_CELL_TEXT_SIZE:
        annotate_cells(ax, weights, text_size)

    if focus is not None:
        ax.add_patch(Rectangle((-0.5, focus - 0.5), n, 1, fill=False, edgecolor=FOCUS_COLOUR, linewidth=2.5,
                               clip_on=False, gid="focus"))
        _highlight(ax.get_yticklabels()[focus], FOCUS_COLOUR)
    if sense is not None:
        _highlight(ax.get_xticklabels()[sense], SENSE_COLOUR)
    ax.set_title(title, fontsize=TITLE_SIZE, pad=8)
    return fig


@_figure_text
def draw_focus_bars(
    weights: np.ndarray,
    words: Sequence[str],
    *,
    focus: int,
    sense: int,
    model: str,
    revision: str,
    layer: int,
    head: int,
    sentence: int,
    text: str,
    role: str = "best sense-word head",
    measure: str = WEIGHTS,
) -> Figure:
    """Bar chart of the focus word's (n,) weights over the words in one head; the sense word's bar stands out."""
    n = len(words)
    assert weights.shape == (n,), (weights.shape, n)
    bar = 0.55
    body_w = bar * n
    longest = max(_text_width(w, LABEL_SIZE) for w in words)
    left, right = 0.95, 0.2
    bottom = 0.3 + 0.35 + longest * math.sin(math.radians(45))
    focus_word = words[focus]
    title = _title(model, revision, layer, head, role,
                   f"sentence {sentence + 1}: where «{focus_word}» looks in «{text}»",
                   max(6.5, left + body_w + right) - 0.3, measure)
    fig, width, height, x0 = _frame(left, body_w, right, bottom, 3.0, _title_height(title), min_width=6.5)
    ax = fig.add_axes((x0 / width, bottom / height, body_w / width, 3.0 / height))
    colours = [SENSE_COLOUR if i == sense else BAR_COLOUR for i in range(n)]
    bars = ax.bar(np.arange(n), weights, width=0.75, color=colours)
    ax.bar_label(bars, labels=[percent(w) for w in weights], fontsize=CELL_TEXT_SIZE, padding=2)
    ax.set_xlim(-0.6, n - 0.4)
    ax.set_ylim(0, 1.0)
    ax.yaxis.set_major_formatter(PercentFormatter(xmax=1.0, decimals=0))
    ax.set_xticks(np.arange(n), list(words), rotation=45, ha="right", rotation_mode="anchor", fontsize=LABEL_SIZE)
    ax.tick_params(axis="x", length=0)
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_ylabel(f"weight of «{focus_word}» on the word", fontsize=LABEL_SIZE)
    ax.get_xticklabels()[focus].set_fontweight("bold")
    ax.get_xticklabels()[focus].set_color(FOCUS_COLOUR)
    ax.get_xticklabels()[sense].set_fontweight("bold")
    ax.get_xticklabels()[sense].set_color(SENSE_COLOUR)
    ax.set_title(title, fontsize=TITLE_SIZE, pad=8)
    return fig


@_figure_text
def draw_rollout(
    rows: np.ndarray,
    words: Sequence[str],
    *,
    focus: int,
    sense: int | None,
    model: str,
    revision: str,
    sentence: int,
    text: str,
    measure: str = WEIGHTS,
) -> Figure:
    """The focus word's rollout row after each layer (real_attention.engine.rollout): (layers, n), layer 1 at the top.

    Cells show whole-number percentages on the heatmaps' fixed [0, 1] colour scale; the sense word's label is
    coloured, the focus word's bold.
    """
    layers, n = rows.shape
    assert n == len(words), (rows.shape, len(words))
    cell = min(CELL, MAX_SIDE / n)
    body_w, body_h = cell * n, CELL * layers
    longest = max(_text_width(w, LABEL_SIZE) for w in words)
    left, right = 0.3 + 0.45 + _text_width("layer 00", LABEL_SIZE), 0.15 + 0.18 + 0.75
    bottom = 0.3 + 0.45 + longest * math.sin(math.radians(45))
    focus_word = words[focus]
    source = "" if measure == WEIGHTS else f" of the {measure}-based maps"
    lines = [f"{model} @ {short_revision(revision)} · rollout{source} (Abnar & Zuidema, 2020)",
             f"sentence {sentence + 1}: how much of each word reaches «{focus_word}» after each layer", text]
    chars = max(30, int((max(6.5, left + body_w + right) - 0.3) / (TITLE_SIZE * EM)))
    title = "\n".join(textwrap.fill(line, chars) for line in lines)
    fig, width, height, x0 = _frame(left, body_w, right, bottom, body_h, _title_height(title), min_width=6.5)
    ax = fig.add_axes((x0 / width, bottom / height, body_w / width, body_h / height))
    cax = fig.add_axes(((x0 + body_w + 0.15) / width, bottom / height, 0.18 / width, body_h / height))
    image = ax.imshow(rows, cmap=HEATMAP_CMAP, vmin=0.0, vmax=1.0, interpolation="nearest", aspect="auto")
    percent_colour_bar(fig, image, cax, "rollout weight")
    annotate_cells(ax, rows, CELL_TEXT_SIZE * cell / CELL)
    ax.set_xticks(np.arange(n), list(words), rotation=45, ha="right", rotation_mode="anchor", fontsize=LABEL_SIZE)
    ax.set_yticks(np.arange(layers), [f"layer {l + 1}" for l in range(layers)], fontsize=LABEL_SIZE)
    ax.tick_params(length=0)
    ax.set_xlabel("input word (key)", fontsize=LABEL_SIZE)
    _highlight(ax.get_xticklabels()[focus], FOCUS_COLOUR)
    if sense is not None:
        _highlight(ax.get_xticklabels()[sense], SENSE_COLOUR)
    ax.set_title(title, fontsize=TITLE_SIZE, pad=8)
    return fig


@_figure_text
def draw_overview(
    categories: np.ndarray,
    top_weight: np.ndarray,
    *,
    model: str,
    revision: str,
    focus_word: str,
    sentence_count: int,
    best: tuple[int, int] | None = None,
    measure: str = WEIGHTS,
    causal: bool = False,
) -> Figure:
    """Layers x heads grid coloured by real_attention.engine.categories; each cell shows the focus word's mean top weight.

    categories: (layers, heads) names from categories_for(causal), a decoder's or an encoder's;
    top_weight: (layers, heads) mean over sentences of the focus row's largest weight; best: the best sense head
    (from 0), framed.
    """
    layers, heads = categories.shape
    assert top_weight.shape == categories.shape, (top_weight.shape, categories.shape)
    cell = 0.5
    body_w, body_h = cell * heads, cell * layers
    legend_w = 2.9
    names = categories_for(causal)
    notes = [f"{name if name != 'first' else 'first token'}: {CATEGORY_NOTES[name]}" for name in names
             if name in CATEGORY_NOTES]
    if causal:
        notes.append("a decoder: each word sees only itself and the words before it, so no head looks at the next word")
    left, right = 0.85, 0.3 + legend_w
    bottom = 0.25 + len(notes) * 9 * 1.4 / 72
    total = layers * heads
    per_sentence = "the sentence" if sentence_count == 1 else f"the {sentence_count} sentences"
    head_line = f"where the focus word «{focus_word}» looks, in all {total} heads{_measure_note(measure)}"
    title_lines = [f"{model} @ {short_revision(revision)}: {head_line}",
                   f"number: its largest weight in %, mean over {per_sentence}"]
    chars = int((left + body_w + right - 0.3) / (TITLE_SIZE * EM))
    if len(title_lines[0]) > chars:
        title_lines[0:1] = [f"{model} @ {short_revision(revision)}", head_line]
    title = "\n".join(textwrap.fill(line, chars) for line in title_lines)
    top = _title_height(title) + 0.45  # the title, then the head numbers
    body_h_min = max(body_h, 2.7)  # room for the legend beside a short grid
    fig, width, height, x0 = _frame(left, body_w, right, bottom, body_h_min, top)
    y0 = bottom + body_h_min - body_h  # a short grid sits at the top, beside the legend
    ax = fig.add_axes((x0 / width, y0 / height, body_w / width, body_h / height))

    index = _category_index(categories, names)  # (layers, heads) int
    colours = ListedColormap([CATEGORY_COLOURS[name] for name in names])
    ax.imshow(index, cmap=colours, vmin=-0.5, vmax=len(names) - 0.5, interpolation="nearest", aspect="equal")
    annotate_cells(ax, top_weight, 8, dark=np.isin(categories, list(DARK_CATEGORIES)))
    # White lines between the cells (two collections; cheaper than minor ticks and a grid).
    ax.hlines(np.arange(1, layers) - 0.5, -0.5, heads - 0.5, color="white", linewidth=1.5)
    ax.vlines(np.arange(1, heads) - 0.5, -0.5, layers - 0.5, color="white", linewidth=1.5)
    ax.tick_params(length=0)
    ax.set_xticks(np.arange(heads), [str(h + 1) for h in range(heads)], fontsize=9)
    ax.set_yticks(np.arange(layers), [str(l + 1) for l in range(layers)], fontsize=9)
    ax.xaxis.set_ticks_position("top")
    ax.xaxis.set_label_position("top")
    ax.set_xlabel("head", fontsize=LABEL_SIZE)
    ax.set_ylabel("layer", fontsize=LABEL_SIZE)
    for spine in ax.spines.values():
        spine.set_visible(False)
    if best is not None:
        ax.add_patch(Rectangle((best[1] - 0.5, best[0] - 0.5), 1, 1, fill=False, edgecolor="black",
                               linewidth=2.5, zorder=4, gid="best"))

    counts = category_counts(categories, causal)
    handles = [Patch(facecolor=CATEGORY_COLOURS[name], edgecolor="0.6", linewidth=0.5,
                     label=f"{CATEGORY_LABELS[name]}: {counts[name]} of {total}") for name in names]
    if best is not None:
        handles.append(Patch(facecolor="none", edgecolor="black", linewidth=2,
                             label=f"best sense head: L{best[0] + 1} H{best[1] + 1}"))
    else:
        handles.append(Patch(facecolor="none", edgecolor="none", label="no sense-word head"))
    legend = fig.legend(handles=handles, loc="upper left", frameon=False, fontsize=LABEL_SIZE,
                        title_fontsize=LABEL_SIZE, handlelength=1.6, handleheight=1.1,
                        title=f"where «{focus_word}» looks most\nin every sentence",
                        bbox_to_anchor=((x0 + body_w + 0.3) / width, (y0 + body_h + 0.05) / height))
    legend.set_alignment("left")  # title flush with the entries
    fig.text(x0 / width, 0.12 / height, "\n".join(notes), fontsize=9, color="0.3", va="bottom", ha="left")
    fig.suptitle(title, fontsize=TITLE_SIZE, x=0.5, y=1 - 0.15 / height, va="top")
    return fig


def _category_index(categories: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    """(layers, heads) names -> (layers, heads) int, the position of each name in `names`."""
    lookup = {name: i for i, name in enumerate(names)}
    unknown = set(np.unique(categories)) - set(lookup)
    assert not unknown, unknown
    return np.vectorize(lookup.__getitem__, otypes=[int])(categories)


def _save(fig: Figure, folder: Path, stem: str, formats: Sequence[str]) -> list[Path]:
    return [save_figure(fig, folder / f"{stem}.{fmt}", dpi=DPI) for fmt in formats]


# ---------------------------------------------------------------- one figure job (real_attention.outputs.drawing)

DRAWERS = {"heatmap": draw_heatmap, "focus_bars": draw_focus_bars, "overview": draw_overview, "rollout": draw_rollout}


def draw_and_save(name: str, arguments: dict, folder: Path, stem: str, formats: Sequence[str]) -> list[Path]:
    """One figure: drawn by DRAWERS[name](**arguments), saved as folder/stem.<fmt> for each format."""
    return _save(DRAWERS[name](**arguments), folder, stem, formats)


def warm_up() -> None:
    """Draw and render one small heatmap, so that a fresh process has its fonts and caches ready, and make the
    outlines of every cell label a short sentence's figures show ('0' to '100' at CELL_TEXT_SIZE): about a
    tenth of a second that a drawing worker spends while the model loads, not once the maps are there."""
    import io

    fig = draw_heatmap(np.full((2, 2), 0.5, dtype=np.float32), ["a", "b"], focus=0, model="m", revision="r",
                       layer=0, head=0, sentence=0, text="a b")
    fig.savefig(io.BytesIO(), format="png", dpi=DPI)
    family = tuple(np.atleast_1d(matplotlib.rcParams["font.family"]).tolist())  # as CellLabels asks for it
    for number in range(101):
        _centred_outline(str(number), float(CELL_TEXT_SIZE), family)
