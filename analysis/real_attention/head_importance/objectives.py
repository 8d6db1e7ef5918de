"""The objectives (each a loss, lower is better), the corpus encoded once for one of them, and its evaluation under
head masks: one forward pass per batch of sentences and chunk of masks (the batch repeated once per mask along
the batch dimension, each copy with its own ξ), and one backward pass per batch for the Taylor scores.

- lm: next-token cross-entropy in nats over every predicted position (piece i predicts piece i + 1), summed
  over the corpus and divided by the number of predicted positions;
- mlm: 15% of each sentence's non-special pieces (at least one; chosen by a generator seeded with the seed and
  the sentence's number) replaced by the mask token; cross-entropy on them, averaged over the masked pieces;
- embedding: the mean over sentences of 1 - cos(e_masked, e_intact), e the mean of the last layer's hidden
  states over every piece of the sentence, special ones included (sentence-transformers' mean pooling);
- label: cross-entropy of the sentence's label under a sequence-classification head, averaged over sentences;
  accuracy beside it.

The per-sentence loss L(x) of the Taylor scores is the sentence's own mean over its predicted (or masked) pieces.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..engine.errors import InputError
from .masking import check_calls, layer_map, masking

LM, MLM, EMBEDDING, LABEL, AUTO = "lm", "mlm", "embedding", "label", "auto"
OBJECTIVES = (LM, MLM, EMBEDDING, LABEL)
MASKED_SHARE = 0.15  # mlm: the share of each sentence's non-special pieces that is masked
IGNORE = -100  # a position without a loss
ROW_TOKENS = 16384  # the most pieces (rows x length) one forward pass takes
LOGIT_FLOATS = 1 << 25  # the most logits (rows x length x vocabulary) one forward pass makes
DEFINITIONS = {
    LM: "next-token cross-entropy in nats, summed over every predicted position and divided by their number",
    MLM: "cross-entropy in nats on 15% of each sentence's non-special pieces (at least one, seeded) replaced by "
         "the mask token, averaged over the masked pieces",
    EMBEDDING: "mean over sentences of 1 - cos(e_masked, e_intact), e the mean of the last layer's hidden states "
               "over every piece (special ones included)",
    LABEL: "cross-entropy in nats of each sentence's label, averaged over sentences (accuracy beside it)",
}
HEAD_OF = {LM: "causal_lm", MLM: "masked_lm", LABEL: "classification", EMBEDDING: None}  # load_model's head


# ------------------------------------------------------------------------------------------ what a model can do


def architectures(config) -> list[str]:
    return list(getattr(config, "architectures", None) or [])


def can_do(config) -> dict[str, str | None]:
    """objective -> None if the model (by its config) can compute it, else why not (a clause)."""
    from ..engine.models import is_causal

    names = architectures(config)
    causal = is_causal(config)
    lm_head = (not names or getattr(config, "tie_word_embeddings", False)
               or any(n.endswith(("ForCausalLM", "LMHeadModel")) for n in names))
    return {
        LM: None if causal and lm_head else ("it is an encoder, not a decoder" if not causal
                                             else "its weights have no language-model head"),
        MLM: None if not causal and any(n.endswith(("ForMaskedLM", "ForPreTraining")) for n in names)
        else "it has no masked-language-model head" + (f" (its weights are a {names[0]})" if names else ""),
        LABEL: _label_problem(config, names),
        EMBEDDING: None,
    }


def _label_problem(config, names: list[str]) -> str | None:
    """Why the label objective (softmax cross-entropy over classes, one per sentence) does not fit, or None."""
    if not any(n.endswith("ForSequenceClassification") for n in names):
        return "it has no sequence-classification head"
    if int(getattr(config, "num_labels", 2)) < 2:  # one logit: its softmax cross-entropy is 0 whatever the heads do
        return "its classification head has one output (a score or a regression), not classes"
    problem = getattr(config, "problem_type", None)
    if problem not in (None, "single_label_classification"):
        return f"its head was trained for {problem.replace('_', ' ')}, not for one class per sentence"
    return None


def choose_objective(config, requested: str, has_labels: bool, model_name: str) -> str:
    """The objective to compute: `requested`, or by `auto`: label (a classifier and labelled lines), lm (a
    decoder), mlm (an encoder with a masked-LM head), else embedding. InputError if the model cannot do it."""
    if requested not in (AUTO, *OBJECTIVES):
        raise InputError(f"unknown objective {requested!r}: use auto, {', '.join(OBJECTIVES)}")
    why = can_do(config)
    if requested == AUTO:
        if why[LABEL] is None and has_labels:
            return LABEL
        return next(o for o in (LM, MLM, EMBEDDING) if why[o] is None)
    if why[requested] is not None:
        possible = ", ".join(o for o in OBJECTIVES if why[o] is None)
        raise InputError(f"objective {requested!r} is not possible with {model_name}: {why[requested]}; "
                         f"it can do {possible}")
    if requested == LABEL and not has_labels:
        raise InputError('objective "label" needs a label on every line: JSON lines {"text": ..., "label": ...}')
    return requested


def sentence_place(number: int, lines: Sequence[int] | None) -> str:
    """Sentence `number` (from 1) as a message names it: its line of the corpus file when `lines` gives each one's."""
    return f"line {lines[number - 1]}" if lines is not None else f"sentence {number}"


def label_ids(config, labels: Sequence, lines: Sequence[int] | None = None) -> np.ndarray:
    """The class index of each label: a name of the model's id2label, or an index. InputError for one it lacks,
    naming its sentence (from 1), or its line of the corpus file when `lines` gives each sentence's."""
    names = {str(name): int(index) for index, name in (getattr(config, "id2label", None) or {}).items()}
    count = int(getattr(config, "num_labels", len(names)))
    found = []
    for number, label in enumerate(labels, start=1):
        if isinstance(label, bool) or label is None:
            index = None
        elif isinstance(label, (int, np.integer)):
            index = int(label) if 0 <= int(label) < count else None
        else:
            index = names.get(str(label))
        if index is None:
            raise InputError(f"{sentence_place(number, lines)}: the model has no label {label!r} (its labels: "
                             f"{', '.join(repr(n) for n in names) or 'none'}; or an index from 0 to {count - 1})")
        found.append(index)
    return np.array(found, dtype=np.int64)


# -------------------------------------------------------------------------------------------------- encoding


@dataclass(frozen=True)
class Batch:
    """B sentences of one forward pass, right-padded to t pieces."""

    input_ids: np.ndarray  # (B, t) int64; mlm: the chosen pieces replaced by the mask token
    attention_mask: np.ndarray  # (B, t) int64, 1 for real pieces
    targets: np.ndarray  # (B, t) int64 the piece to predict at each position (lm: the next one), IGNORE elsewhere
    labels: np.ndarray | None  # (B,) int64 class index (label)
    intact: np.ndarray | None  # (B, hidden) float32 the intact model's mean-pooled embedding (embedding)
    index: np.ndarray  # (B,) int64 each sentence's position in the corpus, from 0

    def __post_init__(self) -> None:
        assert self.input_ids.shape == self.attention_mask.shape == self.targets.shape
        assert self.index.shape == (self.input_ids.shape[0],)

    @property
    def size(self) -> int:
        return int(self.input_ids.shape[0])


@dataclass(frozen=True)
class Prepared:
    """A corpus encoded once for one objective, in batches of similar length."""

    objective: str
    batches: tuple[Batch, ...]
    sentences: int  # those scored
    tokens: int  # predicted (lm) or masked (mlm) pieces; 0 for embedding and label
    skipped: int  # sentences left out: lm, one piece (nothing to predict); mlm, no ordinary piece
    truncated: int  # sentences cut to `limit` pieces
    limit: int = 0  # the pieces a sentence is cut to (specials included)
    limit_from: str = "model"  # why: "max_tokens" (asked), "sentence-transformers" (embedding), "model" (its maximum)


@dataclass(frozen=True)
class Scorer:
    """A loaded model and the objective it computes: `base` the model without a head, `full` with it (or None)."""

    loaded: Any  # LoadedModel
    objective: str

    @property
    def base(self):
        return self.loaded.model

    @property
    def full(self):
        return self.loaded.full

    @property
    def layers(self) -> int:
        return int(self.loaded.layers)

    @property
    def heads(self) -> int:
        return int(self.loaded.heads)

    @property
    def dtype(self):
        return next(self.base.parameters()).dtype


def pieces_limit(scorer: Scorer, max_tokens: int | None) -> tuple[int, str]:
    """The pieces a sentence is cut to, and why (Prepared.limit_from): max_tokens if given, at most the model's
    maximum; for the embedding objective, where sentence-transformers cuts it for this model (the embedding as
    the model is used); else the model's maximum."""
    most = scorer.loaded.max_tokens
    if max_tokens is not None:
        return min(max_tokens, most), "max_tokens"
    if scorer.objective == EMBEDDING:
        from ..engine.models import sentence_embedding_length

        length = sentence_embedding_length(scorer.loaded.choice)
        if length is not None and length < most:
            return length, "sentence-transformers"
    return most, "model"


def prepare(scorer: Scorer, texts: Sequence[str], labels: np.ndarray | None = None, batch_size: int = 32,
            seed: int = 0, max_tokens: int | None = None) -> Prepared:
    """Encode the texts for the scorer's objective (each cut to max_tokens pieces, at most the model's maximum;
    for the embedding objective without max_tokens, where sentence-transformers cuts it for this model, if it
    does: its max_seq_length), sort them by length and cut them into batches."""
    tokenizer = scorer.loaded.tokenizer
    objective = scorer.objective
    limit, limit_from = pieces_limit(scorer, max_tokens)
    encodings = tokenizer(list(texts), truncation=True, max_length=limit, verbose=False,
                          return_special_tokens_mask=True, split_special_tokens=True)
    full_lengths = [len(ids) for ids in tokenizer(list(texts), verbose=False, split_special_tokens=True)["input_ids"]]
    rows: list[tuple[int, np.ndarray, np.ndarray]] = []  # (index, input ids, targets)
    skipped = tokens = 0
    mask_id = tokenizer.mask_token_id
    special_ids = np.array(sorted(tokenizer.all_special_ids), dtype=np.int64)
    if objective == MLM and mask_id is None:
        raise InputError("objective \"mlm\" needs a tokenizer with a mask token")
    for index, (ids, special) in enumerate(zip(encodings["input_ids"], encodings["special_tokens_mask"])):
        ids = np.array(ids, dtype=np.int64)
        targets = np.full(len(ids), IGNORE, dtype=np.int64)
        if objective == LM:
            if len(ids) < 2:
                skipped += 1
                continue
            targets[:-1] = ids[1:]
        elif objective == MLM:
            # [UNK] is no word to predict either: the vocabulary gives it, so the special-tokens mask does not mark it
            ordinary = np.flatnonzero(~np.array(special, dtype=bool) & ~np.isin(ids, special_ids))
            if len(ordinary) == 0:
                skipped += 1
                continue
            count = max(1, int(round(MASKED_SHARE * len(ordinary))))
            chosen = np.sort(np.random.default_rng([seed, index]).choice(ordinary, size=count, replace=False))
            targets[chosen] = ids[chosen]
            ids = ids.copy()
            ids[chosen] = mask_id
        tokens += int((targets != IGNORE).sum())
        rows.append((index, ids, targets))
    if not rows:
        raise InputError(f"no sentence to score: all {skipped} sentence(s) are too short for the {objective} objective"
                         + (f" once cut to {max_tokens} pieces; raise max_tokens (--max-tokens)" if max_tokens else
                            " (lm needs 2 pieces, mlm one that is not special)"))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    order = sorted(range(len(rows)), key=lambda i: len(rows[i][1]))  # stable: equal lengths keep corpus order
    batches = []
    for start in range(0, len(order), batch_size):
        chosen_rows = [rows[i] for i in order[start:start + batch_size]]
        t = max(len(ids) for _, ids, _ in chosen_rows)
        size = len(chosen_rows)
        input_ids = np.full((size, t), pad, dtype=np.int64)
        attention = np.zeros((size, t), dtype=np.int64)
        targets = np.full((size, t), IGNORE, dtype=np.int64)
        for row, (_, ids, target) in enumerate(chosen_rows):
            input_ids[row, :len(ids)] = ids
            attention[row, :len(ids)] = 1
            targets[row, :len(ids)] = target
        where = np.array([i for i, _, _ in chosen_rows], dtype=np.int64)
        batch = Batch(input_ids, attention, targets, None if labels is None else labels[where], None, where)
        if objective == EMBEDDING:
            batch = Batch(input_ids, attention, targets, None, _embed(scorer, batch).numpy(), where)
        batches.append(batch)
    truncated = sum(1 for length in full_lengths if length > limit)
    return Prepared(objective, tuple(batches), len(rows), tokens if objective in (LM, MLM) else 0, skipped,
                    truncated, limit, limit_from)


def _embed(scorer: Scorer, batch: Batch):
    """(B, hidden) float32 the intact model's mean-pooled last hidden states, on the CPU."""
    import torch

    with torch.inference_mode():
        hidden = scorer.base(**_inputs(scorer, batch, 1)).last_hidden_state
        return _pool(hidden, _tensor(scorer, batch.attention_mask, 1)).float().cpu()


# ---------------------------------------------------------------------------------------------------- losses


def _tensor(scorer: Scorer, array: np.ndarray, repeat: int):
    import torch

    tensor = torch.from_numpy(array).to(scorer.loaded.device)
    return tensor.repeat(repeat, *([1] * (tensor.dim() - 1))) if repeat > 1 else tensor


def _inputs(scorer: Scorer, batch: Batch, repeat: int) -> dict:
    return {"input_ids": _tensor(scorer, batch.input_ids, repeat),
            "attention_mask": _tensor(scorer, batch.attention_mask, repeat)}


def _pool(hidden, attention):
    """(R, t, hidden), (R, t) -> (R, hidden) the mean over the real pieces."""
    weights = attention.to(hidden.dtype)[..., None]
    return (hidden * weights).sum(1) / weights.sum(1)


def _wide(tensor):
    """float32 at least: half-precision logits are widened, float64 ones kept."""
    import torch

    return tensor if tensor.dtype == torch.float64 else tensor.float()


def _logits(scorer: Scorer, inputs: dict):
    """(R, t, vocabulary) or (R, classes) logits of the model's head."""
    import torch

    if scorer.full is not None:
        return scorer.full(**inputs).logits
    assert scorer.objective == LM, scorer.objective  # a base decoder whose head is its tied input embeddings
    hidden = scorer.base(**inputs).last_hidden_state
    logits = torch.nn.functional.linear(hidden, scorer.base.get_input_embeddings().weight)
    cap = getattr(scorer.base.config, "final_logit_softcapping", None)
    return logits if cap is None else torch.tanh(logits / cap) * cap


@dataclass
class RowLosses:
    """Per row of one forward pass: the summed loss, its count, and (label) whether the argmax was right."""

    total: Any  # (R,) float tensor: summed cross-entropy (lm, mlm), one loss (label, embedding)
    count: Any  # (R,) float tensor: predicted or masked pieces (lm, mlm), else 1
    correct: Any = None  # (R,) bool tensor (label)

    @property
    def mean(self):
        """(R,) each sentence's own loss L(x)."""
        return self.total / self.count


def row_losses(scorer: Scorer, batch: Batch, repeat: int = 1) -> RowLosses:
    """The losses of `batch` repeated `repeat` times along the batch dimension (copy k is rows kB..kB+B-1), under
    whatever masking is active."""
    import torch
    from torch.nn import functional

    inputs = _inputs(scorer, batch, repeat)
    if scorer.objective == EMBEDDING:
        assert batch.intact is not None
        hidden = scorer.base(**inputs).last_hidden_state
        embedded = _pool(hidden, inputs["attention_mask"])
        intact = torch.from_numpy(batch.intact).to(embedded.device, embedded.dtype).repeat(repeat, 1)
        cosine = functional.cosine_similarity(embedded, intact, dim=-1)
        same = (embedded == intact).all(-1)  # the intact model: exactly 0, not 1 - cos rounded
        # cos <= 1, but a batch of another shape (k masks side by side) can round it above: never a negative loss
        total = torch.where(same, torch.zeros_like(cosine), (1 - cosine).clamp(min=0))
        return RowLosses(total, torch.ones_like(total))
    logits = _logits(scorer, inputs)
    if scorer.objective == LABEL:
        assert batch.labels is not None
        labels = _tensor(scorer, batch.labels, repeat)
        total = functional.cross_entropy(_wide(logits), labels, reduction="none")
        return RowLosses(total, torch.ones_like(total), logits.argmax(-1) == labels)
    targets = _tensor(scorer, batch.targets, repeat)
    rows, length, vocabulary = logits.shape
    losses = functional.cross_entropy(_wide(logits).reshape(-1, vocabulary), targets.reshape(-1),
                                      ignore_index=IGNORE, reduction="none").reshape(rows, length)
    return RowLosses(losses.sum(1), (targets != IGNORE).sum(1).to(losses.dtype))


# --------------------------------------------------------------------------------------------------- passes


@dataclass(frozen=True)
class Evaluation:
    """The corpus objective under each of M masks."""

    objective: np.ndarray  # (M,) float64
    accuracy: np.ndarray | None  # (M,) float64 (label)


def _aggregate(objective: str, total: np.ndarray, count: np.ndarray, correct: np.ndarray | None,
               sentences: int) -> Evaluation:
    values = total / count  # lm and mlm: over pieces; label and embedding: count is the sentences
    return Evaluation(values, None if correct is None else correct / sentences)


def masks_per_pass(scorer: Scorer, batch: Batch, rows_cap: int | None = None) -> int:
    """How many copies of `batch` one forward pass takes, each under its own mask."""
    t = batch.input_ids.shape[1]
    cap = ROW_TOKENS // max(1, batch.size * t)
    if scorer.objective in (LM, MLM):
        vocabulary = int(scorer.loaded.model.get_input_embeddings().weight.shape[0])
        cap = min(cap, LOGIT_FLOATS // max(1, batch.size * t * vocabulary))
    if rows_cap is not None:
        cap = min(cap, rows_cap // batch.size)
    return max(1, cap)


def _float64(values):
    """A tensor in float64, on its device where that has float64 (else the CPU: Apple's MPS has none)."""
    import torch

    from ..engine.models import float64_device

    return values.to(float64_device(values.device), torch.float64)


def intact(scorer: Scorer, prepared: Prepared) -> Evaluation:
    """The objective of the intact model (no masking at all), as a one-mask Evaluation."""
    import torch

    total = count = 0.0
    correct = 0.0 if scorer.objective == LABEL else None
    with torch.inference_mode():
        for batch in prepared.batches:
            losses = row_losses(scorer, batch)
            total += float(_float64(losses.total).sum())
            count += float(_float64(losses.count).sum())
            if correct is not None:
                correct += float(losses.correct.sum())
    return _aggregate(scorer.objective, np.array([total]), np.array([count]),
                      None if correct is None else np.array([correct]), prepared.sentences)


def evaluate(scorer: Scorer, prepared: Prepared, masks: np.ndarray, progress: Callable[[int], Any] | None = None,
             rows_cap: int | None = None) -> Evaluation:
    """The objective under each mask of `masks` (M, layers, heads): each batch runs once per chunk of masks, its
    copies side by side; progress(n) after each pass with n = masks x sentences it scored."""
    import torch

    masks = np.asarray(masks, dtype=np.float64)
    assert masks.ndim == 3 and masks.shape[1:] == (scorer.layers, scorer.heads), masks.shape
    count_masks = masks.shape[0]
    total = np.zeros(count_masks)
    count = np.zeros(count_masks)
    correct = np.zeros(count_masks) if scorer.objective == LABEL else None
    layer_of = layer_map(scorer.base, scorer.layers)
    with torch.inference_mode():
        for batch in prepared.batches:
            chunk = masks_per_pass(scorer, batch, rows_cap)
            for start in range(0, count_masks, chunk):
                part = masks[start:start + chunk]
                k = part.shape[0]
                xi = torch.from_numpy(np.repeat(part, batch.size, axis=0)).to(scorer.loaded.device, scorer.dtype)
                with masking(scorer.base, xi, scorer.layers, layer_of) as state:
                    losses = row_losses(scorer, batch, repeat=k)
                check_calls(state, scorer.base)
                total[start:start + k] += _float64(losses.total).reshape(k, batch.size).sum(1).cpu().numpy()
                count[start:start + k] += _float64(losses.count).reshape(k, batch.size).sum(1).cpu().numpy()
                if correct is not None:
                    correct[start:start + k] += losses.correct.reshape(k, batch.size).sum(1).cpu().numpy()
                if progress is not None:
                    progress(k * batch.size)
    return _aggregate(scorer.objective, total, count, correct, prepared.sentences)


@contextmanager
def _frozen_weights(model) -> Iterator[None]:
    """No gradient for the weights (only for ξ) while active; put back afterwards."""
    parameters = list(model.parameters())
    before = [p.requires_grad for p in parameters]
    try:
        for p in parameters:
            p.requires_grad_(False)
        yield
    finally:
        for p, flag in zip(parameters, before):
            p.requires_grad_(flag)


def sentence_gradients(scorer: Scorer, batch: Batch):
    """(B, layers, heads) dL(x)/dξ at ξ = 1 for each sentence x of the batch: one forward and one backward pass
    (row b's ξ reaches row b's loss only, so the gradient of the summed losses is each sentence's own)."""
    import torch

    model = scorer.full if scorer.full is not None else scorer.base
    xi = torch.ones(batch.size, scorer.layers, scorer.heads, dtype=scorer.dtype, device=scorer.loaded.device,
                    requires_grad=True)
    with _frozen_weights(model), torch.enable_grad():
        with masking(scorer.base, xi, scorer.layers) as state:
            losses = row_losses(scorer, batch)
        check_calls(state, scorer.base)
        losses.mean.sum().backward()
    assert xi.grad is not None
    return _float64(xi.grad.detach()).cpu().numpy()


def taylor(scorer: Scorer, prepared: Prepared, progress: Callable[[int], Any] | None = None) -> np.ndarray:
    """(layers, heads) I_h = E_x |dL(x)/dξ_h| at ξ = 1, the mean over the corpus's sentences (Michel et al.)."""
    found = np.zeros((scorer.layers, scorer.heads))
    for batch in prepared.batches:
        found += np.abs(sentence_gradients(scorer, batch)).sum(0)
        if progress is not None:
            progress(batch.size)
    return found / prepared.sentences


def normalized(scores: np.ndarray) -> np.ndarray:
    """Each layer's scores divided by their l2 norm (Michel et al.); a layer of zeros stays zero."""
    norms = np.sqrt((scores ** 2).sum(1, keepdims=True))
    return np.divide(scores, norms, out=np.zeros_like(scores), where=norms > 0)


def pruning_counts(total: int, step: float) -> list[int]:
    """Heads pruned at each step: 0, step x total, 2 step x total, ... (rounded), and every head. A step of at
    most one head gives every count from 0 to total (steps of at most 1 round onto every whole number), without
    a list of 1 / step entries (a step of 1e-9 would need a billion)."""
    if step * total <= 1:
        return list(range(total + 1))
    counts = [int(round(k * step * total)) for k in range(int(math.floor(1 / step + 1e-9)) + 1)]
    return sorted(set(counts) | {0, total})
