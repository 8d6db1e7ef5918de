"""heads --corpus and merge: pooled head statistics, padding, shards, labels, atomic output, the CLI."""
from __future__ import annotations

import io
import json
import re

import numpy as np
import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from real_attention.statistics import streaming
from real_attention.statistics import sums as corpus
from real_attention.statistics.sums import (STATISTICS, CorpusError, CorpusReader, HeadSums, LABELS, Shard, Thresholds, corpus_sums,
                             label_heads, merge_shards)
from real_attention.engine.heads import NEXT_OFFSET, PREVIOUS_OFFSET, kernel, word_sums
from real_attention.engine.pipeline import attend_with_sums
from real_attention.engine.words import FIRST_SPECIAL, LAST_SPECIAL, PAD, PUNCT, WORD, merge_maps
from real_attention import cli
from conftest import error_line

# Words of the tiny vocabulary; "sentí", "jardín" and "unos" are split into pieces.
SENTENCES = [
    "me sentí en el banco de mi jardín .",
    "fui al banco a sacar dinero .",
    "i sat on the bank !",
    "i went to the bank to get some money , at the end of my garden ?",
    "unos",
    "my garden .",
    "el banco de mi jardín , el banco de mi jardín .",
    "i went to get money",
    "the bank of the garden , the end .",
    "me sentí en el jardín de unos , mi banco ?",
]
TOO_LONG = " ".join(["the bank"] * 20)  # 40 words: over the tiny model's 24 positions


def totals_of(maps: np.ndarray, units: np.ndarray, kinds: np.ndarray) -> np.ndarray:
    """The kernel on numpy input, layer by layer: maps (L, B, H, t, t), units (B, t), kinds (B, n) ->
    (len(STATISTICS), L, H) int64 fixed-point totals over the batch."""
    units, kinds = torch.from_numpy(units), torch.from_numpy(kinds)
    return np.stack([kernel(torch.from_numpy(layer), units, kinds)[1].sum(dim=0).numpy() for layer in maps], axis=1)


def sums_of(maps, units, kinds) -> HeadSums:
    sizes = (kinds != PAD).sum(axis=1)
    return HeadSums(fixed=totals_of(maps, units, kinds), sentences=len(sizes), units=int(sizes.sum()),
                    pairs=int((sizes - 1).sum()), uniform=float((sizes * np.log(sizes)).sum()))


def shifted(n: int, offset: int) -> np.ndarray:
    """(n, n) a head that looks `offset` units away; the rows without such a unit look at themselves."""
    weights = np.eye(n, k=offset, dtype=np.float32)
    weights[weights.sum(axis=1) == 0] = np.eye(n, dtype=np.float32)[weights.sum(axis=1) == 0]
    return weights


def reader(lines: list[str], **options) -> CorpusReader:
    return CorpusReader(io.BytesIO(("\n".join(lines) + "\n").encode("utf-8")), **options)


# --- hand-made arrays ---------------------------------------------------------------------------------------


def test_a_previous_head_and_a_next_head_have_known_statistics():
    n = 6
    maps = np.stack([shifted(n, PREVIOUS_OFFSET), shifted(n, NEXT_OFFSET), np.full((n, n), 1 / n, np.float32)])
    maps = maps[None, None]  # (L=1, B=1, H=3, n, n)
    kinds = np.array([[FIRST_SPECIAL, WORD, WORD, PUNCT, WORD, LAST_SPECIAL]])
    means = sums_of(maps, np.arange(n)[None], kinds).means()
    np.testing.assert_allclose(means["prev"], [[1, 0, 1 / n]], atol=1e-7)
    np.testing.assert_allclose(means["next"], [[0, 1, 1 / n]], atol=1e-7)
    np.testing.assert_allclose(means["self"], [[1 / n, 1 / n, 1 / n]], atol=1e-7)
    # previous head: rows 0 and 1 look at [CLS], row 4 at the punctuation; next head: rows 4 and 5 at [SEP]
    np.testing.assert_allclose(means["first_special"], [[2 / n, 0, 1 / n]], atol=1e-7)
    np.testing.assert_allclose(means["last_special"], [[0, 2 / n, 1 / n]], atol=1e-7)
    np.testing.assert_allclose(means["punct"], [[1 / n, 1 / n, 1 / n]], atol=1e-7)
    np.testing.assert_allclose(means["markers"], means["first_special"] + means["last_special"] + means["punct"], atol=1e-7)
    np.testing.assert_allclose(means["entropy"], [[0, 0, np.log(n)]], atol=1e-6)
    # the uniform head puts 3 x float32(1/6) = 0.50000001 on the markers, exactly summed: just above the marker
    # threshold of 0.5, which it would meet first; a hair higher threshold leaves it broad
    labels = label_heads(means, np.log(n), Thresholds(marker=0.5 + 1e-6))
    assert labels.tolist() == [["previous", "next", "broad"]]


def test_piece_statistics_are_those_of_the_merged_word_maps():
    rng = np.random.default_rng(0)
    units = np.array([0, 1, 1, 1, 2, 3, 3, 4])  # [CLS] w(3 pieces) . w(2 pieces) [SEP]
    t = len(units)
    maps = rng.dirichlet(np.ones(t), size=(2, 1, 3, t)).astype(np.float32)  # (L, B, H, t, t)
    kinds = np.array([[FIRST_SPECIAL, WORD, PUNCT, WORD, LAST_SPECIAL]])
    got = sums_of(maps, units[None], kinds).means()
    words = merge_maps(torch.from_numpy(maps[:, 0]), torch.from_numpy(units)[None].expand(2, -1), 5).numpy()  # (L, H, n, n)
    np.testing.assert_allclose(got["prev"], np.diagonal(words, -1, axis1=-2, axis2=-1).mean(axis=-1), atol=1e-6)
    np.testing.assert_allclose(got["next"], np.diagonal(words, 1, axis1=-2, axis2=-1).mean(axis=-1), atol=1e-6)
    np.testing.assert_allclose(got["punct"], words[..., 2].mean(axis=-1), atol=1e-6)
    np.testing.assert_allclose(got["markers"], words[..., [0, 2, 4]].sum(axis=-1).mean(axis=-1), atol=1e-6)
    # the piece-level path and the word-level path (run's word_sums) are one function on the same maps
    from real_attention.engine.words import WordAttention

    attention = WordAttention("x", tuple("abcde"), tuple(kinds[0]), np.ascontiguousarray(words, dtype=np.float32))
    np.testing.assert_allclose(word_sums([attention]).totals, sums_of(maps, units[None], kinds).totals, atol=1e-6)


def test_pads_never_enter_a_statistic():
    rng = np.random.default_rng(1)
    long_units, short_units = np.arange(7), np.array([0, 1, 1, 2, 3])
    long_maps = rng.dirichlet(np.ones(7), size=(2, 3, 7)).astype(np.float32)  # (L, H, t, t)
    short_maps = rng.dirichlet(np.ones(5), size=(2, 3, 5)).astype(np.float32)
    long_kinds, short_kinds = np.array([FIRST_SPECIAL, WORD, WORD, PUNCT, WORD, WORD, LAST_SPECIAL]), np.array([FIRST_SPECIAL, WORD, WORD, LAST_SPECIAL])
    apart = sums_of(long_maps[:, None], long_units[None], long_kinds[None]) + sums_of(
        short_maps[:, None], short_units[None], short_kinds[None])
    padded_maps = rng.random((2, 2, 3, 7, 7)).astype(np.float32) * 50  # garbage in the pad rows and columns
    padded_maps[:, 0] = long_maps
    padded_maps[:, 1, :, :5, :5] = short_maps
    padded_maps[:, 1, :, :5, 5:] = 0  # real queries give pads no weight (the attention mask)
    units = np.stack([long_units, np.r_[short_units, -1, -1]])
    kinds = np.stack([long_kinds, np.r_[short_kinds, PAD, PAD, PAD]])
    together = sums_of(padded_maps, units, kinds)
    np.testing.assert_allclose(together.totals, apart.totals, rtol=1e-6, atol=1e-6)
    assert (together.units, together.pairs) == (apart.units, apart.pairs) == (11, 9)


def test_labels_follow_the_documented_precedence():
    shape = (1, len(LABELS))
    means = {name: np.zeros(shape) for name in STATISTICS}
    means["entropy"] = np.full(shape, 0.1)
    for column, name in enumerate(["prev", "next", "self", "first_special", "last_special", "punct", "markers",
                                   "first"]):
        means[name][0, column] = 0.6
    means["first"][0, 3] = 0.6  # a first special token is the first unit: first_special comes first
    means["entropy"][0, 8] = 2.0
    # a head over both thresholds takes the earlier label
    means["last_special"][0, 0] = 0.9
    labels = label_heads(means, uniform_entropy=2.0, thresholds=Thresholds())
    assert labels.tolist() == [list(LABELS)]
    assert label_heads(means, 2.0, Thresholds(position=0.7))[0, 0] == "last_special"


def test_thresholds_must_be_fractions():
    with pytest.raises(ValueError, match="threshold broad = 1.5"):
        Thresholds(broad=1.5)


def test_head_sums_add_and_round_trip_exactly():
    rng = np.random.default_rng(2)
    a = HeadSums(totals=rng.random((len(STATISTICS), 2, 3)), sentences=2, units=9, pairs=7, uniform=3 + 0.1 + 0.2)
    b = HeadSums(totals=rng.random((len(STATISTICS), 2, 3)), sentences=1, units=4, pairs=3, uniform=3 + 1 / 3, skipped=1)
    total = a + b
    np.testing.assert_array_equal(total.totals, a.totals + b.totals)
    assert (total.sentences, total.units, total.pairs, total.skipped) == (3, 13, 10, 1)
    again = HeadSums.from_json(json.loads(json.dumps(total.to_json())))
    np.testing.assert_array_equal(again.totals, total.totals)
    for name in corpus.COUNT_FIELDS:
        assert getattr(again, name) == getattr(total, name), name


# --- reading ------------------------------------------------------------------------------------------------


def test_shards_split_lines_from_one_and_blank_lines_are_counted():
    lines = ["a", "", "b", "c", "  ", "d", "e"]
    whole = reader(lines)
    assert list(whole) == ["a", "b", "c", "d", "e"] and (whole.lines, whole.blank) == (7, 2)
    parts = [reader(lines, shard=Shard(i, 3)) for i in (1, 2, 3)]
    assert [list(part) for part in parts] == [["a", "c", "e"], [], ["b", "d"]]
    assert [part.lines for part in parts] == [Shard(i, 3).lines_of(7) for i in (1, 2, 3)] == [3, 2, 2]
    assert {part.sha256 for part in parts} == {whole.sha256}


@pytest.mark.parametrize("text", ["3/2", "0/2", "1/0", "2", "a/b"])
def test_bad_shards_are_refused(text):
    with pytest.raises(CorpusError, match="shard"):
        Shard.parse(text)


def test_jsonl_reads_the_text_field_and_names_a_bad_line():
    good = reader(['{"text": "i sat"}', "", '{"text": "on the bank", "id": 2}'], fmt="jsonl")
    assert list(good) == ["i sat", "on the bank"]
    with pytest.raises(CorpusError, match="line 2 of the corpus is not JSON"):
        list(reader(['{"text": "i sat"}', "{oops"], fmt="jsonl"))
    with pytest.raises(CorpusError, match='line 1 of the corpus has no string field "text"'):
        list(reader(['{"sentence": "i sat"}'], fmt="jsonl"))
    with pytest.raises(CorpusError, match="line 2 of the corpus is not UTF-8"):
        list(CorpusReader(io.BytesIO(b"ok\n\xff\n")))


# --- the tiny model -----------------------------------------------------------------------------------------


def test_corpus_sums_equal_the_sums_of_runs_word_maps(tiny_loaded):
    means = corpus_sums(tiny_loaded, reader(SENTENCES), batch_size=4).means()
    expected = word_sums(attend_with_sums(tiny_loaded, SENTENCES)[0]).means()
    for name in STATISTICS:
        np.testing.assert_allclose(means[name], expected[name], atol=1e-6, err_msg=name)


def test_run_and_heads_corpus_write_the_same_statistics(tmp_path, tiny_model_dir):
    sentences = ["me sentí en el banco de mi jardín .", "fui al banco a sacar dinero .", "el banco de mi jardín ."]
    config = tmp_path / "es.toml"
    senses = ["jardín", "dinero", "jardín"]
    config.write_text('[es]\nfocus = "banco"\n' + "".join(
        f'[[es.sentences]]\ntext = "{text}"\nsense = "{sense}"\n' for text, sense in zip(sentences, senses)
    ), encoding="utf-8")
    corpus_path = tmp_path / "same.txt"
    corpus_path.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    runner = CliRunner()
    ran = runner.invoke(cli, ["run", "--config", str(config), "--model", str(tiny_model_dir), "--out", str(tmp_path),
                              "--no-figures", "--no-report"])
    assert ran.exit_code == 0, ran.output
    pooled = runner.invoke(cli, heads_args(corpus_path, tiny_model_dir, tmp_path, "--batch-size", "2"))
    assert pooled.exit_code == 0, pooled.output
    run_heads = pd.read_csv(tmp_path / "results" / "es" / "heads.csv")
    corpus_heads = pd.read_csv(tmp_path / "results" / "corpus" / "same" / "heads.csv")
    assert run_heads[["layer", "head"]].equals(corpus_heads[["layer", "head"]])
    for name in STATISTICS:
        np.testing.assert_allclose(run_heads[name], corpus_heads[name], atol=2e-6, err_msg=name)


def test_padding_does_not_change_any_statistic(tiny_loaded):
    one = corpus_sums(tiny_loaded, reader(SENTENCES), batch_size=1)
    sixteen = corpus_sums(tiny_loaded, reader(SENTENCES), batch_size=16)
    np.testing.assert_allclose(sixteen.totals, one.totals, rtol=1e-6, atol=1e-6)
    assert (one.sentences, one.units, one.pairs, one.tokens) == (sixteen.sentences, sixteen.units,
                                                                 sixteen.pairs, sixteen.tokens)


@pytest.mark.parametrize("units", ["text", "tokenizer"])
def test_every_bucket_of_a_long_corpus_uses_the_unit_rule(tiny_loaded, units):
    """More lines than one length-sorted bucket holds: each bucket is cut into units by the same rule."""
    from real_attention.statistics.sums import BUCKET_BATCHES
    from real_attention.engine.extract import encode

    # the rules differ on "bank's": one unit by the text, three (bank ' s) by the tokenizer's words
    lines = ["fui al banco, a sacar dinero.", "i sat at the bank's end."] * (2 * BUCKET_BATCHES)
    sums = corpus_sums(tiny_loaded, reader(lines), batch_size=1, units=units)  # four buckets
    encoded, _ = encode(tiny_loaded.tokenizer, lines, tiny_loaded.max_tokens, units=units)
    assert sums.sentences == len(lines) and sums.units == sum(len(e.words) for e in encoded)


def test_long_lines_are_skipped_or_cut_and_counted(tiny_loaded):
    skipped = corpus_sums(tiny_loaded, reader(SENTENCES[:3] + [TOO_LONG]), batch_size=2)
    assert (skipped.sentences, skipped.skipped, skipped.truncated) == (3, 1, 0)
    cut = corpus_sums(tiny_loaded, reader(SENTENCES[:3] + [TOO_LONG]), batch_size=2, truncate=True)
    assert (cut.sentences, cut.skipped, cut.truncated) == (4, 0, 1)
    assert cut.tokens == skipped.tokens + tiny_loaded.max_tokens


def heads_args(corpus_file, model_dir, out, *extra):
    return ["heads", "--corpus", str(corpus_file), "--model", str(model_dir), "--out", str(out), "--quiet", *extra]


@pytest.fixture()
def corpus_file(tmp_path):
    path = tmp_path / "tiny.txt"
    path.write_text("\n".join(SENTENCES[:6] + ["", TOO_LONG] + SENTENCES[6:]) + "\n", encoding="utf-8")
    return path


def test_cli_writes_heads_summary_sums_and_the_label_grid(tmp_path, corpus_file, tiny_model_dir):
    args = heads_args(corpus_file, tiny_model_dir, tmp_path / "out", "--batch-size", "3")
    result = CliRunner().invoke(cli, [a for a in args if a != "--quiet"])  # the summary, not the bar
    assert result.exit_code == 0, result.output
    folder = tmp_path / "out" / "results" / "corpus" / "tiny"
    assert sorted(p.name for p in folder.iterdir()) == ["heads.csv", "summary.json", "sums.json"]
    figures = tmp_path / "out" / "figures" / "corpus" / "tiny"
    assert sorted(p.name for p in figures.iterdir()) == ["labels.png", "statistics.png"]
    lines = (folder / "heads.csv").read_text().splitlines()
    assert lines[0] == ("layer,head,label,prev,next,self,first,first_special,last_special,punct,markers,entropy,"
                        "n_sentences,n_words")
    assert len(lines) == 1 + 3 * 4 and lines[1].startswith("1,1,") and lines[-1].startswith("3,4,")
    summary = json.loads((folder / "summary.json").read_text())
    # words: the tiny sentences are written with spaces around punctuation, so a unit per split plus [CLS], [SEP]
    from transformers import AutoTokenizer

    pieces = sum(len(ids) for ids in AutoTokenizer.from_pretrained(tiny_model_dir)(SENTENCES)["input_ids"])
    assert summary["counts"] == {"lines": 12, "blank": 1, "sentences": 10, "skipped": 1, "truncated": 0,
                                 "words": sum(len(s.split()) + 2 for s in SENTENCES), "tokens": pieces}
    assert summary["shard"] is None and summary["thresholds"] == {"position": 0.5, "marker": 0.5, "broad": 0.8}
    assert "1 line(s) too long skipped, 0 cut, 1 blank" in result.output
    # rerunning gives the same bytes
    before = {p.name: p.read_bytes() for p in [*folder.iterdir(), *figures.iterdir()]}
    again = CliRunner().invoke(cli, heads_args(corpus_file, tiny_model_dir, tmp_path / "out", "--batch-size", "3"))
    assert again.exit_code == 0
    assert before == {p.name: p.read_bytes() for p in [*folder.iterdir(), *figures.iterdir()]}


def test_shards_merge_to_the_unsharded_run(tmp_path, corpus_file, tiny_model_dir):
    runner = CliRunner()
    # one batch size: every sentence gets the same float32 maps in every run (fixed-shape batches, test_exact.py)
    whole = runner.invoke(cli, heads_args(corpus_file, tiny_model_dir, tmp_path / "whole", "--batch-size", "1"))
    assert whole.exit_code == 0, whole.output
    for i in (1, 2, 3):
        shard = runner.invoke(cli, heads_args(corpus_file, tiny_model_dir, tmp_path / "shards", "--shard", f"{i}/3",
                                              "--batch-size", "1", "--no-figures"))
        assert shard.exit_code == 0, shard.output
    shards = [tmp_path / "shards" / "results" / "corpus" / f"tiny-shard-{i}-of-3" for i in (3, 1, 2)]
    merged = runner.invoke(cli, ["merge", *map(str, shards), "--out", str(tmp_path / "merged"), "--no-figures"])
    assert merged.exit_code == 0, merged.output
    expected, got = (tmp_path / name / "results" / "corpus" / "tiny" for name in ("whole", "merged"))
    a, b = (HeadSums.from_json(json.loads((f / "sums.json").read_text())) for f in (expected, got))
    np.testing.assert_allclose(b.totals, a.totals, rtol=0, atol=1e-9)
    for name, value in a.means().items():
        np.testing.assert_allclose(b.means()[name], value, rtol=0, atol=1e-9)
    assert (a.sentences, a.units, a.lines, a.blank, a.skipped) == (b.sentences, b.units, b.lines, b.blank, b.skipped)
    assert (got / "heads.csv").read_text() == (expected / "heads.csv").read_text()
    merged_summary, whole_summary = (json.loads((f / "summary.json").read_text()) for f in (got, expected))
    assert merged_summary.pop("engine") == {"name": "merge", "shards": 3, "batch_size": 1, "device": "cpu",
                                            "torch_threads": whole_summary["engine"]["torch_threads"], "shapes": 3,
                                            "differs": []}
    assert whole_summary.pop("engine")["name"] == "single-process"
    assert merged_summary == whole_summary
    # a missing or repeated shard, or an unsharded folder, is refused
    for args, message in [
        (shards[:2], "Error: shard(s) 2/3 missing; merge needs all 3"),
        ([shards[0], shards[0], *shards[1:]], f"Error: {shards[0]} and {shards[0]} are both shard 3/3"),
        ([expected], f"Error: {expected} was not written with shard (--shard); merge takes the shards of one run"),
    ]:
        refused = runner.invoke(cli, ["merge", *map(str, args), "--out", str(tmp_path / "refused")])
        assert refused.exit_code == 2 and refused.output.strip().splitlines()[-1] == message
    assert not (tmp_path / "refused").exists()


def test_thresholds_relabel_heads_and_are_recorded(tmp_path, corpus_file, tiny_model_dir):
    runner = CliRunner()
    # broad=0: every head that meets no earlier rule is broad; position=0 and marker=1: every head is previous
    args = heads_args(corpus_file, tiny_model_dir, tmp_path / "broad", "--threshold", "broad=0", "--no-figures")
    assert runner.invoke(cli, args).exit_code == 0
    args = heads_args(corpus_file, tiny_model_dir, tmp_path / "prev", "--threshold", "position=0",
                      "--threshold", "marker=1", "--no-figures")
    assert runner.invoke(cli, args).exit_code == 0
    broad, prev = (json.loads((tmp_path / name / "results" / "corpus" / "tiny" / "summary.json").read_text())
                   for name in ("broad", "prev"))
    assert broad["thresholds"] == {"position": 0.5, "marker": 0.5, "broad": 0.0}
    assert broad["labels"]["mixed"] == 0 and broad["labels"]["broad"] > 0
    assert prev["thresholds"] == {"position": 0.0, "marker": 1.0, "broad": 0.8}
    assert prev["labels"]["previous"] == 12
    frame = pd.read_csv(tmp_path / "prev" / "results" / "corpus" / "tiny" / "heads.csv")
    assert set(frame["label"]) == {"previous"}


def test_shards_merge_at_any_batch_size_within_float32_noise(tiny_loaded):
    whole = corpus_sums(tiny_loaded, reader(SENTENCES), batch_size=4)
    parts = [corpus_sums(tiny_loaded, reader(SENTENCES, shard=Shard(i, 2)), batch_size=4) for i in (1, 2)]
    merged = parts[0] + parts[1]
    np.testing.assert_allclose(merged.totals, whole.totals, rtol=1e-6, atol=1e-6)
    assert (merged.sentences, merged.units, merged.pairs) == (whole.sentences, whole.units, whole.pairs)


def test_stdin_and_jsonl(tmp_path, tiny_model_dir):
    text = "\n".join(json.dumps({"text": s}) for s in SENTENCES[:3])
    result = CliRunner().invoke(cli, ["heads", "--corpus", "-", "--input-format", "jsonl", "--model", str(tiny_model_dir),
                                      "--out", str(tmp_path), "--quiet"], input=text)
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "results" / "corpus" / "stdin" / "summary.json").read_text())
    assert summary["counts"]["sentences"] == 3 and summary["corpus"]["format"] == "jsonl"


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--shard", "3/2"], "Error: shard 3/2 does not exist; use shard (--shard) i/N with 1 <= i <= N"),
        (["--name", "a/b"], "Error: name (--name) 'a/b' cannot be a folder name: use one plain name without "
                            "slashes, like es or my-corpus"),
        (["--threshold", "wide=0.3"],
         "Error: thresholds (--threshold) 'wide=0.3': expected NAME=VALUE with NAME one of position, marker, broad"),
        (["--threshold", "broad=high"], "Error: thresholds (--threshold) 'broad=high': 'high' is not a number"),
        (["--threshold", "marker=2"], "Error: thresholds (--threshold) 'marker=2': marker must be between 0 and 1"),
    ],
)
def test_bad_options_give_one_error_line(tmp_path, corpus_file, tiny_model_dir, extra, message):
    result = CliRunner().invoke(cli, heads_args(corpus_file, tiny_model_dir, tmp_path / "out", *extra))
    assert result.exit_code == 2 and result.output.strip() == message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["heads", "importance", "compare"])
def test_a_treebank_given_as_a_corpus_is_refused(tmp_path, tiny_model_dir, command):
    """heads, importance and compare read a .conllu's comment and token lines as sentences, without a word."""
    treebank = tmp_path / "ewt.conllu"
    treebank.write_text("# sent_id = 1\n1\tFui\tir\tVERB\t_\t_\t0\troot\t_\t_\n\n", encoding="utf-8")
    model = str(tiny_model_dir)
    arguments = {"heads": heads_args(treebank, tiny_model_dir, tmp_path / "out"),
                 "importance": ["importance", "--corpus", str(treebank), "--model", model, "--out", str(tmp_path / "out")],
                 "compare": ["compare", "--corpus", str(treebank), "--model", model, "--model", model, "--out",
                             str(tmp_path / "out")]}[command]
    result = CliRunner().invoke(cli, arguments)
    named = "inputs (--corpus)" if command == "heads" else "--corpus"
    assert result.exit_code == 2 and result.output.strip() == (
        f"Error: {named} {treebank} is a CoNLL-U treebank, not one sentence per line; to score heads as "
        "parsers on it, use `real-attention syntax --treebank FILE`"), result.output
    assert not (tmp_path / "out").exists()


def test_a_missing_or_empty_corpus_is_bad_input(tmp_path, tiny_model_dir):
    missing = CliRunner().invoke(cli, heads_args(tmp_path / "nope.txt", tiny_model_dir, tmp_path / "out"))
    assert missing.exit_code == 2 and missing.output.strip() == f"Error: inputs (--corpus) {tmp_path / 'nope.txt'}: no such file"
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n" + TOO_LONG + "\n")
    result = CliRunner().invoke(cli, heads_args(empty, tiny_model_dir, tmp_path / "out"))
    assert result.exit_code == 2
    assert result.output.strip() == ("Error: the corpus 'empty' has no sentences to analyse: 3 line(s) read, "
                                     "2 blank, 1 too long; pass truncate=True (--truncate) to cut long lines")
    assert [p for p in (tmp_path / "out").rglob("*") if p.is_file()] == []


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_an_interrupted_or_failing_run_leaves_nothing(tmp_path, corpus_file, tiny_model_dir, monkeypatch, error):
    calls = []
    real = streaming.kernel  # where corpus_sums calls it

    def fail_on_the_second_layer(*args, **options):
        calls.append(1)
        if len(calls) == 2:
            raise error("stop")
        return real(*args, **options)

    monkeypatch.setattr(streaming, "kernel", fail_on_the_second_layer)
    result = CliRunner().invoke(cli, heads_args(corpus_file, tiny_model_dir, tmp_path / "out", "--batch-size", "2"))
    assert result.exit_code != 0 and len(calls) == 2
    assert [p for p in (tmp_path / "out").rglob("*") if p.is_file()] == []
    assert not list((tmp_path / "out").rglob(".*staging*"))


def test_label_grid_shows_every_head(tiny_loaded):
    from real_attention.outputs.corpus_figures import label_grid

    labels = np.array([["previous", "next", "mixed"], ["last_special", "broad", "mixed"]], dtype=object)
    fig = label_grid(labels, LABELS, "title")
    ax = fig.axes[0]
    np.testing.assert_array_equal(ax.images[0].get_array(), [[0, 1, 9], [4, 8, 9]])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["1", "2"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == list(LABELS)


def test_statistics_grid_draws_each_statistic_on_one_scale():
    from real_attention.outputs.corpus_figures import statistics_grid

    layers, heads = 2, 3
    means = {name: np.full((layers, heads), 0.25) for name in STATISTICS}
    means["prev"] = np.array([[0.9, 0.0, 0.1], [0.2, 0.3, 0.4]])
    means["entropy"] = np.full((layers, heads), 1.5)
    fig = statistics_grid(means, uniform_entropy=2.0, title="title")
    panels = [ax for ax in fig.axes if ax.images and ax.get_title()]
    assert [ax.get_title() for ax in panels] == [*STATISTICS[:-1], "entropy / uniform"]
    np.testing.assert_allclose(panels[0].images[0].get_array(), means["prev"])
    np.testing.assert_allclose(panels[-1].images[0].get_array(), np.full((layers, heads), 0.75))
    assert all(ax.images[0].get_clim() == (0.0, 1.0) for ax in panels)
    assert [t.get_text() for t in panels[0].get_xticklabels()] == ["1", "2", "3"]
    (numbers,) = [c for c in panels[0].collections if c.get_gid() == "cell"]  # one artist for every cell
    assert ".90" in numbers.labels and len(numbers.labels) == layers * heads


def test_commands_have_help():
    for command in ("heads", "merge"):
        result = CliRunner().invoke(cli, [command, "--help"])
        assert result.exit_code == 0 and "--out" in result.output


# --- real models and devices --------------------------------------------------------------------------------


def test_minilm_on_a_small_real_corpus(tmp_path, needs_minilm):
    sentences = [
        "I sat on the bank of the river.", "She went to the bank to get some money.",
        "The cat sleeps on the warm mat, again!", "Where did you put my keys?",
        "Attention weights sum to one in every row.", "Researchers average over many sentences.",
        "The quick brown fox jumps over the lazy dog.", "Tokenizers split unbelievable words into pieces.",
        "It rained all day; nobody went outside.", "He said: \"hello\", and left.",
    ] * 2
    path = tmp_path / "real.txt"
    path.write_text("\n".join(sentences) + "\n")
    result = CliRunner().invoke(cli, ["heads", "--corpus", str(path), "--model", "minilm", "--out", str(tmp_path),
                                      "--batch-size", "8"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "results" / "corpus" / "real" / "summary.json").read_text())
    assert summary["counts"]["sentences"] == 20 and summary["heads_total"] == 72
    assert sum(summary["labels"].values()) == 72
    # MiniLM has a strong previous-word head (layer 1, head 3 on the seed corpus)
    assert summary["strongest"]["prev"]["score"] > 0.5
    assert summary["labels"]["previous"] >= 1


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_gives_the_cpu_statistics(tiny_model_dir):
    from real_attention.engine.models import choose_model, load_model

    cpu = load_model(choose_model("en", str(tiny_model_dir), None), device="cpu")
    cuda = load_model(choose_model("en", str(tiny_model_dir), None), device="cuda")
    a = corpus_sums(cpu, reader(SENTENCES), batch_size=4)
    b = corpus_sums(cuda, reader(SENTENCES), batch_size=4)
    np.testing.assert_allclose(b.totals, a.totals, rtol=1e-4, atol=1e-4)


def test_an_empty_shard_is_written_and_merges(tmp_path, tiny_model_dir):
    path = tmp_path / "gaps.txt"
    path.write_text(f"{SENTENCES[0]}\n\n{SENTENCES[1]}\n\n", encoding="utf-8")
    runner = CliRunner()
    for i in (1, 2):
        result = runner.invoke(cli, heads_args(path, tiny_model_dir, tmp_path, "--shard", f"{i}/2", "--no-figures"))
        assert result.exit_code == 0, result.output
    folders = [tmp_path / "results" / "corpus" / f"gaps-shard-{i}-of-2" for i in (1, 2)]
    assert json.loads((folders[1] / "summary.json").read_text())["counts"]["sentences"] == 0
    run, sums = merge_shards(folders)
    assert (run.name, sums.sentences, sums.blank, sums.lines) == ("gaps", 2, 2, 4)
    # no word, no statistic: no label either (every head was "mixed"), and no figures
    heads = pd.read_csv(folders[1] / "heads.csv", keep_default_na=False)
    assert (heads["label"] == "").all() and (heads["n_words"] == 0).all()
    args = [arg for arg in heads_args(path, tiny_model_dir, tmp_path / "drawn", "--shard", "2/2") if arg != "--quiet"]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "labels: none: no word entered the statistics" in result.output
    assert "figures" not in result.output.splitlines()[-1]
    assert not list((tmp_path / "drawn" / "figures").rglob("*.png"))


def test_length_batches_sort_by_length_and_cap_long_batches():
    from real_attention.statistics.sums import PAIR_TOKENS, length_batches
    from real_attention.engine.extract import Encoded

    rng = np.random.default_rng(3)
    lengths = rng.integers(3, 3 * PAIR_TOKENS, size=300)
    sentences = [Encoded("", np.zeros(t, dtype=np.int64), np.zeros(t, dtype=np.int64), np.zeros(1, dtype=np.int64), ("",))
                 for t in lengths]
    batches = length_batches(sentences, batch_size=16)
    flat = [len(s.ids) for batch in batches for s in batch]
    assert flat == sorted(lengths.tolist())
    assert all(1 <= len(batch) <= 16 for batch in batches)
    assert all(len(batch) * len(batch[-1].ids) ** 2 <= 16 * PAIR_TOKENS**2 or len(batch) == 1 for batch in batches)
    assert len(batches[0]) == 16 and len(batches[-1]) < 16  # short ones fill a batch, long ones do not


def test_a_half_precision_model_gives_run_and_corpus_the_same_statistics(tiny_model_dir):
    """transformers loads a bf16 checkpoint in bf16: both paths merge and pool its maps in float32."""
    import torch

    from real_attention.engine.models import choose_model, load_model

    loaded = load_model(choose_model("es", str(tiny_model_dir), None))
    loaded.model.to(torch.bfloat16)
    expected = word_sums(attend_with_sums(loaded, SENTENCES)[0]).means()
    got = corpus_sums(loaded, reader(SENTENCES), batch_size=4).means()
    for name in STATISTICS:
        np.testing.assert_allclose(got[name], expected[name], rtol=0, atol=2e-6, err_msg=name)


def test_limit_reads_the_first_lines_as_a_file_of_them_would(tmp_path, corpus_file, tiny_model_dir):
    """--limit N: the corpus's first N lines (a blank one counted), the same sums and sha256 as a file of them."""
    runner = CliRunner()
    lines = corpus_file.read_text(encoding="utf-8").splitlines(keepends=True)
    first = tmp_path / "first" / "tiny.txt"
    first.parent.mkdir()
    first.write_text("".join(lines[:8]), encoding="utf-8")  # 6 sentences, the blank line and the long one
    limited = runner.invoke(cli, [arg for arg in heads_args(corpus_file, tiny_model_dir, tmp_path / "limited", "--limit",
                                                            "8", "--no-figures") if arg != "--quiet"])
    alone = runner.invoke(cli, heads_args(first, tiny_model_dir, tmp_path / "alone", "--no-figures"))
    assert limited.exit_code == 0 and alone.exit_code == 0, limited.output + alone.output
    assert "corpus 'tiny', its first 8 line(s) (sha256" in limited.output
    got, expected = (tmp_path / name / "results" / "corpus" / "tiny" for name in ("limited", "alone"))
    for name in ("heads.csv", "sums.json"):
        assert (got / name).read_bytes() == (expected / name).read_bytes(), name
    summary, plain = (json.loads((folder / "summary.json").read_text()) for folder in (got, expected))
    assert summary["corpus"] == {**plain["corpus"], "limit": 8}  # the sha256 of the lines read
    assert summary["counts"] == plain["counts"] and summary["counts"]["lines"] == 8
    assert "limit" not in plain["corpus"]  # a run without it writes what it wrote before


def test_shards_of_a_limited_run_merge_to_it_and_other_limits_do_not(tmp_path, corpus_file, tiny_model_dir):
    runner = CliRunner()
    whole = runner.invoke(cli, heads_args(corpus_file, tiny_model_dir, tmp_path / "whole", "--batch-size", "1",
                                          "--limit", "9", "--no-figures"))
    assert whole.exit_code == 0, whole.output
    for i, limit in ((1, "9"), (2, "9"), (3, "9"), (3, "10")):
        out = tmp_path / ("shards" if limit == "9" else "other")
        shard = runner.invoke(cli, heads_args(corpus_file, tiny_model_dir, out, "--shard", f"{i}/3", "--batch-size",
                                              "1", "--limit", limit, "--no-figures"))
        assert shard.exit_code == 0, shard.output
    shards = [tmp_path / "shards" / "results" / "corpus" / f"tiny-shard-{i}-of-3" for i in (1, 2, 3)]
    counts = [json.loads((folder / "summary.json").read_text())["counts"]["lines"] for folder in shards]
    assert counts == [3, 3, 3]  # lines 1-9: 1, 4, 7 / 2, 5, 8 / 3, 6, 9
    merged = runner.invoke(cli, ["merge", *map(str, shards), "--out", str(tmp_path / "merged"), "--no-figures"])
    assert merged.exit_code == 0, merged.output
    expected, got = (tmp_path / name / "results" / "corpus" / "tiny" for name in ("whole", "merged"))
    for name in ("heads.csv", "sums.json"):
        assert (got / name).read_bytes() == (expected / name).read_bytes(), name
    summaries = [json.loads((folder / "summary.json").read_text()) for folder in (got, expected)]
    assert summaries[0]["corpus"] == summaries[1]["corpus"] and summaries[0]["corpus"]["limit"] == 9
    other = tmp_path / "other" / "results" / "corpus" / "tiny-shard-3-of-3"
    refused = runner.invoke(cli, ["merge", *map(str, shards[:2]), str(other), "--out", str(tmp_path / "refused")])
    assert refused.exit_code == 2 and "differ in corpus limit (10 against 9)" in error_line(refused)
    whole_shard = runner.invoke(cli, heads_args(corpus_file, tiny_model_dir, tmp_path / "unlimited", "--shard", "3/3",
                                                "--batch-size", "1", "--no-figures"))
    assert whole_shard.exit_code == 0, whole_shard.output
    unlimited = tmp_path / "unlimited" / "results" / "corpus" / "tiny-shard-3-of-3"
    refused = runner.invoke(cli, ["merge", *map(str, shards[:2]), str(unlimited), "--out", str(tmp_path / "refused")])
    assert refused.exit_code == 2 and "differ in corpus limit (no limit against 9)" in error_line(refused)


def test_a_limit_counts_the_lines_of_every_input_in_order(tmp_path):
    from real_attention.statistics.inputs import CorpusText, expand

    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("one\ntwo\n\nthree\n", encoding="utf-8")
    b.write_text("four\nfive\nsix\n", encoding="utf-8")
    text = CorpusText(expand([str(a), str(b)]), limit=6)
    assert text.total_lines() == 6
    assert list(text) == ["one", "two", "three", "four", "five"] and (text.lines, text.blank) == (6, 1)
    both = tmp_path / "both.txt"
    both.write_text("one\ntwo\n\nthree\nfour\nfive\n", encoding="utf-8")
    whole = CorpusText(expand([str(both)]))
    list(whole)
    assert text.sha256 == whole.sha256  # the bytes read, as one file of them
    sharded = CorpusText(expand([str(a), str(b)]), Shard(2, 2), limit=6)  # lines 2 and 4 of a, 2 of b
    assert sharded.total_lines() == 3 and list(sharded) == ["two", "three", "five"]
    assert CorpusText(expand([str(a), str(b)]), limit=100).total_lines() == 7
    from real_attention.statistics.reading import count_lines

    big = tmp_path / "big.txt"
    big.write_bytes(b"a line\n" * 400_000)  # 2.8 MB: three blocks of 1 MiB
    assert (count_lines(big), count_lines(big, 5), count_lines(big, 10**9)) == (400_000, 5, 400_000)
    assert CorpusText(expand([str(big)]), limit=5).total_lines() == 5
    import gzip

    (tmp_path / "later.txt.gz").write_bytes(gzip.compress(b"seven\n"))  # past the limit: not opened, not counted
    assert CorpusText(expand([str(a), str(tmp_path / "later.txt.gz")]), limit=3).total_lines() == 3


def test_a_limit_stops_reading_at_its_last_line(tmp_path, monkeypatch):
    """stdin or a slow pipe must not be waited on for the line after the limit: it is never asked for."""
    import contextlib

    from real_attention.statistics.inputs import CorpusText, Input

    def lines():
        yield b"one\n"
        yield b"two\n"
        raise AssertionError("the line after the limit was read")

    monkeypatch.setattr(Input, "open", lambda self: contextlib.nullcontext(lines()))
    text = CorpusText([Input("-", "text")], limit=2)
    assert list(text) == ["one", "two"] and text.lines == 2


@pytest.mark.parametrize("limit, message", [(0, "limit (--limit) 0 is out of range: at least 1"),
                                            (2.5, "limit (--limit) must be a whole number")])
def test_a_bad_limit_is_refused_before_the_model_loads(tmp_path, corpus_file, tiny_model_dir, limit, message):
    import real_attention as ra

    with pytest.raises(ra.InputError, match=re.escape(message)):
        ra.corpus(corpus_file, model=tiny_model_dir, limit=limit, out=tmp_path / "out")
    assert not (tmp_path / "out").exists()
