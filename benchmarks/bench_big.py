"""Peak memory of `real-attention run --model minilm --no-figures` for 200 and 2,000 sentences, and the size of
attention.csv against attention.parquet (`--table-format parquet`) for 2,000.

Each run is a fresh process; its peak RSS comes from the kernel (ru_maxrss). `run` streams the maps to the tables
batch by batch and keeps only the maps the report shows (its first 200 sentences), so the peak should not grow
with the number of sentences. Target: the 2,000-sentence run's peak less than 150 MB above the 200-sentence
run's. The sentences are the lesson's kind (focus "banco"), 8 to 17 words each, cycled from a fixed list.

    python benchmarks/bench_big.py [--sentences 200 2000]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_MB = 150
TEMPLATES = [
    ("Me senté en el banco de mi jardín a leer el periódico.", "jardín"),
    ("Fui al banco a sacar dinero.", "dinero"),
    ("El banco del parque estaba recién pintado de verde y nadie se sentaba en él.", "parque"),
    ("Pedí un préstamo al banco para comprar una casa.", "préstamo"),
    ("Los peces nadaban en un banco enorme cerca de la costa.", "peces"),
    ("El banco central subió los tipos de interés otra vez este año.", "interés"),
    ("Dejamos las mochilas en el banco de madera junto a la puerta.", "madera"),
    ("Abrí una cuenta en el banco con mi primer sueldo.", "cuenta"),
]


def config_text(count: int) -> str:
    lines = ["[es]", 'focus = "banco"']
    for i in range(count):
        text, sense = TEMPLATES[i % len(TEMPLATES)]
        lines += ["[[es.sentences]]", f'text = "{text}"', f'sense = "{sense}"']
    return "\n".join(lines) + "\n"


def measured(command: list[str]) -> tuple[float, float]:
    """Run a command as a fresh process -> (wall seconds, its peak RSS in MB)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{process.stderr.read().decode()}")
    return elapsed, usage.ru_maxrss / 1024  # Linux: kB


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, nargs=2, default=(200, 2000), metavar=("FEW", "MANY"))
    args = parser.parse_args()
    few, many = args.sentences
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for count, table_format in ((few, "csv"), (many, "csv"), (many, "parquet")):
            config = root / f"{count}.toml"
            config.write_text(config_text(count), encoding="utf-8")
            out = root / f"{count}-{table_format}"
            command = [sys.executable, "-m", "real_attention", "run", "--model", "minilm", "--lang", "es",
                       "--config", str(config), "--out", str(out), "--no-figures", "--quiet",
                       "--table-format", table_format]
            seconds, peak = measured(command)
            table = out / "results" / "es" / f"attention.{table_format}"
            report = out / "figures" / "es" / "report.html"
            rows.append((count, table_format, seconds, peak, table.stat().st_size / 1e6, report.stat().st_size / 1e6))
    print(f"{'sentences':>9} {'format':>8} {'wall s':>7} {'peak RSS MB':>12} {'attention MB':>13} {'report MB':>10}")
    for count, table_format, seconds, peak, table_mb, report_mb in rows:
        print(f"{count:9d} {table_format:>8} {seconds:7.1f} {peak:12.0f} {table_mb:13.1f} {report_mb:10.1f}")
    growth = rows[1][3] - rows[0][3]
    print(f"peak RSS, {many} minus {few} sentences: {growth:.0f} MB (target < {TARGET_MB} MB): "
          + ("ok" if growth < TARGET_MB else "OVER"))
    print(f"attention table for {many} sentences: csv {rows[1][4]:.1f} MB, parquet {rows[2][4]:.1f} MB "
          f"({rows[2][4] / rows[1][4]:.2f} of the csv)")


if __name__ == "__main__":
    main()
