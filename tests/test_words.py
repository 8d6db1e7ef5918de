"""The word merge: units, labels and the sum-over-keys / mean-over-queries rule, on hand-made arrays."""
import numpy as np
import pytest

from analysis.extract import TokenAttention
from analysis.words import PUNCT, SPECIAL, WORD, assignment_matrix, is_punctuation, merge, merge_weights, unit_ids


def test_unit_ids_group_pieces_and_keep_specials_alone():
    word_ids = np.array([-1, 0, 1, 1, 2, -1, -1])
    assert unit_ids(word_ids).tolist() == [0, 1, 2, 2, 3, 4, 5]


def test_assignment_matrix_marks_the_pieces_of_each_unit():
    a = assignment_matrix(np.array([0, 1, 1, 2]))
    assert a.tolist() == [[1, 0, 0, 0], [0, 1, 1, 0], [0, 0, 0, 1]]


def test_keys_are_summed_and_queries_averaged():
    # pieces: [CLS] a ##b [SEP]; units: [CLS] ab [SEP]
    weights = np.array(
        [
            [0.1, 0.2, 0.3, 0.4],
            [0.5, 0.1, 0.1, 0.3],
            [0.0, 0.6, 0.2, 0.2],
            [0.25, 0.25, 0.25, 0.25],
        ]
    )[None, None]  # (1, 1, 4, 4)
    merged = merge_weights(weights, assignment_matrix(np.array([0, 1, 1, 2])))
    expected = np.array(
        [
            [0.1, 0.5, 0.4],  # key pieces of "ab" summed: 0.2 + 0.3
            [0.25, 0.5, 0.25],  # query row of "ab": mean of its two piece rows, keys summed
            [0.25, 0.5, 0.25],
        ]
    )
    np.testing.assert_allclose(merged[0, 0], expected, atol=1e-7)
    np.testing.assert_allclose(merged.sum(axis=-1), 1.0, atol=1e-6)


def test_merge_is_the_same_as_the_cell_by_cell_definition():
    rng = np.random.default_rng(0)
    units = np.array([0, 1, 1, 1, 2, 3, 3, 4])
    raw = rng.random((2, 3, 8, 8))
    weights = raw / raw.sum(axis=-1, keepdims=True)
    merged = merge_weights(weights, assignment_matrix(units))
    n = units.max() + 1
    for q in range(n):
        for k in range(n):
            expected = weights[..., units == q, :][..., units == k].sum(axis=-1).mean(axis=-1)
            np.testing.assert_allclose(merged[..., q, k], expected, atol=1e-6)


@pytest.mark.parametrize("word, expected", [(".", True), ("¿", True), ("...", True), ("«»", True),
                                            ("a.", False), ("", False), ("$", False), ("jardín", False)])
def test_punctuation_words(word, expected):
    assert is_punctuation(word) is expected


def test_merge_labels_units_by_the_text_as_written():
    text = "Me senté."
    tokens = TokenAttention(
        text=text,
        tokens=("[CLS]", "me", "sent", "##e", ".", "[SEP]"),  # an uncased tokenizer drops case and accents
        word_ids=np.array([-1, 0, 1, 1, 2, -1]),
        offsets=np.array([[0, 0], [0, 2], [3, 7], [7, 8], [8, 9], [0, 0]]),
        weights=np.full((1, 2, 6, 6), 1 / 6, dtype=np.float32),
    )
    words = merge(tokens)
    assert words.words == ("[CLS]", "Me", "senté", ".", "[SEP]")
    assert words.kinds == (SPECIAL, WORD, WORD, PUNCT, SPECIAL)
    assert words.markers.tolist() == [True, False, False, True, True]
    np.testing.assert_allclose(words.weights[0, 0, 2], [1 / 6, 1 / 6, 2 / 6, 1 / 6, 1 / 6], atol=1e-6)


def test_tiny_model_keeps_accents_in_labels(tiny_loaded):
    from analysis.extract import extract

    (tokens,) = extract(tiny_loaded, ["Me senté en el banco de mi jardín."])
    assert "jard" in tokens.tokens and "##ín" in tokens.tokens
    words = merge(tokens)
    assert words.words == ("[CLS]", "Me", "senté", "en", "el", "banco", "de", "mi", "jardín", ".", "[SEP]")
    assert words.weights.shape == (3, 4, 11, 11)
    np.testing.assert_allclose(words.weights.sum(axis=-1), 1.0, atol=1e-5)
