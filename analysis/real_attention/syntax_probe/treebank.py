"""Read a CoNLL-U treebank with the `conllu` library: each sentence's words, gold heads and relations, checked.

A sentence's words are its syntactic word lines (integer IDs); multiword-token ranges (`1-2`) and empty nodes
(`8.1`) are skipped. A word's gold head is its HEAD (0: the root) and its relation the universal part of its
DEPREL, before any `:` (`obl:tmod` is `obl`), except `nmod:poss`, which is Clark et al.'s `poss`.
Every problem is one TreebankError that names the file and the line.
"""
from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..engine.errors import InputError
from ..engine.text import text_problem

POSS = "poss"
RELATION_RENAMES = {"nmod:poss": POSS}  # subtypes reported as a relation of their own (Clark's Stanford name)
COLUMNS = 10  # ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC


class TreebankError(InputError):
    """The treebank cannot be read as CoNLL-U; the message names the file and the line."""


@dataclass(frozen=True)
class TreeSentence:
    """One sentence of the treebank: its words and their gold dependency tree."""

    words: tuple[str, ...]  # (W,) FORM of each syntactic word, in order
    heads: np.ndarray  # (W,) int64: 0-based index of each word's head among the words, -1 for the root
    relations: tuple[str, ...]  # (W,) each word's relation (relation_of its DEPREL)
    line: int  # the line of the file the sentence starts on (comments included), counted from 1
    deprels: tuple[str, ...] = ()  # (W,) each word's whole DEPREL, subtype included (obl:tmod); () if not read

    def __post_init__(self) -> None:
        assert len(self.words) == len(self.relations) == self.heads.shape[0] > 0
        assert not self.deprels or len(self.deprels) == len(self.words)

    def with_subtypes(self) -> TreeSentence:
        """The sentence with each word's whole DEPREL as its relation (acl:relcl apart from acl), `nmod:poss` still
        Clark's `poss`."""
        assert self.deprels, "a sentence read from a file keeps its DEPRELs"
        return replace(self, relations=tuple(RELATION_RENAMES.get(deprel, deprel) for deprel in self.deprels))


def relation_of(deprel: str) -> str:
    """A DEPREL -> its universal relation: the part before ':', with `nmod:poss` as `poss`."""
    return RELATION_RENAMES.get(deprel, deprel.split(":", 1)[0])



# The first bytes of the compressed files `heads --corpus` reads: a treebank must be plain CoNLL-U text
COMPRESSED = ((b"\x1f\x8b", "gzip", "gunzip"), (b"BZh", "bzip2", "bunzip2"), (b"\xfd7zXZ\x00", "xz", "unxz"),
              (b"\x28\xb5\x2f\xfd", "zstd", "unzstd"))


def check_treebank(path: str | Path) -> Path:
    """The path of a readable file, else TreebankError."""
    path = Path(path)
    if path.exists() and not path.is_file():
        kind = "a folder" if path.is_dir() else "not a regular file (a device, a pipe or a socket)"
        raise TreebankError(f"{path} is {kind}; pass a CoNLL-U treebank file (.conllu), e.g. UD English-EWT's "
                            "en_ewt-ud-dev.conllu")
    if not path.is_file():
        raise TreebankError(f"{path}: no such file; pass a CoNLL-U treebank (.conllu), e.g. UD English-EWT's "
                            "en_ewt-ud-dev.conllu")
    try:
        with path.open("rb") as handle:
            start = handle.read(6)
    except OSError as error:
        raise TreebankError(f"{path}: cannot be read ({error.strerror or error})") from None
    for magic, kind, tool in COMPRESSED:
        if start.startswith(magic):  # said as such, not as "not UTF-8 at byte 1"
            raise TreebankError(f"{path} is {kind}-compressed; syntax reads plain CoNLL-U text: decompress it first "
                                f"(with {tool})")
    return path


def _blocks(path: Path) -> Iterator[list[tuple[int, str]]]:
    """The file's sentence blocks (lines between blank lines), each as (line number, text) pairs."""
    block: list[tuple[int, str]] = []
    spaces: int | None = None  # the line of spaces or tabs alone that may end `block`
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise TreebankError(f"{path}, line {number}: not UTF-8 ({error.reason} at byte {error.start}); "
                                    "CoNLL-U files are UTF-8 text") from None
            line = line.removeprefix("\ufeff") if number == 1 else line
            line = line.rstrip("\r\n")
            if "\r" in line:  # no CoNLL-U field holds a carriage return: the file's lines end in CR alone
                raise TreebankError(f"{path}, line {number}: holds a carriage return (CR) inside the line: its "
                                    "lines end in CR alone (an old Mac file?); CoNLL-U lines end in LF or CR LF")
            if spaces is not None and line.strip():  # after a line of spaces or tabs alone: a new sentence?
                first = line.split("\t", 1)[0]
                if not (line.startswith("#") or first == "1" or first.startswith(("1-", "0."))):
                    raise TreebankError(f"{path}, line {spaces}: holds only spaces or tabs inside a sentence (line "
                                        f"{number} goes on with word {first}); an empty line ends a sentence in "
                                        "CoNLL-U: remove that line")
                yield block
                block, spaces = [], None
            if line.strip():
                block.append((number, line))
            elif line and block and spaces is None:  # spaces or tabs alone: a sentence break only if one follows
                spaces = number
            elif block:
                yield block
                block, spaces = [], None
    if block:
        yield block


def _not_conllu(path: Path, number: int, what: str) -> TreebankError:
    return TreebankError(f"{path}, line {number}: not CoNLL-U: {what}")


def _raw(line: list[str], index: int) -> str:
    return line[index]


# The columns the probe never reads (FEATS, DEPS, MISC) stay as written: conllu's parsers for them are most of
# its time on a treebank. ID, FORM, HEAD and DEPREL are parsed and checked by conllu as usual.
RAW_FIELDS: dict[str, Callable[[list[str], int], Any]] = {"feats": _raw, "deps": _raw, "misc": _raw}


def _parse(path: Path, lines: list[tuple[int, str]]) -> list:
    """The word lines of one block -> conllu's tokens, one per line; TreebankError names a bad line."""
    import conllu
    from conllu.exceptions import ParseException

    for number, line in lines:
        if line.count("\t") != COLUMNS - 1:
            raise _not_conllu(path, number, f"a word line has {COLUMNS} tab-separated columns (ID FORM LEMMA UPOS "
                                            f"XPOS FEATS HEAD DEPREL DEPS MISC), this one {line.count(chr(9)) + 1}")
    try:
        sentences = conllu.parse("\n".join(line for _, line in lines) + "\n", field_parsers=RAW_FIELDS)
    except ParseException:
        for number, line in lines:  # find the line conllu cannot read
            try:
                conllu.parse(line + "\n")
            except ParseException as error:
                raise _not_conllu(path, number, str(error)) from None
        raise  # every line alone parses: a bug, not bad input
    tokens = [token for sentence in sentences for token in sentence]
    assert len(tokens) == len(lines), (len(tokens), len(lines))
    return tokens


_ID_SINGLE = re.compile(r"0|[1-9][0-9]*")  # conllu's ID and HEAD grammar (conllu.parser)
_ID_RANGE = re.compile(r"([1-9][0-9]*)-([1-9][0-9]*)")
_ID_DOT = re.compile(r"([0-9]+)\.([1-9][0-9]*)")
_HEAD = re.compile(r"0|-?[1-9][0-9]*")


def _plain_tokens(lines: list[tuple[int, str]]) -> list[dict] | None:
    """The ID, FORM, HEAD and DEPREL of each word line, as conllu reads them, for lines in the plain form that
    every treebank uses (ten tab-separated columns, no edge whitespace, no run of two spaces that conllu would also
    split on, a valid ID and HEAD); None if any line is not, and then _parse reads them (and names what is wrong).
    About ten times faster than conllu, whose parsing was a sixth of `syntax` on UD English-EWT dev."""
    tokens = []
    for _, line in lines:
        columns = line.split("\t")
        if len(columns) != COLUMNS or "  " in line or line != line.strip():
            return None
        text, form, head_text, deprel = columns[0], columns[1], columns[6], columns[7]
        identifier: int | tuple | None
        if _ID_SINGLE.fullmatch(text):
            identifier = int(text)
        elif (span := _ID_RANGE.fullmatch(text)) and int(span[2]) >= int(span[1]):
            identifier = (int(span[1]), "-", int(span[2]))
        elif dot := _ID_DOT.fullmatch(text):
            identifier = (int(dot[1]), ".", int(dot[2]))
        else:
            return None
        if head_text == "_":
            head = None
        elif _HEAD.fullmatch(head_text):
            head = int(head_text)
        else:
            return None
        tokens.append({"id": identifier, "form": form, "head": head, "deprel": deprel})
    return tokens


def _sentence(path: Path, block: list[tuple[int, str]]) -> TreeSentence | None:
    """One block -> its sentence, or None for a block of comments only."""
    lines = [(number, line) for number, line in block if not line.startswith("#")]
    if not lines:
        return None
    words: list[str] = []
    heads: list[int] = []
    relations: list[str] = []
    deprels: list[str] = []
    numbers: list[int] = []
    tokens = _plain_tokens(lines)
    for (number, _), token in zip(lines, _parse(path, lines) if tokens is None else tokens):
        identifier = token["id"]
        if isinstance(identifier, tuple):  # a multiword token's range (1-2) or an empty node (8.1)
            continue
        if not isinstance(identifier, int) or identifier != len(words) + 1:
            raise _not_conllu(path, number, f"word IDs run 1, 2, 3, ... in each sentence; expected "
                                            f"{len(words) + 1}, found {identifier!r}")
        head, deprel = token["head"], token["deprel"]
        if not isinstance(head, int):
            raise _not_conllu(path, number, f"word {identifier} has no HEAD number ({head!r})")
        if not isinstance(deprel, str) or deprel in ("", "_"):
            raise _not_conllu(path, number, f"word {identifier} has no DEPREL")
        problem = text_problem(token["form"])
        if problem is not None:
            raise _not_conllu(path, number, f"the FORM of word {identifier} {problem}")
        words.append(token["form"])
        heads.append(head)
        relations.append(relation_of(deprel))
        deprels.append(deprel)
        numbers.append(number)
    if not words:
        raise _not_conllu(path, lines[0][0], "a sentence has no word line with an integer ID")
    count = len(words)
    for number, head in zip(numbers, heads):
        if not 0 <= head <= count:
            raise TreebankError(f"{path}, line {number}: HEAD {head} points outside the sentence (its words are "
                                f"1 to {count}, and 0 is the root)")
    roots = [word for word, head in enumerate(heads, start=1) if head == 0]
    if len(roots) != 1:
        where = numbers[roots[1] - 1] if roots else lines[0][0]
        found = f"words {', '.join(map(str, roots))} have HEAD 0" if roots else "no word has HEAD 0"
        raise TreebankError(f"{path}, line {where}: the sentence that starts on line {block[0][0]} has "
                            f"{len(roots) or 'no'} root{'s' if len(roots) != 1 else ''} ({found}); a dependency "
                            "tree has exactly one")
    _check_tree(path, np.array(heads, dtype=np.int64), numbers)
    return TreeSentence(tuple(words), np.array(heads, dtype=np.int64) - 1, tuple(relations), block[0][0],
                        tuple(deprels))


def _check_tree(path: Path, heads: np.ndarray, numbers: list[int]) -> None:
    """TreebankError if some word's chain of heads never reaches the root: heads (W,) 1-based, 0 the root."""
    up = np.concatenate([[0], heads])  # (W + 1,) up[k]: the head of word k; the root is its own head
    reach = up.copy()
    for _ in range(math.ceil(math.log2(len(up))) + 1):  # pointer doubling: reach[k] = the 2^i-th ancestor
        reach = reach[reach]
    stuck = np.flatnonzero(reach[1:] != 0)  # 0-based words that never reach the root
    if stuck.size == 0:
        return
    word = int(stuck[0]) + 1
    for _ in range(len(up)):  # walk until inside the cycle
        word = int(up[word])
    cycle = [word]
    while int(up[cycle[-1]]) != word:
        cycle.append(int(up[cycle[-1]]))
    cycle = sorted(cycle)
    raise TreebankError(f"{path}, line {numbers[cycle[0] - 1]}: the HEADs of words {', '.join(map(str, cycle))} "
                        "form a cycle; a dependency tree reaches the root (0) from every word")


def read_treebank(path: str | Path, limit: int | None = None) -> Iterator[TreeSentence]:
    """Stream the sentences of a CoNLL-U file, checked as they are read; the first `limit` only, if given.

    TreebankError (file and line) for a file that is not CoNLL-U, a HEAD outside its sentence, a cycle, or a
    file without a sentence.
    """
    path = check_treebank(path)
    count, last = 0, 0
    for block in _blocks(path):
        last = block[-1][0]
        if limit is not None and count >= limit:
            return
        sentence = _sentence(path, block)
        if sentence is not None:
            count += 1
            yield sentence
    if count == 0:
        what = ("it has comments but no word line" if last else
                "the file is empty" if path.stat().st_size == 0 else "the file holds only blank lines")
        raise TreebankError(f"{path}, line {max(last, 1)}: no sentence: {what}; a CoNLL-U treebank has one word "
                            "per line (ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC)")
