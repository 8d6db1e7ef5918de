"""The files of a corpus run: heads.csv, summary.json, sums.json and the two figures."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..statistics.labels import LABELS, label_heads
from ..statistics.results import CorpusRun, check_analysable, corpus_heads_frame, corpus_summary
from ..engine.hashing import file_sha256
from ..engine.heads import HeadSums
from .files import write_csv, write_json

if TYPE_CHECKING:
    from .drawing import DrawingPool

LABELS_FIGURE = "labels"  # the label grid
STATISTICS_FIGURE = "statistics"  # every pooled statistic as a layer x head heatmap


def _save_figure(drawer: str, arguments: tuple, path: Path) -> Path:
    """Draw one corpus figure (corpus_figures.label_grid or .statistics_grid) and save it: here or in a drawing
    worker, the same bytes."""
    from ..outputs import corpus_figures
    from ..outputs.figio import save_figure

    save_figure(getattr(corpus_figures, drawer)(*arguments), path)
    return path


def write_corpus(results_folder: Path, figures_folder: Path, run: CorpusRun, sums: HeadSums,
                 formats: tuple[str, ...] = ("png",), pool: DrawingPool | None = None) -> dict:
    """Write heads.csv, summary.json, sums.json (exact, for merge), the label grid and the statistics figure
    (in each of `formats`; none for formats=()); returns the summary. pool: drawing workers started before the
    model loaded (they have matplotlib imported already), which draw the figures while this writes the tables;
    leaving the pool's context waits for them."""
    if run.shard is None:  # an empty shard is fine: the merge may still have sentences
        check_analysable(sums, f"the corpus {run.name!r}")
    empty = sums.units == 0  # a shard whose lines were all blank or too long: no statistic, so no label either
    labels = label_heads(sums.means(), sums.uniform_entropy, run.thresholds)
    if empty:
        labels = np.full(labels.shape, "", dtype=object)
    write_csv(corpus_heads_frame(sums, labels), results_folder / "heads.csv")
    data = corpus_summary(run, sums, labels)
    # a shard's sums say which shard they are (merge compares it with summary.json's): a copied folder whose
    # summary.json was given another index is refused, not added twice
    shard = {} if run.shard is None else {"shard": {"index": run.shard.index, "count": run.shard.count}}
    write_json({**sums.to_json(), **shard}, results_folder / "sums.json")
    # merge refuses a shard whose sums.json is not the one written beside this summary.json
    data["sums_sha256"] = file_sha256(results_folder / "sums.json")
    data["heads_sha256"] = file_sha256(results_folder / "heads.csv")  # CorpusOutput.heads reads it back by it
    write_json(data, results_folder / "summary.json")
    from ..engine.measures import MEASURE_TITLE, WEIGHTS

    measured = "" if run.measure == WEIGHTS else f", by {MEASURE_TITLE[run.measure]}"
    title = f"{Path(run.model).name or run.model} on {run.folder_name}: {sums.sentences} sentences{measured}"
    jobs = [] if empty else [job for fmt in formats for job in (
        ("label_grid", (labels, LABELS, title), figures_folder / f"{LABELS_FIGURE}.{fmt}"),
        ("statistics_grid", (sums.means(), sums.uniform_entropy, title), figures_folder / f"{STATISTICS_FIGURE}.{fmt}"),
    )]
    if pool is None:
        for job in jobs:
            _save_figure(*job)
    else:
        for job in jobs:
            pool.submit(_save_figure, *job)
    return data
