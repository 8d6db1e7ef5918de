"""Pooled statistics over a corpus: inputs, sums, labels, and where they run (one process or Dask)."""
