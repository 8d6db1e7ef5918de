"""The jobs built on the stages: the Python API, a run (ra.run), a corpus (ra.corpus, ra.merge)."""
