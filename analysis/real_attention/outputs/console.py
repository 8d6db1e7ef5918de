"""What the commands print after a job: a few lines per result, built from the job's output, no files read.

The jobs' result types (api.run.RunOutput, api.corpus.CorpusOutput) live with their jobs, a stage above this
one; the protocols below name the fields these lines read, so this module imports no job (the stage graph:
docs/layout.md).
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..engine.naming import short_revision

if TYPE_CHECKING:
    from ..engine.pipeline import RunResult
    from ..engine.sentences import SentenceSet
    from ..statistics.sums import CorpusRun


class MeasureRunView(Protocol):
    """What run_lines reads of one measure's run (api.run.MeasureRun)."""

    @property
    def measure(self) -> str: ...
    @property
    def result(self) -> RunResult: ...
    @property
    def summary(self) -> dict: ...
    @property
    def results_dir(self) -> Path: ...
    @property
    def figures_dir(self) -> Path | None: ...
    @property
    def figures(self) -> tuple[Path, ...]: ...
    @property
    def report(self) -> Path | None: ...


class RunView(Protocol):
    """What run_lines reads of a run's output (api.run.RunOutput)."""

    @property
    def sentence_set(self) -> SentenceSet: ...
    @property
    def runs(self) -> Sequence[MeasureRunView]: ...
    @property
    def compare(self) -> tuple[Path, ...]: ...


class CorpusView(Protocol):
    """What corpus_lines reads of a corpus job's output (api.corpus.CorpusOutput)."""

    @property
    def run(self) -> CorpusRun: ...
    @property
    def summary(self) -> dict: ...
    @property
    def results_dir(self) -> Path: ...
    @property
    def figures_dir(self) -> Path | None: ...
    @property
    def engine(self) -> dict: ...
    @property
    def shards(self) -> int: ...


def run_lines(output: RunView) -> list[str]:
    """The lines `real-attention run` prints: per measure the model, the summary and the paths written."""
    from ..engine.measures import MEASURES
    from ..outputs.tables import describe_run, sense_head_note

    lines: list[str] = []
    sentences = len(output.sentence_set.sentences)
    for run in output.runs:
        measured = "" if len(output.runs) == 1 and run.measure == MEASURES[0] else f", measure {run.measure}"
        lines.append(f"{run.result.model} @ {short_revision(run.result.revision)}, {sentences} sentence(s), "
                     f"focus {output.sentence_set.focus!r}{measured}")
        lines.append(describe_run(run.summary))
        lines.append(f"wrote {run.results_dir}")
        if run.figures_dir is not None and run.figures:
            lines.append(f"wrote {len(run.figures)} figure(s) to {run.figures_dir}")
            note = sense_head_note(run.result)
            if note:
                lines.append(note)
        if run.report is not None:
            lines.append(f"wrote {run.report}")
    if output.compare:
        from .compare import compare_line

        lines.append(compare_line(output.runs[0].result, output.runs[1].result))
        lines.append("wrote " + " and ".join(str(path) for path in output.compare))
    return lines


def corpus_lines(output: CorpusView) -> list[str]:
    """The lines `heads --corpus` and `merge` print: the model and corpus, the summary, the folders."""
    from ..statistics.sums import describe_corpus

    run = output.run
    if output.shards:
        where = f", {output.shards} shard(s) merged"
    elif output.engine.get("name", "single-process") == "single-process":
        where = ""
    else:
        where = f", {output.engine['workers']} Dask worker(s), {output.engine['partitions']} partition(s)"
    shard = "" if run.shard is None else f", shard {run.shard.index}/{run.shard.count}"
    first = "" if run.limit is None else f", its first {run.limit:,} line(s)"
    return [f"{run.model} @ {short_revision(run.revision)}, corpus {run.name!r}{first} (sha256 {run.sha256[:12]})"
            f"{shard}{where}",
            describe_corpus(output.summary),
            f"wrote {output.results_dir}" + ("" if output.figures_dir is None or not _labelled(output.summary)
                                             else f" and {output.figures_dir}")]


def _labelled(summary: dict) -> bool:
    """Whether any head got a label (a shard of blank lines has none, and no figures)."""
    return any(summary.get("labels", {}).values())
