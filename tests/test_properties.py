"""Property-based tests (Hypothesis) of the maths every table stands on: the merge, the text rule's units, the
shard sums, the rollout and the norm measure. Each property runs a modest number of examples."""
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from real_attention.engine.heads import word_sums
from real_attention.engine.measures import norm_maps
from real_attention.engine.rollout import rollout, word_rollout
from real_attention.engine.units import required_spans, text_spans
from real_attention.engine.words import WORD, WordAttention, merge_maps

FEW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def piece_maps(draw, causal: bool = False):
    """(B, H, t, t) float64 row-stochastic maps (lower-triangular if causal), the (B, t) unit of each piece
    (contiguous, from 0, -1 for pads after each sentence) and n, the most units of a sentence."""
    batch = draw(st.integers(1, 3))
    heads = draw(st.integers(1, 3))
    t = draw(st.integers(1, 7))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    lengths = [draw(st.integers(1, t)) for _ in range(batch)]
    lengths[0] = t
    weights = np.zeros((batch, heads, t, t))
    units = np.full((batch, t), -1, dtype=np.int64)
    for row, length in enumerate(lengths):
        raw = rng.exponential(size=(heads, length, length)) * (rng.random((heads, length, length)) < 0.8)
        raw[:, np.arange(length), np.arange(length)] += 1e-3  # every row has some weight
        if causal:
            raw = np.tril(raw)
        weights[row, :, :length, :length] = raw / raw.sum(axis=-1, keepdims=True)
        starts = rng.random(length) < 0.6
        starts[0] = True
        units[row, :length] = np.cumsum(starts) - 1
    n = int(units.max()) + 1
    return torch.from_numpy(weights), torch.from_numpy(units), n, lengths


@FEW
@given(piece_maps())
def test_merged_rows_sum_to_one(case):
    weights, units, n, lengths = case
    merged = merge_maps(weights, units, n).numpy()  # (B, H, n, n)
    for row in range(len(lengths)):
        size = int(units[row].max()) + 1
        np.testing.assert_allclose(merged[row, :, :size].sum(axis=-1), 1.0, atol=1e-9)
        assert not merged[row, :, size:].any() and not merged[row, :, :, size:].any()  # pad units: all zero
        assert (merged[row] >= 0).all()


@FEW
@given(piece_maps(causal=True))
def test_a_causal_merge_and_rollout_stay_lower_triangular(case):
    weights, units, n, lengths = case
    merged = merge_maps(weights, units, n).numpy()
    assert np.allclose(np.triu(merged, 1), 0)  # a word never sees a later word
    rolled = rollout(weights[:, None].mean(dim=2)).numpy()  # (B, 1, t, t): one layer of head-averaged maps
    assert np.allclose(np.triu(rolled, 1), 0)


TEXT = st.text(alphabet=st.sampled_from(list("ab cé,.!¿?'-  银行\t")), min_size=0, max_size=30)


def _check_cover(text: str, spans: list[tuple[int, int]]) -> None:
    covered = [i for s, e in spans for i in range(s, e)]
    assert covered == sorted(set(covered)), spans  # in order, no overlap
    assert all(s < e for s, e in spans)
    assert set(covered) == {i for i, char in enumerate(text) if not char.isspace()}  # every character once
    assert all(not text[i].isspace() for i in covered)


@FEW
@given(TEXT)
def test_text_rule_units_cover_the_text_without_overlap(text):
    spans = text_spans(text)
    _check_cover(text, spans)
    assert (not spans) == all(char.isspace() for char in text)  # no unit exactly when nothing but whitespace


@FEW
@given(TEXT, st.sampled_from(["banco", "ab", "银行", "a", "é"]))
def test_required_words_keep_the_cover(text, word):
    spans, required = required_spans(text, text_spans(text), [word])
    _check_cover(text, spans)
    assert required <= set(spans)


@st.composite
def sentences(draw):
    seed = draw(st.integers(0, 2**32 - 1))
    count = draw(st.integers(2, 6))
    rng = np.random.default_rng(seed)
    layers, heads = 2, 3
    out = []
    for _ in range(count):
        n = int(rng.integers(1, 7))
        raw = rng.exponential(size=(layers, heads, n, n)) + 1e-3
        weights = (raw / raw.sum(axis=-1, keepdims=True)).astype(np.float32)
        out.append(WordAttention("x", tuple("w" * n), (WORD,) * n, weights))
    split = draw(st.integers(1, count - 1))
    return out, split


@FEW
@given(sentences(), st.booleans())
def test_shard_sums_add_up_to_the_whole(case, causal):
    attentions, split = case
    whole = word_sums(attentions, causal)
    parts = word_sums(attentions[:split], causal) + word_sums(attentions[split:], causal)
    np.testing.assert_allclose(parts.totals, whole.totals, rtol=1e-6, atol=1e-6)
    assert (parts.sentences, parts.units, parts.pairs, parts.tokens) == \
        (whole.sentences, whole.units, whole.pairs, whole.tokens)
    assert parts.uniform == pytest.approx(whole.uniform)
    means = whole.means()
    if whole.units:
        assert np.all(means["self"] <= 1 + 1e-6) and np.all(means["entropy"] >= -1e-9)


@FEW
@given(piece_maps(), st.integers(1, 4))
def test_rollout_rows_sum_to_one(case, layers):
    weights, units, n, lengths = case
    t = weights.shape[-1]
    maps = weights.mean(dim=1)[:, None].expand(-1, layers, t, t)  # (B, L, t, t) head-averaged
    rolled = rollout(maps).numpy()
    for row, length in enumerate(lengths):
        np.testing.assert_allclose(rolled[row, :, :length].sum(axis=-1), 1.0, atol=1e-9)
    words = word_rollout(maps.float(), units, n).numpy()
    for row in range(len(lengths)):
        size = int(units[row].max()) + 1
        np.testing.assert_allclose(words[row, :, :size].sum(axis=-1), 1.0, atol=1e-5)


@FEW
@given(piece_maps(), st.integers(0, 2**32 - 1))
def test_norm_maps_are_non_negative_with_rows_summing_to_one(case, seed):
    weights, units, n, lengths = case
    batch, heads, t, _ = weights.shape
    norms = torch.from_numpy(np.random.default_rng(seed).exponential(size=(batch, heads, t)) + 1e-3)
    maps = norm_maps(weights.clone(), norms).numpy()
    assert (maps >= 0).all()
    for row, length in enumerate(lengths):
        np.testing.assert_allclose(maps[row, :, :length].sum(axis=-1), 1.0, atol=1e-9)
        assert not maps[row, :, length:].any()  # a pad row (no weight at all) stays all zero
