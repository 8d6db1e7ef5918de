"""The sha256 of a file, read in blocks: what summaries record of the inputs and outputs they name."""
from __future__ import annotations

import hashlib
import os
from typing import BinaryIO


def stream_sha256(handle: BinaryIO) -> str:
    """The hex sha256 of every byte left in a binary stream, read a MiB at a time (memory stays flat)."""
    digest = hashlib.sha256()
    for block in iter(lambda: handle.read(1 << 20), b""):
        digest.update(block)
    return digest.hexdigest()


def file_sha256(path: str | os.PathLike) -> str:
    """The hex sha256 of every byte of the file at `path` (stream_sha256)."""
    with open(path, "rb") as handle:
        return stream_sha256(handle)
