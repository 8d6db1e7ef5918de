"""Cost of `real-attention compare` (ra.compare) against the models' bare forward passes, as a ratio in one run.

The corpus: benchmarks/corpus_seeds.txt (--limit N: its first N lines). The models: the packaged MiniLM and SmolLM2
(72 x 270 heads: 342 heads, 58,311 head pairs) unless --models says otherwise. Timed, alternately, `repeats`
times each:

- ours: the whole ra.compare call: both passes (the first only tokenizes), every model's forward pass with each
  layer's maps merged into word rows, the Jensen-Shannon sums of every head pair, the matrix, the Hungarian
  matching and the MDS (no files written);
- bare: each model in turn runs the same sentences, tokenized and sorted by length into the same batch sizes
  (real_attention.statistics.sums.length_batches), with output_attentions=True, every map dropped; the models'
  times added up.

Reported: the median of each and the ratio ours / bare (1.0: comparing costs nothing over the forward passes).
Target <= 1.3.

    python benchmarks/bench_compare.py [--models minilm smollm2] [--limit N] [--repeats 1] [--batch-size 32]
                                       [--json OUT.json]
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class Pieces(NamedTuple):
    """What length_batches needs of a sentence: its piece ids."""

    ids: list[int]


def bare(loaded, texts: list[str], batch_size: int) -> float:
    """Tokenize, sort by length and batch, pad, forward with output_attentions; -> seconds."""
    import torch
    from real_attention.statistics.sums import BUCKET_BATCHES, length_batches

    start = time.perf_counter()
    stream = iter(texts)
    with torch.inference_mode():
        while chunk := list(itertools.islice(stream, batch_size * BUCKET_BATCHES)):
            encoded = [Pieces(ids) for ids in loaded.tokenizer(chunk, verbose=False)["input_ids"]]
            encoded = [e for e in encoded if len(e.ids) <= loaded.max_tokens]
            for batch in length_batches(encoded, batch_size):
                width = max(len(s.ids) for s in batch)
                pad = loaded.tokenizer.pad_token_id or 0
                input_ids = torch.full((len(batch), width), pad, dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for row, sentence in enumerate(batch):
                    input_ids[row, :len(sentence.ids)] = torch.tensor(sentence.ids)
                    mask[row, :len(sentence.ids)] = 1
                maps = loaded.model(input_ids=input_ids, attention_mask=mask, output_attentions=True).attentions
                assert len(maps) == loaded.layers
                del maps
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["minilm", "smollm2"])
    parser.add_argument("--limit", type=int, default=None, help="the first N lines only")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    args = parser.parse_args()

    from transformers.utils import logging as hf_logging

    import real_attention as ra

    hf_logging.disable_progress_bar()
    lines = [line.strip() for line in (ROOT / "benchmarks/corpus_seeds.txt").read_text(encoding="utf-8").splitlines()]
    texts = [line for line in lines if line][:args.limit]
    models = [ra.load(name) for name in args.models]
    for model in models:  # warm-up
        bare(model, texts[:2], args.batch_size)
    times: dict[str, list[float]] = {"ours": [], "bare": []}
    result = None
    for _ in range(args.repeats):
        start = time.perf_counter()
        result = ra.compare(models, texts, names=args.models, batch_size=args.batch_size)
        times["ours"].append(time.perf_counter() - start)
        times["bare"].append(sum(bare(model, texts, args.batch_size) for model in models))
    assert result is not None
    ours, base = statistics.median(times["ours"]), statistics.median(times["bare"])
    heads = [m.layers * m.heads for m in models]
    numbers = {"models": args.models, "heads": heads, "sentences": result.summary["counts"]["sentences"],
               "rows": result.summary["counts"]["words"], "rule": result.summary["rule"],
               "ours_s": round(ours, 3), "bare_s": round(base, 3), "ratio": round(ours / base, 3),
               "times": {k: [round(t, 3) for t in v] for k, v in times.items()}, "batch_size": args.batch_size,
               "limit": args.limit}
    print(f"{numbers['sentences']} sentences, {numbers['rows']} word rows, {' x '.join(args.models)} "
          f"({' x '.join(map(str, heads))} heads), rule {numbers['rule']}, batch size {args.batch_size}")
    print(f"ra.compare       {ours:8.2f} s (median of {args.repeats}: {times['ours']})")
    print(f"bare forwards    {base:8.2f} s (median of {args.repeats}: {times['bare']})")
    print(f"ratio ours/bare  {ours / base:8.2f}  (target <= 1.3)")
    if args.json:
        args.json.write_text(json.dumps(numbers, indent=2, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
