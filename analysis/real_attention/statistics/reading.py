"""Reading a corpus: one shard of a text or JSONL stream, line by line, every byte hashed; the corpus's own error."""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO
from collections.abc import Iterable, Iterator

from ..engine.errors import InputError
from ..engine.text import is_blank, text_problem


class CorpusError(InputError):
    """Bad corpus input (missing file, bad line, empty corpus, bad shard); the message says what to fix."""


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count`: lines index, index + count, index + 2 count, ... (lines counted from 1)."""

    index: int = 1
    count: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.index <= self.count:
            raise CorpusError(f"shard {self.index}/{self.count} does not exist; use shard (--shard) i/N with 1 <= i <= N")

    @classmethod
    def parse(cls, text: str) -> Shard:
        """'2/4' -> Shard(2, 4)."""
        parts = text.split("/")
        # ASCII digits only: str.isdigit takes "²", which int() refuses
        if len(parts) != 2 or not all(part.strip().isascii() and part.strip().isdigit() for part in parts):
            raise CorpusError(f"shard (--shard) {text!r} is not of the form i/N, e.g. 1/4")
        return cls(int(parts[0]), int(parts[1]))

    def takes(self, line_number: int) -> bool:
        return (line_number - self.index) % self.count == 0

    def lines_of(self, total_lines: int) -> int:
        """How many of a file's total_lines fall in this shard."""
        return max(0, (total_lines - self.index) // self.count + 1)


def corpus_format(path: str, fmt: str = "auto") -> str:
    """'text' or 'jsonl': `fmt` unless it is 'auto', then by the file's suffix."""
    if fmt != "auto":
        return fmt
    return "jsonl" if path.lower().endswith(".jsonl") else "text"


def count_lines(path: Path, most: int | None = None) -> int:
    """The number of lines of a file, a last line without a newline included (for the progress bar); once it
    passes `most`, `most` (the rest of the file is not read)."""
    with path.open("rb") as handle:
        return count_stream(handle, most)


def count_stream(handle: BinaryIO, most: int | None = None) -> int:
    """count_lines of the bytes a binary stream reads."""
    count, last = 0, b"\n"
    for block in iter(lambda: handle.read(1 << 20), b""):
        count += block.count(b"\n")
        last = block[-1:]
        if most is not None and count >= most:
            return most
    return count + (last != b"\n")


CR_LINE_ENDS = ("holds a carriage return (CR) inside the line: its lines end in CR alone (an old Mac file?); a "
                "corpus's lines end in LF or CR LF")


def cr_line_ends(line: str, first: bool, ended: bool) -> bool:
    """True if a text line (its line end still on or not) is a file whose lines end in CR alone: read as one line,
    its sentences would be pooled as one. That is a CR inside the file's first line, or inside a last line without a
    line end (`ended` False); a stray CR inside another line of an LF file (scraped text) stays the text it was."""
    return "\r" in line.rstrip("\r\n") and (first or not ended)


class CorpusReader:
    """Iterate over the sentences of one shard of a stream; hashes every byte and counts the lines.

    Text: one sentence per line. JSONL: one object per line with a string field "text". Blank lines (and
    empty texts) are skipped and counted. After the iteration, `sha256` is the digest of the whole stream.
    """

    def __init__(self, stream: BinaryIO | Iterable[bytes], fmt: str = "text", shard: Shard = Shard(), source: str = "the corpus",
                 file_start: bool = True):
        """file_start: the stream's first line is a file's first line, whose byte-order mark is no text (False
        for sentences read already and handed on: a BOM left at the start of one is in every engine's text)."""
        if fmt not in ("text", "jsonl"):
            raise CorpusError(f"unknown corpus format {fmt!r}: use text or jsonl")
        self.stream, self.fmt, self.shard, self.source = stream, fmt, shard, source
        self.file_start = file_start
        self._digest = hashlib.sha256()
        self.lines = 0  # lines of this shard read so far
        self.blank = 0

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()

    def __iter__(self) -> Iterator[str]:
        for number, raw in enumerate(self.stream, start=1):
            self._digest.update(raw)
            if not self.shard.takes(number):
                continue
            self.lines += 1
            text = self._text(raw, number)
            if not is_blank(text):  # blank: nothing visible (whitespace, zero-width or control characters only)
                yield text
            else:
                self.blank += 1

    def _text(self, raw: bytes, number: int) -> str:
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            raise CorpusError(f"line {number} of {self.source} is not UTF-8 ({error.reason} at byte {error.start})") from None
        if number == 1 and self.file_start:
            line = line.removeprefix("\ufeff")
        if self.fmt == "text" and cr_line_ends(line, number == 1 and self.file_start, raw.endswith(b"\n")):
            raise CorpusError(f"line {number} of {self.source} {CR_LINE_ENDS}: convert it (e.g. tr '\\r' '\\n' < FILE "
                              "> FIXED)")
        if self.fmt == "text" or not line.strip():
            return self._checked(line.strip(), number)
        try:
            record = json.loads(line.rstrip("\r\n"))  # an error at the line's end is in this line, not the next
        except json.JSONDecodeError as error:
            raise CorpusError(f"line {number} of {self.source} is not JSON: {error.msg} (column {error.colno})") from None
        except (RecursionError, ValueError) as error:  # 100,000 nested [, an integer of 5,000 digits: not a record
            raise CorpusError(f"line {number} of {self.source} is not a JSON record of this tool's kind: "
                              f"{'nested too deeply' if isinstance(error, RecursionError) else error}") from None
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            raise CorpusError(f'line {number} of {self.source} has no string field "text"')
        return self._checked(record["text"].strip(), number)

    def _checked(self, text: str, number: int) -> str:
        """The text, or CorpusError if it holds a NUL character: no sentence does, a binary or corrupt file does
        (skipping such lines would pool statistics over what is left of a damaged file without a word)."""
        if "\x00" in text:
            how = ("its JSON text holds a NUL character (\\u0000); no sentence does: remove it from the text"
                   if self.fmt != "text" else "the file is binary or damaged; remove the NUL bytes (e.g. "
                   "tr -d '\\000' < FILE > CLEAN) and run again")
            raise CorpusError(f"line {number} of {self.source} holds a NUL byte (\\x00): {how}")
        problem = text_problem(text)
        if problem is not None and not is_blank(text):  # an unpaired surrogate (a JSONL "\\ud83d" escape)
            raise CorpusError(f"line {number} of {self.source} {problem}")
        return text
