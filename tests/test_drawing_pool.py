"""The drawing pool (forked workers: the first forks the others): a dead worker is one error, Ctrl-C is left to the
main process, workers die with their parent. No sleeps and no private attributes: the pool says its workers'
pids (DrawingPool.pids), and a process's end is awaited through a pidfd."""
import os
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import SPANISH
from real_attention import cli
from real_attention.engine.errors import OutputError
from real_attention.outputs import plots
from real_attention.outputs.drawing import Drawing, DrawingPool, _draw_job

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forked workers, pidfd: Linux")


def ended(pid: int, timeout: float) -> bool:
    """Whether process `pid` ends within `timeout` seconds (a pidfd turns readable when it does)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout)[0])
    finally:
        os.close(fd)


def ignores(pid: int, signum: int) -> bool:
    """Whether process `pid` ignores a signal, from the kernel's own record (/proc/PID/status SigIgn)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigIgn:"):
            return bool(int(line.split()[1], 16) & (1 << (signum - 1)))
    raise AssertionError("no SigIgn line")


def _pid_job(*job):
    return [os.getpid()]


def _blocking_job(*job):
    threading.Event().wait()  # until the pool ends this worker
    return []


def test_the_pool_says_its_workers_pids_and_runs_jobs_in_them(tmp_path, monkeypatch):
    monkeypatch.setattr(plots, "draw_and_save", _pid_job)  # before the fork: the workers have it
    with DrawingPool(2) as pool:
        pids = pool.pids()
        assert len(pids) == 2 and os.getpid() not in pids
        ran = [pid for saved in pool.imap([("heatmap", {}, tmp_path, "a", ("png",))] * 6) for pid in saved]
        assert set(ran) <= set(pids)
    assert all(ended(pid, 30) for pid in pids)


def test_drawing_workers_leave_ctrl_c_to_the_main_process(tmp_path, monkeypatch):
    monkeypatch.setattr(plots, "draw_and_save", _pid_job)
    with DrawingPool(2) as pool:
        pids = pool.pids()  # each has set its signals before it says its pid
        assert all(ignores(pid, signal.SIGINT) for pid in pids)
        for pid in pids:
            os.kill(pid, signal.SIGINT)
        assert len(list(pool.imap([("heatmap", {}, tmp_path, "a", ("png",))] * 4))) == 4  # they still draw
        assert not any(ended(pid, 0) for pid in pids)


def test_a_drawing_worker_that_dies_is_one_error_not_a_wait_for_ever(tmp_path, monkeypatch):
    monkeypatch.setattr(plots, "draw_and_save", _blocking_job)
    jobs = [("heatmap", {}, tmp_path, f"job{i}", ("png",)) for i in range(6)]
    with pytest.raises(OutputError, match="a drawing process died before it finished"):
        with DrawingPool(2) as pool:
            pids = pool.pids()
            drawing = Drawing(jobs, pool=pool)
            os.kill(pids[0], signal.SIGKILL)
            drawing.wait(quiet=True)
    assert all(ended(pid, 30) for pid in pids)  # the other one, stuck in its job, was ended too


def test_ctrl_c_while_the_pool_waits_for_its_figures_ends_the_workers(tmp_path, monkeypatch):
    """An interrupt that arrives in close() (the figures still drawing) ended the command with its workers alive,
    and multiprocessing then waited for them at exit, for ever."""
    import concurrent.futures

    def interrupted(futures, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(plots, "draw_and_save", _blocking_job)
    with pytest.raises(KeyboardInterrupt):
        with DrawingPool(2) as pool:
            pids = pool.pids()
            pool.submit(_draw_job, ("heatmap", {}, tmp_path, "a", ("png",)))
            monkeypatch.setattr(concurrent.futures, "wait", interrupted)  # close() waits through it
    assert all(ended(pid, 30) for pid in pids)


def test_a_worker_whose_warm_up_fails_still_takes_jobs(tmp_path, monkeypatch):
    """An initializer that raised would break the whole pool."""
    def broken():
        raise RuntimeError("no backend")

    monkeypatch.setattr(plots, "warm_up", broken)
    monkeypatch.setattr(plots, "draw_and_save", _pid_job)
    with DrawingPool(2) as pool:
        pids = pool.pids()
        ran = [pid for saved in pool.imap([("heatmap", {}, tmp_path, "a", ("png",))] * 3) for pid in saved]
        assert set(ran) <= set(pids) and not any(ended(pid, 0) for pid in pids)


def test_workers_die_with_their_parent():
    """kill -9 of the process that started the pool: the kernel ends its workers too (PR_SET_PDEATHSIG)."""
    code = ("import sys\n"
            "from real_attention.outputs.drawing import DrawingPool\n"
            "pool = DrawingPool(2)\n"
            "print(*pool.pids(), flush=True)\n"
            "sys.stdin.read()\n")
    parent = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True, cwd=ROOT)
    try:
        pids = [int(pid) for pid in parent.stdout.readline().split()]
        assert len(pids) == 2
        parent.kill()
        parent.wait(timeout=30)
        assert all(ended(pid, 30) for pid in pids)
    finally:
        parent.kill()
        parent.stdin.close()
        parent.stdout.close()


def _kill_self(*job):
    os.kill(os.getpid(), signal.SIGKILL)


def test_a_dead_worker_is_one_error_line_from_the_command(tmp_path, tiny_model_dir, monkeypatch):
    from real_attention.outputs import drawing

    monkeypatch.setattr(drawing, "cpu_count", lambda: 2)  # a pool, whatever this machine has
    main = os.getpid()
    monkeypatch.setattr(plots, "draw_and_save", lambda *job: _kill_self() if os.getpid() != main else [])
    config = tmp_path / "c.toml"
    config.write_text(SPANISH, encoding="utf-8")
    result = CliRunner().invoke(cli, ["run", "--model", str(tiny_model_dir), "--config", str(config),
                                      "--out", str(tmp_path), "--no-report", "--quiet"])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: a drawing process died before it finished")
    assert len(result.output.strip().splitlines()) == 1
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == [config]  # nothing written


def test_corpus_figures_drawn_by_the_workers_are_the_bytes_drawn_in_process(tmp_path, tiny_model_dir, monkeypatch):
    """heads --corpus starts two drawing workers before it loads the model (they import matplotlib meanwhile) and
    hands them its two figures: the same bytes as the figures drawn in this process."""
    from real_attention.outputs import corpus_files

    corpus = tmp_path / "c.txt"
    corpus.write_text("i sat on the bank .\nthe end of the garden\n", encoding="utf-8")
    args = ["heads", "--corpus", str(corpus), "--model", str(tiny_model_dir), "--quiet", "--format", "png", "--format", "svg"]
    submitted = []
    real_submit = DrawingPool.submit

    def counted(pool, function, *arguments):
        submitted.append(function)
        return real_submit(pool, function, *arguments)

    monkeypatch.setattr(DrawingPool, "submit", counted)
    assert CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "pool")]).exit_code == 0
    assert submitted == [corpus_files._save_figure] * 4  # two figures, two formats
    monkeypatch.setattr(DrawingPool, "start", classmethod(lambda cls, workers=None: None))
    assert CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "here")]).exit_code == 0
    drawn = {p.relative_to(tmp_path / "pool"): p.read_bytes() for p in (tmp_path / "pool").rglob("*") if p.is_file()}
    here = {p.relative_to(tmp_path / "here"): p.read_bytes() for p in (tmp_path / "here").rglob("*") if p.is_file()}
    assert len([p for p in drawn if p.suffix in (".png", ".svg")]) == 4 and drawn == here
