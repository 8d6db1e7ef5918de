"""`ra.run`: the focus word in a few sentences, from the config to every file of `real-attention run`.

    config -> sentences -> model -> per measure: maps, labels -> tables, figures, report (staged, then swapped in)

The drawing processes start before the model loads (they import matplotlib meanwhile), draw while this process
writes the tables, and write the report; everything lands at once, or nothing does.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..engine.errors import InputError

if TYPE_CHECKING:
    from ..engine.mixing import Mixing
    from ..engine.pipeline import RunResult
    from ..engine.sentences import SentenceSet
    from .api import Attention

FIGURE_FORMATS = ("png", "svg", "pdf")


@dataclass(frozen=True)
class MeasureRun:
    """One measure's part of a run: what was computed and where it went."""

    measure: str  # "weights", "norm" or "value-zeroing"
    folder: str  # the folder name under results/ and figures/: LANG, LANG-norm or LANG-value-zeroing
    result: RunResult  # the sentences' maps, located words and head labels
    summary: dict  # summary.json's content
    results_dir: Path  # OUT/results/<folder>
    figures_dir: Path | None  # OUT/figures/<folder>, None when neither figures nor the report were asked for
    figures: tuple[Path, ...]  # the figure files drawn, in order
    report: Path | None  # OUT/figures/<folder>/report.html, or None

    @property
    def attention(self) -> Attention:
        """The maps, located words and head labels as an Attention. A run of more sentences than its report
        holds kept only the maps it shows: InputError then, and ra.read_attention(results_dir) reads them all."""
        from .api import from_result

        if self.result.maps_kept < len(self.result.sentences):
            raise InputError(f"this run kept the maps of its first {self.result.maps_kept} of "
                             f"{len(self.result.sentences)} sentences only (it streamed them to its tables); read "
                             f"them all with ra.read_attention({str(self.results_dir)!r})")
        return from_result(self.result)


@dataclass(frozen=True)
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
    def summary(self) -> dict:
        return self.runs[0].summary


def check_formats(formats: str | Sequence[str]) -> tuple[str, ...]:
    """Figure formats, each once in the order given; InputError for an unknown one."""
    items = (formats,) if isinstance(formats, str) else tuple(formats)
    for item in items:
        if item not in FIGURE_FORMATS:
            raise InputError(f"figure format {item!r} is not one of {', '.join(FIGURE_FORMATS)}")
    if not items:
        raise InputError("give at least one figure format")
    return tuple(dict.fromkeys(items))


def layer_bar(total: int, desc: str):
    """A tqdm bar on stderr that shows itself only after a second (a short job draws nothing)."""
    import sys

    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="layer", file=sys.stderr, dynamic_ncols=True, delay=1.0)


def run(lang: str = "es", config: str | Path | None = None, model: str | None = None, revision: str | None = None,
        out: str | Path = ".", units: str = "text", measure: str = "weights", compare_measures: bool = False,
        figures: bool = True, report: bool = True, formats: str | Sequence[str] = ("png",),
        all_figures: bool = False, offline: bool = False, device: str = "cpu",
        progress: Callable[[str], None] | None = None, quiet: bool = True, wait: bool = True,
        mixing: bool = False, table_format: str = "csv", report_sentences: int = 200) -> RunOutput:
    """Write exactly the files of `real-attention run`, staged and swapped in at once.

    Writes OUT/results/<lang>/ (attention.csv, focus.csv, heads.csv, rollout.csv, summary.json) and
    OUT/figures/<lang>/ (figures and report.html); `<lang>-norm` for measure="norm" (`<lang>-value-zeroing` for
    "value-zeroing"); both weights and norm with compare_measures. mixing=True adds mixing.csv and
    mixing_agreement.csv to each results folder, the mixing_s<k> figures and the report's mixing view
    (real_attention.engine.mixing). table_format "parquet" writes attention.parquet and rollout.parquet instead
    of the CSVs (read either back with ra.read_attention). The sentences' maps go to those tables as each batch
    of RUN_BATCH sentences is done; the result keeps only the maps the report (its first `report_sentences`
    sentences) and the figures show (every sentence's with all_figures), so memory stays flat in the number of
    sentences. `progress` receives a message when this run waits for another one writing the same folders;
    `quiet=False` shows the figures' progress bar. Returns a RunOutput.
    """
    from ..engine.measures import COMPARED, check_measure, check_supported, folder_suffix
    from ..engine.models import check_encodes, choose_model, load_model
    from ..engine.pipeline import analyse
    from ..engine.sentences import load_sentences
    from ..engine.units import check_rule
    from ..outputs.drawing import FIGURE_SENTENCES, Drawing, DrawingPool, font_note, run_jobs, run_texts
    from ..outputs.folders import run_folder_name
    from ..outputs.report import REPORT_NAME, write_report
    from ..outputs.staging import check_targets, staged_outputs
    from ..outputs.tables import SentenceTables, check_table_format, write_results

    check_measure(measure)
    check_rule(units)
    formats = check_formats(formats)
    check_table_format(table_format)
    if isinstance(report_sentences, bool) or not isinstance(report_sentences, int) or report_sentences < 1:
        raise InputError(f"report_sentences must be a whole number >= 1, not {report_sentences!r}")
    if compare_measures and measure != COMPARED[0]:
        raise InputError(f"--compare-measures runs both measures; leave out --measure {measure}")
    measures = COMPARED if compare_measures else (measure,)
    lang = run_folder_name(lang)
    out = Path(out)
    check_targets(out / kind / (lang + folder_suffix(m)) for kind in ("results", "figures") for m in measures)
    sentence_set = load_sentences(config, lang)
    choice = choose_model(lang, model, revision)
    runs: list[MeasureRun] = []
    pending_note = None  # the line about missing glyphs, worked out by a drawing worker
    compare: tuple[Path, ...] = ()
    with staged_outputs(wait=wait, on_wait=progress) as staging, ExitStack() as drawing_processes:
        results_dirs = {m: staging.folder(out / "results" / (lang + folder_suffix(m))) for m in measures}
        # Started now, the drawing processes import matplotlib while this one loads the model.
        pool = DrawingPool.start() if figures else None
        if pool is not None:
            drawing_processes.enter_context(pool)
        loaded = load_model(choice, device=device, offline=offline)
        unknown_note = check_encodes(loaded, [sentence.text for sentence in sentence_set.sentences])
        for m in measures:  # before any measure is computed or drawn
            check_supported(loaded, m)
        mixed = None
        if mixing:  # the context-mixing maps: the same for every measure
            from dataclasses import replace

            from ..engine.mixing import check_supported as check_mixing
            from ..engine.mixing import run_mixing
            from ..outputs.mixing import write_mixing

            check_mixing(loaded)
            mixed = run_mixing(loaded, sentence_set, units=units, progress=None if quiet else layer_bar,
                               note=progress)
        for m in measures:
            folder = lang + folder_suffix(m)
            # The tables are written as each batch of sentences is done; only the maps that the report and the
            # figures show stay in memory.
            keep_maps = None if figures and all_figures else max(report_sentences if report else 0,
                                                                 FIGURE_SENTENCES if figures else 0)
            with SentenceTables(results_dirs[m], table_format) as tables:
                result = analyse(loaded, sentence_set, units=units, measure=m, keep_maps=keep_maps,
                                 on_sentence=tables.add)
            if mixed is not None:
                result = replace(result, mixing=mixed)
            figures_dir = staging.folder(out / "figures" / folder) if figures or report else None
            if figures_dir is None:  # the folder holds what this run drew: nothing
                staging.remove(out / "figures" / folder)
            drawing = None
            if figures and figures_dir is not None:  # the workers draw while this process writes tables and report
                drawing = Drawing(run_jobs(figures_dir, result, formats, None if all_figures else FIGURE_SENTENCES),
                                  pool=pool)
                if pending_note is None and pool is not None:
                    pending_note = pool.font_note(run_texts(result))
            summary = write_results(results_dirs[m], result, tables_written=True)
            mixing_figures: list[Path] = []
            if mixed is not None:  # before the report, which shows the summary
                summary, mixing_figures = write_mixing(
                    results_dirs[m], figures_dir if figures else None, mixed, summary,
                    [(s.focus, s.sense) for s in result.sentences], formats,
                    None if all_figures else FIGURE_SENTENCES)
            pending_report = None
            if report and figures_dir is not None:
                if pool is not None:
                    pending_report = pool.write_report(figures_dir / REPORT_NAME, result, summary, report_sentences)
                else:
                    write_report(figures_dir / REPORT_NAME, result, summary, report_sentences)
            drawn = (drawing.wait(quiet=quiet) if drawing is not None else []) + mixing_figures
            if pending_report is not None and pool is not None:
                pool.get(pending_report)
            runs.append(MeasureRun(
                measure=m, folder=folder, result=result, summary=summary, results_dir=out / "results" / folder,
                figures_dir=None if figures_dir is None else out / "figures" / folder,
                figures=tuple(out / "figures" / folder / Path(p).name for p in drawn),
                report=out / "figures" / folder / REPORT_NAME if report else None))
        if compare_measures:
            from ..outputs.compare import COMPARE_NAME, write_compare

            weights_run, norm_run = runs
            write_compare(results_dirs[COMPARED[0]], staged_figures(staging, out, weights_run.folder) if figures
                          else None, weights_run.result, norm_run.result, formats)
            compare = (weights_run.results_dir / f"{COMPARE_NAME}.csv",) + (
                (out / "figures" / weights_run.folder / f"{COMPARE_NAME}.{formats[0]}",) if figures else ())
    note = None
    if figures:  # ready: the pool has joined
        note = pending_note.get() if pending_note is not None else font_note(run_texts(runs[-1].result))
    paths = tuple(p for r in runs for p in (r.results_dir, r.figures_dir) if p is not None)
    return RunOutput(sentence_set=sentence_set, runs=tuple(runs), out=out, compare=compare, font_note=note or None,
                     unknown_note=unknown_note, leftovers=tuple(staging.leftovers), paths=paths, mixing=mixed)


def staged_figures(staging, out: Path, folder: str) -> Path:
    """The staging folder that becomes OUT/figures/<folder>."""
    return staging.staged(out / "figures" / folder)
