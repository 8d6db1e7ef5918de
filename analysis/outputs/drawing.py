"""Which figures a run draws, and the forked worker processes that draw them (real_attention.outputs.plots draws each one).

This module imports no matplotlib. The workers do, so `run` can start them (`DrawingPool.start`) before it
loads the model: while the main process imports torch and reads the weights on one core, the workers import
matplotlib and warm their fonts on the other, and they are ready when the maps are. A job is one figure:
(drawer name, its arguments, folder, file stem, formats); each is drawn and saved by itself, so its bytes do
not depend on the process that drew it.
"""
from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..engine.measures import WEIGHTS

if TYPE_CHECKING:
    from ..engine.pipeline import RunResult
    from .readback import StoredRun

FORMATS = ("png", "svg", "pdf")
FIGURE_SENTENCES = 10  # per-sentence figures are drawn for the first 10 sentences unless asked for all
PARALLEL_FROM = 6  # this many figures or more are drawn by forked worker processes (where fork exists)
PROGRESS_FROM = 24  # this many figures or more show a progress bar on stderr (unless quiet)
MAX_WORKERS = 8
POLL_SECONDS = 0.5  # how often a wait checks that the drawing processes are alive


def multiprocessing_timeout() -> type[Exception]:
    import multiprocessing

    return multiprocessing.TimeoutError

# The lesson's four heads: file prefix, the HeadReport property that picks it, and its name in titles.
LESSON_HEADS = (
    ("sense", "best_sense_head", "best sense-word head"),
    ("prev", "prev_head", "previous-word head"),
    ("next", "next_head", "next-word head"),
    ("marker", "marker_score_head", "marker head"),
)
# A decoder's heatmaps add the head that puts the most weight on the first token (its attention sink).
CAUSAL_HEADS = (("first", "first_head", "first-token head"),)

Job = tuple[str, dict, Path, str, tuple[str, ...]]


def _draw_job(job: Job) -> list[Path]:
    from .plots import draw_and_save

    return draw_and_save(*job)


def _warm_up() -> None:
    import signal

    # Ctrl-C reaches the whole process group: the main process stops the run and ends the workers; a worker
    # of its own would only print a KeyboardInterrupt traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        from .plots import warm_up
        from .report import heatmap_colours

        warm_up()
        heatmap_colours()  # the report's colour map: its module, pandas and matplotlib's colour maps are loaded
    except Exception:  # noqa: BLE001  the first job meets the same error and reports it; a worker that died
        pass  # here would be replaced by the pool, fail again, and so on for ever


def _write_report(path: Path, result: RunResult, summary: dict, max_sentences: int | None = None) -> Path:
    from .report import write_report

    return write_report(path, result, summary, max_sentences)


def font_note(texts: Sequence[str]) -> str | None:
    """A line for the user when no installed font has the glyphs of some words (names the package to install)."""
    from .fonts import missing_glyphs_note

    return missing_glyphs_note(texts)


def run_texts(result: RunResult) -> list[str]:
    """Every word and sentence a run's figures write."""
    return [text for s in result.sentences for text in (*s.attention.words, s.attention.text)]


def can_fork() -> bool:
    """Fork is only safe on Linux (macOS frameworks break after it), and a daemon process cannot have children."""
    import multiprocessing

    return sys.platform.startswith("linux") and not multiprocessing.current_process().daemon


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def worker_count(jobs: int, workers: int | None) -> int:
    """How many processes draw `jobs` figures: `workers` if given, else one per CPU when there are many."""
    if workers is not None:
        return max(1, min(workers, jobs))
    if jobs < PARALLEL_FROM or not can_fork():
        return 1
    return max(1, min(cpu_count(), MAX_WORKERS, jobs // 3))


class DrawingPool:
    """Forked drawing processes, each warmed up (matplotlib imported, one figure rendered) as it starts.

    A context manager: leaving it ends the processes, at once if an error or an interrupt is on its way.
    """

    def __init__(self, count: int):
        import multiprocessing

        # A forked child would inherit the tokenizers' "parallelism already used" state and warn; it tokenizes
        # nothing. Set only while forking: the user's environment is left as it was.
        quiet_tokenizers = "TOKENIZERS_PARALLELISM" not in os.environ
        if quiet_tokenizers:
            os.environ["TOKENIZERS_PARALLELISM"] = "false"
        try:
            self._pool = multiprocessing.get_context("fork").Pool(count, initializer=_warm_up)
        finally:
            if quiet_tokenizers:
                del os.environ["TOKENIZERS_PARALLELISM"]
        self.count = count
        # Pool replaces a worker that dies and loses its task, which would leave the run waiting for ever; the
        # first processes never end before the pool does, so one that has an exit code was killed.
        self._workers = list(self._pool._pool)

    def _check_alive(self) -> None:
        from ..engine.errors import OutputError

        if any(worker.exitcode is not None for worker in self._workers):
            raise OutputError("a drawing process died before it finished (killed, or out of memory?); nothing "
                              "was written. Run again, or with --no-figures")

    def results(self, pending) -> Iterator:
        """The items of a pool iterator, in order; OutputError if a worker dies meanwhile."""
        while True:
            try:
                yield pending.next(timeout=POLL_SECONDS)
            except StopIteration:
                return
            except multiprocessing_timeout():
                self._check_alive()

    def get(self, pending):
        """An AsyncResult's value; OutputError if a worker dies meanwhile."""
        while True:
            try:
                return pending.get(timeout=POLL_SECONDS)
            except multiprocessing_timeout():
                self._check_alive()

    @classmethod
    def start(cls, workers: int | None = None) -> DrawingPool | None:
        """A pool of `workers` processes (None: one per CPU, at most MAX_WORKERS), or None where one process
        would draw anyway (one CPU, or no fork)."""
        count = workers if workers is not None else min(cpu_count(), MAX_WORKERS)
        return cls(count) if count > 1 and can_fork() else None

    def imap(self, jobs: list[Job]) -> Iterator[list[Path]]:
        """Each job's saved paths, in job order, whoever finishes first; the jobs start at once."""
        return self.results(self._pool.imap(_draw_job, jobs))

    def font_note(self, texts: Sequence[str]):
        """font_note(texts) in a worker, which has matplotlib's fonts loaded already; `.get()` the line."""
        return self._pool.apply_async(font_note, (list(texts),))

    def write_report(self, path: Path, result: RunResult, summary: dict, max_sentences: int | None = None):
        """real_attention.outputs.report.write_report in a worker, which has matplotlib's colour maps loaded already, after
        the figures handed over before it; `.get()` waits for it (and raises its error). max_sentences: as
        write_report's (None: every sentence whose maps the result kept)."""
        return self._pool.apply_async(_write_report, (path, result, summary, max_sentences))

    def __enter__(self) -> DrawingPool:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if kind is None:
            self._pool.close()
        else:
            self._pool.terminate()
        self._pool.join()


class Drawing:
    """Figures on their way: the jobs go to the pool's workers at once, so the caller can write its tables
    meanwhile; `wait` collects the paths. Without a pool, `workers` forked processes (or this one) draw
    them in `wait`, which must then follow at once (it ends the processes it started)."""

    def __init__(self, jobs: list[Job], *, pool: DrawingPool | None = None, workers: int | None = None):
        self.jobs = jobs
        self._stack = contextlib.ExitStack()
        count = pool.count if pool is not None else worker_count(len(jobs), workers)
        if pool is None and count > 1:
            pool = self._stack.enter_context(DrawingPool(count))
        self._results = map(_draw_job, jobs) if pool is None else pool.imap(jobs)

    def wait(self, *, quiet: bool = False, desc: str = "figures") -> list[Path]:
        """The paths in job order, once every figure is saved; a bar on stderr from PROGRESS_FROM figures on,
        unless quiet."""
        with self._stack:
            bar = contextlib.nullcontext(None)
            if not quiet and len(self.jobs) >= PROGRESS_FROM:
                try:
                    from tqdm.auto import tqdm
                except ImportError:  # tqdm comes with transformers; without it, no bar
                    pass
                else:
                    bar = tqdm(total=len(self.jobs), unit="fig", desc=desc, file=sys.stderr, dynamic_ncols=True,
                               leave=False)
            paths: list[Path] = []
            with bar as progress:
                for saved in self._results:
                    paths += saved
                    if progress is not None:
                        progress.update()
        return paths


def draw_all(jobs: list[Job], *, workers: int | None = None, quiet: bool = False, desc: str = "figures",
             pool: DrawingPool | None = None) -> list[Path]:
    """Draw and save every job, in forked worker processes when there are many (or in `pool`, started
    earlier); returns the paths in job order."""
    return Drawing(jobs, pool=pool, workers=workers).wait(quiet=quiet, desc=desc)


def check_formats(formats: Sequence[str]) -> tuple[str, ...]:
    """The formats once each, in the order given (a repeated --format draws once); ValueError for unknown ones."""
    formats = tuple(dict.fromkeys(formats))
    unknown = set(formats) - set(FORMATS)
    if unknown:
        raise ValueError(f"unknown figure format(s) {', '.join(sorted(unknown))}; use {', '.join(FORMATS)}")
    return formats


def figure_sentences(result: RunResult, max_sentences: int | None = FIGURE_SENTENCES) -> int:
    """How many sentences get per-sentence figures: the first max_sentences (None: all)."""
    total = len(result.sentences)
    return total if max_sentences is None else min(total, max_sentences)


def run_jobs(folder: Path, result: RunResult, formats: Sequence[str],
             max_sentences: int | None = FIGURE_SENTENCES) -> list[Job]:
    """The figures of a run, in a fixed order (see write_run_figures)."""
    from ..engine.categories import focus_categories

    folder = Path(folder)
    formats = check_formats(formats)
    if max_sentences is not None and max_sentences < 0:
        raise ValueError(f"max_sentences must be at least 0 or None, not {max_sentences}")
    report, sentences = result.report, result.sentences
    drawn = sentences[:figure_sentences(result, max_sentences)]
    common = {"model": result.model, "revision": result.revision, "measure": result.measure}
    jobs: list[Job] = []
    for prefix, attribute, role in LESSON_HEADS + (CAUSAL_HEADS if result.causal else ()):
        chosen = getattr(report, attribute)
        if chosen is None:
            continue
        layer, head = chosen
        for number, sentence in enumerate(drawn):
            attention = sentence.attention
            arguments = dict(weights=attention.weights[layer, head], words=attention.words, focus=sentence.focus,
                             sense=sentence.sense, layer=layer, head=head, sentence=number, text=attention.text,
                             role=role, **common)
            jobs.append(("heatmap", arguments, folder, f"{prefix}_L{layer + 1}H{head + 1}_s{number + 1}", formats))
    overview = dict(categories=focus_categories(report, sentences), top_weight=report.top_weight.mean(axis=0),
                    focus_word=result.sentence_set.focus, sentence_count=len(sentences),
                    best=report.best_sense_head, causal=result.causal, **common)
    jobs.append(("overview", overview, folder, "overview", formats))
    best = report.best_sense_head
    if best is not None:
        for number, sentence in enumerate(drawn):
            attention = sentence.attention
            arguments = dict(weights=attention.weights[best[0], best[1], sentence.focus], words=attention.words,
                             focus=sentence.focus, sense=sentence.sense, layer=best[0], head=best[1],
                             sentence=number, text=attention.text, **common)
            jobs.append(("focus_bars", arguments, folder, f"focus_bars_s{number + 1}", formats))
    for number, (sentence, rolled) in enumerate(zip(drawn, result.rollout)):
        arguments = dict(rows=rolled[:, sentence.focus], words=sentence.attention.words, focus=sentence.focus,
                         sense=sentence.sense, sentence=number, text=sentence.attention.text, **common)
        jobs.append(("rollout", arguments, folder, f"rollout_s{number + 1}", formats))
    return jobs


def write_run_figures(folder: Path, result: RunResult, formats: Sequence[str], *,
                      max_sentences: int | None = FIGURE_SENTENCES, quiet: bool = False,
                      workers: int | None = None, pool: DrawingPool | None = None) -> list[Path]:
    """Write the figures of a run into `folder` in each format; returns the paths in a fixed order.

    For each of the lesson's heads (a decoder's: with the first-token head) and each of the first
    `max_sentences` sentences s (from 1; None: every sentence): {sense,prev,next,marker}_L{l}H{h}_s{s}; then
    overview (over every sentence); then focus_bars_s{s}; then rollout_s{s} (the focus word's rollout row,
    layer by layer; when the run computed it). Titles name the measure unless it is the weights. The sense
    figures are skipped when there is no sense head. The HTML report holds every head and sentence whatever
    `max_sentences` is. Many figures are drawn by `workers` forked processes (None: one per CPU, when there
    are enough figures), or by `pool`, with a progress bar on stderr unless `quiet`; the bytes are the same
    either way.
    """
    return draw_all(run_jobs(folder, result, formats, max_sentences), workers=workers, quiet=quiet, pool=pool)


def write_head_figures(folder: Path, run: StoredRun, layer: int, head: int, sentence: int | None,
                       formats: Sequence[str], *, quiet: bool = False, workers: int | None = None) -> list[Path]:
    """`show`: the heatmap of one head (layer, head, sentence from 1; sentence None: every sentence) from a
    stored run, as head_L{l}H{h}_s{k}.{fmt} in `folder`. ResultsError names an index out of range."""
    from .staging import OutputError
    from .readback import head_role, stored_head

    numbers = range(1, run.sentence_count + 1) if sentence is None else [sentence]
    stored = [stored_head(run, layer, head, number) for number in numbers]  # check every index before drawing
    role = head_role(run.summary, layer - 1, head - 1)
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputError(f"cannot write to {folder}: {error.strerror or error}") from None
    formats = check_formats(formats)
    jobs: list[Job] = []
    for item in stored:
        arguments = dict(weights=item.weights, words=item.words, focus=item.focus, sense=item.sense,
                         model=run.summary["model"], revision=run.summary["revision"], layer=item.layer,
                         head=item.head, sentence=item.sentence, text=item.text, role=role,
                         measure=run.summary.get("measure", WEIGHTS))
        jobs.append(("heatmap", arguments, Path(folder), f"head_L{layer}H{head}_s{item.sentence + 1}", formats))
    return draw_all(jobs, workers=workers, quiet=quiet)
