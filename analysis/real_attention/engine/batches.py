"""Length-sorted batches that bound memory: the one batcher of `ra.attend`, a corpus and the syntax probe."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

Item = TypeVar("Item")

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
