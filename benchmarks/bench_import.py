"""`import real_attention` against a bare interpreter start, in fresh processes (target: under 50 ms on top).

Prints the median of interleaved runs of `python -c pass` and `python -c "import real_attention"`, and what
the import costs on top of the interpreter. Run: python benchmarks/bench_import.py [repeats]
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time

from bench_run import fresh_process_env  # benchmarks/ is on sys.path when this file runs as a script

ROOT = __file__.rsplit("/benchmarks/", 1)[0]


def seconds(code: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env=fresh_process_env())
    return time.perf_counter() - start


def main(repeats: int = 15) -> None:
    bare, ours = [], []
    for _ in range(repeats):  # interleaved, so a noisy moment hits both
        bare.append(seconds("pass"))
        ours.append(seconds("import real_attention"))
    base, full = statistics.median(bare), statistics.median(ours)
    print(f"python -c pass: {base * 1000:.0f} ms; import real_attention: {full * 1000:.0f} ms "
          f"({full / base:.2f}x); the import itself: {(full - base) * 1000:.0f} ms (target < 50 ms)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
