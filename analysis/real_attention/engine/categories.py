"""One category per head for where the focus word looks: sense word, marker, previous, next or other; for a
decoder: sense word, first token, marker, previous or other.

The single source of truth for the overview figure and the HTML report. No matplotlib, no torch.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .focus import FocusedSentence
from .heads import NEXT_OFFSET, PREVIOUS_OFFSET, HeadReport

# In order of precedence: a head takes the first category whose rule holds.
SENSE, FIRST, MARKER, PREVIOUS, NEXT, OTHER = "sense", "first", "marker", "previous", "next", "other"
CATEGORIES = (SENSE, MARKER, PREVIOUS, NEXT, OTHER)  # an encoder's
# A decoder's: its focus word cannot see the next word, and many of its heads put most of their weight on the
# first token, whatever it is: the attention sink (Xiao et al. 2023, "Efficient Streaming Language Models with
# Attention Sinks").
CAUSAL_CATEGORIES = (SENSE, FIRST, MARKER, PREVIOUS, OTHER)
FIRST_UNIT = 0  # the first token's unit index

# Okabe-Ito colours, safe for colour-blind readers; the PNG overview and the HTML report share them.
CATEGORY_COLOURS = {
    SENSE: "#D55E00",  # vermillion
    FIRST: "#CC79A7",  # reddish purple
    MARKER: "#56B4E9",  # sky blue
    PREVIOUS: "#009E73",  # bluish green
    NEXT: "#F0E442",  # yellow
    OTHER: "#DDDDDD",  # light grey
}
# White text on these: none, as dark text reads better on every colour above (on the green 4.5:1 against white's
# 3.4:1, on the vermillion 4.0:1 against 3.9:1; tests/test_report.py checks it)
DARK_CATEGORIES: tuple[str, ...] = ()
FOCUS_COLOUR = "#E69F00"  # orange: the focus word's row
# Darker shades of the focus and sense colours for text on white, where the fills' would be hard to read (2.3:1
# and 3.9:1): 5.0:1 and 5.5:1, above WCAG AA's 4.5:1
FOCUS_TEXT_COLOUR = "#9A6400"
SENSE_TEXT_COLOUR = "#AD4C00"

# What a reader sees in legends.
CATEGORY_LABELS = {
    SENSE: "sense word",
    FIRST: "first token",
    MARKER: "marker",
    PREVIOUS: "previous word",
    NEXT: "next word",
    OTHER: "other",
}
# The word x word heatmaps, in the PNGs and in the HTML report: one colour map (a matplotlib name) over
# weights 0 to 1, and white cell text from HEATMAP_LIGHT_TEXT_FROM up, where white reads better than dark text
# (Blues: from 0.68; at 0.6 white was 3.2:1 against dark text's 4.9:1; tests/test_report.py checks it).
HEATMAP_CMAP = "Blues"
HEATMAP_LIGHT_TEXT_FROM = 0.68

# One line each, for a note under a legend.
CATEGORY_NOTES = {
    FIRST: "the first unit, whatever it is: a decoder's attention sink",
    MARKER: "a token the tokenizer added ([CLS], <s>, ...) or punctuation",
    OTHER: "another word, or not the same kind of word in every sentence",
}


def categories_for(causal: bool) -> tuple[str, ...]:
    """The categories that apply to a model, in order of precedence: a decoder's or an encoder's."""
    return CAUSAL_CATEGORIES if causal else CATEGORIES


def head_rules(report: HeadReport, sentences: Sequence[FocusedSentence]) -> dict[str, np.ndarray]:
    """Each rule of categories_for(report.causal) but "other", in their order of precedence: (layers, heads) bool,
    whether the head meets it in every sentence (focus_categories gives each head the first that holds; a head
    may meet several, a decoder's sink head often both "first" and "marker")."""
    assert report.top_key.shape[0] == len(sentences), (report.top_key.shape, len(sentences))
    focus = np.array([s.focus for s in sentences])[:, None, None]  # (S, 1, 1)
    rules = {
        SENSE: report.sense_head,
        FIRST: (report.top_key == FIRST_UNIT).all(axis=0),  # (layers, heads)
        MARKER: report.marker_head,
        PREVIOUS: (report.top_key == focus + PREVIOUS_OFFSET).all(axis=0),
        NEXT: (report.top_key == focus + NEXT_OFFSET).all(axis=0),
    }
    return {name: rules[name] for name in categories_for(report.causal)[:-1]}


def focus_categories(report: HeadReport, sentences: Sequence[FocusedSentence]) -> np.ndarray:
    """(layers, heads) array of category names, decided from the focus row's top key in every sentence.

    Precedence, per head, among categories_for(report.causal) (the rules of head_rules):
      1. "sense"    if it is a sense head (the top key is the sense word in every sentence);
      2. "first"    a decoder only: if the top key is the first unit (FIRST_UNIT) in every sentence;
      3. "marker"   if it is a marker head (the top key is a marker in every sentence);
      4. "previous" if the top key is the unit at focus + PREVIOUS_OFFSET in every sentence;
      5. "next"     an encoder only: if the top key is the unit at focus + NEXT_OFFSET in every sentence;
      6. "other"    otherwise (the focus word looks at another word, or not at the same kind in every sentence).
    So the sense count equals HeadReport's sense_head count, and an encoder's marker count its marker_head count
    (unless a config names a punctuation mark as the sense word).
    """
    rules = head_rules(report, sentences)
    return np.select(list(rules.values()), list(rules), default=OTHER)  # the first rule that holds


def key_rules(sentence: FocusedSentence, causal: bool = False) -> np.ndarray:
    """(len(categories_for(causal)) - 1, n) bool: which rule of each category but "other" each key unit meets.

    The same rules as focus_categories, applied to every key instead of the top one: the sense word, the
    first unit, a marker (WordAttention.markers), the unit at focus + PREVIOUS_OFFSET, at focus + NEXT_OFFSET.
    """
    keys = np.arange(len(sentence.attention.words))  # (n,)
    rules = {
        SENSE: keys == sentence.sense,
        FIRST: keys == FIRST_UNIT,
        MARKER: sentence.attention.markers,
        PREVIOUS: keys == sentence.focus + PREVIOUS_OFFSET,
        NEXT: keys == sentence.focus + NEXT_OFFSET,
    }
    return np.stack([rules[name] for name in categories_for(causal)[:-1]])  # (rules, n)


def key_relations(sentence: FocusedSentence, causal: bool = False) -> np.ndarray:
    """(n,) category names: what each key unit is to the focus word, the first rule that holds, else "other".

    The same precedence as focus_categories. It depends on the sentence only, not on the head: a head
    is in category c when its top key meets c's rule in every sentence (and no earlier rule does so).
    """
    return np.select(list(key_rules(sentence, causal)), list(categories_for(causal)[:-1]), default=OTHER)


def category_counts(categories: np.ndarray, causal: bool = False) -> dict[str, int]:
    """How many heads fall in each category that applies, in categories_for(causal) order (zeros included)."""
    return {name: int((categories == name).sum()) for name in categories_for(causal)}
