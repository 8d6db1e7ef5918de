"""Wall time and peak memory of `real-attention run --model minilm|smollm2` (with and without figures and report)
against a bare script.

The bare script only imports torch and transformers, loads the same model with eager attention and runs
the forward passes on the same sentences with output_attentions=True. All run as fresh processes, interleaved,
several times; the ratio of each median to the bare script's is printed, with each command's largest peak RSS.
Target: <= 1.15 for `run` with figures and report (issue 27; issue 26: <= 1.25 for every row); `ra.run` in a
fresh process takes the same time as the command. The last lines give the load average (the ratios hold only
on a quiet machine: under load every row stretches with its CPU time) and both `run` ratios against the target.
SmolLM2 (a 30-layer decoder, 270 maps per sentence) runs on the packaged [en-causal] sentences.

Before/after the drawing pool's first worker forked the others (2 CPUs shared with other jobs, so CPU-bound
ratios; docs/benchmarks.md has the quiet-machine history): 5 repeats, load 0.9-5.8: all outputs 1.31x,
--no-figures --no-report 0.89x; after, load 12.2-5.8: 1.34x, 0.97x. Main and this code interleaved in one run
(5 repeats, load 6.3-8.3): main 1.72x, now 1.57x; CPU time 1.57x -> 1.42x of the bare script's.
On a quiet machine (2 cores, load 0.1-1.2, 5 repeats): bare 4.13 s, --no-figures --no-report 0.97x, --no-figures 0.99x,
all outputs 1.12x (target met), ra.run 1.11x (plain exit 1.28x).

    python benchmarks/bench_run.py [--model minilm|smollm2] [--repeats 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

BARE = """
import torch
from transformers import AutoModel, AutoTokenizer
from real_attention.engine.models import minilm_path
from real_attention.engine.sentences import load_sentences
path = minilm_path()
tokenizer = AutoTokenizer.from_pretrained(path)
model = AutoModel.from_pretrained(path, attn_implementation="eager").eval()
texts = [s.text for s in load_sentences(None, "es").sentences]
with torch.inference_mode():
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    maps = model(**batch, output_attentions=True).attentions
assert len(maps) == model.config.num_hidden_layers
"""

BARE_SMOLLM2 = """
import torch
from transformers import AutoModel, AutoTokenizer
from real_attention.engine.models import smollm2_gguf
from real_attention.engine.sentences import load_sentences
gguf = smollm2_gguf()
tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
model = AutoModel.from_pretrained(gguf.parent, gguf_file=gguf.name, attn_implementation="eager",
                                  dtype=torch.float32).eval()
texts = [s.text for s in load_sentences(None, "en-causal").sentences]
with torch.inference_mode():
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    maps = model(**batch, output_attentions=True).attentions
assert len(maps) == model.config.num_hidden_layers
"""

TARGET = 1.15  # run with figures and report against the bare script (issue 27)
MODELS = {"minilm": (BARE, "es"), "smollm2": (BARE_SMOLLM2, "en-causal")}


def fresh_process_env() -> dict[str, str]:
    """The environment of a timed fresh process: this one's without PYTHONDONTWRITEBYTECODE. Some machines set it;
    every fresh process then compiles torch and transformers again (a one-line `heads --corpus` took 10 s instead
    of 4.1 s here), a cost that a user's machine, which keeps its .pyc files, does not pay, and that would pull
    every ratio towards 1."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def timed(command: list[str]) -> tuple[float, float]:
    """Run a command as a fresh process -> (wall seconds, its peak RSS in MB)."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=fresh_process_env())
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise subprocess.CalledProcessError(process.returncode, command)
    return elapsed, usage.ru_maxrss / 1024  # Linux: kB


def compare(commands: dict[str, list[str]], base: str, repeats: int) -> dict[str, float]:
    """Time each command as a fresh process, interleaved, `repeats` times; print each median and its ratio to
    the median of `base`, and each command's largest peak RSS. -> each command's ratio."""
    timed(commands[base])  # warm the file cache
    times: dict[str, list[float]] = {name: [] for name in commands}
    peaks: dict[str, float] = dict.fromkeys(commands, 0.0)
    for _ in range(repeats):
        for name, command in commands.items():
            elapsed, peak = timed(command)
            times[name].append(elapsed)
            peaks[name] = max(peaks[name], peak)
    reference = statistics.median(times[base])
    print(f"{'command':32} {'median s':>9} {'ratio':>6} {'peak RSS MB':>12}")
    for name, values in times.items():
        median = statistics.median(values)
        print(f"{name:32} {median:9.2f} {median / reference:6.2f} {peaks[name]:12.0f}")
    return {name: statistics.median(values) / reference for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="minilm")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    bare, lang = MODELS[args.model]
    with tempfile.TemporaryDirectory() as out:
        tool = [sys.executable, "-m", "real_attention", "run", "--model", args.model, "--lang", lang, "--out", out]
        commands = {
            "bare": [sys.executable, "-c", bare],
            "run --no-figures --no-report": tool + ["--no-figures", "--no-report"],
            "run --no-figures": tool + ["--no-figures"],
            "run (all outputs)": tool,
            # the library writes the same files: ra.run in a fresh process, all outputs. The script ends as the
            # command's main() does, with gc.freeze(): else the interpreter's last collection walks every torch and
            # pandas object (about 0.6 s), a cost of exiting Python, not of ra.run (shown in the next row).
            "ra.run (all outputs)": [sys.executable, "-c", "import gc, real_attention as ra; "
                                     f"ra.run(model={args.model!r}, lang={lang!r}, out={out!r}); gc.freeze()"],
            "ra.run, plain exit": [sys.executable, "-c", "import real_attention as ra; "
                                   f"ra.run(model={args.model!r}, lang={lang!r}, out={out!r})"],
        }
        before = os.getloadavg()
        ratios = compare(commands, "bare", args.repeats)
        after = os.getloadavg()
    # Other processes on the machine stretch every row; the ratios hold only on a quiet machine.
    print(f"load average (1 min) before {before[0]:.1f}, after {after[0]:.1f}, on {os.cpu_count()} CPUs")
    everything, bare_run = ratios["run (all outputs)"], ratios["run --no-figures --no-report"]
    verdict = "met" if everything <= TARGET else "NOT met"
    print(f"run with figures and report {everything:.2f}x the bare script, without {bare_run:.2f}x "
          f"(target <= {TARGET}x: {verdict})")


if __name__ == "__main__":
    main()
