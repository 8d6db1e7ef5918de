"""Every command that loads a model (run, heads --corpus, syntax, compare, detect, importance, serve) says what is loading, on stderr, before the model loads (issue 27.13)."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from real_attention import cli

SNIPPET = "1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n2\tbank\tbank\tNOUN\t_\t_\t0\troot\t_\t_\n\n"


def commands(model, tmp_path) -> dict[str, list[str]]:
    corpus = tmp_path / "lines.txt"
    corpus.write_text("el banco .\nfui al banco .\n", encoding="utf-8")
    treebank = tmp_path / "tiny.conllu"
    treebank.write_text(SNIPPET, encoding="utf-8")
    return {
        "run": ["run", "--model", model, "--out", str(tmp_path / "run"), "--no-figures", "--no-report"],
        "heads": ["heads", "--corpus", str(corpus), "--model", model, "--out", str(tmp_path / "heads"),
                  "--format", "svg"],
        "syntax": ["syntax", "--treebank", str(treebank), "--model", model, "--out", str(tmp_path / "syntax"),
                   "--min-count", "1"],
        "detect": ["detect", "--model", model, "--length", "5", "--samples", "2", "--repeats", "2", "--out",
                   str(tmp_path / "detect"), "--format", "svg"],
        "importance": ["importance", "--model", model, "--corpus", str(corpus), "--objective", "embedding",
                       "--prune-step", "0.5", "--out", str(tmp_path / "importance"), "--format", "svg"],
        "compare": ["compare", "--corpus", str(corpus), "--model", model, "--model", model, "--out",
                    str(tmp_path / "compare"), "--format", "svg"],
    }


@pytest.mark.parametrize("command", ["run", "heads", "syntax", "detect", "importance", "compare"])
def test_one_loading_line_on_stderr_unless_quiet(tiny_model_dir, tmp_path, command):
    args = commands(str(tiny_model_dir), tmp_path)[command]
    said = CliRunner().invoke(cli, args)
    assert said.exit_code == 0, said.output
    lines = [line for line in said.stderr.splitlines() if line.startswith("Loading ")]
    models = 2 if command == "compare" else 1  # compare loads each of its models in turn
    assert lines == [f"Loading {tiny_model_dir.name} ({tiny_model_dir} @ a local folder) on cpu\u2026"] * models
    assert "Loading " not in said.stdout
    quiet = CliRunner().invoke(cli, [*args, "--quiet"])
    assert quiet.exit_code == 0, quiet.output
    assert "Loading " not in quiet.stderr


def test_serve_says_it_before_it_listens(tiny_model_dir, monkeypatch):
    import real_attention.live.server as server

    seen = []
    monkeypatch.setattr(server, "serve", lambda loaded, **kwargs: seen.append(loaded))
    said = CliRunner().invoke(cli, ["serve", "--model", str(tiny_model_dir)])
    assert said.exit_code == 0, said.output
    assert said.stderr.startswith(f"Loading {tiny_model_dir.name} (") and len(seen) == 1
    quiet = CliRunner().invoke(cli, ["serve", "--model", str(tiny_model_dir), "--quiet"])
    assert quiet.exit_code == 0 and "Loading " not in quiet.stderr and len(seen) == 2
    # with --model, --lang only picks the page's example sentences (ra.load refuses both)
    english = CliRunner().invoke(cli, ["serve", "--model", str(tiny_model_dir), "--lang", "en", "--quiet"])
    assert english.exit_code == 0, english.output
    assert len(seen) == 3 and seen[-1].choice.path == tiny_model_dir


def test_the_line_names_a_pinned_model_and_its_revision():
    from real_attention.engine.models import ModelChoice, loading_line

    choice = ModelChoice("sentence-transformers/all-MiniLM-L6-v2", "c9745ed1d9f207416be6d2e6f8de32d1f16199bf", None)
    assert loading_line(choice, "cpu") == ("Loading all-MiniLM-L6-v2 (sentence-transformers/all-MiniLM-L6-v2 @ "
                                           "c9745ed1) on cpu\u2026")
