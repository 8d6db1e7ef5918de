"""Throughput of `real-attention syntax` (ra.syntax) against the bare batched forward pass, as a ratio in one run.

The treebank: UD English-EWT dev (2,001 sentences; $REAL_ATTENTION_UD, else shared/data/ud beside the checkout,
else /work/shared/data/ud). The model: the packaged MiniLM. Timed, alternately, `repeats` times each:

- ours: the whole ra.syntax call: the treebank read and checked, every sentence encoded by the given-words rule,
  the forward passes with each layer's maps merged into word maps, every head's predictions counted, the tables
  and the example sentences' forward pass (no files written);
- bare: the same sentences (the words joined by single spaces, read beforehand, untimed) tokenized and run through
  the model with output_attentions=True, in the same length-sorted batches (real_attention.statistics.sums.length_batches
  over the same buckets), every map dropped.

Reported: the median of each and the ratio bare / ours (1.0: the probe costs nothing over the forward pass).
Target >= 0.8 (issue 28: >= 0.9).
Last measured (issue 28, 2026-12-06, 2 cores, load 1.3-1.8, --repeats 5), the forward pass stopping at the last
maps: ra.syntax 4.32 s, bare 3.89 s, 0.90x (median). 2026-12-05, quiet: ra.syntax 4.00 s, bare 3.39 s, 0.85x (median);
before (load 0.9-1.3): ra.syntax 4.77 s, bare 3.81 s, 0.80x (median of 3). Runs at load
6-10 spread over 20x (medians 0.70x and 0.89x: noise).

    python benchmarks/bench_syntax.py [--repeats 3] [--batch-size 32] [--limit N] [--json OUT.json]
                                      [--model FOLDER] [--device cuda]
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_corpus import synchronize  # noqa: E402  (this folder is on sys.path: the script's own)


def treebank() -> Path:
    for folder in (os.environ.get("REAL_ATTENTION_UD"), ROOT.parent / "shared/data/ud", "/work/shared/data/ud"):
        if folder and (Path(folder) / "en_ewt-ud-dev.conllu").is_file():
            return Path(folder) / "en_ewt-ud-dev.conllu"
    sys.exit("UD English-EWT dev not found: set REAL_ATTENTION_UD to the folder of en_ewt-ud-dev.conllu")


class Pieces(NamedTuple):
    """What length_batches needs of a sentence: its piece ids."""

    ids: list[int]


def bare(loaded, texts: list[str], batch_size: int) -> float:
    """Tokenize, bucket and sort by length as the probe does, pad, forward with output_attentions; -> seconds."""
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
                input_ids = torch.zeros((len(batch), width), dtype=torch.long)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for row, sentence in enumerate(batch):
                    input_ids[row, :len(sentence.ids)] = torch.tensor(sentence.ids)
                    mask[row, :len(sentence.ids)] = 1
                maps = loaded.model(input_ids=input_ids.to(loaded.device), attention_mask=mask.to(loaded.device),
                                    output_attentions=True).attentions
                assert len(maps) == loaded.layers
                del maps
    synchronize(loaded.device)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--limit", type=int, default=None, help="the first N sentences only")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parser.add_argument("--model", default="minilm", help="minilm, or a local folder (a GPU machine: a copy of it)")
    parser.add_argument("--device", default="cpu", help="torch device of both ra.syntax and bare (a GPU: each "
                        "timing ends with the device synchronised)")
    args = parser.parse_args()

    from real_attention.syntax_probe.treebank import read_treebank
    from transformers.utils import logging as hf_logging

    import real_attention as ra

    hf_logging.disable_progress_bar()
    path = treebank()
    loaded = ra.load(args.model, device=args.device)
    texts = [" ".join(s.words) for s in read_treebank(path, args.limit)]
    ra.syntax(loaded, path, limit=args.limit, batch_size=args.batch_size)  # warm-up
    times: dict[str, list[float]] = {"ours": [], "bare": []}
    result = None
    for _ in range(args.repeats):
        start = time.perf_counter()
        result = ra.syntax(loaded, path, limit=args.limit, batch_size=args.batch_size)
        synchronize(loaded.device)  # (its counts already came to the host)
        times["ours"].append(time.perf_counter() - start)
        times["bare"].append(bare(loaded, texts, args.batch_size))
    ours, base = statistics.median(times["ours"]), statistics.median(times["bare"])
    numbers = {"sentences": result.summary["counts"]["sentences"], "words": result.summary["counts"]["words"],
               "ours_s": round(ours, 3), "bare_s": round(base, 3), "ratio": round(base / ours, 3),
               "times": {k: [round(t, 3) for t in v] for k, v in times.items()}, "batch_size": args.batch_size}
    print(f"{numbers['sentences']} sentences, {numbers['words']} words, MiniLM, batch size {args.batch_size}")
    print(f"ra.syntax        {ours:7.2f} s (median of {args.repeats}: {times['ours']})")
    print(f"bare forward     {base:7.2f} s (median of {args.repeats}: {times['bare']})")
    print(f"ratio bare/ours  {base / ours:7.2f}  (target >= 0.8)")
    if args.json:
        args.json.write_text(json.dumps(numbers, indent=2, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
