"""A fuzz of the Python API (2026-12-07, about 830 cases): each defect it found, as the call that showed it."""
from __future__ import annotations

import json
import socket

import numpy as np
import pytest
from click.testing import CliRunner

import real_attention as ra
from real_attention.cli import cli

SENTENCES = ["the bank by the river", "money in the bank", "we sat on the bank"]
LONG = "x" * 300  # one name part over 255 bytes: asking whether it exists raised OSError (ENAMETOOLONG)


@pytest.fixture(scope="module")
def compared(tiny):
    return ra.compare([tiny, tiny], SENTENCES, names=["a", "b"], batch_size=np.int64(2), limit=np.int64(3))


def test_a_config_that_never_ends_is_one_error(tmp_path):
    """/dev/zero as --config read without end until memory ran out (a pipe may still be a config)."""
    from real_attention.engine.sentences import ConfigError, read_config

    with pytest.raises(ConfigError, match=r"^config /dev/zero is larger than 8 MB"):
        read_config("/dev/zero")
    with pytest.raises(ConfigError, match=r"larger than 8 MB"):
        ra.run(lang="es", config="/dev/zero", out=tmp_path)
    assert not any(tmp_path.iterdir())


def test_numpy_integers_are_stored_as_plain_numbers(compared, tmp_path):
    """Options given as numpy integers were stored as they came: the JSON writers crashed after the work."""
    from real_attention.outputs.files import json_text

    assert type(compared.summary["batch_size"]) is int and type(compared.summary["limit"]) is int
    results, _ = ra.write_compare(compared, tmp_path, formats=())
    assert json.loads((results / "summary.json").read_text())["limit"] == 3
    assert json_text({"n": np.int64(3), "x": np.float32(0.5), "f": np.bool_(True)}) == \
        '{\n  "f": true,\n  "n": 3,\n  "x": 0.5\n}'
    with pytest.raises(TypeError, match="not JSON serializable"):
        json_text({"a": object()})


def test_compare_block_checks_its_indices(compared, tiny):
    size = tiny.layers * tiny.heads
    assert compared.block(1, 0).shape == compared.block(-1, -2).shape == (size, size)
    np.testing.assert_array_equal(compared.block(-1, 0), compared.block(1, 0))
    for bad in (2, -3, 0.5, "0", True, None, 10**20):
        with pytest.raises(ra.InputError, match=r"^block: a must be a model's index, 0 to 1 \(or -2 to -1\)"):
            compared.block(bad, 0)


@pytest.mark.parametrize("call", [
    lambda tiny: ra.load(LONG),
    lambda tiny: ra.load("/tmp/" + LONG),
    lambda tiny: ra.corpus(LONG, model="minilm"),
    lambda tiny: ra.merge([LONG]),
    lambda tiny: ra.read_attention(LONG),
    lambda tiny: ra.syntax(tiny, LONG),
    lambda tiny: ra.compare([tiny, tiny], __import__("real_attention.comparison.compare").comparison.compare
                            .CorpusLines(LONG)),
    lambda tiny: ra.run(lang="es", out="/tmp/" + LONG + "/x"),
])
def test_a_path_too_long_for_any_file_system_is_one_input_error(call, tiny):
    with pytest.raises(ra.InputError, match=r"is too long for a path: a file or folder name holds at most 255 bytes"):
        call(tiny)


@pytest.mark.parametrize("command", [["compare", "--corpus", LONG, "--model", "m", "--model", "m"],
                                     ["syntax", "--treebank", LONG, "--model", "m"],
                                     ["run", "--out", LONG], ["heads", "--corpus", LONG, "--model", "m"]])
def test_a_path_too_long_is_one_error_line_on_the_command_line(command, tmp_path):
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: ") and "is too long for a path" in line, line


def test_progress_that_cannot_be_called_is_refused_before_the_work(tiny, tmp_path, monkeypatch):
    """syntax failed after its first batch (int has no update), importance after its intact pass."""
    from real_attention.head_importance import run as importance_run

    monkeypatch.setattr(importance_run, "scorer_for", lambda *a: pytest.fail("the model was loaded"))
    with pytest.raises(ra.InputError, match=r"^progress must be a function progress\(n\)"):
        ra.importance(tiny, SENTENCES, progress=3)
    treebank = tmp_path / "t.conllu"
    treebank.write_text("1\tbank\tbank\tNOUN\t_\t_\t0\troot\t_\t_\n\n", encoding="utf-8")
    with pytest.raises(ra.InputError, match=r"^progress must be a tqdm-like bar with update\(n\), or None, not int"):
        ra.syntax(tiny, treebank, progress=3)


def test_importance_options_take_numpy_numbers():
    from real_attention.head_importance.run import check_options

    assert check_options(np.int64(4), np.float32(0.5), np.int64(7), np.int64(8)) == (4, 0.5, 7, 8)
    for args, message in (((0, 0.1, 0), r"batch_size \(--batch-size\) 0 is out of range"),
                          ((1, 0.0, 0), r"prune_step \(--prune-step\) must be a fraction"),
                          ((1, 0.1, -1), r"seed \(--seed\) -1 is out of range: at least 0"),
                          ((1, 0.1, 0, 1), r"max_tokens \(--max-tokens\) 1 is out of range: at least 2")):
        with pytest.raises(ra.InputError, match=message):
            check_options(*args)


def test_importance_refuses_a_corpus_name_or_file_it_could_not_write(tiny, tmp_path, monkeypatch):
    from real_attention.head_importance import run as importance_run

    monkeypatch.setattr(importance_run, "scorer_for", lambda *a: pytest.fail("the model was loaded"))
    for corpus in (3, ""):
        with pytest.raises(ra.InputError, match="corpus"):
            ra.importance(tiny, SENTENCES, corpus=corpus)
    from real_attention.head_importance.run import ImportanceResult, default_name

    named = ImportanceResult.__new__(ImportanceResult)  # a name for the summary, of any characters
    object.__setattr__(named, "summary", {"corpus": "sst2:validation/../x", "model": "m"})
    assert default_name(named) == "sst2-validation-..-x"  # one plain folder name
    with pytest.raises(ra.InputError, match=r"is a folder: pass the file the sentences were read from"):
        ra.importance(tiny, SENTENCES, corpus_file=tmp_path)


def test_head_mask_of_strings_is_refused(tiny):
    with pytest.raises(ra.InputError, match=r"^head_mask must be a \(layers, heads\) array of numbers"):
        ra.objective(tiny, SENTENCES, "embedding", head_mask=[["1"] * tiny.heads] * tiny.layers)


def test_every_result_writer_checks_out_formats_and_wait_alike(compared, tiny, tmp_path):
    detected = ra.detect(tiny, length=3, repeats=2, samples=1)
    for write, result in ((ra.write_compare, compared), (ra.write_detect, detected)):
        with pytest.raises(ra.InputError, match=r"^out must be a path"):
            write(result, 3)
        with pytest.raises(ra.InputError, match=r"^wait must be True or False"):
            write(result, tmp_path, wait="no")
        with pytest.raises(ra.InputError, match=r"^formats must be"):
            write(result, tmp_path, formats=None)
    assert not any(tmp_path.iterdir())


def test_compare_names_are_checked_as_text_and_long_ones_still_make_a_folder(tiny, tmp_path):
    for names, message in ((["\ud800", "b"], "unpaired surrogate"), (["a\x00", "b"], "NUL character"),
                           (["a" * 201, "b"], "is 201 characters long; at most 200")):
        with pytest.raises(ra.InputError, match=rf"^names: name 1 .*{message}"):
            ra.compare([tiny, tiny], SENTENCES[:1], names=names)
    from real_attention.comparison.compare import default_name, folder_name

    long = default_name(["m" * 200, "n" * 200, "o" * 200])
    assert long.count("-vs-") == 2 and len(folder_name(long, "norm").encode()) <= 128


def test_json_nested_too_deeply_is_damage_not_a_bug(tmp_path):
    nested = "[" * 100_000 + "]" * 100_000
    folder = tmp_path / "results" / "es"
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(nested, encoding="utf-8")
    with pytest.raises(ra.InputError, match="nested too deeply"):
        ra.read_attention(folder)
    shard = tmp_path / "shard"
    shard.mkdir()
    (shard / "summary.json").write_text("{}", encoding="utf-8")
    (shard / "sums.json").write_text(nested, encoding="utf-8")
    with pytest.raises(ra.InputError, match="nested too deeply"):
        ra.merge([shard], out=tmp_path / "merged")
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"text": "a b"}\n' + nested + "\n", encoding="utf-8")
    from real_attention.statistics.inputs import CorpusText, Input

    with pytest.raises(ra.InputError, match=r"^line 2 of .* nested too deeply"):
        list(CorpusText([Input(str(corpus), "jsonl", "inputs (--corpus)")]))


def test_serve_checks_host_and_port_before_listening():
    from real_attention.live.server import bind

    with pytest.raises(ra.InputError, match=r"^port \(--port\) must be a whole number, 0 to 65535, not str '80'"):
        bind("127.0.0.1", "80")
    with pytest.raises(ra.InputError, match=r"^host \(--host\) must be a non-empty string \(an address or a host name"):
        bind(3, 0)
    sock = bind("127.0.0.1", np.int64(0))
    assert isinstance(sock, socket.socket)
    sock.close()


def test_sentences_as_a_dict_or_a_set_are_refused(tiny):
    """A dict's keys passed as sentences; a set's order changes from run to run, and the outputs with it."""
    for given in ({"a b": 1}, {"a b", "c d"}):
        with pytest.raises(ra.InputError, match="must be a string or a list of strings, not a"):
            ra.attend(tiny, given)
        with pytest.raises(ra.InputError, match="a set has no order"):
            ra.compare([tiny, tiny], given)


def test_an_empty_path_is_refused_not_read_as_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ra.InputError, match=r"^out is empty; give a path \('\.' for the current folder\)"):
        ra.run(lang="es", out="")
    assert not any(tmp_path.iterdir())


def test_a_long_word_in_a_message_keeps_its_closing_quote():
    """The note on a 152-character word read "'aaaa... (152 characters)": the cut repr lost its quote."""
    from real_attention.engine.checks import shown

    assert shown("a" * 152, 40) == f"{'a' * 16!r}... (152 characters)"
    assert shown("short") == "'short'" and shown(list(range(100)), 30).endswith("... (390 characters)")


def test_heatmap_refuses_an_index_it_would_ignore_and_one_word_as_focus_and_sense(tiny):
    att = ra.attend(tiny, SENTENCES)
    with pytest.raises(ra.InputError, match=r"^index picks a sentence of an Attention; one sentence"):
        ra.heatmap(att[0], 1, 1, index=5)
    with pytest.raises(ra.InputError, match=r"^focus and sense name the same word \('bank'\)"):
        ra.heatmap(att[0], 1, 1, focus="bank", sense="bank")
    ra.heatmap(att[0], 1, 1, focus="bank", sense="river")  # still drawn


def test_a_name_of_undecodable_bytes_counts_one_byte_each(tmp_path):
    """A file name of 100 bytes that are not UTF-8 (\\xff) was counted as 300 and refused as too long."""
    import os

    from real_attention.engine.checks import check_name_length

    name = os.fsdecode(b"\xff" * 100)
    check_name_length(name, "x")
    (tmp_path / name).mkdir()  # the file system takes it
    with pytest.raises(ra.InputError, match="too long"):
        check_name_length(os.fsdecode(b"\xff" * 256), "x")


def test_a_config_with_cr_line_ends_still_reads(tmp_path):
    """read_text's universal newlines read it; the capped binary read did not (malformed TOML)."""
    from real_attention.engine.sentences import read_config

    path = tmp_path / "cr.toml"
    path.write_bytes(b'[en]\rfocus = "bank"\r')
    assert read_config(path)[0] == {"en": {"focus": "bank"}}
