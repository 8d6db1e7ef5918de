"""The Dask side of a corpus run: a worker plugin that loads the model once, partitions out, sums back in order.

Imported only when a run asks for a cluster (real_attention.statistics.cluster.require_dask checks first). The client reads
the corpus, cuts it into partitions and keeps a bounded number in flight; each worker runs its partitions
through the model it loaded once (ModelPlugin) and returns their exact HeadSums; the client adds them in
partition order. A worker that dies takes its partitions with it, and Dask's scheduler runs them again
elsewhere.
"""
from __future__ import annotations

import contextlib
import logging
import uuid
from dataclasses import dataclass
from collections.abc import Callable, Iterable, Iterator

import dask
from distributed import Client, LocalCluster, WorkerPlugin, as_completed, get_worker

from .partitions import OrderedSum, Partition, partition_sums
from .sums import CorpusError, HeadSums
from ..engine.errors import ModelUnavailable, RealAttentionError
from ..engine.models import LoadedModel
from ..engine.units import DEFAULT_UNITS

PLUGIN_NAME = "real-attention-model"
CONNECT_TIMEOUT = "10s"  # how long --scheduler waits for the scheduler to answer
# Dask's nannies start workers with MALLOC_TRIM_THRESHOLD_=65536, so glibc hands every freed attention map
# back to the system and maps it in again for the next batch: a third of a worker's throughput here
# (benchmarks/bench_cluster.py). None leaves glibc's own, adaptive threshold.
NANNY_TRIM = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"
IN_FLIGHT_PER_WORKER = 2  # partitions queued per worker beyond the one it runs: no worker waits for the client


@dataclass(frozen=True)
class ModelSpec:
    """What every worker loads, as the user asked for it, pinned to the revision the client resolved."""

    lang: str | None
    model: str | None  # --model as given ('minilm', a Hub id, a folder), or None for the pin of lang
    request: str | None  # the revision to load: the resolved commit of a Hub id; None for a folder
    expected: str  # the revision every worker must find: that commit, or "sha256:..." of a folder's weights
    device: str = "cpu"
    offline: bool = False


class ModelPlugin(WorkerPlugin):
    """Load the model once per worker, with `threads` torch threads, and check its revision.

    A library error (the model cannot be had, or it is another revision) is kept and raised by every task of
    the worker, so the run fails with that one message; Dask does not retry a task that raised.
    """

    name = PLUGIN_NAME

    def __init__(self, spec: ModelSpec, threads: int):
        self.spec, self.threads = spec, threads
        self.loaded: LoadedModel | None = None
        self.error: RealAttentionError | None = None

    def setup(self, worker) -> None:
        import torch

        from ..engine.models import choose_model, load_model

        torch.set_num_threads(self.threads)
        spec = self.spec
        try:
            loaded = load_model(choose_model(spec.lang, spec.model, spec.request), device=spec.device,
                                offline=spec.offline)
        except RealAttentionError as error:
            self.error = type(error)(f"worker {worker.address}: {error}")
            return
        if loaded.revision != spec.expected:
            self.error = ModelUnavailable(
                f"worker {worker.address} loaded {loaded.choice.name} at revision {loaded.revision}, but the client "
                f"resolved {spec.expected}: give every worker the same model (the same Hub revision in its cache, "
                "or the same weights in the folder)"
            )
            return
        self.loaded = loaded

    def teardown(self, worker) -> None:
        self.loaded = None

    def model(self):
        if self.error is not None:
            raise self.error
        assert self.loaded is not None
        return self.loaded


def worker_partition_sums(texts: tuple[str, ...], batch_size: int, truncate: bool, units: str,
                          measure: str = "weights") -> HeadSums:
    """The task: one partition through the model that this worker's plugin loaded."""
    plugin = get_worker().plugins[PLUGIN_NAME]
    return partition_sums(plugin.model(), texts, batch_size, truncate, units=units, measure=measure)


@contextlib.contextmanager
def connect(workers: int | None, scheduler: str | None, threads: int) -> Iterator[Client]:
    """A client of a new local cluster (`workers` processes of one task each) or of the one at `scheduler`."""
    if scheduler is not None:
        from distributed.comm.addressing import get_address_host_port

        try:  # before the Client starts its event loop: no port, a bad port or protocol, and Dask's parser says which
            get_address_host_port(scheduler)
            client = Client(scheduler, timeout=CONNECT_TIMEOUT)
        except (OSError, TimeoutError) as error:
            raise CorpusError(f"scheduler (--scheduler) {scheduler}: cannot reach a Dask scheduler there ({error}); start one "
                              "with `dask scheduler` or check the address") from None
        except (ValueError, TypeError) as error:
            raise CorpusError(f"scheduler (--scheduler) {scheduler!r} is not a scheduler address ({error}); give one as "
                              "tcp://HOST:PORT") from None
        with client:
            yield client
        return
    # One Dask thread per worker (one partition at a time); torch's threads are the plugin's business. A failed
    # task comes back to the client as its error (one Error: line); the worker's own log of it, with a
    # traceback, would only repeat it.
    with dask.config.set({NANNY_TRIM: None}):
        with _workers_ignore_ctrl_c():  # while they start, not while this process waits for them
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                                   silence_logs=logging.CRITICAL)
        with cluster, Client(cluster) as client:
            yield client


@contextlib.contextmanager
def _workers_ignore_ctrl_c() -> Iterator[None]:
    """SIGINT ignored while the local cluster starts its worker processes, which keep that disposition: Ctrl-C
    reaches every process of the terminal's group, and each worker printed its own KeyboardInterrupt traceback;
    this process, which handles it, shuts the cluster down. (Only the main thread may change a handler.)"""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def dask_sums(client: Client, spec: ModelSpec, threads: int, parts: Iterable[Partition], batch_size: int,
              truncate: bool, progress=None, on_partition: Callable[[int], None] | None = None,
              register: bool = True, units: str = DEFAULT_UNITS, measure: str = "weights") -> tuple[HeadSums, int]:
    """Run every partition on the client's cluster; -> (their sums added in partition order, the partitions).

    At most IN_FLIGHT_PER_WORKER + 1 partitions per worker are in flight, so the client holds a bounded part of
    the corpus. `progress` (tqdm-like) advances by each finished partition's lines; `on_partition(done)` is
    called after each (the tests use it to kill a worker mid-run). register=False: the caller registered
    ModelPlugin(spec, threads) already (the benchmark times the model loads apart), and keeps it.
    measure: the maps the statistics are pooled over (real_attention.engine.measures).
    """
    if register:
        client.register_plugin(ModelPlugin(spec, threads), name=PLUGIN_NAME)
    token = uuid.uuid4().hex[:12]
    limit = (IN_FLIGHT_PER_WORKER + 1) * max(1, len(client.scheduler_info()["workers"]))
    ordered = OrderedSum()
    waiting = as_completed()
    indexes: dict = {}  # future -> (partition index, lines)
    done = 0

    def finish_one() -> None:
        nonlocal done
        future = next(waiting)
        index, lines = indexes.pop(future)
        ordered.add(index, future.result())  # raises the task's error, e.g. another model on a worker
        future.release()
        done += 1
        if progress is not None:
            progress.update(lines)
            progress.set_postfix_str(f"{done} partitions", refresh=False)
        if on_partition is not None:
            on_partition(done)

    try:
        for part in parts:
            future = client.submit(worker_partition_sums, part.texts, batch_size, truncate, units, measure,
                                   key=f"real-attention-{token}-{part.index}", pure=False)
            indexes[future] = (part.index, part.lines)
            waiting.add(future)
            while len(indexes) >= limit:
                finish_one()
        while indexes:
            finish_one()
    finally:
        if indexes:  # interrupted or failed: drop what is still queued
            client.cancel(list(indexes))
        if register:
            with contextlib.suppress(Exception):
                client.unregister_worker_plugin(PLUGIN_NAME)
    assert ordered.total is not None
    return ordered.total, ordered.added
