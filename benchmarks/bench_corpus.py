"""Throughput and memory of `heads --corpus` (real_attention.statistics.sums.corpus_sums), as ratios measured in one run.

The corpus: benchmarks/corpus_seeds.txt (182 sentences split from the lesson's seed texts) repeated to at
least 2000 lines. The model: the packaged MiniLM (--model minilm). Reported:

1. throughput against a naive baseline: one forward pass per sentence, then the pieces merged per head with
   Python loops as in Clark et al.'s bpe_utils.get_word_word_attention (mode "mean"), and the statistics
   computed per head with numpy, on the seeds twice (364 sentences, the same length mix), timed in every
   repeat. Target >= 5x. On 2 CPU cores batching itself buys only ~5x (small matmuls either way); on a
   GPU the gap is far larger.
2. throughput against the bare batched forward pass with output_attentions=True on length-sorted batches
   padded to their longest (real_attention.statistics.sums.length_batches; tokenizing included, forward passes
   alone also shown). Target >= 0.8x. Also shown: the bare forward on plain batches of --batch-size, sorted by
   length with no cap on long ones, and on the fixed-shape batches corpus_sums runs (fixed_batches: the cost of
   a sentence's maps being the same bits in any split, docs/device.md).
3. peak resident memory (ru_maxrss) of a fresh process that streams the corpus repeated 10x, noted after
   every 1x: the growth from the first note to the last, the median of 3 processes. Target: under 50 MB.
   The same is shown for the bare forward passes: glibc's heap fragments as batches of different shapes
   come and go, so RSS climbs to a plateau over the first few thousand sentences whatever runs on top of
   the forward pass, by a different amount in each process.

4. with --post-forward alone: the work after the forward pass per sentence of the seeds corpus (the attentions
   computed once beforehand; then the text rule's units, padding, the merge, every statistic and the exact
   accumulator, timed; wall and process CPU time, median of interleaved repeats). Target: 0.15 ms per sentence.
   Last measured (issue 28; 2 cores shared with other jobs, load 5-9): the units 0.06 ms of CPU a sentence,
   before and after that round's changes alike; merge and statistics 0.48 ms on one torch thread (--threads 1),
   0.33 ms of wall time on two when the machine was quiet and 6-30 ms when it was not; 0.54 ms in all on one
   thread: target not met (the merge's two matrix products are most of it; see docs/benchmarks.md).
   With fixed-shape batches (issue 27.12) the kernel also ran on the dummy rows: 1.27 ms on one thread; it skips
   them now (same bits): 0.84 ms on one thread, post-forward 0.66 ms on two (quiet machine).
   Also timed, on the same runs: the merge's two products alone (merge_maps, no statistics), a floor under any
   dense merge of those shapes; with the units it already exceeds the target on 2 cores (docs/benchmarks.md).

    python benchmarks/bench_corpus.py [--batch-size 32] [--repeats 5] [--naive-sentences N] [--skip-memory]
                                      [--memory-repeats 3] [--sentences 2000] [--skip-naive] [--json OUT.json]
                                      [--model FOLDER] [--device cuda]
    python benchmarks/bench_corpus.py --post-forward [--repeats 7] [--copies 4]

Last measured for ratio 2 (issue 28; --sentences 600 --repeats 5, load 1.2-1.6): 0.908x median, 0.932x fastest,
before the fixed-shape batches; with them (kernel without dummy rows), quiet: --sentences 5000 --repeats 3: 0.766x,
--sentences 600: 0.733x. 2026-12-05, quiet, --sentences 5000 --repeats 3: 0.802x; the bare forward on the fixed
shapes (streamed as corpus_sums streams them) 0.958x the length batches, ours 0.837x of it.
2026-12-06, the forward pass stopping at the last layer's maps, --sentences 5000 --repeats 3: 0.871x; ours 0.972x
the bare forward on the fixed shapes. Then padded lengths in multiples of 4 and the CPU kernel in runs of one unit
width: 0.969x (target 0.95x met), ours 1.046x the bare forward on the fixed shapes; --sentences 18200 --repeats 2:
0.960x. --post-forward: 0.44 ms a sentence of the 182 seed lines (0.28 ms of kernel on the seeds repeated to 728).
Later, quiet, --copies 4: units 0.053 ms, merge and statistics 0.266 ms, the products alone 0.121 ms a sentence.

On a GPU machine: --model FOLDER (a copy of MiniLM) --device cuda; every timing ends with the device synchronised.

A quick look at ratio 2 alone (a few minutes instead of ~20):
    python benchmarks/bench_corpus.py --sentences 600 --repeats 3 --skip-memory --skip-naive
"""
from __future__ import annotations

import argparse
import io
import itertools
import json
import math
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SEEDS = Path(__file__).with_name("corpus_seeds.txt")
MIN_SENTENCES = 2000


def seed_lines() -> list[str]:
    return [line for line in SEEDS.read_text(encoding="utf-8").splitlines() if line.strip()]


def build_corpus(folder: Path, copies: int = 1, sentences: int = MIN_SENTENCES) -> tuple[Path, int]:
    """The seed sentences repeated to >= `sentences` lines, that many times `copies`; -> (path, lines)."""
    seeds = seed_lines()
    lines = seeds * math.ceil(sentences / len(seeds)) * copies
    path = folder / f"corpus-{copies}x.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, len(lines)


LOAD = {"model": "minilm", "device": "cpu"}  # --model, --device


def load():
    from real_attention.engine.models import choose_model, load_model
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    return load_model(choose_model("en", LOAD["model"], None), device=LOAD["device"])


def synchronize(device) -> None:
    """Wait for the device's queued work (a GPU runs asynchronously; the CPU needs nothing)."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def ours(loaded, path: Path, batch_size: int, progress=None):
    """What `heads --corpus` runs once the model is loaded: the corpus read, cut into partitions of the default
    size and streamed through corpus_sums (real_attention.statistics.cluster.single_process_sums)."""
    from real_attention.statistics.cluster import DEFAULT_PARTITION_SIZE, single_process_sums
    from real_attention.statistics.partitions import partitions
    from real_attention.statistics.sums import CorpusReader

    with path.open("rb") as handle:
        reader = CorpusReader(handle)
        parts = partitions(reader, DEFAULT_PARTITION_SIZE, lambda: reader.lines)
        return single_process_sums(loaded, parts, batch_size, False, progress)[0]


class Pieces(NamedTuple):
    """What length_batches needs of a sentence: its piece ids."""

    ids: list[int]


def plain_batches(sentences: list, batch_size: int) -> list[list]:
    """Sorted by length and cut every batch_size sentences, with no cap on query-key pairs."""
    ordered = sorted(sentences, key=lambda s: len(s.ids))
    return [ordered[i:i + batch_size] for i in range(0, len(ordered), batch_size)]


def bare(loaded, path: Path, batch_size: int, capped: bool = True, progress=None, fixed: bool = False
         ) -> tuple[float, float]:
    """Tokenize, bucket by length, pad, forward with output_attentions. -> (total, forward s).

    capped: length-sorted batches padded to their longest (real_attention.statistics.sums.length_batches, what
    corpus_sums ran before its batches had fixed shapes); else plain_batches. fixed: the fixed shapes corpus_sums
    runs (fixed_batches, padded to their rows and padded length; a batch not yet full waits for the next bucket's
    sentences, as in corpus_sums, so only the corpus's last batches have dummy rows).
    """
    import torch

    from real_attention.statistics.sums import BUCKET_BATCHES, fixed_batches, length_batches

    forward = 0.0
    start = time.perf_counter()
    texts = iter(line.strip() for line in path.open(encoding="utf-8") if line.strip())
    waiting: list = []  # fixed: sentences of batches not yet full
    with torch.inference_mode():
        while True:
            chunk = list(itertools.islice(texts, batch_size * BUCKET_BATCHES))
            if not chunk and not waiting:
                break
            encoded = [Pieces(ids) for ids in loaded.tokenizer(chunk, verbose=False)["input_ids"]] if chunk else []
            batches = length_batches(encoded, batch_size) if capped else plain_batches(encoded, batch_size)
            shapes = [None] * len(batches)
            if fixed:
                cut = fixed_batches(waiting + encoded, batch_size, loaded.max_tokens)
                if chunk:  # the last round runs the partial batches
                    waiting = [sentence for b in cut if not b.full for sentence in b.items]
                    cut = [b for b in cut if b.full]
                else:
                    waiting = []
                batches, shapes = [b.items for b in cut], [(b.rows, b.pieces) for b in cut]
            for batch, shape in zip(batches, shapes):
                batch = [sentence.ids for sentence in batch]
                rows, width = shape or (len(batch), max(map(len, batch)))
                input_ids = torch.zeros((rows, width), dtype=torch.long)
                mask = torch.zeros((rows, width), dtype=torch.long)
                mask[len(batch):, 0] = 1
                for row, piece_ids in enumerate(batch):
                    input_ids[row, :len(piece_ids)] = torch.tensor(piece_ids)
                    mask[row, :len(piece_ids)] = 1
                tick = time.perf_counter()
                input_ids, mask = input_ids.to(loaded.device), mask.to(loaded.device)
                maps = loaded.model(input_ids=input_ids, attention_mask=mask, output_attentions=True).attentions
                assert len(maps) == loaded.layers
                del maps  # as corpus_sums does: no map lives on into the next forward pass
                if progress is not None:
                    progress.update(len(batch))
                forward += time.perf_counter() - tick
    synchronize(loaded.device)
    return time.perf_counter() - start, forward


def clark_word_word_attention(token_token_attention: np.ndarray, words_to_tokens: list[list[int]]) -> np.ndarray:
    """Clark et al.'s bpe_utils.get_word_word_attention with mode="mean" (the paper's rule), one (t, t) map."""
    word_word_attention = np.array(token_token_attention)
    not_word_starts = []
    for word in words_to_tokens:
        not_word_starts += word[1:]
    for word in words_to_tokens:  # sum the key pieces of each word
        word_word_attention[:, word[0]] = word_word_attention[:, word].sum(axis=-1)
    word_word_attention = np.delete(word_word_attention, not_word_starts, -1)
    for word in words_to_tokens:  # average the query pieces of each word
        word_word_attention[word[0]] = np.mean(word_word_attention[word], axis=0)
    return np.delete(word_word_attention, not_word_starts, 0)


def naive(loaded, texts: list[str]) -> dict[str, np.ndarray]:
    """One sentence per forward pass, the Python-loop merge per head, numpy statistics per head; pooled means."""
    import torch

    from real_attention.engine.words import is_punctuation

    layers, heads = loaded.layers, loaded.heads
    totals = {name: np.zeros((layers, heads)) for name in ("prev", "next", "self", "first_special", "last_special", "punct", "entropy")}
    units = pairs = 0
    tokenizer = loaded.tokenizer
    for text in texts:
        encoded = tokenizer(text, return_offsets_mapping=True, return_tensors="pt")
        with torch.no_grad():
            maps = loaded.model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"],
                                output_attentions=True).attentions
        attention = np.stack([m[0].numpy() for m in maps])  # (layers, heads, t, t)
        words_to_tokens, previous = [], None
        for index, word in enumerate(encoded.word_ids(0)):
            if word is None or word != previous:
                words_to_tokens.append([index])
            else:
                words_to_tokens[-1].append(index)
            previous = word
        offsets = encoded["offset_mapping"][0].tolist()
        ids = encoded["input_ids"][0].tolist()
        special = [encoded.word_ids(0)[w[0]] is None for w in words_to_tokens]  # a literal "[SEP]" is a word
        cls = [i for i, w in enumerate(words_to_tokens) if special[i] and ids[w[0]] == tokenizer.cls_token_id]
        sep = [i for i, w in enumerate(words_to_tokens) if special[i] and ids[w[0]] == tokenizer.sep_token_id]
        punct = [i for i, w in enumerate(words_to_tokens) if encoded.word_ids(0)[w[0]] is not None
                 and is_punctuation(text[offsets[w[0]][0]:offsets[w[-1]][1]])]
        n = len(words_to_tokens)
        for layer in range(layers):
            for head in range(heads):
                words = clark_word_word_attention(attention[layer, head], words_to_tokens)
                totals["prev"][layer, head] += np.diagonal(words, -1).sum()
                totals["next"][layer, head] += np.diagonal(words, 1).sum()
                totals["self"][layer, head] += np.diagonal(words).sum()
                totals["first_special"][layer, head] += words[:, cls].sum()
                totals["last_special"][layer, head] += words[:, sep].sum()
                totals["punct"][layer, head] += words[:, punct].sum()
                totals["entropy"][layer, head] -= (words * np.log(np.where(words > 0, words, 1))).sum()
        units, pairs = units + n, pairs + n - 1
    return {name: value / (pairs if name in ("prev", "next") else units) for name, value in totals.items()}


class Tokenized:
    """The tokenizer with its answer for the texts ready: encode through it times the unit rule, not the tokenizer."""

    def __init__(self, tokenizer, answer):
        self.tokenizer, self.answer = tokenizer, answer

    def __call__(self, *args, **kwargs):
        return self.answer

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


def post_forward(loaded, texts: list[str], batch_size: int, repeats: int) -> dict:
    """The work after the forward pass alone, per sentence: the attentions of every batch are computed once
    beforehand and kept; then, timed (process CPU time and wall time, median of interleaved repeats), the text
    rule's units (extract.encode with the tokenizer's answer ready: Tokenized), padding, the exact merge and every statistic
    (heads.kernel) and the device accumulator. Target: at most 0.15 ms of wall time per sentence."""
    import torch

    from real_attention.engine.extract import encode, forward_layers, pad_batch
    from real_attention.engine.heads import FixedAccumulator, kernel
    from real_attention.engine.words import merge_maps
    from real_attention.engine.batches import fixed_batches
    from real_attention.statistics.streaming import by_unit_width, layers_at_once, run_batches

    device = torch.device(loaded.device)

    def shaped(encoded):  # the batches corpus_sums runs: fixed shapes, dummy rows in a group's last one
        batches = [by_unit_width(b) for b in fixed_batches(encoded, batch_size, loaded.max_tokens)]
        return [(b.items, pad_batch(b.items, loaded.tokenizer.pad_token_id or 0, (b.rows, b.pieces)))
                for b in batches]

    encoded, _ = encode(loaded.tokenizer, texts, loaded.max_tokens)
    batches = [batch for _, batch in shaped(encoded)]
    kept = []
    for batch in batches:  # the attentions, once, outside the timing
        layers: list = []
        forward_layers(loaded, batch, lambda layer, weights, layers=layers: layers.append(weights.clone()))
        kept.append(layers)
    options = dict(return_offsets_mapping=True, return_special_tokens_mask=True, verbose=False,
                   split_special_tokens=True)
    tokenized = Tokenized(loaded.tokenizer, loaded.tokenizer(texts, **options))
    results: dict[str, list[float]] = {"tokenize_s": [], "encode_s": [], "units_s": [], "units_cpu_s": [],
                                       "kernel_s": [], "kernel_cpu_s": [], "products_s": []}
    runs = [run_batches(padded, [len(s.kinds) for s in part], device) for part, padded in shaped(encoded)]
    for _ in range(repeats):
        start = time.perf_counter()
        loaded.tokenizer(texts, **options)
        results["tokenize_s"].append(time.perf_counter() - start)
        start = time.perf_counter()
        again, _ = encode(loaded.tokenizer, texts, loaded.max_tokens)
        results["encode_s"].append(time.perf_counter() - start)
        start, cpu = time.perf_counter(), time.process_time()
        encode(tokenized, texts, loaded.max_tokens)  # encode with the tokenizer's answer ready: the units alone
        results["units_s"].append(time.perf_counter() - start)
        results["units_cpu_s"].append(time.process_time() - cpu)
        start, cpu = time.perf_counter(), time.process_time()
        accumulator = FixedAccumulator(loaded.layers, loaded.heads, device)
        for (part, padded), layers in zip(shaped(again), kept):
            sizes = [len(s.kinds) for s in part]
            shared = run_batches(padded, sizes, device)
            accumulator.reserve(sizes)
            for first, end, run in shared:  # corpus_sums's calls (it loops over layers first, as they end)
                if layers_at_once(device):
                    totals = kernel(torch.cat([w[first:end] for w in layers], dim=1), run, causal=loaded.causal)[1]
                    accumulator.add_layers(totals.view(end - first, totals.shape[1], loaded.layers, -1))
                    continue
                for layer, weights in enumerate(layers):
                    accumulator.add(layer, kernel(weights[first:end], run, causal=loaded.causal)[1])
        accumulator.result()  # copies the sums to the host: the device's work is done
        results["kernel_s"].append(time.perf_counter() - start)
        results["kernel_cpu_s"].append(time.process_time() - cpu)
        # The merge's two products alone, on the same runs (no statistics, no accumulator): a floor under the
        # kernel for any dense merge of the same shapes.
        start = time.perf_counter()
        for shared, layers in zip(runs, kept):
            for first, end, run in shared:
                for weights in layers:
                    merge_maps(weights[first:end], run.units, run.kinds.shape[1], run.matrices)
        synchronize(device)
        results["products_s"].append(time.perf_counter() - start)
    median = {name: statistics.median(runs) for name, runs in results.items()}
    units_s = median["units_s"]
    per_sentence = 1000 * (units_s + median["kernel_s"]) / len(texts)
    return {"sentences": len(texts), "repeats": repeats, "median_s": {k: round(v, 4) for k, v in median.items()},
            "torch_threads": torch.get_num_threads(),
            "units_ms_per_sentence": round(1000 * units_s / len(texts), 4),
            "units_cpu_ms_per_sentence": round(1000 * median["units_cpu_s"] / len(texts), 4),
            "merge_and_statistics_ms_per_sentence": round(1000 * median["kernel_s"] / len(texts), 4),
            "merge_and_statistics_cpu_ms_per_sentence": round(1000 * median["kernel_cpu_s"] / len(texts), 4),
            "merge_products_alone_ms_per_sentence": round(1000 * median["products_s"] / len(texts), 4),
            "post_forward_ms_per_sentence": round(per_sentence, 4), "target_ms": 0.15}


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class PeakCheckpoints:
    """A progress sink (update(n), as tqdm's) that notes the peak RSS each time `every` more sentences are done."""

    def __init__(self, every: int):
        self.every, self.done, self.peaks = every, 0, []

    def update(self, sentences: int) -> None:
        self.done += sentences
        while self.done >= self.every * (len(self.peaks) + 1):
            self.peaks.append(round(peak_rss_mb(), 1))


def memory_child(path: str, batch_size: int, what: str, every: int) -> None:
    """In a fresh process: load the model, warm up, stream the corpus through `what` (ours or bare) and print
    the peak RSS in MB after the warm-up and after every `every` sentences."""
    loaded = load()
    run = ours if what == "ours" else bare
    run(loaded, Path(SEEDS), batch_size)  # warm up: allocator pools reach their working size
    before = peak_rss_mb()
    checkpoints = PeakCheckpoints(every)
    run(loaded, Path(path), batch_size, progress=checkpoints)
    print(json.dumps({"sentences": checkpoints.done, "every": every, "peak_before_mb": round(before, 1),
                      "peaks_mb": checkpoints.peaks}))


def peak_memory(path: Path, batch_size: int, what: str, every: int) -> dict:
    """Run memory_child in a fresh process; call it while this process is small (see main)."""
    command = [sys.executable, __file__, "--memory-child", str(path), "--memory-of", what, "--batch-size",
               str(batch_size), "--memory-every", str(every)]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--naive-sentences", type=int, default=None, help="Sentences for the naive baseline, "
                        "timed in every repeat (default: the seeds twice; whole repetitions keep the length mix).")
    parser.add_argument("--repeats", type=int, default=5, help="Interleaved timed runs of ours and bare; the fastest "
                        "of each is compared (other processes only ever add time).")
    parser.add_argument("--skip-memory", action="store_true", help="Measure speed only.")
    parser.add_argument("--sentences", type=int, default=MIN_SENTENCES, help="Corpus size: the seeds repeated to "
                        "at least this many lines.")
    parser.add_argument("--skip-naive", action="store_true", help="Skip the naive baseline (ratio 1).")
    parser.add_argument("--memory-repeats", type=int, default=3, help="Fresh processes per memory measurement; "
                        "the median growth is reported.")
    parser.add_argument("--json", type=Path, help="Also write the numbers to this file.")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    parser.add_argument("--memory-of", default="ours", help=argparse.SUPPRESS)
    parser.add_argument("--memory-every", type=int, default=MIN_SENTENCES, help=argparse.SUPPRESS)
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's own, one per core)")
    parser.add_argument("--post-forward", action="store_true", help="Only the post-forward cost per sentence of "
                        "the seeds corpus (attentions computed once beforehand).")
    parser.add_argument("--model", default="minilm", help="minilm, or a local folder (a GPU machine: a copy of it)")
    parser.add_argument("--copies", type=int, default=1, help="With --post-forward: the seed lines this many times "
                        "(1: the issue's measure, whose small batches make the kernel's calls weigh more; 4: full "
                        "batches, as in a large corpus)")
    parser.add_argument("--device", default="cpu", help="torch device of both ours and bare (cuda: each timing "
                        "ends with the device synchronised)")
    args = parser.parse_args()
    if args.copies < 1:
        parser.error("--copies must be at least 1")
    LOAD.update(model=args.model, device=args.device)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.post_forward:
        result = post_forward(load(), seed_lines() * args.copies, args.batch_size, args.repeats)
        print(json.dumps(result, indent=2))
        if args.json:
            args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        return
    if args.memory_child:
        memory_child(args.memory_child, args.batch_size, args.memory_of, args.memory_every)
        return

    with tempfile.TemporaryDirectory() as folder:
        path, count = build_corpus(Path(folder), sentences=args.sentences)
        # Memory first, while this process is small: a child's ru_maxrss starts at its parent's RSS at fork.
        # A process streams the corpus repeated 10x and notes its peak RSS after each 1x: the first is the
        # peak for 1x, the last for 10x, and the ones between show whether it levels off. The heap's
        # fragmentation differs from process to process: several processes of each, the median growth.
        if not args.skip_memory:
            ten, _ = build_corpus(Path(folder), copies=10, sentences=args.sentences)
            memory = {what: [peak_memory(ten, args.batch_size, what, count) for _ in range(args.memory_repeats)]
                      for what in ("ours", "bare")}

        import torch

        texts = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        loaded = load()
        print(f"corpus: {count} sentences ({SEEDS.name} repeated); MiniLM {loaded.layers}x{loaded.heads} heads; "
              f"batch size {args.batch_size}; torch threads {torch.get_num_threads()}", flush=True)
        ours(loaded, SEEDS, args.batch_size)  # warm-up
        bare(loaded, SEEDS, args.batch_size)

        # interleaved repeats, the fastest of each: other processes (and a VM's stolen time) only add time.
        # The naive loop runs on whole repetitions of the seeds (the same length mix), in every repeat too.
        naive_count = args.naive_sentences or 2 * len(seed_lines())
        naive_texts = texts[:naive_count]
        ours_runs, bare_runs, forward_runs, plain_runs, fixed_runs, naive_runs = [], [], [], [], [], []
        for _ in range(args.repeats):
            start = time.perf_counter()
            ours(loaded, path, args.batch_size)
            ours_runs.append(time.perf_counter() - start)
            bare_s, forward_s = bare(loaded, path, args.batch_size)
            bare_runs.append(bare_s)
            forward_runs.append(forward_s)
            plain_runs.append(bare(loaded, path, args.batch_size, capped=False)[0])
            fixed_runs.append(bare(loaded, path, args.batch_size, fixed=True)[0])
            if not args.skip_naive:
                start = time.perf_counter()
                naive_means = naive(loaded, naive_texts)
                naive_runs.append(time.perf_counter() - start)
        if args.skip_naive:
            naive_texts, naive_means, naive_runs = texts[:0], {}, [math.inf]
        ours_s, bare_s, forward_s, plain_s, fixed_s, naive_s = (
            min(runs) for runs in (ours_runs, bare_runs, forward_runs, plain_runs, fixed_runs, naive_runs))

        # the naive baseline computes the same numbers (float32 noise apart)
        from real_attention.statistics.sums import CorpusReader, corpus_sums

        same = corpus_sums(loaded, CorpusReader(io.BytesIO("\n".join(naive_texts).encode())), args.batch_size)
        worst = max((float(np.abs(same.means()[name] - naive_means[name]).max()) for name in naive_means), default=0.0)

    rate = {"ours": count / ours_s, "bare": count / bare_s, "forward_only": count / forward_s,
            "bare_plain_batches": count / plain_s, "bare_fixed_shapes": count / fixed_s,
            "naive": len(naive_texts) / naive_s or math.nan}
    result = {
        "sentences": count,
        "runs_s": {"ours": [round(x, 2) for x in ours_runs], "bare": [round(x, 2) for x in bare_runs],
                   "bare_plain_batches": [round(x, 2) for x in plain_runs],
                   "bare_fixed_shapes": [round(x, 2) for x in fixed_runs],
                   "naive": [round(x, 2) for x in naive_runs]},
        "naive_sentences": len(naive_texts),
        "batch_size": args.batch_size,
        "sentences_per_s": {k: round(v, 1) for k, v in rate.items()},
        "speedup_vs_naive": round(rate["ours"] / rate["naive"], 2),
        "ratio_vs_bare_forward": round(rate["ours"] / rate["bare"], 3),
        "ratio_vs_forward_passes_only": round(rate["ours"] / rate["forward_only"], 3),
        "ratio_vs_bare_plain_batches": round(rate["ours"] / rate["bare_plain_batches"], 3),
        "fixed_shapes_vs_length_batches": round(rate["bare_fixed_shapes"] / rate["bare"], 3),
        "ratio_vs_bare_fixed_shapes": round(rate["ours"] / rate["bare_fixed_shapes"], 3),
        "naive_max_abs_difference": worst,
    }
    if not args.skip_memory:
        peaks = {what: [run["peaks_mb"] for run in runs] for what, runs in memory.items()}
        growth = {what: [round(p[-1] - p[0], 1) for p in runs] for what, runs in peaks.items()}
        result.update({
            "peak_rss_mb_after_each_1x": peaks,  # ours: the 10x corpus through corpus_sums; bare: forward only
            "peak_rss_growth_mb": growth,
            "peak_rss_growth_mb_median": {what: statistics.median(values) for what, values in growth.items()},
            "peak_rss_after_model_and_warm_up_mb": {what: [run["peak_before_mb"] for run in runs]
                                                    for what, runs in memory.items()},
            "memory_sentences": memory["ours"][0]["sentences"],
        })
    print(f"ours   {rate['ours']:8.1f} sentences/s ({ours_s:.1f} s)")
    print(f"bare   {rate['bare']:8.1f} sentences/s ({bare_s:.1f} s; forward passes alone {rate['forward_only']:.1f}/s)")
    print(f"naive  {rate['naive']:8.1f} sentences/s ({naive_s:.1f} s on {len(naive_texts)} sentences)")
    print(f"1. speed-up against naive:          {result['speedup_vs_naive']:.2f}x  (target >= 5)")
    print(f"2. throughput against bare forward: {result['ratio_vs_bare_forward']:.3f}x (target >= 0.8); "
          f"against the forward passes alone {result['ratio_vs_forward_passes_only']:.3f}x; against bare "
          f"forward passes on plain batches of {args.batch_size} (no cap on long ones) "
          f"{result['ratio_vs_bare_plain_batches']:.3f}x")
    print(f"   the cost of fixed shapes: bare forward on corpus_sums's fixed-shape batches against length batches "
          f"{result['fixed_shapes_vs_length_batches']:.3f}x; ours against the bare forward on those same batches "
          f"{result['ratio_vs_bare_fixed_shapes']:.3f}x (what the work after the forward pass costs)")
    if not args.skip_memory:
        median = result["peak_rss_growth_mb_median"]
        print(f"3. peak RSS growth from {count} to {10 * count} sentences, median of {args.memory_repeats} processes: "
              f"{median['ours']:.1f} MB (target < 50); the bare forward passes alone {median['bare']:.1f} MB")
        for what in ("ours", "bare"):
            for run in peaks[what]:
                print(f"   {what} after each {count}: {' '.join(f'{p:.0f}' for p in run)} MB")
    print(f"naive and ours agree to {worst:.2e}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
