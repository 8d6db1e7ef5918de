"""Locate the configured focus and sense word of each sentence among its units (not head scoring)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import InputError
from .sentences import SentenceSet, same_word
from .words import SPECIAL_KINDS, WordAttention


class SentenceError(InputError):
    """A sentence does not fit the config (a missing or repeated word); the message names it."""


@dataclass(frozen=True, eq=False)
class FocusedSentence:
    """A sentence at word level with its focus and sense word located."""

    attention: WordAttention
    focus: int  # unit index of the focus word
    sense: int  # unit index of the word that decides its sense


def locate(attention: WordAttention, word: str, occurrence: int | None, role: str, number: int | None) -> int:
    """The unit index of `word` among the words of a sentence (case-insensitive; never a special token the
    tokenizer added, whose text may look like a word: [SEP], </s>); SentenceError if missing or ambiguous.

    number: the sentence's number (from 1) for the message, or None for a sentence on its own.
    """
    matches = np.flatnonzero([same_word(w, word) and kind not in SPECIAL_KINDS
                              for w, kind in zip(attention.words, attention.kinds)])
    where = f"sentence {number} ({attention.text!r})" if number is not None else repr(attention.text)
    if len(matches) == 0:
        raise SentenceError(f"the {role} word {word!r} is not in {where}{_absent_hint(attention, word)}")
    if occurrence is None:
        if len(matches) > 1:
            raise SentenceError(
                f"the {role} word {word!r} occurs {len(matches)} times in {where}; "
                f"say which one with {role}_occurrence = 1..{len(matches)} in a config (`run --config`); ra.attend "
                "and serve take a sentence where it occurs once"
            )
        occurrence = 1
    if occurrence > len(matches):
        raise SentenceError(
            f"{role}_occurrence = {occurrence} but {word!r} occurs {len(matches)} time(s) in {where}"
        )
    return int(matches[occurrence - 1])


def _absent_hint(attention: WordAttention, word: str) -> str:
    """Why a word that is in the text is no unit: it sits inside a longer word, or the units cut it."""
    folded = word.casefold()
    if folded not in attention.text.casefold():
        return ""
    longer = [w for w in attention.words if folded in w.casefold()]
    if longer:
        return f"; it is only part of the word {longer[0]!r}: name the whole word"
    return ("; it is in the text but no unit: under units (--units) tokenizer the tokenizer's own words cut it (the "
            "text rule, units (--units) text, keeps it whole), or the tokenizer gives its characters no piece")


def check_words_in_text(sentence_set: SentenceSet, causal: bool = False) -> None:
    """SentenceError for a focus or sense word that is no unit of its sentence, or whose occurrence does not fit,
    found from the text alone, before any model loads. The text rule's units come from the text (each required
    word one unit); a tokenizer can only join units, never make a missing word appear, and a join across a
    required word is an error of its own; so what fails here fails in the run too, after the model's load.
    causal: the model is known to be a decoder, so a sense word after the focus word is refused too (units keep
    the text's order)."""
    from .units import required_spans, text_spans
    from .words import PUNCT, WORD, is_punctuation

    for number, sentence in enumerate(sentence_set.sentences, start=1):
        text = sentence.text
        spans, _ = required_spans(text, text_spans(text), (sentence_set.focus, sentence.sense))
        words = tuple(text[start:end] for start, end in spans)
        units = WordAttention(text, words, tuple(PUNCT if is_punctuation(w) else WORD for w in words), None)
        focus = locate(units, sentence_set.focus, sentence.focus_occurrence, "focus", number)
        sense = locate(units, sentence.sense, sentence.sense_occurrence, "sense", number)
        if causal and sense > focus:
            raise SentenceError(_sense_after_focus(number, text, sentence_set.focus, sentence.sense))


def _sense_after_focus(number: int, text: str, focus: str, sense: str) -> str:
    return (f"in sentence {number} ({text!r}) the sense word {sense!r} comes after the focus word {focus!r}, and "
            f"this model is a decoder: each word attends only to itself and the words before it, so {focus!r} "
            f"cannot see {sense!r}; put the sense word before it, e.g. \"The river flooded the bank.\" (the "
            "packaged config's [en-causal] table has such sentences)")


def without_maps(encoded) -> list[WordAttention]:
    """Encoded sentences (real_attention.engine.extract.Encoded) as WordAttentions without maps: their units, to
    locate the focus and sense words before any forward pass."""
    from .words import Kind

    return [WordAttention(s.text, s.words, tuple(Kind(k) for k in s.kinds), None) for s in encoded]


def find_word(attention: WordAttention, word: str, role: str) -> int:
    """The unit index of a word that occurs once in one sentence (locate, for a sentence on its own)."""
    return locate(attention, word, None, role, None)


def focus_sentences(attentions: list[WordAttention], sentence_set: SentenceSet,
                    causal: bool = False, first: int = 1) -> list[FocusedSentence]:
    """Locate the focus and sense word of each configured sentence; SentenceError names the sentence.

    causal: a decoder's maps, in which a word sees only itself and the words before it; a sense word after the
    focus word is then a SentenceError.
    """
    located = []
    for number, (attention, sentence) in enumerate(zip(attentions, sentence_set.sentences), start=first):
        focus = locate(attention, sentence_set.focus, sentence.focus_occurrence, "focus", number)
        sense = locate(attention, sentence.sense, sentence.sense_occurrence, "sense", number)
        if causal and sense > focus:
            raise SentenceError(_sense_after_focus(number, attention.text, sentence_set.focus, sentence.sense))
        if causal and sense == 0:
            raise SentenceError(
                f"in sentence {number} ({attention.text!r}) the sense word {sentence.sense!r} is the first unit, and "
                "this decoder adds no token before the text: its first unit is where heads with nothing to look at "
                "rest (the attention sink), so they would all count as sense-word heads; put a word before it, "
                "e.g. \"The river flooded the bank.\""
            )
        located.append(FocusedSentence(attention=attention, focus=focus, sense=sense))
    return located
