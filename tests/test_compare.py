"""`compare` and `detect`: the Jensen-Shannon maths, a model against itself and against a copy with permuted heads,
the words-only rule across an encoder and a decoder, Olsson's test on a head forced to induct, bad input, files."""
from __future__ import annotations

import re

import hashlib
import json
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from click.testing import CliRunner

import real_attention as ra
from real_attention.cli import cli
from real_attention.comparison.jsd import LN2, Packed, block_sums, classical_mds, js_rows

SENTENCES = ["Me senté en el banco de mi jardín.", "Fui al banco a sacar dinero.", "the bank of the river ."]


# --- the maths -------------------------------------------------------------------------------------------------


def test_js_by_hand():
    assert js_rows([1.0, 0.0], [0.0, 1.0]) == pytest.approx(math.log(2))
    # p = (1/2, 1/2), q = (1, 0): m = (3/4, 1/4); KL(p|m) = ln(4/3) / 2, KL(q|m) = ln(4/3); JS = 3/4 ln(4/3)
    assert js_rows([0.5, 0.5], [1.0, 0.0]) == pytest.approx(0.75 * math.log(4 / 3))
    assert js_rows([0.2, 0.3, 0.5], [0.2, 0.3, 0.5]) == pytest.approx(0.0, abs=1e-15)


def test_js_is_symmetric_and_bounded():
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.full(6, 0.3), size=200)
    q = rng.dirichlet(np.full(6, 0.3), size=200)
    forward, backward = js_rows(p, q), js_rows(q, p)
    np.testing.assert_allclose(forward, backward, rtol=0, atol=1e-15)
    assert (forward >= 0).all() and (forward <= LN2 + 1e-12).all()
    assert forward.max() > 0.3  # peaked rows: some pairs far apart


def _softmax_maps(batch: int, heads: int, n: int, causal: bool, seed: int) -> torch.Tensor:
    scores = torch.randn(batch, heads, n, n, generator=torch.Generator().manual_seed(seed)) * 3
    if causal:
        scores = scores.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
    return scores.softmax(dim=-1)


@pytest.mark.parametrize("causal_a, causal_b", [(False, False), (False, True), (True, False), (True, True)])
def test_streamed_block_sums_equal_the_definition(causal_a, causal_b):
    """The per-pair identity, the lower-triangle shortcut for decoders and the padding mask give the sum of
    JS over every row, as computed row by row from the definition."""
    batch, n, lengths = 3, 7, [7, 4, 6]
    a, b = _softmax_maps(batch, 4, n, causal_a, 1), _softmax_maps(batch, 5, n, causal_b, 2)
    for maps in (a, b):  # the shorter sentences: pad rows and columns, each real row renormalised
        for s, length in enumerate(lengths):
            maps[s, :, length:], maps[s, :, :, length:] = 0, 0
            maps[s, :, :length, :length] /= maps[s, :, :length, :length].sum(-1, keepdim=True)
    inside = torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]
    full = inside[:, :, None] & inside[:, None, :]
    lower = full & torch.tril(torch.ones(n, n, dtype=torch.bool)) if causal_a or causal_b else None
    got = block_sums(Packed.of(a, full, lower, causal_a), Packed.of(b, full, lower, causal_b)).numpy()
    expected = sum(js_rows(a[s, :, None, :m, :m].numpy(), b[s, None, :, :m, :m].numpy()).sum(-1)
                   for s, m in enumerate(lengths))
    np.testing.assert_allclose(got, expected, atol=5e-6)
    same = block_sums(Packed.of(a, full, lower, causal_a), Packed.of(a, full, lower, causal_a), same=True).numpy()
    np.testing.assert_allclose(same, same.T, atol=0)
    assert np.abs(np.diag(same)).max() < 5e-6


@pytest.mark.parametrize("triangle", [False, True])
@pytest.mark.parametrize("chunk", [1 << 17, 64])
def test_pair_sums_agree_in_numpy_and_torch(triangle, chunk, monkeypatch):
    from real_attention.comparison import jsd
    from real_attention.comparison.jsd import pair_xlogx

    monkeypatch.setattr(jsd, "CHUNK_ELEMENTS", chunk)  # 64: many chunks of rows and of elements
    generator = torch.Generator().manual_seed(5)
    a = torch.rand(7, 300, generator=generator) + 1e-3
    b = a if triangle else torch.rand(5, 300, generator=generator) + 1e-3
    s = a[:, None, :].double() + b[None, :, :].double()
    expected = (s * s.log()).sum(-1).numpy()
    for backend in ("numpy", "torch"):
        got = pair_xlogx(a, b, triangle=triangle, backend=backend).numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_classical_mds_recovers_a_plane_configuration():
    rng = np.random.default_rng(3)
    points = rng.normal(size=(12, 2))
    distances = np.linalg.norm(points[:, None] - points[None], axis=-1)
    coords = classical_mds(distances)
    np.testing.assert_allclose(np.linalg.norm(coords[:, None] - coords[None], axis=-1), distances, atol=1e-9)
    np.testing.assert_array_equal(coords, classical_mds(distances))  # deterministic, signs too


# --- a model against itself, and against a copy with permuted heads ----------------------------------------------


@pytest.fixture(scope="module")
def sharp_dir(tiny_model_dir, tmp_path_factory) -> Path:
    """The tiny BERT with its queries scaled up: a random model's near-uniform heads (JS ~1e-6 apart) become
    peaked and distinct, so a matching has something to find."""
    from transformers import AutoTokenizer, BertModel

    folder = tmp_path_factory.mktemp("tiny-sharp")
    model = BertModel.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        for layer in model.encoder.layer:
            layer.attention.self.query.weight.mul_(40.0)
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def sharp(sharp_dir):
    return ra.load(str(sharp_dir))


@pytest.fixture(scope="module")
def tiny_self(sharp):
    return ra.compare([sharp, sharp], SENTENCES, names=["a", "b"])


def test_a_model_against_itself(tiny_self):
    result = tiny_self
    assert result.summary["rule"] == "as-is" and result.matrix.shape == (24, 24)
    assert result.summary["batch_size"] == 32 and result.summary["device"] == "cpu"  # a distance's 6th decimal
    np.testing.assert_allclose(result.matrix, result.matrix.T, atol=0)
    assert np.abs(np.diag(result.block(0, 1))).max() < 1e-6  # each head against its own copy
    assert result.block(0, 0)[~np.eye(12, dtype=bool)].min() > 1e-3  # distinct heads differ (by far more)
    matching = result.matching
    assert len(matching) == 12
    assert (matching["layer_a"] == matching["layer_b"]).all() and (matching["head_a"] == matching["head_b"]).all()
    assert (matching["layer_a"] == matching["nearest_layer"]).all() and (matching["head_a"] == matching["nearest_head"]).all()
    assert matching["js"].max() < 1e-6
    assert len(result.distances) == 24 * 23 // 2
    assert result.summary["counts"]["sentences"] == 3
    assert list(result.mds.columns) == ["model", "layer", "head", "x", "y"]


def test_the_norm_measure(sharp, tmp_path):
    result = ra.compare([sharp, sharp], SENTENCES[:2], measure="norm", names=["a", "b"])
    assert result.summary["measure"] == "norm" and np.abs(np.diag(result.block(0, 1))).max() < 1e-6
    weights = ra.compare([sharp, sharp], SENTENCES[:2], names=["a", "b"])
    assert np.abs(result.matrix - weights.matrix).max() > 1e-3  # other maps, other distances
    results, _ = ra.write_compare(result, tmp_path, formats=())
    assert results.name == "a-vs-b-norm"


def test_a_repeated_model_gets_the_same_default_folder_from_the_api_as_from_the_cli(tiny_model_dir, tiny, tmp_path):
    """The API named it by the names told apart (X@abc1234-vs-X@abc1234#2 -> X-abc1234-vs-X-abc1234-2); the CLI by
    the names as typed (X-vs-X). Both now take the names as given."""
    corpus = tmp_path / "lines.txt"
    corpus.write_text("\n".join(SENTENCES[:2]) + "\n", encoding="utf-8")
    model = str(tiny_model_dir)
    result = CliRunner().invoke(cli, ["compare", "--corpus", str(corpus), "--model", model, "--model", model,
                                      "--quiet", "--out", str(tmp_path / "cli")])
    assert result.exit_code == 0, result.output
    api = ra.compare([tiny, tiny], SENTENCES[:2], names=[model, model])
    assert api.models[1].name.endswith("#2")  # the tables still tell them apart
    results, _ = ra.write_compare(api, tmp_path / "api", formats=())
    expected = f"{tiny_model_dir.name}-vs-{tiny_model_dir.name}"
    assert results.name == expected and (tmp_path / "cli/results/compare" / expected).is_dir()
    unnamed, _ = ra.write_compare(ra.compare([tiny, tiny], SENTENCES[:2]), tmp_path / "unnamed", formats=())
    assert unnamed.name == expected  # the loaded names, as given
    later = replace(tiny, revision="sha256:" + "b" * 64)  # the same model at another revision: not itself
    two, _ = ra.write_compare(ra.compare([tiny, later], SENTENCES[:2]), tmp_path / "two", formats=())
    assert two.name == f"{tiny_model_dir.name}-sha256-{tiny.revision[7:15]}-vs-{tiny_model_dir.name}-sha256-bbbbbbbb"


def test_one_figure_format_may_be_a_plain_string(tiny_self, tmp_path):
    """It was read letter by letter: 'unknown figure format 'p''."""
    _, figures = ra.write_compare(tiny_self, tmp_path, "one", formats="svg")
    assert {path.suffix for path in figures.iterdir()} == {".svg"}


def _permuted_copy(folder: Path, target: Path, layer: int, order: list[int]) -> None:
    """Save a copy of the tiny BERT whose heads of `layer` are permuted: new head h is old head order[h]."""
    from transformers import AutoTokenizer, BertModel

    model = BertModel.from_pretrained(folder)
    attention = model.encoder.layer[layer].attention
    size = model.config.hidden_size // model.config.num_attention_heads
    index = torch.cat([torch.arange(h * size, (h + 1) * size) for h in order])
    with torch.no_grad():
        for linear in (attention.self.query, attention.self.key, attention.self.value):
            linear.weight.copy_(linear.weight[index])  # the output features of each head, in the new order
            linear.bias.copy_(linear.bias[index])
        dense = attention.output.dense
        dense.weight.copy_(dense.weight[:, index])  # its input columns follow the heads
    model.save_pretrained(target)
    AutoTokenizer.from_pretrained(folder).save_pretrained(target)


def test_a_copy_with_permuted_heads_is_matched_back(sharp_dir, sharp, tmp_path):
    tiny = sharp
    order = [2, 0, 3, 1]
    _permuted_copy(sharp_dir, tmp_path / "permuted", 1, order)
    copy = ra.load(str(tmp_path / "permuted"))
    encoded = tiny.tokenizer(SENTENCES, return_tensors="pt", padding=True)
    with torch.no_grad():  # the same function: every layer's output unchanged
        before = tiny.model(**encoded).last_hidden_state
        after = copy.model(**encoded).last_hidden_state
    torch.testing.assert_close(before, after, atol=1e-5, rtol=1e-5)
    result = ra.compare([tiny, copy], SENTENCES)
    matching = result.matching
    assert matching["js"].max() < 1e-6
    for row in matching.itertuples():
        expected = order.index(row.head_a - 1) + 1 if row.layer_a == 2 else row.head_a  # old head order[h] -> h
        assert (row.layer_b, row.head_b) == (row.layer_a, expected), row
        assert (row.nearest_layer, row.nearest_head) == (row.layer_a, expected)


# --- across tokenizers: the words-only rule ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def llama(tiny_decoders):
    return ra.load(str(tiny_decoders("llama")))


def reference_block(models, texts, causal: bool = False) -> np.ndarray:
    """The (heads of model 0, heads of model 1) mean JS by the definition: ra.attend's maps without the specials,
    each row renormalised (causal: cut to the words up to its query first, then renormalised again)."""
    rows = []
    for model in models:
        maps = []
        for sentence in ra.attend(model, texts):
            keep = np.array([k.group != "special" for k in sentence.kinds])
            w = sentence.weights[:, :, keep][:, :, :, keep].astype(np.float64)
            w = w / w.sum(-1, keepdims=True)
            if causal:
                w = np.tril(w)
                w = w / w.sum(-1, keepdims=True)
            maps.append(w.reshape(-1, keep.sum(), keep.sum()))
        rows.append(maps)
    count = sum(m.shape[-1] for m in rows[0])
    return sum(js_rows(a[:, None], b[None]).sum(-1) for a, b in zip(*rows)) / count


@pytest.mark.filterwarnings("ignore:the vocabulary")
def test_an_encoder_against_a_decoder_drops_the_specials(tiny, llama):
    texts = ["the river flooded the bank .", "she deposited her salary at the bank ."]
    result = ra.compare([tiny, llama], texts, names=["bert", "llama"])
    assert result.summary["rule"] == "words"
    assert result.matrix.shape == (12 + 8, 20)
    assert result.summary["counts"]["words"] == 6 + 8 and result.summary["counts"]["joined"] == 0
    # the reference: ra.attend's maps without the specials, rows renormalised, JS by the definition, mean over rows
    np.testing.assert_allclose(result.block(0, 1), reference_block([tiny, llama], texts), atol=1e-5)
    assert result.matrix.max() <= LN2 and result.matrix.min() >= 0
    assert len(result.matching) == 12 and result.matching["layer_b"].isna().sum() == 4  # 12 heads, 8 partners
    alone = result.matching["layer_b"].isna()
    assert result.matching.loc[alone, ["head_b", "js"]].isna().all().all()  # only those left without a partner
    assert result.matching.loc[~alone, ["layer_b", "head_b", "js"]].notna().all().all()
    page = (Path(__file__).parent.parent / "docs/compare.md").read_text(encoding="utf-8")
    assert "left without a partner" in page and "empty when the first model has more heads" not in page


@pytest.mark.filterwarnings("ignore:the vocabulary")
def test_heads_csv_says_what_each_heads_rows_kept_and_how_much_an_encoder_looks_ahead(tiny, llama, tmp_path):
    """Under the words rule a row that kept little weight on the words counted like any other, and an encoder's
    weight on later words put a floor, ln 2 / 2 times it, under every distance to a decoder head: neither was
    reported."""
    texts = ["the river flooded the bank .", "she deposited her salary at the bank ."]
    result = ra.compare([tiny, llama], texts, names=["bert", "llama"])
    for index, model in enumerate((tiny, llama)):
        kept, later, rows = 0.0, 0.0, 0
        for sentence in ra.attend(model, texts):
            keep = np.array([k.group != "special" for k in sentence.kinds])
            w = sentence.weights[:, :, keep][:, :, :, keep].astype(np.float64)  # (L, H, n, n)
            kept = kept + w.sum(-1).sum(-1).reshape(-1)
            later = later + np.triu(w / w.sum(-1, keepdims=True), 1).sum((-1, -2)).reshape(-1)
            rows += int(keep.sum())
        part = result.heads[result.heads["model"] == ("bert", "llama")[index]]
        np.testing.assert_allclose(part["word_share"], kept / rows, atol=1e-5)
        np.testing.assert_allclose(part["later_share"], later / rows, atol=1e-5)
    decoder = result.heads[result.heads["model"] == "llama"]
    assert (decoder["later_share"] == 0).all() and (result.heads["word_share"] < 1).all()  # specials dropped
    floor = LN2 / 2 * result.heads[result.heads["model"] == "bert"]["later_share"].to_numpy()
    assert (result.block(0, 1) >= floor[:, None] - 1e-6).all()  # the floor the docs describe
    results, _ = ra.write_compare(result, tmp_path, formats=())
    assert (results / "heads.csv").read_text().startswith("model,layer,head,word_share,later_share\n")
    alone = ra.compare([tiny, tiny], texts)  # as-is: every row is compared whole
    np.testing.assert_allclose(alone.heads["word_share"], 1.0, atol=1e-5)


@pytest.mark.filterwarnings("ignore:the vocabulary")
def test_rows_causal_compares_an_encoder_on_what_a_decoder_sees(tiny, llama, tmp_path):
    """rows="causal" cuts every encoder row to the words up to its query and renormalises it: the floor its look-ahead
    put under every distance to a decoder head is gone."""
    texts = ["the river flooded the bank .", "she deposited her salary at the bank ."]
    result = ra.compare([tiny, llama], texts, names=["bert", "llama"], rows="causal")
    assert result.summary["rows"] == "causal" and (result.heads["later_share"] == 0).all()
    np.testing.assert_allclose(result.block(0, 1), reference_block([tiny, llama], texts, causal=True), atol=1e-5)
    assert ra.compare([tiny, llama], texts).summary["rows"] == "all"
    written, _ = ra.write_compare(result, tmp_path, formats=())  # never the all-rows run's folder
    assert written.name == "bert-vs-llama-causal"
    with pytest.raises(ra.InputError, match=r"rows \(--rows\) must be one of all, causal"):
        ra.compare([tiny, llama], texts, rows="lower")


def test_words_a_tokenizer_joins_are_joined_in_every_model(tiny, llama):
    # by the tokenizers' own words, BERT cuts each CJK ideograph apart; the word-level tokenizer keeps 银行 whole
    result = ra.compare([tiny, llama], ["the bank .", "the 银行 ."], units="tokenizer")
    assert result.summary["rule"] == "words"
    assert result.summary["counts"] == {"lines": 2, "sentences": 2, "skipped": 0, "mismatched": 0, "words": 6,
                                        "joined": 1}


def test_common_words():
    from real_attention.comparison.compare import common_words

    maps, n = common_words([("$Q$", ",", "y", "$K$"), ("$Q$,", "y", "$K", "$")])
    assert n == 3
    assert [m.tolist() for m in maps] == [[0, 0, 1, 2], [0, 1, 2, 2]]
    maps, n = common_words([("a", "b"), ("a", "b")])
    assert n == 2 and [m.tolist() for m in maps] == [[0, 1], [0, 1]]
    with pytest.raises(ValueError, match="at word 2"):
        common_words([("ab", "cd"), ("ab", "ce")])


def test_sentences_are_numbered_by_their_place_in_the_list_and_blank_ones_skipped(tiny):
    with pytest.raises(ra.InputError, match="sentence 4 holds a NUL character"):
        ra.compare([tiny, tiny], ["", " ", SENTENCES[0], "bad\x00line"])
    zero_width = ra.compare([tiny, tiny], [SENTENCES[0], "\u200b", SENTENCES[1]])  # blank, as in a corpus file
    assert zero_width.summary["counts"]["sentences"] == 2
    with pytest.raises(ra.InputError, match="no sentences to compare"):
        ra.compare([tiny, tiny], ["", "\u200b "])


SOFT_HYPHEN = "the \u00ad bank ."  # the tiny BERT gives U+00AD no piece, the word-level Llama an <unk> word


@pytest.mark.parametrize("invisible", ["\u00ad", "\u200d"])
def test_a_sentence_the_models_spell_differently_is_left_out_with_a_warning(tiny, llama, invisible):
    """It stopped the whole compare: "sentence 2 (...): model 2 spells it differently from model 1 at word 2"."""
    sentences = ["the bank .", "", f"the {invisible} bank .", "she sat at the bank ."]
    with pytest.warns(UserWarning, match=r"compare left out 1 sentence\(s\) that the models' words spell "
                                         r"differently \(the first: sentence 3 \('the .{1,6} bank \.'\): model 2 "
                                         r"spells it differently from model 1 at word 2\).*counts\.mismatched"):
        result = ra.compare([tiny, llama], sentences, names=["bert", "llama"])
    assert result.summary["counts"] == {"lines": 3, "sentences": 2, "skipped": 0, "mismatched": 1, "words": 3 + 6,
                                        "joined": 0}
    alone = ra.compare([tiny, llama], ["the bank .", "she sat at the bank ."], names=["bert", "llama"])
    np.testing.assert_allclose(result.matrix, alone.matrix, atol=1e-9)  # the left-out sentence adds nothing
    from real_attention.comparison.compare import describe

    assert "1 spelled differently by the models' words skipped" in describe(result)


def test_when_every_sentence_is_spelled_differently_one_error_names_its_place_blank_ones_counted(tiny, llama):
    with pytest.raises(ra.InputError, match=r"^no words in common: of 1 sentence\(s\), 0 too long for some model, "
                                            r"1 that the models' words spell differently \(the first: sentence 3 "):
        ra.compare([tiny, llama], ["", "  ", SOFT_HYPHEN], units="tokenizer")


def test_the_cli_names_a_corpus_line_by_its_number_blank_lines_counted(tiny_model_dir, tiny_decoders, tmp_path):
    corpus = tmp_path / "lines.txt"
    corpus.write_text(f"\n\n{SOFT_HYPHEN}\n", encoding="utf-8")
    command = ["compare", "--corpus", str(corpus), "--model", str(tiny_model_dir), "--model",
               str(tiny_decoders("llama")), "--quiet", "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(cli, command)
    lines = result.output.strip().splitlines()
    assert result.exit_code != 0 and len(lines) == 1, result.output
    assert lines[0].startswith("Error: no words in common: ") and f"(the first: line 3 of {corpus} (" in lines[0]
    corpus.write_text(f"\nthe bank .\n\n{SOFT_HYPHEN}\n", encoding="utf-8")
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 0, result.output
    (line,) = result.output.strip().splitlines()  # --quiet keeps warnings: one, in this tool's form, no code line
    assert line.startswith("Warning: compare left out 1 sentence(s)") and f"the first: line 4 of {corpus} (" in line
    summary = json.loads(next((tmp_path / "out/results/compare").glob("*/summary.json")).read_text())
    assert summary["counts"]["mismatched"] == 1 and summary["counts"]["sentences"] == 1


class _Again:
    """A re-iterable that is neither a list nor a one-shot iterator."""

    def __init__(self, items):
        self.items = items

    def __iter__(self):
        return iter(self.items)


@pytest.mark.parametrize("make", [tuple, _Again, list, iter], ids=["tuple", "re-iterable", "list", "iterator"])
def test_every_kind_of_sequence_has_its_items_checked_by_place(tiny, make):
    """A tuple with a non-string was an AttributeError ('NoneType' object has no attribute 'strip')."""
    with pytest.raises(ra.InputError, match=r"^sentences: sentence 3 is NoneType, not a string$"):
        ra.compare([tiny, tiny], make(["the bank .", "", None]))
    with pytest.raises(ra.InputError, match=r"^sentences: sentence 3 holds a NUL character"):
        ra.compare([tiny, tiny], make(["the bank .", " ", "bad\x00line"]))
    with pytest.raises(ra.InputError, match="compare takes the sentences as"):
        ra.compare([tiny, tiny], object())


def test_a_huge_limit_and_the_largest_batch_size_read_the_corpus_as_usual(tiny):
    usual = ra.compare([tiny, tiny], SENTENCES)
    huge = ra.compare([tiny, tiny], SENTENCES, limit=10**20, batch_size=65536)  # islice took neither
    assert huge.summary["counts"] == usual.summary["counts"]
    assert np.allclose(huge.matrix, usual.matrix, atol=1e-9)


def test_the_mds_legend_names_every_model_inside_the_figure(tiny, tmp_path):
    from real_attention.comparison.figures import mds_figure

    result = ra.compare([tiny, tiny, tiny, tiny], SENTENCES[:2])
    figure = mds_figure(result)
    figure.canvas.draw()
    legend = figure.legends[0]
    assert len(legend.get_texts()) == 4
    box, page = legend.get_window_extent(), figure.bbox
    assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1


def test_the_mds_legend_shows_each_models_shape_in_one_neutral_colour(tiny_self):
    """The legend's markers took the colour of each model's first point: the colourbar's first-layer colour, as
    if it said something about depth."""
    from matplotlib.colors import to_rgba

    from real_attention.comparison.figures import mds_figure

    def face(handle) -> tuple:
        colour = handle.get_markerfacecolor() if hasattr(handle, "get_markerfacecolor") else handle.get_facecolor()[0]
        return tuple(np.round(to_rgba(colour), 6))

    def shape(handle) -> object:
        return handle.get_marker() if hasattr(handle, "get_marker") else handle.get_paths()[0].vertices.tobytes()

    handles = mds_figure(tiny_self).legends[0].legend_handles
    faces = {face(h) for h in handles}
    assert len(faces) == 1  # one colour for every model
    red, green, blue, _ = faces.pop()
    assert red == green == blue and 0.3 < red < 0.9  # a grey, not the depth scale's dark purple or yellow
    assert len({shape(h) for h in handles}) == 2  # a shape per model


def test_no_sentence_in_common(tiny):
    long = " ".join(["banco"] * 40)  # more pieces than the tiny model's 24 positions
    with pytest.raises(ra.InputError, match="no words in common"):
        ra.compare([tiny, tiny], [long, "   "])
    with pytest.raises(ra.InputError, match="at least two models"):
        ra.compare([tiny], SENTENCES)


def test_the_layers_figure_keeps_the_distance_scale_and_short_names(tiny, tiny_model_dir):
    """layers.png once stretched its colours to the means it showed (0.2061 black, 0.2062 pale yellow), and a model
    given as a long path ran its axis label into the other one."""
    from real_attention.comparison.figures import layers_figure

    long_path = str(tiny_model_dir / ("deep/" * 12)).rstrip("/") + "/tiny-bert"
    result = ra.compare([tiny, tiny], SENTENCES, names=[long_path, "other"])
    figure = layers_figure(result)
    axes = figure.axes[0]
    assert axes.images[0].get_clim() == (0.0, math.log(2))
    assert axes.get_ylabel() == "layer of tiny-bert" and axes.get_xlabel() == "layer of other"
    twins = layers_figure(ra.compare([tiny, tiny], SENTENCES, names=["runs/a/final", "runs/b/final"])).axes[0]
    assert [" ".join(label.split()) for label in (twins.get_ylabel(), twins.get_xlabel())] == [
        "layer of runs/a/final", "layer of runs/b/final"]  # two checkpoints named final: their whole names


# --- files and the command line ------------------------------------------------------------------------------


def test_the_cli_writes_what_the_api_computes_byte_for_byte(tiny_model_dir, tiny, tmp_path):
    corpus = tmp_path / "lines.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n\n", encoding="utf-8")
    model = str(tiny_model_dir)
    command = ["compare", "--corpus", str(corpus), "--model", model, "--model", model, "--name", "self",
               "--quiet", "--out", str(tmp_path / "cli")]
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 0, result.output
    import real_attention.comparison.compare  # noqa: F401  (an imported stage folder must not shadow ra.compare)

    assert callable(ra.compare) and callable(ra.write_compare) and callable(ra.detect)
    api = ra.compare([tiny, tiny], SENTENCES, names=[model, model])
    ra.write_compare(api, tmp_path / "api", "self")
    folder = tmp_path / "cli/results/compare/self"
    for name in ("distances.csv", "matching.csv", "mds.csv"):
        assert (folder / name).read_bytes() == (tmp_path / "api/results/compare/self" / name).read_bytes()
    figures = tmp_path / "cli/figures/compare/self"
    assert sorted(p.name for p in figures.iterdir()) == ["distances.png", "layers.png", "mds.png"]
    before = {p.name: p.read_bytes() for p in [*folder.iterdir(), *figures.iterdir()]}
    assert CliRunner().invoke(cli, command).exit_code == 0
    assert {p.name: p.read_bytes() for p in [*folder.iterdir(), *figures.iterdir()]} == before
    header = (folder / "distances.csv").read_text().splitlines()[0]
    assert header == "model_a,layer_a,head_a,model_b,layer_b,head_b,js"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["rule"] == "as-is" and summary["corpus"]["name"] == "lines.txt"
    assert summary["corpus"]["sha256"] == hashlib.sha256(corpus.read_bytes()).hexdigest()
    assert summary["counts"]["sentences"] == 3


@pytest.mark.parametrize("suffix, opener", [(".gz", "gzip"), (".bz2", "bz2"), (".xz", "lzma")])
def test_a_compressed_corpus_is_read_as_heads_reads_it(tiny_model_dir, tmp_path, suffix, opener):
    """It said "line 1 of c.txt.gz is not UTF-8"; heads --corpus decompresses .gz, .bz2 and .xz."""
    import importlib

    from real_attention.comparison.compare import CorpusLines

    module = importlib.import_module(opener)
    text = "\n".join(SENTENCES) + "\n\n"
    plain, packed = tmp_path / "lines.txt", tmp_path / f"lines.txt{suffix}"
    plain.write_text(text, encoding="utf-8")
    with module.open(packed, "wb") as handle:
        handle.write(text.encode("utf-8"))
    jsonl = tmp_path / f"lines.jsonl{suffix}"
    with module.open(jsonl, "wb") as handle:
        handle.write("".join(json.dumps({"text": s}) + "\n" for s in SENTENCES).encode("utf-8"))
    assert list(CorpusLines(packed)) == list(CorpusLines(jsonl)) == SENTENCES
    assert CorpusLines(packed).sha256 == CorpusLines(plain).sha256 == hashlib.sha256(text.encode()).hexdigest()
    model = str(tiny_model_dir)
    for corpus in (plain, packed):
        command = ["compare", "--corpus", str(corpus), "--model", model, "--model", model, "--name", corpus.name,
                   "--quiet", "--format", "svg", "--out", str(tmp_path / "out")]
        result = CliRunner().invoke(cli, command)
        assert result.exit_code == 0, result.output
    folders = [tmp_path / "out/results/compare" / corpus.name for corpus in (plain, packed)]
    assert (folders[0] / "distances.csv").read_bytes() == (folders[1] / "distances.csv").read_bytes()
    summary = json.loads((folders[1] / "summary.json").read_text())
    assert summary["corpus"] == {"name": packed.name, "sha256": hashlib.sha256(text.encode()).hexdigest()}


def test_a_damaged_compressed_corpus_is_one_error_line(tiny_model_dir, tmp_path):
    import gzip

    corpus = tmp_path / "lines.txt.gz"
    corpus.write_bytes(gzip.compress(("\n".join(SENTENCES * 50) + "\n").encode())[:60])  # cut short
    model = str(tiny_model_dir)
    result = CliRunner().invoke(cli, ["compare", "--corpus", str(corpus), "--model", model, "--model", model,
                                      "--quiet", "--out", str(tmp_path / "out")])
    lines = result.output.strip().splitlines()
    assert result.exit_code != 0 and len(lines) == 1, result.output
    assert lines[0].startswith(f"Error: cannot read --corpus {corpus}: ")


def test_a_corpus_damaged_past_the_limit_is_one_error_line_too(tiny_model_dir, tmp_path):
    """--limit reads the first lines only, but the corpus's sha256 is of the whole file: damage past the lines
    compared is found while hashing, and is one line too (it was a traceback)."""
    import gzip

    corpus = tmp_path / "lines.txt.gz"
    whole = gzip.compress(("\n".join(SENTENCES * 2000) + "\n").encode())
    corpus.write_bytes(whole[:len(whole) * 4 // 5])  # the first lines are whole
    model = str(tiny_model_dir)
    result = CliRunner().invoke(cli, ["compare", "--corpus", str(corpus), "--model", model, "--model", model,
                                      "--limit", "3", "--quiet", "--out", str(tmp_path / "out")])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith(f"Error: cannot read --corpus {corpus}: ")
    assert not (tmp_path / "out").exists()


def test_detect_says_why_an_option_is_out_of_range(tiny):
    """The command line's ranges are Click's; the API says why each limit is there."""
    for options, why in (({"length": 2}, "induction and previous would be one score"),
                         ({"repeats": 1}, "the scores are read in the repeats after the first"),
                         ({"samples": 10 ** 12}, "samples (--samples) must be at most 1,000,000"),
                         ({"batch_size": 10 ** 20}, "batch_size (--batch-size) must be at most 65,536")):
        with pytest.raises(ra.InputError, match=re.escape(why)):
            ra.detect(tiny, **options)


@pytest.mark.parametrize("arguments, message", [
    (["compare", "--corpus", "{corpus}", "--model", "minilm"], "at least two models"),
    (["compare", "--corpus", "{corpus}", "--model", "{model}", "--model", "{model}", "--revision", "main"],
     "once per --model"),
    (["compare", "--corpus", "{long}", "--model", "{model}", "--model", "{model}"], "no words in common"),
    (["compare", "--corpus", "/dev/null", "--model", "{model}", "--model", "{model}"], "not a regular file"),
    (["compare", "--corpus", "{tmp}/missing.txt", "--model", "{model}", "--model", "{model}"], "no such file"),
    (["detect", "--model", "{model}", "--length", "1"], "Invalid value for '--length': 1 is not in the range x>=3"),
    (["detect", "--model", "{model}", "--lang", "en"], "detect takes --model or --lang"),
    (["detect", "--model", "{model}", "--length", "2"], "Invalid value for '--length': 2 is not in the range x>=3"),
    (["detect", "--model", "{model}", "--batch-size", "99999999999999999999"], "not in the range 1<=x<=65536"),
    (["detect", "--model", "{model}", "--length", "10", "--repeats", "3"], "takes at most 24"),
    (["detect", "--model", "{model}", "--samples", "1000000000000"], "not in the range 1<=x<=1000000"),
    (["compare", "--corpus", "{blank}", "--model", "{model}", "--model", "{model}"], "has no sentence"),
    (["compare", "--corpus", "{corpus}", "--model", "{model}", "--model", "{model}", "--name", ""],
     "cannot be a folder name"),
])
def test_bad_input_is_one_error_line(tiny_model_dir, tmp_path, arguments, message, monkeypatch):
    corpus, long, blank = tmp_path / "lines.txt", tmp_path / "long.txt", tmp_path / "blank.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    long.write_text(" ".join(["banco"] * 40) + "\n", encoding="utf-8")
    blank.write_text("\n  \n\u200b\n", encoding="utf-8")
    values = {"corpus": str(corpus), "long": str(long), "model": str(tiny_model_dir), "tmp": str(tmp_path),
              "blank": str(blank)}
    if message in ("has no sentence", "cannot be a folder name", "not in the range 1<=x<=1000000"):
        import real_attention.engine.models as models

        def refuse(*args, **kwargs):
            raise AssertionError("a model was loaded before the input was checked")

        monkeypatch.setattr(models, "load_model", refuse)
    result = CliRunner().invoke(cli, [a.format(**values) for a in arguments] + ["--out", str(tmp_path / "out")])
    assert result.exit_code != 0
    lines = [line for line in result.output.strip().splitlines() if not line.startswith("Loading ")]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and message in lines[0], result.output
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["compare", "detect"])
@pytest.mark.parametrize("blocked", ["results", "figures/{command}", "results/{command}/{name}"])
def test_a_file_where_the_results_go_is_found_before_the_models_load(tiny_model_dir, tmp_path, monkeypatch,
                                                                    command, blocked):
    """A file at the results' folder or at a folder above it: one Error: line before any model loads (it came
    after the whole comparison), and the file is left as it was."""
    import real_attention.engine.models as models

    corpus = tmp_path / "lines.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    model = str(tiny_model_dir)
    name = tiny_model_dir.name if command == "detect" else f"{tiny_model_dir.name}-vs-{tiny_model_dir.name}"
    target = tmp_path / "out" / blocked.format(command=command, name=name)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("mine", encoding="utf-8")

    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded before the output folders were checked")

    monkeypatch.setattr(models, "load_model", refuse)
    arguments = (["compare", "--corpus", str(corpus), "--model", model, "--model", model] if command == "compare"
                 else ["detect", "--model", model])
    result = CliRunner().invoke(cli, arguments + ["--out", str(tmp_path / "out"), "--quiet"])
    lines = result.output.strip().splitlines()
    if blocked.count("/") == 2:  # the results' folder itself is a file: not ours to replace (bad input, exit 2)
        assert result.exit_code == 2 and len(lines) == 1, result.output
        assert lines[0].startswith(f"Error: {target} is a file, not a folder"), lines[0]
    else:  # a file above it: the folder cannot be written (exit 1, as for a read-only folder)
        below = target / (command if blocked == "results" else name)  # the folder that cannot be made
        assert result.exit_code == 1 and len(lines) == 1, result.output
        assert lines[0].startswith(f"Error: cannot write to {below}: {target} is a file, not a folder"), lines[0]
    assert target.read_text(encoding="utf-8") == "mine"


# --- detect ------------------------------------------------------------------------------------------------------


def _force(llama, length: int, targets: dict[int, int]):
    """Patch layer 1's attention so that head h attends only to i + targets[h] (or to 0 where that is before the
    start): a forward hook on the attention module, registered before detect's own, replaces the weights it hands
    over. The model's hidden states are untouched: this checks which positions detect reads, not a learnt head."""
    from real_attention.engine.anatomy import attention_modules

    def hook(module, args, output):
        weights = output[1].clone()
        t = weights.shape[-1]
        for head, offset in targets.items():
            forced = torch.zeros(t, t)
            forced[torch.arange(t), (torch.arange(t) + offset).clamp(min=0)] = 1.0
            weights[:, head] = forced
        return (output[0], weights, *output[2:])

    return attention_modules(llama.model)[0].register_forward_hook(hook)


def test_detect_finds_a_forced_induction_head(llama):
    length = 5
    handle = _force(llama, length, {0: -length + 1, 1: -1, 2: -length})
    try:
        result = ra.detect(llama, length=length, repeats=3, samples=4, seed=1)
    finally:
        handle.remove()
    heads = result.heads.set_index(["layer", "head"])
    assert heads.loc[(1, 1), "induction"] == pytest.approx(1.0)
    assert heads.loc[(1, 1), "previous"] == pytest.approx(0.0, abs=1e-12)
    assert heads.loc[(1, 2), "previous"] == pytest.approx(1.0)
    assert heads.loc[(1, 3), "duplicate"] == pytest.approx(1.0)
    assert heads.loc[(1, 1), "entropy"] == pytest.approx(0.0, abs=1e-6)
    assert result.summary["top"]["induction"][0] == {"layer": 1, "head": 1, "score": 1.0}
    assert result.summary["specials"] == {"before": 1, "after": 0}  # the tiny Llama's <s>
    assert result.summary["tokens_per_sample"] == 1 + 5 * 3
    free = ra.detect(llama, length=length, repeats=3, samples=4, seed=1)  # the hook is gone
    assert free.heads["induction"].max() < 0.99
    columns = ["layer", "head", "induction", "duplicate", "previous", "first", "entropy"]
    assert list(free.heads.columns) == columns
    assert (free.heads[columns[2:6]].to_numpy() <= 1 + 1e-6).all()


def test_detect_draws_ordinary_tokens_repeated(tiny):
    from real_attention.comparison.detect import sequences

    ids, offset, vocabulary = sequences(tiny, 4, 3, 6, seed=7)
    assert offset == 1 and ids.shape == (6, 1 + 12 + 1)  # [CLS] ... [SEP]
    body = ids[:, 1:-1]
    assert (body[:, :4] == body[:, 4:8]).all() and (body[:, 4:8] == body[:, 8:]).all()
    assert not np.isin(body, tiny.tokenizer.all_special_ids).any()
    assert vocabulary == len(tiny.tokenizer) - 5  # the five specials left out
    again, _, _ = sequences(tiny, 4, 3, 6, seed=7)
    np.testing.assert_array_equal(ids, again)


def test_detect_files(tiny_model_dir, tmp_path):
    command = ["detect", "--model", str(tiny_model_dir), "--length", "5", "--samples", "3", "--repeats", "3",
               "--out", str(tmp_path), "--name", "tiny"]
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 0, result.output
    assert "induction" in result.output
    assert (tmp_path / "results/detect/tiny/heads.csv").read_text().startswith(
        "layer,head,induction,duplicate,previous,first,entropy\n")
    assert (tmp_path / "figures/detect/tiny/scores.png").is_file()
    with pytest.raises(ra.InputError, match=r"repeats \(--repeats\) must be at least 2"):
        ra.detect(ra.load(str(tiny_model_dir)), repeats=1)
    summary = json.loads((tmp_path / "results/detect/tiny/summary.json").read_text())
    # an encoder's query sees all 1 + 15 + 1 tokens: uniform attention puts 1/17 on each, entropy ln 17; a query of
    # the second repeat has one earlier copy, of the third two: induction and duplicate add 1.5 of them on average
    assert summary["chance"] == {"induction": round(1.5 / 17, 6), "duplicate": round(1.5 / 17, 6),
                                 "previous": round(1 / 17, 6), "first": round(1 / 17, 6),
                                 "entropy": round(math.log(17), 6)}
    assert "chance_by_layer" not in summary  # every layer sees every key
    assert "(uniform attention: 0.06)" in result.output and "entropy (lowest)" in result.output
    heads = pd.read_csv(tmp_path / "results/detect/tiny/heads.csv")
    lowest = heads.sort_values(["entropy", "layer", "head"]).iloc[0]
    assert summary["top"]["entropy"][0] == {"layer": int(lowest["layer"]), "head": int(lowest["head"]),
                                            "score": round(float(lowest["entropy"]), 6)}
    with pytest.raises(ra.InputError, match="out must be a path"):
        ra.write_detect(ra.detect(ra.load(str(tiny_model_dir)), length=5, repeats=2, samples=1), None)


def test_detect_chance_for_a_decoder():
    """A decoder's query at position i sees i + 1 keys: uniform attention gives the mean of 1/(i + 1); induction and
    duplicate count the earlier copies it sees."""
    from real_attention.comparison.detect import chance

    length, queries = 2, np.array([3, 4, 5])  # offset 1: the repeats start at 1, 3 and 5; query 5 has two copies
    visible = np.tril(np.ones((6, 6), dtype=bool))[queries]
    assert chance(visible, queries, 1, length) == {
        **dict.fromkeys(("previous", "first"), round((1 / 4 + 1 / 5 + 1 / 6) / 3, 6)),
        **dict.fromkeys(("induction", "duplicate"), round((1 / 4 + 1 / 5 + 2 / 6) / 3, 6)),
        "entropy": round((math.log(4) + math.log(5) + math.log(6)) / 3, 6)}


def test_detect_chance_counts_only_the_keys_a_sliding_window_shows(tiny_decoders):
    """Gemma 2's first layer sees a window of 3 keys (its own and the two before): uniform attention there gives 1/3
    to the previous token, nothing to position 0 or to a copy 4 tokens back, and entropy ln 3. The second layer sees
    every earlier key. The chance levels were once the full causal ones for every layer."""
    from real_attention.comparison.detect import chance, copy_targets, describe

    result = ra.detect(ra.load(str(tiny_decoders("gemma2"))), length=4, repeats=3, samples=2)
    summary = result.summary
    windowed, full = summary["chance_by_layer"]
    assert windowed == {"induction": 0.0, "duplicate": 0.0, "previous": round(1 / 3, 6), "first": 0.0,
                        "entropy": round(math.log(3), 6)}
    queries = np.arange(4, 12)  # no special token: the second and third repeats
    assert full == summary["chance"] == chance(np.tril(np.ones((12, 12), dtype=bool))[queries], queries, 0, 4)
    assert copy_targets(queries, 0, 4)[1].sum() == 12  # 4 queries with one earlier copy, 4 with two
    first_layer = result.heads[result.heads["layer"] == 1]
    assert (first_layer["entropy"] <= math.log(3) + 1e-6).all() and (first_layer["first"] == 0).all()
    assert "layer 1 sees fewer keys (a sliding window)" in describe(result)


def test_detect_chance_fills_a_weight_that_rounded_to_zero_inside_the_seen_keys():
    """Half precision rounds weights below 3e-8 to 0: a key inside a query's causal run whose weight did so in every
    head and sample is still seen, and does not read as a sliding window."""
    from real_attention.comparison.detect import chance_summary

    queries = np.arange(4, 12)
    causal = np.tril(np.ones((12, 12), dtype=bool))[queries]
    holed = causal.copy()
    holed[:, 2] = False  # key 2 rounded to 0 everywhere
    summary = chance_summary(np.stack([causal, holed]), queries, 0, 4, half_precision=True)
    assert "chance_by_layer" not in summary
    assert summary["chance"] == chance_summary(causal[None], queries, 0, 4)["chance"]


def test_detect_chance_counts_only_the_keys_a_mask_with_gaps_lets_through():
    """float32 maps are read as they are. The gaps between a query's seen keys were filled in any precision, so a
    decoder whose queries see the first key and a window of 3 (a global token, or a block-sparse mask) got the
    chance levels of a full causal mask: induction 0.156 where no key of it is visible, entropy 2.22 for ln 4."""
    from real_attention.comparison.detect import chance_summary

    tokens, queries = 13, np.arange(5, 13)  # a BOS, 4 tokens x 3 repeats: the queries of repeats 2 and 3
    key = np.arange(tokens)[None, :]
    window = (key == 0) | ((key <= queries[:, None]) & (key > queries[:, None] - 3))  # (Q, T): key 0 and i-2..i
    levels = chance_summary(window[None], queries, 1, 4)["chance"]
    assert levels == {"induction": 0.0, "duplicate": 0.0, "previous": 0.25, "first": 0.25,
                      "entropy": round(math.log(4), 6)}
    filled = chance_summary(window[None], queries, 1, 4, half_precision=True)["chance"]
    assert filled["entropy"] > 2 and filled["induction"] > 0.1  # in half precision the run is filled, as before


def test_detect_records_its_batch_size_and_device_and_takes_numpy_integers(tiny, tmp_path):
    """Options given as numpy integers were stored as they were: write_detect crashed on JSON (int64), after all the
    work. The summary lacked the batch size and the device, which move the scores in their last digits."""
    result = ra.detect(tiny, length=np.int64(3), repeats=np.int64(2), samples=np.int64(2), seed=np.int64(7),
                       batch_size=np.int64(1))
    results, _ = ra.write_detect(result, tmp_path, "tiny", formats=())
    summary = json.loads((results / "summary.json").read_text())
    assert (summary["length"], summary["repeats"], summary["samples"], summary["seed"]) == (3, 2, 2, 7)
    assert summary["batch_size"] == 1 and summary["device"] == "cpu"


def test_detect_figure_titles_do_not_overlap_and_large_grids_keep_a_scale():
    """A one-head model's titles ran into each other and were cut; above 16 layers the cells carry no numbers and
    there was no colour bar, so the shades had no scale."""
    from real_attention.comparison.figures import detect_figure

    for layers, per_layer in ((1, 1), (30, 9)):
        layer, head = np.indices((layers, per_layer)).reshape(2, -1)
        heads = pd.DataFrame({"layer": layer + 1, "head": head + 1, "induction": np.full(layer.size, 0.17),
                              "previous": np.full(layer.size, 0.5)})
        fig = detect_figure(heads, "tiny: repeated random tokens")
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        grids = [ax for ax in fig.axes if ax.get_title()]
        boxes = [ax.title.get_window_extent(renderer) for ax in grids]
        assert len(boxes) == 2 and boxes[0].x1 < boxes[1].x0, (layers, boxes)
        assert all(0 <= box.x0 and box.x1 <= fig.bbox.x1 for box in boxes)
        bars = [ax for ax in fig.axes if ax not in grids]
        assert len(bars) == 1 and bars[0].get_ylabel() == "weight", (layers, per_layer)


def test_a_model_without_layers_or_with_nan_maps_is_one_error(tiny_model_dir, tmp_path, tiny, monkeypatch):
    """A 0-layer model crashed detect (np.argmax of nothing); NaN maps tripped an assert."""
    import shutil

    import torch
    from transformers import BertConfig, BertModel

    folder = tmp_path / "no-layers"
    shutil.copytree(tiny_model_dir, folder)
    BertModel(BertConfig(vocab_size=tiny.model.config.vocab_size, hidden_size=8, num_hidden_layers=0,
                         num_attention_heads=2, intermediate_size=16)).save_pretrained(folder)
    with pytest.raises(ra.ModelUnavailable, match=r"has no attention layer \(num_hidden_layers 0\)"):
        ra.load(str(folder))
    from real_attention.comparison import detect as detect_module

    def nan_scores(weights, queries, length, offset=0):
        sums, seen = real_scores(weights, queries, length, offset)
        return sums * float("nan"), torch.zeros_like(seen)

    real_scores = detect_module.layer_scores
    monkeypatch.setattr(detect_module, "layer_scores", nan_scores)
    with pytest.raises(ra.ModelUnavailable, match=r"^layer 1 of .* gives no query weight above 0 \(its maps hold NaN"):
        ra.detect(tiny, length=3, repeats=2, samples=1)
    calls = []

    def nan_in_one_batch(weights, queries, length, offset=0):  # the second layer of the second batch only
        calls.append(1)
        sums, seen = real_scores(weights, queries, length, offset)
        return (sums * float("nan"), seen) if len(calls) == tiny.layers + 2 else (sums, seen)

    monkeypatch.setattr(detect_module, "layer_scores", nan_in_one_batch)
    with pytest.raises(ra.ModelUnavailable, match=r"^layer 2 of .* gives scores that are not finite \(its maps"):
        ra.detect(tiny, length=3, repeats=2, samples=2, batch_size=1)


def test_detect_counts_every_earlier_copy_against_a_direct_loop(tiny):
    """induction and duplicate sum the weight on every earlier copy (and the token after each), the keys
    TransformerLens's detector looks at: checked against a plain loop over the model's own attentions."""
    import torch

    from real_attention.comparison.detect import sequences

    length, repeats, samples = 4, 3, 2
    result = ra.detect(tiny, length=length, repeats=repeats, samples=samples, seed=5)
    ids, offset, _ = sequences(tiny, length, repeats, samples, 5)
    with torch.no_grad():
        attentions = tiny.model(input_ids=torch.tensor(ids), attention_mask=torch.ones(ids.shape, dtype=torch.long),
                                output_attentions=True).attentions
    induction = np.zeros((tiny.layers, tiny.heads))
    duplicate = np.zeros_like(induction)
    queries = range(offset + length, offset + length * repeats)
    for sample in range(samples):
        for i in queries:
            for k in range(1, (i - offset) // length + 1):
                for layer, maps in enumerate(attentions):
                    induction[layer] += maps[sample, :, i, i - k * length + 1].double().numpy()
                    duplicate[layer] += maps[sample, :, i, i - k * length].double().numpy()
    count = samples * len(queries)
    np.testing.assert_allclose(result.heads["induction"], induction.reshape(-1) / count, atol=1e-12)
    np.testing.assert_allclose(result.heads["duplicate"], duplicate.reshape(-1) / count, atol=1e-12)


def test_detect_leaves_out_bert_unused_tokens(minilm):
    """BERT's [unusedN] rows were never trained: they are not drawn (nor [CLS], [SEP], ...)."""
    from real_attention.comparison.detect import candidate_ids

    ids = candidate_ids(minilm)
    pieces = minilm.tokenizer.convert_ids_to_tokens(ids.tolist())
    assert not [p for p in pieces if p.startswith("[unused") or p in ("[CLS]", "[SEP]", "[PAD]", "[MASK]")]
    assert len(ids) == 30522 - 5 - 994


# --- real models ---------------------------------------------------------------------------------------------------


SEED_LINES = (1, 10, 12)  # lines of benchmarks/corpus_seeds.txt; SmolLM2 joins words of lines 10 and 12


@pytest.mark.slow
def test_minilm_against_smollm2_end_to_end(minilm, smollm2, tmp_path):
    lines = (Path(__file__).parent.parent / "benchmarks/corpus_seeds.txt").read_text(encoding="utf-8").splitlines()
    result = ra.compare([minilm, smollm2], [lines[i - 1] for i in SEED_LINES], names=["minilm", "smollm2"])
    assert result.summary["rule"] == "words" and result.summary["counts"]["joined"] == 2  # "$Q$," and "$Q=XW^Q$,"
    assert result.matrix.shape == (72 + 270, 72 + 270)
    assert 0 <= result.matrix.min() and result.matrix.max() <= LN2
    assert len(result.matching) == 72 and result.matching["layer_b"].notna().all()
    results, figures = ra.write_compare(result, tmp_path)
    assert results.name == "minilm-vs-smollm2"
    assert sorted(p.name for p in figures.iterdir()) == ["distances.png", "layers.png", "mds.png"]
    detected = ra.detect(smollm2, samples=8)
    assert detected.heads.shape == (270, 7)
    assert detected.summary["top"]["induction"][0]["score"] > 0.3  # SmolLM2 has induction heads


def test_detect_advances_its_progress_bar_by_samples(tiny):
    made = []

    class Bar:
        def __init__(self, total, desc):
            self.total, self.desc, self.done, self.closed = total, desc, 0, False
            made.append(self)

        def update(self, n):
            self.done += n

        def close(self):
            self.closed = True

    ra.detect(tiny, length=3, repeats=2, samples=5, batch_size=2, progress=Bar)
    (bar,) = made
    assert (bar.total, bar.desc, bar.done, bar.closed) == (5, "detect", 5, True)
    with pytest.raises(ra.InputError, match="progress must be"):
        ra.detect(tiny, length=3, repeats=2, samples=1, progress=3)


def test_detect_records_how_the_weights_differ_from_the_published_ones(tiny):
    result = ra.detect(tiny, length=4, repeats=2, samples=1)
    assert "weights" in result.summary and result.summary["weights"] == tiny.choice.weights_note
    assert "every earlier copy" in result.summary["scores"]["induction"]


@pytest.mark.parametrize("command", ["compare", "detect", "run", "importance"])
def test_an_out_whose_name_is_too_long_is_one_error_line(tiny_model_dir, tmp_path, command):
    """The early check of the output folders looked at the path unguarded: a name over 255 bytes (ENAMETOOLONG),
    or a folder that may not be searched, was a traceback, where the writing stage said one line."""
    corpus = tmp_path / "lines.txt"
    corpus.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    model = str(tiny_model_dir)
    out = tmp_path / ("a" * 300)
    arguments = {"compare": ["compare", "--corpus", str(corpus), "--model", model, "--model", model],
                 "detect": ["detect", "--model", model],
                 "run": ["run", "--model", model, "--no-figures", "--no-report"],
                 "importance": ["importance", "--corpus", str(corpus), "--model", model]}[command]
    result = CliRunner().invoke(cli, arguments + ["--out", str(out), "--quiet"])
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output  # refused as the option is read, since 2026-12-07
    assert lines[0].startswith("Error: --out ") and "is too long for a path" in lines[0], lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lines.txt"]


def test_matching_says_how_far_a_forced_partner_is_and_which_matches_are_mutual():
    """The Hungarian method gives every head a partner; a reader could not tell a partner that is the head's nearest
    from one forced on it (on MiniLM against SmolLM2, 19% of partners were the nearest, 8% mutual)."""
    from real_attention.comparison.compare import ComparedModel, heads_frame, matching_frame

    models = [ComparedModel("a", "a", "r", 1, 3, False), ComparedModel("b", "b", "r", 1, 2, False)]
    block = np.array([[0.1, 0.5], [0.2, 0.3], [0.9, 0.8]])
    matrix = np.zeros((5, 5))
    matrix[:3, 3:], matrix[3:, :3] = block, block.T
    frame = matching_frame(models, heads_frame(models), matrix)
    assert frame["rank"].tolist()[:2] == [1, 2] and pd.isna(frame["rank"].iloc[2])
    assert frame["mutual"].tolist() == [True, False, False]  # a2's partner b2 is not its nearest (b1 is)
    tied = np.array([[0.1, 0.1], [0.1, 0.1], [0.9, 0.8]])  # every partner of a1 and a2 is as near as can be
    matrix[:3, 3:], matrix[3:, :3] = tied, tied.T
    frame = matching_frame(models, heads_frame(models), matrix)
    assert frame["rank"].tolist()[:2] == [1, 1] and frame["mutual"].tolist() == [True, True, False]


def test_mds_says_how_much_of_the_matrix_its_axes_show():
    from real_attention.comparison.jsd import mds_fit

    points = np.random.default_rng(0).random((10, 3))
    euclidean = np.linalg.norm(points[:, None] - points[None], axis=-1)
    assert mds_fit(euclidean, 3) == {"shown": 1.0, "negative": 0.0} and mds_fit(euclidean, 2)["shown"] < 1
    not_metric = np.array([[0.0, 1, 5], [1, 0, 1], [5, 1, 0]])  # 5 > 1 + 1
    assert mds_fit(not_metric)["negative"] == 0.21875
    simplex = 1.0 - np.eye(4)  # eigenvalues that round to -1e-17 are no negative share
    assert mds_fit(simplex) == {"shown": round(2 / 3, 6), "negative": 0.0}
