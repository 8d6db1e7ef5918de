"""Text -> pieces -> units, then one forward pass that hands over each layer's post-softmax attention as it ends.

The one encoding step and the one map extraction of both `run` and `heads --corpus`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np

from .anatomy import attention_modules
from .errors import InputError, ModelUnavailable
from .text import check_text
from .units import DEFAULT_UNITS, GIVEN_WORDS, Joined, MissingWord, UnitError, join_words
from .words import PAD, group


class SentenceTooLong(InputError):
    """A sentence has more tokens than the model's position embeddings allow."""


@dataclass(frozen=True)
class Encoded:
    """One sentence, tokenized and grouped into units."""

    text: str
    ids: np.ndarray  # (t,) int64 piece ids, specials included
    units: np.ndarray  # (t,) int64 unit index of each piece (real_attention.engine.words.unit_ids)
    kinds: np.ndarray  # (n,) int64 Kind code of each unit
    words: tuple[str, ...]  # (n,) each unit as written; specials keep the tokenizer's text
    joined: tuple[Joined, ...] = ()  # units of the text rule that one piece straddles, joined

    def __post_init__(self) -> None:
        assert self.units.shape == self.ids.shape and self.kinds.shape == (len(self.words),)


class TooLong(NamedTuple):
    position: int  # 0-based position in the texts (`index` would shadow tuple.index)
    tokens: int  # its piece count, specials included


TEXT_SPECIALS = "_real_attention_specials_as_text"  # marks a tokenizer that specials_as_text has prepared


def specials_as_text(tokenizer) -> None:
    """Make the special tokens' strings unreachable from text: a user who types "</s>" means the characters.

    split_special_tokens (below) stops the added-token matcher, but a SentencePiece (Unigram) vocabulary, such as
    XLM-R's, also lists "<s>", "</s>", "<unk>" as ordinary pieces of score 0, the best score, so its Viterbi
    would still pick them. Their scores are lowered below every other piece's; the tokenizer's own specials are
    added by the post-processor by id and stay. Idempotent; rebuilding a 250k vocabulary takes about 2 s, once.
    """
    import json

    from tokenizers import Tokenizer

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or getattr(tokenizer, TEXT_SPECIALS, False):
        return
    specials = set(tokenizer.all_special_tokens)
    model = backend.model
    if type(model).__name__ == "Unigram" and any(model.token_to_id(token) is not None for token in specials):
        data = json.loads(backend.to_str())
        vocab = data["model"]["vocab"]  # [[piece, log probability], ...]
        floor = min(score for piece, score in vocab if piece not in specials) - 100.0
        for entry in vocab:
            if entry[0] in specials:
                entry[1] = floor
        tokenizer._tokenizer = Tokenizer.from_str(json.dumps(data))
    setattr(tokenizer, TEXT_SPECIALS, True)


def encode(tokenizer, texts: list[str], max_tokens: int, truncate: bool = False, units: str = DEFAULT_UNITS,
           required: list[tuple[str, ...]] | None = None) -> tuple[list[Encoded], list[TooLong]]:
    """Tokenize with the fast tokenizer and group the pieces into units by the `units` rule ("text" or
    "tokenizer", real_attention.engine.words.group); required[i]: the words that must be units of text i (its focus and
    sense words), none if None.

    Texts over max_tokens pieces are cut to max_tokens (truncate) or left out; either way they are listed in
    the second result. UnitError (naming the sentence) if a piece straddles a required word and its neighbour.
    """
    # split_special_tokens: a user's "[SEP]" or "</s>" is text, encoded as the pieces of its characters; only the
    # tokenizer's own special tokens (added around the text) get special ids.
    for number, text in enumerate(texts, start=1):  # every entry point checked already: this is the last guard
        check_text(text, f"sentence {number}")
    specials_as_text(tokenizer)
    options = dict(return_offsets_mapping=True, return_special_tokens_mask=True, verbose=False,
                   split_special_tokens=True)
    encodings = tokenizer(texts, **options).encodings
    too_long = [TooLong(i, len(e.ids)) for i, e in enumerate(encodings) if len(e.ids) > max_tokens]
    if too_long and truncate:
        cut = tokenizer([texts[i] for i, _ in too_long], truncation=True, max_length=max_tokens, **options)
        for (i, _), encoding in zip(too_long, cut.encodings):
            encodings[i] = encoding
    drop = set() if truncate else {i for i, _ in too_long}
    encoded = []
    for i, (text, encoding) in enumerate(zip(texts, encodings)):
        if i in drop:
            continue
        word_ids = [-1 if w is None else w for w in encoding.word_ids] if units == "tokenizer" else None
        try:  # the lists as the tokenizer gives them: group's loops read them directly
            grouped = group(text, encoding.tokens, word_ids, encoding.special_tokens_mask, encoding.offsets, units,
                            required[i] if required is not None else ())
        except UnitError as error:
            raise UnitError(f"sentence {i + 1}: {error}") from None
        encoded.append(Encoded(text, np.array(encoding.ids, dtype=np.int64), grouped.units, grouped.kinds,
                               grouped.words, grouped.joined))
    return encoded, too_long


def encode_words(tokenizer, sentences: list[tuple[str, ...]], max_tokens: int
                 ) -> tuple[list[Encoded], list[TooLong], list[tuple[int, MissingWord]]]:
    """The given-words rule: each sentence is its words (units.GIVEN_WORDS), its text the words joined by single
    spaces, its units exactly those words plus the tokenizer's special tokens (units.given_assign).

    -> (the sentences encoded, in order; those over max_tokens pieces, left out and never cut; those with a
    word that gets no piece, left out, each with its MissingWord). Nothing is raised for a single sentence:
    the caller decides (ra.attend names it, the syntax probe counts it).
    """
    joined = [join_words(words) for words in sentences]
    specials_as_text(tokenizer)  # a treebank word "[SEP]" is text, as encode takes it
    options = dict(return_offsets_mapping=True, return_special_tokens_mask=True, verbose=False,
                   split_special_tokens=True)
    encodings = tokenizer([text for text, _ in joined], **options).encodings
    too_long = [TooLong(i, len(e.ids)) for i, e in enumerate(encodings) if len(e.ids) > max_tokens]
    long_ones = {i for i, _ in too_long}
    encoded, missing = [], []
    for i, ((text, spans), encoding) in enumerate(zip(joined, encodings)):
        if i in long_ones:
            continue
        try:
            grouped = group(text, encoding.tokens, None, encoding.special_tokens_mask, encoding.offsets, GIVEN_WORDS,
                            given=spans)
        except MissingWord as error:
            missing.append((i, error))
            continue
        encoded.append(Encoded(text, np.array(encoding.ids, dtype=np.int64), grouped.units, grouped.kinds,
                               grouped.words))
    return encoded, too_long, missing


class Batch(NamedTuple):
    """Padded arrays of a batch of B sentences, t pieces and n units at most."""

    input_ids: np.ndarray  # (B, t) int64, pad id after the end
    attention_mask: np.ndarray  # (B, t) int64, 1 for real pieces
    units: np.ndarray  # (B, t) int64 unit index of each piece, -1 for pads
    kinds: np.ndarray  # (B, n) int64 Kind codes, PAD (-1) after the end


def pad_batch(sentences: list[Encoded], pad_id: int, shape: tuple[int, int] | None = None) -> Batch:
    """Right-pad a batch; pads get no unit, so no statistic ever sees them.

    shape: (rows, pieces) to pad to (real_attention.engine.batches.fixed_batches), units padded to `pieces` too;
    the rows after the sentences are dummies: pad ids, the first piece unmasked (no all-masked row), no unit.
    None: as many rows as sentences, padded to the longest.
    """
    lengths = np.array([len(s.ids) for s in sentences])  # (B,)
    sizes = np.array([len(s.kinds) for s in sentences])  # (B,)
    rows, t, n = len(sentences), int(lengths.max()), int(sizes.max())
    if shape is not None:
        assert shape[0] >= rows and shape[1] >= t, (shape, rows, t)
        rows, t = shape
        n = t  # a sentence has no more units than pieces
    real = np.zeros((rows, t), dtype=bool)  # row-major order = the pieces in order
    real[:len(sentences)] = np.arange(t)[None, :] < lengths[:, None]
    has = np.zeros((rows, n), dtype=bool)
    has[:len(sentences)] = np.arange(n)[None, :] < sizes[:, None]
    attention_mask = real.astype(np.int64)
    attention_mask[len(sentences):, 0] = 1
    input_ids = np.full(real.shape, pad_id, dtype=np.int64)
    input_ids[real] = np.concatenate([s.ids for s in sentences])
    units = np.full(real.shape, -1, dtype=np.int64)
    units[real] = np.concatenate([s.units for s in sentences])
    kinds = np.full(has.shape, PAD, dtype=np.int64)
    kinds[has] = np.concatenate([s.kinds for s in sentences])
    return Batch(input_ids, attention_mask, units, kinds)


class OutOfDeviceMemory(InputError):
    """The device ran out of memory on a batch: a smaller --batch-size fits."""


def is_out_of_memory(error: BaseException) -> bool:
    """Whether a torch error says the device's memory is exhausted (CUDA, MPS; the CPU's allocator says "can't
    allocate memory")."""
    import torch

    if isinstance(error, torch.OutOfMemoryError):
        return True
    message = str(error).lower()
    return isinstance(error, RuntimeError) and any(
        words in message for words in ("out of memory", "can't allocate memory", "cannot allocate memory"))


@contextmanager
def out_of_memory_as_error(device, batch_size: int, batch: Batch | None = None) -> Iterator[None]:
    """Inside: the device running out of memory is one OutOfDeviceMemory that names it (and the padded `batch`,
    if given) and says to lower --batch-size, instead of torch's error."""
    try:
        yield
    except Exception as error:
        if not is_out_of_memory(error):
            raise
        where = "" if batch is None else " on a batch of {} sentence(s) of up to {} pieces".format(
            *batch.input_ids.shape)
        raise OutOfDeviceMemory(f"the device {device} ran out of memory{where}; pass a smaller batch_size (--batch-size); this "
                                f"run used {batch_size}") from None


def to_device(array, device):
    """A numpy array -> a tensor on `device`. To a CUDA device through pinned memory, without waiting: torch's copy
    from ordinary (pageable) memory synchronises the stream, so the host would wait for the device's queued work
    (the previous batch) before it could prepare the next one."""
    import torch

    tensor = torch.from_numpy(np.ascontiguousarray(array))
    device = torch.device(device)
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def inputs(loaded, batch: Batch) -> dict:
    return {"input_ids": to_device(batch.input_ids, loaded.device),
            "attention_mask": to_device(batch.attention_mask, loaded.device)}


def all_layers_at_once(loaded, batch: Batch, on_layer: Callable) -> None:
    """forward_layers for a model that hands its maps over only at the end, through output_attentions."""
    import torch

    with torch.inference_mode():
        maps = loaded.model(**inputs(loaded, batch), output_attentions=True).attentions
    if maps is None or len(maps) != loaded.layers or any(weights is None for weights in maps):
        raise ModelUnavailable(f"{type(loaded.model).__name__} gives no attention map for every layer; use an "
                               "encoder that returns them with output_attentions (BERT, RoBERTa, XLM-R, ...)")
    for layer, weights in enumerate(maps):
        on_layer(layer, weights)


class _MapsDone(Exception):
    """Raised by the last layer's attention hook once on_layer has its maps: what the model computes after them
    (that layer's output projection and feed-forward block, a pooler, a final norm) feeds no map, so the forward
    pass stops there (forward_layers catches it)."""


def forward_layers(loaded, batch: Batch, on_layer: Callable) -> None:
    """One forward pass; on_layer(layer, weights) gets each layer's (B, heads, t, t) post-softmax weights
    as that layer ends, so no layer's maps outlive the next layer (nothing asks for output_attentions).
    The pass stops as soon as the last layer's maps are handed over: the rest of the model (about an eighth of a
    six-layer encoder's work) changes no map. A model that names no attention module (MPNet, DeBERTa), or not one
    per layer (ALBERT shares one), gets one whole pass with output_attentions instead.
    """
    import torch

    modules = attention_modules(loaded.model)
    if modules is None or len(modules) != loaded.layers:
        return all_layers_at_once(loaded, batch, on_layer)
    seen = []

    def hook(layer: int):
        def call(module, args, output):
            weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
            if weights is None:  # sdpa and flash attention give no weights; eager does
                raise RuntimeError("the attention module returned no weights; load the model with eager attention")
            seen.append(layer)
            on_layer(layer, weights)
            if layer == loaded.layers - 1:
                raise _MapsDone
        return call

    handles = [module.register_forward_hook(hook(layer)) for layer, module in enumerate(modules)]
    try:
        with torch.inference_mode():
            loaded.model(**inputs(loaded, batch))
    except _MapsDone:
        pass
    finally:
        for handle in handles:
            handle.remove()
    if seen != list(range(loaded.layers)):  # the model's own structure, not a bug of ours
        raise ModelUnavailable(f"{type(loaded.model).__name__} ran its attention layers as {seen}, not once each "
                               f"in order 0 to {loaded.layers - 1}; its maps cannot be read layer by layer")
