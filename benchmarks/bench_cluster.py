"""Throughput of `heads --corpus` on a local Dask cluster against the single process, and its fixed costs.

The corpus: benchmarks/corpus_seeds.txt (182 sentences) repeated to at least --sentences lines. The model:
the packaged MiniLM. Measured in one run, as ratios:

1. throughput: a LocalCluster of --workers worker processes x 1 torch thread (real_attention.statistics.dask_engine.dask_sums,
   the model already loaded on every worker) against the single process with --threads torch threads
   (real_attention.statistics.cluster.single_process_sums, the model already loaded); the same partitions and batches;
   --repeats interleaved pairs of runs. Reported: the ratio of the best run of each, and the median of the
   pairs' ratios (steadier when other processes share the cores). Target >= 0.9x on this 2-core machine.
2. fixed costs: starting the LocalCluster and connecting a client; loading the model on every worker
   (registering the ModelPlugin), against loading it once in this process.

    python benchmarks/bench_cluster.py [--sentences 1500] [--workers 2] [--threads 2] [--partition-size 256]
                                       [--repeats 3] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import logging
import math
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SEEDS = Path(__file__).with_name("corpus_seeds.txt")


def corpus(sentences: int) -> list[str]:
    seeds = [line.strip() for line in SEEDS.read_text(encoding="utf-8").splitlines() if line.strip()]
    return seeds * math.ceil(sentences / len(seeds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=1500)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the single process")
    parser.add_argument("--partition-size", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--nanny-trim", action="store_true",
                        help="keep Dask's MALLOC_TRIM_THRESHOLD_=65536 in the workers (what the tool turns off)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import numpy as np
    import torch
    from distributed import Client, LocalCluster
    from transformers.utils import logging as hf_logging

    from real_attention.statistics.cluster import partitions, resolved_revision, single_process_sums
    import dask

    from real_attention.statistics.dask_engine import NANNY_TRIM, PLUGIN_NAME, ModelPlugin, ModelSpec, dask_sums
    from real_attention.engine.models import choose_model, load_model

    hf_logging.disable_progress_bar()
    texts = corpus(args.sentences)
    parts = lambda: partitions(iter(texts), args.partition_size, lambda: 0)  # noqa: E731

    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    choice = choose_model(None, "minilm", None)
    loaded = load_model(choice)
    load_here = time.perf_counter() - start

    start = time.perf_counter()
    with dask.config.set({NANNY_TRIM: None} if not args.nanny_trim else {}):  # as real_attention.statistics.dask_engine.connect
        cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=":0",
                               silence_logs=logging.ERROR)
    client = Client(cluster)
    client.wait_for_workers(args.workers)
    start_cluster = time.perf_counter() - start
    revision = resolved_revision(choice, offline=True)
    spec = ModelSpec(lang=None, model="minilm", request=None, expected=revision)
    start = time.perf_counter()
    client.register_plugin(ModelPlugin(spec, 1), name=PLUGIN_NAME)  # returns when every worker has loaded it
    load_workers = time.perf_counter() - start

    single, dask = [], []
    for repeat in range(args.repeats):  # interleaved: both see the same load from other processes
        start = time.perf_counter()
        here, _ = single_process_sums(loaded, parts(), args.batch_size, False)
        single.append(time.perf_counter() - start)
        start = time.perf_counter()
        there, count = dask_sums(client, spec, 1, parts(), args.batch_size, False, register=False)
        dask.append(time.perf_counter() - start)
        print(f"repeat {repeat + 1}: single process {len(texts) / single[-1]:.0f} sent/s, "
              f"{args.workers} workers {len(texts) / dask[-1]:.0f} sent/s", flush=True)
    client.close()
    cluster.close()

    result = {
        "sentences": len(texts),
        "partitions": count,
        "partition_size": args.partition_size,
        "single_process_threads": args.threads,
        "workers": args.workers,
        "nanny_malloc_trim": args.nanny_trim,
        "single_process_sent_per_s": round(len(texts) / min(single), 1),
        "cluster_sent_per_s": round(len(texts) / min(dask), 1),
        "per_worker_sent_per_s": round(len(texts) / min(dask) / args.workers, 1),
        "ratio": round(min(single) / min(dask), 3),
        "median_pair_ratio": round(statistics.median(s / d for s, d in zip(single, dask)), 3),
        "start_cluster_s": round(start_cluster, 2),
        "load_model_on_workers_s": round(load_workers, 2),
        "load_model_here_s": round(load_here, 2),
        "max_abs_difference_of_sums": float(np.abs(here.totals - there.totals).max()),
    }
    print(f"cluster / single process throughput: {result['ratio']:.2f}x best against best, "
          f"{result['median_pair_ratio']:.2f}x median of pairs (target >= 0.9x); "
          f"{result['cluster_sent_per_s']} against {result['single_process_sent_per_s']} sent/s")
    print(f"fixed costs: start the cluster {start_cluster:.1f} s, load the model on every worker "
          f"{load_workers:.1f} s (once here: {load_here:.1f} s)")
    print(f"largest difference of the sums (worker threads 1, here {args.threads}): "
          f"{result['max_abs_difference_of_sums']:.3g}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
