"""Norm-based attention (Kobayashi et al., 2020) and attention rollout (Abnar & Zuidema, 2020)."""
from __future__ import annotations


import numpy as np
import pytest
import torch

from real_attention.engine.errors import InputError
from real_attention.engine.measures import NORM, WEIGHTS, check_measure, folder_suffix, norm_maps
from real_attention.engine.rollout import rollout

SENTENCE = "Me senté en el banco de mi jardín."


def piece_maps(loaded, text: str, measure: str) -> np.ndarray:
    """(L, H, t, t) piece-level maps of one sentence, as the tool computes them."""
    from real_attention.engine.extract import encode, pad_batch
    from real_attention.engine.measures import forward_measured

    (encoded,), _ = encode(loaded.tokenizer, [text], loaded.max_tokens)
    out = {}
    forward_measured(loaded, pad_batch([encoded], 0), lambda layer, maps: out.__setitem__(layer, maps[0].numpy()),
                     measure)
    return np.stack([out[layer] for layer in range(loaded.layers)])


def reference_norm(loaded, text: str) -> np.ndarray:
    """||alpha_ij f_h(x_j)|| from the BERT state dict with plain torch, no hooks; rows normalised."""
    inputs = loaded.tokenizer(text, return_tensors="pt")
    with torch.no_grad():
        out = loaded.model(**inputs, output_attentions=True, output_hidden_states=True)
    state = loaded.model.state_dict()
    heads = loaded.heads
    result = []
    for layer in range(loaded.layers):
        x = out.hidden_states[layer][0]  # (t, hidden): the layer's input
        prefix = f"encoder.layer.{layer}.attention."
        v = x @ state[prefix + "self.value.weight"].T + state[prefix + "self.value.bias"]  # (t, hidden)
        w_o = state[prefix + "output.dense.weight"]  # (hidden, hidden), y = a @ w_o.T
        d = v.shape[1] // heads
        maps = []
        for h in range(heads):
            f = v[:, h * d:(h + 1) * d] @ w_o[:, h * d:(h + 1) * d].T  # (t, hidden)
            alpha = out.attentions[layer][0, h]  # (t, t)
            n = torch.stack([torch.stack([torch.linalg.vector_norm(alpha[i, j] * f[j]) for j in range(len(f))])
                             for i in range(len(f))])
            maps.append(n / n.sum(dim=-1, keepdim=True))
        result.append(torch.stack(maps))
    return torch.stack(result).numpy()


def test_measures_are_checked_and_name_their_folders():
    assert check_measure("norm") == NORM and folder_suffix(WEIGHTS) == "" and folder_suffix(NORM) == "-norm"
    with pytest.raises(InputError, match="unknown measure 'size'"):
        check_measure("size")


def test_norm_agrees_with_the_state_dict_computed_by_hand(tiny_loaded):
    tool = piece_maps(tiny_loaded, SENTENCE, NORM)
    expected = reference_norm(tiny_loaded, SENTENCE)
    assert tool.shape == expected.shape
    np.testing.assert_allclose(tool, expected, atol=1e-5)
    assert not np.allclose(tool, piece_maps(tiny_loaded, SENTENCE, WEIGHTS), atol=1e-3)


def test_norm_agrees_with_the_state_dict_on_minilm(minilm):

    loaded = minilm
    np.testing.assert_allclose(piece_maps(loaded, SENTENCE, NORM), reference_norm(loaded, SENTENCE), atol=1e-5)


def test_a_token_whose_value_vector_is_zero_gets_no_norm_weight(tiny_model_dir):
    """Patch layer 1's value projection so that f_h(x_j) = 0 for the [CLS] token's input, whatever alpha is."""
    from real_attention.engine.models import choose_model, load_model

    loaded = load_model(choose_model("es", str(tiny_model_dir), None))
    weights_before = piece_maps(loaded, SENTENCE, WEIGHTS)
    inputs = loaded.tokenizer(SENTENCE, return_tensors="pt")
    with torch.no_grad():
        x = loaded.model(**inputs, output_hidden_states=True).hidden_states[0][0]  # (t, hidden)
        cls = x[0] / x[0].norm()
        value = loaded.model.encoder.layer[0].attention.self.value
        # W' = W (I - c c^T): W' x_cls = W x_cls - (W c)(c . x_cls); set b = 0 and project x_cls out entirely.
        value.weight.copy_(value.weight @ (torch.eye(len(cls)) - torch.outer(cls, cls)))
        value.bias.zero_()
    norm = piece_maps(loaded, SENTENCE, NORM)
    weights = piece_maps(loaded, SENTENCE, WEIGHTS)
    np.testing.assert_allclose(weights[0], weights_before[0], atol=1e-6)  # alpha of layer 1 did not change
    assert (weights[0, :, :, 0] > 0.01).all()  # every piece still attends to [CLS]...
    np.testing.assert_allclose(norm[0, :, :, 0], 0.0, atol=1e-6)  # ...but [CLS] adds nothing
    np.testing.assert_allclose(norm.sum(axis=-1), 1.0, atol=1e-5)


def tiny_llama(tiny_model_dir, causal_lm: bool):
    """A tiny random Llama with grouped-query attention (4 query heads, 2 key/value heads), the tiny BERT's
    tokenizer for its text."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM, LlamaModel

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                         attn_implementation="eager")
    torch.manual_seed(1)
    model = (LlamaForCausalLM if causal_lm else LlamaModel)(config).eval()
    with torch.no_grad():  # make the value biases and output weights matter: random, not zero
        for layer in (model.model.layers if causal_lm else model.layers):
            layer.self_attn.v_proj.weight.normal_()
    return loaded_tiny("tiny-llama", tokenizer, model)


def loaded_tiny(name: str, tokenizer, model):
    """A LoadedModel around a tiny model of 2 layers x 4 heads built in a test."""
    from real_attention.engine.models import LoadedModel, ModelChoice

    return LoadedModel(choice=ModelChoice(name=name, revision=None, path=None), revision="none", tokenizer=tokenizer,
                       model=model, device="cpu", layers=2, heads=4, max_tokens=32)


def reference_llama_norm(loaded, text: str) -> np.ndarray:
    inputs = loaded.tokenizer(text, return_tensors="pt", return_token_type_ids=False)
    with torch.no_grad():
        out = loaded.model(**inputs, output_attentions=True, output_hidden_states=True)
    state = {name: tensor.detach() for name, tensor in loaded.model.state_dict().items()}
    prefix = "model." if "model.embed_tokens.weight" in state else ""
    eps = loaded.model.config.rms_norm_eps
    result = []
    for layer in range(loaded.layers):
        h = out.hidden_states[layer][0]  # (t, hidden); the attention's input is its RMS norm
        scale = state[f"{prefix}layers.{layer}.input_layernorm.weight"]
        x = h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + eps) * scale
        v = x @ state[f"{prefix}layers.{layer}.self_attn.v_proj.weight"].T  # (t, kv * d), no bias in Llama
        w_o = state[f"{prefix}layers.{layer}.self_attn.o_proj.weight"]  # (hidden, heads * d)
        d = w_o.shape[1] // loaded.heads
        group = loaded.heads // (v.shape[1] // d)
        maps = []
        for h in range(loaded.heads):
            kv = h // group
            f = v[:, kv * d:(kv + 1) * d] @ w_o[:, h * d:(h + 1) * d].T
            n = out.attentions[layer][0, h] * torch.linalg.vector_norm(f, dim=-1)[None, :]
            maps.append(n / n.sum(dim=-1, keepdim=True))
        result.append(torch.stack(maps))
    return torch.stack(result).numpy()


@pytest.mark.parametrize("causal_lm", [False, True])
def test_norm_on_a_grouped_query_decoder(tiny_model_dir, causal_lm):
    loaded = tiny_llama(tiny_model_dir, causal_lm)
    tool = piece_maps(loaded, SENTENCE, NORM)
    np.testing.assert_allclose(tool, reference_llama_norm(loaded, SENTENCE), atol=1e-5)
    assert np.allclose(np.triu(tool, k=1), 0.0)  # causal: nothing from the future


def tiny_gpt2(tiny_model_dir):
    """A tiny random GPT-2: fused q, k, v in one Conv1D (c_attn), the output projection a Conv1D (c_proj)."""
    from transformers import AutoTokenizer, GPT2Config, GPT2Model

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    config = GPT2Config(vocab_size=len(tokenizer), n_embd=16, n_layer=2, n_head=4, n_positions=32,
                        attn_implementation="eager")
    torch.manual_seed(2)
    model = GPT2Model(config).eval()
    with torch.no_grad():  # random biases: the value bias must be counted, the output bias must not
        for block in model.h:
            block.attn.c_attn.bias.normal_()
            block.attn.c_proj.bias.normal_()
    return loaded_tiny("tiny-gpt2", tokenizer, model)


def reference_gpt2_norm(loaded, text: str) -> np.ndarray:
    """From the state dict: the attention's input is ln_1 of the layer's input; values are c_attn's last third."""
    inputs = loaded.tokenizer(text, return_tensors="pt", return_token_type_ids=False)
    with torch.no_grad():
        out = loaded.model(**inputs, output_attentions=True, output_hidden_states=True)
    state = {name: tensor.detach() for name, tensor in loaded.model.state_dict().items()}
    hidden, heads = loaded.model.config.n_embd, loaded.heads
    d = hidden // heads
    result = []
    for layer in range(loaded.layers):
        x = torch.nn.functional.layer_norm(out.hidden_states[layer][0], (hidden,), state[f"h.{layer}.ln_1.weight"],
                                           state[f"h.{layer}.ln_1.bias"], loaded.model.config.layer_norm_epsilon)
        qkv = x @ state[f"h.{layer}.attn.c_attn.weight"] + state[f"h.{layer}.attn.c_attn.bias"]  # Conv1D: x W + b
        v = qkv[:, 2 * hidden:]
        w_o = state[f"h.{layer}.attn.c_proj.weight"]  # (heads * d, hidden)
        maps = []
        for h in range(heads):
            f = v[:, h * d:(h + 1) * d] @ w_o[h * d:(h + 1) * d]  # (t, hidden), without c_proj's bias
            n = out.attentions[layer][0, h] * torch.linalg.vector_norm(f, dim=-1)[None, :]
            maps.append(n / n.sum(dim=-1, keepdim=True))
        result.append(torch.stack(maps))
    return torch.stack(result).numpy()


def test_norm_on_a_gpt2_style_decoder_with_fused_projections(tiny_model_dir):
    loaded = tiny_gpt2(tiny_model_dir)
    tool = piece_maps(loaded, SENTENCE, NORM)
    np.testing.assert_allclose(tool, reference_gpt2_norm(loaded, SENTENCE), atol=1e-5)
    assert np.allclose(np.triu(tool, k=1), 0.0)
    np.testing.assert_allclose(tool.sum(axis=-1), 1.0, atol=1e-5)


def test_norm_maps_scale_each_key_by_its_norm_and_renormalise():
    weights = torch.tensor([[[[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [0.0, 0.0, 0.0]]]])  # (1, 1, 3, 3)
    norms = torch.tensor([[[2.0, 0.0, 1.0]]])  # (1, 1, 3)
    out = norm_maps(weights, norms)[0, 0]
    np.testing.assert_allclose(out.numpy(), [[1.0, 0.0, 0.0], [0.4 / 0.9, 0.0, 0.5 / 0.9], [0.0, 0.0, 0.0]],
                               atol=1e-7)


def test_rollout_of_one_layer_is_half_the_map_plus_half_the_identity():
    rng = np.random.default_rng(0)
    a = rng.random((5, 5))
    a /= a.sum(axis=1, keepdims=True)
    out = rollout(torch.from_numpy(a)[None, None])[0, 0].numpy()
    np.testing.assert_allclose(out, 0.5 * a + 0.5 * np.eye(5), atol=1e-12)


def test_rollout_multiplies_layers_up_and_rows_sum_to_one():
    rng = np.random.default_rng(1)
    maps = rng.random((2, 3, 4, 4))
    maps /= maps.sum(axis=-1, keepdims=True)
    out = rollout(torch.from_numpy(maps)).numpy()  # (B, L, t, t)
    np.testing.assert_allclose(out.sum(axis=-1), 1.0, atol=1e-12)
    mixed = 0.5 * maps + 0.5 * np.eye(4)
    np.testing.assert_allclose(out[:, 2], mixed[:, 2] @ mixed[:, 1] @ mixed[:, 0], atol=1e-12)


def test_word_rollout_of_a_run_sums_to_one_and_starts_at_the_first_layer(tiny_loaded):
    from real_attention.engine.pipeline import attend_with_sums

    attentions, _, rollouts = attend_with_sums(tiny_loaded, [SENTENCE, "Fui al banco a sacar dinero."])
    for attention, rolled in zip(attentions, rollouts):
        n = len(attention.words)
        assert rolled.shape == (tiny_loaded.layers, n, n) and rolled.dtype == np.float32
        np.testing.assert_allclose(rolled.sum(axis=-1), 1.0, atol=1e-5)
    # A sentence without multi-piece words: its first layer's rollout is 0.5 mean-of-heads + 0.5 I.
    (plain,), _, (rolled,) = attend_with_sums(tiny_loaded, ["Fui al banco a sacar dinero."])
    np.testing.assert_allclose(rolled[0], 0.5 * plain.weights[0].mean(axis=0) + 0.5 * np.eye(len(plain.words)),
                               atol=1e-5)


def test_rollout_of_a_causal_model_stays_lower_triangular(tiny_model_dir):
    from real_attention.engine.pipeline import attend_with_sums

    loaded = tiny_llama(tiny_model_dir, causal_lm=False)
    for measure in (WEIGHTS, NORM):
        attentions, _, rollouts = attend_with_sums(loaded, [SENTENCE, "Fui al banco a sacar dinero."], measure=measure)
        for attention, rolled in zip(attentions, rollouts):
            assert np.allclose(np.triu(rolled, k=1), 0.0) and np.allclose(np.triu(attention.weights, k=1), 0.0)
            np.testing.assert_allclose(rolled.sum(axis=-1), 1.0, atol=1e-5)
