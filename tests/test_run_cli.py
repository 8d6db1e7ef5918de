"""`real-attention run` through Click's CliRunner: outputs, determinism, and one Error: line per bad input."""
import json
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from conftest import SPANISH, error_line, invoke, run_tiny
from real_attention import cli




def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sentences.toml"
    path.write_text(text, encoding="utf-8")
    return path



def test_every_command_has_help():
    for name, command in cli.commands.items():
        assert command.help, name
        for param in command.params:
            if param.param_type_name == "option" and param.name != "help":
                assert param.help, f"{name} {param.name}"
    assert invoke("-h").exit_code == 0
    assert "real-attention" in invoke("--version").output


def test_help_does_not_import_torch():
    code = "import sys; from real_attention import cli; sys.argv=['x','run','--help']\n" \
           "try:\n    cli()\nexcept SystemExit:\n    pass\nassert 'torch' not in sys.modules, 'torch imported'\n" \
           "assert 'transformers' not in sys.modules\nprint('ok')"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip().endswith("ok"), done.stderr


def test_run_writes_exactly_the_five_tables(tiny_model_dir, tmp_path):
    result = run_tiny(tiny_model_dir, tmp_path)
    assert result.exit_code == 0, result.output
    folder = tmp_path / "results" / "es"
    assert sorted(p.name for p in folder.iterdir()) == ["attention.csv", "focus.csv", "heads.csv", "rollout.csv",
                                                        "summary.json"]
    assert "sense-word heads:" in result.output and "of 12" in result.output

    attention = pd.read_csv(folder / "attention.csv", keep_default_na=False)
    assert list(attention.columns) == ["sentence", "layer", "head", "query_index", "query", "key_index", "key",
                                       "weight"]
    keys = ["sentence", "layer", "head", "query_index", "key_index"]
    assert attention[keys].equals(attention.sort_values(keys)[keys])
    assert attention["layer"].between(1, 3).all() and attention["head"].between(1, 4).all()
    rows = attention.groupby(["sentence", "layer", "head", "query_index"])["weight"].sum()
    assert rows.between(1 - 1e-5, 1 + 1e-5).all()
    first = attention[(attention.sentence == 1) & (attention.layer == 1) & (attention["head"] == 1)
                      & (attention.query_index == 0)]
    assert first["key"].tolist() == ["[CLS]", "Me", "senté", "en", "el", "banco", "de", "mi", "jardín", ".", "[SEP]"]
    assert all(len(w.split(".")[1]) == 6 for w in (folder / "attention.csv").read_text().split("\n")[1].split(",")[-1:])

    heads = pd.read_csv(folder / "heads.csv")
    assert list(heads.columns) == ["layer", "head", "sense_head", "marker_head", "prev", "next", "self", "first",
                                   "first_special", "last_special", "punct", "markers", "entropy"]
    assert len(heads) == 12 and set(heads.sense_head.astype(str).str.lower()) <= {"true", "false"}
    focus = pd.read_csv(folder / "focus.csv", keep_default_na=False)
    assert list(focus.columns) == ["sentence", "layer", "head", "top_key_index", "top_key", "top_weight",
                                   "sense_weight", "marker_weight"]
    assert len(focus) == 2 * 12

    summary = json.loads((folder / "summary.json").read_text())
    assert summary["model"] == str(tiny_model_dir)
    assert summary["revision"].startswith("sha256:")
    assert (summary["layers"], summary["heads_per_layer"], summary["heads_total"]) == (3, 4, 12)
    assert summary["sentences"][0] == {"text": "Me senté en el banco de mi jardín.", "sense": "jardín"}
    assert summary["sense_head_count"] == int(heads.sense_head.sum()) == len(summary["sense_heads"])
    assert summary["marker_head_count"] == int(heads.marker_head.sum())
    assert set(summary["versions"]) == {"real-attention", "python", "torch", "transformers"}
    # Focus rows of focus.csv agree with attention.csv.
    banco = attention[(attention["query"] == "banco")]
    top = banco.loc[banco.groupby(["sentence", "layer", "head"])["weight"].idxmax()]
    assert top["key"].tolist() == focus["top_key"].tolist()
    assert top["key_index"].tolist() == focus["top_key_index"].tolist()


def test_two_runs_are_byte_identical(tiny_model_dir, tmp_path):
    run_tiny(tiny_model_dir, tmp_path / "a")
    run_tiny(tiny_model_dir, tmp_path / "b")
    for name in ["attention.csv", "focus.csv", "heads.csv", "summary.json"]:
        a = (tmp_path / "a" / "results" / "es" / name).read_bytes()
        assert a == (tmp_path / "b" / "results" / "es" / name).read_bytes(), name


def test_any_number_of_sentences(tiny_model_dir, tmp_path):
    config = write_config(tmp_path, '[es]\nfocus = "banco"\n[[es.sentences]]\ntext = "El banco."\nsense = "el"\n')
    result = run_tiny(tiny_model_dir, tmp_path, "--config", config)
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "results" / "es" / "summary.json").read_text())
    assert len(summary["marker_head_count_per_sentence"]) == 1


BAD_CONFIGS = {
    "empty sentence": ('[es]\nfocus = "banco"\n[[es.sentences]]\ntext = "  "\nsense = "x"\n',
                       "sentence 1: text is empty"),
    "focus missing": (SPANISH.replace("Fui al banco a sacar dinero.", "Fui a sacar dinero."),
                      "Error: the focus word 'banco' is not in sentence 2 ('Fui a sacar dinero.')"),
    "sense missing": (SPANISH.replace('sense = "dinero"', 'sense = "mi"'),
                      "Error: the sense word 'mi' is not in sentence 2 ('Fui al banco a sacar dinero.')"),
    "focus twice": ('[es]\nfocus = "banco"\n[[es.sentences]]\ntext = "el banco, mi banco."\nsense = "mi"\n',
                    "occurs 2 times in sentence 1 ('el banco, mi banco.'); say which one with focus_occurrence"),
    "too long": ('[es]\nfocus = "banco"\n[[es.sentences]]\ntext = "' + "el " * 30 + 'banco."\nsense = "el"\n'
                 'sense_occurrence = 1\n',
                 "Error: sentence 1 has 34 tokens;"),
    "malformed": ('[es\nfocus = "banco"\n', "malformed TOML in"),
    "incomplete": ('[es]\nfocus = "banco"\n', "[es] has no `sentences`"),
    "no sense": ('[es]\nfocus = "banco"\n[[es.sentences]]\ntext = "El banco."\n', "sentence 1 has no `sense`"),
}


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_bad_config_gets_one_error_line_exit_2_and_writes_nothing(case, tiny_model_dir, tmp_path):
    text, expected = BAD_CONFIGS[case]
    config = write_config(tmp_path, text)
    result = run_tiny(tiny_model_dir, tmp_path / "out", "--config", config)
    assert result.exit_code == 2, result.output
    assert expected in error_line(result)
    if case in ("malformed", "incomplete"):
        assert str(config) in error_line(result)
    assert not (tmp_path / "out" / "results" / "es").exists()
    leftovers = list((tmp_path / "out").rglob("*")) if (tmp_path / "out").exists() else []
    assert [p for p in leftovers if p.is_file()] == []


def test_focus_occurrence_picks_the_repeated_word(tiny_model_dir, tmp_path):
    config = write_config(tmp_path, '[es]\nfocus = "banco"\n[[es.sentences]]\ntext = "el banco, mi banco."\n'
                                    'sense = "mi"\nfocus_occurrence = 2\n')
    result = run_tiny(tiny_model_dir, tmp_path, "--config", config)
    assert result.exit_code == 0, result.output
    attention = pd.read_csv(tmp_path / "results" / "es" / "attention.csv", keep_default_na=False)
    focus = pd.read_csv(tmp_path / "results" / "es" / "focus.csv", keep_default_na=False)
    row = attention[(attention.layer == 1) & (attention["head"] == 1) & (attention.query_index == 5)]
    assert row.loc[row.weight.idxmax(), "key"] == focus.iloc[0]["top_key"]


def test_show_reads_back_the_configured_occurrence(tiny_model_dir, tmp_path):
    from real_attention.outputs.readback import load_run, stored_head

    config = write_config(tmp_path, '[es]\nfocus = "banco"\n[[es.sentences]]\ntext = "el banco, mi banco."\n'
                                    'sense = "mi"\nfocus_occurrence = 2\n')
    assert run_tiny(tiny_model_dir, tmp_path, "--config", config).exit_code == 0
    summary = json.loads((tmp_path / "results" / "es" / "summary.json").read_text())
    assert summary["word_positions"] == [{"focus_index": 5, "sense_index": 4}]
    stored = stored_head(load_run(tmp_path, "es"), layer=1, head=1, sentence=1)
    assert (stored.focus, stored.sense) == (5, 4)


def test_unknown_lang_lists_the_languages(tiny_model_dir, tmp_path):
    result = run_tiny(tiny_model_dir, tmp_path, "--lang", "fr")
    assert result.exit_code == 2
    assert error_line(result) == "Error: unknown language 'fr' in <packaged sentences.toml>; it has: en, en-causal, es"


def test_unwritable_output_exits_1_and_leaves_nothing(tiny_model_dir, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = run_tiny(tiny_model_dir, blocker / "out")
    assert result.exit_code == 1
    assert error_line(result).startswith(f"Error: cannot write to {blocker / 'out'}")


def test_failed_run_leaves_earlier_results_untouched(tiny_model_dir, tmp_path):
    assert run_tiny(tiny_model_dir, tmp_path).exit_code == 0
    folder = tmp_path / "results" / "es"
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    config = write_config(tmp_path, SPANISH.replace('sense = "dinero"', 'sense = "nada"'))
    assert run_tiny(tiny_model_dir, tmp_path, "--config", config).exit_code == 2
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["es"]  # no staging folder left


@pytest.fixture()
def hub_cache(tmp_path, monkeypatch) -> Path:
    """An empty Hugging Face cache for this test (the live constant: HF_HOME is read once, at import)."""
    from huggingface_hub import constants

    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


def test_model_that_cannot_be_had_exits_1_with_a_hint(tmp_path, hub_cache):
    result = invoke("run", "--lang", "en", "--offline", "--out", tmp_path, "--no-figures", "--no-report")
    assert result.exit_code == 1
    line = error_line(result)
    assert line.startswith("Error: cannot load model google-bert/bert-base-uncased at revision "
                           "86b5e0934494bd15c9632b12f734a8a67f723594 (")
    for hint in ("HF_HOME", "folder as model (--model)", "model (--model) minilm"):
        assert hint in line
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").iterdir())


def test_unknown_local_or_hub_model_exits_1(tmp_path, hub_cache):
    result = invoke("run", "--model", "nobody/no-such-model", "--offline", "--out", tmp_path, "--no-figures",
                    "--no-report")
    assert result.exit_code == 1
    assert "cannot load model nobody/no-such-model at revision main" in error_line(result)


def test_minilm_end_to_end(needs_minilm, tmp_path):
    result = run_tiny("minilm", tmp_path)
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "results" / "es" / "summary.json").read_text())
    assert (summary["layers"], summary["heads_per_layer"]) == (6, 12)
    heads = pd.read_csv(tmp_path / "results" / "es" / "heads.csv")
    focus = pd.read_csv(tmp_path / "results" / "es" / "focus.csv", keep_default_na=False)
    assert summary["marker_head_count"] == int(heads.marker_head.sum())
    # A marker head has a marker on top of the focus row in both sentences.
    markers = {"[CLS]", "[SEP]", "."}
    by_head = focus.groupby(["layer", "head"])["top_key"].apply(lambda keys: set(keys) <= markers)
    assert by_head.sum() == summary["marker_head_count"]
    # The prev head really is the argmax of heads.csv's prev column.
    best = heads.loc[heads.prev.idxmax()]
    assert [summary["prev_head"]["layer"], summary["prev_head"]["head"]] == [best.layer, best["head"]]
    assert f"marker heads: {summary['marker_head_count']} of 72" in result.output


def fake_download(cache: Path, model_dir: Path, repo: str, commit: str) -> None:
    """Lay the tiny model out as the Hugging Face cache would after a download of `repo` at `commit`."""
    folder = cache / ("models--" + repo.replace("/", "--"))
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for file in model_dir.iterdir():
        (snapshot / file.name).write_bytes(file.read_bytes())
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(commit)


@pytest.fixture()
def no_hub(monkeypatch):
    """A Hub endpoint that refuses connections at once, and no proxy."""
    from huggingface_hub import constants

    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # the discard port: nobody listens
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # conftest sets HF_HUB_OFFLINE=1 for the other tests


def test_an_unreachable_hub_fails_fast_with_one_line(tmp_path, hub_cache, no_hub):
    from real_attention.engine.models import hub_problem

    assert hub_problem().startswith("cannot reach http://127.0.0.1:9: ")
    start = time.perf_counter()
    result = invoke("run", "--lang", "en", "--out", tmp_path, "--no-figures", "--no-report")
    assert result.exit_code == 1 and time.perf_counter() - start < 30  # the Hub client alone retries for ~50 s
    line = error_line(result)
    assert "cannot reach http://127.0.0.1:9: " in line and "and it is not in the local cache" in line
    assert "model (--model) minilm" in line


def test_behind_a_proxy_the_hub_is_not_probed(monkeypatch, no_hub):
    from real_attention.engine.models import hub_problem

    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert hub_problem() is None


def test_a_cached_hub_model_loads_without_the_network(tiny_model_dir, tmp_path, hub_cache, no_hub):
    commit = "89abcdef0123456789abcdef0123456789abcdef"
    fake_download(hub_cache, tiny_model_dir, "someone/tiny-bert", commit)
    # a pinned commit never touches the network; a branch falls back to the cache when the Hub is unreachable
    for revision in (commit, "main"):
        result = run_tiny("someone/tiny-bert", tmp_path / revision, "--revision", revision)
        assert result.exit_code == 0, result.output
        summary = json.loads((tmp_path / revision / "results" / "es" / "summary.json").read_text())
        assert summary["revision"] == commit


def test_hub_model_from_the_cache_records_the_resolved_commit(tiny_model_dir, tmp_path, hub_cache):
    commit = "0123456789abcdef0123456789abcdef01234567"
    fake_download(hub_cache, tiny_model_dir, "someone/tiny-bert", commit)
    result = run_tiny("someone/tiny-bert", tmp_path / "out", "--offline")  # revision "main" -> its commit
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "results" / "es" / "summary.json").read_text())
    assert (summary["model"], summary["revision"]) == ("someone/tiny-bert", commit)
    pinned = run_tiny("someone/tiny-bert", tmp_path / "pinned", "--offline", "--revision", commit)
    assert pinned.exit_code == 0, pinned.output


@pytest.mark.parametrize("answer", ["config", "missing", "unreachable", "transport"])
def test_a_hub_model_loaded_online_brings_its_sentence_config(tiny_model_dir, hub_cache, monkeypatch, answer):
    """from_pretrained never downloads sentence_bert_config.json, so a Hub model had no sentence-transformers
    length (the embedding objective's cut) unless its files were copied in: it is fetched with the model."""
    from types import SimpleNamespace

    import huggingface_hub
    from huggingface_hub.errors import LocalEntryNotFoundError, RemoteEntryNotFoundError

    import real_attention.engine.models as models

    commit = "fedcba9876543210fedcba9876543210fedcba98"
    fake_download(hub_cache, tiny_model_dir, "someone/tiny-bert", commit)
    snapshot = hub_cache / "models--someone--tiny-bert" / "snapshots" / commit
    asked = []

    def download(repo, filename, revision=None, **kwargs):
        asked.append((repo, filename, revision))
        if answer == "missing":
            raise RemoteEntryNotFoundError("404 Client Error: Entry Not Found",
                                           response=SimpleNamespace(headers={}, request=None))
        if answer == "unreachable":
            raise LocalEntryNotFoundError("cannot reach the Hub")
        if answer == "transport":  # httpx's protocol and proxy errors are no OSErrors
            raise type("RemoteProtocolError", (Exception,), {})("peer closed connection")
        (snapshot / filename).write_text('{"max_seq_length": 7, "do_lower_case": false}', encoding="utf-8")
        return str(snapshot / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    # the Hub answers, so files may be downloaded (HF_HUB_OFFLINE, set for the tests, keeps transformers on the cache)
    online = models.hub_options
    monkeypatch.setattr(models, "hub_options", lambda choice, offline: {**online(choice, offline),
                                                                         "local_files_only": offline})
    choice = models.choose_model(None, "someone/tiny-bert", None)
    loaded = models.load_model(choice)
    assert loaded.revision == commit
    assert asked == [("someone/tiny-bert", "sentence_bert_config.json", commit)]
    assert models.sentence_embedding_length(choice) == (7 if answer == "config" else None)
    asked.clear()
    models.load_model(choice, offline=True)  # no network: nothing is asked for
    assert asked == []


@pytest.mark.parametrize("units", ["text", "tokenizer"])
def test_a_config_value_of_the_wrong_type_is_one_error_line(tiny_model_dir, tmp_path, units):
    """transformers' strict config classes raise errors that are no OSError or ValueError: a traceback before."""
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, broken)
    config = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**config, "num_attention_heads": "4"}))
    result = run_tiny(broken, tmp_path / "out", "--units", units)
    assert result.exit_code == 1, result.output
    assert error_line(result).startswith(f"Error: cannot load model {broken}: its config.json holds a value "
                                         "transformers refuses ("), result.output
