"""Which heads matter: head masking, the objectives, per-head importance scores and pruning curves (a job
stage: it imports engine, statistics, outputs and api; only cli.py and the package's __init__ import it)."""
