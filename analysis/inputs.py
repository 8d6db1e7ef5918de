"""The inputs of `heads --corpus`: several files, globs or fsspec URLs, read in order as one corpus.

The corpus is the inputs' lines, in the order given (a glob's matches sorted by name). Its identity, the
sha256 in summary.json, is the digest of the inputs' bytes joined in that order, with a newline added after an
input that does not end with one (unless it is the last): for one file, the sha256 of the file. `--shard i/N`
takes lines i, i+N, ... of each input, so every input is split the same way. Each input keeps its own format
(`auto`: jsonl for a .jsonl name) and its own line numbers in error messages.
"""
from __future__ import annotations

import contextlib
import glob
import hashlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Iterator

from analysis.corpus import CorpusError, CorpusReader, Shard, corpus_format, count_lines

STDIN = "-"
GLOB_CHARACTERS = "*?["


@dataclass(frozen=True)
class Input:
    """One input of a corpus: a local file, stdin ('-') or an fsspec URL."""

    name: str  # as the user wrote it, or a glob's match: what error messages show
    format: str  # "text" or "jsonl"

    @property
    def is_url(self) -> bool:
        return "://" in self.name

    @property
    def stem(self) -> str:
        """The default corpus name: the file's name without its suffix ('stdin' for -)."""
        return "stdin" if self.name == STDIN else Path(self.name.rstrip("/").split("/")[-1]).stem

    def lines(self) -> int | None:
        """The number of lines of a local file (for the progress bar); None for stdin and URLs."""
        return None if self.name == STDIN or self.is_url else count_lines(Path(self.name))

    def open(self) -> contextlib.AbstractContextManager[BinaryIO]:
        """The input's bytes; CorpusError if it cannot be read."""
        if self.name == STDIN:
            return contextlib.nullcontext(sys.stdin.buffer)
        try:
            if self.is_url:
                import fsspec

                return fsspec.open(self.name, "rb").open()
            return Path(self.name).open("rb")
        except (OSError, ValueError) as error:
            raise CorpusError(f"cannot read --corpus {self.name}: {getattr(error, 'strerror', None) or error}") from None


def _fsspec():
    try:
        import fsspec
    except ImportError:
        raise CorpusError('--corpus URLs need fsspec: pip install "real-attention[dask]" (and the filesystem\'s '
                          "package, e.g. s3fs for s3://)") from None
    return fsspec


def expand(specs: list[str] | tuple[str, ...], fmt: str = "auto") -> list[Input]:
    """--corpus values -> the inputs, in order; a glob gives its matches sorted by name.

    CorpusError for a missing file, a folder, a glob or URL that matches nothing, or '-' among other inputs.
    """
    if not specs:
        raise CorpusError("heads needs --corpus FILE (one or more files, globs or URLs; '-' for stdin)")
    if STDIN in specs and len(specs) > 1:
        raise CorpusError("--corpus - reads stdin and cannot be combined with other inputs")
    names: list[str] = []
    for spec in specs:
        if spec == STDIN:
            names.append(spec)
        elif "://" in spec:
            fsspec = _fsspec()
            try:
                files = fsspec.open_files(spec, "rb")
            except (OSError, ValueError, ImportError) as error:
                raise CorpusError(f"--corpus {spec}: {error}") from None
            if not files:
                raise CorpusError(f"--corpus {spec} matches no file")
            names.extend(file.fs.unstrip_protocol(file.path) for file in files)
        elif any(char in spec for char in GLOB_CHARACTERS) and not Path(spec).exists():
            matches = sorted(path for path in glob.glob(spec, recursive=True) if Path(path).is_file())
            if not matches:
                raise CorpusError(f"--corpus {spec} matches no file")
            names.extend(matches)
        else:
            path = Path(spec)
            if path.is_dir():
                raise CorpusError(f"--corpus {spec} is a folder; pass a text or .jsonl file (or - for stdin)")
            if not path.is_file():
                raise CorpusError(f"--corpus {spec}: no such file")
            names.append(spec)
    return [Input(name, corpus_format(name, fmt)) for name in names]


class CorpusText:
    """Iterate over the sentences of one shard of several inputs, in order; hashes every byte, counts lines.

    After the iteration: `sha256` (see the module docstring), `lines` (lines of the shard read, blank ones
    included) and `blank`.
    """

    def __init__(self, inputs: list[Input], shard: Shard = Shard()):
        assert inputs
        self.inputs, self.shard = inputs, shard
        self._digest = hashlib.sha256()
        self._readers: list[CorpusReader] = []

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()

    @property
    def lines(self) -> int:
        return sum(reader.lines for reader in self._readers)

    @property
    def blank(self) -> int:
        return sum(reader.blank for reader in self._readers)

    def _hashed(self, handle: BinaryIO, last: bool) -> Iterator[bytes]:
        raw = b"\n"
        for raw in handle:
            self._digest.update(raw)
            yield raw
        if not last and not raw.endswith(b"\n"):  # the next input starts on a line of its own
            self._digest.update(b"\n")

    def __iter__(self) -> Iterator[str]:
        for number, item in enumerate(self.inputs, start=1):
            with item.open() as handle:
                reader = CorpusReader(self._hashed(handle, number == len(self.inputs)), item.format, self.shard,
                                      source="stdin" if item.name == STDIN else item.name)
                self._readers.append(reader)
                yield from reader

    def total_lines(self) -> int | None:
        """How many lines of the shard the inputs hold, if every input is a local file (for the progress bar)."""
        counts = [item.lines() for item in self.inputs]
        return None if None in counts else sum(self.shard.lines_of(count) for count in counts)
