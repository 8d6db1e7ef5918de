"""What context mixing costs, as ratios measured in the same run (target <= 3x each):

1. `run --model minilm --mixing` against `run --model minilm` (the lesson's [es] sentences, every output);
2. `run --model minilm --measure value-zeroing` against `--measure weights` (every output);
3. `run --model smollm2 --lang en-causal --mixing` against the same run without it (skip with --skip-smollm2);
4. long sentences: ALTI and value zeroing (float64, real_attention.engine.mixing.piece_mixing), each alone, on
   one MiniLM sentence of 128, 256 and 512 word pieces (`--pieces`), each in a fresh process: the time, and the
   peak extra memory (the process's RSS, sampled every 5 ms, above what it held before). `--parts
   alti-one-array` adds ALTI as it was before the chunks (every query at once), the baseline of the memory.
   Time / (pieces^2 x hidden) is printed relative to each part's first row: about 1 or less means the time grows
   no faster than pieces^2 x hidden. Target: peak extra memory at most 1 GB at 512 pieces. --only-long runs this
   part alone. Last measured (quiet 2-core machine): ALTI 0.6 / 2.1 / 8.5 s, 233 / 261 / 369 MB (0.90, 0.92);
   value zeroing with its weights once per layer (rank-one zeroings) 4.0 / 15.4 / 57.8 s, 146 / 316 / 763 MB
   (0.97, 0.91); before, every zeroing re-ran the attention: 4.4 / 23.0 / 118.9 s, 328 / 422 / 946 MB (1.32,
   1.70: a pieces^3 term).

Each command runs as a fresh process, interleaved, `--repeats` times; medians and their ratio to the row above.

    python benchmarks/bench_mixing.py [--repeats 3] [--skip-smollm2] [--only-long] [--pieces 128 256 512]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_run import compare


LONG = """
import json, os, sys, threading, time

import real_attention as ra
from real_attention.engine import mixing as mx

pieces, part = int(sys.argv[1]), sys.argv[2]
loaded = ra.load("minilm")
words = ("the bank of the river was closed and the money stayed at home while we walked " * 60).split()
ids = loaded.tokenizer(" ".join(words[: pieces - 2]))["input_ids"]  # one piece per word, and [CLS] [SEP]
assert len(ids) == pieces
mx.piece_mixing(loaded, [ids[:8]])  # warm up
page = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * page


def one_array() -> None:  # ALTI as it was: every query's (t, t, hidden) decomposition at once
    found = mx.blocks(loaded)
    for block, given in zip(found, mx.layer_inputs(loaded, found, ids)):
        layer = mx.Layer64(block)
        _, recorded = layer.run(given, given.hidden, record=True)
        mx.alti_contributions(mx.decompose(layer, given, loaded.heads, recorded))


work = {"alti": lambda: mx.piece_mixing(loaded, [ids], alti=True, zeroing=False),
        "alti-one-array": one_array,
        "value-zeroing": lambda: mx.piece_mixing(loaded, [ids], alti=False, zeroing=True)}[part]
before, peak, done = rss(), [0], threading.Event()


def sample() -> None:
    while not done.is_set():
        peak[0] = max(peak[0], rss())
        time.sleep(0.005)


sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
start = time.perf_counter()
work()
seconds = time.perf_counter() - start
done.set()
sampler.join()
print(json.dumps({"seconds": seconds, "peak_extra_mb": (max(peak[0], rss()) - before) / 2**20,
                  "hidden": loaded.model.config.hidden_size}))
"""
PARTS = ("alti", "value-zeroing", "alti-one-array")


def long_sentences(sizes: list[int], parts: list[str]) -> None:
    """Row 4: each size and part in a fresh process; time, peak extra memory, and time / (pieces^2 x hidden)
    relative to the part's first size."""
    print(f"{'part':>15} {'pieces':>6} {'seconds':>9} {'peak extra MB':>14} {'time/(pieces^2 x hidden), rel.':>32}")
    for part in parts:
        first = None
        for pieces in sizes:
            done = subprocess.run([sys.executable, "-c", LONG, str(pieces), part], capture_output=True, text=True,
                                  check=True)
            row = json.loads(done.stdout.strip().splitlines()[-1])
            per = row["seconds"] / (pieces**2 * row["hidden"])
            first = first or per
            print(f"{part:>15} {pieces:>6} {row['seconds']:>9.1f} {row['peak_extra_mb']:>14.0f} {per / first:>32.2f}",
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-smollm2", action="store_true", help="Only the MiniLM ratios.")
    parser.add_argument("--skip-minilm", action="store_true", help="Only the SmolLM2 ratio.")
    parser.add_argument("--only-long", action="store_true", help="Only the long-sentence rows (4).")
    parser.add_argument("--pieces", type=int, nargs="+", default=[128, 256, 512])
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS[:2]),
                        help="Row 4's parts: ALTI (in chunks), value zeroing, and ALTI in one array (as before).")
    args = parser.parse_args()
    if args.only_long:
        print("4. ra.mixing on one MiniLM sentence of N pieces, fresh process each")
        long_sentences(args.pieces, args.parts)
        return
    with tempfile.TemporaryDirectory() as out:
        tool = [sys.executable, "-m", "real_attention", "run", "--out", out, "--quiet"]
        minilm = tool + ["--model", "minilm"]
        if not args.skip_minilm:
            print("1. run --mixing, MiniLM, lesson sentences; ratio to the first row")
            compare({"run": minilm, "run --mixing": minilm + ["--mixing"]}, "run", args.repeats)
            print("\n2. --measure value-zeroing against --measure weights, MiniLM")
            compare({"--measure weights": minilm, "--measure value-zeroing": minilm + ["--measure", "value-zeroing"]},
                    "--measure weights", args.repeats)
        if not args.skip_smollm2:
            smollm2 = tool + ["--model", "smollm2", "--lang", "en-causal"]
            print("\n3. run --mixing, SmolLM2, [en-causal]")
            compare({"run": smollm2, "run --mixing": smollm2 + ["--mixing"]}, "run", args.repeats)
        if not args.skip_minilm:
            print("\n4. ra.mixing on one MiniLM sentence of N pieces, fresh process each")
            long_sentences(args.pieces, args.parts)


if __name__ == "__main__":
    main()
