"""Write output folders all at once: stage them beside their targets, then swap them in by renaming.

Each target folder (results/es, figures/es, ...) has a lock file beside it (`.es.lock`), held from the moment
its staging folder is made until the swap. So two runs writing the same folder take turns: the second waits
(with a message) or, with `wait=False`, stops with one error line. While a target's lock is held, any other
`.es.staging-*` or `.es.old-*` folder beside it belongs to a run that died (`kill -9`, a power cut), and is
removed.

What a reader may see: each folder is swapped in by one rename, so a reader of results/es sees the old folder
or the new one, never a mix inside it. The folders of one run are swapped one after another (results first,
then figures), so for a moment results/es can be new while figures/es is still old.
"""
from __future__ import annotations

import errno
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from ..engine.errors import InputError, OutputError, RealAttentionError, RealAttentionWarning
from .folders import plain_folder_name

__all__ = ["OutputError", "Staging", "Terminated", "plain_folder_name", "sigterm_as_interrupt", "staged_outputs",
           "write_failure"]

LOCK_POLL_SECONDS = 0.1  # how often a run that waits for another run's lock tries again

# Errors of the disk, not of the input or the code: a full disk, a file too large, a read-only or forbidden folder.
# A folder where a file goes (or a file where a folder goes) is one too: the path cannot be written.
WRITE_ERRNOS = {errno.ENOSPC, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.EDQUOT, errno.ENAMETOOLONG,
                errno.EISDIR, errno.ENOTDIR}


def write_failure(error: OSError, where: Path | str | None = None) -> OutputError:
    """One OutputError naming the path and the cause of a failed write."""
    path = error.filename or where
    cause = error.strerror or str(error)
    space = " (or free some space)" if error.errno in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT) else ""
    return OutputError(f"cannot write to {path}: {cause}. Choose a writable folder as out (--out){space}.")


class Staging:
    """Collects staged folders; `commit` renames each over its target, `discard` removes them.

    A target given to `remove` is deleted on commit: a folder that must hold exactly what this run wrote,
    when this run writes nothing there. After commit, `leftovers` lists old folders that could not be deleted
    (each named with the reason), for the caller to report: nothing is left behind silently.

    A target another run holds is waited for (`wait`), saying so once through `on_wait`, or as a UserWarning
    without it; with wait=False it is an OutputError.
    """

    def __init__(self, *, wait: bool = True, on_wait: Callable[[str], None] | None = None,
                 inputs: Sequence[str | Path] = ()) -> None:
        self._inputs = tuple(inputs)  # the files the run reads: none may lie inside a target
        self._staged: list[tuple[Path | None, Path]] = []  # (staging folder or None to remove, target)
        self._locks: dict[Path, FolderLock] = {}  # target -> its held FileLock
        self._made: list[Path] = []  # the folders above the targets this run created (results/, ...), deepest last
        self._wait = wait
        self._on_wait = on_wait
        self.leftovers: list[str] = []

    def _lock(self, target: Path) -> None:
        """Hold target's lock until commit or discard; then remove what dead runs left beside it."""
        if target in self._locks:
            return
        lock = FolderLock(target.with_name(f".{target.name}.lock"))
        if not self._take(target, lock):
            if not self._wait:
                raise OutputError(f"another real-attention run is writing {target}; wait for it to finish, or run "
                                  "again without --no-wait (in Python: wait=True) to wait for it")
            message = f"waiting for another real-attention run that is writing {target} ..."
            if self._on_wait is not None:
                self._on_wait(message)
            else:  # never a silent wait: the command line shows it as a `Warning:` line
                warnings.warn(message, RealAttentionWarning, stacklevel=1)
            while not self._take(target, lock):  # Ctrl-C and SIGTERM end the wait between tries
                time.sleep(LOCK_POLL_SECONDS)
        for stale in [*target.parent.glob(f".{target.name}.staging-*"), *target.parent.glob(f".{target.name}.old-*")]:
            if not any(stale == staged for staged, _ in self._staged):
                remove_tree(stale, ignore_errors=True)

    def _take(self, target: Path, lock: FolderLock) -> bool:
        """One try at target's lock; held, it is ours to release before a Ctrl-C or SIGTERM can come between the
        lock file's creation and the record of it (which would leave the file behind)."""
        with _signals_held():
            taken = lock.acquire(block=False)
            if taken:
                self._locks[target] = lock
        return taken

    def folder(self, target: str | Path) -> Path:
        """A fresh, empty staging folder that will become `target` on commit."""
        target = Path(target)
        try:
            missing = [folder for folder in [target.parent, *target.parent.parents] if not folder.exists()]
            target.parent.mkdir(parents=True, exist_ok=True)
            self._made += [folder for folder in reversed(missing) if folder not in self._made]
            check_replaceable(target)
            check_inputs_outside(target, self._inputs)
            self._lock(target)
            with _signals_held():  # made and recorded at once: a Ctrl-C or SIGTERM between would leave it behind
                staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.staging-", dir=target.parent))
                self._staged.append((staging, target))
            staging.chmod(0o755)
        except RealAttentionError:
            raise
        except OSError as error:
            raise OutputError(
                f"cannot write to {target.parent}: {error.strerror or error}. Choose a writable folder as out (--out)."
            ) from None
        return staging

    def where(self) -> Path | None:
        """The folder that holds every target (the --out folder, or below it), to name in an error."""
        targets = [str(target) for _, target in self._staged]
        return Path(os.path.commonpath(targets)) if targets else None

    def staged(self, target: str | Path) -> Path:
        """The staging folder already made for `target`."""
        target = Path(target)
        for staging, staged_target in self._staged:
            if staged_target == target and staging is not None:
                return staging
        raise KeyError(target)

    def remove(self, target: str | Path) -> None:
        """Delete `target` on commit, if it exists."""
        target = Path(target)
        check_replaceable(target)
        check_inputs_outside(target, self._inputs)
        try:
            self._lock(target)
        except OSError:  # a folder that cannot even hold a lock file has nothing of ours to remove
            pass
        self._staged.append((None, target))

    def commit(self) -> None:
        raise_if_signalled()  # a Ctrl-C or SIGTERM a finalizer swallowed: nothing goes in place
        for staging, target in self._staged:
            backup = None
            with _signals_held():  # the two renames: both or neither
                if target.exists():
                    backup = target.with_name(f".{target.name}.old-{os.getpid()}")
                    try:
                        os.rename(target, backup)
                    except OSError as error:
                        raise OutputError(f"cannot replace {target}: {error.strerror or error}") from None
                if staging is not None:
                    os.rename(staging, target)
            if backup is not None:
                problems: list[str] = []
                remove_tree(backup, problems=problems)
                if backup.exists():
                    reason = problems[0] if problems else "unknown reason"
                    self.leftovers.append(f"could not delete the old {target} (moved to {backup}; {reason}); "
                                          "delete it by hand")
        self._staged.clear()
        self._release()

    def discard(self) -> None:
        for staging, _ in self._staged:
            if staging is not None:
                remove_tree(staging, ignore_errors=True)
        self._staged.clear()
        self._release()
        for folder in reversed(self._made):  # a failed run leaves no empty results/ or figures/ it made
            try:
                folder.rmdir()
            except OSError:  # not empty (another run's files), or gone
                pass
        self._made.clear()

    def _release(self) -> None:
        for lock in self._locks.values():
            lock.release()
        self._locks.clear()


class FolderLock:
    """An exclusive lock on a file (`.es.lock`) that exists only while someone holds it.

    flock(2) on the file; the holder removes the file before unlocking. A waiter that wakes up holding the lock
    of a file that is no longer at the path (removed by the last holder) lets go and tries again, so the lock
    file never outlives the runs and no two runs ever hold the lock of one path at once.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, *, block: bool) -> bool:
        import fcntl

        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
            except BlockingIOError:
                os.close(fd)
                return False
            except BaseException:
                os.close(fd)
                raise
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                self._fd = fd
                return True
            os.close(fd)  # the last holder removed this file: lock the one at the path now

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            os.unlink(self.path)
        except OSError:
            pass
        os.close(self._fd)  # closing unlocks
        self._fd = None


def check_replaceable(target: Path) -> None:
    """A target that is a symbolic link is refused: the swap would replace the link, not the folder it names. So
    is one that is there but no folder (a plain file, a device, a pipe): it is not ours to replace. A path that
    cannot even be looked at (a name too long, a folder that may not be searched) is an OutputError, as the
    write would be."""
    target = Path(target)
    try:
        _check_replaceable(target)
    except RealAttentionError:
        raise
    except OSError as error:
        raise write_failure(error, target) from None


def _check_replaceable(target: Path) -> None:
    if target.is_symlink():
        raise InputError(f"{target} is a symbolic link; real-attention replaces its output folders whole and will "
                         "not replace a link. Remove the link, or pass the folder it points to as out (--out)")
    if target.exists() and not target.is_dir():
        raise InputError(f"{target} is a file, not a folder; real-attention writes a folder there and will not "
                         "replace a file. Move the file away, or choose another out (--out)")
    below = target
    for parent in target.parents:  # the nearest one that is there must be a folder to write inside
        if parent.exists():
            if not parent.is_dir():  # the path cannot be written (ENOTDIR), as a read-only folder cannot: exit 1
                raise OutputError(f"cannot write to {below}: {parent} is a file, not a folder. Move the file away, "
                                  "or choose a writable folder as out (--out).")
            break
        below = parent


def check_targets(targets, inputs=()) -> None:
    """check_replaceable for each target, before any work: an error for the first a run could not replace; and
    check_inputs_outside for the files the run reads."""
    for target in targets:
        check_replaceable(Path(target))
        check_inputs_outside(Path(target), inputs)


def check_inputs_outside(target: Path, inputs) -> None:
    """InputError if an input file (a config, a corpus, a treebank, a shard) lies inside `target`: the swap
    replaces the folder whole, so the input would be deleted with the old results. stdin ("-") and URLs are
    never inside."""
    where = Path(os.path.realpath(target))
    for name in inputs:
        if name is None or str(name) == "-" or "://" in str(name):
            continue
        path = Path(os.path.realpath(name))
        if path == where or where in path.parents:
            raise InputError(f"{name} lies inside {target}, which this command replaces whole (its old files are "
                             "deleted): move it out of there, or choose another out (--out) or name (--name)")


def remove_tree(path: Path, *, ignore_errors: bool = False, problems: list[str] | None = None) -> None:
    """shutil.rmtree that collects its problems instead of raising (unless asked to ignore them)."""
    if ignore_errors:
        shutil.rmtree(path, ignore_errors=True)
        return
    sink = problems if problems is not None else []
    if sys.version_info >= (3, 12):  # onerror is deprecated there; onexc does not exist before
        shutil.rmtree(path, onexc=lambda _function, failed, error: sink.append(f"{failed}: {error}"))
    else:
        shutil.rmtree(path, onerror=lambda _function, failed, info: sink.append(f"{failed}: {info[1]}"))


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived (`kill`, `timeout`, systemd, docker stop): handled as Ctrl-C is, so every staged folder is
    removed, every lock released and the earlier results stay as they were."""


# The Ctrl-C and SIGTERM exceptions that a finalizer swallowed. A signal handler runs in whatever frame is executing;
# raised inside a __del__ (or a weakref or GC callback), its exception is only reported to sys.unraisablehook
# ("Exception ignored in ...") and the run would go on and write its results. sigterm_as_interrupt's hook keeps them;
# the commit and the command's end raise them again (raise_if_signalled). One a caller caught is not among them.
_SWALLOWED: list[type[KeyboardInterrupt]] = []  # the kinds only: the exception's traceback holds the finalized object


def raise_if_signalled() -> None:
    """Raise again a Ctrl-C or SIGTERM (Terminated) whose exception a finalizer swallowed inside
    sigterm_as_interrupt; nothing if none was."""
    if _SWALLOWED:
        swallowed = _SWALLOWED[-1]
        _SWALLOWED.clear()
        raise Terminated() if issubclass(swallowed, Terminated) else KeyboardInterrupt()


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM raises Terminated (a KeyboardInterrupt) in this process, as Ctrl-C would.

    Only where Python lets a handler be set (the main thread) and only over the default action (a handler the
    program set stays). A process forked meanwhile (a drawing worker) inherits the handler: there it falls back to
    the default action, so the worker simply ends, as before. A Ctrl-C or SIGTERM that a finalizer swallows is kept
    for raise_if_signalled, not printed.
    """
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    owner = os.getpid()

    def terminate(number, _frame) -> None:
        if os.getpid() != owner:  # a forked child: die as SIGTERM would have made it
            signal.signal(number, signal.SIG_DFL)
            os.kill(os.getpid(), number)
            return
        raise Terminated()

    previous_hook = sys.unraisablehook

    def keep_swallowed(unraisable) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and os.getpid() == owner:
            _SWALLOWED.append(type(unraisable.exc_value))
        else:
            previous_hook(unraisable)

    _SWALLOWED.clear()
    signal.signal(signal.SIGTERM, terminate)
    sys.unraisablehook = keep_swallowed
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        sys.unraisablehook = previous_hook
        _SWALLOWED.clear()


@contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C and SIGTERM wait until the block is done (on the main thread, where Python runs signal handlers): a
    swap of a target for its staged folder is never left half done, and a folder or lock file is never made
    without being recorded. Held in Python, not with pthread_sigmask: a signal sent to the process goes to any
    thread that does not block it (torch's, the reader's), and its Python handler still runs on the main thread at
    once. A signal that came meanwhile is handled, by the handler it would have met, as the block ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    for number in previous:
        signal.signal(number, lambda number, _frame: arrived.append(number))
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for came in dict.fromkeys(arrived):  # each signal once, in the order they came
            handler = previous[signal.Signals(came)]
            if callable(handler):
                handler(came, None)  # Ctrl-C's KeyboardInterrupt, SIGTERM's Terminated
            elif handler != signal.SIG_IGN:
                signal.raise_signal(came)  # the default action, or a handler set outside Python


@contextmanager
def staged_outputs(*, wait: bool = True, on_wait: Callable[[str], None] | None = None,
                   inputs: Sequence[str | Path] = ()) -> Iterator[Staging]:
    """Everything written into the staged folders lands only if the block finishes; else nothing does, also
    when the process gets Ctrl-C or SIGTERM (sigterm_as_interrupt).

    A disk error while writing (no space, a file too large, a read-only or forbidden folder) becomes one
    OutputError naming the path and the cause. `wait`/`on_wait`: see Staging.
    """
    staging = Staging(wait=wait, on_wait=on_wait, inputs=inputs)
    with sigterm_as_interrupt():  # SIGTERM, like Ctrl-C, leaves no partial files
        try:
            yield staging
        except OSError as error:
            where = staging.where()
            staging.discard()
            if error.errno in WRITE_ERRNOS and not isinstance(error, RealAttentionError):
                raise write_failure(error, where) from None
            raise
        except BaseException:  # Ctrl-C included: leave no partial files
            staging.discard()
            raise
        try:
            staging.commit()
        except BaseException:
            staging.discard()  # the targets not yet swapped in keep their old contents
            raise
