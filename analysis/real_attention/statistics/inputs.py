"""The inputs of `heads --corpus`: several files, globs or fsspec URLs, read in order as one corpus.

The corpus is the inputs' lines, in the order given (a glob's matches sorted by name). Its identity, the
sha256 in summary.json, is the digest of the inputs' bytes joined in that order, with a newline added after an
input that does not end with one (unless it is the last): for one file, the sha256 of the file. `--shard i/N`
takes lines i, i+N, ... of each input, so every input is split the same way. Each input keeps its own format
(`auto`: jsonl for a .jsonl name) and its own line numbers in error messages.

A name ending in .gz, .bz2, .xz or .zst is decompressed as it is read (local files and URLs alike; .zst needs the
zstandard package, or Python 3.14's compression.zstd); the identity is that of the decompressed text, so
`corpus.txt.gz` and `corpus.txt` are the same corpus. A compressed input cut short is an error, never a shorter corpus.
"""
from __future__ import annotations

import bz2
import contextlib
import glob
import gzip
import hashlib
import io
import lzma
import zlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO
from collections.abc import Callable, Iterator

from .reading import count_stream
from .sums import CorpusError, CorpusReader, Shard, corpus_format, count_lines
from ..engine.errors import MissingPackage

STDIN = "-"
# What reading an input can raise: the file, or a damaged or cut compressed file (gzip's EOFError and zlib.error,
# lzma's LZMAError; ZstdFrames raises OSError and EOFError)
READ_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, lzma.LZMAError, zlib.error)
GLOB_CHARACTERS = "*?["
ZSTD = ".zst"


def zstd_open(name: str | BinaryIO, mode: str = "rb") -> contextlib.AbstractContextManager[BinaryIO]:
    """The decompressed bytes of a Zstandard file (a path, or a binary stream such as fsspec's, closed with it):
    the zstandard package, else Python 3.14's compression.zstd (MissingPackage if neither is there, the stream it
    was given closed)."""
    assert mode == "rb", mode
    try:
        import zstandard
    except ImportError:
        pass
    else:
        raw = Path(name).open("rb") if isinstance(name, (str, Path)) else name
        return io.BufferedReader(ZstdFrames(raw, zstandard), 1 << 16)  # lines, as the other readers give them
    zstd = stdlib_zstd()
    if zstd is None:
        if not isinstance(name, (str, Path)):
            name.close()  # the caller handed the stream over: a URL's connection must not stay open
        raise MissingPackage('reading .zst needs the zstandard package: pip install zstandard (or "real-attention[dask]")')
    given = None if isinstance(name, (str, Path)) else name  # a stream it was given: zstd.open would leave it open
    return io.BufferedReader(StdlibZstd(zstd.open(name, "rb"), zstd.ZstdError, given), 1 << 16)


def stdlib_zstd():
    """Python 3.14's compression.zstd module, or None before 3.14 (tests stand backports.zstd, the same code, in)."""
    try:
        from compression import zstd  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return None
    return zstd


class StdlibZstd(io.RawIOBase):
    """compression.zstd's reader, failing as the other readers do: its ZstdError (a damaged stream) derives from
    Exception alone, so it becomes an OSError (a cut file is already EOFError); `raw`, if given, closes with it."""

    def __init__(self, reader: BinaryIO, error: type[Exception], raw: BinaryIO | None) -> None:
        self.reader, self.error, self.raw = reader, error, raw

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            return self.reader.readinto(buffer)  # type: ignore[attr-defined]
        except self.error as error:
            raise OSError(f"not a valid Zstandard stream ({error})") from None

    def close(self) -> None:
        try:
            self.reader.close()
        finally:
            if self.raw is not None:
                self.raw.close()
            super().close()


class ZstdFrames(io.RawIOBase):
    """The zstandard package's decompression of a stream, frame after frame, that fails as gzip and lzma do: its own
    stream reader returns a file cut inside a frame as a shorter text, without a word."""

    def __init__(self, raw: BinaryIO, zstandard) -> None:
        self.raw, self.zstandard = raw, zstandard
        self.decompressor = zstandard.ZstdDecompressor()
        self.frame = self.decompressor.decompressobj()
        self.inside = False  # part of a frame read, its end not yet
        self.pending = bytearray()  # decompressed, not yet read: taken from the front without copying the rest

    def readable(self) -> bool:
        return True

    # Compressed bytes fed at a time. Zstandard inflates up to about 32,000 times (a long run of one byte), and
    # one feed is inflated whole: 1 KiB bounds that at about 32 MB (64 KiB took 2 GB), and reads as fast.
    FEED = 1 << 10

    def readinto(self, buffer) -> int:
        while not self.pending:
            chunk = self.raw.read(self.FEED)
            if not chunk:
                if self.inside:
                    raise EOFError("the compressed file ended inside a Zstandard frame (cut short?)")
                return 0
            self._decompress(chunk)
        size = min(len(buffer), len(self.pending))
        buffer[:size] = self.pending[:size]
        del self.pending[:size]
        return size

    def _decompress(self, data: bytes) -> None:
        while data:
            self.inside = True
            try:
                self.pending += self.frame.decompress(data)
            except self.zstandard.ZstdError as error:
                raise OSError(f"not a valid Zstandard stream ({error})") from None
            if not self.frame.eof:
                return
            data, self.inside = self.frame.unused_data, False  # the next frame starts there
            self.frame = self.decompressor.decompressobj()

    def close(self) -> None:
        self.raw.close()
        super().close()


# Compressed inputs, by suffix: the reader of each, and fsspec's name for it (None: the reader wraps fsspec's raw
# stream, as fsspec's own zstd reader has the zstandard package's silence on a cut file).
COMPRESSIONS: dict[str, tuple[Callable[..., Any], str | None]] = {
    ".gz": (gzip.open, "gzip"), ".bz2": (bz2.open, "bz2"), ".xz": (lzma.open, "xz"), ZSTD: (zstd_open, None)}


def compression(name: str) -> str | None:
    """The compressed suffix of a name (.gz, .bz2, .xz, .zst), or None."""
    suffix = Path(name.rstrip("/").split("/")[-1]).suffix.lower()
    return suffix if suffix in COMPRESSIONS else None


def plain_name(name: str) -> str:
    """The name without its compressed suffix: `corpus.jsonl.gz` -> `corpus.jsonl`."""
    suffix = compression(name)
    return name[:-len(suffix)] if suffix else name


@dataclass(frozen=True)
class Input:
    """One input of a corpus: a local file, stdin ('-') or an fsspec URL."""

    name: str  # as the user wrote it, or a glob's match: what error messages show
    format: str  # "text" or "jsonl"
    what: str = "inputs (--corpus)"  # how error messages name the argument it came from (ra.corpus's, heads')

    @property
    def is_url(self) -> bool:
        return "://" in self.name

    @property
    def stem(self) -> str:
        """The default corpus name: the file's name without its suffix ('stdin' for -)."""
        return "stdin" if self.name == STDIN else Path(plain_name(self.name).rstrip("/").split("/")[-1]).stem

    def lines(self, most: int | None = None) -> int | None:
        """The number of lines of a local file (for the progress bar), or `most` if it has more (a limit need not
        count the rest of a large file); None for stdin and URLs, and for a compressed file without a limit
        (counting all of it would mean decompressing it twice; its first `most` lines are cheap beside the model's
        work on them). A file that cannot be counted is left to the reading, which says what is wrong with it."""
        if self.name == STDIN or self.is_url or (compression(self.name) and most is None):
            return None
        if not compression(self.name):
            try:
                return count_lines(Path(self.name), most)
            except OSError:  # no permission, a folder: the reading says so
                return None
        try:
            with self.open() as handle:
                return count_stream(handle, most)
        except READ_ERRORS + (CorpusError,):
            return None

    def open(self) -> contextlib.AbstractContextManager[BinaryIO]:
        """The input's bytes; CorpusError if it cannot be read."""
        if self.name == STDIN:
            if sys.stdin is None:  # started with its standard input closed (<&-)
                raise CorpusError("cannot read the corpus from standard input: it is closed")
            try:  # a buffer of our own over descriptor 0: a read that never returns (an idle pipe) then holds
                # its lock, not sys.stdin's, which Python takes as it exits (a fatal error once interrupted)
                return open(sys.stdin.fileno(), "rb", closefd=False)
            except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation: a stand-in stdin (tests)
                return contextlib.nullcontext(sys.stdin.buffer)
        try:
            if self.is_url:
                import fsspec

                suffix = compression(self.name)
                if suffix == ZSTD:
                    return zstd_open(fsspec.open(self.name, "rb").open())
                return fsspec.open(self.name, "rb", compression=suffix and COMPRESSIONS[suffix][1]).open()
            suffix = compression(self.name)
            return COMPRESSIONS[suffix][0](self.name, "rb") if suffix else Path(self.name).open("rb")
        except FileNotFoundError:  # fsspec's has no strerror: its text is the bare path
            raise CorpusError(f"cannot read {self.what} {self.name}: no such file") from None
        except (OSError, ValueError) as error:
            raise CorpusError(f"cannot read {self.what} {self.name}: {getattr(error, 'strerror', None) or error}") from None


def _fsspec():
    try:
        import fsspec
    except ImportError:
        raise MissingPackage('URLs in inputs (--corpus) need fsspec: pip install "real-attention[dask]" (and the '
                             "filesystem's package, e.g. s3fs for s3://)") from None
    return fsspec


def _check_url_file(file, spec: str) -> None:
    """CorpusError for a URL's match that is a folder, a pipe or a device (a pipe read by name may never end):
    as for a local path. A file the filesystem cannot describe is left to the read, which names what fails."""
    try:
        kind = file.fs.info(file.path).get("type")
    except FileNotFoundError:
        return  # the read says "no such file"
    except Exception:  # noqa: BLE001  any filesystem's own failure: the read reports it
        return
    if kind == "directory":
        raise CorpusError(f"inputs (--corpus) {spec}: {file.path} is a folder; pass a text or .jsonl file")
    if kind not in (None, "file"):
        raise CorpusError(f"inputs (--corpus) {spec}: {file.path} is not a regular file ({kind}); pass a text or .jsonl file")


def expand(specs: list[str] | tuple[str, ...], fmt: str = "auto") -> list[Input]:
    """--corpus values -> the inputs, in order; a glob gives its matches sorted by name.

    CorpusError for a missing file, a folder, a glob or URL that matches nothing, or '-' among other inputs.
    """
    if not specs:
        raise CorpusError("heads needs inputs (--corpus): one or more files, globs or URLs ('-' for stdin)")
    if STDIN in specs and len(specs) > 1:
        raise CorpusError("inputs (--corpus) - reads stdin and cannot be combined with other inputs")
    names: list[str] = []
    for spec in specs:
        if spec == "":  # Path('') is the current folder
            raise CorpusError("inputs (--corpus) is empty; pass a text or .jsonl file (or - for stdin)")
        if spec == STDIN:
            names.append(spec)
        elif "://" in spec:
            fsspec = _fsspec()
            try:
                files = fsspec.open_files(spec, "rb")
            except (OSError, ValueError, ImportError) as error:
                raise CorpusError(f"inputs (--corpus) {spec}: {error}") from None
            if not files:
                raise CorpusError(f"inputs (--corpus) {spec} matches no file")
            for file in files:
                _check_url_file(file, spec)
            names.extend(file.fs.unstrip_protocol(file.path) for file in files)
        elif any(char in spec for char in GLOB_CHARACTERS) and not Path(spec).exists():
            matches = sorted(path for path in glob.glob(spec, recursive=True) if Path(path).is_file())
            if not matches:
                raise CorpusError(f"inputs (--corpus) {spec} matches no file")
            names.extend(matches)
        else:
            path = Path(spec)
            if path.is_dir():
                raise CorpusError(f"inputs (--corpus) {spec} is a folder; pass a text or .jsonl file (or - for stdin)")
            if path.exists() and not path.is_file():  # a device or a pipe: read by name it may never end
                raise CorpusError(f"inputs (--corpus) {spec} is not a regular file; pass a text or .jsonl file (or - for "
                                  "stdin)")
            if not path.is_file():
                raise CorpusError(f"inputs (--corpus) {spec}: no such file")
            names.append(spec)
    for name in names:
        refuse_treebank(name)
    return [Input(name, corpus_format(plain_name(name), fmt)) for name in names]


def refuse_treebank(name: str, what: str = "inputs (--corpus)") -> None:
    """CorpusError for a CoNLL-U file given as a corpus: its comment and token lines would be read as sentences."""
    if plain_name(name).lower().endswith(".conllu"):
        raise CorpusError(f"{what} {name} is a CoNLL-U treebank, not one sentence per line; to score heads as parsers "
                          "on it, use `real-attention syntax --treebank FILE`")


class CorpusText:
    """Iterate over the sentences of one shard of several inputs, in order; hashes every byte, counts lines.

    After the iteration: `sha256` (see the module docstring), `lines` (lines of the shard read, blank ones
    included) and `blank`.
    """

    def __init__(self, inputs: list[Input], shard: Shard = Shard(), limit: int | None = None):  # noqa: B008
        """limit: read the first `limit` lines of the corpus only (of all inputs in order, blank lines counted);
        `sha256` is then that of those lines, and each shard takes its lines of them."""
        if not inputs:
            raise CorpusError("no corpus input: give at least one file in inputs (--corpus)")
        assert limit is None or limit >= 1, limit
        self.inputs, self.shard, self.limit = inputs, shard, limit
        self._digest = hashlib.sha256()
        self._readers: list[CorpusReader] = []
        self._read = 0  # lines of the corpus read (of every shard), for the limit

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()

    @property
    def lines(self) -> int:
        return sum(reader.lines for reader in self._readers)

    @property
    def layout(self) -> dict:
        """How the corpus was cut into inputs, for a shard's record (after the iteration): their number, and the
        sha256 of their sha256s (hex, one per line, in order). `--shard` counts lines within each input, so the
        same bytes read as other files put other lines in a shard: merge refuses shards whose layouts differ."""
        digests = "".join(f"{reader.sha256}\n" for reader in self._readers)
        return {"count": len(self._readers), "sha256": hashlib.sha256(digests.encode("ascii")).hexdigest()}

    @property
    def blank(self) -> int:
        return sum(reader.blank for reader in self._readers)

    def _hashed(self, handle: BinaryIO, last: bool, item: Input) -> Iterator[bytes]:
        raw = b"\n"
        try:
            for raw in handle:
                self._read += 1
                self._digest.update(raw)
                yield raw
                if self._reached():  # now, not at the next line: stdin or a slow pipe would be waited on for it
                    break
        except READ_ERRORS as error:  # a damaged or cut compressed file shows now
            raise CorpusError(f"cannot read {item.what} {item.name}: {error or type(error).__name__}") from None
        if not last and not raw.endswith(b"\n"):  # the next input starts on a line of its own
            self._digest.update(b"\n")

    def _reached(self) -> bool:
        return self.limit is not None and self._read >= self.limit

    def __iter__(self) -> Iterator[str]:
        for number, item in enumerate(self.inputs, start=1):
            if self._reached():
                return
            with item.open() as handle:
                reader = CorpusReader(self._hashed(handle, number == len(self.inputs), item), item.format, self.shard,
                                      source="stdin" if item.name == STDIN else item.name)
                self._readers.append(reader)
                yield from reader

    def total_lines(self) -> int | None:
        """How many lines of the shard the inputs hold, if every input is a local file (for the progress bar)."""
        total, left = 0, self.limit
        for item in self.inputs:  # --shard counts lines within each input; the limit, lines of the whole corpus
            if left == 0:  # the limit is read: the inputs after it are not opened
                break
            count = item.lines(left)
            if count is None:
                return None
            read = count if left is None else min(count, left)
            total += self.shard.lines_of(read)
            left = None if left is None else left - read
        return total
