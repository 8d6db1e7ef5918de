"""Cost of `real-attention importance` (ra.importance) against the intact forward pass, as ratios in one run.

The corpus: benchmarks/corpus_seeds.txt (the first --limit lines). The model: the packaged MiniLM (embedding
objective), or --model. Timed, alternately, `repeats` times each, on the same encoded batches:

- intact: one pass of the intact model over the corpus, the objective computed (no masking at all);
- ablation: the L x H masked passes of the ablation scores (every mask, batched several per forward pass);
- taylor: one forward and one backward pass per batch, the gradients with respect to a (layers, heads) ξ of ones
  (on MiniLM's embedding objective these gradients are zero, but they cost what they cost on any objective).

Reported: the median of each, ablation / ((L x H + 1) x intact) (target <= 1.2) and taylor / intact
(target <= 3).

    python benchmarks/bench_importance.py [--repeats 3] [--limit 32] [--batch-size 32] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "analysis"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--objective", default="auto")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--limit", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import numpy as np
    import real_attention as ra
    from real_attention.head_importance.objectives import evaluate, intact, prepare, taylor
    from real_attention.head_importance.run import read_corpus, scorer_for, split_sentences

    texts, labels = split_sentences(read_corpus(ROOT / "benchmarks" / "corpus_seeds.txt", args.limit))
    scorer = scorer_for(ra.load(args.model), args.objective, labels is not None)
    prepared = prepare(scorer, texts, batch_size=args.batch_size)
    layers, heads = scorer.layers, scorer.heads
    count = layers * heads
    masks = np.ones((count, layers, heads))
    masks.reshape(count, count)[np.arange(count), np.arange(count)] = 0.0

    runs = {
        "intact": lambda: intact(scorer, prepared),
        "ablation": lambda: evaluate(scorer, prepared, masks),
        "taylor": lambda: taylor(scorer, prepared),
    }
    runs["intact"]()  # warm up
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(values) for name, values in times.items()}
    report = {
        "model": args.model, "objective": scorer.objective, "sentences": prepared.sentences,
        "layers": layers, "heads": heads, "repeats": args.repeats, "seconds": median,
        "ablation_ratio": median["ablation"] / ((count + 1) * median["intact"]),
        "taylor_ratio": median["taylor"] / median["intact"],
        "targets": {"ablation_ratio": 1.2, "taylor_ratio": 3.0},
    }
    print(json.dumps(report, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
