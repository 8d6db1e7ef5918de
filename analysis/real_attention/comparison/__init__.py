"""Heads side by side: `compare` (every head pair of several models by Jensen-Shannon divergence) and `detect`."""
