"""Bad input a reviewer found still ending in a traceback: a mistyped Hub id, a scheduler address without a port, a
closed stdin, a device that holds no data, a request with a 5,000-digit integer, a device file as the corpus, one
figure format given as a plain string. Each is one error of the package (one `Error:` line on the command line)."""
import io
import sys

import pytest

from conftest import error_line, invoke
from real_attention.engine.errors import InputError
from real_attention.engine.models import ModelUnavailable, choose_model, load_model
from real_attention.statistics.inputs import Input, expand
from real_attention.statistics.sums import CorpusError


@pytest.mark.parametrize("model", ["models/a/b", "my model", "a/b/c", "-x"])
def test_a_model_that_is_neither_a_folder_nor_a_hub_id_is_one_input_error(model):
    with pytest.raises(InputError, match="is not a packaged model .* a local folder or a Hub id"):
        choose_model("en", model, None)


def test_a_mistyped_model_path_is_one_error_line_from_the_command(tmp_path):
    result = invoke("run", "--lang", "en", "--model", "models/a/b", "--out", tmp_path, "--offline")
    assert result.exit_code != 0
    assert error_line(result).startswith("Error: model (--model) 'models/a/b' is not a packaged model")
    assert "repo_type" not in result.output


def test_a_hub_id_still_passes():
    assert choose_model("en", "google-bert/bert-base-cased", None).revision == "main"


@pytest.mark.parametrize("address", ["localhost", "tcp://127.0.0.1", "tcp://127.0.0.1:abc", "foo://x:1", ""])
def test_a_scheduler_address_dask_cannot_parse_is_one_corpus_error(address):
    pytest.importorskip("distributed")
    from real_attention.statistics.dask_engine import connect

    with pytest.raises(CorpusError, match="is not a scheduler address"):
        with connect(None, address, 1):
            pass


def test_a_closed_stdin_is_one_corpus_error(monkeypatch):
    monkeypatch.setattr(sys, "stdin", None)
    with pytest.raises(CorpusError, match="standard input: it is closed"):
        with Input("-", "text").open():
            pass


def test_a_device_file_as_the_corpus_is_one_corpus_error():
    with pytest.raises(CorpusError, match="is not a regular file"):
        expand(["/dev/null"])


def test_the_meta_device_is_refused_before_any_forward_pass(tiny_model_dir):
    with pytest.raises(ModelUnavailable, match="cannot use device 'meta': it holds no data"):
        load_model(choose_model(None, str(tiny_model_dir), None), device="meta")


def test_a_request_with_an_integer_of_5000_digits_is_a_bad_request_not_a_500():
    from real_attention.live.app import BadRequest, parse_query

    with pytest.raises(BadRequest, match="does not read"):
        parse_query(('{"texts": ["a"], "page": ' + "9" * 5000 + "}").encode())


def test_null_is_an_absent_field_but_texts_must_be_given():
    from real_attention.live.app import BadRequest, parse_query

    given = parse_query(b'{"texts": ["a"], "focus": null, "sense": null, "measure": null, "units": null, '
                        b'"lang": null, "page": null}', measure="norm")
    assert given == parse_query(b'{"texts": ["a"]}', measure="norm")
    assert given[0].measure == "norm" and given[0].units == "text" and given[1] is False
    with pytest.raises(BadRequest, match="texts must be a list"):
        parse_query(b'{"texts": null}')


def test_one_threshold_may_be_a_plain_string(tiny_model_dir, tmp_path):
    """It was read letter by letter: "--threshold 'p'"."""
    import real_attention as ra

    corpus = tmp_path / "c.txt"
    corpus.write_text("fui al banco .\nmi jardín .\n", encoding="utf-8")
    output = ra.corpus(corpus, model=str(tiny_model_dir), out=tmp_path / "out", thresholds="position=0.3",
                       figures=False, progress=None)
    assert output.run.thresholds.position == 0.3


@pytest.mark.parametrize("command", [
    ("compare", "--corpus", "{folder}", "--model", "minilm", "--model", "minilm"),
    ("importance", "--corpus", "{folder}", "--model", "minilm"),
    ("syntax", "--treebank", "{folder}", "--model", "minilm"),
    ("run", "--lang", "en", "--config", "{folder}"),
], ids=lambda command: command[0])
def test_a_folder_where_a_file_goes_is_one_error_line_with_no_usage(command, tmp_path):
    """Click's own check of a file option printed its usage and "File '...' is a directory." in three lines; the
    package's check says what to pass instead, as `heads --corpus FOLDER` does."""
    folder = tmp_path / "a folder"
    folder.mkdir()
    out = tmp_path / "out"
    result = invoke(*(part.format(folder=folder) for part in command), "--out", out)
    assert result.exit_code != 0
    assert result.output.strip().splitlines() == [error_line(result)]
    assert error_line(result).startswith("Error: ") and "is a folder" in error_line(result)
    assert not out.exists()


@pytest.mark.parametrize("command", ["heads", "syntax", "compare"])
def test_a_batch_size_past_the_largest_is_one_error_line_before_loading(command, tmp_path, tiny_model_dir,
                                                                         monkeypatch):
    """heads, syntax and compare pad batches to --batch-size rows or read ahead by it: 10**20 was a traceback from
    itertools.islice (or would ask for that many rows); now it is refused before the model loads."""
    import real_attention.engine.models as models

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(models, "load_model", refuse)
    corpus = tmp_path / "c.txt"
    corpus.write_text("I sat on the bank.\n", encoding="utf-8")
    treebank = tmp_path / "t.conllu"
    treebank.write_text("1\tI\tI\tPRON\t_\t_\t2\tnsubj\t_\t_\n2\tsat\tsit\tVERB\t_\t_\t0\troot\t_\t_\n\n",
                        encoding="utf-8")
    given = {"heads": ("heads", "--corpus", corpus), "syntax": ("syntax", "--treebank", treebank),
             "compare": ("compare", "--corpus", corpus, "--model", tiny_model_dir)}[command]
    result = invoke(*given, "--model", tiny_model_dir, "--batch-size", 10**20, "--out", tmp_path / "out")
    assert result.exit_code == 2
    assert error_line(result) == (f"Error: Invalid value for '--batch-size': {10**20} is not in the range "
                                  f"1<=x<=65536. See 'cli {command} --help'.")  # Click's range, as for every command
    assert not (tmp_path / "out").exists()


def test_a_partition_size_past_any_corpus_is_one_partition(tmp_path, tiny_model_dir):
    corpus = tmp_path / "c.txt"
    corpus.write_text("I sat on the bank.\nMy garden.\n", encoding="utf-8")
    for name, size in (("huge", 10**20), ("usual", 1024)):
        result = invoke("heads", "--corpus", corpus, "--model", tiny_model_dir, "--partition-size", size, "--name",
                        name, "--no-figures", "--quiet", "--out", tmp_path / "out")
        assert result.exit_code == 0, result.output
    folders = [tmp_path / "out" / "results" / "corpus" / name for name in ("huge", "usual")]
    assert (folders[0] / "sums.json").read_bytes() == (folders[1] / "sums.json").read_bytes()


@pytest.mark.parametrize("command", ["lesson", "run", "show"])
def test_an_empty_out_is_one_error_line_not_the_current_folder(command, tmp_path, monkeypatch):
    """Path('') is '.': an unset $OUT wrote results/ and figures/ into the working folder."""
    monkeypatch.chdir(tmp_path)
    result = invoke(command, "--out", "", *(["--layer", "1", "--head", "1"] if command == "show" else []))
    assert result.exit_code == 2
    assert result.output.strip() == "Error: --out is empty; give a folder (--out . for this one)"
    assert list(tmp_path.iterdir()) == []


def test_a_corrupt_gzip_stream_is_one_error_line(tmp_path, tiny_model_dir):
    """zlib.error is no OSError: a damaged deflate stream ended in a traceback."""
    import gzip

    packed = bytearray(gzip.compress(("Fui al banco a sacar dinero.\n" * 200).encode()))
    packed[20] ^= 0xFF
    corpus = tmp_path / "c.txt.gz"
    corpus.write_bytes(bytes(packed))
    result = invoke("heads", "--corpus", corpus, "--model", tiny_model_dir, "--out", tmp_path / "out", "--quiet")
    assert result.exit_code == 2
    assert error_line(result).startswith(f"Error: cannot read inputs (--corpus) {corpus}: ")


@pytest.mark.parametrize("shard", ["\u00b2/3", "1/\u0663"])
def test_a_shard_with_a_digit_that_is_not_ascii_is_one_error_line(shard):
    from real_attention.statistics.reading import Shard

    with pytest.raises(CorpusError, match="is not of the form i/N"):
        Shard.parse(shard)


def test_a_jsonl_error_names_its_own_line_and_column(tmp_path):
    from real_attention.statistics.sums import CorpusReader

    for raw, said in ((b'{"text": "hello"\n', "line 1 of c.jsonl is not JSON: Expecting ',' delimiter (column 17)"),
                      (b'{"text": "a\\u0000b"}\n', "remove it from the text")):
        with pytest.raises(CorpusError, match=said.replace("(", r"\(").replace(")", r"\)")):
            list(CorpusReader(io.BytesIO(raw), "jsonl", source="c.jsonl"))


def test_inputs_given_both_ways_are_refused_and_mixed_formats_are_recorded(tmp_path, tiny_model_dir):
    import json

    text, lines = tmp_path / "a.txt", tmp_path / "b.jsonl"
    text.write_text("Fui al banco.\n", encoding="utf-8")
    lines.write_text('{"text": "Me senté en el banco."}\n', encoding="utf-8")
    result = invoke("heads", "--corpus", text, lines, "--corpus", text, "--model", tiny_model_dir,
                    "--out", tmp_path / "out")
    assert result.exit_code == 2 and "cannot be kept" in error_line(result)
    result = invoke("heads", "--corpus", text, "--corpus", lines, "--model", tiny_model_dir, "--name", "m",
                    "--no-figures", "--quiet", "--out", tmp_path / "out")
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "results" / "corpus" / "m" / "summary.json").read_text())
    assert summary["corpus"]["format"] == "mixed"


def test_corpus_inputs_that_ended_in_a_traceback_or_a_riddle(tmp_path):
    """From a review of heads --corpus: an empty name was 'a folder'; a missing memory:// file said only its path;
    a fifo behind a file:// URL was read by name and could block for ever."""
    import os

    with pytest.raises(CorpusError, match=r"^inputs \(--corpus\) is empty"):
        expand([""])
    (name,) = [item.name for item in expand(["memory://real-attention-missing.txt"])]
    with pytest.raises(CorpusError, match="no such file"):
        with Input(name, "text").open():
            pass
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(CorpusError, match="is not a regular file"):
        expand([f"file://{fifo}"])
    with pytest.raises(CorpusError, match="is a folder"):
        expand([f"file://{tmp_path}"])


def test_thousands_of_threads_or_workers_are_one_error_line(tmp_path, tiny_model_dir):
    corpus = tmp_path / "c.txt"
    corpus.write_text("I sat on the bank.\n", encoding="utf-8")
    for option in ("--threads", "--workers"):
        result = invoke("heads", "--corpus", corpus, "--model", tiny_model_dir, option, 100000, "--out", tmp_path)
        assert result.exit_code == 2 and error_line(result) == f"Error: {option[2:]} ({option}) 100000 is out of range: 1 to 1024"


def test_a_threshold_that_is_no_string_is_one_error(tiny_model_dir, tmp_path):
    import real_attention as ra

    corpus = tmp_path / "c.txt"
    corpus.write_text("I sat on the bank.\n", encoding="utf-8")
    with pytest.raises(CorpusError, match="a threshold setting must be a string NAME=VALUE"):
        ra.corpus(corpus, model=str(tiny_model_dir), out=tmp_path, thresholds=["position=0.5", 3])


def test_a_reader_blocked_on_input_does_not_hold_up_an_interrupted_run():
    """The reading thread may wait for ever on a pipe no one writes to: a consumer that stops waits for it at
    most READER_GRACE_SECONDS (it waited without end, and SIGTERM could not end the run)."""
    import threading
    import time

    from real_attention.statistics.streaming import READER_GRACE_SECONDS, read_ahead

    never = threading.Event()

    def blocked():
        yield "first"
        never.wait()  # a read() that never returns
        yield "never"

    start = time.monotonic()
    for item in read_ahead(blocked()):
        assert item == "first"
        break
    assert time.monotonic() - start < READER_GRACE_SECONDS + 1.5
    never.set()


@pytest.mark.parametrize("device, code, message", [
    ("foo", 2, "Error: device (--device) 'foo' is not a torch device; use cpu, cuda, cuda:N, mps or auto"),
    ("cuda:99", 1, "Error: cannot use device 'cuda:99': "),
])
def test_a_device_is_checked_before_the_model_loads(tiny_model_dir, tmp_path, monkeypatch, device, code, message):
    """A typo in --device cost the whole load, then printed torch's list of every device type, and exited 1."""
    import torch
    import transformers
    from click.testing import CliRunner

    from real_attention import cli

    def refuse(*args, **kwargs):
        raise AssertionError("the weights were loaded before the device was checked")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # so cuda:99 is checked against a count
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", refuse)
    result = CliRunner().invoke(cli, ["run", "--model", str(tiny_model_dir), "--device", device, "--out",
                                      str(tmp_path / "out"), "--no-figures", "--no-report"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == code and len(lines) == 1, result.output
    assert lines[0].startswith(message), lines[0]
    if device.startswith("cuda"):
        assert "this machine has 1 CUDA device(s), cuda:0 to cuda:0" in lines[0]
    assert not (tmp_path / "out").exists()
