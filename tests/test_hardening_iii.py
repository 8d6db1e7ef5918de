"""Hardening, round three (issue 27): treebanks and shards that no run wrote, an overlong name, SIGTERM, and a
plain file where an output folder goes. Each case: one `Error:` line (or a clean stop), nothing touched."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import SPANISH
from real_attention import cli
from real_attention.outputs.staging import staged_outputs


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


def files_under(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"/"
            for p in sorted(folder.rglob("*"))} if folder.exists() else {}


# --- merge: numbers no run writes (item 7) ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def shards(tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("shards")
    corpus = folder / "c.txt"
    corpus.write_text("me senté en el banco.\nfui al banco.\nmi jardín.\n", encoding="utf-8")
    for index in (1, 2):
        assert invoke("heads", "--corpus", corpus, "--model", tiny_model_dir, "--out", folder, "--quiet",
                      "--shard", f"{index}/2").exit_code == 0
    return [folder / "results" / "corpus" / f"c-shard-{i}-of-2" for i in (1, 2)]


@pytest.mark.parametrize("field, text, message", [
    ("blank", "1" + "0" * 400, "field 'blank' is a number of 401 digits, more than any corpus can have"),
    ("sentences", str(2**60), "field 'sentences' is a number of 19 digits, more than any corpus can have"),
    ("uniform", "Infinity", "field 'uniform' is inf, not a whole number"),
    ("uniform", "1e400", "field 'uniform' is inf, not a whole number"),
])
def test_merge_refuses_absurd_or_non_finite_sums(field, text, message, shards, tmp_path):
    edited = tmp_path / shards[1].name
    edited.mkdir()
    for name in ("summary.json", "sums.json"):
        (edited / name).write_bytes((shards[1] / name).read_bytes())
    data = json.loads((edited / "sums.json").read_text())
    data[field] = "@@"
    (edited / "sums.json").write_text(json.dumps(data).replace('"@@"', text))
    result = invoke("merge", shards[0], edited, "--out", tmp_path / "merged")
    assert result.exit_code == 2, result.output
    line = error_line(result)
    assert line.startswith(f"Error: {edited / 'sums.json'}: {message}"), line
    assert not (tmp_path / "merged").exists()


def test_merge_still_takes_the_shards_as_written(shards, tmp_path):
    assert invoke("merge", *shards, "--out", tmp_path, "--quiet").exit_code == 0


# --- an overlong name (item 7) ---------------------------------------------------------------------------------


def test_an_overlong_lang_fails_before_the_model_loads(tiny_model_dir, tmp_path, monkeypatch):
    from real_attention.engine import models

    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("the model loaded"))
    lang = "x" * 300
    config = tmp_path / "c.toml"
    config.write_text(SPANISH.replace("[es]", f"[{lang}]").replace("es.sentences", f"{lang}.sentences"))
    result = invoke("run", "--lang", lang, "--config", config, "--model", tiny_model_dir, "--out", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert error_line(result) == (f"Error: lang (--lang) {'x' * 24!r}... is too long for a folder name: 300 bytes, at most "
                                  "128 (UTF-8); choose a shorter name")
    assert not (tmp_path / "out").exists()


def test_an_overlong_corpus_name_is_refused(tiny_model_dir, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("mi jardín.\n", encoding="utf-8")
    result = invoke("heads", "--corpus", corpus, "--name", "é" * 100, "--model", tiny_model_dir, "--out", tmp_path)
    assert result.exit_code == 2, result.output
    assert "is too long for a folder name: 200 bytes" in error_line(result)


# --- a plain file where an output folder goes (item 9) --------------------------------------------------------


@pytest.mark.parametrize("kind", ["results", "figures"])
def test_a_plain_file_where_the_output_folder_goes_is_refused_untouched(kind, tiny_model_dir, tmp_path, monkeypatch):
    from real_attention.engine import models

    monkeypatch.setattr(models, "load_model", lambda *a, **k: pytest.fail("the model loaded"))
    (tmp_path / kind).mkdir()
    (tmp_path / kind / "es").write_text("mine", encoding="utf-8")
    config = tmp_path / "c.toml"
    config.write_text(SPANISH, encoding="utf-8")
    before = files_under(tmp_path)
    result = invoke("run", "--config", config, "--model", tiny_model_dir, "--out", tmp_path)
    assert result.exit_code == 2, result.output
    assert error_line(result) == (f"Error: {tmp_path / kind / 'es'} is a file, not a folder; real-attention writes a "
                                  "folder there and will not replace a file. Move the file away, or choose another "
                                  "out (--out)")
    assert files_under(tmp_path) == before


def test_a_plain_file_where_a_corpus_folder_goes_is_refused_untouched(tiny_model_dir, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("mi jardín.\n", encoding="utf-8")
    (tmp_path / "results" / "corpus").mkdir(parents=True)
    (tmp_path / "results" / "corpus" / "c").write_text("mine", encoding="utf-8")
    before = files_under(tmp_path)
    result = invoke("heads", "--corpus", corpus, "--model", tiny_model_dir, "--out", tmp_path)
    assert result.exit_code == 2, result.output
    assert "is a file, not a folder" in error_line(result)
    assert files_under(tmp_path) == before


# --- SIGTERM is Ctrl-C (item 8) -------------------------------------------------------------------------------


def test_sigterm_inside_staged_outputs_discards_everything(tmp_path):
    target = tmp_path / "results" / "es"
    target.mkdir(parents=True)
    (target / "old.csv").write_text("old")
    before = files_under(tmp_path)
    with pytest.raises(KeyboardInterrupt) as caught, staged_outputs() as staging:
        (staging.folder(target) / "new.csv").write_text("new")
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL, "SIGTERM would end the process here"
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(5)  # the handler interrupts this
        pytest.fail("SIGTERM did not stop the block")
    assert type(caught.value).__name__ == "Terminated"
    assert files_under(tmp_path) == before
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the default action is back


@pytest.mark.parametrize("number, name", [(signal.SIGTERM, "Terminated"), (signal.SIGINT, "KeyboardInterrupt")])
def test_a_signal_a_finalizer_swallowed_still_keeps_the_results_out(tmp_path, number, name):
    """A handler runs in whatever frame is executing; inside a __del__ its exception is only printed ("Exception
    ignored in ...") and the run went on to put its results in place, exit 0 (seen once in CI, in regex's)."""
    class Finalized:
        def __del__(self):
            signal.getsignal(number)(number, None)  # the handler, where the signal would have run it

    target = tmp_path / "results" / "es"
    with pytest.raises(KeyboardInterrupt) as caught, staged_outputs() as staging:
        (staging.folder(target) / "new.csv").write_text("new")
        Finalized()  # collected at once: the handler's exception is swallowed
    assert type(caught.value).__name__ == name
    assert not target.exists()


def test_a_ctrl_c_the_caller_caught_lets_a_later_staging_commit(tmp_path):
    """Only a swallowed signal is raised again: one a caller caught and answered must not stop later writes."""
    from real_attention.outputs.staging import sigterm_as_interrupt

    with sigterm_as_interrupt():
        try:
            signal.getsignal(signal.SIGINT)(signal.SIGINT, None)
        except KeyboardInterrupt:
            pass
        with staged_outputs() as staging:
            (staging.folder(tmp_path / "results" / "es") / "new.csv").write_text("new")
    assert (tmp_path / "results" / "es" / "new.csv").read_text() == "new"


def test_a_swallowed_sigterm_ends_the_command_with_143(tmp_path, monkeypatch):
    import real_attention.lesson.numbers as lesson_numbers

    compute = lesson_numbers.compute_lesson

    class Finalized:
        def __del__(self):
            signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)

    def swallowed():
        Finalized()
        return compute()

    monkeypatch.setattr(lesson_numbers, "compute_lesson", swallowed)
    result = CliRunner().invoke(cli, ["lesson", "--out", str(tmp_path / "out")])
    assert result.exit_code == 143 and result.output.strip().splitlines()[-1] == "Terminated.", result.output
    assert not (tmp_path / "out" / "results").exists()


def sigterm_after(function):
    """`function`, then a SIGTERM to this process (as `kill` would send it the moment the result is on disk)."""
    def then_sigterm(*args, **kwargs):
        result = function(*args, **kwargs)
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL, "SIGTERM would end the process here"
        os.kill(os.getpid(), signal.SIGTERM)
        return result
    return then_sigterm


@pytest.mark.parametrize("what", ["staging folder", "lock file"])
def test_a_sigterm_the_moment_a_staging_folder_or_lock_file_appears_leaves_neither(what, tmp_path, monkeypatch):
    """The folder (the lock) is made and recorded with signals held: a SIGTERM between the two left it behind."""
    from real_attention.outputs import staging as staging_module

    if what == "staging folder":
        monkeypatch.setattr(staging_module.tempfile, "mkdtemp", sigterm_after(staging_module.tempfile.mkdtemp))
    else:
        monkeypatch.setattr(staging_module.FolderLock, "acquire", sigterm_after(staging_module.FolderLock.acquire))
    target = tmp_path / "out" / "results" / "es"
    with pytest.raises(KeyboardInterrupt) as caught, staged_outputs() as staging:
        staging.folder(target)
        time.sleep(5)  # not reached: the held SIGTERM is handled as the signals are let through
        pytest.fail("SIGTERM did not stop the block")
    assert type(caught.value).__name__ == "Terminated"
    assert not (tmp_path / "out").exists()  # nor the empty folders the staging made for it


def test_sigterm_mid_run_leaves_nothing_behind_and_the_old_results_untouched(tiny_model_dir, tmp_path):
    out = tmp_path / "out"
    old = out / "results" / "es"
    old.mkdir(parents=True)
    (old / "summary.json").write_text('{"earlier": true}\n')
    # enough sentences that the run is still going when the signal comes
    sentences = "".join(f'[[es.sentences]]\ntext = "Me senté en el banco de mi jardín {i}."\nsense = "jardín"\n'
                        for i in range(3000))
    config = tmp_path / "c.toml"
    config.write_text('[es]\nfocus = "banco"\n' + sentences, encoding="utf-8")
    before = files_under(out)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    process = subprocess.Popen([sys.executable, "-m", "real_attention", "run", "--config", str(config), "--model",
                                str(tiny_model_dir), "--out", str(out), "--no-figures", "--no-report", "--quiet"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 120
        while not list((out / "results").glob(".es.staging-*")):
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "no staging folder appeared"
            time.sleep(0.01)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 128 + signal.SIGTERM, stderr.decode()
    assert stderr.decode().strip().splitlines()[-1] == "Terminated.", stderr.decode()
    assert "Traceback" not in stderr.decode()
    assert files_under(out) == before  # no .es.staging-*, no .es.lock, results/es as it was
