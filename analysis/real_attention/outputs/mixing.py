"""The files of `run --mixing`: mixing.csv, mixing_agreement.csv, figures/<lang>/mixing_s<k>.png, and the mixing
block of summary.json (real_attention.engine.mixing computes the maps and builds the tables)."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..engine.mixing.result import AGREEMENT_COLUMNS, ALTI, ATTENTION, DEFINITIONS, MIXING_COLUMNS, NORM, SOURCES
from ..engine.mixing.result import VALUE_ZEROING_KEY, Mixing, agreement_frame, mixing_frame, spearman
from ..engine.mixing.value_zeroing import NEAR_ZERO
from .files import write_csv, write_json

MIXING_NAME, AGREEMENT_NAME = "mixing", "mixing_agreement"
MEASURE_LABELS = {ATTENTION: "attention (weights)", NORM: "norm ‖αf(x)‖", ALTI: "ALTI",
                  VALUE_ZEROING_KEY: "value zeroing"}


def mixing_summary(mixing: Mixing) -> dict:
    """The mixing block of summary.json: each measure's definition and source, and value zeroing's raw row sums."""
    return {
        "measures": {m: {"definition": DEFINITIONS[m], "source": SOURCES[m]} for m in mixing.measures},
        "precision": "float64 for ALTI's decomposition and every value-zeroing re-run",
        "value_zeroing_smallest_raw_row_sum": mixing.smallest_raw_row_sum,
        "value_zeroing_near_zero_rows": {
            "below": NEAR_ZERO,
            "rows": [{"sentence": s, "layer": layer, "query_index": index, "query": q}
                     for s, layer, index, q in mixing.near_zero_rows],
        },
    }


def draw_mixing(sentence, number: int, focus: int, sense: int | None, model: str, revision: str):
    """One figure: the focus word's rolled row, layer by layer (rows), one panel per measure; one colour bar in
    percent for all (every panel's cells are shares of the focus word, 0 to 100 %)."""
    import textwrap

    from ..engine.naming import short_revision
    from .figio import new_figure
    from .plots import FOCUS_COLOUR, HEATMAP_CMAP, SENSE_COLOUR, percent_colour_bar, annotate_cells

    measures = list(sentence.rolled)
    layers, n = sentence.rolled[measures[0]].shape[:2]
    cell = min(0.42, 6.0 / n)
    panel_w, panel_h = cell * n, 0.32 * layers
    longest = max(len(w) for w in sentence.words) * 9 * 0.62 / 72
    left, gap, bottom = 0.9, 0.35, 0.85 + longest * 0.71  # room for the rotated words and the axis title
    bar_gap, bar_w, bar_label = 0.15, 0.18, 0.75
    title = "\n".join(textwrap.fill(line, 110) for line in (
        f"{model} @ {short_revision(revision)} · context mixing, rolled over layers",
        f"sentence {number + 1}: how much of each word is in «{sentence.words[focus]}» after each layer",
        sentence.text))
    top = 0.4 + (title.count("\n") + 1) * 0.22
    width = left + len(measures) * (panel_w + gap) - gap + bar_gap + bar_w + bar_label
    height = bottom + panel_h + top
    fig = new_figure(figsize=(width, height))
    for p, measure in enumerate(measures):
        ax = fig.add_axes(((left + p * (panel_w + gap)) / width, bottom / height, panel_w / width, panel_h / height))
        rows = sentence.rolled[measure][:, focus]  # (layers, n)
        image = ax.imshow(rows, cmap=HEATMAP_CMAP, vmin=0.0, vmax=1.0, interpolation="nearest", aspect="auto")
        annotate_cells(ax, rows, 7 * cell / 0.42)
        ax.set_xticks(np.arange(n), list(sentence.words), rotation=45, ha="right", rotation_mode="anchor", fontsize=9)
        ax.set_yticks(np.arange(layers), [f"{l + 1}" for l in range(layers)] if p == 0 else [], fontsize=8)
        ax.tick_params(length=0)
        ax.set_title(MEASURE_LABELS.get(measure, measure), fontsize=10)
        ticks = ax.get_xticklabels()
        ticks[focus].set_fontweight("bold")
        ticks[focus].set_color(FOCUS_COLOUR)
        if sense is not None:
            ticks[sense].set_fontweight("bold")
            ticks[sense].set_color(SENSE_COLOUR)
        ax.set_xlabel("input word (key)", fontsize=8)
        if p == 0:
            ax.set_ylabel("layer", fontsize=9)
    bar_x = left + len(measures) * (panel_w + gap) - gap + bar_gap
    cax = fig.add_axes((bar_x / width, bottom / height, bar_w / width, panel_h / height))
    percent_colour_bar(fig, image, cax, "share of the word")
    fig.suptitle(title, fontsize=10, y=1 - 0.15 / height, va="top")
    return fig


def write_mixing(results: Path, figures: Path | None, mixing: Mixing, summary: dict,
                 positions: Sequence[tuple[int, int | None]] = (), formats: Sequence[str] = ("png",),
                 max_sentences: int | None = 10, model: str = "", revision: str = "") -> tuple[dict, list[Path]]:
    """Write mixing.csv and mixing_agreement.csv into `results`, add the mixing block to its summary.json, and
    draw mixing_s<k> into `figures` (None: no figures) for the first max_sentences sentences (None: all), at
    positions[k] = (focus, sense) unit indices. Returns the updated summary and the figure paths."""
    from .figio import save_figure

    from ..engine.hashing import file_sha256

    frames = {MIXING_NAME: mixing_frame(mixing), AGREEMENT_NAME: agreement_frame(mixing)}
    records = {}
    for name, frame in frames.items():
        write_csv(frame, results / f"{name}.csv")
        records[f"{name}.csv"] = {"rows": len(frame), "sha256": file_sha256(results / f"{name}.csv")}
    # recorded as attention's and rollout's are (table_checks): a reader can tell a damaged copy
    recorded = summary.get("tables")
    tables: dict = recorded if isinstance(recorded, dict) else {}
    summary = {**summary, "tables": {**tables, **records}, "mixing": mixing_summary(mixing)}
    write_json(summary, results / "summary.json")
    paths = []
    if figures is not None:
        count = len(positions) if max_sentences is None else min(len(positions), max_sentences)
        for number in range(count):
            focus, sense = positions[number]
            fig = draw_mixing(mixing.sentences[number], number, focus, sense, model or mixing.model,
                              revision or mixing.revision)
            for extension in formats:
                paths.append(save_figure(fig, figures / f"mixing_s{number + 1}.{extension}"))
    return summary, paths


__all__ = ["AGREEMENT_COLUMNS", "AGREEMENT_NAME", "MEASURE_LABELS", "MIXING_COLUMNS", "MIXING_NAME", "agreement_frame",
           "draw_mixing", "mixing_frame", "mixing_summary", "spearman", "write_mixing"]
