"""The API's own argument checks: sentences, a loaded model, given words, focus and sense, corpus lines.

Each returns the checked value or raises one InputError that names the argument; the checks every stage shares
(whole numbers, strings, flags) are real_attention.engine.checks.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..engine.checks import described, strings, text
from ..engine.errors import InputError
from ..engine.text import check_text, is_blank, text_problem

if TYPE_CHECKING:
    from ..engine.sentences import SentenceSet


def sentence_texts(texts: object, function: str = "attend") -> list[str]:
    """attend's texts= (or mixing's): one sentence or several, each stripped; InputError for none."""
    items = [item.strip() for item in strings(texts, "texts")]
    if not items:
        raise InputError(f"{function} needs at least one sentence (texts is empty)")
    return items


def given_words(words) -> list[tuple[str, ...]]:
    """words= of attend: sentences, each a list of words -> tuples of stripped words; InputError otherwise."""
    if not isinstance(words, Iterable) or isinstance(words, (bytes, bytearray)):
        raise InputError(f"words= must be a list of sentences, each a list of words, not {type(words).__name__}")
    sentences = [words] if isinstance(words, str) else list(words)
    if not sentences:
        raise InputError("attend needs at least one sentence")
    result = []
    for number, sentence in enumerate(sentences, start=1):
        if isinstance(sentence, str):
            raise InputError(f"words= sentence {number} is a string; give each sentence as a list of words, "
                             "e.g. words=[['The', 'bank', '.']]")
        if not isinstance(sentence, Iterable):
            raise InputError(f"words= sentence {number} is {type(sentence).__name__}; give each sentence as a list "
                             "of words, e.g. words=[['The', 'bank', '.']]")
        items = list(sentence)
        if not items:
            raise InputError(f"words= sentence {number} has no words")
        for index, word in enumerate(items, start=1):
            if not isinstance(word, str) or not word.strip():
                raise InputError(f"words= sentence {number}, word {index} is "
                                 f"{'empty' if isinstance(word, str) else repr(word)}; pass non-empty strings")
            check_text(word, f"words= sentence {number}, word {index}")
        result.append(tuple(word.strip() for word in items))
    return result


def sentence_set(texts: list[str], focus: str | None, sense: str | Sequence[str] | None,
                 lang: str = "") -> SentenceSet:
    """A SentenceSet from the API's arguments; InputError says what is missing."""
    from ..engine.sentences import Sentence, SentenceSet, check_apart, same_word

    if focus is None or sense is None:
        raise InputError("give both focus= (the ambiguous word) and sense= (one word per sentence)")
    focus = text(focus, "focus", "the ambiguous word").strip()  # as run's config and the live page take them
    senses = [word.strip() for word in strings(sense, "sense", "word")]
    if len(senses) != len(texts):
        raise InputError(f"sense= has {len(senses)} word(s) for {len(texts)} sentence(s); give one per sentence")
    for number, word in enumerate(senses, start=1):
        if same_word(word, focus):
            raise InputError(f"sentence {number}: the sense word {word!r} is the focus word itself")
        check_apart(word, focus, f"sentence {number}")
    return SentenceSet(lang=lang, focus=focus, sentences=tuple(Sentence(t, s) for t, s in zip(texts, senses)))


def checked_lines(lines: object) -> Iterable[str]:
    """corpus_stats's lines, checked as they stream by (a generator stays lazy): a string is one sentence."""
    if isinstance(lines, str):
        return [lines]
    if isinstance(lines, (bytes, bytearray, memoryview)) or not isinstance(lines, Iterable):
        strings(lines, "lines")  # raises, naming the argument

    def checked(items: Iterable[Any]):
        for number, item in enumerate(items, start=1):
            if not isinstance(item, str):
                raise InputError(f"lines: line {number} is {described(item)}, not a string")
            problem = text_problem(item)
            if problem is not None and not is_blank(item):  # a line with nothing visible is counted as blank
                raise InputError(f"lines: line {number} {problem}")
            yield item

    assert isinstance(lines, Iterable), "strings raised for anything else"
    return checked(lines)
