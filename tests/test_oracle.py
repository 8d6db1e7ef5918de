"""An independent oracle for the corpus kernel: Clark et al.'s word-word merge and every statistic, written
here with Python loops over words and plain numpy, one sentence per forward pass with output_attentions, and
nothing from real_attention's merge, units or statistics (real_attention.engine.heads.sentence_totals). It and
`ra.corpus_stats` (the batched kernel of `heads --corpus`) must agree to 1e-6 on the seed corpus with MiniLM.
"""
import unicodedata
from pathlib import Path

import numpy as np
import pytest

import real_attention as ra

SEEDS = Path(__file__).resolve().parent.parent / "benchmarks" / "corpus_seeds.txt"
NAMES = ("prev", "next", "self", "first", "first_special", "last_special", "punct", "markers", "entropy")


def clark_merge(attention: np.ndarray, words_to_tokens: list[list[int]]) -> np.ndarray:
    """Clark et al.'s bpe_utils.get_word_word_attention, mode "mean" (the paper's rule), on (..., t, t) maps:
    a word's key pieces are summed, its query pieces averaged."""
    merged = np.array(attention, dtype=np.float64)
    not_word_starts = [index for word in words_to_tokens for index in word[1:]]
    for word in words_to_tokens:
        merged[..., :, word[0]] = merged[..., :, word].sum(axis=-1)
    merged = np.delete(merged, not_word_starts, -1)
    for word in words_to_tokens:
        merged[..., word[0], :] = merged[..., word, :].mean(axis=-2)
    return np.delete(merged, not_word_starts, -2)


def is_punctuation(word: str) -> bool:
    return bool(word) and all(unicodedata.category(char)[0] == "P" for char in word)


def oracle(loaded, texts: list[str]) -> dict[str, np.ndarray]:
    """Pooled per-head means of every statistic over the tokenizer's words of `texts`."""
    import torch

    tokenizer, model = loaded.tokenizer, loaded.model
    totals = {name: np.zeros((loaded.layers, loaded.heads)) for name in NAMES}
    units = pairs = 0
    for text in texts:
        # split_special_tokens: a typed "[SEP]" is text, as the tool reads it (one seed line names [CLS] and [SEP])
        encoded = tokenizer(text, return_offsets_mapping=True, return_special_tokens_mask=True, return_tensors="pt",
                            split_special_tokens=True)
        with torch.no_grad():
            maps = model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"],
                         output_attentions=True).attentions
        attention = np.stack([layer[0].double().numpy() for layer in maps])  # (layers, heads, t, t)
        word_ids = encoded.word_ids(0)
        special = encoded["special_tokens_mask"][0].tolist()
        offsets = encoded["offset_mapping"][0].tolist()
        words_to_tokens: list[list[int]] = []
        for index, word in enumerate(word_ids):  # a special token alone; a word with all its pieces
            if special[index] or not words_to_tokens or special[index - 1] or word != word_ids[index - 1]:
                words_to_tokens.append([index])
            else:
                words_to_tokens[-1].append(index)
        n = len(words_to_tokens)
        is_special = [bool(special[w[0]]) for w in words_to_tokens]
        punct = [not is_special[i] and is_punctuation(text[offsets[w[0]][0]:offsets[w[-1]][1]].strip())
                 for i, w in enumerate(words_to_tokens)]
        first_special = [0] if is_special[0] else []
        last_special = [n - 1] if is_special[n - 1] else []
        markers = [i for i in range(n) if is_special[i] or punct[i]]
        words = clark_merge(attention, words_to_tokens)  # (layers, heads, n, n)
        received = words.sum(axis=2)  # (layers, heads, n): each key word's weight summed over the query words
        punct_keys = [k for k in range(n) if punct[k]]
        totals["prev"] += np.diagonal(words, -1, axis1=2, axis2=3).sum(axis=-1)  # W[i, i - 1]
        totals["next"] += np.diagonal(words, 1, axis1=2, axis2=3).sum(axis=-1)  # W[i, i + 1]
        totals["self"] += np.diagonal(words, 0, axis1=2, axis2=3).sum(axis=-1)
        totals["first"] += received[..., 0]
        totals["first_special"] += received[..., first_special].sum(axis=-1)
        totals["last_special"] += received[..., last_special].sum(axis=-1)
        totals["punct"] += received[..., punct_keys].sum(axis=-1)
        totals["markers"] += received[..., markers].sum(axis=-1)
        totals["entropy"] -= (words * np.log(np.where(words > 0, words, 1.0))).sum(axis=(2, 3))
        units, pairs = units + n, pairs + n - 1
    return {name: total / (pairs if name in ("prev", "next") else units) for name, total in totals.items()}


def test_the_merge_oracle_is_clarks_rule_on_a_hand_example():
    # 3 pieces: [CLS], "ban", "##co"; the word "banco" is pieces 1 and 2
    pieces = np.array([[0.5, 0.25, 0.25], [0.1, 0.6, 0.3], [0.2, 0.2, 0.6]])
    merged = clark_merge(pieces, [[0], [1, 2]])
    np.testing.assert_allclose(merged, [[0.5, 0.5], [0.15, 0.85]])


@pytest.mark.slow
def test_the_kernel_agrees_with_an_independent_oracle_on_the_seed_corpus(minilm):
    model = minilm
    lines = [line for line in SEEDS.read_text(encoding="utf-8").splitlines() if line.strip()]
    expected = oracle(model, lines)
    table = ra.corpus_stats(model, lines, units="tokenizer").sort_values(["layer", "head"])
    assert set(table["n_sentences"]) == {len(lines)}
    for name in NAMES:
        got = table[name].to_numpy().reshape(model.layers, model.heads)
        np.testing.assert_allclose(got, expected[name], rtol=0, atol=1e-6, err_msg=name)
    # the oracle is not trivially equal to everything: the statistics differ from each other
    assert not np.allclose(expected["prev"], expected["next"], atol=1e-3)
