"""One category per head for where the focus word looks: sense word, marker, previous, next or other.

The single source of truth for the overview figure and the HTML report. No matplotlib, no torch.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from analysis.focus import FocusedSentence
from analysis.heads import NEXT_OFFSET, PREVIOUS_OFFSET, HeadReport

# In order of precedence: a head takes the first category whose rule holds.
SENSE, MARKER, PREVIOUS, NEXT, OTHER = "sense", "marker", "previous", "next", "other"
CATEGORIES = (SENSE, MARKER, PREVIOUS, NEXT, OTHER)

# Okabe-Ito colours, safe for colour-blind readers; the PNG overview and the HTML report share them.
CATEGORY_COLOURS = {
    SENSE: "#D55E00",  # vermillion
    MARKER: "#56B4E9",  # sky blue
    PREVIOUS: "#009E73",  # bluish green
    NEXT: "#F0E442",  # yellow
    OTHER: "#DDDDDD",  # light grey
}
DARK_CATEGORIES = (SENSE, PREVIOUS)  # white text on these
FOCUS_COLOUR = "#E69F00"  # orange: the focus word's row

# What a reader sees in legends.
CATEGORY_LABELS = {
    SENSE: "sense word",
    MARKER: "marker",
    PREVIOUS: "previous word",
    NEXT: "next word",
    OTHER: "other",
}
# The word x word heatmaps, in the PNGs and in the HTML report: one colour map (a matplotlib name) over
# weights 0 to 1, and white cell text from HEATMAP_LIGHT_TEXT_FROM up, where the cells are dark.
HEATMAP_CMAP = "Blues"
HEATMAP_LIGHT_TEXT_FROM = 0.6

# One line each, for a note under a legend.
CATEGORY_NOTES = {
    MARKER: "[CLS], [SEP] or punctuation",
    OTHER: "another word, or not the same kind of word in every sentence",
}


def focus_categories(report: HeadReport, sentences: Sequence[FocusedSentence]) -> np.ndarray:
    """(layers, heads) array of category names, decided from the focus row's top key in every sentence.

    Precedence, per head:
      1. "sense"    if it is a sense head (the top key is the sense word in every sentence);
      2. "marker"   if it is a marker head (the top key is a marker in every sentence);
      3. "previous" if the top key is the unit at focus + PREVIOUS_OFFSET in every sentence;
      4. "next"     if the top key is the unit at focus + NEXT_OFFSET in every sentence;
      5. "other"    otherwise (the focus word looks at another word, or not at the same kind in every sentence).
    So the sense and marker counts equal HeadReport's sense_head and marker_head counts
    (unless a config names a punctuation mark as the sense word).
    """
    assert report.top_key.shape[0] == len(sentences), (report.top_key.shape, len(sentences))
    focus = np.array([s.focus for s in sentences])[:, None, None]  # (S, 1, 1)
    looks_back = (report.top_key == focus + PREVIOUS_OFFSET).all(axis=0)  # (layers, heads)
    looks_ahead = (report.top_key == focus + NEXT_OFFSET).all(axis=0)
    rules = [report.sense_head, report.marker_head, looks_back, looks_ahead]
    return np.select(rules, list(CATEGORIES[:4]), default=OTHER)  # np.select takes the first rule that holds


def key_rules(sentence: FocusedSentence) -> np.ndarray:
    """(4, n) bool: which of the rules sense, marker, previous, next (CATEGORIES[:4]) each key unit meets.

    The same rules as focus_categories, applied to every key instead of the top one: the sense word,
    a marker (WordAttention.markers), the unit at focus + PREVIOUS_OFFSET, the unit at focus + NEXT_OFFSET.
    """
    keys = np.arange(len(sentence.attention.words))  # (n,)
    return np.stack([
        keys == sentence.sense,
        sentence.attention.markers,
        keys == sentence.focus + PREVIOUS_OFFSET,
        keys == sentence.focus + NEXT_OFFSET,
    ])  # (4, n)


def key_relations(sentence: FocusedSentence) -> np.ndarray:
    """(n,) category names: what each key unit is to the focus word, the first rule that holds, else "other".

    The same precedence as focus_categories. It depends on the sentence only, not on the head: a head
    is in category c when its top key meets c's rule in every sentence (and no earlier rule does so).
    """
    return np.select(list(key_rules(sentence)), list(CATEGORIES[:4]), default=OTHER)


def category_counts(categories: np.ndarray) -> dict[str, int]:
    """How many heads fall in each category, in CATEGORIES order (zeros included)."""
    return {name: int((categories == name).sum()) for name in CATEGORIES}
