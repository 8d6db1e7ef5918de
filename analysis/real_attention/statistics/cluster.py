"""Where `heads --corpus` runs: this process, or a Dask cluster; partitions of sentences out, exact sums back.

Every run cuts the corpus into partitions of `partition_size` sentences. On a cluster each runs through
real_attention.statistics.sums.corpus_sums on its own, and the partitions' HeadSums are added in partition order,
whatever order they finish in; this process streams them all through one corpus_sums (the same bits, fewer dummy
rows). Each sentence runs in a batch whose shape depends on its length alone
(real_attention.engine.batches.fixed_batches), so the single process and a cluster compute the same per-sentence
values and add them exactly: with the same --batch-size and number of torch threads the results are equal bit for bit.
(MKL's float32 matrix products may split their work differently for another thread count, which moves the
means in the 7th significant digit; MKL_CBWR=AVX2,STRICT in every process's environment removes that, at a
cost in speed; see docs/corpus.md, "On a cluster".)

Dask is an optional extra: real_attention.statistics.dask_engine imports it, and only a run that asks for a cluster imports
that module.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from collections.abc import Callable, Iterable, Iterator

from .partitions import OrderedSum, Partition, partition_sums, partitions  # noqa: F401  (re-exported)
from .sums import CorpusError, CorpusReader, HeadSums, corpus_sums
from ..engine.batches import SHAPES
from ..engine.checks import whole_number
from ..engine.units import DEFAULT_UNITS
from ..engine.errors import MissingPackage

# 1024 = the default batch size (32) x the batches that corpus_sums reads ahead at once (32). The size changes no
# bit of the sums (fixed-shape batches); on a cluster a partition's last batches are filled with dummy rows, so
# larger partitions waste less (a single process streams across partitions: dummy rows only at the corpus's end).
DEFAULT_PARTITION_SIZE = 1024
SINGLE_PROCESS, DASK_LOCAL, DASK_SCHEDULER = "single-process", "dask-local", "dask-scheduler"


class DaskMissing(MissingPackage):
    """A cluster was asked for, but Dask is not installed; the message says what to install."""


def require_dask(option: str):
    """The `distributed` module; DaskMissing names the extra to install."""
    try:
        import distributed
    except ImportError:
        raise DaskMissing(f'{option} needs Dask: pip install "real-attention[dask]"') from None
    return distributed


MAX_PARALLEL = 1024  # the most --workers and --threads: more cannot start on any machine this runs on


@dataclass(frozen=True)
class Engine:
    """Where a corpus run computes: this process, a local Dask cluster or an existing one."""

    workers: int | None = None  # --workers: start a local cluster of this many worker processes
    scheduler: str | None = None  # --scheduler: connect to the cluster whose scheduler listens here
    threads: int | None = None  # torch threads per process; None: torch's default here, 1 per cluster worker
    partition_size: int = DEFAULT_PARTITION_SIZE  # sentences per partition (blank lines not counted)

    def __post_init__(self) -> None:
        if self.workers is not None and self.scheduler is not None:
            raise CorpusError("workers (--workers) starts a local cluster and scheduler (--scheduler) connects to one; "
                              "pass only one")
        for name in ("workers", "threads", "partition_size"):
            value = getattr(self, name)
            if value is not None:  # thousands of threads or worker processes only fail later, as a bug would
                whole_number(value, f"{name} (--{name.replace('_', '-')})", 1,
                             None if name == "partition_size" else MAX_PARALLEL, error=CorpusError)

    @property
    def kind(self) -> str:
        return SINGLE_PROCESS if self.workers is None and self.scheduler is None else (
            DASK_LOCAL if self.workers is not None else DASK_SCHEDULER)

    def check(self) -> None:
        """DaskMissing now, before any work, if this engine needs Dask and it is not installed."""
        if self.kind != SINGLE_PROCESS:
            require_dask("workers (--workers)" if self.kind == DASK_LOCAL else "scheduler (--scheduler)")

    @property
    def worker_threads(self) -> int | None:
        return self.threads if self.threads is not None or self.kind == SINGLE_PROCESS else 1


def single_process_sums(loaded, parts: Iterable[Partition], batch_size: int, truncate: bool,
                        progress=None, units: str = DEFAULT_UNITS,
                        measure: str = "weights") -> tuple[HeadSums, int]:
    """Run every partition here, in order, as one stream; -> (the sums, the number of partitions).

    The sums are those of the partitions added in order, bit for bit (each sentence's totals are the same whatever
    batch it runs in, and fixed-point totals add exactly), but one stream fills each length group's batches across
    the partitions' boundaries: only the corpus's last batches need dummy rows, not every partition's (with
    partitions of 1024 on the seed corpus, about 12 % more rows for the model to run)."""
    counted = [0]

    def texts() -> Iterator[str]:
        for part in parts:
            counted[0] += 1
            if progress is not None and part.lines > len(part.texts):
                progress.update(part.lines - len(part.texts))  # blank lines, which corpus_sums never sees
            yield from part.texts

    reader = CorpusReader((text.encode("utf-8") + b"\n" for text in texts()), "text", source="the partitions",
                          file_start=False)
    sums = corpus_sums(loaded, reader, batch_size=batch_size, truncate=truncate, progress=progress, units=units,
                       measure=measure)
    return sums, counted[0]


def engine_record(engine: Engine, workers: int, partitions_run: int, device: str = "cpu", batch_size: int = 32) -> dict:
    """summary.json's "engine": how the run was computed. The statistics are the same bits for any workers,
    partitions and shards; batch size, torch threads, device and the shape rules (`shapes`, engine.batches.SHAPES)
    can move them in the last bits (merge warns)."""
    dask_version = None
    if engine.kind != SINGLE_PROCESS:
        import dask

        dask_version = dask.__version__
    return {
        "name": engine.kind,
        "workers": workers,
        "torch_threads": engine.worker_threads,
        "partitions": partitions_run,
        "partition_size": engine.partition_size,
        "dask": dask_version,
        "device": device,  # the torch device the model ran on (--device auto resolved)
        "batch_size": batch_size,
        "shapes": SHAPES,  # the version of the batch shape rules: a sentence's bits follow them
    }


@dataclass(frozen=True)
class CorpusResult:
    """What a corpus run computed, and how."""

    sums: HeadSums
    model: str  # the model's name, as summary.json shows it
    revision: str  # the resolved commit, or "sha256:..." of a folder's weights
    engine: dict  # engine_record()


def resolved_revision(choice, offline: bool) -> str:
    """The revision a run pins every worker to, found without loading the model: a Hub id's commit (from the
    cache or the Hub), or the sha256 of a folder's weights."""
    from ..engine.models import folder_revision, hub_options, resolved_commit

    if choice.path is not None:
        return folder_revision(choice)
    return resolved_commit(choice, hub_options(choice, offline))


def run_corpus(engine: Engine, sentences, *, lang: str | None, model: str | None, revision: str | None,
               device: str = "cpu", offline: bool = False, batch_size: int = 32, truncate: bool = False,
               progress=None, on_partition: Callable[[int], None] | None = None,
               units: str = DEFAULT_UNITS, measure: str = "weights") -> CorpusResult:
    """Pool a corpus's per-head sums where `engine` says; `sentences` is a CorpusText (or a CorpusReader).

    The model is chosen as real_attention.engine.models.choose_model(lang, model, revision); `units` is the unit rule; the
    statistics are pooled over the maps of `measure` (real_attention.engine.measures). In a single process the model is
    loaded here; on a cluster every worker loads it once and checks the revision this process resolved.
    Library errors only: CorpusError, ModelUnavailable, DaskMissing.
    """
    from ..engine.models import choose_model, resolve_device

    choice = choose_model(lang, model, revision)
    parts = partitions(sentences, engine.partition_size, lambda: sentences.lines)
    if engine.kind == SINGLE_PROCESS:
        import torch

        from ..engine.models import load_model

        loaded = load_model(choice, device=device, offline=offline)
        before = torch.get_num_threads()
        threads = engine.threads or before
        torch.set_num_threads(threads)
        try:
            sums, count = single_process_sums(loaded, parts, batch_size, truncate, progress, units, measure)
        finally:
            torch.set_num_threads(before)  # the caller's setting, as it was
        record = engine_record(dataclasses.replace(engine, threads=threads), 1, count, loaded.device, batch_size)
        name, pinned = loaded.choice.name, loaded.revision
    else:
        engine.check()
        from .dask_engine import ModelSpec, connect, dask_sums

        pinned = resolved_revision(choice, offline)
        spec = ModelSpec(lang=lang, model=model, request=None if choice.path is not None else pinned,
                         expected=pinned, device=device, offline=offline)
        threads = engine.worker_threads
        assert threads is not None, "a cluster's workers get 1 torch thread unless --threads says otherwise"
        with connect(engine.workers, engine.scheduler, threads) as client:
            workers = len(client.scheduler_info()["workers"])
            sums, count = dask_sums(client, spec, threads, parts, batch_size, truncate, progress,
                                    on_partition, units=units, measure=measure)
        record = engine_record(engine, workers, count, resolve_device(device), batch_size)
        name = choice.name
    # partitions see no blank lines: the reader counted them
    return CorpusResult(sums=dataclasses.replace(sums, lines=sentences.lines, blank=sentences.blank), model=name,
                        revision=pinned, engine=record)
