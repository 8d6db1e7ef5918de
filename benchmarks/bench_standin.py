"""`heads --corpus` on a stand-in for a fast device: MiniLM's tokenizer and shape (6 layers x 12 heads) with hidden
size 48 (intermediate 4x, random weights), so the forward pass is cheap and the work after it shows.

The model is built here from MiniLM's config (hidden_size=48, intermediate_size=192, random weights, seed 0), saved
with MiniLM's tokenizer to a temporary folder and loaded through the same path as `--model <folder>`. Timed,
interleaved, `repeats` times each, on the seeds corpus repeated to `--sentences` lines: corpus_sums (ours) and the
bare batched forward with output_attentions on the same length-sorted batches, tokenizing included (bench_corpus.bare).
Reported: the medians and ours / bare throughput. Target >= 0.85.
Last measured (issue 28; 728 sentences, 5 interleaved repeats, 2 cores, load 0.8): ours 0.606 s, bare 0.387 s,
0.64x (an earlier quiet run 0.662 s against 0.507 s, 0.765x): not met. Under load (6-11) the runs spread from
0.7 to 60 s and the ratio means nothing. 2026-12-06 (padded lengths in multiples of 4, the CPU kernel in runs of
one unit width; --sentences 2000 --repeats 5, quiet): 2.13 s against 1.43 s, 0.67x (0.54x before): not met.

    python benchmarks/bench_standin.py [--sentences 600] [--repeats 5] [--batch-size 32] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_corpus import bare, build_corpus, ours  # noqa: E402  (benchmarks/ is on sys.path as a script)


def standin(folder: Path) -> Path:
    """Save the stand-in model (MiniLM's config at hidden size 48, random weights) and MiniLM's tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    from real_attention.engine.models import choose_model

    source = choose_model("en", "minilm", None).path
    config = AutoConfig.from_pretrained(source)
    config.hidden_size, config.intermediate_size = 48, 4 * 48
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import torch
    from transformers.utils import logging as hf_logging

    from real_attention.engine.models import choose_model, load_model

    hf_logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as folder:
        model = standin(Path(folder) / "standin")
        loaded = load_model(choose_model("en", str(model), None))
        path, count = build_corpus(Path(folder), sentences=args.sentences)
        ours(loaded, path, args.batch_size)  # warm-up
        bare(loaded, path, args.batch_size)
        times: dict[str, list[float]] = {"ours": [], "bare": []}
        for _ in range(args.repeats):
            start = time.perf_counter()
            ours(loaded, path, args.batch_size)
            times["ours"].append(time.perf_counter() - start)
            times["bare"].append(bare(loaded, path, args.batch_size)[0])
    median = {name: statistics.median(runs) for name, runs in times.items()}
    result = {"sentences": count, "layers": loaded.layers, "heads": loaded.heads, "hidden": 48,
              "torch_threads": torch.get_num_threads(), "median_s": {k: round(v, 3) for k, v in median.items()},
              "runs_s": {k: [round(x, 3) for x in v] for k, v in times.items()},
              "ratio_vs_bare_forward": round(median["bare"] / median["ours"], 3), "target": 0.85}
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
