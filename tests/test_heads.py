"""Head scores and labels on hand-made word-level maps."""
import numpy as np
import pytest

from analysis.heads import (
    NEXT_OFFSET, PREVIOUS_OFFSET, FocusedSentence, SentenceError, classify, locate, offset_weights, row_entropy,
)
from analysis.words import PUNCT, SPECIAL, WORD, WordAttention

WORDS = ("[CLS]", "Me", "senté", "en", "el", "banco", ".", "[SEP]")
KINDS = (SPECIAL, WORD, WORD, WORD, WORD, WORD, PUNCT, SPECIAL)
N = len(WORDS)


def previous_head(n: int) -> np.ndarray:
    w = np.eye(n, k=-1)
    w[0, 0] = 1.0  # [CLS] has no previous word; it looks at itself
    return w


def next_head(n: int) -> np.ndarray:
    w = np.eye(n, k=1)
    w[-1, -1] = 1.0
    return w


def one_hot_rows(n: int, column: int) -> np.ndarray:
    w = np.zeros((n, n))
    w[:, column] = 1.0
    return w


def sentence(heads: list[np.ndarray], focus: int = 5, sense: int = 2) -> FocusedSentence:
    weights = np.stack(heads)[None].astype(np.float32)  # (1, heads, n, n)
    return FocusedSentence(WordAttention("Me senté en el banco.", WORDS, KINDS, weights), focus=focus, sense=sense)


def test_previous_and_next_are_defined_once():
    assert PREVIOUS_OFFSET == -1 and NEXT_OFFSET == +1
    w = np.arange(16.0).reshape(4, 4)
    assert offset_weights(w, PREVIOUS_OFFSET).tolist() == [w[1, 0], w[2, 1], w[3, 2]]
    assert offset_weights(w, NEXT_OFFSET).tolist() == [w[0, 1], w[1, 2], w[2, 3]]


def test_entropy_of_uniform_and_one_hot_rows():
    uniform = np.full((5, 5), 0.2)
    np.testing.assert_allclose(row_entropy(uniform), np.log(5))
    np.testing.assert_allclose(row_entropy(np.eye(5)), 0.0)


def test_pure_heads_get_their_scores_and_labels():
    uniform = np.full((N, N), 1 / N)
    report = classify([sentence([previous_head(N), next_head(N), one_hot_rows(N, 0), one_hot_rows(N, 2), uniform])])
    # A one-hot column c is "previous" only for query c+1 and "next" only for query c-1.
    assert report.prev[0].tolist() == pytest.approx([1, 0, 1 / 7, 1 / 7, 1 / N])
    assert report.next[0].tolist() == pytest.approx([0, 1, 0, 1 / 7, 1 / N])
    # previous: rows 0, 1 and 7 land on [CLS], [CLS] and "."; next: rows 5, 6, 7 on ".", [SEP], [SEP]
    assert report.markers[0].tolist() == pytest.approx([3 / 8, 3 / 8, 1, 0, 3 / N])
    assert report.entropy[0].tolist() == pytest.approx([0, 0, 0, 0, np.log(N)])
    assert report.prev_head == (0, 0) and report.next_head == (0, 1) and report.marker_score_head == (0, 2)
    # The focus "banco" (5) looks at "el" (4), "." (6), [CLS], "senté" (the sense word), uniformly.
    assert report.top_key[0, 0].tolist() == [4, 6, 0, 2, 0]
    assert report.sense_head[0].tolist() == [False, False, False, True, False]
    assert report.marker_head[0].tolist() == [False, True, True, False, True]
    assert report.best_sense_head == (0, 3)
    assert report.sense_weight[0, 0, 3] == pytest.approx(1.0)
    assert report.marker_weight[0, 0].tolist() == pytest.approx([0, 1, 1, 0, 3 / N])


def test_labels_need_every_sentence_and_best_ties_go_to_the_lowest_head():
    sense_everywhere = one_hot_rows(N, 2)
    first = sentence([sense_everywhere, sense_everywhere, one_hot_rows(N, 7)])
    second = sentence([sense_everywhere, sense_everywhere, one_hot_rows(N, 3)])
    report = classify([first, second])
    assert report.sense_head[0].tolist() == [True, True, False]
    assert report.best_sense_head == (0, 0)  # heads 0 and 1 tie; the lowest wins
    assert report.marker_head[0].tolist() == [False, False, False]  # head 2 is a marker head in one sentence only
    assert report.marker_head_count_per_sentence == [1, 0]


def test_no_sense_head_gives_none():
    report = classify([sentence([one_hot_rows(N, 0)])])
    assert report.best_sense_head is None


def test_locate_words_case_insensitively_and_explains_misses():
    attention = sentence([one_hot_rows(N, 0)]).attention
    assert locate(attention, "BANCO", None, "focus", 1) == 5
    with pytest.raises(SentenceError, match="the sense word 'dinero' is not in sentence 2"):
        locate(attention, "dinero", None, "sense", 2)


def test_repeated_focus_word_needs_an_occurrence():
    words = ("[CLS]", "banco", "y", "banco", "[SEP]")
    attention = WordAttention("banco y banco", words, (SPECIAL, WORD, WORD, WORD, SPECIAL),
                              np.full((1, 1, 5, 5), 0.2, dtype=np.float32))
    with pytest.raises(SentenceError, match="occurs 2 times in sentence 1.*focus_occurrence = 1..2"):
        locate(attention, "banco", None, "focus", 1)
    assert locate(attention, "banco", 2, "focus", 1) == 3
    with pytest.raises(SentenceError, match="focus_occurrence = 3"):
        locate(attention, "banco", 3, "focus", 1)
