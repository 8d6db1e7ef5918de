"""Input that looks harmless but is not: corrupt shard sums, NaN in JSON, typed special tokens, words a vocabulary
lacks (Thai on MiniLM), NUL bytes in a corpus. Each gives one clear line, or runs as documented."""
import json
import math
import shutil
import warnings

import numpy as np
import pytest
from click.testing import CliRunner
from real_attention.statistics.sums import CorpusError, CorpusReader, Shard, corpus_summary, merge_shards
from real_attention.engine.errors import InputError
from real_attention.engine.extract import encode
from real_attention.engine.heads import HeadSums
from real_attention.engine.words import SPECIAL_KINDS
from real_attention.outputs.files import json_text, write_json

from conftest import error_line, invoke as shared_invoke
from real_attention import cli

SENTENCES = ["me senté en el banco de mi jardín .", "fui al banco a sacar dinero .", "el banco de mi jardín .",
             "fui al banco .", "mi jardín .", "sacar dinero de el banco ."]


def invoke(*args):
    return shared_invoke(*args, catch_exceptions=True)



# --- merge refuses corrupt sums; JSON never holds NaN --------------------------------------------------------


@pytest.fixture(scope="module")
def two_shards(tmp_path_factory, tiny_model_dir):
    out = tmp_path_factory.mktemp("shards")
    corpus = out / "tiny.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    for i in (1, 2):
        result = invoke("heads", "--corpus", corpus, "--model", tiny_model_dir, "--out", out, "--quiet",
                        "--shard", f"{i}/2")
        assert result.exit_code == 0, result.output
    return [out / "results" / "corpus" / f"tiny-shard-{i}-of-2" for i in (1, 2)]


def corrupted(tmp_path, shards, change):
    """Copies of the shards, the first one's sums.json changed by change(data) (as text, so NaN can be written)."""
    copies = []
    for folder in shards:
        copy = tmp_path / folder.name
        shutil.copytree(folder, copy)
        copies.append(copy)
    path = copies[0] / "sums.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))  # json.dumps writes NaN and Infinity as bare words, as a hand edit would
    return copies


def set_total(name, value):
    def change(data):
        data["totals"][name][1][2] = value
    return change


def set_field(name, value):
    def change(data):
        data[name] = value
    return change


@pytest.mark.parametrize("change, field, what", [
    (set_total("prev", math.nan), "totals.prev", "is nan at layer 2, head 3, not a whole number >= 0"),
    (set_total("punct", 0.5), "totals.punct", "is 0.5 at layer 2, head 3, not a whole number >= 0 (of 2**-32)"),
    (set_total("markers", math.inf), "totals.markers", "is inf at layer 2, head 3"),
    (set_total("entropy", -0.5), "totals.entropy", "is -0.5 at layer 2, head 3"),
    (set_field("units", 0), "units", "is 0, fewer than the"),
    (set_field("sentences", 2.5), "sentences", "is 2.5, not a whole number >= 0"),
    (set_field("tokens", -3), "tokens", "is -3, not a whole number >= 0"),
    (set_field("uniform", math.nan), "uniform", "is nan, not a whole number >= 0"),
    (set_field("fixed_point_bits", 16), "fixed_point_bits", "is 16, not 32"),
    (set_total("self", 10**6 << 32), "totals.self", "reaches 1000000.0, above its count, units"),  # fixed point
    (set_total("next", 10**6 << 32), "totals.next", "above its count, pairs"),
    (set_total("entropy", 10**6 << 32), "totals.entropy", "above the entropy of uniform attention"),
])
def test_merge_refuses_corrupt_sums_naming_the_file_and_the_field(tmp_path, two_shards, change, field, what):
    shards = corrupted(tmp_path, two_shards, change)
    result = invoke("merge", *shards, "--out", tmp_path / "out")
    assert result.exit_code == 2
    line = error_line(result)
    assert line.startswith(f"Error: {shards[0] / 'sums.json'}: field {field!r} ")
    assert what in line
    assert not (tmp_path / "out").exists()


def test_the_untouched_shards_still_merge(two_shards):
    _, sums = merge_shards(two_shards)
    assert sums.sentences == len(SENTENCES)
    assert all(np.isfinite(mean).all() and (mean <= 1 + 1e-6).all()
               for name, mean in sums.means().items() if name != "entropy")


def test_json_never_holds_nan(tmp_path):
    with pytest.raises(ValueError):
        json_text({"mean": math.nan})
    with pytest.raises(ValueError):
        write_json({"mean": [1.0, math.inf]}, tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()


def test_a_corpus_summary_with_no_unit_writes_null_not_nan():
    """A decoder's shard of one-word sentences: no query unit enters any statistic, so every mean is NaN; the
    summary says null for the strongest heads and the uniform entropy."""
    from real_attention.statistics.sums import CorpusRun, Thresholds, label_heads

    sums = HeadSums(totals=np.zeros((9, 2, 3)), sentences=4, units=0, pairs=0, lines=4, causal=True)
    run = CorpusRun(model="m", revision="r", name="c", sha256="0" * 64, format="text", truncate=False,
                    versions={}, shard=Shard(1, 2))
    data = corpus_summary(run, sums, label_heads(sums.means(), sums.uniform_entropy, Thresholds()))
    text = json_text(data)  # raises on NaN
    assert data["uniform_entropy"] is None
    assert data["strongest"] is None or all(head is None for head in data["strongest"].values())
    assert "NaN" not in text


# --- a typed special token is text ---------------------------------------------------------------------------


def test_a_typed_sep_is_text_for_bert(tiny_loaded):
    tokenizer = tiny_loaded.tokenizer
    (sentence,), _ = encode(tokenizer, ["fui al banco [SEP] a sacar dinero ."], 64)
    special_ids = set(tokenizer.all_special_ids) - {tokenizer.unk_token_id}  # the tiny vocabulary lacks "[" and "]"
    assert list(sentence.ids).count(tokenizer.sep_token_id) == 1  # only the tokenizer's own, at the end
    assert sentence.ids[-1] == tokenizer.sep_token_id
    inner = [w for w, k in zip(sentence.words, sentence.kinds) if k not in SPECIAL_KINDS]
    assert "".join(inner).replace(" ", "").count("SEP") == 1
    assert not special_ids & set(sentence.ids[1:-1].tolist())


def test_focus_occurrence_two_can_no_longer_pick_the_final_sep(tiny_model_dir, tmp_path):
    """The focus word [SEP] is typed once; the tokenizer's own final [SEP] is no second occurrence."""
    config = tmp_path / "c.toml"
    config.write_text('[es]\nfocus = "[SEP]"\n[[es.sentences]]\ntext = "fui al banco [SEP] a sacar dinero."\n'
                      'sense = "dinero"\nfocus_occurrence = 2\n', encoding="utf-8")
    result = invoke("run", "--model", tiny_model_dir, "--config", config, "--out", tmp_path, "--no-figures",
                    "--no-report", "--quiet")
    assert result.exit_code == 2
    assert "focus_occurrence = 2 but '[SEP]' occurs 1 time(s)" in error_line(result)


def test_a_typed_end_of_sentence_is_text_for_xlmr():
    from test_units import SPECIAL_NAMES, xlmr_tokenizer_file
    from transformers import PreTrainedTokenizerFast

    tokenizer = PreTrainedTokenizerFast(tokenizer_file=xlmr_tokenizer_file(), **SPECIAL_NAMES)
    (sentence,), _ = encode(tokenizer, ["I typed </s> and <s> and <unk> here."], 64)
    assert sentence.ids[0] == tokenizer.bos_token_id and sentence.ids[-1] == tokenizer.eos_token_id
    assert not set(tokenizer.all_special_ids) & set(sentence.ids[1:-1].tolist())
    assert [k for k in sentence.kinds if k in SPECIAL_KINDS] == [sentence.kinds[0], sentence.kinds[-1]]
    # the tokenizer's own specials still come, by id, when it adds them
    assert tokenizer("a")["input_ids"][-1] == tokenizer.eos_token_id


def test_a_typed_special_is_text_for_a_decoder(tiny_decoders, tmp_path_factory):
    from real_attention.engine.models import choose_model, load_model

    folder = tiny_decoders("llama")
    loaded = load_model(choose_model("en", str(folder), None))
    tokenizer = loaded.tokenizer
    (sentence,), _ = encode(tokenizer, ["the <s> bank <pad> ."], 32)
    assert sentence.ids[0] == tokenizer.bos_token_id  # its own <s>
    assert not {tokenizer.bos_token_id, tokenizer.pad_token_id} & set(sentence.ids[1:].tolist())


@pytest.mark.slow
def test_smollm2_reads_a_typed_im_end_as_text(smollm2):
    """SmolLM2's byte-level BPE: its chat markers typed in a sentence are characters."""
    tokenizer = smollm2.tokenizer
    (sentence,), _ = encode(tokenizer, ["The bank<|im_end|> closed <|endoftext|>."], 64)
    assert not set(tokenizer.all_special_ids) & set(sentence.ids.tolist())
    assert "<|im_end|>" in "".join(sentence.words)


# --- words a vocabulary lacks --------------------------------------------------------------------------------

THAI = '[th]\nfocus = "ธนาคาร"\n[[th.sentences]]\ntext = "ฉันไป ธนาคาร เพื่อ ถอนเงิน"\nsense = "ถอนเงิน"\n'


def test_thai_on_minilm_runs_and_names_the_unknown_words(needs_minilm, tmp_path):
    config = tmp_path / "th.toml"
    config.write_text(THAI, encoding="utf-8")
    result = CliRunner().invoke(cli, ["run", "--model", "minilm", "--lang", "th", "--config", str(config),
                                      "--out", str(tmp_path), "--no-figures", "--no-report", "--quiet"])
    assert result.exit_code == 0, result.output
    assert "belong to another model" not in result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("Warning:")]
    assert "lacks characters of 3 word(s), which became [UNK]" in line
    assert "sentence 1: 'ฉันไป', 'ธนาคาร', 'ถอนเงิน'" in line
    assert (tmp_path / "results" / "th" / "summary.json").is_file()


def test_the_api_warns_about_unknown_words(tiny_loaded):
    import real_attention as ra

    with pytest.warns(UserWarning, match=r"sentence 1: 'xyz', 'qwv'"):
        att = ra.attend(tiny_loaded, "el banco xyz qwv .")
    assert att[0].words[1:-1] == ("el", "banco", "xyz", "qwv", ".")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ra.attend(tiny_loaded, "el banco .")  # every word known: no warning


# --- NUL bytes in a corpus -----------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt, lines", [
    ("text", [b"el banco .", b"", b"fui al\x00 banco", b"mi jardin ."]),
    ("jsonl", [b'{"text": "el banco ."}', b"", b'{"text": "fui al\\u0000 banco"}', b'{"text": "mi jardin ."}']),
])
def test_a_nul_byte_names_the_file_and_the_line(fmt, lines):
    stream = [line + b"\n" for line in lines]
    with pytest.raises(CorpusError, match=r"^line 3 of wiki\.txt holds a NUL byte"):
        list(CorpusReader(iter(stream), fmt, source="wiki.txt"))


def test_a_nul_byte_stops_heads_with_one_line(tiny_model_dir, tmp_path):
    corpus = tmp_path / "broken.txt"
    corpus.write_bytes(b"el banco .\nfui al banco\x00\x00 .\n")
    result = invoke("heads", "--corpus", corpus, "--model", tiny_model_dir, "--out", tmp_path / "out", "--quiet")
    assert result.exit_code == 2
    assert error_line(result).startswith(f"Error: line 2 of {corpus} holds a NUL byte (\\x00)")
    assert not [path for path in (tmp_path / "out").rglob("*") if path.is_file()]


def test_input_error_is_the_base_of_corpus_errors():
    assert issubclass(CorpusError, InputError)


def test_a_word_over_wordpieces_limit_is_named_as_too_long_not_as_unknown_characters(tiny_loaded):
    """WordPiece makes a word of more than 100 characters [UNK] whole: the warning said its characters were
    missing from the vocabulary and advised another language's model."""
    from real_attention.engine.models import check_encodes

    long_word = "banco" * 30  # 150 characters the vocabulary has
    note = check_encodes(tiny_loaded, [f"el {long_word} de mi jardín", "el banco ฉัน"])
    assert "1 word(s) are longer than the 100 characters" in note and "so each became [UNK] whole" in note
    assert "lacks characters of 1 word(s)" in note and "sentence 2: 'ฉัน'" in note
    assert check_encodes(tiny_loaded, ["el banco de mi jardín"]) is None


@pytest.mark.parametrize("args, says, where", [
    (["run", "--measure", "weight"], "Invalid value for '--measure': 'weight' is not one of", "real-attention run"),
    (["heads", "--batch-size", "x"], "Invalid value for '--batch-size'", "real-attention heads"),
    (["run", "--bogus"], "No such option '--bogus'", "real-attention run"),
    (["--bogus"], "No such option '--bogus'", "real-attention"),
    (["nosuch"], "No such command 'nosuch'", "real-attention"),
    (["merge"], "Missing argument", "real-attention merge"),
    (["run", "extra"], "unexpected extra argument (extra)", "real-attention run"),
    (["ru"], "No such command 'ru'. Did you mean 'run'?", "real-attention"),  # no "?." before the hint
    (["heads", "--corpus", "c.txt", "--limit"], "Option '--limit' requires an argument.", "real-attention heads"),
    (["run", "--batch-size"], "Option '--batch-size' requires an argument.", "real-attention run"),  # no context
    (["lesson", "a", "b"], "Got unexpected extra arguments (a b).", "real-attention lesson"),
    (["heads", "--bogus"], "(Did you mean one of:", "real-attention heads"),
    # Path("") is the current folder: an unset $CORPUS was read as "--corpus . is a folder"
    (["compare", "--corpus", "", "--model", "minilm"], "Invalid value for '--corpus': it is empty; give a path",
     "real-attention compare"),
    (["importance", "--corpus", " ", "--model", "minilm"], "Invalid value for '--corpus': it is empty",
     "real-attention importance"),
    (["syntax", "--treebank", "", "--model", "minilm"], "Invalid value for '--treebank': it is empty",
     "real-attention syntax"),
    (["run", "--config", ""], "Invalid value for '--config': it is empty", "real-attention run"),
    (["merge", ""], "Invalid value for 'SHARD_DIR...': it is empty", "real-attention merge"),
])
def test_a_usage_error_is_one_error_line_that_names_the_help(args, says, where):
    result = shared_invoke(*args, prog_name="real-attention")
    assert result.exit_code == 2
    assert result.output.splitlines() == [error_line(result)]  # no usage block, no hint line before it
    assert says in error_line(result)
    assert error_line(result).endswith(f"See '{where} --help'.") and "?." not in error_line(result)
    assert ") See" not in error_line(result) or "?) See" in error_line(result)
    assert "?). See" not in error_line(result)


@pytest.mark.parametrize("command", ["detect", "importance", "run", "compare"])
def test_an_empty_model_is_one_input_error_not_the_current_folder(command, tmp_path, monkeypatch):
    """--model "" was looked for as a model folder ("model (--model)  is not a model folder", exit 1)."""
    monkeypatch.chdir(tmp_path)
    corpus = tmp_path / "c.txt"
    corpus.write_text("una frase.\n", encoding="utf-8")
    extra = {"importance": ["--corpus", str(corpus)], "compare": ["--corpus", str(corpus), "--model", "minilm"]}
    result = shared_invoke(command, "--model", "", *extra.get(command, []), "--out", str(tmp_path / "o"))
    assert result.exit_code == 2, result.output
    assert result.output.strip().endswith(' must be a non-empty string (a packaged name such as "minilm", a Hub id '
                                          'or a folder), not an empty string'), result.output
    assert result.output.startswith("Error: model ") and len(result.output.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt"]


def test_the_command_alone_prints_its_help_not_an_error():
    result = shared_invoke(prog_name="real-attention")
    assert result.output.startswith("Usage: real-attention [OPTIONS] COMMAND") and "Error" not in result.output
    assert "Commands:" in result.output


def test_help_and_version_still_print_and_exit_0():
    assert shared_invoke("run", "--help", prog_name="real-attention").output.startswith("Usage: real-attention run")
    assert shared_invoke("--version").exit_code == 0


@pytest.mark.parametrize("damage", ["garbage", "cut"])
def test_a_damaged_weights_file_is_one_error_line(tiny_model_dir, tmp_path, damage):
    # safetensors' own error is no OSError: it was a traceback asking for a bug report
    import real_attention as ra

    folder = tmp_path / "model"
    shutil.copytree(tiny_model_dir, folder)
    weights = folder / "model.safetensors"
    whole = weights.read_bytes()
    weights.write_bytes(b"\xff" * 64 if damage == "garbage" else whole[:len(whole) // 2])
    with pytest.raises(ra.ModelUnavailable, match=f"cannot load model {folder}: its weights file cannot be read"):
        ra.load(folder)
    result = shared_invoke("run", "--model", folder, "--out", tmp_path / "out", "--no-figures", "--quiet")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert error_line(result).startswith(f"Error: cannot load model {folder}: its weights file cannot be read (")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["heads", "compare", "importance"])
def test_a_corpus_whose_lines_end_in_cr_alone_is_refused_not_read_as_one_sentence(tiny_model_dir, tmp_path, command):
    # it was one line: four sentences pooled as one, the previous/next statistics across their boundaries
    corpus = tmp_path / "mac.txt"
    corpus.write_bytes(b"el banco .\rfui al banco .\rmi jard\xc3\xadn .\r")
    model = ["--model", str(tiny_model_dir)]
    result = shared_invoke(command, "--corpus", corpus, *model, *(model if command == "compare" else []),
                           "--out", tmp_path / "out", "--quiet")
    assert result.exit_code == 2, result.output
    assert "holds a carriage return (CR) inside the line: its lines end in CR alone" in error_line(result)
    assert not (tmp_path / "out").exists()
    corpus.write_bytes(b"el banco .\nfui al\rbanco .\n")  # a stray CR inside a line of an LF file is text
    assert shared_invoke(command, "--corpus", corpus, *model, *(model if command == "compare" else []),
                         "--out", tmp_path / "stray", "--quiet", "--format", "svg").exit_code == 0
    corpus.write_bytes(b"el banco .\r\nfui al banco .\r\n")  # CR LF is a line end
    assert shared_invoke(command, "--corpus", corpus, *model, *(model if command == "compare" else []),
                         "--out", tmp_path / "out", "--quiet", "--format", "svg").exit_code == 0


def test_a_batch_size_beyond_the_corpus_runs_no_dummy_rows_for_the_rest(tiny_model_dir, tmp_path):
    # every batch has a fixed shape, its empty rows filled with dummies: 3 lines at --batch-size 65536 ran 65,533
    # of them (minutes and gigabytes); the corpus's own line count bounds the rows, the same for every shard
    corpus = tmp_path / "c.txt"
    corpus.write_text("el banco .\nfui al banco .\nmi jardín .\n", encoding="utf-8")
    tables = {}
    for size in ("3", "65536"):
        result = shared_invoke("heads", "--corpus", corpus, "--model", tiny_model_dir, "--batch-size", size,
                               "--no-figures", "--quiet", "--out", tmp_path / size)
        assert result.exit_code == 0, result.output
        folder = tmp_path / size / "results" / "corpus" / "c"
        assert json.loads((folder / "summary.json").read_text())["engine"]["batch_size"] == 3
        tables[size] = (folder / "heads.csv").read_bytes(), (folder / "sums.json").read_bytes()
    assert tables["3"] == tables["65536"]
    shard = shared_invoke("heads", "--corpus", corpus, "--model", tiny_model_dir, "--batch-size", "65536",
                          "--shard", "2/2", "--no-figures", "--quiet", "--out", tmp_path / "shard")
    assert shard.exit_code == 0, shard.output
    summary = json.loads((tmp_path / "shard/results/corpus/c-shard-2-of-2/summary.json").read_text())
    assert summary["engine"]["batch_size"] == 3  # the whole corpus's lines, not the shard's
