"""extract.forward_layers: every layer's maps, in order, the same as output_attentions gives, and nothing computed
after the last layer's maps (that layer's feed-forward block, a pooler or a final norm feeds no map)."""
from __future__ import annotations

import pytest

from conftest import CAUSAL, SENTENCES


def _after_last_maps(model):
    """The modules a forward pass runs after the last layer's attention: its feed-forward block, a pooler, a norm."""
    if hasattr(model, "encoder"):  # BERT
        last = model.encoder.layer[-1]
        return [last.intermediate, last.output] + ([model.pooler] if model.pooler is not None else [])
    if hasattr(model, "h"):  # GPT-2
        return [model.h[-1].mlp, model.ln_f]
    return [model.layers[-1].mlp, model.norm]  # Llama, Gemma 2


def _watched_forward(loaded, texts):
    """forward_layers on `texts` -> (the modules after the last maps that ran, the layers handed over in order,
    for each layer whether its maps are the same bits as output_attentions gives from a whole pass)."""
    import torch

    from real_attention.engine.extract import encode, forward_layers, pad_batch

    encoded, _ = encode(loaded.tokenizer, texts, loaded.max_tokens)
    batch = pad_batch(encoded, loaded.tokenizer.pad_token_id or 0)
    ran = []
    handles = [module.register_forward_hook(lambda module, *_: ran.append(type(module).__name__))
               for module in _after_last_maps(loaded.model)]
    maps = []
    try:
        forward_layers(loaded, batch, lambda layer, weights: maps.append((layer, weights.clone())))
    finally:
        for handle in handles:
            handle.remove()
    with torch.inference_mode():
        whole = loaded.model(input_ids=torch.from_numpy(batch.input_ids),
                             attention_mask=torch.from_numpy(batch.attention_mask), output_attentions=True)
    same = [torch.equal(weights, expected) for (_, weights), expected in zip(maps, whole.attentions, strict=True)]
    return ran, [layer for layer, _ in maps], same


def test_forward_layers_stops_after_the_last_maps(tiny_loaded):
    ran, layers, same = _watched_forward(tiny_loaded, SENTENCES)
    assert ran == []  # the last layer's feed-forward block and the pooler never ran
    assert layers == list(range(tiny_loaded.layers))
    assert all(same)  # the same bits: the stop comes after every map


@pytest.mark.parametrize("kind", ["llama", "gpt2", "gemma2"])
def test_forward_layers_stops_after_the_last_maps_of_decoders(tiny_decoders, kind):
    from real_attention.engine.models import choose_model, load_model

    loaded = load_model(choose_model("en", str(tiny_decoders(kind)), None))
    ran, layers, same = _watched_forward(loaded, [s.text for s in CAUSAL.sentences])
    assert ran == []  # the last layer's MLP and the final norm never ran
    assert layers == list(range(loaded.layers))
    assert all(same)


def test_forward_layers_passes_on_errors_of_on_layer(tiny_loaded):
    from real_attention.engine.extract import encode, forward_layers, pad_batch

    encoded, _ = encode(tiny_loaded.tokenizer, SENTENCES[:1], tiny_loaded.max_tokens)
    batch = pad_batch(encoded, 0)

    def on_layer(layer, weights):
        if layer == tiny_loaded.layers - 1:
            raise ValueError("the caller's own error")

    with pytest.raises(ValueError, match="the caller's own error"):
        forward_layers(tiny_loaded, batch, on_layer)
