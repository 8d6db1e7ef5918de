"""The unit of work of a corpus run: partitions of sentences, each summed by the kernel, added back in order.

Both places a corpus runs use these: this process (cluster.py) and a Dask worker (dask_engine.py).
"""
from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass
from collections.abc import Callable, Iterable, Iterator

from ..engine.units import DEFAULT_UNITS
from .sums import CorpusReader, HeadSums, corpus_sums


@dataclass(frozen=True)
class Partition:
    """A run of consecutive sentences of the corpus: the unit of work a worker gets."""

    index: int  # from 0, in corpus order: the order the sums are added in
    texts: tuple[str, ...]  # the sentences, stripped, blank lines left out
    lines: int  # lines of the corpus read for it, blank ones included (for the progress bar)


def partitions(sentences: Iterable[str], size: int, lines_read: Callable[[], int]) -> Iterator[Partition]:
    """Cut a stream of sentences into partitions of `size`; at least one, maybe empty, so the sums have a shape.

    lines_read() is the count of lines read so far (the reader's `lines`): it attributes blank lines to a
    partition. Only one partition is held at a time.
    """
    sentences = iter(sentences)
    before = 0
    for index in itertools.count():
        texts = tuple(itertools.islice(sentences, min(size, sys.maxsize)))  # --partition-size 10**20: one
        if not texts and index > 0:
            return
        now = lines_read()
        yield Partition(index, texts, now - before)
        before = now
        if len(texts) < size:
            return


def partition_sums(loaded, texts: tuple[str, ...], batch_size: int, truncate: bool, progress=None,
                   units: str = DEFAULT_UNITS, measure: str = "weights") -> HeadSums:
    """One partition's exact sums: corpus_sums over its sentences (its `lines` count them, blank ones aside)."""
    reader = CorpusReader((text.encode("utf-8") + b"\n" for text in texts), "text", source="a partition",
                          file_start=False)
    return corpus_sums(loaded, reader, batch_size=batch_size, truncate=truncate, progress=progress, units=units,
                       measure=measure)


class OrderedSum:
    """Add partition sums in partition order, whatever order they arrive in; holds only the early arrivals."""

    def __init__(self) -> None:
        self.total: HeadSums | None = None
        self.added = 0  # partitions added so far: 0 .. added - 1
        self._waiting: dict[int, HeadSums] = {}

    def add(self, index: int, sums: HeadSums) -> None:
        assert index >= self.added and index not in self._waiting, index
        self._waiting[index] = sums
        while self.added in self._waiting:
            part = self._waiting.pop(self.added)
            self.total = part if self.total is None else self.total + part
            self.added += 1
