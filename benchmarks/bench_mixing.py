"""What context mixing costs, as ratios measured in the same run (target <= 3x each):

1. `run --model minilm --mixing` against `run --model minilm` (the lesson's [es] sentences, every output);
2. `run --model minilm --measure value-zeroing` against `--measure weights` (every output);
3. `run --model smollm2 --lang en-causal --mixing` against the same run without it (skip with --skip-smollm2);
4. long sentences: `ra.mixing` (ALTI and value zeroing, float64) on MiniLM sentences of 128, 256 and 512 word
   pieces (`--pieces`), each in a fresh process: the time of the mixing alone, and its peak extra memory (the
   process's RSS, sampled every 5 ms, above what it held before). Time / (pieces^2 x hidden) is printed
   relative to the first row: at most about 1 means the time grows no faster than pieces^2 x hidden (value
   zeroing's attention adds a pieces^3 term, small next to the MLPs at these lengths). Target: peak extra memory
   at most 1 GB at 512 pieces. --only-long runs this part alone.

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
import json, os, sys, threading, time, warnings
import real_attention as ra

pieces = int(sys.argv[1])
loaded = ra.load("minilm")
words = ("the bank of the river was closed and the money stayed at home while we walked " * 60).split()
text = " ".join(words[: pieces - 2])  # one piece per word, and [CLS] [SEP]
assert len(loaded.tokenizer(text)["input_ids"]) == pieces
ra.mixing(loaded, ["warm up the layers ."])
page = os.sysconf("SC_PAGE_SIZE")


def rss() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * page


before, peak, done = rss(), [0], threading.Event()


def sample() -> None:
    while not done.is_set():
        peak[0] = max(peak[0], rss())
        time.sleep(0.005)


sampler = threading.Thread(target=sample, daemon=True)
sampler.start()
start = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    mix = ra.mixing(loaded, [text])
seconds = time.perf_counter() - start
done.set()
sampler.join()
hidden = loaded.model.config.hidden_size
print(json.dumps({"pieces": pieces, "seconds": seconds, "peak_extra_mb": (max(peak[0], rss()) - before) / 2**20,
                  "hidden": hidden}))
"""


def long_sentences(sizes: list[int]) -> None:
    """Row 4: each size in a fresh process; time, peak extra memory, and time / (pieces^2 x hidden)."""
    print(f"{'pieces':>6} {'seconds':>9} {'peak extra MB':>14} {'time / (pieces^2 x hidden), rel.':>34}")
    first = None
    for pieces in sizes:
        done = subprocess.run([sys.executable, "-c", LONG, str(pieces)], capture_output=True, text=True, check=True)
        row = json.loads(done.stdout.strip().splitlines()[-1])
        per = row["seconds"] / (pieces**2 * row["hidden"])
        first = first or per
        print(f"{pieces:>6} {row['seconds']:>9.1f} {row['peak_extra_mb']:>14.0f} {per / first:>34.2f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-smollm2", action="store_true", help="Only the MiniLM ratios.")
    parser.add_argument("--skip-minilm", action="store_true", help="Only the SmolLM2 ratio.")
    parser.add_argument("--only-long", action="store_true", help="Only the long-sentence rows (4).")
    parser.add_argument("--pieces", type=int, nargs="+", default=[128, 256, 512])
    args = parser.parse_args()
    if args.only_long:
        print("4. ra.mixing on one MiniLM sentence of N pieces, fresh process each")
        long_sentences(args.pieces)
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
            long_sentences(args.pieces)


if __name__ == "__main__":
    main()
