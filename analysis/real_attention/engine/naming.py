"""How the tool writes model revisions for a reader: one format everywhere (titles, summaries, the CLI)."""
from __future__ import annotations


def short_revision(revision: str) -> str:
    """For titles: '3f076fdb1ab6...' -> '3f076fdb'; 'sha256:53aa51...' -> 'sha256:53aa5117'."""
    prefix, _, digest = revision.rpartition(":")
    return f"{prefix}:{digest[:8]}" if prefix else digest[:8]
