"""Per-head scores and labels: where the focus word looks, and which heads look back, ahead or at markers."""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass

import numpy as np

from analysis.errors import InputError
from analysis.sentences import SentenceSet
from analysis.words import WordAttention

# "Previous" and "next" are defined here, once: the key sits at query index + offset.
PREVIOUS_OFFSET = -1
NEXT_OFFSET = +1


class SentenceError(InputError):
    """A sentence does not fit the config (a missing or repeated word); the message names it."""


def offset_weights(weights: np.ndarray, offset: int) -> np.ndarray:
    """(..., n, n) -> (..., n - |offset|): W[i, i + offset] for every query i that has such a key.

    PREVIOUS_OFFSET gives W[i, i-1] for i >= 1; NEXT_OFFSET gives W[i, i+1] for i <= n-2.
    """
    return np.diagonal(weights, offset=offset, axis1=-2, axis2=-1)


def row_entropy(weights: np.ndarray) -> np.ndarray:
    """(..., n, n) -> (..., n): the entropy of each row in nats, with 0 log 0 = 0."""
    w = weights.astype(np.float64)
    logs = np.log(np.where(w > 0, w, 1.0))
    return -(w * logs).sum(axis=-1)


def marker_mass(weights: np.ndarray, markers: np.ndarray) -> np.ndarray:
    """(..., n, n) and (n,) bool -> (..., n): each row's weight summed over the marker columns."""
    return weights[..., markers].sum(axis=-1)


def _normal(word: str) -> str:
    return unicodedata.normalize("NFC", word).casefold()


def locate(attention: WordAttention, word: str, occurrence: int | None, role: str, number: int) -> int:
    """The unit index of `word` in a sentence (case-insensitive); SentenceError if missing or ambiguous."""
    matches = np.flatnonzero([_normal(w) == _normal(word) for w in attention.words])
    where = f"sentence {number} ({attention.text!r})"
    if len(matches) == 0:
        raise SentenceError(f"the {role} word {word!r} is not in {where}")
    if occurrence is None:
        if len(matches) > 1:
            raise SentenceError(
                f"the {role} word {word!r} occurs {len(matches)} times in {where}; "
                f"say which one with {role}_occurrence = 1..{len(matches)} in the config"
            )
        occurrence = 1
    if occurrence > len(matches):
        raise SentenceError(
            f"{role}_occurrence = {occurrence} but {word!r} occurs {len(matches)} time(s) in {where}"
        )
    return int(matches[occurrence - 1])


@dataclass(frozen=True)
class FocusedSentence:
    """A sentence at word level with its focus and sense word located."""

    attention: WordAttention
    focus: int  # unit index of the focus word
    sense: int  # unit index of the word that decides its sense


@dataclass(frozen=True)
class HeadReport:
    """Every head's scores over S sentences. Indices are 0-based; tables add 1."""

    top_key: np.ndarray  # (S, layers, heads) int, unit index of the focus row's largest weight
    top_weight: np.ndarray  # (S, layers, heads) that largest weight
    sense_weight: np.ndarray  # (S, layers, heads) the focus row's weight on the sense word
    marker_weight: np.ndarray  # (S, layers, heads) the focus row's weight summed over markers
    top_is_marker: np.ndarray  # (S, layers, heads) bool
    sense_head: np.ndarray  # (layers, heads) bool: top key is the sense word in every sentence
    marker_head: np.ndarray  # (layers, heads) bool: top key is a marker in every sentence
    prev: np.ndarray  # (layers, heads) mean W[i, i-1], averaged over sentences
    next: np.ndarray  # (layers, heads) mean W[i, i+1], averaged over sentences
    markers: np.ndarray  # (layers, heads) mean weight on the markers, averaged over sentences
    entropy: np.ndarray  # (layers, heads) mean row entropy in nats, averaged over sentences

    @property
    def shape(self) -> tuple[int, int]:
        return self.sense_head.shape

    @property
    def best_sense_head(self) -> tuple[int, int] | None:
        """The sense head with the largest summed sense weight; ties go to the lowest (layer, head)."""
        if not self.sense_head.any():
            return None
        total = np.where(self.sense_head, self.sense_weight.sum(axis=0), -np.inf)
        return _first_argmax(total)

    @property
    def prev_head(self) -> tuple[int, int]:
        return _first_argmax(self.prev)

    @property
    def next_head(self) -> tuple[int, int]:
        return _first_argmax(self.next)

    @property
    def marker_score_head(self) -> tuple[int, int]:
        return _first_argmax(self.markers)

    @property
    def marker_head_count_per_sentence(self) -> list[int]:
        return [int(count) for count in self.top_is_marker.sum(axis=(1, 2))]


def _first_argmax(scores: np.ndarray) -> tuple[int, int]:
    """(layers, heads) -> the (layer, head) of the largest score; np.argmax keeps the first, the lowest."""
    layer, head = np.unravel_index(int(np.argmax(scores)), scores.shape)
    return int(layer), int(head)


def classify(sentences: list[FocusedSentence]) -> HeadReport:
    """Score and label every head over the sentences."""
    assert sentences, "at least one sentence"
    shapes = {(s.attention.layers, s.attention.heads) for s in sentences}
    assert len(shapes) == 1, shapes
    top_key, top_weight, sense_weight, marker_weight, top_is_marker = [], [], [], [], []
    prev, next_, markers, entropy = [], [], [], []
    for sentence in sentences:
        weights = sentence.attention.weights  # (layers, heads, n, n)
        is_marker = sentence.attention.markers  # (n,)
        focus_row = weights[:, :, sentence.focus, :]  # (layers, heads, n)
        top = focus_row.argmax(axis=-1)  # (layers, heads)
        top_key.append(top)
        top_weight.append(focus_row.max(axis=-1))
        sense_weight.append(focus_row[:, :, sentence.sense])
        marker_weight.append(marker_mass(focus_row, is_marker))
        top_is_marker.append(is_marker[top])
        prev.append(offset_weights(weights, PREVIOUS_OFFSET).mean(axis=-1))
        next_.append(offset_weights(weights, NEXT_OFFSET).mean(axis=-1))
        markers.append(marker_mass(weights, is_marker).mean(axis=-1))
        entropy.append(row_entropy(weights).mean(axis=-1))
    top_key = np.stack(top_key)
    senses = np.array([s.sense for s in sentences])[:, None, None]
    top_is_marker = np.stack(top_is_marker)
    return HeadReport(
        top_key=top_key,
        top_weight=np.stack(top_weight),
        sense_weight=np.stack(sense_weight),
        marker_weight=np.stack(marker_weight),
        top_is_marker=top_is_marker,
        sense_head=(top_key == senses).all(axis=0),
        marker_head=top_is_marker.all(axis=0),
        prev=np.mean(prev, axis=0),
        next=np.mean(next_, axis=0),
        markers=np.mean(markers, axis=0),
        entropy=np.mean(entropy, axis=0),
    )


def focus_sentences(attentions: list[WordAttention], sentence_set: SentenceSet) -> list[FocusedSentence]:
    """Locate the focus and sense word of each configured sentence; SentenceError names the sentence."""
    return [
        FocusedSentence(
            attention=attention,
            focus=locate(attention, sentence_set.focus, sentence.focus_occurrence, "focus", number),
            sense=locate(attention, sentence.sense, sentence.sense_occurrence, "sense", number),
        )
        for number, (attention, sentence) in enumerate(zip(attentions, sentence_set.sentences), start=1)
    ]
