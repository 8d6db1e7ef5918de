"""The corpus stream: sentences read ahead, encoded, grouped into fixed-shape batches, run through the model; each
batch's exact statistics summed on the model's device (real_attention.engine.heads.kernel, FixedAccumulator)."""
from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from ..engine.batches import MAX_BATCH_SIZE, FixedBatch, fixed_batches, padded_units
from ..engine.checks import whole_number
from ..engine.extract import Batch, Encoded, to_device
from ..engine.heads import FixedAccumulator, HeadSums, KernelBatch, kernel, kernel_batch, sentence_counts
from ..engine.units import DEFAULT_UNITS
from .reading import CorpusError, CorpusReader

DEFAULT_BATCH_SIZE = 32
BUCKET_BATCHES = 32  # sentences read ahead and sorted by length: this many batches


class Bucket(NamedTuple):
    """One read-ahead bucket, encoded and cut into padded batches (by the background reader)."""

    batches: list[tuple[Batch, list[int]]]  # each padded batch with its sentences' unit counts
    lines: int  # lines of the shard this bucket read (blank and too-long ones included)
    left_out: int  # lines over the model's maximum length (skipped, or cut with --truncate)
    sentences: int  # sentences encoded from those lines (those of a batch not yet full wait for a later bucket)
    end: bool = False  # the last item: no batches; `lines` is then the shard's total line count


def buckets(loaded, reader: CorpusReader, batch_size: int, truncate: bool, units: str) -> Iterator[Bucket]:
    """Read, apply the unit rule, tokenize and pad, one bucket of batch_size * BUCKET_BATCHES sentences at a time.

    The batches have fixed shapes (real_attention.engine.batches.fixed_batches: each sentence's maps the same bits
    whatever else is read with it); a batch not yet full waits for the sentences of the next bucket, so only the
    last bucket runs batches with dummy rows.
    """
    from ..engine.extract import encode, pad_batch

    pad_id = loaded.tokenizer.pad_token_id or 0

    def padded(batches: list[FixedBatch[Encoded]]) -> list[tuple[Batch, list[int]]]:
        batches = [by_unit_width(b) for b in batches]
        return [(pad_batch(b.items, pad_id, (b.rows, b.pieces)), [len(s.kinds) for s in b.items]) for b in batches]

    sentences = iter(reader)
    waiting: list[Encoded] = []  # sentences of batches not yet full
    while True:
        lines_before = reader.lines
        texts = list(itertools.islice(sentences, batch_size * BUCKET_BATCHES))
        if not texts:
            break
        encoded, too_long = encode(loaded.tokenizer, texts, loaded.max_tokens, truncate, units)
        batches = fixed_batches(waiting + encoded, batch_size, loaded.max_tokens)
        waiting = [sentence for batch in batches if not batch.full for sentence in batch.items]
        yield Bucket(padded([b for b in batches if b.full]), reader.lines - lines_before, len(too_long), len(encoded))
    if waiting:
        yield Bucket(padded(fixed_batches(waiting, batch_size, loaded.max_tokens)), 0, 0, 0)
    yield Bucket([], reader.lines, 0, 0, end=True)  # blank lines after the last sentence included


_END = object()
READER_GRACE_SECONDS = 2.0  # how long a consumer that stops waits for the reading thread to see it


def read_ahead(items: Iterator, depth: int = 1) -> Iterator:
    """The items of `items`, produced in a background thread up to `depth` ahead of the consumer (reading,
    the text rule and tokenizing overlap the model's work). An exception in the thread is raised here; a
    consumer that stops early stops the thread."""
    ready: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        ready.put((item, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            ready.put((_END, None))
        except BaseException as error:  # handed to the consumer, raised there
            ready.put((_END, error))

    thread = threading.Thread(target=produce, name="real-attention-reader", daemon=True)
    thread.start()
    try:
        while True:
            item, error = ready.get()
            if error is not None:
                raise error
            if item is _END:
                return
            yield item
    finally:
        stop.set()
        deadline = time.monotonic() + READER_GRACE_SECONDS
        while thread.is_alive() and time.monotonic() < deadline:  # let a blocked put see the stop
            try:
                ready.get_nowait()
            except queue.Empty:
                thread.join(timeout=0.05)
        # A thread still alive is blocked reading (a pipe no one writes to): a daemon, it ends with the process,
        # and an interrupted run stops now instead of waiting for input that may never come.


def by_unit_width(batch: FixedBatch[Encoded]) -> FixedBatch[Encoded]:
    """The batch with its sentences in the order of their unit widths (engine.batches.padded_units; a stable
    sort), so that each of kernel_runs' runs is a slice of rows. (A sentence's maps are the same bits in any row of
    its fixed-shape batch: the row order of a batch is already that of whatever else was read with it.)"""
    return batch._replace(items=sorted(batch.items, key=lambda sentence: padded_units(len(sentence.kinds),
                                                                                        batch.pieces)))


def kernel_runs(device, units: list[int], rows: int, pieces: int) -> list[tuple[int, int, int]]:
    """The kernel's calls on one fixed-shape batch of `rows` rows padded to `pieces` pieces, whose sentences
    (sorted by by_unit_width) have `units` units each: (first row, end row, unit width) per call.

    On the CPU, only the real sentences, in runs of one unit width (padded_units), each merged into that many
    units: MKL's batched products and torch's reductions give a sentence the same bits whatever the batch count,
    so its bits depend on its padded length and unit width alone, the dummy rows are skipped, and the merge's two
    products and the statistics work on fewer units (merged at the batch's piece count, the seed corpus's
    sentences cost about 1.5 times as much). On a GPU, one call on every one of the batch's rows, merged into
    `pieces` units: cuBLAS and CUDA's reductions choose their kernels, split-K among them, by the batch count too,
    so only the fixed shape fixes the bits (dummy rows and pad units add exactly 0), and one call is fewer launches.
    """
    if device.type != "cpu":
        return [(0, rows, pieces)]
    runs: list[tuple[int, int, int]] = []
    for row, size in enumerate(units):
        width = padded_units(size, pieces)
        if runs and runs[-1][2] == width:
            runs[-1] = (runs[-1][0], row + 1, width)
        else:
            assert not runs or runs[-1][2] < width, "a batch not sorted by by_unit_width"
            runs.append((row, row + 1, width))
    return runs


def run_batches(batch: Batch, units: list[int], device) -> list[tuple[int, int, KernelBatch]]:
    """A padded fixed-shape batch's kernel_runs, each with what its kernel calls share (kernel_batch, made once
    for every layer): (first row, end row, KernelBatch) per run. `units`: the unit count of each real sentence."""
    return [(start, end, kernel_batch(to_device(batch.units[start:end], device),
                                      to_device(np.ascontiguousarray(batch.kinds[start:end, :width]), device)))
            for start, end, width in kernel_runs(device, units, len(batch.input_ids), batch.kinds.shape[1])]


def layers_at_once(device) -> bool:
    """Whether the kernel takes a batch's layers all at once after its forward pass (a GPU: one kernel's few
    dozen launches per batch instead of per layer, when launching, not computing, is what a small model's batch
    costs; the maps of every layer of one batch stay alive meanwhile), or each layer as it ends (the CPU: the maps
    stay in cache, and each sentence's bits are those of the layer-by-layer products)."""
    return device.type != "cpu"


def _advance(progress, shown: int, lines: int) -> int:
    if progress is not None and lines:
        progress.update(lines)
    return shown + lines


def corpus_sums(
    loaded,
    reader: CorpusReader,
    batch_size: int = DEFAULT_BATCH_SIZE,
    truncate: bool = False,
    progress=None,
    units: str = DEFAULT_UNITS,
    measure: str = "weights",
) -> HeadSums:
    """Stream the reader's sentences through the model in length-sorted batches; return the pooled sums.

    Memory holds two buckets of encoded sentences and one batch of maps, whatever the corpus size: the next
    bucket is read and encoded in a background thread while the model runs this one. `progress`, if given, has
    tqdm's `update(n)` and advances by one per line read. `units`: the unit rule ("text" or "tokenizer",
    real_attention.engine.words.group); a corpus names no required words. measure: the maps the statistics pool,
    "weights" or "norm" (real_attention.engine.measures). The sums are exact (real_attention.engine.heads
    .FixedAccumulator) and each sentence's maps do not depend on the batch it runs in (fixed_batches): for one
    batch_size and torch thread count, the same bits for any split or order of the corpus.
    """
    import torch

    from ..engine.measures import forward_measured

    whole_number(batch_size, "batch_size (--batch-size)", 1, MAX_BATCH_SIZE, error=CorpusError)
    device = torch.device(loaded.device)
    together = layers_at_once(device)
    accumulator = FixedAccumulator(loaded.layers, loaded.heads, device)
    counts: dict[str, Any] = dict.fromkeys(("sentences", "units", "pairs", "tokens", "skipped", "truncated",
                                            "uniform_fixed"), 0)
    shown = 0  # lines the progress bar has counted
    for bucket in read_ahead(buckets(loaded, reader, batch_size, truncate, units)):
        if bucket.end:
            _advance(progress, shown, bucket.lines - shown)  # blank lines after the last sentence
            break
        counts["truncated" if truncate else "skipped"] += bucket.left_out
        shown = _advance(progress, shown, bucket.lines - bucket.sentences)  # blank, skipped
        for batch, sizes in bucket.batches:
            # What every layer's kernel shares, made once per run of rows (kernel_runs; not `units`: that is the
            # rule's name). The forward pass needs the dummy rows (its shape fixes the bits of each sentence's maps);
            # on the CPU the kernel skips them and merges each run into its own unit width.
            shared = run_batches(batch, sizes, device)
            accumulator.reserve(sizes)
            waiting: list = []  # layers_at_once: the maps of the layers run so far

            def on_layer(layer: int, weights) -> None:
                # called within this iteration's forward pass: this batch's shared arrays
                if not together:  # as each layer ends: its maps die with it
                    for start, end, run in shared:  # noqa: B023
                        accumulator.add(layer, kernel(weights[start:end], run, causal=loaded.causal)[1])
                    return
                waiting.append(weights)  # noqa: B023
                if layer == loaded.layers - 1:  # the last layer: every layer's heads through one kernel per run
                    for start, end, run in shared:  # noqa: B023
                        totals = kernel(torch.cat([w[start:end] for w in waiting], dim=1), run,  # noqa: B023
                                        causal=loaded.causal)[1]
                        accumulator.add_layers(totals.view(end - start, totals.shape[1], loaded.layers, -1))
                    waiting.clear()  # noqa: B023

            forward_measured(loaded, batch, on_layer, measure, batch_size=batch_size)
            real_pieces = int(batch.attention_mask[:len(sizes)].sum())
            for name, value in sentence_counts(sizes, real_pieces, loaded.causal).items():
                counts[name] += value
            shown = _advance(progress, shown, len(sizes))
    return HeadSums(fixed=accumulator.result(), lines=reader.lines, blank=reader.blank, causal=loaded.causal,
                    **counts)
