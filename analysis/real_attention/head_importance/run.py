"""Which heads matter: `ra.objective`, `ra.importance` and `ra.write_importance` (Michel, Levy and Neubig, 2019,
"Are Sixteen Heads Really Better than One?").

Per head: `ablation`, the objective with only that head masked minus the intact objective (exact: one masked
pass per head over the corpus), and `taylor`, Michel's I_h = E_x |dL(x)/dξ_h| at ξ = 1 (one backward pass per
batch), with `taylor_normalized` each layer's scores divided by their l2 norm. Pruning: heads removed
`prune_step` of all heads at a time, least important first by `taylor_normalized`, by `ablation`, and in a seeded random
order; the scores are computed once on the intact model and are not recomputed after each step (Michel's
figure; HF's bertology script recomputes them).
"""
from __future__ import annotations

import numbers
import os
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..engine.checks import callable_or_none
from ..engine.errors import InputError, ModelUnavailable
from ..engine.text import is_blank, text_problem
from ..statistics.inputs import READ_ERRORS, Input, compression
from ..statistics.reading import CR_LINE_ENDS, cr_line_ends
from .objectives import (AUTO, DEFINITIONS, EMBEDDING, HEAD_OF, LABEL, LM, MLM, OBJECTIVES, Prepared, Scorer,
                         choose_objective, evaluate, intact, label_ids, normalized, prepare, pruning_counts,
                         sentence_place, taylor)

if TYPE_CHECKING:
    import pandas as pd

    from ..engine.models import LoadedModel

RESULTS, FIGURES = "results", "figures"
FOLDER = "importance"  # results/importance/NAME/, figures/importance/NAME/
RELATIVE_TOLERANCE = 0.01  # "within 1% of the intact objective"
EMBEDDING_TOLERANCE = 0.01  # the embedding objective is 0 intact: within 0.01 (a mean cosine >= 0.99)
ORDERS = ("taylor", "ablation", "random")
NO_TAYLOR = ("the embedding objective is at its minimum (0) on the intact model, so its gradient with respect "
             "to every head's mask is zero there and the Taylor score is empty")
OBJECTIVE_LABELS = {LM: "next-token loss (nats)", MLM: "masked-piece loss (nats)",
                    EMBEDDING: "1 - cos(embedding, intact)", LABEL: "label loss (nats)"}
_HEADED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # base module -> LoadedModel with the head


@dataclass(frozen=True, eq=False)
class ImportanceResult:
    """What `ra.importance` found: `heads` (heads.csv: layer, head from 1, ablation, taylor, taylor_normalized,
    rank), `pruning` (pruning.csv: order, heads_pruned, fraction, objective[, accuracy]) and `summary`
    (summary.json)."""

    heads: pd.DataFrame  # (layers x heads) rows
    pruning: pd.DataFrame  # one row per order and step
    summary: dict[str, Any]
    corpus_path: Path | None = field(default=None, repr=False)  # corpus_file: write_importance never replaces it

    def __repr__(self) -> str:
        return (f"<ImportanceResult: {self.summary['model']}, objective {self.summary['objective']} = "
                f"{self.summary['intact_objective']:.4g} on {self.summary['sentences']} sentence(s)>")


# ------------------------------------------------------------------------------------------------- inputs


def split_sentences(sentences, lines: Sequence[int] | None = None) -> tuple[list[str], list | None]:
    """Strings, or dicts {"text": ..., "label": ...} -> (texts, labels or None when any line has none). A message
    names a sentence by its number (from 1), or by its line of the corpus file when `lines` gives each one's."""
    if isinstance(sentences, (str, bytes)) or not isinstance(sentences, Sequence):
        raise InputError("sentences must be a list of strings (or of {\"text\": ..., \"label\": ...} dicts)")
    texts: list[str] = []
    labels: list = []
    unlabelled = 0  # the first sentence without a label, from 1; 0: none
    for number, item in enumerate(sentences, start=1):
        if isinstance(item, dict) and "label" in item:
            text = item.get("text")
            labels.append(item["label"])
        else:
            text = item.get("text") if isinstance(item, dict) else item
            unlabelled = unlabelled or number
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"{sentence_place(number, lines)} is {'empty' if isinstance(text, str) else 'not a string'}: "
                             "give each as a non-empty string")
        problem = text_problem(text)  # the one text rule: a NUL, a lone surrogate (the tokenizer's TypeError)
        if problem is not None:
            raise InputError(f"{sentence_place(number, lines)} {problem}")
        texts.append(text)
    if not texts:
        raise InputError("no sentences: give at least one")
    if labels and unlabelled:  # some labelled, some not: a mistake, and --objective auto would drop every label
        raise InputError(f"{sentence_place(unlabelled, lines)} has no \"label\", but {len(labels)} other(s) have one: "
                         "label every sentence, or none")
    return texts, labels or None


def read_corpus(path: str | Path, limit: int | None = None) -> list:
    """A corpus file: one sentence a line (blank lines skipped), or JSON lines {"text": ..., "label": ...};
    the first `limit` only. InputError naming the line for a bad one. Lines end at "\n" alone (a "\r" before it
    is dropped), as `heads --corpus` reads them: a form feed or U+2028 inside a line is text, not a line break."""
    return read_corpus_lines(path, limit)[0]


def read_corpus_lines(path: str | Path, limit: int | None = None) -> tuple[list, list[int]]:
    """read_corpus, and the file's line number (from 1) of each sentence, for messages about them."""
    import json

    from ..statistics.inputs import refuse_treebank

    path = Path(path)
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be at least 1, not {limit}")
    refuse_treebank(str(path), "--corpus")
    try:
        if compression(str(path)) and path.is_file():  # .gz, .bz2, .xz, .zst, as heads --corpus reads them
            try:
                with Input(str(path), "text", what="--corpus").open() as handle:
                    data = handle.read()
            except READ_ERRORS as error:  # a damaged or cut compressed file: never a shorter corpus
                raise InputError(f"--corpus {path} cannot be read: {error or type(error).__name__}") from None
        else:
            data = path.read_bytes()
        text = data.decode("utf-8").removeprefix("\ufeff")  # a BOM is no text (it hid a JSONL file's first record)
    except UnicodeDecodeError as error:  # where, as heads --corpus says it
        number, start = data.count(b"\n", 0, error.start) + 1, data.rfind(b"\n", 0, error.start) + 1
        raise InputError(f"line {number} of --corpus {path} is not UTF-8 ({error.reason} at byte "
                         f"{error.start - start})") from None
    except FileNotFoundError:
        raise InputError(f"--corpus {path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"--corpus {path} is a folder; pass a text or .jsonl file") from None
    except OSError as error:  # a path through a file, a link loop, no permission, a device error
        raise InputError(f"--corpus {path} cannot be read: {error.strerror or error}") from None
    found: list = []
    numbers: list[int] = []
    pieces = text.split("\n")
    for number, line in enumerate(pieces, start=1):
        line = line.rstrip("\r")
        if not line.lstrip().startswith("{") and cr_line_ends(line, number == 1,
                                                              number < len(pieces) or text.endswith("\n")):
            raise InputError(f"--corpus {path}, line {number}: {CR_LINE_ENDS}")
        if is_blank(line):  # whitespace or zero-width characters only: a blank line, as heads --corpus skips it
            continue
        if line.lstrip().startswith("{"):
            try:
                item = json.loads(line)
            except json.JSONDecodeError as error:
                raise InputError(f"--corpus {path}, line {number}: not valid JSON ({error.msg})") from None
            except (RecursionError, ValueError) as error:  # nested too deeply, an integer of 5,000 digits
                raise InputError(f"--corpus {path}, line {number}: not a JSON record of this tool's kind ("
                                 f"{'nested too deeply' if isinstance(error, RecursionError) else error})") from None
            if not isinstance(item, dict) or not isinstance(item.get("text"), str):
                raise InputError(f"--corpus {path}, line {number}: a JSON line needs a \"text\" string")
            if not item["text"].strip():
                raise InputError(f"--corpus {path}, line {number}: its \"text\" is empty")
            found.append(item)
        else:
            found.append(line)
        numbers.append(number)
        if limit is not None and len(found) >= limit:
            break
    if not found:
        raise InputError(f"--corpus {path} has no sentence")
    return found, numbers


def check_options(batch_size: int, prune_step: float, seed: int, max_tokens: int | None = None
                  ) -> tuple[int, float, int, int | None]:
    """InputError for an option importance cannot take (the command line checks them before the model loads);
    -> the four as Python numbers (numpy ones are taken: the summary is JSON)."""
    from ..engine.batches import MAX_BATCH_SIZE
    from ..engine.checks import whole_number

    if max_tokens is not None:
        max_tokens = whole_number(max_tokens, "max_tokens (--max-tokens)", 2)
    batch_size = whole_number(batch_size, "batch_size (--batch-size)", 1, MAX_BATCH_SIZE)
    if isinstance(prune_step, bool) or not isinstance(prune_step, numbers.Real) or not 0 < prune_step <= 1:
        raise InputError(f"prune_step (--prune-step) must be a fraction above 0 and at most 1, not {prune_step!r:.60}")
    return batch_size, float(prune_step), whole_number(seed, "seed (--seed)", 0), max_tokens


def scorer_for(model: LoadedModel | str | os.PathLike, objective: str, has_labels: bool) -> Scorer:
    """The model with what the objective needs: a name is loaded with the head; a LoadedModel without the head
    is reloaded with it (once, kept while the model lives), unless a decoder's head is its tied input
    embeddings."""
    from ..engine.models import LoadedModel, choose_model, load_model

    if isinstance(model, (str, os.PathLike)):
        choice = choose_model(None, os.fspath(model), None)
        config = model_config(choice)
        chosen = choose_objective(config, objective, has_labels, choice.name)
        return Scorer(load_model(choice, head=HEAD_OF[chosen]), chosen)
    if not isinstance(model, LoadedModel):
        raise InputError(f"model must be what ra.load returns or a model name, not {type(model).__name__}")
    config = model.model.config
    chosen = choose_objective(config, objective, has_labels, model.choice.name)
    head = HEAD_OF[chosen]
    if head is None or model.full is not None and _has_head(model.full, head):
        return Scorer(model, chosen)
    if chosen == LM and getattr(config, "tie_word_embeddings", False) and config.model_type in PLAIN_TIED_HEADS:
        return Scorer(model, chosen)
    headed = _HEADED.get(model.model)
    if headed is None or not _has_head(headed.full, head):
        headed = load_model(model.choice, device=model.device, head=head)
        _HEADED[model.model] = headed
    return Scorer(headed, chosen)


# Decoders whose language-model head, when tied, is the input embeddings' product alone (Gemma 2 and 3 with their
# final soft-capping, which objectives._logits applies): the tied shortcut computes their logits without loading the
# head. Others scale theirs (Granite divides by logits_scaling, Cohere multiplies by logit_scale): they load the head.
PLAIN_TIED_HEADS = frozenset({"llama", "mistral", "qwen2", "qwen3", "gpt2", "gemma", "gemma2", "gemma3_text",
                              "smollm3", "olmo2"})
HEAD_CLASSES = {"causal_lm": ("ForCausalLM", "LMHeadModel"), "masked_lm": ("ForMaskedLM",),
                "classification": ("ForSequenceClassification",)}  # how the class of a model with the head ends


def _has_head(full, head: str) -> bool:
    return type(full).__name__.endswith(HEAD_CLASSES[head])


def model_config(choice, offline: bool = False):
    """The model's config, read without loading its weights (for the checks before the model loads)."""
    from transformers import AutoConfig

    from ..engine.models import hub_options, quiet_loading

    source = str(choice.path) if choice.path is not None else choice.name
    options = {"local_files_only": True} if choice.path is not None else hub_options(choice, offline)
    if choice.gguf_file is not None:
        options = {**options, "gguf_file": choice.gguf_file}
    try:
        with quiet_loading(gguf=choice.gguf_file is not None):
            return AutoConfig.from_pretrained(source, **options)
    except (OSError, ValueError, KeyError) as error:
        raise ModelUnavailable(f"cannot read the config of {choice.name}: {str(error).splitlines()[0]}") from None


def _mask_array(head_mask, layers: int, heads: int, dtype=None) -> np.ndarray:
    """head_mask as a (layers, heads) float64 array; InputError unless it holds finite numbers that the model's
    dtype (a torch float type; None: float32) can hold."""
    import torch

    try:
        given = np.asarray(head_mask)
        if given.dtype.kind not in "biuf":  # strings ("1" read as 1.0), objects, complex numbers
            raise TypeError(given.dtype)
        array = given.astype(np.float64)
    except (TypeError, ValueError):
        raise InputError("head_mask must be a (layers, heads) array of numbers") from None
    if array.shape != (layers, heads):
        raise InputError(f"head_mask must have shape (layers, heads) = ({layers}, {heads}), not {array.shape}")
    if not np.isfinite(array).all():
        raise InputError("head_mask must hold finite numbers")
    dtype = torch.float32 if dtype is None else dtype
    largest, most = float(np.abs(array).max(initial=0.0)), float(torch.finfo(dtype).max)
    if largest > most:  # it would be inf in the model's arithmetic, and the loss NaN
        raise InputError(f"head_mask must hold numbers the model's {str(dtype).removeprefix('torch.')} can hold (at "
                         f"most about {most:.3g} in size), not {largest:.3g}")
    return array


def _finite_intact(value: float) -> float:
    """The intact model's objective; ModelUnavailable if it is not finite (its arithmetic overflows)."""
    if not np.isfinite(value):
        raise ModelUnavailable(f"the objective of the intact model is not finite ({value}) on these sentences: its "
                               "arithmetic overflows (try float32 or another --device)")
    return value


def _prepared(scorer: Scorer, texts: list[str], labels: list | None, batch_size: int, seed: int,
              max_tokens: int | None) -> Prepared:
    ids = label_ids(scorer.base.config, labels) if scorer.objective == LABEL and labels is not None else None
    return prepare(scorer, texts, ids, batch_size=batch_size, seed=seed, max_tokens=max_tokens)


# ------------------------------------------------------------------------------------------------------ API


def objective(model: LoadedModel | str | os.PathLike[str], sentences: Sequence[str | dict[str, Any]], objective: str = AUTO,
              head_mask: Any = None, *, batch_size: int = 32, seed: int = 0, max_tokens: int | None = None) -> float:
    """The objective (a loss: lower is better) of the model on the sentences, with head h of layer l multiplied
    by head_mask[l, h] ((layers, heads) of 0/1 or any real ξ; None: the intact model).

    objective: "lm" (decoders: next-token cross-entropy per predicted piece), "mlm" (encoders with a masked-LM
    head: 15% of the pieces masked, seeded), "embedding" (1 - cos with the intact model's mean-pooled
    embedding), "label" (a classifier; sentences as {"text": ..., "label": ...}), or "auto" (label, lm, mlm,
    embedding: the first the model and the sentences allow). With head_mask all ones, the result equals the
    intact one bit for bit. max_tokens: cut each sentence to its first max_tokens pieces (specials included)."""
    texts, labels = split_sentences(sentences)
    batch_size, _, seed, max_tokens = check_options(batch_size, 0.1, seed, max_tokens)
    scorer = scorer_for(model, objective, labels is not None)
    prepared = _prepared(scorer, texts, labels, batch_size, seed, max_tokens)
    if head_mask is None:
        return _finite_intact(float(intact(scorer, prepared).objective[0]))
    dtype = next(scorer.base.parameters()).dtype
    mask = _mask_array(head_mask, scorer.layers, scorer.heads, dtype)
    value = float(evaluate(scorer, prepared, mask[None]).objective[0])
    if not np.isfinite(value):  # the mask's fault only if the intact model's objective is finite
        _finite_intact(float(intact(scorer, prepared).objective[0]))
        raise InputError(f"the objective is not finite ({value}) under this head_mask: its largest value in size, "
                         f"{float(np.abs(mask).max()):.3g}, overflows the model's {str(dtype).removeprefix('torch.')} "
                         "arithmetic")
    return value


def importance(model: LoadedModel | str | os.PathLike[str], sentences: Sequence[str | dict[str, Any]], objective: str = AUTO, *,
               batch_size: int = 32, prune_step: float = 0.1, seed: int = 0, max_tokens: int | None = None,
               corpus: str | None = None, corpus_file: str | Path | None = None,
               progress: Callable[[int], Any] | None = None) -> ImportanceResult:
    """Score every head (ablation and Taylor) and prune heads in three orders; see ImportanceResult.

    progress(n), if given, is called as the work advances, n sentence passes at a time; the total is
    `importance_work(layers, heads, sentences, prune_step)`. corpus: a name for the summary; corpus_file: the
    file the sentences were read from, whose name and sha256 the summary records. max_tokens: cut
    each sentence to its first max_tokens pieces (specials included). The device running out of memory is one
    OutOfDeviceMemory that says to lower batch_size."""
    from ..engine.extract import out_of_memory_as_error

    with out_of_memory_as_error(getattr(model, "device", "cpu"), batch_size):  # a name is loaded on the CPU
        return _importance(model, sentences, objective, batch_size=batch_size, prune_step=prune_step, seed=seed,
                           max_tokens=max_tokens, corpus=corpus, corpus_file=corpus_file, progress=progress)


def _importance(model: LoadedModel | str | os.PathLike[str], sentences: Sequence[str | dict[str, Any]], objective: str = AUTO, *,
               batch_size: int = 32, prune_step: float = 0.1, seed: int = 0, max_tokens: int | None = None,
               corpus: str | None = None, corpus_file: str | Path | None = None,
               progress: Callable[[int], Any] | None = None) -> ImportanceResult:
    """importance, the device running out of memory left to the caller."""
    import pandas as pd

    from ..engine.pipeline import versions

    texts, labels = split_sentences(sentences)
    batch_size, prune_step, seed, max_tokens = check_options(batch_size, prune_step, seed, max_tokens)
    callable_or_none(progress, "progress", "a function progress(n) of the sentence passes done")
    # a name for the summary, of any characters (a file name that is not UTF-8 too: write_importance makes a folder
    # name of it, and JSON escapes it)
    if corpus is not None and (not isinstance(corpus, str) or not corpus.strip()):
        raise InputError(f"corpus must be a name for the summary (a non-empty string), not {corpus!r:.60}")
    source = None if corpus_file is None else _corpus_record(corpus_file)  # before any work
    scorer = scorer_for(model, objective, labels is not None)
    prepared = _prepared(scorer, texts, labels, batch_size, seed, max_tokens)
    layers, heads = scorer.layers, scorer.heads
    count = layers * heads
    has_taylor = scorer.objective != EMBEDDING
    if progress is not None and prepared.skipped:  # the total counts every sentence; the skipped ones run no pass
        progress(prepared.skipped * importance_work(layers, heads, 1, prune_step, has_taylor))
    base = intact(scorer, prepared)
    intact_value = float(base.objective[0])
    if progress is not None:
        progress(prepared.sentences)
    single = np.ones((count, layers, heads))
    single.reshape(count, count)[np.arange(count), np.arange(count)] = 0.0  # mask k: head k alone off
    ablation = (evaluate(scorer, prepared, single, progress).objective - intact_value).reshape(layers, heads)
    scores = taylor(scorer, prepared, progress) if has_taylor else np.full((layers, heads), np.nan)
    scaled = normalized(scores) if has_taylor else scores
    table = pd.DataFrame({
        "layer": np.repeat(np.arange(1, layers + 1), heads), "head": np.tile(np.arange(1, heads + 1), layers),
        "ablation": ablation.reshape(-1), "taylor": scores.reshape(-1), "taylor_normalized": scaled.reshape(-1),
    })
    order = np.lexsort((np.arange(count), -ablation.reshape(-1)))  # most important first; ties by position
    rank = np.empty(count, dtype=np.int64)
    rank[order] = np.arange(1, count + 1)
    table["rank"] = rank
    # Michel et al. prune by the layer-normalised score (their Sec. 4.2; the l2 norm makes layers comparable)
    orders = {"taylor": np.lexsort((np.arange(count), scaled.reshape(-1)))} if has_taylor else {}
    orders["ablation"] = np.lexsort((np.arange(count), ablation.reshape(-1)))
    orders["random"] = np.random.default_rng(seed).permutation(count)
    counts = pruning_counts(count, prune_step)
    masks = np.ones((len(orders) * len(counts), layers, heads))
    for o, removal in enumerate(orders.values()):
        for c, pruned in enumerate(counts):
            masks[o * len(counts) + c].reshape(-1)[removal[:pruned]] = 0.0
    curve = evaluate(scorer, prepared, masks, progress)
    pruning = pd.DataFrame({
        "order": np.repeat(list(orders), len(counts)), "heads_pruned": np.tile(counts, len(orders)),
        "fraction": np.tile(np.array(counts) / count, len(orders)), "objective": curve.objective,
    })
    if curve.accuracy is not None:
        pruning["accuracy"] = curve.accuracy
    tolerance = EMBEDDING_TOLERANCE if scorer.objective == EMBEDDING else RELATIVE_TOLERANCE * abs(intact_value)
    loaded = scorer.loaded
    summary = {
        "model": loaded.choice.name,
        "revision": loaded.revision,
        **({"weights": loaded.choice.weights_note} if loaded.choice.weights_note else {}),
        "corpus": corpus,
        **({"corpus_file": source} if source is not None else {}),
        "objective": scorer.objective,
        "definition": DEFINITIONS[scorer.objective],
        "intact_objective": intact_value,
        **({"intact_accuracy": float(base.accuracy[0])} if base.accuracy is not None else {}),
        "sentences": prepared.sentences,
        **({"predicted_tokens" if scorer.objective == LM else "masked_tokens": prepared.tokens}
           if scorer.objective in (LM, MLM) else {}),
        "skipped_sentences": prepared.skipped,
        "truncated_sentences": prepared.truncated,
        "max_tokens": max_tokens,
        "pieces_limit": {"pieces": prepared.limit, "from": prepared.limit_from},
        "layers": layers,
        "heads": heads,
        "seed": seed,
        "prune_step": prune_step,
        "scores_recomputed_after_each_step": False,
        "spearman_taylor_ablation": _spearman(scores.reshape(-1), ablation.reshape(-1)) if has_taylor else None,
        **({} if has_taylor else {"taylor_empty_because": NO_TAYLOR}),
        "tolerance": tolerance,
        "tolerance_rule": ("objective - intact <= 0.01 (the mean over sentences of 1 - cosine; a mean cosine >= "
                           "0.99)" if scorer.objective == EMBEDDING else
                           "objective - intact <= 1% of |intact| (a loss lower than intact is within it)"),
        "largest_fraction_within_tolerance": {
            name: _within(pruning[pruning["order"] == name], intact_value, tolerance) for name in orders},
        "versions": versions(),
        # the masked passes' bits depend on the batch (importance.md): a rerun needs the same of both
        "batch_size": batch_size,
        "device": str(loaded.device),
    }
    return ImportanceResult(table, pruning, summary,
                            corpus_path=None if corpus_file is None else Path(corpus_file))


def _text_sha256(corpus_file) -> str:
    """The sha256 of a compressed file's text (what it decompresses to)."""
    from ..engine.hashing import stream_sha256

    try:
        with Input(os.fspath(corpus_file), "text", what="--corpus").open() as handle:
            return stream_sha256(handle)
    except READ_ERRORS as error:
        raise InputError(f"--corpus {os.fspath(corpus_file)} cannot be read: {error or type(error).__name__}") from None


def _corpus_record(corpus_file) -> dict:
    """summary.json's record of the corpus file: its name and sha256; InputError if it cannot be read."""
    from ..engine.hashing import file_sha256

    if not isinstance(corpus_file, (str, os.PathLike)):
        raise InputError(f"corpus_file must be a path, not {type(corpus_file).__name__}")
    import stat

    try:
        if stat.S_ISDIR(os.stat(corpus_file).st_mode):
            raise InputError(f"corpus_file {os.fspath(corpus_file)!r} is a folder: pass the file the sentences were "
                             "read from")
        if not stat.S_ISREG(os.stat(corpus_file).st_mode):  # a pipe (/dev/stdin) was read once, for the text
            return {"name": Path(corpus_file).name, "sha256": None,
                    "note": "not a regular file (a pipe or a device): read once, not hashed"}
        if compression(os.fspath(corpus_file)):  # the text inside, as heads --corpus and compare record it
            return {"name": Path(corpus_file).name, "sha256": _text_sha256(corpus_file)}
        return {"name": Path(corpus_file).name, "sha256": file_sha256(corpus_file)}
    except OSError as error:
        raise InputError(f"corpus_file {os.fspath(corpus_file)!r} cannot be read: {error.strerror or error}") from None


def importance_work(layers: int, heads: int, sentences: int, prune_step: float, taylor_scores: bool = True) -> int:
    """The progress total of `importance`: sentence passes of the intact, masked, Taylor and pruning passes."""
    orders = 3 if taylor_scores else 2
    return sentences * (1 + layers * heads + (1 if taylor_scores else 0)
                        + orders * len(pruning_counts(layers * heads, prune_step)))


def _spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    import pandas as pd

    value = pd.Series(a).rank().corr(pd.Series(b).rank())
    return None if not np.isfinite(value) else float(value)


def _within(curve: pd.DataFrame, intact_value: float, tolerance: float) -> float:
    """The largest fraction pruned such that every step up to it stays within tolerance of the intact objective."""
    best = 0.0
    for fraction, value in zip(curve["fraction"], curve["objective"]):
        if value - intact_value > tolerance:  # a loss that falls is no harm (Michel et al. measure degradation)
            break
        best = float(fraction)
    return best


# ---------------------------------------------------------------------------------------------------- files


def output_name(name: str | None, corpus: Path) -> str:
    """The folder under results/importance/: --name if given (it must be a plain folder name: '' is not), else
    the corpus file's name without suffix or leading dots."""
    from ..engine.naming import name_from_file

    return folder_name(name) if name is not None else name_from_file(corpus.stem, corpus.name)


def objective_for(choice, objective: str, labels: list | None, offline: bool = False,
                  lines: list[int] | None = None) -> str:
    """The objective `importance` runs for the chosen model (choose_objective, from its configuration alone), and
    for `label` every label checked against the model's: InputError before the model loads, naming the corpus
    file's line of a bad label when `lines` (read_corpus_lines) are given."""
    from .objectives import LABEL, choose_objective, label_ids

    config = model_config(choice, offline)
    chosen = choose_objective(config, objective, labels is not None, choice.name)
    if chosen == LABEL:
        label_ids(config, labels or [], lines)
    return chosen


def folder_name(name: str) -> str:
    from ..outputs.folders import plain_folder_name

    return plain_folder_name(name, "name (--name)")


def default_name(result: ImportanceResult) -> str:
    """The corpus's name as one plain folder name (sst2:validation -> sst2-validation), else the model's."""
    from ..engine.naming import plain_name

    corpus = result.summary.get("corpus")
    named = plain_name(str(corpus), "")[:100] if corpus else ""
    return named or plain_name(Path(str(result.summary["model"])).name)


def write_importance(result: ImportanceResult, out: str | Path = ".", name: str | None = None,
                     *, formats: str | tuple[str, ...] = ("png",), wait: bool = True) -> tuple[Path, Path]:
    """Write OUT/results/importance/NAME/ (heads.csv, pruning.csv, summary.json) and OUT/figures/importance/NAME/
    (ablation, taylor (when defined) and pruning figures in each format), all at once (staged). NAME: the corpus
    name, else the model's. wait=False: stop with an error if another run is writing them. -> the two folders."""
    from ..outputs.figio import save_figure
    from ..outputs.files import write_csv, write_json
    from ..outputs.formats import writer_options
    from ..outputs.staging import staged_outputs

    if not isinstance(result, ImportanceResult):
        raise InputError(f"write_importance takes what ra.importance returns, not {type(result).__name__}")
    from .figures import pruning_figure, score_heatmap

    out, formats, wait = writer_options(out, formats, wait)  # formats=(): the tables alone
    folder = folder_name(default_name(result) if name is None else name)
    summary = result.summary
    title = f"{Path(str(summary['model'])).name}, objective {summary['objective']}"
    with staged_outputs(wait=wait, inputs=[result.corpus_path] if result.corpus_path else []) as staging:
        results = staging.folder(out / RESULTS / FOLDER / folder)
        figures = staging.folder(out / FIGURES / FOLDER / folder)
        # the scores may be tiny (a confident classifier's ablation: 4e-6): significant digits, not decimals
        write_csv(result.heads, results / "heads.csv", float_format="%.6g")
        write_csv(result.pruning, results / "pruning.csv", float_format="%.6g")  # as small: a label loss
        write_json(summary, results / "summary.json")
        for fmt in formats:
            save_figure(score_heatmap(result.heads, "ablation", f"{title}: ablation (objective rise when the head "
                                      "alone is masked)", "ablation"), figures / f"ablation.{fmt}")
            if result.heads["taylor"].notna().any():
                save_figure(score_heatmap(result.heads, "taylor", f"{title}: Taylor score E|dL/d\u03be|",
                                          "taylor"), figures / f"taylor.{fmt}")
            save_figure(pruning_figure(result.pruning, summary["intact_objective"], f"{title}: pruning curves",
                                       OBJECTIVE_LABELS[summary["objective"]], summary.get("intact_accuracy")),
                        figures / f"pruning.{fmt}")
    return out / RESULTS / FOLDER / folder, out / FIGURES / FOLDER / folder


def describe(result: ImportanceResult) -> str:
    """The human summary: the intact objective, the most important heads and the pruning tolerance."""
    s = result.summary
    top = result.heads.sort_values("rank").head(5)
    lines = [f"{s['model']}: objective {s['objective']} = {s['intact_objective']:.4f} on {s['sentences']} "
             "sentence(s)" + (f", accuracy {s['intact_accuracy']:.3f}" if "intact_accuracy" in s else ""),
             "most important heads by ablation: " + ", ".join(
                 f"L{r.layer}H{r.head} ({r.ablation:+.3g})" for r in top.itertuples(index=False))]
    if s["spearman_taylor_ablation"] is not None:
        lines.append(f"Spearman rho between taylor and ablation: {s['spearman_taylor_ablation']:.3f}")
    lines.append("largest fraction of heads pruned within tolerance: " + ", ".join(
        f"{order} {100 * fraction:.0f}%" for order, fraction in s["largest_fraction_within_tolerance"].items()))
    return "\n".join(lines)


__all__ = ["ImportanceResult", "OBJECTIVES", "importance", "objective", "write_importance"]
