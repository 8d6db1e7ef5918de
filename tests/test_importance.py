"""`real-attention importance` / ra.importance / ra.objective: head masking, the objectives, ablation and Taylor
scores, pruning, files; against hand-written forwards, transformers' own losses and finite differences."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from conftest import TINY_WORDS

import real_attention as ra
from real_attention.cli import cli
from real_attention.head_importance.masking import masking
from real_attention.head_importance.objectives import Scorer, prepare, sentence_gradients, taylor
from real_attention.head_importance.run import scorer_for

TEXTS = ["I sat on the bank.", "I went to the bank to get some money.", "My garden in the end."]
LABELLED = [{"text": "I sat on the bank.", "label": "pos"}, {"text": "I went to the bank.", "label": "neg"},
            {"text": "Some money in my garden.", "label": 1}, {"text": "The end of the garden.", "label": 0}]
DECODER_WORDS = ["the", "river", "flooded", "bank", ".", "she", "went", "to", "get", "some", "money", "i", "sat",
                 "on", "my", "garden", "he", "borrowed", "from", "at", "along", "muddy", "her", "salary"]
DECODER_TEXTS = ["the river flooded the bank .", "she went to the bank to get some money .", "i sat on my garden"]


def _bert_folder(folder: Path, kind: str) -> Path:
    """A random 3-layer, 4-head BERT: `mlm` with its masked-LM head, `label` with a 2-class classifier."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertForSequenceClassification, BertTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + TINY_WORDS
    BertTokenizerFast(vocab={piece: i for i, piece in enumerate(vocab)}, do_lower_case=True,
                      strip_accents=False).save_pretrained(folder)
    torch.manual_seed(1)
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=3, num_attention_heads=4,
                        intermediate_size=32, max_position_embeddings=24,
                        id2label={0: "neg", 1: "pos"}, label2id={"neg": 0, "pos": 1})
    (BertForMaskedLM if kind == "mlm" else BertForSequenceClassification)(config).save_pretrained(folder)
    return folder


def _decoder_folder(folder: Path, kind: str) -> Path:
    """A random 2-layer decoder with its language-model head: llama (4 query heads on 2 key/value heads), gpt2
    or gemma2 (sliding windows, logit soft-capping), and a word-level tokenizer."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import (Gemma2Config, Gemma2ForCausalLM, GPT2Config, GPT2LMHeadModel, LlamaConfig,
                              LlamaForCausalLM, PreTrainedTokenizerFast)

    vocab = {piece: i for i, piece in enumerate(["<pad>", "<s>", "<unk>", *DECODER_WORDS])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.normalizer = normalizers.Lowercase()
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    backend.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", pad_token="<pad>",
                            bos_token="<s>").save_pretrained(folder)
    torch.manual_seed(2)
    size = dict(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, intermediate_size=32,
                max_position_embeddings=32, pad_token_id=0)
    if kind == "llama":
        model = LlamaForCausalLM(LlamaConfig(num_attention_heads=4, num_key_value_heads=2, **size))
    elif kind == "gpt2":
        model = GPT2LMHeadModel(GPT2Config(vocab_size=len(vocab), n_embd=16, n_layer=2, n_head=4, n_positions=32))
    elif kind == "granite":  # a tied head that also divides the logits by logits_scaling
        from transformers import GraniteConfig, GraniteForCausalLM

        model = GraniteForCausalLM(GraniteConfig(num_attention_heads=4, num_key_value_heads=2, logits_scaling=8.0,
                                                 tie_word_embeddings=True, **size))
    else:
        model = Gemma2ForCausalLM(Gemma2Config(num_attention_heads=4, num_key_value_heads=1, head_dim=4,
                                               sliding_window=3, **size))
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def mlm_dir(tmp_path_factory) -> Path:
    return _bert_folder(tmp_path_factory.mktemp("tiny-mlm"), "mlm")


@pytest.fixture(scope="module")
def label_dir(tmp_path_factory) -> Path:
    return _bert_folder(tmp_path_factory.mktemp("tiny-label"), "label")


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory) -> Path:
    return _decoder_folder(tmp_path_factory.mktemp("tiny-llama-lm"), "llama")


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory) -> Path:
    return _decoder_folder(tmp_path_factory.mktemp("tiny-gpt2-lm"), "gpt2")


def _scorer(folder: Path, objective: str, float64: bool = False) -> Scorer:
    scorer = scorer_for(str(folder), objective, objective == "label")
    if float64:
        (scorer.full if scorer.full is not None else scorer.base).double()
    return scorer


# ------------------------------------------------------------------------------------------------- masking


@pytest.mark.parametrize("kind", ["bert", "llama", "gpt2", "gemma2"])
def test_all_ones_mask_is_the_intact_model_bit_for_bit(kind, tiny_model_dir, tmp_path):
    import torch

    folder = tiny_model_dir if kind == "bert" else _decoder_folder(tmp_path, kind)
    loaded = ra.load(str(folder))
    encoded = loaded.tokenizer(DECODER_TEXTS if kind != "bert" else TEXTS, return_tensors="pt", padding=True)
    with torch.inference_mode():
        plain = loaded.model(**encoded).last_hidden_state
        with masking(loaded.model, torch.ones(1, loaded.layers, loaded.heads), loaded.layers) as state:
            masked = loaded.model(**encoded).last_hidden_state
        with masking(loaded.model, torch.zeros(1, loaded.layers, loaded.heads), loaded.layers):
            zeroed = loaded.model(**encoded).last_hidden_state
    assert sorted(state.calls) == list(range(loaded.layers))  # every layer went through the wrapper
    assert torch.equal(plain, masked)
    assert not torch.allclose(plain, zeroed)  # the mask reaches the model
    assert loaded.model.config._attn_implementation == "eager"  # put back


@pytest.mark.parametrize("kind", ["mpnet", "deberta-v2"])
def test_inline_attention_families_are_masked_at_the_output_projection(kind, tmp_path):
    """MPNet and DeBERTa compute attention inline: ξ scales the heads' outputs entering the output projection.
    A whole layer masked = that projection fed zeros = its weight set to zero."""
    import torch
    from transformers import BertTokenizerFast, DebertaV2Config, DebertaV2Model, MPNetConfig, MPNetModel

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + TINY_WORDS
    BertTokenizerFast(vocab={piece: i for i, piece in enumerate(vocab)}, do_lower_case=True,
                      strip_accents=False).save_pretrained(tmp_path)
    torch.manual_seed(3)
    size = dict(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=4,
                intermediate_size=32, max_position_embeddings=32)
    (MPNetModel(MPNetConfig(**size)) if kind == "mpnet" else DebertaV2Model(DebertaV2Config(**size))
     ).save_pretrained(tmp_path)
    loaded = ra.load(str(tmp_path))
    encoded = loaded.tokenizer(TEXTS, return_tensors="pt", padding=True)
    xi = torch.ones(1, loaded.layers, loaded.heads)
    with torch.inference_mode():
        plain = loaded.model(**encoded).last_hidden_state
        with masking(loaded.model, xi, loaded.layers) as state:
            ones = loaded.model(**encoded).last_hidden_state
        xi[0, 1] = 0.0
        with masking(loaded.model, xi, loaded.layers):
            masked = loaded.model(**encoded).last_hidden_state
        projection = loaded.model.get_submodule("encoder.layer.1." + ("attention.attn.o" if kind == "mpnet"
                                                                      else "attention.output.dense"))
        projection.weight.zero_()
        zeroed = loaded.model(**encoded).last_hidden_state
    assert sorted(state.calls) == [0, 1]
    assert torch.equal(plain, ones)
    assert torch.allclose(masked, zeroed, atol=1e-6) and not torch.allclose(masked, plain)


def _hand_bert(model, input_ids, attention_mask, zero_layer: int | None):
    """BERT written out by hand: embeddings, then per layer self-attention (its context set to zero in
    `zero_layer`), output dense + residual + LayerNorm, feed-forward + residual + LayerNorm."""
    import torch

    x = model.embeddings(input_ids=input_ids)
    batch, length, hidden = x.shape
    heads = model.config.num_attention_heads
    size = hidden // heads
    bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
    for number, layer in enumerate(model.encoder.layer):
        attention = layer.attention

        def split(t):
            return t.view(batch, length, heads, size).transpose(1, 2)

        q, k, v = (split(getattr(attention.self, name)(x)) for name in ("query", "key", "value"))
        weights = torch.softmax(q @ k.transpose(-1, -2) / size ** 0.5 + bias, dim=-1)
        context = (weights @ v).transpose(1, 2).reshape(batch, length, hidden)
        if number == zero_layer:
            context = torch.zeros_like(context)
        x = attention.output.LayerNorm(attention.output.dense(context) + x)
        inner = layer.intermediate(x)
        x = layer.output.LayerNorm(layer.output.dense(inner) + x)
    return x


def test_a_mask_too_large_for_float32_is_an_input_error_not_nan(mlm_dir):
    """1e30 is finite in float64 but inf in the model's float32: the objective came back NaN, said nowhere."""
    import torch

    from real_attention.head_importance.run import _mask_array

    model = ra.load(str(mlm_dir))
    with pytest.raises(ra.InputError, match=r"float32 can hold .* not 1e\+40"):
        ra.objective(str(mlm_dir), TEXTS, "mlm", head_mask=np.full((model.layers, model.heads), 1e40))
    with pytest.raises(ra.InputError, match=r"the objective is not finite \(nan\) under this head_mask: its largest "
                                            r"value in size, 1e\+30, overflows"):
        ra.objective(str(mlm_dir), TEXTS, "mlm", head_mask=np.full((model.layers, model.heads), 1e30))
    assert np.isfinite(ra.objective(mlm_dir, TEXTS, "mlm", head_mask=np.full((model.layers, model.heads), 1.5)))  # a Path
    # a model in half precision holds far less: the message names its type
    with pytest.raises(ra.InputError, match=r"the model's float16 can hold \(at most about 6.55e\+04 in size\), not 1e\+05"):
        _mask_array(np.full((model.layers, model.heads), 1e5), model.layers, model.heads, torch.float16)


@pytest.mark.parametrize("zero_layer", [None, 0, 2])
def test_masking_a_whole_layer_zeroes_its_attention_output(zero_layer, tiny_model_dir):
    import torch

    loaded = ra.load(str(tiny_model_dir))
    encoded = loaded.tokenizer(TEXTS, return_tensors="pt", padding=True)
    xi = torch.ones(1, loaded.layers, loaded.heads)
    if zero_layer is not None:
        xi[0, zero_layer] = 0.0
    with torch.inference_mode():
        with masking(loaded.model, xi, loaded.layers):
            ours = loaded.model(**encoded).last_hidden_state
        hand = _hand_bert(loaded.model, encoded["input_ids"], encoded["attention_mask"], zero_layer)
    real = encoded["attention_mask"].bool()
    assert torch.allclose(ours[real], hand[real], atol=1e-5)


def test_per_row_masks_equal_one_mask_at_a_time(tiny_model_dir):
    """Several masks in one forward pass (the batch repeated along the batch dimension) give each mask's own result."""
    import torch

    loaded = ra.load(str(tiny_model_dir))
    encoded = loaded.tokenizer(TEXTS, return_tensors="pt", padding=True)
    rng = np.random.default_rng(0)
    masks = torch.from_numpy(rng.uniform(0, 1.5, (2, loaded.layers, loaded.heads))).float()
    with torch.inference_mode():
        singles = []
        for mask in masks:
            with masking(loaded.model, mask[None], loaded.layers):
                singles.append(loaded.model(**encoded).last_hidden_state)
        rows = {key: value.repeat(2, 1) for key, value in encoded.items()}
        with masking(loaded.model, masks.repeat_interleave(len(TEXTS), 0), loaded.layers):
            together = loaded.model(**rows).last_hidden_state
    assert torch.allclose(torch.cat(singles), together, atol=1e-5)


# ---------------------------------------------------------------------------------------------- objectives


@pytest.mark.parametrize("objective", ["lm", "mlm", "label", "embedding"])
def test_objective_with_all_ones_equals_the_intact_objective(objective, llama_dir, mlm_dir, label_dir,
                                                             tiny_model_dir):
    folder = {"lm": llama_dir, "mlm": mlm_dir, "label": label_dir, "embedding": tiny_model_dir}[objective]
    scorer = _scorer(folder, objective)
    sentences = LABELLED if objective == "label" else DECODER_TEXTS if objective == "lm" else TEXTS
    ones = np.ones((scorer.layers, scorer.heads))
    intact = ra.objective(scorer.loaded, sentences, objective)
    assert ra.objective(scorer.loaded, sentences, objective, head_mask=ones) == intact
    if objective == "embedding":
        assert intact == 0.0
    off = ones.copy()
    off[0, 1] = 0.0
    assert ra.objective(scorer.loaded, sentences, objective, head_mask=off) != intact


def test_the_embedding_objective_is_never_negative(tmp_path):
    """k masks side by side round the embedding otherwise than the intact pass: cos came out above 1 and the intact
    model's objective (the pruning curve's first point) at -1.2e-7 on this 1-layer, 1-head BERT, at k = 8."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    from real_attention.head_importance.objectives import evaluate, prepare

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + TINY_WORDS
    BertTokenizerFast(vocab={piece: i for i, piece in enumerate(vocab)}, do_lower_case=True,
                      strip_accents=False).save_pretrained(tmp_path)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=1,
                         intermediate_size=32, max_position_embeddings=24)).save_pretrained(tmp_path)
    scorer = _scorer(tmp_path, "embedding")
    values = evaluate(scorer, prepare(scorer, ["bank"]), np.ones((8, 1, 1))).objective
    assert (values >= 0).all() and (values < 1e-6).all(), values


def test_lm_of_one_sentence_is_transformers_loss(llama_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(llama_dir, attn_implementation="eager").eval()
    ids = AutoTokenizer.from_pretrained(llama_dir)(DECODER_TEXTS[1], return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        expected = float(model(ids, labels=ids).loss)
    assert ra.objective(str(llama_dir), [DECODER_TEXTS[1]], "lm") == pytest.approx(expected, rel=1e-6)
    # several sentences: summed over every predicted position, divided by their number
    scorer = _scorer(llama_dir, "lm")
    total = count = 0.0
    for text in DECODER_TEXTS:
        ids = scorer.loaded.tokenizer(text, return_tensors="pt")["input_ids"]
        with torch.inference_mode():
            total += float(model(ids, labels=ids).loss) * (ids.shape[1] - 1)
        count += ids.shape[1] - 1
    assert ra.objective(scorer.loaded, DECODER_TEXTS, "lm", batch_size=2) == pytest.approx(total / count, rel=1e-6)


def test_base_decoder_uses_its_tied_embeddings_as_head(tmp_path):
    """ra.load gives the base model; a decoder whose head is tied to its input embeddings needs no reload."""
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = _decoder_folder(tmp_path, "llama")
    config = LlamaConfig.from_pretrained(folder)
    config.tie_word_embeddings = True
    LlamaForCausalLM(config).save_pretrained(folder)
    loaded = ra.load(str(folder))
    assert loaded.full is None
    scorer = scorer_for(loaded, "lm", False)
    assert scorer.full is None
    assert ra.objective(loaded, DECODER_TEXTS, "lm") == pytest.approx(ra.objective(str(folder), DECODER_TEXTS, "lm"),
                                                                      rel=1e-6)


def test_a_tied_head_that_scales_its_logits_is_loaded(tmp_path):
    """Granite's tied head divides the logits by logits_scaling: the tied shortcut (the input embeddings' product)
    left that out, so ra.objective(ra.load(folder)) was not the objective of the folder's own model."""
    import torch
    from transformers import AutoModelForCausalLM

    folder = _decoder_folder(tmp_path, "granite")
    loaded = ra.load(str(folder))
    assert scorer_for(loaded, "lm", False).full is not None  # the head, loaded
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = loaded.tokenizer(DECODER_TEXTS[0], return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        expected = float(model(ids, labels=ids).loss)
    assert ra.objective(loaded, DECODER_TEXTS[:1], "lm") == pytest.approx(expected, rel=1e-6)
    assert ra.objective(str(folder), DECODER_TEXTS[:1], "lm") == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("setting, why", [({"num_labels": 1}, "one output"),
                                          ({"problem_type": "multi_label_classification"}, "multi label")])
def test_label_refuses_a_head_that_is_not_one_class_per_sentence(setting, why, tmp_path):
    """A one-output classifier (a regression, a cross-encoder's score) gave an objective of exactly 0 under every
    mask (softmax over one logit), so every head read as prunable; a multi-label one got a loss it was not trained
    with."""
    from transformers import BertConfig, BertForSequenceClassification

    folder = _bert_folder(tmp_path / "label", "label")
    config = BertConfig.from_pretrained(folder)
    if "num_labels" in setting:
        config.id2label, config.label2id = {0: "score"}, {"score": 0}
    else:
        config.problem_type = setting["problem_type"]
    BertForSequenceClassification(config).save_pretrained(folder)
    with pytest.raises(ra.InputError, match=rf"objective 'label' is not possible .*{why}"):
        ra.objective(str(folder), LABELLED, "label")


def test_mlm_never_asks_for_unk(mlm_dir):
    """[UNK] is a special token the vocabulary gives: the special-tokens mask leaves it unmarked, so mlm masked it and
    scored the model on predicting [UNK]."""
    scorer = _scorer(mlm_dir, "mlm")
    unk = scorer.loaded.tokenizer.unk_token_id
    texts = ["xyzzy qwv bank plugh frobnicate", "zork quux the bank"]
    for seed in range(20):
        prepared = prepare(scorer, texts, seed=seed)
        for batch in prepared.batches:
            assert unk not in batch.targets[batch.targets != -100], seed
            assert ((batch.targets != -100).sum(1) >= 1).all()


def test_pruning_that_lowers_the_loss_stays_within_tolerance():
    """Within tolerance was |objective - intact|: a pruned model whose loss fell 2% ended the run of steps within it."""
    from real_attention.head_importance.run import _within

    curve = pd.DataFrame({"fraction": [0.0, 0.1, 0.2, 0.3], "objective": [0.50, 0.49, 0.495, 0.52]})
    assert _within(curve, 0.50, 0.005) == 0.2


def test_mlm_masks_fifteen_percent_seeded(mlm_dir):
    scorer = _scorer(mlm_dir, "mlm")
    first = prepare(scorer, TEXTS, seed=3)
    again = prepare(scorer, TEXTS, seed=3)
    mask_id = scorer.loaded.tokenizer.mask_token_id
    for batch, same in zip(first.batches, again.batches):
        assert np.array_equal(batch.input_ids, same.input_ids)
        masked = batch.input_ids == mask_id
        assert np.array_equal(masked, batch.targets != -100)
        assert (masked.sum(1) >= 1).all()
    ordinary = [len(scorer.loaded.tokenizer(t)["input_ids"]) - 2 for t in TEXTS]
    assert first.tokens == sum(max(1, round(0.15 * n)) for n in ordinary)


def test_label_accuracy_is_a_plain_evaluation_loop(label_dir):
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(label_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(label_dir)
    right = 0
    losses = []
    for item in LABELLED:
        label = item["label"] if isinstance(item["label"], int) else model.config.label2id[item["label"]]
        with torch.inference_mode():
            logits = model(**tokenizer(item["text"], return_tensors="pt")).logits[0]
        right += int(int(logits.argmax()) == label)
        losses.append(float(torch.nn.functional.cross_entropy(logits[None], torch.tensor([label]))))
    result = ra.importance(str(label_dir), LABELLED, "label", batch_size=3, prune_step=0.5)
    assert result.summary["intact_accuracy"] == right / len(LABELLED)
    assert result.summary["intact_objective"] == pytest.approx(np.mean(losses), rel=1e-6)
    start = result.pruning[result.pruning["heads_pruned"] == 0]
    assert (start["accuracy"] == right / len(LABELLED)).all()


@pytest.mark.parametrize("folder_name, objective", [("mlm_dir", "mlm"), ("gpt2_dir", "lm"), ("label_dir", "label")])
def test_taylor_is_the_finite_difference_per_sentence(folder_name, objective, request):
    """dL(x)/dξ_h at ξ = 1 from one backward pass = (L(ξ_h = 1) - L(ξ_h = 1 - ε)) / ε, per sentence, in float64
    (GPT-2 for lm: Llama's eager attention takes its softmax in float32 whatever the model's dtype)."""
    scorer = _scorer(request.getfixturevalue(folder_name), objective, float64=True)
    sentences = LABELLED[:2] if objective == "label" else (DECODER_TEXTS if objective == "lm" else TEXTS)[:2]
    epsilon = 1e-6
    for sentence in sentences:
        texts = [sentence["text"]] if isinstance(sentence, dict) else [sentence]
        labels = None
        if objective == "label":
            labels = np.array([scorer.base.config.label2id.get(sentence["label"], sentence["label"])])
        prepared = prepare(scorer, texts, labels)
        gradient = sentence_gradients(scorer, prepared.batches[0])[0]
        base = ra.objective(scorer.loaded, [sentence], objective)
        for layer, head in [(0, 0), (1, 3), (scorer.layers - 1, 2)]:
            mask = np.ones((scorer.layers, scorer.heads))
            mask[layer, head] = 1 - epsilon
            difference = (base - ra.objective(scorer.loaded, [sentence], objective, head_mask=mask)) / epsilon
            assert gradient[layer, head] == pytest.approx(difference, rel=1e-4, abs=1e-7)
        assert np.allclose(taylor(scorer, prepared), np.abs(gradient))


# --------------------------------------------------------------------------------------------- importance


def test_importance_tables_and_pruning(mlm_dir):
    result = ra.importance(str(mlm_dir), TEXTS, "mlm", batch_size=2, prune_step=0.25)
    heads, pruning, summary = result.heads, result.pruning, result.summary
    assert list(heads.columns) == ["layer", "head", "ablation", "taylor", "taylor_normalized", "rank"]
    assert heads["layer"].tolist() == [1] * 4 + [2] * 4 + [3] * 4 and heads["head"].tolist() == [1, 2, 3, 4] * 3
    assert sorted(heads["rank"]) == list(range(1, 13))
    assert heads.loc[heads["rank"] == 1, "ablation"].item() == heads["ablation"].max()
    # each ablation is the objective with that head alone masked minus the intact objective
    mask = np.ones((3, 4))
    mask[1, 2] = 0
    alone = ra.objective(str(mlm_dir), TEXTS, "mlm", head_mask=mask)
    row = heads[(heads["layer"] == 2) & (heads["head"] == 3)]
    assert row["ablation"].item() == pytest.approx(alone - summary["intact_objective"], abs=1e-6)
    norms = heads.groupby("layer")["taylor_normalized"].apply(lambda s: float(np.sqrt((s ** 2).sum())))
    assert np.allclose(norms, 1.0)
    assert list(pruning.columns) == ["order", "heads_pruned", "fraction", "objective"]
    assert pruning["order"].unique().tolist() == ["taylor", "ablation", "random"]
    assert pruning["heads_pruned"].unique().tolist() == [0, 3, 6, 9, 12]
    assert np.allclose(pruning[pruning["heads_pruned"] == 0]["objective"], summary["intact_objective"])
    every = pruning[pruning["heads_pruned"] == 12]["objective"]
    assert np.allclose(every, every.iloc[0])  # every head pruned: the same model whatever the order
    first = pruning[(pruning["order"] == "ablation") & (pruning["heads_pruned"] == 3)]["objective"].item()
    weakest = heads.sort_values(["ablation", "layer", "head"]).head(3)
    mask = np.ones((3, 4))
    mask[weakest["layer"] - 1, weakest["head"] - 1] = 0
    assert first == pytest.approx(ra.objective(str(mlm_dir), TEXTS, "mlm", head_mask=mask), abs=1e-6)
    # the taylor order is Michel et al.'s: the layer-normalised scores, least important first
    taylor_first = pruning[(pruning["order"] == "taylor") & (pruning["heads_pruned"] == 3)]["objective"].item()
    weakest = heads.sort_values(["taylor_normalized", "layer", "head"]).head(3)
    mask = np.ones((3, 4))
    mask[weakest["layer"] - 1, weakest["head"] - 1] = 0
    assert taylor_first == pytest.approx(ra.objective(str(mlm_dir), TEXTS, "mlm", head_mask=mask), abs=1e-6)
    assert summary["scores_recomputed_after_each_step"] is False
    assert summary["masked_tokens"] > 0 and -1 <= summary["spearman_taylor_ablation"] <= 1
    assert set(summary["largest_fraction_within_tolerance"]) == {"taylor", "ablation", "random"}


def test_embedding_has_no_taylor_and_says_why(tiny_model_dir):
    result = ra.importance(str(tiny_model_dir), TEXTS, batch_size=2, prune_step=0.5)
    assert result.summary["objective"] == "embedding"
    # an ablation's last digits depend on the batch and the device: a rerun must know both
    assert result.summary["batch_size"] == 2 and result.summary["device"] == "cpu"
    assert result.heads["taylor"].isna().all()
    assert "zero" in result.summary["taylor_empty_because"]
    assert result.summary["spearman_taylor_ablation"] is None
    assert result.pruning["order"].unique().tolist() == ["ablation", "random"]
    assert (result.heads["ablation"] >= 0).all()


def test_auto_objective(tiny_model_dir, mlm_dir, label_dir, llama_dir):
    from real_attention.head_importance.objectives import choose_objective
    from real_attention.head_importance.run import model_config
    from real_attention.engine.models import choose_model

    def auto(folder, labels):
        return choose_objective(model_config(choose_model(None, str(folder), None)), "auto", labels, "m")

    assert auto(tiny_model_dir, False) == "embedding"
    assert auto(mlm_dir, False) == "mlm"
    assert auto(llama_dir, False) == "lm"
    assert auto(label_dir, True) == "label"
    assert auto(label_dir, False) == "embedding"


# --------------------------------------------------------------------------------------------------- CLI


def _corpus(tmp_path: Path, lines) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join(json.dumps(x) if isinstance(x, dict) else x for x in lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture()
def no_loading(monkeypatch):
    """Any model load fails the test: bad input must be refused before the model loads."""
    import real_attention.engine.models as models

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(models, "load_model", refuse)


@pytest.mark.parametrize("case", ["mlm_no_head", "label_no_labels", "label_no_classifier", "unknown_label",
                                  "empty", "bad_name", "lm_encoder", "negative_seed", "through_a_file",
                                  "empty_json_text", "empty_name"])
def test_bad_input_is_one_error_line_before_loading(case, tmp_path, tiny_model_dir, label_dir, no_loading):
    def corpus(folder: str, lines) -> Path:  # each in its own folder: _corpus always writes corpus.jsonl
        (tmp_path / folder).mkdir(exist_ok=True)
        return _corpus(tmp_path / folder, lines)

    texts = corpus("t", TEXTS)
    labelled = corpus("l", LABELLED)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n", encoding="utf-8")
    args = {
        "mlm_no_head": ["--model", str(tiny_model_dir), "--corpus", str(texts), "--objective", "mlm"],
        "label_no_labels": ["--model", str(label_dir), "--corpus", str(texts), "--objective", "label"],
        "label_no_classifier": ["--model", str(tiny_model_dir), "--corpus", str(labelled), "--objective", "label"],
        "unknown_label": ["--model", str(label_dir), "--corpus",
                          str(corpus("u", [{"text": "I sat.", "label": "maybe"}]))],
        "empty": ["--model", str(tiny_model_dir), "--corpus", str(empty)],
        "bad_name": ["--model", str(tiny_model_dir), "--corpus", str(texts), "--name", "../x"],
        "lm_encoder": ["--model", str(tiny_model_dir), "--corpus", str(texts), "--objective", "lm"],
        "negative_seed": ["--model", str(tiny_model_dir), "--corpus", str(texts), "--seed", "-1"],
        "empty_name": ["--model", str(tiny_model_dir), "--corpus", str(texts), "--name", ""],
        "through_a_file": ["--model", str(tiny_model_dir), "--corpus", str(texts / "x")],
        "empty_json_text": ["--model", str(tiny_model_dir), "--corpus",
                            str(corpus("e", [{"text": "I sat."}, {"text": "  "}]))],
    }[case]
    result = CliRunner().invoke(cli, ["importance", *args, "--out", str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()
    said = {"unknown_label": "no label 'maybe'", "empty_json_text": "line 2: its \"text\" is empty",
            "negative_seed": "Invalid value for '--seed': -1 is not in the range x>=0",
            "through_a_file": "cannot be read: Not a directory", "empty": "has no sentence"}
    assert said.get(case, "") in lines[0]


def test_mlm_on_minilm_is_one_error_line(needs_minilm, tmp_path, no_loading):
    result = CliRunner().invoke(cli, ["importance", "--model", "minilm", "--corpus", str(_corpus(tmp_path, TEXTS)),
                                      "--objective", "mlm", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.output.startswith("Error: objective 'mlm' is not possible with sentence-transformers/all-MiniLM")
    assert len(result.output.strip().splitlines()) == 1


def test_cli_writes_three_files_and_figures_deterministically(tmp_path, mlm_dir):
    corpus = _corpus(tmp_path, TEXTS)
    outputs = []
    for run in ("a", "b"):
        result = CliRunner().invoke(cli, ["importance", "--model", str(mlm_dir), "--corpus", str(corpus), "--name",
                                          "tiny", "--prune-step", "0.5", "--out", str(tmp_path / run)])
        assert result.exit_code == 0, result.output
        assert "objective mlm" in result.output and "wrote" in result.output
        assert "+-" not in result.output  # a negative ablation is "-0.001", not "+-0.001"
        outputs.append(tmp_path / run)
    results = Path("results/importance/tiny")
    figures = Path("figures/importance/tiny")
    assert sorted(p.name for p in (outputs[0] / results).iterdir()) == ["heads.csv", "pruning.csv", "summary.json"]
    assert sorted(p.name for p in (outputs[0] / figures).iterdir()) == ["ablation.png", "pruning.png", "taylor.png"]
    for folder in (results, figures):
        for path in (outputs[0] / folder).iterdir():
            if path.name != "summary.json":
                assert path.read_bytes() == (outputs[1] / folder / path.name).read_bytes(), path.name
    summary = json.loads((outputs[0] / results / "summary.json").read_text())
    assert summary["objective"] == "mlm" and summary["corpus"] == "tiny" and summary["sentences"] == 3
    assert summary["corpus_file"] == {"name": corpus.name, "sha256": hashlib.sha256(corpus.read_bytes()).hexdigest()}


def test_write_importance_keeps_old_results_when_it_fails(tmp_path, tiny_model_dir, monkeypatch):
    from real_attention.head_importance import run

    result = ra.importance(str(tiny_model_dir), TEXTS, prune_step=1.0)
    results, _ = ra.write_importance(result, tmp_path, "keep")
    before = (results / "heads.csv").read_bytes()

    def broken(*args, **kwargs):
        raise RuntimeError("drawing failed")

    monkeypatch.setattr("real_attention.head_importance.figures.pruning_figure", broken)
    changed = run.ImportanceResult(result.heads.assign(ablation=0.0), result.pruning, result.summary)
    with pytest.raises(RuntimeError):
        ra.write_importance(changed, tmp_path, "keep")
    assert (results / "heads.csv").read_bytes() == before
    assert not [p for p in (tmp_path / "results" / "importance").iterdir() if p.name.startswith(".keep.staging")]


# ---------------------------------------------------------------------------------------------- real models


@pytest.mark.slow
def test_the_embedding_is_cut_where_sentence_transformers_cuts_it(tiny_model_dir, tmp_path):
    """A folder's sentence_bert_config.json max_seq_length cuts a sentence for the embedding objective, as
    sentence-transformers does; an explicit max_tokens still wins, and a folder without the file keeps the
    model's maximum."""
    import shutil

    folder = Path(shutil.copytree(tiny_model_dir, tmp_path / "st-model"))
    (folder / "sentence_bert_config.json").write_text('{"max_seq_length": 6, "do_lower_case": false}')
    long = [" ".join(TINY_WORDS[:12]), "el banco de mi jardín ."]
    st = scorer_for(ra.load(folder), "embedding", False)
    plain = scorer_for(ra.load(tiny_model_dir), "embedding", False)
    cut = prepare(st, long)
    assert (cut.limit, cut.limit_from, cut.truncated) == (6, "sentence-transformers", 2)
    assert max(batch.input_ids.shape[1] for batch in cut.batches) == 6
    same = prepare(plain, long, max_tokens=6)
    assert [b.input_ids.tolist() for b in same.batches] == [b.input_ids.tolist() for b in cut.batches]
    assert (same.limit, same.limit_from) == (6, "max_tokens")
    asked = prepare(st, long, max_tokens=9)
    assert (asked.limit, asked.limit_from) == (9, "max_tokens")
    whole = prepare(plain, long)
    assert (whole.limit, whole.limit_from) == (plain.loaded.max_tokens, "model")
    (folder / "sentence_bert_config.json").write_text("not json")
    assert prepare(scorer_for(ra.load(folder), "embedding", False), long).limit_from == "model"


def test_minilm_embedding_end_to_end_on_the_seed_corpus(needs_minilm, tmp_path):
    seeds = Path(__file__).resolve().parent.parent / "benchmarks" / "corpus_seeds.txt"
    result = CliRunner().invoke(cli, ["importance", "--model", "minilm", "--corpus", str(seeds), "--limit", "3",
                                      "--max-tokens", "24", "--prune-step", "0.25", "--out", str(tmp_path),
                                      "--quiet"])
    assert result.exit_code == 0, result.output
    folder = tmp_path / "results" / "importance" / "corpus_seeds"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["objective"] == "embedding" and summary["intact_objective"] == 0.0
    assert summary["layers"] == 6 and summary["heads"] == 12 and summary["sentences"] == 3
    assert summary["pieces_limit"] == {"pieces": 24, "from": "max_tokens"}
    from real_attention.engine.models import choose_model, sentence_embedding_length

    assert sentence_embedding_length(choose_model(None, "minilm", None)) == 256  # sentence-transformers' cut
    import pandas as pd

    heads = pd.read_csv(folder / "heads.csv")
    assert len(heads) == 72 and (heads["ablation"] > 0).any()
    pruning = pd.read_csv(folder / "pruning.csv")
    every = pruning[pruning["fraction"] == 1.0]["objective"]
    assert (every > 0.05).all()  # without attention the embedding is another one
    assert (tmp_path / "figures" / "importance" / "corpus_seeds" / "ablation.png").is_file()


@pytest.mark.slow
def test_smollm2_lm_end_to_end_on_the_seed_corpus(smollm2, tmp_path):
    # the session's SmolLM2 (a load costs 16 s): the lm objective takes its tied output layer, no second load
    seeds = Path(__file__).resolve().parent.parent / "benchmarks" / "corpus_seeds.txt"
    first = next(line for line in seeds.read_text(encoding="utf-8").splitlines() if line.strip())
    result = ra.importance(smollm2, [first], max_tokens=8, prune_step=1.0, corpus=seeds.stem)
    ra.write_importance(result, tmp_path)
    folder = tmp_path / "results" / "importance" / "corpus_seeds"
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["objective"] == "lm" and summary["layers"] == 30 and summary["heads"] == 9
    assert 0 < summary["intact_objective"] < 15 and summary["predicted_tokens"] == 7
    import pandas as pd

    heads = pd.read_csv(folder / "heads.csv")
    assert len(heads) == 270 and heads["taylor"].notna().all() and (heads["taylor"] > 0).any()
    pruning = pd.read_csv(folder / "pruning.csv")
    assert pruning["heads_pruned"].tolist() == [0, 270] * 3
    assert (pruning[pruning["heads_pruned"] == 270]["objective"] > summary["intact_objective"]).all()


def test_pruning_counts_of_a_tiny_step_are_every_count_without_a_list_of_one_over_step():
    from real_attention.head_importance.objectives import pruning_counts

    assert pruning_counts(12, 0.25) == [0, 3, 6, 9, 12]
    assert pruning_counts(12, 1 / 12) == list(range(13))
    for step in (0.05, 1e-9, 5e-324):  # 1 / 5e-324 is infinite; 1e-9 would list a billion steps
        assert pruning_counts(12, step) == list(range(13))
    # below one head a step, every rounded count is hit, as the list of steps would give
    for total, step in ((7, 0.14), (72, 0.01), (270, 0.003)):
        slow = sorted({int(round(k * step * total)) for k in range(int(1 / step + 1e-9) + 1)} | {0, total})
        assert pruning_counts(total, step) == slow


def test_a_corpus_is_read_by_newlines_alone_and_names_the_line(tmp_path):
    from real_attention.head_importance.run import read_corpus

    corpus = tmp_path / "c.txt"
    corpus.write_bytes("one\u2028still one\x0cand one\r\n\ntwo\n".encode())
    assert read_corpus(corpus) == ["one\u2028still one\x0cand one", "two"]
    corpus.write_text('first\n\n{"text": ""}\n', encoding="utf-8")
    with pytest.raises(ra.InputError, match=r"line 3: its \"text\" is empty"):
        read_corpus(corpus)
    corpus.write_bytes("one\ntwo\ncaf\xe9 con leche\n".encode("latin-1"))  # as heads --corpus names it
    with pytest.raises(ra.InputError, match=r"^line 3 of --corpus .*c\.txt is not UTF-8 \(invalid continuation byte "
                                            r"at byte 3\)$"):
        read_corpus(corpus)


def test_a_hidden_corpus_file_names_the_folder_without_its_dot(tmp_path, tiny_model_dir):
    corpus = tmp_path / ".notes.txt"
    corpus.write_text("I sat on the bank.\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["importance", "--model", str(tiny_model_dir), "--corpus", str(corpus),
                                      "--prune-step", "1", "--quiet",
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out" / "results" / "importance" / "notes" / "heads.csv").is_file()


def test_too_short_for_max_tokens_says_so(tmp_path, mlm_dir):
    result = CliRunner().invoke(cli, ["importance", "--model", str(mlm_dir), "--corpus", str(_corpus(tmp_path, TEXTS)),
                                      "--objective", "mlm", "--max-tokens", "2", "--quiet", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.output.strip() == ("Error: no sentence to score: all 3 sentence(s) are too short for the mlm "
                                     "objective once cut to 2 pieces; raise max_tokens (--max-tokens)")


def test_skipped_sentences_still_fill_the_progress_total(gpt2_dir, tmp_path):
    import shutil

    from real_attention.head_importance.run import importance_work

    folder = shutil.copytree(gpt2_dir, tmp_path / "no-bos")
    tokenizer = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    tokenizer["post_processor"] = None  # no <s>: a one-word sentence is one piece
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    seen: list[int] = []
    texts = [*DECODER_TEXTS, "bank"]  # one piece, nothing to predict: lm skips it
    result = ra.importance(str(folder), texts, "lm", batch_size=2, prune_step=0.5, progress=seen.append)
    assert result.summary["skipped_sentences"] == 1
    layers, heads = int(result.heads["layer"].max()), int(result.heads["head"].max())
    assert sum(seen) == importance_work(layers, heads, len(texts), 0.5)


def test_a_bad_label_names_its_line_of_the_corpus_file(tmp_path, label_dir, no_loading):
    corpus = tmp_path / "labelled.jsonl"
    corpus.write_text('{"text": "I sat on the bank.", "label": "pos"}\n\n{"text": "My garden.", "label": "maybe"}\n',
                      encoding="utf-8")
    result = CliRunner().invoke(cli, ["importance", "--model", str(label_dir), "--corpus", str(corpus), "--quiet",
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.output.startswith("Error: line 3: the model has no label 'maybe'"), result.output
    assert not (tmp_path / "out").exists()


def test_a_bom_before_a_jsonl_corpus_is_no_text(tmp_path):
    """A file saved with a byte-order mark: its first record was read as plain text, and its label lost."""
    from real_attention.head_importance.run import read_corpus

    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"text": "good", "label": "pos"}\n{"text": "bad", "label": "neg"}\n')
    assert read_corpus(path) == [{"text": "good", "label": "pos"}, {"text": "bad", "label": "neg"}]
    plain = tmp_path / "bom.txt"
    plain.write_bytes(b"\xef\xbb\xbfhello world\n")
    assert read_corpus(plain) == ["hello world"]


def test_a_file_where_the_results_go_is_found_before_the_model_loads(tmp_path, no_loading):
    corpus = _corpus(tmp_path, TEXTS)
    blocked = tmp_path / "out" / "figures" / "importance" / "corpus"
    blocked.parent.mkdir(parents=True)
    blocked.write_text("mine", encoding="utf-8")
    result = CliRunner().invoke(cli, ["importance", "--model", str(tmp_path / "never-loaded"), "--corpus",
                                      str(corpus), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and f"Error: {blocked} is a file, not a folder" in result.output, result.output


def test_a_corpus_read_from_a_pipe_is_recorded_as_not_hashed(tmp_path):
    """/dev/stdin was hashed after it had been read: the summary recorded the sha256 of no bytes."""
    import os

    from real_attention.head_importance.run import _corpus_record

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert _corpus_record(fifo) == {"name": "pipe", "sha256": None,
                                    "note": "not a regular file (a pipe or a device): read once, not hashed"}
    regular = _corpus(tmp_path, TEXTS)
    assert _corpus_record(regular)["sha256"] is not None


def test_heads_csv_keeps_six_significant_digits_of_tiny_scores(tmp_path, tiny_model_dir):
    """A confident model's scores can be a few millionths: at 6 decimals they were 0.000004 or 0.000000."""
    import pandas as pd

    from real_attention.head_importance import run

    result = ra.importance(str(tiny_model_dir), TEXTS, prune_step=1.0)
    tiny = run.ImportanceResult(result.heads.assign(ablation=result.heads["ablation"] * 1e-6 + 1e-9),
                                result.pruning, result.summary)
    results, _ = ra.write_importance(tiny, tmp_path, "tiny", formats=())
    read = pd.read_csv(results / "heads.csv")
    np.testing.assert_allclose(read["ablation"], tiny.heads["ablation"], rtol=1e-5)


def test_a_corpus_labelled_in_part_is_one_error():
    """One line without a label made every label vanish: --objective auto then scored the embedding."""
    from real_attention.head_importance.run import split_sentences

    assert split_sentences(["a b", {"text": "c d"}]) == (["a b", "c d"], None)
    assert split_sentences([{"text": "a", "label": 1}, {"text": "b", "label": 0}]) == (["a", "b"], [1, 0])
    with pytest.raises(ra.InputError, match='sentence 2 has no "label", but 2 other'):
        split_sentences([{"text": "a", "label": 1}, {"text": "b"}, {"text": "c", "label": 0}])
    with pytest.raises(ra.InputError, match='line 5 has no "label", but 2 other'):  # its line of the file
        split_sentences([{"text": "a", "label": 1}, {"text": "b"}, {"text": "c", "label": 0}], lines=[1, 5, 6])


def test_a_line_without_a_label_is_named_by_its_line_of_the_file(tmp_path, label_dir, no_loading):
    corpus = tmp_path / "partly.jsonl"
    corpus.write_text('{"text": "I sat on the bank.", "label": "pos"}\n\n\nMy garden.\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["importance", "--model", str(label_dir), "--corpus", str(corpus), "--quiet",
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.output.startswith('Error: line 4 has no "label", but 1 other(s) have one'), result.output


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"])
def test_a_compressed_corpus_is_read_as_heads_reads_it_and_a_cut_one_is_refused(tmp_path, suffix):
    # it was read as bytes: "line 1 of --corpus corpus.jsonl.gz is not UTF-8"
    import bz2
    import gzip
    import lzma

    from real_attention.head_importance.run import read_corpus_lines

    plain = _corpus(tmp_path, ["I sat on the bank.", {"text": "The bank was closed.", "label": 1}, "", "Rain."])
    packed = tmp_path / f"corpus.jsonl{suffix}"
    packed.write_bytes({".gz": gzip, ".bz2": bz2, ".xz": lzma}[suffix].compress(plain.read_bytes()))
    assert read_corpus_lines(packed) == read_corpus_lines(plain) == (
        ["I sat on the bank.", {"text": "The bank was closed.", "label": 1}, "Rain."], [1, 2, 4])
    from real_attention.head_importance.run import _corpus_record

    # the sha256 of the text inside, as heads --corpus and compare record a compressed corpus
    assert _corpus_record(packed)["sha256"] == hashlib.sha256(plain.read_bytes()).hexdigest()
    cut = tmp_path / f"cut.jsonl{suffix}"
    cut.write_bytes(packed.read_bytes()[:-6])
    with pytest.raises(ra.InputError, match=rf"--corpus {cut} cannot be read: "):
        read_corpus_lines(cut)


def test_text_the_tokenizer_cannot_take_is_one_error_naming_its_line(tmp_path, tiny_model_dir):
    # a JSON "\ud83d" (half an emoji) reached the Rust tokenizer: a TypeError and a traceback
    corpus = tmp_path / "cut.jsonl"
    corpus.write_text('I sat on the bank.\n\u200b\n{"text": "a cut emoji \\ud83d here"}\n', encoding="utf-8")
    result = CliRunner().invoke(cli, ["importance", "--model", str(tiny_model_dir), "--corpus", str(corpus),
                                      "--quiet", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("Error: line 3 holds an unpaired surrogate (\\ud83d at character 13)")
    assert len(result.output.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
    with pytest.raises(ra.InputError, match=r"sentence 2 holds a NUL character"):
        ra.importance(str(tiny_model_dir), ["I sat.", "a\x00b"])
    from real_attention.head_importance.run import read_corpus_lines

    # a line of zero-width characters alone is blank, as heads --corpus reads it
    assert read_corpus_lines(corpus, limit=2) == (["I sat on the bank.", {"text": "a cut emoji \ud83d here"}], [1, 3])
