"""Length-sorted batches that bound memory: the one batcher of `ra.attend`, a corpus and the syntax probe.

`length_batches` cuts sorted sentences into batches padded to their longest (`ra.attend`, the syntax probe).
`fixed_batches` (a corpus) gives every batch a shape that depends on its sentences' lengths alone: a CPU's matrix
products pick their kernels by shape (MKL by the row count, batch x padded length), so a sentence's maps are then
the same bits in whatever batch, shard or Dask partition it runs (for a given --batch-size and thread count).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Generic, NamedTuple, TypeVar

Item = TypeVar("Item")

# The largest --batch-size of the commands that pad batches to a fixed number of rows or read ahead by it
# (heads --corpus, syntax, compare): 10**20 would ask for that many rows.
MAX_BATCH_SIZE = 1 << 16
PAIR_TOKENS = 40  # batches of sentences longer than this many pieces hold fewer sentences (length_batches)


def pieces(sentence) -> int:
    """A sentence's length for batching: its piece count (an extract.Encoded)."""
    return len(sentence.ids)


def length_batches(items: Iterable[Item], batch_size: int, length: Callable[[Item], int] = pieces, *,
                   keep_order: bool = False) -> list[list[Item]]:
    """Sort by length (a stable sort: ties keep their order) and cut into batches: little padding.

    A batch has at most batch_size items, and fewer when they are long: at most batch_size * PAIR_TOKENS**2
    query-key pairs per head, so the maps of a batch of long sentences take no more memory than a full batch
    of PAIR_TOKENS-piece ones (a sentence longer than that is a batch of its own).
    keep_order: when every item fits in one batch, that batch keeps the order given (what ra.attend has always run).
    """
    items = list(items)
    budget = batch_size * PAIR_TOKENS**2
    if keep_order and len(items) <= batch_size and len(items) * max(map(length, items), default=0) ** 2 <= budget:
        return [items] if items else []
    batches: list[list[Item]] = []
    for item in sorted(items, key=length):
        t = length(item)  # the longest so far: the batch's padded length
        if not batches or len(batches[-1]) == batch_size or (len(batches[-1]) + 1) * t * t > budget:
            batches.append([])
        batches[-1].append(item)
    return batches


def index_batches(lengths: Sequence[int], batch_size: int | None) -> list[list[int]]:
    """length_batches of the indices 0 .. len(lengths) - 1 by their lengths, one batch in the order given when
    all fit in one; batch_size None: one batch, whatever its size."""
    indices = list(range(len(lengths)))
    if batch_size is None:
        return [indices]
    return length_batches(indices, batch_size, lengths.__getitem__, keep_order=True)


# --- fixed shapes ------------------------------------------------------------------------------------------------


def padded_length(length: int, limit: int) -> int:
    """The padded length of every batch that holds a sentence of `length` pieces: a function of the length alone.

    Rounded up to a multiple of 4 up to 64 pieces, then of an eighth of the power of two at or below it (8 up to
    128, 16 up to 256, ...): at most 3 pieces more below 64, at most 1/8 more above; on the seed corpus, 5% more
    pieces than the sentences have (12% with multiples of 8, the ladder before). A finer ladder pads less but
    makes more groups, each with its own part-filled last batch of dummy rows; this one pays back from about
    700 lines of the seed corpus on. Never past `limit` (the model's maximum length) nor below `length`.
    """
    step = max(4, 1 << max(0, length.bit_length() - 4))
    return max(length, min(-(-length // step) * step, limit))


UNIT_STEP = 8  # the kernel's unit widths on the CPU: multiples of this (padded_units)
# The version of the shape rules (padded_length, batch_rows, padded_units), and of how a sentence's totals are
# rounded: a sentence's bits follow them, so shards computed under other rules are not exact together
# (summary.json's engine "shapes"; merge warns). 1: multiples of 8 and units merged at the padded length
# (2026-12-05); 2: multiples of 4, unit widths (2026-12-06); 3: the key-set statistics add each key's weight in
# fixed point (engine.heads.sentence_totals, 2026-12-07).
SHAPES = 3


def padded_units(units: int, pieces: int) -> int:
    """The unit width that a sentence of `units` units, in a batch padded to `pieces` pieces, is merged into on
    the CPU (real_attention.statistics.streaming.kernel_runs): `units` rounded up to a multiple of UNIT_STEP, at
    most `pieces`. A function of the sentence and its padded length alone, as the shapes of its products must be
    (a sentence has at most as many units as pieces, so `pieces` always fits)."""
    return min(pieces, -(-units // UNIT_STEP) * UNIT_STEP)


def batch_rows(padded: int, batch_size: int) -> int:
    """The rows of every batch padded to `padded` pieces: batch_size, fewer for long ones (length_batches' bound
    of batch_size * PAIR_TOKENS**2 query-key pairs per head), at least 1."""
    return min(batch_size, max(1, batch_size * PAIR_TOKENS**2 // padded**2))


class FixedBatch(NamedTuple, Generic[Item]):
    """Up to `rows` items, padded to `rows` x `pieces` (extract.pad_batch(..., shape=(rows, pieces)))."""

    items: list[Item]
    rows: int
    pieces: int

    @property
    def full(self) -> bool:
        return len(self.items) == self.rows


def fixed_batches(items: Iterable[Item], batch_size: int, limit: int, length: Callable[[Item], int] = pieces
                  ) -> list[FixedBatch[Item]]:
    """Group items by padded_length and cut each group, in the order given, into batches of batch_rows items.

    The last batch of a group may hold fewer items; it is padded to the same shape all the same (dummy rows),
    so every batch of a group has one shape, whichever items it holds. Groups come shortest first.
    """
    groups: dict[int, list[Item]] = {}
    for item in items:
        groups.setdefault(padded_length(length(item), limit), []).append(item)
    batches: list[FixedBatch[Item]] = []
    for padded in sorted(groups):
        rows, group = batch_rows(padded, batch_size), groups[padded]
        batches += [FixedBatch(group[i:i + rows], rows, padded) for i in range(0, len(group), rows)]
    return batches
