"""Time drawing all of a run's figures against loading the model (the packaged MiniLM, offline).

    python benchmarks/bench_figures.py [--lang es] [--format png ...] [--repeat 3]

Run it as a fresh process: the first ("cold") times include importing torch and transformers (model) or
matplotlib (figures), as in one `real-attention run`; the "warm" times are medians of repeated calls.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def timed(function):
    start = time.perf_counter()
    value = function()
    return time.perf_counter() - start, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lang", default="es", help="language table of the packaged config")
    parser.add_argument("--format", dest="formats", action="append", choices=["png", "svg", "pdf"],
                        help="figure format, repeatable (default png)")
    parser.add_argument("--repeat", type=int, default=3, help="warm repetitions (median)")
    args = parser.parse_args()
    formats = tuple(args.formats or ["png"])

    from real_attention.engine.models import choose_model, load_model
    from real_attention.engine.pipeline import analyse
    from real_attention.engine.sentences import load_sentences

    choice = choose_model(args.lang, "minilm", None)
    load_cold, loaded = timed(lambda: load_model(choice))  # imports torch and transformers on first call
    load_warm = statistics.median(timed(lambda: load_model(choice))[0] for _ in range(args.repeat))
    result = analyse(loaded, load_sentences(None, args.lang))

    with tempfile.TemporaryDirectory() as folder:
        def draw():
            from real_attention.outputs.drawing import write_run_figures  # its workers import matplotlib

            return write_run_figures(Path(folder), result, formats)

        figures_cold, paths = timed(draw)
        figures_warm = statistics.median(timed(draw)[0] for _ in range(args.repeat))

    print(f"model {result.model}, lang {args.lang}, {len(result.sentences)} sentence(s), "
          f"{len(paths)} figure file(s) ({', '.join(formats)})")
    print(f"{'':28}{'cold':>9}{'warm':>9}")
    print(f"{'load_model':28}{load_cold:8.2f}s{load_warm:8.2f}s")
    print(f"{'write_run_figures':28}{figures_cold:8.2f}s{figures_warm:8.2f}s")
    print(f"{'ratio figures / load':28}{figures_cold / load_cold:9.2f}{figures_warm / load_warm:9.2f}")


if __name__ == "__main__":
    main()
