"""The text rule, the grouping and the padding as they were before they were made fast (kept here as the oracle):
the fast code gives the same units, kinds, words, joins, errors and padded arrays on random text mixing letters,
punctuation, CJK, whitespace and emoji, through real tokenizers (MiniLM's WordPiece; a whitespace-split BPE whose
pieces straddle punctuation, so units join and required words raise; a SentencePiece-like Unigram with lone "▁")."""
from __future__ import annotations

import re
import unicodedata

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from real_attention.engine.extract import Encoded, encode, encode_words, pad_batch
from real_attention.engine.units import CJK_CHARACTER, Joined, UnitError, given_assign, required_spans, text_spans
from real_attention.engine.words import FIRST_SPECIAL, LAST_SPECIAL, PUNCT, SPECIAL, WORD, is_punctuation, unit_ids

MANY = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# letters (accented, decomposed), ASCII and Unicode punctuation, CJK ideographs and punctuation, emoji (with a
# skin-tone modifier), every kind of whitespace, and the characters a regex class must escape
CHARACTERS = list("abcxyzéüñßİ,.!?¿¡'\"-()«»…—:;_[]^\\/") + [
    "银", "行", "中", "国", "\U00020000", "。", "、", "😀", "👍🏽", " ", " ", "\t", "\n", "\u3000", "\u00a0",
    "e\u0301", "\U0001E95E", "٫", "7"]
TEXT = st.lists(st.sampled_from(CHARACTERS), min_size=0, max_size=40).map("".join)
SENTENCE = TEXT.filter(lambda text: any(not char.isspace() for char in text))


# --- the oracle: the code before (commit 43c2ba5), unchanged but for its names -----------------------------


def old_is_punct_char(char: str) -> bool:
    return unicodedata.category(char).startswith("P")


def old_edges(text: str, start: int, end: int) -> list[tuple[int, int]]:
    if start >= end:
        return []
    lead, trail = start, end
    while lead < end and old_is_punct_char(text[lead]):
        lead += 1
    if lead == end:
        return [(start, end)]
    while old_is_punct_char(text[trail - 1]):
        trail -= 1
    return [span for span in ((start, lead), (lead, trail), (trail, end)) if span[0] < span[1]]


def old_text_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    for match in re.finditer(r"\S+", text):
        start, end = match.span()
        segment = start
        for ideograph in CJK_CHARACTER.finditer(text, start, end):
            i = ideograph.start()
            spans += old_edges(text, segment, i)
            spans.append((i, i + 1))
            segment = i + 1
        spans += old_edges(text, segment, end)
    return spans


def old_stripped(text: str, offsets: np.ndarray) -> np.ndarray:
    visible = np.array([not char.isspace() for char in text] + [True], dtype=bool)
    positions = np.arange(len(text) + 1)
    next_word = np.minimum.accumulate(np.where(visible, positions, len(text))[::-1])[::-1]
    last_word = np.maximum.accumulate(np.concatenate([[0], np.where(visible[:-1], positions[1:], 0)]))
    starts = next_word[np.clip(offsets[:, 0], 0, len(text))]
    ends = last_word[np.clip(offsets[:, 1], 0, len(text))]
    return np.stack([starts, ends], axis=1)


def old_assign(text, tokens, special, offsets, required=()):
    spans, required_set = required_spans(text, old_text_spans(text), required)
    char_unit = np.full(len(text) + 1, -1, dtype=np.int64)
    for index, (s, e) in enumerate(spans):
        char_unit[s:e] = index
    stripped = old_stripped(text, offsets)
    first = char_unit[np.clip(stripped[:, 0], 0, len(text))]
    last = char_unit[np.clip(stripped[:, 1] - 1, 0, len(text))]
    empty = special | (stripped[:, 0] >= stripped[:, 1]) | (first < 0) | (last < 0)
    first, last = np.where(empty, -1, first), np.where(empty, -1, last)
    linked = np.zeros(len(spans), dtype=bool)
    joins: dict[tuple[int, int], Joined] = {}
    for piece in np.flatnonzero(first < last).tolist():
        a, b = int(first[piece]), int(last[piece])
        covered = text[stripped[piece, 0]:stripped[piece, 1]]
        touched = [text[s:e] for s, e in spans[a:b + 1]]
        if any(spans[k] in required_set for k in range(a, b + 1)):
            word = text[spans[a][0]:spans[b][1]]
            raise UnitError(
                f"the piece {covered!r} (token {tokens[piece]!r}) spans the units {', '.join(map(repr, touched))} "
                f"of {text!r}, but the focus or sense word must be a unit of its own; name the whole word "
                f"{word!r} instead"
            )
        linked[a:b] = True
        joins.setdefault((a, b), Joined(units=tuple(touched), piece=covered))
    if not spans:
        return np.where(special, -1, 0).astype(np.int64), [(0, len(text))], ()
    merged = np.concatenate([[0], np.cumsum(~linked[:-1])])
    t = len(special)
    pieces = np.arange(t)
    following = np.minimum.accumulate(np.where(empty, t, pieces)[::-1])[::-1]
    preceding = np.maximum.accumulate(np.where(empty, -1, pieces))
    source = np.where(following < t, following, preceding)
    group = np.where(source < 0, 0, merged[np.maximum(first[np.clip(source, 0, t - 1)], 0)])
    group = np.where(special, -1, group).astype(np.int64)
    count = int(merged[-1]) + 1
    unit_spans = [(len(text), 0)] * count
    for k, (s, e) in enumerate(spans):
        lo, hi = unit_spans[merged[k]]
        unit_spans[merged[k]] = (min(lo, s), max(hi, e))
    return group, unit_spans, tuple(joins.values())


def joined_blank_words(text, key, offsets):
    """A change to the old code (2026-12-06): under the tokenizer rule a word whose pieces are whitespace alone
    takes the key of the nearest word after it, with no special between, else of the nearest before it."""
    words = {int(k) for k in key if k >= 0}
    blank = {w for w in words if all(not text[s:e].strip() for k, (s, e) in zip(key, offsets.tolist()) if k == w)}
    result = key.copy()
    for i, k in enumerate(key.tolist()):
        if k < 0 or k not in blank:
            continue
        after = next((key[j] for j in range(i + 1, len(key)) if key[j] < 0 or key[j] not in blank), -1)
        before = next((key[j] for j in range(i - 1, -1, -1) if key[j] < 0 or key[j] not in blank), -1)
        result[i] = after if after >= 0 else before if before >= 0 else k
    return result


def old_group(text, tokens, word_ids, special, offsets, rule="text", required=(), given=()):
    if rule == "words":
        spans, joined = list(given), ()
        key = np.where(special, -1 - np.arange(len(special)), given_assign(text, spans, special, offsets))
    elif rule == "text":
        pieces, spans, joined = old_assign(text, tokens, special, offsets, required)
        key = np.where(special, -1 - np.arange(len(special)), pieces)
    else:
        key = joined_blank_words(text, np.where(special, -1, word_ids).astype(np.int64), offsets)
        joined = ()
    units = unit_ids(key)
    n = int(units[-1]) + 1
    first = np.searchsorted(units, np.arange(n))
    by_key = rule in ("text", "words")
    if not by_key:
        starts = np.minimum.reduceat(offsets[:, 0], first)
        ends = np.maximum.reduceat(offsets[:, 1], first)
        spans = list(zip(starts.tolist(), ends.tolist()))
    kinds = np.empty(n, dtype=np.int64)
    words = []
    for unit, piece in enumerate(first.tolist()):
        if key[piece] < 0:
            words.append(tokens[piece])
            kinds[unit] = FIRST_SPECIAL if unit == 0 else LAST_SPECIAL if unit == n - 1 else SPECIAL
        else:
            start, end = spans[key[piece]] if by_key else spans[unit]
            word = text[start:end].strip()
            words.append(word)
            kinds[unit] = PUNCT if is_punctuation(word) else WORD
    return units, kinds, tuple(words), joined


def old_encoded(tokenizer, text: str, rule: str = "text", required: tuple[str, ...] = ()):
    """One text through the old grouping: (ids, units, kinds, words, joins), or the UnitError's message."""
    encoding = tokenizer([text], return_offsets_mapping=True, return_special_tokens_mask=True, verbose=False,
                         split_special_tokens=True).encodings[0]
    word_ids = np.array([-1 if w is None else w for w in encoding.word_ids], dtype=np.int64)
    special = np.array(encoding.special_tokens_mask, dtype=bool)
    offsets = np.array(encoding.offsets, dtype=np.int64).reshape(-1, 2)
    try:
        units, kinds, words, joined = old_group(text, encoding.tokens, word_ids, special, offsets, rule, required)
    except UnitError as error:
        return f"sentence 1: {error}"
    return encoding.ids, units.tolist(), kinds.tolist(), words, joined


def new_encoded(tokenizer, text: str, rule: str = "text", required: tuple[str, ...] = ()):
    try:
        (encoded,), _ = encode(tokenizer, [text], 10_000, units=rule, required=[required])
    except UnitError as error:
        return str(error)
    return encoded.ids.tolist(), encoded.units.tolist(), encoded.kinds.tolist(), encoded.words, encoded.joined


# --- the tokenizers ------------------------------------------------------------------------------------------


def trained(kind: str):
    """A small fast tokenizer trained here on random text: "split" (BPE over whitespace-split words, so its pieces
    straddle punctuation) or "unigram" (SentencePiece-like, with lone "▁" pieces); <s> and </s> added around."""
    import random

    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(0)
    corpus = ["".join(rng.choice(CHARACTERS) for _ in range(rng.randint(5, 40))) for _ in range(400)]
    specials = ["<s>", "</s>", "<unk>", "<pad>"]
    if kind == "split":
        tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
        tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials)
    else:
        tokenizer = Tokenizer(models.Unigram())
        tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=150, special_tokens=specials, unk_token="<unk>")
    tokenizer.train_from_iterator(corpus, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", special_tokens=[("<s>", tokenizer.token_to_id("<s>")), ("</s>", tokenizer.token_to_id("</s>"))])
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>")


@pytest.fixture(scope="module")
def split_tokenizer():
    return trained("split")


@pytest.fixture(scope="module")
def unigram_tokenizer():
    return trained("unigram")


# --- the properties ------------------------------------------------------------------------------------------


@MANY
@given(TEXT)
def test_the_one_regex_finds_the_units_of_the_old_rule(text):
    assert text_spans(text) == old_text_spans(text)


@st.composite
def required_case(draw):
    """A text and the words required of it: none, one of its own words (edges stripped), or any slice of it."""
    text = draw(SENTENCE)
    words = text.split()
    choice = draw(st.sampled_from(["none", "word", "slice"]))
    if choice == "word" and words:
        return text, (draw(st.sampled_from(words)).strip(",.!?") or words[0],)
    if choice == "slice":
        start = draw(st.integers(0, len(text) - 1))
        return text, (text[start:start + draw(st.integers(1, 5))].strip() or "a",)
    return text, ()


@FEW
@given(required_case(), st.sampled_from(["text", "tokenizer"]))
def test_encode_groups_as_before_with_the_split_bpe(split_tokenizer, case, rule):
    text, required = case
    required = required if rule == "text" else ()
    assert new_encoded(split_tokenizer, text, rule, required) == old_encoded(split_tokenizer, text, rule, required)


@FEW
@given(required_case(), st.sampled_from(["text", "tokenizer"]))
def test_encode_groups_as_before_with_the_unigram(unigram_tokenizer, case, rule):
    text, required = case
    required = required if rule == "text" else ()
    assert new_encoded(unigram_tokenizer, text, rule, required) == old_encoded(unigram_tokenizer, text, rule, required)


@FEW
@given(required_case(), st.sampled_from(["text", "tokenizer"]))
def test_encode_groups_as_before_with_minilm(minilm, case, rule):
    text, required = case
    required = required if rule == "text" else ()
    tokenizer = minilm.tokenizer
    assert new_encoded(tokenizer, text, rule, required) == old_encoded(tokenizer, text, rule, required)


def test_the_seeds_corpus_and_the_joins_group_as_before(split_tokenizer, minilm):
    """Every line of the benchmarks' seeds corpus, through MiniLM and the split BPE (which joins units there)."""
    from pathlib import Path

    lines = [line for line in (Path(__file__).parent.parent / "benchmarks/corpus_seeds.txt").read_text(
        encoding="utf-8").splitlines() if line.strip()]
    joins = 0
    for tokenizer in (minilm.tokenizer, split_tokenizer):
        for rule in ("text", "tokenizer"):
            encoded, _ = encode(tokenizer, lines, 10_000, units=rule)
            for text, new in zip(lines, encoded):
                old = old_encoded(tokenizer, text, rule)
                assert (new.ids.tolist(), new.units.tolist(), new.kinds.tolist(), new.words, new.joined) == old
                joins += len(new.joined)
    assert joins > 0  # the joins were exercised


@FEW
@given(st.lists(st.lists(SENTENCE.map(str.split).filter(bool), min_size=1, max_size=1).map(lambda w: tuple(w[0])),
                min_size=1, max_size=4))
def test_given_words_group_as_before(unigram_tokenizer, sentences):
    from real_attention.engine.units import join_words

    encoded, _, missing = encode_words(unigram_tokenizer, sentences, 10_000)
    left_out = {i for i, _ in missing}
    kept = [words for i, words in enumerate(sentences) if i not in left_out]
    for words, new in zip(kept, encoded):
        text, spans = join_words(words)
        encoding = unigram_tokenizer([text], return_offsets_mapping=True, return_special_tokens_mask=True).encodings[0]
        special = np.array(encoding.special_tokens_mask, dtype=bool)
        offsets = np.array(encoding.offsets, dtype=np.int64).reshape(-1, 2)
        units, kinds, labels, _ = old_group(text, encoding.tokens, None, special, offsets, "words", given=spans)
        assert (new.units.tolist(), new.kinds.tolist(), new.words) == (units.tolist(), kinds.tolist(), labels)


def old_pad_batch(sentences, pad_id):
    size = len(sentences)
    t = max(len(s.ids) for s in sentences)
    n = max(len(s.kinds) for s in sentences)
    input_ids = np.full((size, t), pad_id, dtype=np.int64)
    attention_mask = np.zeros((size, t), dtype=np.int64)
    units = np.full((size, t), -1, dtype=np.int64)
    kinds = np.full((size, n), -1, dtype=np.int64)
    for row, sentence in enumerate(sentences):
        length = len(sentence.ids)
        input_ids[row, :length] = sentence.ids
        attention_mask[row, :length] = 1
        units[row, :length] = sentence.units
        kinds[row, :len(sentence.kinds)] = sentence.kinds
    return input_ids, attention_mask, units, kinds


@FEW
@given(st.lists(st.tuples(st.integers(1, 9), st.integers(1, 9)), min_size=1, max_size=6), st.integers(0, 5))
def test_pad_batch_pads_as_before(shapes, pad_id):
    rng = np.random.default_rng(len(shapes))
    sentences = [Encoded("x", rng.integers(6, 99, t), rng.integers(0, n, t), rng.integers(0, 4, n), ("x",) * n)
                 for t, n in shapes]
    new = pad_batch(sentences, pad_id)
    for ours, theirs in zip(new, old_pad_batch(sentences, pad_id)):
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)
