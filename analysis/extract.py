"""Run the model on a sentence and return every head's post-softmax attention (torch stops here)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from analysis.errors import InputError
from analysis.models import LoadedModel


class SentenceTooLong(InputError):
    """A sentence has more tokens than the model's position embeddings allow."""


@dataclass(frozen=True)
class TokenAttention:
    """One sentence at the level of the tokenizer's pieces."""

    text: str
    tokens: tuple[str, ...]  # (t,) the tokenizer's pieces, specials included
    word_ids: np.ndarray  # (t,) int64, the word each piece belongs to; -1 for special tokens
    offsets: np.ndarray  # (t, 2) int64, character span of each piece in `text`
    weights: np.ndarray  # (layers, heads, t, t) float32, each row sums to 1

    def __post_init__(self) -> None:
        t = len(self.tokens)
        assert self.word_ids.shape == (t,), self.word_ids.shape
        assert self.offsets.shape == (t, 2), self.offsets.shape
        assert self.weights.ndim == 4 and self.weights.shape[2:] == (t, t), self.weights.shape
        assert self.weights.dtype == np.float32


def tokenize(loaded: LoadedModel, texts: list[str], truncate: bool = False) -> dict:
    """Tokenize with the fast tokenizer, keeping offsets and the special-token mask."""
    return loaded.tokenizer(
        texts,
        return_offsets_mapping=True,
        return_special_tokens_mask=True,
        padding=True,
        truncation=truncate,
        max_length=loaded.max_tokens if truncate else None,
        return_tensors="pt",
    )


def check_length(loaded: LoadedModel, texts: list[str]) -> None:
    """Raise SentenceTooLong, naming the sentence and its token count, before running the model."""
    for number, text in enumerate(texts, start=1):
        count = len(loaded.tokenizer(text, verbose=False)["input_ids"])  # no warning: the error says it
        if count > loaded.max_tokens:
            raise SentenceTooLong(
                f"sentence {number} has {count} tokens; {loaded.choice.short} takes at most {loaded.max_tokens}"
            )


def attention_maps(loaded: LoadedModel, input_ids, attention_mask):
    """One forward pass; returns a torch tensor (layers, batch, heads, t, t) of post-softmax weights."""
    import torch

    outputs = loaded.model(
        input_ids=input_ids.to(loaded.device),
        attention_mask=attention_mask.to(loaded.device),
        output_attentions=True,
    )
    maps = outputs.attentions
    # With sdpa attention transformers returns None or nothing here; eager gives one map per layer.
    if maps is None or len(maps) != loaded.layers or any(m is None for m in maps):
        got = 0 if maps is None else sum(m is not None for m in maps)
        raise RuntimeError(f"expected {loaded.layers} attention maps, got {got}; load with eager attention")
    return torch.stack(maps)  # (layers, batch, heads, t, t)


def extract(loaded: LoadedModel, texts: list[str]) -> list[TokenAttention]:
    """Per-head attention of each sentence, one batched forward pass, pads cut away."""
    import torch

    check_length(loaded, texts)
    encoded = tokenize(loaded, texts)
    with torch.inference_mode():
        maps = attention_maps(loaded, encoded["input_ids"], encoded["attention_mask"])
    maps = maps.float().cpu().numpy()  # (layers, batch, heads, t, t)
    lengths = encoded["attention_mask"].sum(dim=1).tolist()
    result = []
    for index, (text, length) in enumerate(zip(texts, lengths)):
        word_ids = np.array([-1 if w is None else w for w in encoded.word_ids(index)[:length]], dtype=np.int64)
        special = encoded["special_tokens_mask"][index, :length].numpy().astype(bool)
        word_ids[special] = -1
        # Right padding: the real tokens come first; pads get no weight from real queries.
        weights = np.ascontiguousarray(maps[:, index, :, :length, :length], dtype=np.float32)
        result.append(
            TokenAttention(
                text=text,
                tokens=tuple(encoded.tokens(index)[:length]),
                word_ids=word_ids,
                offsets=encoded["offset_mapping"][index, :length].numpy().astype(np.int64),
                weights=weights,
            )
        )
    return result
