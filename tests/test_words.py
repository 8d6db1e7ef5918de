"""The encoding (pieces -> units, kinds, labels) and the merge (sum over keys, mean over queries), on hand-made
arrays, a cased tokenizer built here, and the tiny model."""
import numpy as np
import pytest
import torch

from real_attention.engine.extract import encode
from real_attention.engine.words import FIRST_SPECIAL, LAST_SPECIAL, PUNCT, SPECIAL, WORD, Kind, WordAttention, group, is_punctuation, merge_maps, unit_ids


def merged(weights: np.ndarray, units: np.ndarray) -> np.ndarray:
    """merge_maps on one sentence: (L, H, t, t) float64 and (t,) units -> (L, H, n, n)."""
    n = int(units.max()) + 1
    return merge_maps(torch.from_numpy(weights), torch.from_numpy(units)[None].expand(len(weights), -1), n).numpy()


def test_unit_ids_group_pieces_and_keep_specials_alone():
    word_ids = np.array([-1, 0, 1, 1, 2, -1, -1])
    assert unit_ids(word_ids).tolist() == [0, 1, 2, 2, 3, 4, 5]


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
    words = merged(weights, np.array([0, 1, 1, 2]))
    expected = np.array(
        [
            [0.1, 0.5, 0.4],  # key pieces of "ab" summed: 0.2 + 0.3
            [0.25, 0.5, 0.25],  # query row of "ab": mean of its two piece rows, keys summed
            [0.25, 0.5, 0.25],
        ]
    )
    np.testing.assert_allclose(words[0, 0], expected, atol=1e-12)
    np.testing.assert_allclose(words.sum(axis=-1), 1.0, atol=1e-12)


def test_merge_is_the_same_as_the_cell_by_cell_definition():
    rng = np.random.default_rng(0)
    units = np.array([0, 1, 1, 1, 2, 3, 3, 4])
    raw = rng.random((2, 3, 8, 8))
    weights = raw / raw.sum(axis=-1, keepdims=True)
    words = merged(weights, units)
    n = units.max() + 1
    for q in range(n):
        for k in range(n):
            expected = weights[..., units == q, :][..., units == k].sum(axis=-1).mean(axis=-1)
            np.testing.assert_allclose(words[..., q, k], expected, atol=1e-12)


def test_pad_pieces_get_no_unit_and_pad_units_stay_zero():
    rng = np.random.default_rng(1)
    weights = rng.random((1, 2, 5, 5)) * 9  # garbage in the pad piece (the last one)
    weights[..., :4, :4] = rng.dirichlet(np.ones(4), size=(1, 2, 4))
    weights[..., :4, 4] = 0  # real queries give pads no weight (the attention mask)
    units = torch.tensor([[0, 1, 1, 2, -1]])
    words = merge_maps(torch.from_numpy(weights), units, 4).numpy()  # one pad unit too
    np.testing.assert_array_equal(words[..., 3, :], 0)
    np.testing.assert_array_equal(words[..., :, 3], 0)
    np.testing.assert_allclose(words[..., :3, :3].sum(axis=-1), 1.0, atol=1e-12)


@pytest.mark.parametrize("word, expected", [(".", True), ("¿", True), ("...", True), ("«»", True),
                                            ("a.", False), ("", False), ("$", False), ("jardín", False)])
def test_punctuation_words(word, expected):
    assert is_punctuation(word) is expected


def test_group_labels_units_by_the_text_as_written():
    text = "Me senté."
    tokens = ["[CLS]", "me", "sent", "##e", ".", "[SEP]", "<extra>"]  # an uncased tokenizer drops case and accents
    word_ids = np.array([-1, 0, 1, 1, 2, -1, 3])
    special = np.array([1, 0, 0, 0, 0, 1, 1], dtype=bool)  # the tokenizer's special_tokens_mask wins
    offsets = np.array([[0, 0], [0, 2], [3, 7], [7, 8], [8, 9], [0, 0], [0, 0]])
    units, kinds, words, joined = group(text, tokens, word_ids, special, offsets)
    assert joined == ()
    assert units.tolist() == [0, 1, 2, 2, 3, 4, 5]
    assert words == ("[CLS]", "Me", "senté", ".", "[SEP]", "<extra>")
    assert kinds.tolist() == [FIRST_SPECIAL, WORD, WORD, PUNCT, SPECIAL, LAST_SPECIAL]  # by position, not name
    weights = np.full((1, 1, 6, 6), 1 / 6, dtype=np.float32)
    attention = WordAttention(text, words, kinds, weights)
    assert attention.kinds[0] is Kind.FIRST_SPECIAL  # codes become Kinds
    assert attention.markers.tolist() == [True, False, False, True, True, True]
    assert [kind.group for kind in attention.kinds] == ["special", "word", "word", "punct", "special", "special"]


def test_a_cased_tokenizer_keeps_case_accents_and_multi_piece_words():
    from transformers import BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "Él", "vio", "el", "Árbol", "Mü", "##nch", "##en", ".", ","]
    tokenizer = BertTokenizerFast(vocab={piece: i for i, piece in enumerate(vocab)}, do_lower_case=False,
                                  strip_accents=False)
    text = "Él vio el Árbol, München."
    (sentence,), too_long = encode(tokenizer, [text], max_tokens=32)
    assert too_long == []
    assert [tokenizer.convert_ids_to_tokens(int(i)) for i in sentence.ids] == [
        "[CLS]", "Él", "vio", "el", "Árbol", ",", "Mü", "##nch", "##en", ".", "[SEP]"]
    assert sentence.units.tolist() == [0, 1, 2, 3, 4, 5, 6, 6, 6, 7, 8]
    assert sentence.words == ("[CLS]", "Él", "vio", "el", "Árbol", ",", "München", ".", "[SEP]")
    assert sentence.kinds.tolist() == [FIRST_SPECIAL, WORD, WORD, WORD, WORD, PUNCT, WORD, PUNCT, LAST_SPECIAL]
    t, n = len(sentence.ids), len(sentence.words)
    pieces = np.random.default_rng(2).dirichlet(np.ones(t), size=(2, 3, t))  # (L, H, t, t)
    words = merged(pieces, sentence.units)
    assert words.shape == (2, 3, n, n)
    np.testing.assert_allclose(words.sum(axis=-1), 1.0, atol=1e-12)
    # München's row is the mean of its three piece rows; its column sums its three piece columns
    np.testing.assert_allclose(words[..., 6, 0], pieces[..., 6:9, 0].mean(axis=-1), atol=1e-12)
    np.testing.assert_allclose(words[..., 0, 6], pieces[..., 0, 6:9].sum(axis=-1), atol=1e-12)


def test_tiny_model_keeps_accents_in_labels(tiny_loaded):
    from real_attention.engine.pipeline import attend_with_sums

    (words,) = attend_with_sums(tiny_loaded, ["Me senté en el banco de mi jardín."])[0]
    assert words.words == ("[CLS]", "Me", "senté", "en", "el", "banco", "de", "mi", "jardín", ".", "[SEP]")
    assert words.weights.shape == (3, 4, 11, 11) and words.weights.dtype == np.float32
    np.testing.assert_allclose(words.weights.sum(axis=-1), 1.0, atol=1e-5)


def test_attend_batches_sentences_of_any_length_alike(tiny_loaded):
    from real_attention.engine.pipeline import attend_with_sums

    texts = ["fui al banco .", "Me senté en el banco de mi jardín."]
    together = attend_with_sums(tiny_loaded, texts)[0]
    apart = [attend_with_sums(tiny_loaded, [text])[0][0] for text in texts]
    for a, b in zip(together, apart):
        assert a.words == b.words and a.kinds == b.kinds
        np.testing.assert_allclose(a.weights, b.weights, atol=1e-5)
