"""Pooled sums that do not depend on how a corpus is split (real_attention.engine.heads: fixed point, FixedAccumulator;
real_attention.engine.batches.fixed_batches: batch shapes that depend on the sentences alone): for one batch size,
any batch composition, shard count or partitioning gives the same bits; entropy defined once, checked
on hand-made rows; the kernel on a second device agrees with the CPU (skipped without one)."""
from __future__ import annotations

import io
import json
import math
import random
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from conftest import second_device

import real_attention as ra
from real_attention import cli
from real_attention.engine import heads as heads_module
from real_attention.engine.heads import (FIXED_BITS, STATISTICS, FixedAccumulator, HeadSums, entropy_terms, kernel,
                                         sentence_counts)
from real_attention.engine.words import FIRST_SPECIAL, LAST_SPECIAL, WORD
from real_attention.statistics.sums import CorpusReader, corpus_sums

SEEDS = Path(__file__).resolve().parent.parent / "benchmarks" / "corpus_seeds.txt"
LINES = [
    "the bank of the garden , the end .",
    "i sat on the bank in my garden .",
    "i went to get money",
    "me senté en el banco de mi jardín .",
    "fui al banco a sacar dinero !",
    "the end of the garden , my bank ?",
    "at the end",
    "money , money , money .",
    "un banco",
    "i went to the bank to get some money , in the end .",
    "el jardín",
    "sat",
]


def sums_of_texts(loaded, texts: list[str], batch_size: int) -> HeadSums:
    stream = io.BytesIO(("\n".join(texts) + "\n").encode("utf-8"))
    return corpus_sums(loaded, CorpusReader(stream), batch_size=batch_size)


def same_bits(a: HeadSums, b: HeadSums) -> bool:
    return (a.exact.tolist() == b.exact.tolist() and a.uniform_fixed == b.uniform_fixed
            and json.dumps(a.to_json()) == json.dumps(b.to_json()))


# --- entropy, defined once ----------------------------------------------------------------------------------


def test_entropy_of_hand_made_rows():
    rows = torch.tensor([[0.25, 0.25, 0.25, 0.25], [1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0],
                         [0.7, 0.2, 0.1, 0.0]], dtype=torch.float64)
    got = entropy_terms(rows).sum(dim=-1)
    expected = [math.log(4), 0.0, math.log(2), -(0.7 * math.log(0.7) + 0.2 * math.log(0.2) + 0.1 * math.log(0.1))]
    np.testing.assert_allclose(got.numpy(), expected, rtol=0, atol=1e-15)
    assert torch.isfinite(got).all()  # 0 ln 0 = 0, never nan


def test_the_entropy_column_is_the_mean_row_entropy_of_the_word_map():
    # one sentence, one layer, two heads: uniform rows (ln 4 each) and one-hot rows (0)
    n = 4
    maps = torch.stack([torch.full((n, n), 1 / n), torch.eye(n)])[None].double()  # (B=1, H=2, n, n)
    kinds = torch.tensor([[FIRST_SPECIAL, WORD, WORD, LAST_SPECIAL]])
    totals = heads_module.sentence_totals(maps, kinds)  # (1, len(STATISTICS), 2)
    entropy = totals[0, STATISTICS.index("entropy")].numpy() / 2**FIXED_BITS
    np.testing.assert_allclose(entropy, [n * math.log(n), 0.0], atol=1e-8)


# --- fixed point ------------------------------------------------------------------------------------------


def test_a_sentences_totals_in_a_batch_are_its_totals_alone():
    rng = np.random.default_rng(1)
    lengths, units_per = [5, 9, 3, 12], [4, 6, 3, 8]
    t, n, heads = max(lengths), max(units_per), 3
    weights = np.zeros((len(lengths), heads, t, t), dtype=np.float32)
    units = np.full((len(lengths), t), -1)
    kinds = np.full((len(lengths), n), -1)
    for row, (length, size) in enumerate(zip(lengths, units_per)):
        raw = rng.random((heads, length, length)).astype(np.float32) ** 4
        weights[row, :, :length, :length] = raw / raw.sum(-1, keepdims=True)
        units[row, :length] = np.sort(np.r_[np.arange(size), rng.integers(0, size, length - size)])
        kinds[row, :size] = [FIRST_SPECIAL] + [WORD] * (size - 2) + [LAST_SPECIAL]
    together = kernel(torch.from_numpy(weights), torch.from_numpy(units), torch.from_numpy(kinds))[1]
    for row, (length, size) in enumerate(zip(lengths, units_per)):
        alone = kernel(torch.from_numpy(weights[row:row + 1, :, :length, :length].copy()),
                       torch.from_numpy(units[row:row + 1, :length].copy()),
                       torch.from_numpy(kinds[row:row + 1, :size].copy()))[1]
        # float32 sums over a padded batch: equal to float32 precision (the fixed point then adds them exactly)
        np.testing.assert_allclose(alone[0].numpy() / 2**FIXED_BITS, together[row].numpy() / 2**FIXED_BITS,
                                   rtol=1e-6, atol=1e-6)
        assert alone.dtype == torch.int64


def test_fixed_point_sums_are_exact_in_any_order():
    rng = random.Random(3)
    parts = [HeadSums(totals=np.array([rng.random() * 10 ** rng.randint(-6, 6) for _ in range(len(STATISTICS) * 6)])
                      .reshape(len(STATISTICS), 2, 3), sentences=1, units=3, pairs=2, uniform=rng.random())
             for _ in range(30)]
    forward = parts[0]
    for part in parts[1:]:
        forward = forward + part
    for _ in range(5):
        rng.shuffle(parts)
        shuffled = parts[0]
        for part in parts[1:]:
            shuffled = shuffled + part
        assert same_bits(shuffled, forward)


def test_the_accumulator_moves_its_sums_to_the_host_before_int64_could_overflow(monkeypatch):
    values = torch.randint(0, 2**40, (7, 5, len(STATISTICS), 2), dtype=torch.int64)  # 7 batches of 5 sentences
    expected = values.sum(dim=(0, 1)).numpy()
    monkeypatch.setattr(FixedAccumulator, "LIMIT", 1 << 48)  # a flush every few batches
    accumulator = FixedAccumulator(1, 2, "cpu")
    for batch in values:
        accumulator.reserve([40] * 5)
        accumulator.add(0, batch)
    assert accumulator.result()[:, 0].tolist() == expected.tolist()


def test_sums_json_round_trip_is_exact_and_old_float_sums_still_read():
    sums = HeadSums(totals=np.arange(len(STATISTICS) * 6, dtype=np.float64).reshape(len(STATISTICS), 2, 3) / 7,
                    sentences=2, units=9, pairs=7, uniform=12.5)
    data = json.loads(json.dumps(sums.to_json()))
    assert data["fixed_point_bits"] == FIXED_BITS and all(isinstance(v, int) for v in data["totals"]["prev"][0])
    assert same_bits(HeadSums.from_json(data), sums)
    old = dict(data)  # as written before the fixed point: float totals and uniform, no fixed_point_bits
    del old["fixed_point_bits"]
    old["uniform"] = 12.5
    old["totals"] = {name: (sums.totals[i]).tolist() for i, name in enumerate(STATISTICS)}
    assert same_bits(HeadSums.from_json(old), sums)


def test_uniform_entropy_is_summed_exactly():
    one = sentence_counts([3, 5, 8])["uniform_fixed"]
    apart = sum(sentence_counts([size])["uniform_fixed"] for size in (8, 3, 5))
    assert one == apart and isinstance(one, int)


# --- whole corpora, the tiny model ------------------------------------------------------------------------


def random_parts(rng: random.Random, count: int) -> list[list[int]]:
    """The indices 0 .. count - 1 shuffled and cut into 2 to 5 parts, in a random order."""
    order = list(range(count))
    rng.shuffle(order)
    cuts = sorted(rng.sample(range(1, count), rng.randint(1, 4)))
    parts = [order[a:b] for a, b in zip([0, *cuts], [*cuts, count])]
    rng.shuffle(parts)
    return parts


@pytest.mark.parametrize("batch_size", [1, 3, 32])
def test_any_split_and_order_give_the_same_bits(tiny_loaded, batch_size):
    """Every batch has a shape fixed by its sentences' lengths alone (real_attention.engine.batches.fixed_batches:
    the model's own float32 arithmetic then gives a sentence the same bits whatever the split; see
    docs/device.md), so random splits of a shuffled corpus add up to the same bits."""
    texts = LINES + [f"{a} {b}" for a, b in zip(LINES, LINES[3:])]  # 21 lines, more than a batch of 3 per length
    whole = sums_of_texts(tiny_loaded, texts, batch_size)
    for parts, total in split_sums(tiny_loaded, texts, batch_size, random.Random(batch_size), trials=4):
        assert same_bits(total, whole), parts


def test_fixed_batches_shapes_depend_on_lengths_alone():
    from real_attention.engine.batches import PAIR_TOKENS, batch_rows, fixed_batches, padded_length

    assert [padded_length(n, 512) for n in (1, 7, 8, 9, 63, 64, 65, 80, 81, 129, 500, 512)] == \
        [4, 8, 8, 12, 64, 64, 72, 80, 88, 144, 512, 512]
    assert padded_length(20, 18) == 20 and padded_length(17, 18) == 18  # never past the model's limit, nor below
    assert batch_rows(16, 32) == 32 and batch_rows(80, 32) == 8 and batch_rows(512, 32) == 1
    rng = random.Random(5)
    lengths = [rng.randint(3, 3 * PAIR_TOKENS) for _ in range(300)]
    shapes = {}
    for batch in fixed_batches(range(300), 16, 512, lengths.__getitem__):
        assert 1 <= len(batch.items) <= batch.rows == batch_rows(batch.pieces, 16)
        assert batch.rows * batch.pieces**2 <= 16 * PAIR_TOKENS**2 or batch.rows == 1
        for i in batch.items:
            assert shapes.setdefault(i, (batch.rows, batch.pieces)) == (batch.rows, padded_length(lengths[i], 512))
    assert sorted(shapes) == list(range(300))  # every item once
    again = [i for batch in fixed_batches(range(150), 16, 512, lengths.__getitem__) for i in batch.items]
    assert sorted(again) == list(range(150)) and all(  # a subset: the same shape for each item
        (b.rows, b.pieces) == shapes[i] for b in fixed_batches(range(150), 16, 512, lengths.__getitem__) for i in b.items)


def test_a_batch_with_dummy_rows_adds_nothing_for_them(tiny_loaded):
    """A bucket's last batch is padded with dummy rows (no unit, one unmasked pad piece): the counts and sums are
    those of its sentences alone (the same as the sentences in full batches of their own kind)."""
    sums = sums_of_texts(tiny_loaded, LINES[:2], batch_size=32)
    pieces = [len(ids) for ids in tiny_loaded.tokenizer(LINES[:2])["input_ids"]]
    assert (sums.sentences, sums.tokens) == (2, sum(pieces))


def test_the_kernel_runs_split_a_cpu_batch_by_unit_width_and_a_gpu_batch_not_at_all():
    from real_attention.engine.batches import FixedBatch, padded_units
    from real_attention.statistics import streaming

    assert [padded_units(n, 20) for n in (1, 8, 9, 16, 17, 20)] == [8, 8, 16, 16, 20, 20]  # never past the pieces
    cpu = torch.device("cpu")
    assert streaming.kernel_runs(cpu, [3, 7, 8, 9, 17, 20], 32, 20) == [(0, 3, 8), (3, 4, 16), (4, 6, 20)]
    for device in (torch.device("cuda", 0), torch.device("mps")):  # every row, dummies included, one call
        assert streaming.kernel_runs(device, [3, 9, 17], 32, 20) == [(0, 32, 20)]
    with pytest.raises(AssertionError, match="sorted"):
        streaming.kernel_runs(cpu, [9, 3], 32, 20)

    class Sentence(NamedTuple):
        name: str
        kinds: tuple

    items = [Sentence(name, (0,) * size) for name, size in (("a", 12), ("b", 3), ("c", 9), ("d", 1), ("e", 16))]
    ordered = streaming.by_unit_width(FixedBatch(items, 8, 20))
    assert [s.name for s in ordered.items] == ["b", "d", "a", "c", "e"] and ordered[1:] == (8, 20)  # stable


def test_the_gpus_one_kernel_call_on_every_row_is_exact_in_any_split_and_agrees_with_the_cpus_runs(tiny_loaded,
                                                                                                   monkeypatch):
    """On a GPU the kernel runs once on the whole fixed-shape batch, dummy rows included, merged into the batch's
    piece count (kernel_runs: cuBLAS picks its kernels by the batch count too). Forced on the CPU: dummy rows and
    pad units add exactly nothing, so any split gives the same bits, and the means agree with the CPU's runs."""
    from real_attention.statistics import streaming

    texts = LINES + [f"{a} {b}" for a, b in zip(LINES, LINES[3:])]
    by_width = sums_of_texts(tiny_loaded, texts, 8)
    monkeypatch.setattr(streaming, "kernel_runs", lambda device, units, rows, pieces: [(0, rows, pieces)])
    every_row = sums_of_texts(tiny_loaded, texts, 8)
    assert largest_difference(every_row, by_width) < 1e-6 and counts(every_row) == counts(by_width)
    for parts, total in split_sums(tiny_loaded, texts, 8, random.Random(7)):
        assert same_bits(total, every_row), parts


def test_sentences_merged_narrower_than_their_batch_are_exact_in_any_split(tiny_loaded, monkeypatch):
    """Sentences of few words, each of several pieces, get a unit width below their padded length (padded_units):
    their runs are merged into fewer units than the batch has pieces. Any split gives the same bits, and the sums
    agree with merging every row at the piece count (the GPU's one call)."""
    from real_attention.engine.batches import padded_length, padded_units
    from real_attention.engine.extract import encode
    from real_attention.statistics import streaming

    split = ["senté jardín senté jardín senté", "jardín senté jardín senté jardín senté", "senté jardín jardín"]
    texts = [*split, *LINES[:5], *split[:2], *LINES[5:]]
    encoded, _ = encode(tiny_loaded.tokenizer, texts, tiny_loaded.max_tokens)
    narrower = [len(s.kinds) for s in encoded
                if padded_units(len(s.kinds), padded_length(len(s.ids), tiny_loaded.max_tokens))
                < padded_length(len(s.ids), tiny_loaded.max_tokens)]
    assert len(narrower) >= 3, "no sentence merged narrower than its batch: the test would not test it"
    whole = sums_of_texts(tiny_loaded, texts, 4)
    for parts, total in split_sums(tiny_loaded, texts, 4, random.Random(13), trials=2):
        assert same_bits(total, whole), parts
    monkeypatch.setattr(streaming, "kernel_runs", lambda device, units, rows, pieces: [(0, rows, pieces)])
    every_row = sums_of_texts(tiny_loaded, texts, 4)
    assert largest_difference(every_row, whole) < 1e-6 and counts(every_row) == counts(whole)


def largest_difference(sums: HeadSums, other: HeadSums) -> float:
    """The largest difference between two sums' means, over every statistic and head."""
    return max(float(np.abs(sums.means()[name] - other.means()[name]).max()) for name in STATISTICS)


def counts(sums: HeadSums) -> tuple:
    return sums.sentences, sums.units, sums.pairs, sums.tokens, sums.uniform_fixed


def split_sums(loaded, texts: list[str], batch_size: int, rng: random.Random, trials: int = 3) -> list:
    """(parts, their sums added in a random order) for random splits of the texts."""
    results = []
    for _ in range(trials):
        parts = random_parts(rng, len(texts))
        total = None
        for part in parts:
            sums = sums_of_texts(loaded, [texts[i] for i in part], batch_size)
            total = sums if total is None else total + sums
        results.append((parts, total))
    return results


def test_every_layer_at_once_as_on_a_gpu_is_exact_in_any_split_and_agrees_with_layer_by_layer(tiny_loaded,
                                                                                              monkeypatch):
    """On a GPU the kernel takes a batch's layers together after the forward pass (layers_at_once: fewer launches).
    Forced on the CPU: any split gives the same bits, and the means agree with the layer-by-layer kernel's."""
    from real_attention.statistics import streaming

    assert not streaming.layers_at_once(torch.device("cpu")) and streaming.layers_at_once(torch.device("cuda", 0))
    texts = LINES + [f"{a} {b}" for a, b in zip(LINES, LINES[3:])]
    by_layer = sums_of_texts(tiny_loaded, texts, 4)
    monkeypatch.setattr(streaming, "layers_at_once", lambda device: True)
    together = sums_of_texts(tiny_loaded, texts, 4)
    assert largest_difference(together, by_layer) < 1e-6 and counts(together) == counts(by_layer)
    for parts, total in split_sums(tiny_loaded, texts, 4, random.Random(11)):
        assert same_bits(total, together), parts


def heads_args(corpus, model_dir, out, *extra, figures: bool = False):
    """heads --corpus, quiet; the tables alone unless figures (drawing is most of a tiny model's run)."""
    return ["heads", "--corpus", str(corpus), "--model", str(model_dir), "--out", str(out), "--quiet", *extra,
            *(() if figures else ("--no-figures",))]


def corpus_files(out, name: str) -> dict[str, bytes]:
    folder = out / "results" / "corpus" / name
    return {file: (folder / file).read_bytes() for file in ("heads.csv", "sums.json")}


def sharded_and_merged(tmp_path, corpus, model_dir, shards: int, *options) -> dict[str, bytes]:
    """heads --corpus in `shards` shards with `options`, merged: the merged folder's heads.csv and sums.json."""
    runner = CliRunner()
    out = tmp_path / f"sharded-{shards}-{'-'.join(options)}"
    for index in range(1, shards + 1):
        result = runner.invoke(cli, heads_args(corpus, model_dir, out, "--shard", f"{index}/{shards}", *options))
        assert result.exit_code == 0, result.output
    name = corpus.stem
    folders = [str(out / "results" / "corpus" / f"{name}-shard-{i}-of-{shards}") for i in range(1, shards + 1)]
    result = runner.invoke(cli, ["merge", *folders, "--out", str(out / "merged"), "--quiet", "--no-figures"])
    assert result.exit_code == 0, result.output
    return corpus_files(out / "merged", name)


@pytest.mark.parametrize("lines, shards, batch_size", [(LINES[:2], 2, "1"), (LINES, 3, "1"), (LINES[:2], 2, "32"),
                                                       (LINES, 3, "4")])
def test_shards_merged_give_the_unsharded_files_byte_for_byte(tmp_path, tiny_model_dir, lines, shards, batch_size):
    """The issue's reproduction (a 2-line corpus in two shards) and a longer one in three, at batch sizes 1 and more."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    one = heads_args(corpus, tiny_model_dir, tmp_path / "one", "--batch-size", batch_size)
    assert CliRunner().invoke(cli, one).exit_code == 0
    single = corpus_files(tmp_path / "one", "c")
    merged = sharded_and_merged(tmp_path, corpus, tiny_model_dir, shards, "--batch-size", batch_size)
    assert single["heads.csv"] == merged["heads.csv"]
    assert json.loads(single["sums.json"]) == json.loads(merged["sums.json"])  # every exact sum and count


def test_random_corpora_in_random_shards_merge_to_the_unsharded_files(tmp_path, tiny_model_dir):
    """Shuffled corpora of random length, each in 2 to 5 shards at a random batch size above 1."""
    rng = random.Random(11)
    for trial in range(3):
        lines = [rng.choice(LINES) + " " + rng.choice(LINES) if rng.random() < 0.4 else rng.choice(LINES)
                 for _ in range(rng.randint(8, 30))]
        corpus = tmp_path / f"r{trial}.txt"
        corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
        options = ("--batch-size", str(rng.choice([2, 3, 5, 8, 32])))
        assert CliRunner().invoke(cli, heads_args(corpus, tiny_model_dir, tmp_path / "one", *options)).exit_code == 0
        merged = sharded_and_merged(tmp_path, corpus, tiny_model_dir, rng.randint(2, 5), *options)
        assert corpus_files(tmp_path / "one", corpus.stem) == merged, (trial, options)


def test_merge_warns_when_the_shards_ran_at_different_batch_sizes(tmp_path, tiny_model_dir):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    runner = CliRunner()
    for index, batch_size in ((1, "4"), (2, "8")):
        args = heads_args(corpus, tiny_model_dir, tmp_path / "s", "--shard", f"{index}/2", "--batch-size", batch_size)
        assert runner.invoke(cli, args).exit_code == 0
    folders = [str(tmp_path / "s" / "results" / "corpus" / f"c-shard-{i}-of-2") for i in (1, 2)]
    result = runner.invoke(cli, ["merge", *folders, "--out", str(tmp_path / "m"), "--quiet"])
    assert result.exit_code == 0 and result.output.startswith("Warning: the shards did not all run with the same "
                                                              "--batch-size"), result.output
    engine = json.loads((tmp_path / "m" / "results" / "corpus" / "c" / "summary.json").read_text())["engine"]
    assert engine == {"name": "merge", "shards": 2, "batch_size": None, "torch_threads": engine["torch_threads"],
                      "device": "cpu", "shapes": 3, "differs": ["batch_size"]}


def test_merge_warns_when_a_shard_was_padded_under_older_shape_rules(tmp_path, tiny_model_dir):
    """A shard written before summary.json recorded the shape rules (engine "shapes") was padded to multiples of 8 and
    merged at its padded length: its sentences' bits differ from the same sentences' now, so merge says so."""
    from real_attention.engine.batches import SHAPES

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    runner = CliRunner()
    for index in (1, 2):
        args = heads_args(corpus, tiny_model_dir, tmp_path / "s", "--shard", f"{index}/2")
        assert runner.invoke(cli, args).exit_code == 0
    folders = [tmp_path / "s" / "results" / "corpus" / f"c-shard-{i}-of-2" for i in (1, 2)]
    same = runner.invoke(cli, ["merge", *map(str, folders), "--out", str(tmp_path / "same"), "--quiet"])
    assert same.exit_code == 0 and "Warning" not in same.output and SHAPES == 3
    summary = folders[0] / "summary.json"
    data = json.loads(summary.read_text())
    del data["engine"]["shapes"]  # as written before the shape rules were recorded
    summary.write_text(json.dumps(data), encoding="utf-8")
    result = runner.invoke(cli, ["merge", *map(str, folders), "--out", str(tmp_path / "m"), "--quiet"])
    assert result.exit_code == 0 and result.output.startswith(
        "Warning: the shards did not all run with the same batch shapes (versions of real-attention"), result.output
    engine = json.loads((tmp_path / "m" / "results" / "corpus" / "c" / "summary.json").read_text())["engine"]
    assert engine["shapes"] is None and engine["differs"] == ["shapes"]


@pytest.mark.slow
@pytest.mark.parametrize("batch_size", ["1", "32"])
def test_the_issues_two_line_reproduction_on_minilm(tmp_path, needs_minilm, batch_size):
    corpus = tmp_path / "two.txt"
    corpus.write_text("The bank of the river was muddy.\nShe paid the money into her bank account.\n", encoding="utf-8")
    assert CliRunner().invoke(cli, heads_args(corpus, "minilm", tmp_path / "one", "--batch-size", batch_size)
                              ).exit_code == 0
    merged = sharded_and_merged(tmp_path, corpus, "minilm", 2, "--batch-size", batch_size)
    assert corpus_files(tmp_path / "one", "two") == merged


@pytest.mark.slow
def test_random_splits_of_the_seed_corpus_on_minilm(minilm):
    """MiniLM at --batch-size 8 (its float32 matrix products change with the batch shape on a CPU): random splits
    of the 182 seed sentences add up to the whole corpus's bits."""
    texts = [line for line in SEEDS.read_text(encoding="utf-8").splitlines() if line.strip()]
    whole = sums_of_texts(minilm, texts, 8)
    rng = random.Random(8)
    for _ in range(2):
        parts = random_parts(rng, len(texts))
        total = sum((sums_of_texts(minilm, [texts[i] for i in part], 8) for part in parts[1:]),
                    start=sums_of_texts(minilm, [texts[i] for i in parts[0]], 8))
        assert same_bits(total, whole), parts


# --- a second device -----------------------------------------------------------------------------------------


@pytest.mark.skipif(second_device() is None, reason="no cuda or mps device here")
def test_the_kernel_on_a_second_device_agrees_with_the_cpu(tiny_model_dir):
    from real_attention.engine.models import choose_model, load_model

    device = second_device()
    assert device is not None
    on_cpu = load_model(choose_model("es", str(tiny_model_dir), None))
    there = load_model(choose_model("es", str(tiny_model_dir), None), device=device)
    a, b = sums_of_texts(on_cpu, LINES, 4), sums_of_texts(there, LINES, 4)
    for name in STATISTICS:
        np.testing.assert_allclose(a.means()[name], b.means()[name], rtol=0, atol=1e-6)
    assert (a.sentences, a.units, a.uniform_fixed) == (b.sentences, b.units, b.uniform_fixed)


def test_no_figures_writes_the_same_tables_and_no_figures_folder(tmp_path, tiny_model_dir):
    """heads and merge with --no-figures: the tables of a run with figures, byte for byte; the figures folder of
    an earlier run of the same name is removed (it would show other sums), and the output names no figures."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    runner = CliRunner()
    assert runner.invoke(cli, heads_args(corpus, tiny_model_dir, tmp_path / "a", figures=True)).exit_code == 0
    figures = tmp_path / "a" / "figures" / "corpus" / "c"
    assert sorted(p.name for p in figures.iterdir()) == ["labels.png", "statistics.png"]
    drawn = corpus_files(tmp_path / "a", "c")
    result = runner.invoke(cli, [arg for arg in heads_args(corpus, tiny_model_dir, tmp_path / "a") if arg != "--quiet"])
    assert result.exit_code == 0, result.output
    assert result.output.rstrip().endswith(f"wrote {tmp_path / 'a' / 'results' / 'corpus' / 'c'}")
    assert corpus_files(tmp_path / "a", "c") == drawn and not figures.exists()
    assert sharded_and_merged(tmp_path, corpus, tiny_model_dir, 2) == drawn
    sharded = tmp_path / "sharded-2-"
    assert not (sharded / "figures").exists() and not (sharded / "merged" / "figures").exists()
    output = ra.merge([sharded / "results" / "corpus" / f"c-shard-{i}-of-2" for i in (1, 2)], out=tmp_path / "m",
                      figures=False)
    assert output.figures_dir is None and not (tmp_path / "m" / "figures").exists()
    assert corpus_files(tmp_path / "m", "c") == drawn
    output = ra.merge([sharded / "results" / "corpus" / f"c-shard-{i}-of-2" for i in (1, 2)], out=tmp_path / "m")
    assert output.figures_dir == tmp_path / "m" / "figures" / "corpus" / "c" and output.figures_dir.is_dir()


def test_a_bom_on_a_later_line_is_the_same_text_in_every_engine(tmp_path, tiny_decoders):
    """Only a file's first line loses its byte-order mark. The partitions and the shards used to hand their
    sentences on through a reader that stripped the BOM of *its* first line, so which sentences kept one depended
    on the split: a byte-level tokenizer gave other token counts and other sums."""
    gpt2 = tiny_decoders("gpt2")
    corpus = tmp_path / "b.txt"
    corpus.write_bytes("\ufeffThe river flooded the bank.\n\ufeffShe sat at the bank.\nHe went to the bank.\n"
                       "\ufeffThe bank was closed.\n".encode("utf-8"))
    runs = {}
    for name, options in (("single", ()), ("partitions", ("--partition-size", "1")),
                          ("partitions-2", ("--partition-size", "2"))):
        result = CliRunner().invoke(cli, heads_args(corpus, gpt2, tmp_path / name, "--threads", "1", *options))
        assert result.exit_code == 0, result.output
        runs[name] = corpus_files(tmp_path / name, "b")
    runs["shards"] = sharded_and_merged(tmp_path, corpus, gpt2, 2, "--threads", "1")
    assert runs["partitions"] == runs["single"] and runs["partitions-2"] == runs["single"]
    assert runs["shards"]["heads.csv"] == runs["single"]["heads.csv"]
    assert json.loads(runs["shards"]["sums.json"]) == json.loads(runs["single"]["sums.json"])


def test_a_sentences_totals_do_not_depend_on_its_batch_at_two_threads():
    """A newcomer's shards merged to other `markers` bits than the unsharded run on 2 torch threads: MKL's batched
    product summed a sentence's keys in an order that depended on the batch's size. Each key's weight is now put
    in fixed point first, and whole numbers add exactly in any order."""
    import torch

    from real_attention.engine.heads import sentence_totals

    generator = torch.Generator().manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for size, units in ((36, 35), (9, 51), (23, 17)):
            maps = torch.rand(size, 12, units, units, generator=generator)
            maps /= maps.sum(-1, keepdim=True)
            kinds = torch.randint(1, 6, (size, units), generator=generator)
            batch = sentence_totals(maps, kinds)
            for row in range(size):
                assert torch.equal(sentence_totals(maps[row:row + 1].clone(), kinds[row:row + 1].clone())[0],
                                   batch[row]), (size, units, row)
    finally:
        torch.set_num_threads(threads)


def test_the_kernel_gives_a_sentence_the_same_bits_alone_as_in_its_batch_at_padded_widths():
    """The CPU kernel skips a batch's dummy rows and merges each run of one unit width alone: that is exact only if
    a sentence's maps and totals do not depend on how many rows share its call. At the padded shapes (pieces a
    multiple of 4, units engine.batches.padded_units) they do not, at two threads; at unpadded widths (7 units of
    13 pieces, say) MKL's products were seen to differ with the batch count, which is why the widths are padded."""
    import torch

    from real_attention.engine.batches import padded_units
    from real_attention.engine.heads import kernel, kernel_batch

    generator = torch.Generator().manual_seed(1)
    rng = np.random.default_rng(1)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        for pieces in (8, 12, 20, 28, 40, 64):
            size, units = int(rng.integers(2, 17)), int(rng.integers(max(1, pieces // 3), pieces + 1))
            width = padded_units(units, pieces)
            unit_of = np.full((size, pieces), -1, dtype=np.int64)
            kinds = np.zeros((size, width), dtype=np.int64)
            for row in range(size):  # each sentence `units` units over some of the pieces, the rest pads
                used = int(rng.integers(units, pieces + 1))
                cuts = np.sort(rng.choice(np.arange(1, used), size=units - 1, replace=False))
                unit_of[row, :used] = np.searchsorted(cuts, np.arange(used), side="right")
                kinds[row, :units] = rng.integers(1, 6, size=units)
            weights = torch.rand(size, 12, pieces, pieces, generator=generator) * torch.as_tensor(unit_of >= 0)[
                :, None, None, :]
            weights /= weights.sum(-1, keepdim=True)
            unit_t, kinds_t = torch.as_tensor(unit_of), torch.as_tensor(kinds)
            maps, totals = kernel(weights, kernel_batch(unit_t, kinds_t), keep_maps=True)
            for row in range(size):
                alone_maps, alone = kernel(weights[row:row + 1].clone(), kernel_batch(
                    unit_t[row:row + 1].clone(), kinds_t[row:row + 1].clone()), keep_maps=True)
                assert torch.equal(alone_maps[0], maps[row]) and torch.equal(alone[0], totals[row]), (pieces, row)
    finally:
        torch.set_num_threads(threads)
