"""What context mixing costs, as ratios measured in the same run (target <= 3x each):

1. `run --model minilm --mixing` against `run --model minilm` (the lesson's [es] sentences, every output);
2. `run --model minilm --measure value-zeroing` against `--measure weights` (every output);
3. `run --model smollm2 --lang en-causal --mixing` against the same run without it (skip with --skip-smollm2).

Each command runs as a fresh process, interleaved, `--repeats` times; medians and their ratio to the row above.

    python benchmarks/bench_mixing.py [--repeats 3] [--skip-smollm2]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_run import compare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-smollm2", action="store_true", help="Only the MiniLM ratios.")
    parser.add_argument("--skip-minilm", action="store_true", help="Only the SmolLM2 ratio.")
    args = parser.parse_args()
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


if __name__ == "__main__":
    main()
