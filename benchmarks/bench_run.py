"""Wall time of `real-attention run --model minilm` (with and without figures and report) against a bare script.

The bare script only imports torch and transformers, loads the same model with eager attention and runs
the forward passes on the same sentences. All run as fresh processes, interleaved, several times; the
ratio of each median to the bare script's is printed. Target: <= 1.3 for every row, all outputs included
(figures and report).

    python benchmarks/bench_run.py [--repeats 5]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

BARE = """
import torch
from transformers import AutoModel, AutoTokenizer
from analysis.models import minilm_path
from analysis.sentences import load_sentences
path = minilm_path()
tokenizer = AutoTokenizer.from_pretrained(path)
model = AutoModel.from_pretrained(path, attn_implementation="eager").eval()
texts = [s.text for s in load_sentences(None, "es").sentences]
with torch.inference_mode():
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    maps = model(**batch, output_attentions=True).attentions
assert len(maps) == model.config.num_hidden_layers
"""


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def compare(commands: dict[str, list[str]], base: str, repeats: int) -> None:
    """Time each command as a fresh process, interleaved, `repeats` times; print each median and its ratio to
    the median of `base`."""
    timed(commands[base])  # warm the file cache
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(repeats):
        for name, command in commands.items():
            times[name].append(timed(command))
    reference = statistics.median(times[base])
    print(f"{'command':32} {'median s':>9} {'ratio':>6}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:32} {median:9.2f} {median / reference:6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as out:
        tool = [sys.executable, "-m", "real_attention", "run", "--model", "minilm", "--out", out]
        commands = {
            "bare": [sys.executable, "-c", BARE],
            "run --no-figures --no-report": tool + ["--no-figures", "--no-report"],
            "run --no-figures": tool + ["--no-figures"],
            "run (all outputs)": tool,
        }
        compare(commands, "bare", args.repeats)


if __name__ == "__main__":
    main()
