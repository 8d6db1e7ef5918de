"""--device auto, the device in every summary, and one Error line when the device runs out of memory."""
from __future__ import annotations

import json

import torch
from click.testing import CliRunner

from real_attention import cli
from real_attention.engine.models import resolve_device


def test_auto_picks_cuda_then_mps_then_cpu(monkeypatch):
    assert resolve_device("cuda:1") == "cuda:1"  # a named device is kept as given
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert resolve_device("auto") == "cpu"
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert resolve_device("auto") == "mps"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == "cuda"


def write_corpus(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("i sat on the bank .\nthe end of the garden\n", encoding="utf-8")
    return corpus


def test_heads_corpus_with_device_auto_records_the_device_used(tmp_path, tiny_model_dir):
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["heads", "--corpus", str(write_corpus(tmp_path)), "--model",
                                      str(tiny_model_dir), "--device", "auto", "--out", str(out), "--quiet"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "results" / "corpus" / "c" / "summary.json").read_text())
    assert summary["engine"]["device"] == resolve_device("auto")


def test_out_of_device_memory_is_one_line_that_suggests_a_smaller_batch(tmp_path, tiny_model_dir, monkeypatch):
    from real_attention.engine import measures

    def exhausted(*args, **options):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(measures, "_forward_measured", exhausted)  # under the OOM guard
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["heads", "--corpus", str(write_corpus(tmp_path)), "--model",
                                      str(tiny_model_dir), "--batch-size", "8", "--out", str(out), "--quiet"])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    # the corpus's batches have a fixed shape: 8 rows (2 sentences and 6 dummy rows) of 8 pieces
    assert lines == [lines[-1]] and lines[-1].startswith("Error: the device cpu ran out of memory on a batch of 8")
    assert "smaller --batch-size (this run used 8)" in lines[-1]
    assert "Traceback" not in result.output
    assert not [p for p in out.rglob("*") if p.is_file()]  # nothing written


def test_syntax_counts_on_the_device_equal_the_host_counts():
    import numpy as np

    from real_attention.syntax_probe.scoring import GoldBatch, device_counts

    rng = np.random.default_rng(0)
    lengths = np.array([5, 3, 7])
    words = int(lengths.max())
    heads = np.full((3, words), -2)
    relations = np.full((3, words), -1)
    for row, n in enumerate(lengths):
        heads[row, :n] = rng.integers(-1, n, n)
        relations[row, :n] = rng.integers(0, 4, n)
    gold = GoldBatch(heads=heads, scored=np.zeros((3, words), dtype=np.int64) + np.arange(words) % lengths[:, None],
                     relations=relations, lengths=lengths)
    predictions = rng.integers(0, words, (2, 4, 3, words))  # (directions, heads, B, W)
    expected = gold.counts(predictions, 4)
    got = device_counts(gold.tensors("cpu"), torch.from_numpy(predictions), 4)
    assert got.dtype == torch.int64 and got.numpy().tolist() == expected.tolist()
