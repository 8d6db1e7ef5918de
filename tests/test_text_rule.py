"""One rule for what text can be a sentence (real_attention.engine.text), at every entry point (issue 27, items
4-6): an unpaired surrogate, NUL, or no visible character. `serve` is tested in test_serve_limits.py."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

import real_attention as ra
from real_attention import cli
from real_attention.engine.errors import InputError
from real_attention.engine.text import is_blank, text_problem
from real_attention.statistics.sums import CorpusError, CorpusReader

SURROGATE, ZERO_WIDTH, CONTROL, NUL = "a \ud800 b", "\u200b\u200b", "\x01\x02", "bank\x00"
BAD = {SURROGATE: "holds an unpaired surrogate (\\ud800 at character 3)",
       ZERO_WIDTH: "has no visible character", CONTROL: "has no visible character",
       NUL: "holds a NUL character (\\x00 at character 5)", "\ufeff \t\u2028": "has no visible character"}


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    return lines[0]


@pytest.mark.parametrize("text", sorted(BAD))
def test_the_rule(text):
    assert BAD[text] in text_problem(text)
    assert is_blank(text) == (BAD[text] == "has no visible character")


@pytest.mark.parametrize("text", ["Fui al banco.", "a\u200bb", "\u00e9", "x\x01", "\U0001f600 ok", "银行"])
def test_visible_text_passes(text):
    assert text_problem(text) is None and not is_blank(text)


@pytest.mark.parametrize("text", sorted(BAD))
def test_attend_and_mixing_refuse_it_naming_the_sentence(tiny_loaded, text):
    with pytest.raises(InputError, match="texts: sentence 2 " + BAD[text].replace("\\", "\\\\").replace("(", r"\(")
                       .replace(")", r"\)")):
        ra.attend(tiny_loaded, ["el banco .", text])
    with pytest.raises(InputError, match="sentence 2"):
        ra.mixing(tiny_loaded, ["el banco .", text])
    with pytest.raises(InputError, match=r"^focus "):
        ra.attend(tiny_loaded, ["el banco ."], focus=text if text.strip() else "\x00", sense="el")


def test_the_encoder_guards_every_other_caller(tiny_loaded):
    from real_attention.engine.extract import encode

    with pytest.raises(InputError, match="sentence 1 holds an unpaired surrogate"):
        encode(tiny_loaded.tokenizer, [SURROGATE], 512)


def test_a_corpus_skips_invisible_lines_as_blank_and_stops_at_a_surrogate():
    lines = [b"el banco .\n", "\u200b\u200b\n".encode(), b"\x01\x02\n", b"fui al banco .\n"]
    reader = CorpusReader(iter(lines), "text", source="wiki.txt")
    assert list(reader) == ["el banco .", "fui al banco ."] and (reader.lines, reader.blank) == (4, 2)
    jsonl = [b'{"text": "el banco ."}\n', b'{"text": "half \\ud83d emoji"}\n']
    with pytest.raises(CorpusError, match=r"^line 2 of wiki\.jsonl holds an unpaired surrogate \(\\ud83d"):
        list(CorpusReader(iter(jsonl), "jsonl", source="wiki.jsonl"))


def test_corpus_stats_counts_invisible_lines_as_blank(tiny_loaded):
    frame = ra.corpus_stats(tiny_loaded, ["el banco .", ZERO_WIDTH, CONTROL, "fui al banco ."])
    assert len(frame)  # the two sentences ran
    with pytest.raises(InputError, match="lines: line 2 holds an unpaired surrogate"):
        ra.corpus_stats(tiny_loaded, ["el banco .", SURROGATE])


def test_heads_corpus_counts_them_and_names_a_surrogate_line(tiny_model_dir, tmp_path):
    corpus = tmp_path / "lines.txt"
    corpus.write_text(f"el banco .\n{ZERO_WIDTH}\n{CONTROL}\nfui al banco .\nmi jardin .\n", encoding="utf-8")
    result = invoke("heads", "--corpus", corpus, "--model", tiny_model_dir, "--out", tmp_path / "out", "--quiet")
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "results" / "corpus" / "lines" / "summary.json").read_text())
    assert (summary["counts"]["lines"], summary["counts"]["blank"], summary["counts"]["sentences"]) == (5, 2, 3)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "el banco ."}\n{"text": "a \\ud800 b"}\n', encoding="utf-8")
    result = invoke("heads", "--corpus", broken, "--model", tiny_model_dir, "--out", tmp_path / "out2", "--quiet")
    assert result.exit_code == 2
    assert error_line(result).startswith(f"Error: line 2 of {broken} holds an unpaired surrogate (\\ud800")


@pytest.mark.parametrize("text, said", [("bank\\u0000 .", "holds a NUL character"),
                                        ("\\u200b\\u200b", "has no visible character"),
                                        ("\\u0001\\u0002", "has no visible character")])
def test_run_refuses_such_a_config_sentence_before_loading(tmp_path, text, said):
    config = tmp_path / "sentences.toml"
    config.write_text(f'[es]\nfocus = "banco"\n[[es.sentences]]\ntext = "{text}"\nsense = "x"\n', encoding="utf-8")
    result = invoke("run", "--model", tmp_path / "no-model", "--config", config, "--out", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert f"es sentence 1: text {said}" in error_line(result)
    assert not (tmp_path / "out").exists()


def test_syntax_refuses_a_form_with_a_nul_naming_the_line(tmp_path):
    path = tmp_path / "nul.conllu"
    path.write_text("1\tThe\tthe\tDET\t_\t_\t2\tdet\t_\t_\n2\tbank\x00\tbank\tNOUN\t_\t_\t0\troot\t_\t_\n\n",
                    encoding="utf-8")
    result = invoke("syntax", "--treebank", path, "--model", tmp_path / "no-model", "--out", tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert error_line(result).startswith(f"Error: {path}, line 2: not CoNLL-U: the FORM of word 2 holds a NUL")
    assert not (tmp_path / "out").exists()
