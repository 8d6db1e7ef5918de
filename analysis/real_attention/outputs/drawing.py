"""Which figures a run draws, and the forked worker processes that draw them (real_attention.outputs.plots draws each one).

This module imports no matplotlib. The workers do, so `run` can start them (`DrawingPool.start`) before it
loads the model: while the main process imports torch and reads the weights on one core, the first worker
imports matplotlib and warms its fonts on the other, then forks the others from itself, and they are ready when
the maps are. A job is one figure:
(drawer name, its arguments, folder, file stem, formats); each is drawn and saved by itself, so its bytes do
not depend on the process that drew it.
"""
from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..engine.measures import WEIGHTS
from .formats import check_formats

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ..engine.pipeline import RunResult
    from .readback import StoredRun

FIGURE_SENTENCES = 10  # per-sentence figures are drawn for the first 10 sentences unless asked for all
PARALLEL_FROM = 6  # this many figures or more are drawn by forked worker processes (where fork exists)
PROGRESS_FROM = 24  # this many figures or more show a progress bar on stderr (unless quiet)
MAX_WORKERS = 8
PARENT_CHECK_SECONDS = 1.0  # where prctl is missing: how often a worker checks that its parent is alive
START_SECONDS = 120.0  # DrawingPool.pids waits this long for the workers to start
STOP_SECONDS = 10.0  # DrawingPool.terminate waits this long for a worker just forked to say its pid
DIED = ("a drawing process died before it finished (killed, or out of memory?); nothing was written. "
        "Run again, or with figures=False (--no-figures)")

# The lesson's four heads: file prefix, the HeadReport property that picks it, and its name in titles.
LESSON_HEADS = (
    ("sense", "best_sense_head", "best sense-word head"),
    ("prev", "prev_head", "previous-word head"),
    ("next", "next_head", "next-word head"),
    # The head with the highest marker score: often not a marker head (whose top key is a marker in every
    # sentence), so never named as one.
    ("marker_weight", "marker_score_head", "top marker-weight head"),
)
# A decoder's heatmaps add the head that puts the most weight on the first token (its attention sink).
CAUSAL_HEADS = (("first", "first_head", "first-token head"),)

Job = tuple[str, dict, Path, str, tuple[str, ...]]


def _draw_job(job: Job) -> list[Path]:
    from .plots import draw_and_save

    return draw_and_save(*job)


def die_with_parent(parent: int) -> None:
    """Make this process end when `parent` does: on Linux the kernel sends SIGKILL (prctl PR_SET_PDEATHSIG);
    elsewhere a daemon thread checks every PARENT_CHECK_SECONDS that the parent is still the same process."""
    import ctypes
    import threading

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        installed = sys.platform.startswith("linux") and libc.prctl(1, 9, 0, 0, 0) == 0  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        installed = False
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
    if installed:
        return

    def watch() -> None:
        while not threading.Event().wait(PARENT_CHECK_SECONDS):
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="parent-alive", daemon=True).start()


def _start_worker(parent: int, started) -> None:  # started: the write end of DrawingPool's pid pipe
    """What each drawing worker does first: die with its parent, leave Ctrl-C to the main process, say its pid."""
    import signal

    die_with_parent(parent)
    # Ctrl-C reaches the whole process group: the main process stops the run and ends the workers; a worker
    # of its own would only print a KeyboardInterrupt traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # SIGTERM ends a worker at once (DrawingPool.terminate sends it), not through the handler the parent set
    # for itself (staging.sigterm_as_interrupt), which a forked worker inherits.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    started.send(os.getpid())  # one small write: atomic on a pipe, done before any job runs


def _warm_up() -> None:
    """Import matplotlib, render one small figure, load the report's colour map (its module and matplotlib's
    colour maps)."""
    try:
        from .plots import warm_up
        from .report import heatmap_colours

        warm_up()
        heatmap_colours()
    except Exception:  # noqa: BLE001  the first job meets the same error and reports it; a worker that died
        pass  # here would break the whole pool


def _first_worker(parent: int, started, ends: list, main_ends: list) -> None:
    """The first drawing worker: warms up, then forks the others from itself, so that they start with
    matplotlib imported and its caches filled (one import and one warm-up for the whole pool), then serves
    `ends[0]`. ends: each worker's end of its pipe to the main process; main_ends: the main process's."""
    import multiprocessing

    for end in main_ends:
        end.close()
    _start_worker(parent, started)
    _warm_up()
    context = multiprocessing.get_context("fork")
    for index in range(1, len(ends)):
        context.Process(target=_other_worker, args=(os.getpid(), started, ends, index), name="drawing").start()
        ends[index].close()  # that worker's now: its death is the end of its pipe
    _serve(ends[0])


def _other_worker(parent: int, started, ends: list, index: int) -> None:
    """A drawing worker forked by the first one (its `parent`): serves `ends[index]`."""
    for number, end in enumerate(ends):
        if number != index and not end.closed:
            end.close()
    _start_worker(parent, started)
    _serve(ends[index])


def _serve(end) -> None:
    """A worker's loop: say it is ready, then run each (function, arguments) it gets and send back (True,
    value) or (False, error); None, or the main process gone, ends it."""
    from concurrent.futures.process import _ExceptionWithTraceback  # the error keeps the worker's traceback

    with contextlib.suppress(EOFError, OSError):  # the main process went away: nothing to do
        end.send(None)
        while (task := end.recv()) is not None:
            function, arguments = task
            try:
                reply = (True, function(*arguments))
            except BaseException as error:  # noqa: BLE001  the caller raises it
                reply = (False, _ExceptionWithTraceback(error, error.__traceback__))  # type: ignore[arg-type]
            try:
                end.send(reply)
            except (EOFError, OSError):
                raise
            except Exception as error:  # noqa: BLE001  a value or an error that does not pickle
                end.send((False, RuntimeError(f"a drawing job's result could not be sent back: {error!r}")))


def _write_report(path: Path, result: RunResult, summary: dict, max_sentences: int | None = None,
                  notes: tuple[str, ...] = ()) -> Path:
    from .report import write_report

    return write_report(path, result, summary, max_sentences, notes)


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


class Pending:
    """A task handed to the drawing workers: `get()` waits for its value (and raises its error)."""

    def __init__(self, future: Future):
        self.future = future

    def get(self):
        return self.future.result()


class DrawingPool:
    """Forked drawing processes: the first one imports matplotlib and renders one small figure as it starts,
    then forks the others from itself, warm (one import for the whole pool: while the main process loads the
    model on one core, a second import would be a third busy process on two cores). They ignore Ctrl-C and
    die with this process. Each worker has a pipe of its own; a thread of this process hands each job to the
    next idle worker and reads the results back.

    A context manager: leaving it waits for the work handed over, or, if an error or an interrupt is on its
    way, ends the processes at once. A worker that dies (killed, out of memory) is an OutputError in whatever
    waits for the pool's work, never a wait for ever. Start it from the main thread: on Linux the workers die
    with the thread that forked them.
    """

    def __init__(self, count: int):
        import collections
        import multiprocessing
        import threading

        context = multiprocessing.get_context("fork")
        self.count = count
        self._announced, started = context.Pipe(duplex=False)  # each worker sends its pid as it starts
        self._pids: list[int] = []
        pipes = [context.Pipe() for _ in range(count)]
        self._ends = [ours for ours, _ in pipes]  # this process's end of each worker's pipe
        theirs = [end for _, end in pipes]
        self._lock = threading.Lock()  # guards what follows, shared with the results thread
        self._waiting: collections.deque[tuple[Future, Callable, tuple]] = collections.deque()
        self._busy: dict[int, Future] = {}  # worker -> the task it runs
        self._idle: list[int] = []  # the workers waiting for a task
        self._broken = self._closing = False
        # A forked child would inherit the tokenizers' "parallelism already used" state and warn; it tokenizes
        # nothing. Set only while forking: the user's environment is left as it was.
        quiet_tokenizers = "TOKENIZERS_PARALLELISM" not in os.environ
        if quiet_tokenizers:
            os.environ["TOKENIZERS_PARALLELISM"] = "false"
        try:
            self._first = context.Process(target=_first_worker, args=(os.getpid(), started, theirs, self._ends),
                                          name="drawing")
            self._first.start()
        finally:
            if quiet_tokenizers:
                del os.environ["TOKENIZERS_PARALLELISM"]
        for end in (*theirs, started):  # the workers' now: a worker's death is the end of its pipe
            end.close()
        self._results = threading.Thread(target=self._read_results, name="drawing-results", daemon=True)
        self._results.start()

    @classmethod
    def start(cls, workers: int | None = None) -> DrawingPool | None:
        """A pool of `workers` processes (None: one per CPU, at most MAX_WORKERS), or None where one process
        would draw anyway (one CPU, or no fork)."""
        count = workers if workers is not None else min(cpu_count(), MAX_WORKERS)
        return cls(count) if count > 1 and can_fork() else None

    def pids(self, timeout: float = START_SECONDS) -> list[int]:
        """The process ids of the workers, once each has started (OutputError if one has not within `timeout`
        seconds). With timeout=0: those that have started so far."""
        from ..engine.errors import OutputError

        with contextlib.suppress(EOFError):  # every worker ended: no more pids will come
            while len(self._pids) < self.count and self._announced.poll(timeout):
                self._pids.append(self._announced.recv())
        if len(self._pids) < self.count and timeout > 0:
            raise OutputError(DIED)
        return sorted(self._pids)

    def submit(self, function, *arguments) -> Pending:
        """function(*arguments) in a worker (both picklable); `.get()` the value."""
        from concurrent.futures import Future

        from ..engine.errors import OutputError

        future: Future = Future()
        with self._lock:
            if self._broken or self._closing:
                raise OutputError(DIED)
            self._waiting.append((future, function, arguments))
            self._hand_out()
        return Pending(future)

    def _hand_out(self) -> None:
        """Give waiting tasks to idle workers (with the lock held)."""
        while self._idle and self._waiting:
            future, function, arguments = self._waiting.popleft()
            if not future.set_running_or_notify_cancel():
                continue
            worker = self._idle.pop(0)
            try:
                self._ends[worker].send((function, arguments))
            except OSError:  # the worker has just died: the results thread says so
                self._busy[worker] = future
                continue
            except Exception as error:  # noqa: BLE001  arguments that do not pickle: that task's error
                self._idle.insert(0, worker)
                future.set_exception(error)
                continue
            self._busy[worker] = future

    def _read_results(self) -> None:
        """The results thread: each worker's replies, until every worker has ended. A worker that ends before
        the pool is closed breaks it: every task not done is an OutputError."""
        from multiprocessing.connection import wait

        live = dict(enumerate(self._ends))
        while live:
            for ready in wait(list(live.values())):
                worker = next(number for number, known in live.items() if known is ready)
                try:
                    reply = live[worker].recv()
                except Exception:  # noqa: BLE001  ended (EOFError, OSError), or a reply that cannot be read back
                    del live[worker]
                    self._break()
                    continue
                with self._lock:
                    future = self._busy.pop(worker, None)
                    self._idle.append(worker)
                    self._hand_out()
                if future is not None:
                    ok, value = reply
                    if ok:
                        future.set_result(value)
                    else:
                        future.set_exception(value)

    def _break(self) -> None:
        """A worker ended: unless the pool was closing, every task not done is an OutputError."""
        from ..engine.errors import OutputError

        with self._lock:
            if self._closing:
                return
            self._broken = True
            lost = [*self._busy.values(), *(future for future, _, _ in self._waiting)]
            self._busy.clear()
            self._waiting.clear()
        for future in lost:
            if not future.done():
                with contextlib.suppress(Exception):  # a task the caller cancelled
                    future.set_running_or_notify_cancel()
                with contextlib.suppress(Exception):
                    future.set_exception(OutputError(DIED))

    def imap(self, jobs: list[Job]) -> Iterator[list[Path]]:
        """Each job's saved paths, in job order, whoever finishes first; the jobs start at once."""
        pending = [self.submit(_draw_job, job) for job in jobs]
        return (task.get() for task in pending)

    def font_note(self, texts: Sequence[str]) -> Pending:
        """font_note(texts) in a worker, which has matplotlib's fonts loaded already; `.get()` the line."""
        return self.submit(font_note, list(texts))

    def write_report(self, path: Path, result: RunResult, summary: dict, max_sentences: int | None = None,
                     notes: tuple[str, ...] = ()) -> Pending:
        """real_attention.outputs.report.write_report in a worker, which has matplotlib's colour maps loaded
        already, after the figures handed over before it; `.get()` waits for it (and raises its error).
        max_sentences: as write_report's (None: every sentence whose maps the result kept)."""
        return self.submit(_write_report, path, result, summary, max_sentences, notes)

    def get(self, pending: Pending):
        """A task's value (Pending.get): OutputError if a worker died meanwhile."""
        return pending.get()

    def __enter__(self) -> DrawingPool:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if kind is None:
            try:
                self.close()
            except BaseException:  # Ctrl-C or SIGTERM while waiting for the figures: end the workers now; left
                self.terminate()  # alive, multiprocessing would wait for them at exit, for ever
                raise
            return
        self.terminate()

    def close(self) -> None:
        """Wait for the work handed over, then end the workers (OutputError if one died meanwhile)."""
        from concurrent.futures import wait

        with self._lock:
            futures = [*self._busy.values(), *(future for future, _, _ in self._waiting)]
        wait(futures)
        with self._lock:
            broken, self._closing = self._broken, True
        if broken:
            self.terminate()
            return
        for end in self._ends:  # each worker reads it once it is idle, and ends
            with contextlib.suppress(OSError):
                end.send(None)
        self._settle()

    def terminate(self) -> None:
        """End the workers now (SIGTERM), drop the work not started, and wait until they are gone."""
        import signal

        with self._lock:
            self._closing = True
            for future, _, _ in self._waiting:
                future.cancel()
            self._waiting.clear()
        # The workers the first one forked are its children, not reaped before it ends: their pids are theirs.
        for pid in self.pids(timeout=0):
            if pid != self._first.pid:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
        self._first.terminate()  # one it was forking just now dies with it (die_with_parent)
        self._settle()

    def _settle(self) -> None:
        """Wait until every worker has ended (the end of its pipe), then close this side's pipes."""
        self._results.join()
        self._first.join()
        for end in (*self._ends, self._announced):
            end.close()


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
        from ..engine.errors import InputError

        raise InputError(f"max_sentences must be at least 0 or None, not {max_sentences}")
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
            arguments = dict(weights=attention.checked_weights()[layer, head], words=attention.words, focus=sentence.focus,
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
            arguments = dict(weights=attention.checked_weights()[best[0], best[1], sentence.focus], words=attention.words,
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
    figures are skipped when there is no sense head. The HTML report holds every head, and its own number of
    sentences (report_sentences), whatever `max_sentences` is. Many figures are drawn by `workers` forked
    processes (None: one per CPU, when there are enough figures), or by `pool`, with a progress bar on stderr
    unless `quiet`; the bytes are the same either way.
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


def show_head(out_dir: Path, lang: str, layer: int, head: int, sentence: int | None, measure: str,
              formats: Sequence[str], *, quiet: bool = False) -> tuple[list[Path], str | None]:
    """`show`: draw one head of a finished run into OUT/figures/show/<lang>[-norm]/ (its own folder: `run`
    replaces figures/<lang>/ whole). -> (the paths written, a note about missing glyphs or None)."""
    from ..engine.measures import folder_suffix
    from .folders import run_folder_name
    from ..engine.errors import InputError
    from .readback import load_run, stored_head
    from .staging import WRITE_ERRNOS, OutputError, write_failure

    import shutil
    import tempfile

    folder = run_folder_name(lang) + folder_suffix(measure)
    run = load_run(Path(out_dir), run_folder_name(lang), measure)
    stored_head(run, layer, head, 1 if sentence is None else sentence)  # the indices, before anything is written
    target = Path(out_dir) / "figures" / "show" / folder
    for path in (target.parent.parent, target.parent, target):  # figures/, figures/show/, figures/show/<lang>/
        if path.is_symlink() and path != target.parent.parent:  # show's own folders: a link would lead outside --out
            raise InputError(f"{path} is a symbolic link; `show` writes its figures inside --out and will not follow "
                             "a link. Remove the link, or pass the folder it points to as --out")
        if path.exists() and not path.is_dir():
            raise InputError(f"{path} is a file, not a folder; `show` writes a folder there. Move the file away, or "
                             "choose another --out")
    staging: Path | None = None
    try:
        target.mkdir(parents=True, exist_ok=True)
        # drawn beside the target, then moved in once every figure is there: a failure leaves the earlier files
        staging = Path(tempfile.mkdtemp(prefix=".show-", dir=target))
        drawn = write_head_figures(staging, run, layer, head, sentence, formats, quiet=quiet)
        paths = [target / path.name for path in drawn]
        blocking = [path for path in paths if path.exists() and not path.is_file()]
        if blocking:
            raise OutputError(f"cannot write {blocking[0]}: a folder or other non-file is in its place; move it away")
        for path in drawn:
            os.replace(path, target / path.name)
    except OSError as error:  # the figures folder exists but cannot be written
        if error.errno in WRITE_ERRNOS:
            raise write_failure(error, target) from None
        raise
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return paths, font_note([str(word) for word in run.attention["query"].unique()])
