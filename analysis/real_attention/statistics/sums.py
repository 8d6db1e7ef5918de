"""Head statistics over a corpus: stream sentences, batch them by length, pool per-head sums, label every head.

The data flow of `real-attention heads --corpus`:

    reading.CorpusReader (lines of a shard) -> extract.encode (pieces, units, unit kinds), in a background thread
    -> batches.fixed_batches -> padded batch -> extract.forward_layers (one forward pass) -> heads.kernel as each
    layer ends (exact merge and per-sentence statistics in fixed point, on the model's device) ->
    heads.FixedAccumulator -> HeadSums (exact: `+` merges shards, the same bits for any split)
    -> labels.label_heads -> results (heads table, summary) -> outputs.corpus_files (heads.csv, summary.json, ...)

The encoding, the merge and every statistic are those of `run`: the same functions, not copies. This module
gathers the names of the stage's modules (reading, labels, streaming, results, merging) in one place.
"""
from __future__ import annotations

from ..engine.batches import PAIR_TOKENS, fixed_batches, length_batches
from ..engine.heads import COUNT_FIELDS, STATISTICS, HeadSums, kernel, sentence_counts
from .labels import LABELS, Thresholds, label_heads
from .merging import SAME_IN_EVERY_SHARD, SUMMARY_FIELDS, check_summary, merge_shards, read_shard
from .reading import CorpusError, CorpusReader, Shard, corpus_format, count_lines
from .results import (CORPUS_HEADS_COLUMNS, CorpusRun, check_analysable, corpus_heads_frame, corpus_summary,
                      describe_corpus, folder_name)
from .streaming import BUCKET_BATCHES, DEFAULT_BATCH_SIZE, corpus_sums

__all__ = [
    "BUCKET_BATCHES", "CORPUS_HEADS_COLUMNS", "COUNT_FIELDS", "CorpusError", "CorpusReader", "CorpusRun",
    "DEFAULT_BATCH_SIZE", "HeadSums", "LABELS", "PAIR_TOKENS", "SAME_IN_EVERY_SHARD", "STATISTICS", "SUMMARY_FIELDS",
    "Shard", "Thresholds", "check_analysable", "check_summary", "corpus_format", "corpus_heads_frame",
    "corpus_sums", "corpus_summary", "count_lines", "describe_corpus", "fixed_batches", "folder_name", "kernel",
    "label_heads", "length_batches", "merge_shards", "read_shard", "sentence_counts",
]
