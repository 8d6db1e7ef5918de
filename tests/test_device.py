"""--device auto, the device in every summary, and one Error line when the device runs out of memory."""
from __future__ import annotations

import json
import re

import pytest
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
    # the corpus's batches have a fixed shape, 2 rows of 8 pieces: --batch-size 8 is cut to the corpus's 2 lines
    assert lines == [lines[-1]] and lines[-1].startswith("Error: the device cpu ran out of memory on a batch of 2")
    assert "smaller batch_size (--batch-size); this run used 2" in lines[-1]
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


def test_attend_with_focus_records_the_device_it_ran_on(tiny_loaded):
    """ra.attend(..., focus=, sense=) and the live page classify in one pass; their summary names the model's
    device ("cpu:0" here: a device other than the default "cpu" string, on any machine)."""
    from dataclasses import replace

    import real_attention as ra

    there = replace(tiny_loaded, device="cpu:0")
    att = ra.attend(there, ["me senté en el banco de mi jardín.", "fui al banco a sacar dinero."], focus="banco",
                    sense=["jardín", "dinero"])
    assert att.summary()["device"] == "cpu:0"


def _out_of_memory(*args, **options):
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")


@pytest.mark.parametrize("command", ["compare", "detect", "importance"])
def test_out_of_device_memory_in_the_other_commands_is_one_line(command, tmp_path, tiny_model_dir, monkeypatch):
    """compare, detect and importance: the device running out of memory is one Error line that names the device
    and the batch size to lower, never torch's traceback; nothing is written."""
    from real_attention.engine import extract, measures
    from real_attention.head_importance import run as importance_run

    monkeypatch.setattr(measures, "_forward_measured", _out_of_memory)  # compare's passes
    monkeypatch.setattr(extract, "forward_layers", _out_of_memory)  # detect's
    monkeypatch.setattr(importance_run, "intact", _out_of_memory)  # importance's first pass
    corpus = write_corpus(tmp_path)
    model = str(tiny_model_dir)
    args = {
        "compare": ["compare", "--corpus", str(corpus), "--model", model, "--model", model, "--name", "self"],
        "detect": ["detect", "--model", model, "--length", "5", "--samples", "3", "--repeats", "3", "--name", "d"],
        "importance": ["importance", "--model", model, "--corpus", str(corpus), "--objective", "embedding"],
    }[command]
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, [*args, "--batch-size", "8", "--out", str(out), "--quiet"])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [lines[-1]] and lines[-1].startswith("Error: the device cpu ran out of memory"), result.output
    assert "smaller batch_size (--batch-size); this run used 8" in lines[-1] and "Traceback" not in result.output
    assert not [p for p in out.rglob("*") if p.is_file()]


def test_float64_work_moves_to_the_cpu_only_on_mps():
    """MPS has no float64: per-head totals, rollouts, JS sums and the float64 re-runs go to the CPU there, and
    stay on the device elsewhere."""
    from real_attention.engine.models import float64_device

    assert float64_device("mps") == torch.device("cpu") and float64_device("mps:0") == torch.device("cpu")
    assert float64_device("cuda:1") == torch.device("cuda", 1) and float64_device("cpu") == torch.device("cpu")


def test_host_arrays_reach_the_device_whole_and_the_marker_keys_need_no_copy():
    """to_device (pinned and non-blocking to CUDA; plain elsewhere) keeps values and dtype; key_sets finds the
    marker kinds by comparisons (torch.isin needs its kinds as a tensor on the device: a copy that waits)."""
    import numpy as np

    from real_attention.engine.extract import to_device
    from real_attention.engine.heads import key_sets
    from real_attention.engine.words import MARKER_KINDS, Kind

    rows = np.arange(24, dtype=np.int64).reshape(4, 6)[:, ::2]  # not contiguous
    moved = to_device(rows, "cpu")
    assert moved.dtype == torch.int64 and moved.numpy().tolist() == rows.tolist()
    kinds = torch.from_numpy(np.random.default_rng(0).integers(0, len(Kind), (5, 9)))
    keys = key_sets(kinds, torch.float32)
    assert torch.equal(keys[:, 4].bool(), torch.isin(kinds, torch.tensor(MARKER_KINDS)))


def test_out_of_device_memory_in_run_is_one_line_that_suggests_a_smaller_batch(tmp_path, tiny_model_dir, monkeypatch):
    from real_attention.engine import measures

    monkeypatch.setattr(measures, "_forward_measured", _out_of_memory)
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", "--model", str(tiny_model_dir), "--batch-size", "4", "--no-figures",
                                      "--no-report", "--out", str(out), "--quiet"])
    assert result.exit_code != 0
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [lines[-1]] and lines[-1].startswith("Error: the device cpu ran out of memory on a batch of 2 sentence")
    assert "smaller batch_size (--batch-size); this run used 4" in lines[-1] and "Traceback" not in result.output
    assert not [p for p in out.rglob("*") if p.is_file()]


def test_run_batch_size_is_checked_and_passed_on(tmp_path, tiny_model_dir):
    import real_attention as ra
    from real_attention.engine.errors import InputError

    with pytest.raises(InputError, match=re.escape("batch_size (--batch-size) 0 is out of range: at least 1")):
        ra.run(model=str(tiny_model_dir), out=tmp_path, batch_size=0, figures=False, report=False)
    small = ra.run(model=str(tiny_model_dir), out=tmp_path / "a", batch_size=1, figures=False, report=False)
    assert small.runs[0].result.report is not None


def test_the_cpu_allocator_running_out_is_out_of_memory():
    """The CPU's allocator says "can't allocate memory" (a RuntimeError, not torch.OutOfMemoryError): the same one
    Error line that suggests --batch-size, not the 'hit a bug' traceback."""
    from real_attention.engine.extract import OutOfDeviceMemory, is_out_of_memory, out_of_memory_as_error

    cpu = RuntimeError("[enforce fail at alloc_cpu.cpp:118] data. DefaultCPUAllocator: can't allocate memory: you "
                       "tried to allocate 41943040000 bytes. Error code 12 (Cannot allocate memory)")
    assert is_out_of_memory(cpu) and not is_out_of_memory(RuntimeError("shape mismatch"))
    with pytest.raises(OutOfDeviceMemory, match=r"the device cpu ran out of memory; pass a smaller batch_size \(--batch-size\)"):
        with out_of_memory_as_error("cpu", 4000):
            raise cpu
