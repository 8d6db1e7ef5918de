"""Run the corpus statistics many times on the same sentences in one process and count the distinct results.

Outputs must be byte-identical run after run. This is the check for the one unexplained difference seen so far (one
of about 20 identical `heads --batch-size 4` runs, on a loaded machine, gave layer-1 entropy totals that differed by
about 2 float32 ulp of one sentence's total). Run two or three copies at once to load the machine as that run was.
Each run's exact fixed-point sums (HeadSums.fixed) are hashed; a result unlike the first prints the (statistic, layer,
head) cells that differ. Exit status 1 if any run differed.
Last run (2026-12-06, 3 copies at once on 2 cores, the first 120 seed lines and 5 edge lines, batch sizes 4, 4 and 32):
77 runs, one result per batch size: not reproduced.

    python benchmarks/check_determinism.py [--corpus FILE] [--runs 20] [--batch-size 4] [--model minilm]
"""
from __future__ import annotations

import argparse
import hashlib
import io
import sys
from pathlib import Path

SEEDS = Path(__file__).resolve().parent / "corpus_seeds.txt"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=SEEDS)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--model", default="minilm")
    args = parser.parse_args()

    import numpy as np

    from real_attention.engine.heads import STATISTICS
    from real_attention.engine.models import choose_model, load_model
    from real_attention.statistics.reading import CorpusReader
    from real_attention.statistics.streaming import corpus_sums

    loaded = load_model(choose_model("en", args.model, None), offline=True)
    data = args.corpus.read_bytes()
    first: np.ndarray | None = None
    results: set[str] = set()
    for run in range(1, args.runs + 1):
        sums = corpus_sums(loaded, CorpusReader(io.BytesIO(data), "text"), batch_size=args.batch_size)
        fixed = np.asarray(sums.fixed, dtype=object)  # (statistics, layers, heads) Python ints
        digest = hashlib.sha256(repr(fixed.tolist()).encode()).hexdigest()[:12]
        if first is None:
            first = fixed
        elif digest not in results:
            cells = [(STATISTICS[s], int(layer) + 1, int(head) + 1) for s, layer, head in np.argwhere(fixed != first)]
            print(f"run {run}: a new result {digest}; (statistic, layer, head) cells that differ: {cells[:20]}")
        results.add(digest)
        print(f"run {run}: {digest}", flush=True)
    print(f"{len(results)} distinct result(s) in {args.runs} runs")
    return 0 if len(results) == 1 else 1


if __name__ == "__main__":
    sys.exit(main())
