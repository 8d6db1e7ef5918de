"""What --measure norm costs: `run --measure norm` against `run`, and `heads --corpus --measure norm` against the
weights corpus run, as ratios measured in the same run (target <= 1.3x each).

1. `real-attention run --model minilm` as fresh processes, interleaved, `--repeats` times, with
   --no-figures --no-report (the computation) and with every output; medians and their ratio to plain `run`.
2. real_attention.statistics.sums.corpus_sums over the seed sentences repeated to `--sentences` lines, in this process with
   `--threads` torch threads (default 1: on a shared machine two OpenMP threads make the timings erratic),
   weights and norm interleaved, `--repeats` times; the fastest of each and their ratio.

    python benchmarks/bench_measures.py [--repeats 5] [--sentences 600] [--threads 1] [--skip-run]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_corpus import build_corpus, load  # noqa: E402
from bench_run import compare  # noqa: E402


def run_ratios(repeats: int) -> None:
    with tempfile.TemporaryDirectory() as out:
        tool = [sys.executable, "-m", "real_attention", "run", "--model", "minilm", "--out", out, "--quiet"]
        commands = {
            "run --no-figures --no-report": tool + ["--no-figures", "--no-report"],
            "  --measure norm": tool + ["--no-figures", "--no-report", "--measure", "norm"],
            "run (all outputs)": tool,
            "  --measure norm (all outputs)": tool + ["--measure", "norm"],
        }
        print("run, fresh processes; ratios to the first row")
        compare(commands, "run --no-figures --no-report", repeats)


def corpus_ratios(repeats: int, sentences: int, threads: int) -> None:
    import torch

    from real_attention.statistics.sums import CorpusReader, corpus_sums

    torch.set_num_threads(threads)
    loaded = load()
    with tempfile.TemporaryDirectory() as folder:
        path, lines = build_corpus(Path(folder), sentences=sentences)
        times: dict[str, list[float]] = {"weights": [], "norm": []}
        for _ in range(repeats):
            for measure in times:
                with path.open("rb") as handle:
                    start = time.perf_counter()
                    corpus_sums(loaded, CorpusReader(handle), measure=measure)
                    times[measure].append(time.perf_counter() - start)
    best = {measure: min(values) for measure, values in times.items()}
    print(f"\nheads --corpus (corpus_sums), {lines} sentences, {threads} torch thread(s), fastest of {repeats}")
    for measure, seconds in best.items():
        print(f"{measure:8} {seconds:7.2f} s {lines / seconds:7.0f} sent/s  ratio {seconds / best['weights']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=600)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--skip-run", action="store_true", help="Only the corpus ratio.")
    args = parser.parse_args()
    if not args.skip_run:
        run_ratios(args.repeats)
    corpus_ratios(args.repeats, args.sentences, args.threads)


if __name__ == "__main__":
    main()
