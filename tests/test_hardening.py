"""Hostile input through the CLI: nothing written outside --out, no silent garbage, one clear line each."""
import json
import logging
import shutil
from pathlib import Path

import pytest

from conftest import SPANISH, error_line, invoke, run_tiny
from real_attention import cli





def write(path: Path, text: str, encoding: str = "utf-8") -> Path:
    path.write_text(text, encoding=encoding)
    return path


def files_under(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.exists() else set()


# --- --lang never leads out of --out ---------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["../../precious", ".", "..", "../esc", "a/b", "/abs", ""])
def test_lang_must_be_one_plain_folder_name(lang, tiny_model_dir, tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("mine")
    out = tmp_path / "a" / "b"
    (out / "results" / "es").mkdir(parents=True)
    (out / "results" / "es" / "old.csv").write_text("old")
    table = json.dumps(lang)
    config = write(tmp_path / "c.toml", SPANISH.replace("[es]", f"[{table}]").replace("es.sentences", f"{table}.sentences"))
    before = files_under(tmp_path)
    # a model that does not exist: the name is checked before anything is loaded
    result = invoke("run", "--lang", lang, "--config", config, "--model", tmp_path / "no-model", "--out", out)
    assert result.exit_code == 2, result.output
    assert error_line(result).startswith(f"Error: lang (--lang) {lang!r} cannot be a folder name")
    assert files_under(tmp_path) == before and (precious / "keep.txt").read_text() == "mine"


def test_show_checks_lang_too(tmp_path):
    result = invoke("show", "--lang", "..", "--layer", "1", "--head", "1", "--out", tmp_path)
    assert result.exit_code == 2 and "cannot be a folder name" in error_line(result)


# --- model folders ---------------------------------------------------------------------------------------


def test_a_model_folder_without_tokenizer_files_is_refused(tiny_model_dir, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_model_dir / name, bare / name)
    result = run_tiny(bare, tmp_path / "out")
    assert result.exit_code == 1
    line = error_line(result)
    assert str(bare) in line and "tokenizer files are missing" in line
    assert not (tmp_path / "out" / "results").exists() or not any((tmp_path / "out" / "results").iterdir())


def test_a_tokenizer_with_no_vocabulary_is_refused(tiny_model_dir, tmp_path):
    from transformers import BertTokenizerFast

    empty = tmp_path / "empty-tokenizer"
    empty.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_model_dir / name, empty / name)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    BertTokenizerFast(vocab={piece: i for i, piece in enumerate(specials)}).save_pretrained(empty)
    result = run_tiny(empty, tmp_path / "out")
    assert result.exit_code == 1
    assert "0 ordinary entries: its tokenizer files are missing" in error_line(result)


def test_words_the_vocabulary_lacks_run_as_unk_with_a_warning(tiny_model_dir, tmp_path):
    """Not "tokenizer files missing" (load_model refuses an empty vocabulary): the words are named, and run."""
    config = write(tmp_path / "c.toml", '[es]\nfocus = "zorro"\n[[es.sentences]]\ntext = "Zorro xyz qwv."\n'
                                        'sense = "xyz"\n')
    result = run_tiny(tiny_model_dir, tmp_path / "out", "--config", config)
    assert result.exit_code == 0, result.output
    assert "Warning: the vocabulary of" in result.output
    assert "sentence 1: 'Zorro', 'xyz', 'qwv'" in result.output


@pytest.mark.parametrize("value, message", [
    ("/no/such/folder", "model (--model) /no/such/folder: the folder does not exist"),
    ("./missing", "model (--model) ./missing: the folder does not exist"),
    ("~/surely-not-here-ra", "model (--model) ~/surely-not-here-ra: the folder does not exist"),
])
def test_a_path_that_is_no_folder_is_never_sent_to_the_hub(value, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run_tiny(value, tmp_path / "out")
    assert result.exit_code == 1
    assert error_line(result) == f"Error: {message}"


def test_a_file_is_not_a_model_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "some").mkdir()
    write(tmp_path / "some" / "file.txt", "x")
    result = run_tiny("some/file.txt", tmp_path / "out")
    assert result.exit_code == 1
    assert error_line(result).startswith("Error: model (--model) some/file.txt is a file, not a model folder")
    (tmp_path / "noconfig").mkdir()
    result = run_tiny("./noconfig", tmp_path / "out")
    assert error_line(result) == "Error: model (--model) ./noconfig is not a model folder: it has no config.json"


@pytest.mark.parametrize("model", ["minilm", "FOLDER"])
def test_revision_with_a_folder_or_the_packaged_model_is_refused(model, tiny_model_dir, tmp_path):
    model = str(tiny_model_dir) if model == "FOLDER" else model
    result = run_tiny(model, tmp_path / "out", "--revision", "abc123")
    assert result.exit_code == 2
    assert error_line(result).startswith(f"Error: revision (--revision) applies to a Hub id, not to model (--model) {model}")


# --- the config ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, message", [
    (SPANISH.replace('focus = "banco"', 'focus = "banco"\nfokus_occurrence = 2'),
     "[es] has an unknown key `fokus_occurrence`; did you mean `focus_occurrence`? It goes in each "
     "[[es.sentences]] entry"),
    (SPANISH.replace('focus = "banco"', 'focus = "banco"\nsense_occurrence = 2'),
     "[es] has `sense_occurrence`, which goes in each [[es.sentences]] entry"),
    (SPANISH.replace('focus = "banco"', 'focus = "banco"\nmodel = "bert"'),
     "[es] has an unknown key `model`; known keys: focus, sentences"),
    ('model = "bert"\n' + SPANISH, "`model` at the top level is not a language table"),
    (SPANISH.replace('sense = "dinero"', 'sense = "dinero"\nfocus = "banco"'),
     "sentence 2 has `focus`, which goes in the [es] table"),
    (SPANISH.replace('sense = "dinero"', 'sense = "dinero"\nsense_ocurrence = 1'),
     "sentence 2 has an unknown key `sense_ocurrence`; did you mean `sense_occurrence`?"),
    (SPANISH.replace('sense = "dinero"', 'sense = "Banco"'),
     "sentence 2: the sense word 'Banco' is the focus word itself"),
])
def test_config_mistakes_get_one_line(text, message, tiny_model_dir, tmp_path):
    config = write(tmp_path / "c.toml", text)
    result = run_tiny(tiny_model_dir, tmp_path / "out", "--config", config)
    assert result.exit_code == 2
    assert message in error_line(result)


def test_a_byte_order_mark_is_accepted(tiny_model_dir, tmp_path):
    config = write(tmp_path / "bom.toml", SPANISH, encoding="utf-8-sig")
    assert config.read_bytes().startswith(b"\xef\xbb\xbf")
    result = run_tiny(tiny_model_dir, tmp_path / "out", "--config", config)
    assert result.exit_code == 0, result.output


def test_a_folder_as_config_says_so(tiny_model_dir, tmp_path):
    result = run_tiny(tiny_model_dir, tmp_path / "out", "--config", tmp_path)
    assert result.exit_code == 2  # click's own check: a file is expected


def test_a_sentence_over_the_limit_prints_only_the_tools_line(tiny_model_dir, tmp_path, capfd):
    config = write(tmp_path / "c.toml", '[es]\nfocus = "banco"\n[[es.sentences]]\ntext = "' + "el " * 30
                   + 'banco."\nsense = "el"\nsense_occurrence = 1\n')
    result = run_tiny(tiny_model_dir, tmp_path / "out", "--config", config)
    assert result.exit_code == 2
    assert "has 34 tokens" in error_line(result)
    captured = capfd.readouterr()
    assert "Token indices sequence length" not in captured.err + captured.out + result.output


# --- outputs ---------------------------------------------------------------------------------------------


def test_no_figures_no_report_leaves_no_stale_figures(tiny_model_dir, tmp_path):
    first = invoke("run", "--model", tiny_model_dir, "--out", tmp_path, "--no-figures")
    assert first.exit_code == 0 and (tmp_path / "figures" / "es" / "report.html").exists()
    second = run_tiny(tiny_model_dir, tmp_path)
    assert second.exit_code == 0
    assert not (tmp_path / "figures" / "es").exists()
    assert sorted(p.name for p in (tmp_path / "figures").iterdir()) == []


def test_an_old_folder_that_cannot_be_removed_is_reported(tiny_model_dir, tmp_path, monkeypatch):
    from real_attention.outputs import staging as atomic

    assert run_tiny(tiny_model_dir, tmp_path).exit_code == 0

    def stubborn(path, onerror=None, onexc=None, **_):  # onexc from Python 3.12, onerror before
        error = PermissionError(13, "Permission denied")
        if onexc is not None:
            onexc(None, str(path), error)
        else:
            onerror(None, str(path), (PermissionError, error, None))

    monkeypatch.setattr(atomic.shutil, "rmtree", stubborn)
    result = run_tiny(tiny_model_dir, tmp_path)
    assert result.exit_code == 0
    warnings = [line for line in result.output.splitlines() if line.startswith("Warning:")]
    assert len(warnings) == 1 and "could not delete the old" in warnings[0] and "Permission denied" in warnings[0]
    assert "delete it by hand" in warnings[0]


def test_show_into_an_unwritable_folder_is_one_line(tiny_model_dir, tmp_path, monkeypatch):
    from real_attention.outputs import plots

    assert run_tiny(tiny_model_dir, tmp_path).exit_code == 0

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(plots, "_save", denied)
    result = invoke("show", "--layer", "1", "--head", "1", "--out", tmp_path)
    assert result.exit_code == 1
    assert error_line(result) == (f"Error: cannot write to {tmp_path / 'figures' / 'show' / 'es'}: Permission denied. "
                                  "Choose a writable folder as out (--out).")


def test_a_bug_keeps_its_traceback_and_asks_for_a_report(tiny_model_dir, tmp_path, monkeypatch):
    from real_attention.engine import pipeline

    def broken(*args, **kwargs):
        raise ValueError("an internal numpy problem")

    monkeypatch.setattr(pipeline, "analyse", broken)
    result = run_tiny(tiny_model_dir, tmp_path)
    assert result.exit_code == 1
    assert "Traceback" in result.output and "an internal numpy problem" in result.output
    assert "hit a bug" in result.output
    assert not [line for line in result.output.splitlines() if line.startswith("Error:")]


def test_quiet_run_prints_nothing(tiny_model_dir, tmp_path):
    result = run_tiny(tiny_model_dir, tmp_path, "--quiet")
    assert result.exit_code == 0 and result.output == ""


def test_loading_shows_no_transformers_bar(tiny_model_dir, tmp_path, capfd):
    result = run_tiny(tiny_model_dir, tmp_path)
    captured = capfd.readouterr()
    assert "Loading weights" not in result.output + captured.err + captured.out


# --- heads and merge -------------------------------------------------------------------------------------


def test_heads_needs_a_model_or_a_lang(tmp_path):
    corpus = write(tmp_path / "c.txt", "el banco.\n")
    result = invoke("heads", "--corpus", corpus, "--out", tmp_path)
    assert result.exit_code == 2 and "heads needs a model" in error_line(result)


def test_heads_on_a_folder_says_it_is_a_folder(tiny_model_dir, tmp_path):
    result = invoke("heads", "--corpus", tmp_path, "--model", tiny_model_dir, "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert error_line(result) == f"Error: inputs (--corpus) {tmp_path} is a folder; pass a text or .jsonl file (or - for stdin)"


def test_heads_writes_the_asked_figure_format_and_a_short_revision(tiny_model_dir, tmp_path):
    corpus = write(tmp_path / "c.txt", "me senté en el banco de mi jardín.\nfui al banco a sacar dinero.\n")
    result = invoke("heads", "--corpus", corpus, "--model", tiny_model_dir, "--out", tmp_path, "--format", "svg")
    assert result.exit_code == 0, result.output
    figures = tmp_path / "figures" / "corpus" / "c"
    assert sorted(p.name for p in figures.iterdir()) == ["labels.svg", "statistics.svg"]
    first = [line for line in result.output.splitlines() if " @ sha256:" in line][0]
    assert first.split(" @ ")[1].split(",")[0] == "sha256:" + first.split("sha256:")[1][:8]
    summary = json.loads((tmp_path / "results" / "corpus" / "c" / "summary.json").read_text())
    for label in ("previous", "next", "self", "first_special", "last_special", "punct"):
        assert (f"strongest {label}:" in result.output) == bool(summary["labels"][label])


@pytest.fixture(scope="module")
def written_shards(tiny_model_dir, tmp_path_factory) -> Path:
    """The two shards of a small corpus, written once for the module (merge reads their tables alone)."""
    out = tmp_path_factory.mktemp("shards")
    corpus = write(out / "c.txt", "me senté en el banco.\nfui al banco.\nmi jardín.\n")
    for index in (1, 2):
        assert invoke("heads", "--corpus", corpus, "--model", tiny_model_dir, "--out", out, "--quiet",
                      "--shard", f"{index}/2", "--no-figures").exit_code == 0
    return out / "results" / "corpus"


def shard_folders(written_shards: Path, tmp_path: Path) -> list[Path]:
    """A copy of the two shards that a test may edit."""
    copies = []
    for index in (1, 2):
        name = f"c-shard-{index}-of-2"
        copies.append(Path(shutil.copytree(written_shards / name, tmp_path / "results" / "corpus" / name)))
    return copies


@pytest.mark.parametrize("field, value, message", [
    ("shard", "x", "field 'shard' is 'x', expected null or an object"),
    ("layers", "three", "field 'layers' is 'three', expected a whole number"),
    ("thresholds", {"position": "high"}, "field 'thresholds'"),
    ("corpus", None, "field 'corpus' is None"),
    ("model", None, "field 'model' is None, expected a model name"),
])
def test_merge_validates_a_hand_edited_summary(field, value, message, written_shards, tmp_path):
    shards = shard_folders(written_shards, tmp_path)
    path = shards[1] / "summary.json"
    data = json.loads(path.read_text())
    data[field] = value
    path.write_text(json.dumps(data))
    result = invoke("merge", *shards, "--out", tmp_path / "merged")
    assert result.exit_code == 2
    line = error_line(result)
    assert line.startswith(f"Error: {shards[1]}/summary.json") and message in line


def test_merge_validates_hand_edited_sums(written_shards, tmp_path):
    shards = shard_folders(written_shards, tmp_path)
    path = shards[0] / "sums.json"
    data = json.loads(path.read_text())
    data["units"] = "many"
    path.write_text(json.dumps(data))
    result = invoke("merge", *shards, "--out", tmp_path / "merged")
    assert result.exit_code == 2
    assert error_line(result).startswith(f"Error: {shards[0]}/sums.json: field 'units' is 'many', not a whole number")


def test_every_command_takes_quiet_and_every_drawing_command_format():
    for name in ("run", "show", "heads", "merge", "lesson"):
        options = {opt for param in cli.commands[name].params for opt in getattr(param, "opts", [])}
        assert "--quiet" in options, name
        assert "--format" in options, name
    heads = {opt for param in cli.commands["heads"].params for opt in param.opts}
    assert "--input-format" in heads
    import click

    defaults = {name: next(p.get_default(click.Context(cli.commands[name])) for p in cli.commands[name].params
                           if p.name == "lang") for name in ("run", "show", "heads")}
    assert defaults["run"] == defaults["show"] == "es"
    assert not isinstance(defaults["heads"], str)  # heads needs no language: --model or --lang picks the model


def test_logging_levels_are_restored_after_loading(tiny_model_dir):
    from transformers.utils import logging as hf_logging

    from real_attention.engine.models import choose_model, load_model

    before = (hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled(),
              logging.getLogger("huggingface_hub").level)
    load_model(choose_model("es", str(tiny_model_dir), None))
    assert (hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled(),
            logging.getLogger("huggingface_hub").level) == before
