"""Second hardening pass: each command keeps to its own folders, runs on one --out take turns, what a dead run
left is cleaned, links are refused, disk errors are one line, and ra.run writes what `run` writes."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SPANISH, error_line, invoke

REPO = Path(__file__).resolve().parents[1]




def tree(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def corpus_file(folder: Path) -> Path:
    path = folder / "wiki.txt"
    path.write_text("I sat on the bank.\nI went to the bank to get some money.\n", encoding="utf-8")
    return path


# --- every pair of commands ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["corpus", "lesson", "syntax", "show", "Corpus", "LESSON"])
def test_run_refuses_every_folder_another_command_owns(name, tiny_model_dir, tmp_path):
    from real_attention.outputs.folders import OWNED

    assert name.casefold() in OWNED
    owned = tmp_path / "results" / name.casefold() / "keep"
    owned.mkdir(parents=True)
    (owned / "file.txt").write_text("mine", encoding="utf-8")
    result = invoke("run", "--model", tiny_model_dir, "--lang", name, "--out", tmp_path, "--no-figures", "--no-report")
    assert result.exit_code == 2
    assert f"lang (--lang) {name!r} names the folder that" in error_line(result)
    assert (owned / "file.txt").read_text(encoding="utf-8") == "mine"


def test_every_command_leaves_the_others_results_alone(tiny_model_dir, tmp_path):
    """run, lesson, heads --corpus (two shards), merge and show in one --out: after each, every folder an
    earlier command wrote is byte for byte as it was."""
    config = tmp_path / "c.toml"
    config.write_text(SPANISH.replace("[es]", "[corpus2]").replace("es.sentences", "corpus2.sentences"),
                      encoding="utf-8")
    text = corpus_file(tmp_path)
    out = tmp_path / "out"
    steps = [
        ("run", "--model", tiny_model_dir, "--out", out, "--quiet"),
        ("run", "--model", tiny_model_dir, "--lang", "corpus2", "--config", config, "--out", out, "--no-figures",
         "--quiet"),
        ("lesson", "--out", out, "--quiet"),
        ("heads", "--corpus", text, "--model", tiny_model_dir, "--out", out, "--quiet"),
        ("heads", "--corpus", text, "--model", tiny_model_dir, "--out", out, "--shard", "1/2", "--quiet"),
        ("heads", "--corpus", text, "--model", tiny_model_dir, "--out", out, "--shard", "2/2", "--quiet"),
        ("merge", out / "results/corpus/wiki-shard-1-of-2", out / "results/corpus/wiki-shard-2-of-2",
         "--out", tmp_path / "merged", "--quiet"),
        ("show", "--out", out, "--layer", 1, "--head", 2, "--quiet"),
    ]
    written: dict[str, dict[str, bytes]] = {}
    for step in steps:
        result = invoke(*step)
        assert result.exit_code == 0, (step, result.output)
        for folder, before in written.items():
            assert tree(out / folder) == before, (step, folder)
        for top in ("results", "figures"):
            for folder in sorted((out / top).glob("*")):
                for sub in ([folder] if folder.name not in ("corpus", "show", "syntax") else folder.glob("*")):
                    written.setdefault(str(sub.relative_to(out)), tree(sub))
    assert {"results/es", "results/corpus2", "results/lesson", "results/corpus/wiki", "figures/show/es",
            "results/corpus/wiki-shard-1-of-2"} <= set(written)


@pytest.mark.parametrize("name", ["../lesson", "..", ".hidden", "a/b", "x\x01"])
def test_a_corpus_name_never_leaves_its_folder(name, tiny_model_dir, tmp_path):
    result = invoke("heads", "--corpus", corpus_file(tmp_path), "--model", tiny_model_dir, "--name", name,
                    "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert "cannot be a folder name" in error_line(result)
    assert not (tmp_path / "out").exists()


# --- two runs on one --out ---------------------------------------------------------------------------------

def test_lesson_takes_no_wait_as_every_writing_command_does(tmp_path):
    from real_attention.outputs.staging import FolderLock

    (tmp_path / "results").mkdir()
    lock = FolderLock(tmp_path / "results" / ".lesson.lock")
    assert lock.acquire(block=False)
    try:
        refused = invoke("lesson", "--out", tmp_path, "--no-wait")
    finally:
        lock.release()
    assert refused.exit_code == 1 and error_line(refused).startswith(
        f"Error: another real-attention run is writing {tmp_path / 'results' / 'lesson'}; ")
    assert not (tmp_path / "results" / "lesson").exists()


def test_a_second_run_waits_or_with_no_wait_stops(tiny_model_dir, tmp_path):
    import real_attention as ra
    from real_attention.outputs.staging import FolderLock

    (tmp_path / "results").mkdir()
    lock = FolderLock(tmp_path / "results" / ".es.lock")
    assert lock.acquire(block=False)
    refused = invoke("run", "--model", tiny_model_dir, "--out", tmp_path, "--no-figures", "--no-report", "--no-wait")
    assert refused.exit_code == 1
    assert error_line(refused) == (f"Error: another real-attention run is writing {tmp_path / 'results' / 'es'}; "
                                   "wait for it to finish, or run again without --no-wait (in Python: wait=True) to wait for it")
    assert not (tmp_path / "results" / "es").exists()

    messages: list[str] = []

    def other_run_finishes(message: str) -> None:  # called once this run starts waiting
        messages.append(message)
        lock.release()

    output = ra.run(model=str(tiny_model_dir), out=tmp_path, figures=False, report=False, progress=other_run_finishes)
    assert messages == [f"waiting for another real-attention run that is writing {tmp_path / 'results' / 'es'} ..."]
    assert (output.runs[0].results_dir / "heads.csv").is_file()
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["es"]  # the lock file went with the lock


@pytest.mark.parametrize("command", ["detect", "lesson"])
def test_every_command_says_when_it_waits_for_another_run(tiny_model_dir, tmp_path, monkeypatch, command):
    # only `run` used to say so; the others waited in silence, which looks like a hang
    import types

    import real_attention.outputs.staging as staging
    from real_attention.outputs.staging import FolderLock

    folder = tmp_path / "results" / ("detect" if command == "detect" else "")
    folder.mkdir(parents=True)
    lock = FolderLock(folder / (".tiny.lock" if command == "detect" else ".lesson.lock"))
    assert lock.acquire(block=False)
    waits: list[float] = []

    def other_run_finishes(seconds: float) -> None:  # the first poll of the wait
        waits.append(seconds)
        lock.release()

    monkeypatch.setattr(staging, "time", types.SimpleNamespace(sleep=other_run_finishes))
    options = (["--model", str(tiny_model_dir), "--length", "5", "--samples", "2", "--repeats", "2",
                "--name", "tiny"] if command == "detect" else [])
    result = invoke(command, *options, "--out", tmp_path, "--quiet")
    assert result.exit_code == 0, result.output
    target = folder / ("tiny" if command == "detect" else "lesson")
    assert f"Warning: waiting for another real-attention run that is writing {target} ...\n" in result.stderr
    assert len(waits) == 1 and any(target.iterdir())


def test_what_a_killed_run_left_is_removed_by_the_next(tiny_model_dir, tmp_path):
    results = tmp_path / "results"
    for stale in (".es.staging-k1llx", ".es.old-99999", ".es-norm.staging-other"):
        (results / stale).mkdir(parents=True)
        (results / stale / "attention.csv").write_text("x", encoding="utf-8")
    result = invoke("run", "--model", tiny_model_dir, "--out", tmp_path, "--no-figures", "--no-report", "--quiet")
    assert result.exit_code == 0, result.output
    # es's debris is gone; es-norm's belongs to a folder this run did not lock, and stays until a norm run
    assert sorted(p.name for p in results.iterdir()) == [".es-norm.staging-other", "es"]


def test_a_symlinked_output_folder_is_refused_and_kept(tiny_model_dir, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "mine.txt").write_text("keep", encoding="utf-8")
    (tmp_path / "out" / "results").mkdir(parents=True)
    (tmp_path / "out" / "results" / "es").symlink_to(elsewhere, target_is_directory=True)
    result = invoke("run", "--model", tiny_model_dir, "--out", tmp_path / "out", "--no-figures", "--no-report")
    assert result.exit_code == 2
    assert "is a symbolic link" in error_line(result)
    assert (tmp_path / "out" / "results" / "es").is_symlink()
    assert sorted(p.name for p in (tmp_path / "out" / "results").iterdir()) == ["es"]
    assert (elsewhere / "mine.txt").read_text(encoding="utf-8") == "keep"


# --- errors of the disk and the terminal are not bugs ---------------------------------------------------

def _limit_file_size() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))


def command(*args: object) -> list[str]:
    return [sys.executable, "-m", "real_attention", *map(str, args)]


@pytest.mark.parametrize("what", ["run", "lesson"])
def test_a_file_too_large_is_one_error_line(what, tiny_model_dir, tmp_path):
    args = ("run", "--model", tiny_model_dir) if what == "run" else ("lesson",)
    done = subprocess.run(command(*args, "--out", tmp_path / "out", "--quiet"), capture_output=True, text=True,
                          preexec_fn=_limit_file_size, cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "hit a bug" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1 and "File too large" in lines[0] and str(tmp_path / "out") in lines[0], done.stderr
    assert not (tmp_path / "out" / "results" / ("es" if what == "run" else "lesson")).exists()


def test_a_closed_pipe_ends_quietly(tmp_path):
    process = subprocess.Popen(command("lesson", "--out", tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               cwd=tmp_path)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.readline()  # like `| head -1`
    process.stdout.close()
    stderr = process.stderr.read().decode()
    process.wait(timeout=120)
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr


def test_a_toml_nested_too_deeply_is_bad_input(tiny_model_dir, tmp_path):
    config = tmp_path / "deep.toml"
    config.write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n", encoding="utf-8")
    result = invoke("run", "--model", tiny_model_dir, "--config", config, "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert error_line(result) == f"Error: malformed TOML in {config}: nested too deeply (a config needs two levels)"


# --- the library writes what the command writes ---------------------------------------------------------

def test_ra_run_and_the_command_write_the_same_bytes(tiny_model_dir, tmp_path):
    import real_attention as ra

    config = tmp_path / "c.toml"
    config.write_text(SPANISH, encoding="utf-8")
    ran = invoke("run", "--model", tiny_model_dir, "--config", config, "--out", tmp_path / "cli",
                 "--compare-measures", "--format", "png", "--format", "svg", "--quiet")
    assert ran.exit_code == 0, ran.output
    output = ra.run(model=str(tiny_model_dir), config=config, out=tmp_path / "api", compare_measures=True,
                    formats=("png", "svg"))
    cli_files, api_files = tree(tmp_path / "cli"), tree(tmp_path / "api")
    assert cli_files.keys() == api_files.keys() and len(cli_files) > 20
    assert [name for name in cli_files if cli_files[name] != api_files[name]] == []
    assert [run.folder for run in output.runs] == ["es", "es-norm"]
    assert output.attention.layers == 3 and output.summary["measure"] == "weights"
    assert all(path.is_file() for run in output.runs for path in run.figures)
    assert output.compare == (tmp_path / "api/results/es/measures.csv", tmp_path / "api/figures/es/measures.png")


def test_ra_corpus_and_merge_write_what_heads_and_merge_write(tiny_model_dir, tmp_path):
    import real_attention as ra

    text = corpus_file(tmp_path)
    assert invoke("heads", "--corpus", text, "--model", tiny_model_dir, "--out", tmp_path / "cli", "--quiet",
                  "--threshold", "marker=0.4").exit_code == 0
    output = ra.corpus(text, model=str(tiny_model_dir), out=tmp_path / "api", thresholds={"marker": 0.4})
    assert tree(tmp_path / "cli") == tree(tmp_path / "api")
    assert output.results_dir == tmp_path / "api" / "results" / "corpus" / "wiki"
    assert list(output.heads["layer"][:2]) == [1, 1] and output.summary["counts"]["sentences"] == 2
    shards = [ra.corpus(text, model=str(tiny_model_dir), out=tmp_path / "s", shard=f"{i}/2").results_dir
              for i in (1, 2)]
    merged = ra.merge(shards, out=tmp_path / "m")
    assert merged.shards == 2
    assert (merged.results_dir / "heads.csv").read_bytes() == (output.results_dir / "heads.csv").read_bytes()


def test_the_command_functions_are_thin():
    """Each command parses, calls the library and prints: no command body over 30 lines."""
    import ast

    source = (REPO / "analysis" / "real_attention" / "cli.py").read_text(encoding="utf-8")
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name.endswith("_command"):
            body_start = node.body[1].lineno if ast.get_docstring(node) else node.body[0].lineno
            assert node.end_lineno - body_start + 1 <= 30, node.name


# --- one import name ------------------------------------------------------------------------------------

SHADOW = "raise ImportError('the user\\'s own analysis module was imported')\n"


@pytest.fixture()
def shadowed(tmp_path) -> Path:
    """A working folder with its own analysis.py and analysis/ package, as a research folder has."""
    (tmp_path / "analysis.py").write_text(SHADOW, encoding="utf-8")
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "__init__.py").write_text(SHADOW, encoding="utf-8")
    return tmp_path


def test_a_users_analysis_module_does_not_shadow_the_engine(shadowed, tiny_model_dir):
    # every public name resolved (each lazy attribute imports its module) from the shadowing folder; the run below
    # loads a model and writes its files through the rest
    script = ("import real_attention as ra; names = [getattr(ra, name) for name in ra.__all__]; "
              "print(len(names), ra.attend.__module__)")
    done = subprocess.run([sys.executable, "-c", script], cwd=shadowed, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    import real_attention as ra

    assert done.stdout.split() == [str(len(ra.__all__)), ra.attend.__module__]
    # python -m puts the working folder first on sys.path, as python -c does (the installed real-attention script
    # puts its own folder there instead: no working folder can shadow it)
    done = subprocess.run(command("run", "--model", tiny_model_dir, "--out", shadowed / "out", "--no-figures",
                                  "--no-report", "--quiet"), cwd=shadowed, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (shadowed / "out" / "results" / "es" / "heads.csv").is_file()


@pytest.mark.slow
def test_a_dask_worker_beside_a_users_analysis_module(shadowed, tiny_model_dir):
    pytest.importorskip("distributed")
    text = corpus_file(shadowed)
    done = subprocess.run(command("heads", "--corpus", text, "--model", tiny_model_dir, "--workers", 1, "--out",
                                  shadowed / "out", "--quiet"), cwd=shadowed, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    assert (shadowed / "out" / "results" / "corpus" / "wiki" / "heads.csv").is_file()


@pytest.mark.slow
def test_the_wheel_installs_one_import_name(tmp_path):
    """The built wheel holds the package real_attention/ (with py.typed) and nothing else at the top."""
    import zipfile

    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0 and "hatchling" in done.stderr:
        pytest.skip("no hatchling to build with (no index reachable)")
    assert done.returncode == 0, done.stderr
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names if not name.split("/")[0].endswith(".dist-info")}
    assert tops == {"real_attention"}
    assert {"real_attention/__init__.py", "real_attention/py.typed", "real_attention/cli.py"} <= set(names)
    assert {"real_attention/engine/models.py", "real_attention/outputs/report_template.js",
            "real_attention/engine/sentences.toml"} <= set(names)
    assert not [name for name in names if "__pycache__" in name or name.startswith("analysis")]
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = ("import real_attention as ra, real_attention.engine.models as m; "
             f"print(ra.__file__.startswith({str(target)!r}), m.__file__.startswith({str(target)!r}))")
    done = subprocess.run([sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); {probe}"],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    assert done.stdout.split() == ["True", "True"], done.stderr


def test_marker_counts_of_many_sentences_fit_one_short_line():
    from real_attention.outputs.tables import _counts

    assert _counts([3, 1, 2]) == "3, 1, 2"
    line = _counts([i % 7 for i in range(2000)])
    assert line == "0 to 6, median 3, over 2,000 sentences"


@pytest.mark.parametrize("command", ["run", "heads", "syntax", "importance", "compare"])
def test_an_input_inside_a_folder_the_command_replaces_is_refused_not_deleted(tiny_model_dir, tmp_path, command):
    # the swap replaces the folder whole: a config, corpus or treebank kept there was deleted by a run that succeeded
    folder = tmp_path / "results" / {"run": "es", "heads": "corpus/mine", "syntax": "syntax/mine",
                                      "importance": "importance/mine", "compare": "compare/mine"}[command]
    folder.mkdir(parents=True)
    kept = {"run": ("mine.toml", SPANISH), "syntax": ("mine.conllu", "1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n"
                                                      "2\tbank\tbank\tNOUN\t_\t_\t0\troot\t_\t_\n\n")}.get(
        command, ("mine.txt", "el banco .\nfui al banco .\n"))
    source = folder / kept[0]
    source.write_text(kept[1], encoding="utf-8")
    model = ["--model", str(tiny_model_dir)]
    arguments = {"run": ["--config", source, "--no-figures", "--no-report"],
                 "heads": ["--corpus", source, "--no-figures"], "syntax": ["--treebank", source],
                 "importance": ["--corpus", source, "--objective", "embedding"],
                 "compare": ["--corpus", source, *model, "--name", "mine"]}[command]
    result = invoke(command, *model, *arguments, "--out", tmp_path, "--quiet")
    assert result.exit_code == 2, result.output
    assert error_line(result) == (f"Error: {source} lies inside {folder}, which this command replaces whole (its "
                                  "old files are deleted): move it out of there, or choose another out (--out) or "
                                  "name (--name)")
    assert source.read_text(encoding="utf-8") == kept[1] and sorted(folder.iterdir()) == [source]


def test_merge_never_replaces_a_shard_it_reads(tiny_model_dir, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("el banco .\nfui al banco .\nmi jardín .\n", encoding="utf-8")
    for shard in ("1/2", "2/2"):
        result = invoke("heads", "--corpus", corpus, "--model", tiny_model_dir, "--shard", shard, "--name", "c",
                        "--no-figures", "--quiet", "--out", tmp_path)
        assert result.exit_code == 0, result.output
    shards = sorted((tmp_path / "results" / "corpus").iterdir())
    moved = tmp_path / "results" / "corpus" / "c" / "shards"
    moved.mkdir(parents=True)
    for shard in shards:
        shard.rename(moved / shard.name)
    result = invoke("merge", *sorted(moved.iterdir()), "--out", tmp_path, "--quiet", "--no-figures")
    assert result.exit_code == 2, result.output
    assert "lies inside" in error_line(result) and len(list(moved.iterdir())) == 2


@pytest.mark.parametrize("command", ["heads", "syntax", "importance", "compare"])
def test_a_file_name_that_is_not_utf8_is_recorded_escaped(tiny_model_dir, tmp_path, command):
    # Python reads b"bad\xff" as "bad\udcff": summary.json's UTF-8 writer failed after all the work, a traceback
    import json

    name = os.fsdecode(b"bad\xffname")
    source = tmp_path / (name + (".conllu" if command == "syntax" else ".txt"))
    source.write_text("1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n2\tbank\tbank\tNOUN\t_\t_\t0\troot\t_\t_\n\n"
                      if command == "syntax" else "el banco .\nfui al banco .\n", encoding="utf-8")
    model = ["--model", str(tiny_model_dir)]
    arguments = {"heads": ["--corpus", source, "--no-figures"], "syntax": ["--treebank", source, "--min-count", "1"],
                 "importance": ["--corpus", source, "--objective", "embedding", "--prune-step", "1"],
                 "compare": ["--corpus", source, *model, "--name", "c"]}[command]
    result = invoke(command, *model, *arguments, "--out", tmp_path / "out", "--quiet", "--format", "svg")
    assert result.exit_code == 0, result.output
    summaries = list((tmp_path / "out" / "results").glob("*/*/summary.json"))
    assert len(summaries) == 1
    text = summaries[0].read_text(encoding="utf-8")
    assert "bad\\udcffname" in text and name in json.dumps(json.loads(text), ensure_ascii=False)


def test_a_file_name_that_is_not_utf8_is_printed_under_a_strict_locale(tiny_model_dir, tmp_path):
    # the "wrote results/corpus/bad\udcffname" line: a UnicodeEncodeError on a stdout that refuses surrogates
    name = os.fsdecode(b"bad\xffname")
    corpus = tmp_path / f"{name}.txt"
    corpus.write_text("el banco .\nfui al banco .\n", encoding="utf-8")
    environment = {**os.environ, "PYTHONIOENCODING": "utf-8:strict"}
    done = subprocess.run([sys.executable, "-m", "real_attention", "heads", "--corpus", os.fsencode(corpus),
                           "--model", str(tiny_model_dir), "--no-figures", "--out", str(tmp_path / "out")],
                          capture_output=True, env=environment, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")
    assert b"bad\\udcffname" in done.stdout + done.stderr and b"hit a bug" not in done.stderr


def test_write_syntax_never_replaces_the_treebank_it_scored(tiny_model_dir, tmp_path):
    import real_attention as ra

    folder = tmp_path / "results" / "syntax" / "mine"
    folder.mkdir(parents=True)
    treebank = folder / "mine.conllu"
    treebank.write_text("1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n2\tbank\tbank\tNOUN\t_\t_\t0\troot\t_\t_\n\n",
                        encoding="utf-8")
    result = ra.syntax(ra.load(tiny_model_dir), treebank, min_count=1)
    with pytest.raises(ra.InputError, match=f"{treebank} lies inside {folder}, which this command replaces whole"):
        ra.write_syntax(result, tmp_path, formats="svg")
    assert sorted(folder.iterdir()) == [treebank]
    results, _ = ra.write_syntax(result, tmp_path / "elsewhere", formats="svg")
    assert (results / "summary.json").is_file()


@pytest.mark.parametrize("command", ["compare", "importance"])
def test_the_writers_never_replace_the_corpus_they_read(tiny_model_dir, tmp_path, command):
    import real_attention as ra
    from real_attention.comparison.compare import CorpusLines

    folder = tmp_path / "results" / command / "mine"
    folder.mkdir(parents=True)
    corpus = folder / "mine.txt"
    corpus.write_text("el banco .\nfui al banco .\n", encoding="utf-8")
    model = ra.load(tiny_model_dir)
    if command == "compare":
        result, write = ra.compare([model, model], CorpusLines(corpus)), ra.write_compare
    else:
        result = ra.importance(model, ["el banco .", "fui al banco ."], prune_step=1.0, corpus_file=corpus)
        write = ra.write_importance
    with pytest.raises(ra.InputError, match=f"{corpus} lies inside {folder}, which this command replaces whole"):
        write(result, tmp_path, "mine", formats="svg")
    assert sorted(folder.iterdir()) == [corpus]
