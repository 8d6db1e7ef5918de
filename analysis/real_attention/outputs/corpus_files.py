"""The files of a corpus run: heads.csv, summary.json, sums.json and the two figures."""
from __future__ import annotations

from pathlib import Path

from ..statistics.labels import LABELS, label_heads
from ..statistics.results import CorpusRun, check_analysable, corpus_heads_frame, corpus_summary
from ..engine.heads import HeadSums
from .files import write_csv, write_json

LABELS_FIGURE = "labels"  # the label grid
STATISTICS_FIGURE = "statistics"  # every pooled statistic as a layer x head heatmap


def write_corpus(results_folder: Path, figures_folder: Path, run: CorpusRun, sums: HeadSums,
                 formats: tuple[str, ...] = ("png",)) -> dict:
    """Write heads.csv, summary.json, sums.json (exact, for merge), the label grid and the statistics figure
    (in each of `formats`; none for formats=()); returns the summary."""
    from ..outputs.corpus_figures import label_grid, statistics_grid
    from ..outputs.figio import save_figure

    if run.shard is None:  # an empty shard is fine: the merge may still have sentences
        check_analysable(sums, f"the corpus {run.name!r}")
    labels = label_heads(sums.means(), sums.uniform_entropy, run.thresholds)
    write_csv(corpus_heads_frame(sums, labels), results_folder / "heads.csv")
    data = corpus_summary(run, sums, labels)
    write_json(data, results_folder / "summary.json")
    write_json(sums.to_json(), results_folder / "sums.json")
    from ..engine.measures import MEASURE_TITLE, WEIGHTS

    measured = "" if run.measure == WEIGHTS else f", by {MEASURE_TITLE[run.measure]}"
    title = f"{Path(run.model).name or run.model} on {run.folder_name}: {sums.sentences} sentences{measured}"
    for fmt in formats:
        save_figure(label_grid(labels, LABELS, title), figures_folder / f"{LABELS_FIGURE}.{fmt}")
        save_figure(statistics_grid(sums.means(), sums.uniform_entropy, title),
                    figures_folder / f"{STATISTICS_FIGURE}.{fmt}")
    return data
