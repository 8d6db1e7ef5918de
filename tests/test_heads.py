"""Head statistics and labels on hand-made word-level maps: each statistic's definition, pooling, pads."""
import numpy as np
import pytest

from real_attention.engine.focus import FocusedSentence, SentenceError, locate
from real_attention.engine.heads import STATISTICS, classify, word_sums
from real_attention.engine.words import FIRST_SPECIAL, LAST_SPECIAL, PUNCT, SPECIAL, WORD, WordAttention

WORDS = ("[CLS]", "Me", "senté", "en", "el", "banco", ".", "[SEP]")
KINDS = (FIRST_SPECIAL, WORD, WORD, WORD, WORD, WORD, PUNCT, LAST_SPECIAL)
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


def words_of(*heads: np.ndarray, kinds=None) -> WordAttention:
    """One sentence with the given (n, n) heads in one layer."""
    n = heads[0].shape[-1]
    kinds = kinds or (FIRST_SPECIAL, *[WORD] * (n - 2), LAST_SPECIAL)
    return WordAttention("x", tuple(f"w{i}" for i in range(n)), kinds, np.stack(heads)[None].astype(np.float32))


def means_of(*attentions: WordAttention) -> dict[str, np.ndarray]:
    return {name: value[0] for name, value in word_sums(list(attentions)).means().items()}  # layer 0: (heads,)


def test_previous_and_next_are_the_unit_one_before_and_one_after():
    n = 5
    means = means_of(words_of(np.eye(n, k=-1), np.eye(n, k=1), np.tril(np.ones((n, n)), k=-1) / np.maximum(
        np.arange(n), 1)[:, None]))
    # eye(k=-1) puts every row i >= 1 on i - 1: pooled over units i >= 1, prev is exactly 1 (row 0 is all zero).
    assert means["prev"].tolist()[:2] == [1.0, 0.0]
    assert means["next"].tolist()[:2] == [0.0, 1.0]
    assert means["self"].tolist()[:2] == [0.0, 0.0]
    # a head spread evenly over every earlier unit: W[i, i-1] = 1/i, so prev = (1 + 1/2 + 1/3 + 1/4) / 4
    assert means["prev"][2] == pytest.approx((1 + 1 / 2 + 1 / 3 + 1 / 4) / 4)


def test_entropy_of_uniform_and_one_hot_rows():
    means = means_of(words_of(np.full((5, 5), 0.2), np.eye(5)))
    np.testing.assert_allclose(means["entropy"], [np.log(5), 0.0], atol=1e-6)
    assert means["self"].tolist() == [pytest.approx(0.2), 1.0]


def test_markers_are_every_special_token_and_punctuation_words():
    # units: [CLS] word <extra> . word [SEP]: <extra> is a special token that is neither [CLS] nor [SEP]
    kinds = (FIRST_SPECIAL, WORD, SPECIAL, PUNCT, WORD, LAST_SPECIAL)
    columns = [np.zeros((6, 6)) for _ in range(6)]
    for column, head in enumerate(columns):
        head[:, column] = 1.0  # every row on one key
    means = means_of(words_of(*columns, kinds=kinds))
    assert means["first_special"].tolist() == [1, 0, 0, 0, 0, 0]
    assert means["last_special"].tolist() == [0, 0, 0, 0, 0, 1]
    assert means["punct"].tolist() == [0, 0, 0, 1, 0, 0]
    assert means["markers"].tolist() == [1, 0, 1, 1, 0, 1]


def test_statistics_are_pooled_over_units_and_pads_add_exactly_nothing():
    rng = np.random.default_rng(4)
    long = words_of(*rng.dirichlet(np.ones(7), size=(2, 7)))
    short = words_of(*rng.dirichlet(np.ones(3), size=(2, 3)))
    together = word_sums([long, short])  # short is padded to 7 units
    apart = word_sums([long]) + word_sums([short])
    np.testing.assert_array_equal(together.totals, apart.totals)
    assert (together.units, together.pairs) == (10, 8)
    # pooled: the prev of both sentences is one sum over their 6 + 2 query units, not a mean of two means
    previous = [np.diagonal(a.weights[0], -1, axis1=-2, axis2=-1) for a in (long, short)]  # (heads, n - 1) each
    np.testing.assert_allclose(together.means()["prev"][0], np.concatenate(previous, axis=-1).mean(axis=-1), atol=1e-6)
    assert set(together.means()) == set(STATISTICS)


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
    attention = WordAttention("banco y banco", words, (FIRST_SPECIAL, WORD, WORD, WORD, LAST_SPECIAL),
                              np.full((1, 1, 5, 5), 0.2, dtype=np.float32))
    with pytest.raises(SentenceError, match="occurs 2 times in sentence 1.*focus_occurrence = 1..2"):
        locate(attention, "banco", None, "focus", 1)
    assert locate(attention, "banco", 2, "focus", 1) == 3
    with pytest.raises(SentenceError, match="focus_occurrence = 3"):
        locate(attention, "banco", 3, "focus", 1)


def test_find_word_names_a_sentence_on_its_own():
    from real_attention.engine.focus import find_word

    attention = sentence([one_hot_rows(N, 0)]).attention
    assert find_word(attention, "Banco", "focus") == 5
    with pytest.raises(SentenceError, match=r"the sense word 'dinero' is not in 'Me senté en el banco\.'"):
        find_word(attention, "dinero", "sense")


def test_classify_words_needs_no_model():
    from real_attention.engine.pipeline import classify_words
    from real_attention.engine.sentences import Sentence, SentenceSet

    attention = sentence([previous_head(N), one_hot_rows(N, 2)]).attention
    sentence_set = SentenceSet(lang="es", focus="banco", sentences=(Sentence(attention.text, "senté"),))
    result = classify_words([attention], sentence_set)
    assert result.sentences[0].focus == 5 and result.sentences[0].sense == 2
    assert result.report.sense_head[0].tolist() == [False, True]
    assert result.report.prev[0, 0] == pytest.approx(1.0)
