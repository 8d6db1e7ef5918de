"""What the docs promise about the command line and the server holds: each command's own `--measure` help, `--quiet`
on every command (serve included: no banner, warnings still shown), and a `/api/report` that says in HTTP terms
what it needs."""
from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import real_attention as ra
from real_attention.cli import cli
from real_attention.engine.measures import MEASURES

TEXTS = ["Me senté en el banco de mi jardín.", "Fui al banco a sacar dinero."]
MEASURED = ("run", "show", "heads", "syntax", "serve")


def measure_help(command: str) -> str:
    [param] = [param for param in cli.commands[command].params if param.name == "measure"]
    assert param.help
    return param.help


def test_every_command_that_takes_a_measure_explains_its_own():
    helps = {command: measure_help(command) for command in MEASURED}
    assert len(set(helps.values())) == len(MEASURED), "a command's --measure help is copied from another's"
    assert all(all(measure in text for measure in MEASURES) for text in helps.values()), helps
    assert "LANG-value-zeroing" in helps["run"]
    assert "read from results/LANG/" in helps["show"] and "figures/show/" in helps["show"]
    assert "results/corpus/NAME-norm/" in helps["heads"]
    assert "results/syntax/NAME-norm/" in helps["syntax"]
    assert "nothing is written" in helps["serve"] and "folder" not in helps["serve"]


def test_the_help_text_shows_each_commands_own_measure_help():
    for command in MEASURED:
        shown = " ".join(CliRunner().invoke(cli, [command, "--help"], terminal_width=200).output.split())
        assert "[weights|norm|value-zeroing]" in shown
        assert " ".join(measure_help(command).split()) in shown


def test_every_command_takes_quiet():
    for name, command in cli.commands.items():
        assert any("--quiet" in param.opts for param in command.params), f"{name} has no --quiet"


def test_serve_quiet_leaves_out_the_banner_but_not_the_warning(tiny_model_dir, monkeypatch):
    uvicorn = pytest.importorskip("uvicorn")
    pytest.importorskip("starlette")
    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)  # listen, then stop at once
    args = ["serve", "--model", str(tiny_model_dir), "--host", "0.0.0.0", "--port", "0"]
    loud = CliRunner().invoke(cli, args)
    assert loud.exit_code == 0, loud.output
    assert "Serving http://" in loud.stdout and "Warning: listening on 0.0.0.0" in loud.stderr
    quiet = CliRunner().invoke(cli, args + ["--quiet"])
    assert quiet.exit_code == 0, quiet.output
    # --port 0 lets the system choose: the one line that names the port stays, the rest of the banner goes
    (line,) = quiet.stdout.splitlines()
    assert line.startswith("Serving http://")
    assert "Warning: listening on 0.0.0.0" in quiet.stderr


def test_api_report_says_in_http_terms_what_it_needs(tiny_loaded):
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    body = {"texts": TEXTS}  # no focus, no sense: /api/attend gives the maps alone
    with TestClient(ra.app(tiny_loaded)) as client:
        assert client.post("/api/attend", json=body).status_code == 200
        answer = client.post("/api/report", json=body)
        whole = client.post("/api/report", json={**body, "focus": "banco", "sense": ["jardín", "dinero"]})
    assert answer.status_code == 422
    message = answer.json()["error"]
    assert '"focus"' in message and '"sense"' in message and "/api/attend" in message
    assert "ra.attend" not in message and "call " not in message
    assert whole.status_code == 200 and whole.text.startswith("<!DOCTYPE html>")


def test_serve_without_its_extra_is_one_error_line_before_the_model_loads(monkeypatch):
    """The README's first install has no [serve] extra: `serve` loaded the model, then crashed on `import uvicorn`."""
    import importlib.util

    from real_attention.api import api

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: None if name == "uvicorn"
                        else real_find_spec(name, *rest))
    monkeypatch.setattr(api, "load", lambda *args, **kwargs: pytest.fail("the model loaded"))
    result = CliRunner().invoke(cli, ["serve", "--model", "minilm"])
    assert result.exit_code == 1  # a missing package, as Dask's, pyarrow's, fsspec's: not the input's fault
    assert result.output.strip() == 'Error: serve needs uvicorn: pip install "real-attention[serve]"'
    import real_attention as ra

    with pytest.raises(ra.MissingPackage, match="serve needs uvicorn"):  # the API says so too, not ImportError
        ra.app("minilm")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: None if name == "pyarrow"
                        else real_find_spec(name, *rest))
    result = CliRunner().invoke(cli, ["run", "--model", "minilm", "--table-format", "parquet", "--out", "/nonexistent"])
    assert result.exit_code == 1 and result.output.strip() == (
        'Error: table_format (--table-format) parquet needs pyarrow: pip install "real-attention[parquet]"')


def test_heads_with_an_unknown_language_is_one_line_and_no_progress_bar(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("el banco .\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["heads", "--corpus", str(corpus), "--lang", "esp", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "Error: no pinned model for language 'esp' (pinned: en, es); pass model (--model) ID_OR_PATH"]
    assert not (tmp_path / "results").exists()


def test_syntax_takes_no_wait_as_every_writing_command_does():
    """docs/commands.md: every command that writes output folders waits for another run writing them, or with
    --no-wait stops with an error; syntax lacked the option."""
    for name in ("run", "heads", "merge", "syntax", "compare", "detect", "importance"):
        assert "no_wait" in {param.name for param in cli.commands[name].params}, name


def test_only_this_packages_warnings_become_warning_lines(capsys):
    """compare's note on left-out sentences is a Warning: line; a warning of torch or transformers keeps Python's
    form (it is not this tool's), even when its stacklevel points into this package's code, and Python's filters
    decide how often each is shown: ours once per place."""
    import warnings

    from real_attention import RealAttentionWarning
    from real_attention.cli import relayed_warnings
    from real_attention.engine import checks

    own = {"__name__": "real_attention.engine.checks", "__file__": checks.__file__,
           "RealAttentionWarning": RealAttentionWarning}
    with warnings.catch_warnings(record=True) as passed_on:  # what Python itself would show
        warnings.simplefilter("default")
        with relayed_warnings():
            for _ in range(3):  # one place, three times: shown once
                exec(compile("import warnings; warnings.warn('ours', RealAttentionWarning)", checks.__file__,
                             "exec"), own)
            warnings.warn_explicit("theirs", UserWarning, "/elsewhere/torch/x.py", 7)
            warnings.warn_explicit("theirs, from our line", UserWarning, checks.__file__, 7)
    err = capsys.readouterr().err
    assert err.count("Warning: ours") == 1
    assert [str(item.message) for item in passed_on] == ["theirs", "theirs, from our line"]
    assert "Warning: theirs" not in err


def test_our_warnings_stay_warning_lines_when_python_makes_warnings_errors(tmp_path):
    """With PYTHONWARNINGS=error a wait for another run's lock raised its warning as an exception: the command
    ended as a bug. The tool's own warnings are its messages, whatever the filters say."""
    import subprocess
    import sys

    script = ("import warnings\n"
              "from real_attention import RealAttentionWarning\n"
              "from real_attention.cli import relayed_warnings\n"
              "with relayed_warnings():\n"
              "    warnings.warn('waiting for another run', RealAttentionWarning)\n"
              "print('went on')\n")
    done = subprocess.run([sys.executable, "-W", "error", "-c", script], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "PYTHONWARNINGS": "error"})
    assert done.returncode == 0, done.stderr
    assert done.stdout == "went on\n" and done.stderr == "Warning: waiting for another run\n"


def test_every_entry_point_names_itself_real_attention():
    """`python real_attention.py --help` said "Usage: real_attention.py", `python -m` "Usage: python -m ..."."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    for command in ([sys.executable, "real_attention.py", "--help"], [sys.executable, "-m", "real_attention", "--help"]):
        done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stdout.startswith("Usage: real-attention [OPTIONS] COMMAND"), done.stdout


def test_detect_help_says_the_scores_add_every_earlier_occurrence():
    """The help still described the scores before they added every earlier copy: 'the token right after the current
    token's previous occurrence', 'duplicate (on that occurrence)'."""
    text = " ".join(CliRunner().invoke(cli, ["detect", "--help"]).output.split())
    assert "earlier occurrences, summed" in text and "previous occurrence" not in text
