"""`ra.run`: the focus word in a few sentences, from the config to every file of `real-attention run`.

    config -> sentences -> model -> per measure: maps, labels -> tables, figures, report (staged, then swapped in)

The drawing processes start before the model loads (they import matplotlib meanwhile), draw while this process
writes the tables, and write the report; everything lands at once, or nothing does.
"""
from __future__ import annotations

import os

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.errors import InputError
from ..engine.sentences import DEFAULT_LANG

if TYPE_CHECKING:
    from ..engine.mixing import Mixing
    from ..engine.pipeline import RunResult
    from ..engine.sentences import SentenceSet
    from .attention import Attention


@dataclass(frozen=True, eq=False)
class MeasureRun:
    """One measure's part of a run: what was computed and where it went."""

    measure: str  # "weights", "norm" or "value-zeroing"
    folder: str  # the folder name under results/ and figures/: LANG, LANG-norm or LANG-value-zeroing
    result: RunResult  # the sentences' maps, located words and head labels
    summary: dict[str, Any]  # summary.json's content
    results_dir: Path  # OUT/results/<folder>
    figures_dir: Path | None  # OUT/figures/<folder>, None when neither figures nor the report were asked for
    figures: tuple[Path, ...]  # the figure files drawn, in order
    report: Path | None  # OUT/figures/<folder>/report.html, or None

    @property
    def attention(self) -> Attention:
        """The maps, located words and head labels as an Attention. A run of more sentences than its report
        holds kept only the maps it shows: InputError then, and ra.read_attention(results_dir) reads them all."""
        from .attention import Attention

        if self.result.maps_kept < len(self.result.sentences):
            raise InputError(f"this run kept the maps of its first {self.result.maps_kept} of "
                             f"{len(self.result.sentences)} sentences only (it streamed them to its tables); read "
                             f"them all with ra.read_attention({str(self.results_dir)!r})")
        return Attention.from_result(self.result)


@dataclass(frozen=True, eq=False)
class RunOutput:
    """What `ra.run` computed and wrote. `runs` has one MeasureRun per measure (two with compare_measures)."""

    sentence_set: SentenceSet
    runs: tuple[MeasureRun, ...]
    out: Path
    compare: tuple[Path, ...] = ()  # measures.csv (and its figure) of compare_measures
    font_note: str | None = None  # a line about characters no installed font draws, or None
    unknown_note: str | None = None  # a line naming the words the model's vocabulary lacks (they ran as [UNK])
    leftovers: tuple[str, ...] = ()  # old folders that could not be deleted, each with its reason
    paths: tuple[Path, ...] = field(default=())  # every folder written or replaced
    mixing: Mixing | None = None  # with mixing=True: attention, norm, ALTI and value zeroing (engine/mixing.py)

    @property
    def attention(self) -> Attention:
        """The first measure's Attention (the maps, the located words, the head labels)."""
        return self.runs[0].attention

    @property
    def summary(self) -> dict[str, Any]:
        """The first measure's summary.json, as a dict."""
        return self.runs[0].summary


def layer_bar(total: int, desc: str):
    """A tqdm bar on stderr that shows itself only after a second (a short job draws nothing). It counts each layer
    of each sentence: 12 for MiniLM's 6 layers on 2 sentences, so its unit says so."""
    import sys

    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=" layer×sentence", file=sys.stderr, dynamic_ncols=True, delay=1.0)


def run(lang: str = DEFAULT_LANG, *, config: str | Path | None = None, model: str | os.PathLike[str] | None = None,
        revision: str | None = None, out: str | Path = ".", units: str = "text", measure: str = "weights",
        compare_measures: bool = False, figures: bool = True, report: bool = True,
        formats: str | Sequence[str] = ("png",), all_figures: bool = False, offline: bool = False,
        device: str = "cpu", progress: Callable[[str], None] | None = None, quiet: bool = True, wait: bool = True,
        mixing: bool = False, table_format: str = "csv", report_sentences: int = 200,
        batch_size: int = 32) -> RunOutput:
    """Write exactly the files of `real-attention run`, staged and swapped in at once.

    Writes OUT/results/<lang>/ (attention.csv, focus.csv, heads.csv, rollout.csv, summary.json) and
    OUT/figures/<lang>/ (figures and report.html); `<lang>-norm` for measure="norm" (`<lang>-value-zeroing` for
    "value-zeroing"); both weights and norm with compare_measures. mixing=True adds mixing.csv and
    mixing_agreement.csv to each results folder, the mixing_s<k> figures and the report's mixing view
    (real_attention.engine.mixing). table_format "parquet" writes attention.parquet and rollout.parquet instead
    of the CSVs (read either back with ra.read_attention). The sentences' maps go to those tables as each batch
    of `batch_size` sentences is done (one forward pass each: lower it if the device runs out of memory); the
    result keeps only the maps of its first `report_sentences` sentences (those the report shows, kept with or
    without a report) and those the figures show (every sentence's with all_figures), so memory stays flat in the
    number of sentences. `progress` receives a
    message when this run waits for another one writing the same folders;
    `quiet=False` shows the figures' progress bar. Returns a RunOutput.
    """
    from ..engine.focus import check_words_in_text
    from ..engine.measures import check_supported
    from ..engine.models import check_encodes, choose_model, known_causal, load_model
    from ..engine.sentences import load_sentences
    from ..outputs.drawing import DrawingPool, font_note, run_texts
    from ..outputs.staging import check_targets, staged_outputs

    from ..engine.checks import callable_or_none, flag, model_arg, optional_text, path_arg

    settings, measures = _checked(lang, out, units, measure, compare_measures, figures, report, formats,
                                  all_figures, quiet, table_format, report_sentences, batch_size)
    for value, name in ((offline, "offline"), (mixing, "mixing"), (wait, "wait")):
        flag(value, name)
    model = model_arg(model)
    optional_text(revision, "revision", "a branch, tag or commit")
    optional_text(device, "device", "cpu, cuda, mps or auto")
    callable_or_none(progress, "progress", "a callable taking the staging's wait message")
    if config is not None:
        path_arg(config, "config")
    check_targets((folder(m) for folder in (settings.results_dir, settings.figures_dir) for m in measures),
                  inputs=[config] if config is not None else [])
    sentence_set = load_sentences(config, settings.lang)
    choice = choose_model(settings.lang, model, revision)
    if settings.units == "text":  # a missing or ambiguous word, before the model loads (SmolLM2: 16 s)
        check_words_in_text(sentence_set, causal=bool(known_causal(choice)))
    runs: list[MeasureRun] = []
    pending_note = None  # the line about missing glyphs, worked out by a drawing worker
    compare: tuple[Path, ...] = ()
    with staged_outputs(wait=wait, on_wait=progress) as staging, ExitStack() as drawing_processes:
        results_dirs = {m: staging.folder(settings.results_dir(m)) for m in measures}
        # Started now, the drawing processes import matplotlib while this one loads the model.
        pool = DrawingPool.start() if figures else None
        if pool is not None:
            drawing_processes.enter_context(pool)
        loaded = load_model(choice, device=device, offline=offline)
        unknown_note = check_encodes(loaded, [sentence.text for sentence in sentence_set.sentences])
        for m in measures:  # before any measure is computed or drawn
            check_supported(loaded, m)
        mixed = _mixing(loaded, sentence_set, units, quiet, progress, settings.batch_size) if mixing else None
        for m in measures:
            measure_run, note = _run_measure(settings, m, loaded, sentence_set, staging, pool, results_dirs[m],
                                             mixed, want_note=pending_note is None,
                                             notes=(unknown_note,) if unknown_note else ())
            runs.append(measure_run)
            pending_note = pending_note or note
        if compare_measures:
            compare = _compare(settings, staging, runs, results_dirs)
    note = None
    if figures:  # ready: the pool has joined
        note = pending_note.get() if pending_note is not None else font_note(run_texts(runs[-1].result))
    paths = tuple(p for r in runs for p in (r.results_dir, r.figures_dir) if p is not None)
    return RunOutput(sentence_set=sentence_set, runs=tuple(runs), out=settings.out, compare=compare,
                     font_note=note or None, unknown_note=unknown_note, leftovers=tuple(staging.leftovers),
                     paths=paths, mixing=mixed)


@dataclass(frozen=True)
class _Settings:
    """A run's checked arguments, as each measure's steps read them."""

    lang: str  # the results folder's name (LANG)
    out: Path
    units: str
    figures: bool
    report: bool
    formats: tuple[str, ...]
    all_figures: bool
    quiet: bool
    table_format: str
    report_sentences: int
    batch_size: int = 32  # sentences per forward pass

    def folder(self, measure: str) -> str:
        """LANG, LANG-norm or LANG-value-zeroing."""
        from ..engine.measures import folder_suffix

        return self.lang + folder_suffix(measure)

    def results_dir(self, measure: str) -> Path:
        return self.out / "results" / self.folder(measure)

    def figures_dir(self, measure: str) -> Path:
        return self.out / "figures" / self.folder(measure)

    @property
    def figure_sentences(self) -> int | None:
        """How many sentences get per-sentence figures: None (all) with all_figures."""
        from ..outputs.drawing import FIGURE_SENTENCES

        return None if self.all_figures else FIGURE_SENTENCES

    @property
    def keep_maps(self) -> int | None:
        """How many sentences keep their maps in memory (None: all): those the report and the figures show, and
        as many as a report would hold without one, so that RunOutput.attention has the maps of a small run's every
        sentence; a large run streams the rest to its tables."""
        from ..outputs.drawing import FIGURE_SENTENCES

        if self.figures and self.all_figures:
            return None
        return max(self.report_sentences, FIGURE_SENTENCES if self.figures else 0)


def _checked(lang: str, out: str | Path, units: str, measure: str, compare_measures: bool, figures: bool,
             report: bool, formats: str | Sequence[str], all_figures: bool, quiet: bool, table_format: str,
             report_sentences: int, batch_size: int = 32) -> tuple[_Settings, tuple[str, ...]]:
    """run's arguments, checked before any work -> (settings, the measures to run)."""
    from ..engine.checks import flag, path_arg, whole_number
    from ..engine.measures import COMPARED, check_measure
    from ..engine.units import check_rule
    from ..outputs.folders import run_folder_name
    from ..outputs.formats import check_formats
    from ..outputs.tables import check_table_format

    path_arg(out, "out")
    for value, name in ((compare_measures, "compare_measures"), (figures, "figures"), (report, "report"),
                        (all_figures, "all_figures"), (quiet, "quiet")):
        flag(value, name)  # "no" is not False: a string would be taken as true
    check_measure(measure)
    check_rule(units)
    checked_formats = check_formats(formats)
    check_table_format(table_format)
    report_sentences = whole_number(report_sentences, "report_sentences (--report-sentences)")
    batch_size = whole_number(batch_size, "batch_size (--batch-size)")
    if compare_measures and measure != COMPARED[0]:
        raise InputError(f"compare_measures (--compare-measures) runs both measures; leave out measure (--measure) {measure}")
    settings = _Settings(lang=run_folder_name(lang), out=Path(out), units=units, figures=figures, report=report,
                         formats=checked_formats, all_figures=all_figures, quiet=quiet, table_format=table_format,
                         report_sentences=report_sentences, batch_size=batch_size)
    return settings, COMPARED if compare_measures else (measure,)


def _mixing(loaded, sentence_set: SentenceSet, units: str, quiet: bool,
            progress: Callable[[str], None] | None, batch_size: int) -> Mixing:
    """The context-mixing maps of the sentences (run --mixing; the same for every measure), with a layer bar unless
    quiet; the attention and norm maps in the run's batches, so that their rolled rows are rollout.csv's."""
    from ..engine.mixing import check_supported as check_mixing
    from ..engine.mixing import run_mixing

    check_mixing(loaded)
    return run_mixing(loaded, sentence_set, units=units, progress=None if quiet else layer_bar, note=progress,
                      batch_size=batch_size)


def _run_measure(settings: _Settings, measure: str, loaded, sentence_set: SentenceSet, staging, pool,
                 results_dir: Path, mixed: Mixing | None, want_note: bool, notes: tuple[str, ...] = ()):
    """One measure: the maps and labels (tables streamed as each batch ends), the figures (drawn by the pool
    meanwhile), summary.json, the mixing files and the report. -> (its MeasureRun, the pool's pending font note
    if want_note, else None)."""
    from dataclasses import replace

    from ..engine.pipeline import analyse
    from ..outputs.drawing import Drawing, run_jobs, run_texts
    from ..outputs.tables import SentenceTables, write_results

    # The tables are written as each batch of sentences is done; only the maps that the report and the figures
    # show stay in memory.
    with SentenceTables(results_dir, settings.table_format) as tables:
        result = analyse(loaded, sentence_set, units=settings.units, measure=measure, keep_maps=settings.keep_maps,
                         on_sentence=tables.add, batch_size=settings.batch_size)
    if mixed is not None:
        result = replace(result, mixing=mixed)
    figures_dir = _figures_folder(settings, staging, measure)
    drawing, note = None, None
    if settings.figures and figures_dir is not None:  # the workers draw while this process writes tables, report
        drawing = Drawing(run_jobs(figures_dir, result, settings.formats, settings.figure_sentences), pool=pool)
        if want_note and pool is not None:
            note = pool.font_note(run_texts(result))
    summary = write_results(results_dir, result, tables_written=True)
    mixing_figures: list[Path] = []
    if mixed is not None:  # before the report, which shows the summary
        summary, mixing_figures = _write_mixing(settings, results_dir, figures_dir, mixed, summary, result)
    from ..engine.units import joined_notes

    notes = notes + joined_notes([sentence.attention.joined for sentence in result.sentences])  # as the page shows them
    pending_report = _start_report(settings, figures_dir, result, summary, pool, notes)
    drawn = (drawing.wait(quiet=settings.quiet) if drawing is not None else []) + mixing_figures
    if pending_report is not None and pool is not None:
        pool.get(pending_report)
    return _measure_run(settings, measure, result, summary, figures_dir, drawn), note


def _figures_folder(settings: _Settings, staging, measure: str) -> Path | None:
    """The staged OUT/figures/<folder>, or None (and the old one removed) with neither figures nor report: the
    folder holds what this run drew."""
    if settings.figures or settings.report:
        return staging.folder(settings.figures_dir(measure))
    staging.remove(settings.figures_dir(measure))
    return None


def _write_mixing(settings: _Settings, results_dir: Path, figures_dir: Path | None, mixed: Mixing, summary: dict,
                  result: RunResult) -> tuple[dict, list[Path]]:
    """mixing.csv, mixing_agreement.csv and the mixing figures -> (the summary with the mixing's part, figures)."""
    from ..outputs.mixing import write_mixing

    return write_mixing(results_dir, figures_dir if settings.figures else None, mixed, summary,
                        [(s.focus, s.sense) for s in result.sentences], settings.formats,
                        settings.figure_sentences)


def _start_report(settings: _Settings, figures_dir: Path | None, result: RunResult, summary: dict, pool,
                  notes: tuple[str, ...] = ()):
    """Write report.html, with `notes` in its header (words the vocabulary lacks or the tokenizer deletes): by the
    drawing pool (-> its pending job) or here (-> None)."""
    from ..outputs.report import REPORT_NAME, write_report

    if not settings.report or figures_dir is None:
        return None
    if pool is not None:
        return pool.write_report(figures_dir / REPORT_NAME, result, summary, settings.report_sentences, notes)
    write_report(figures_dir / REPORT_NAME, result, summary, settings.report_sentences, notes)
    return None


def _measure_run(settings: _Settings, measure: str, result: RunResult, summary: dict, figures_dir: Path | None,
                 drawn: list[Path]) -> MeasureRun:
    """The MeasureRun of one measure, with the paths its files will have once swapped in."""
    from ..outputs.report import REPORT_NAME

    final = settings.figures_dir(measure)
    return MeasureRun(measure=measure, folder=settings.folder(measure), result=result, summary=summary,
                      results_dir=settings.results_dir(measure), figures_dir=None if figures_dir is None else final,
                      figures=tuple(final / Path(p).name for p in drawn),
                      report=final / REPORT_NAME if settings.report else None)


def _compare(settings: _Settings, staging, runs: list[MeasureRun], results_dirs: dict[str, Path]) -> tuple[Path, ...]:
    """measures.csv (and its figure) of compare_measures: the weights run beside the norm run."""
    from ..engine.measures import COMPARED
    from ..outputs.compare import COMPARE_NAME, write_compare

    weights_run, norm_run = runs
    write_compare(results_dirs[COMPARED[0]],
                  staged_figures(staging, settings.out, weights_run.folder) if settings.figures else None,
                  weights_run.result, norm_run.result, settings.formats)
    return (weights_run.results_dir / f"{COMPARE_NAME}.csv",) + (
        (settings.out / "figures" / weights_run.folder / f"{COMPARE_NAME}.{settings.formats[0]}",)
        if settings.figures else ())


def staged_figures(staging, out: Path, folder: str) -> Path:
    """The staging folder that becomes OUT/figures/<folder>."""
    return staging.staged(out / "figures" / folder)
