"""`real-attention detect` and `ra.detect`: Olsson et al.'s (2022) repeated-random-token test, per head, token level.

Each sample is `length` tokens drawn uniformly (seeded) from the vocabulary without special or byte-fallback tokens,
repeated `repeats` times, with the specials the tokenizer puts around a text (BERT's [CLS] ... [SEP], a decoder's
BOS when it uses one). In the repeats after the first, the token at position i of repeat r (from 0) has its earlier
occurrences at i - kL, k = 1..r (L = length), and per head:

    induction: mean over queries of the weight from i summed over i - kL + 1, the token right after each earlier
               occurrence (the keys of TransformerLens's detector and Olsson et al.'s prefix matching);
    duplicate: mean over queries of the weight from i summed over i - kL, every earlier occurrence;
    previous:  mean weight from i to i - 1;
    first:     mean weight from i to position 0 (the first token, whatever it is: the attention sink);
    entropy:   mean entropy of the rows, in nats (0 ln 0 = 0).

Means over every such query of every sample. The test looks back, as Olsson et al.'s does: an encoder's query also
sees the later repeats, which these scores leave out. `chance` is each score under uniform attention over the keys a
query sees (1/T each for an encoder, the mean of 1/(i + 1) for a decoder, times the query's r earlier copies for
induction and duplicate; entropy ln T, the mean of ln(i + 1)). The keys a query sees are read from the maps, per layer:
those its row gives any weight in any head and sample (a masked key gets exactly 0), so a sliding-window layer's
chance counts the window's keys only (in half precision, where a tiny weight rounds to 0, the run between a query's
first and last seen keys).
One forward pass per batch of samples; each layer's maps are reduced to these five sums as the layer ends.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ..engine.errors import InputError, ModelUnavailable

if TYPE_CHECKING:
    from ..engine.models import LoadedModel
    from ..engine.progress import ProgressBar

DEFAULTS = {"length": 25, "repeats": 4, "samples": 32, "seed": 0}
SCORES = ("induction", "duplicate", "previous", "first", "entropy")
HEADS_COLUMNS = ["layer", "head", *SCORES]
BYTE_FALLBACK = re.compile(r"^<0x[0-9A-Fa-f]{2}>$")  # SentencePiece's byte tokens, e.g. <0x0A>
UNUSED = re.compile(r"^\[unused\d+\]$")  # BERT's reserved [unused0] ... [unused993]: never trained
TOP = 5  # the strongest heads of each score that summary.json lists (for entropy: the lowest, most focused)
MIN_LENGTH = 3  # at 2, i - L + 1 is i - 1: induction would be the previous-token score
DETECT_FIGURE = "scores"


@dataclass(frozen=True, eq=False)
class DetectResult:
    """What `ra.detect` computed: heads.csv (layer, head from 1, and the five scores) and summary.json."""

    heads: pd.DataFrame
    summary: dict[str, Any]

    def __repr__(self) -> str:
        top = {name: self.summary["top"][name][0] for name in ("induction", "previous")}
        return (f"<DetectResult: {self.summary['model']}, {self.summary['samples']} samples of {self.summary['length']} "
                f"tokens x {self.summary['repeats']}; top induction L{top['induction']['layer']}H"
                f"{top['induction']['head']} ({top['induction']['score']:.2f}), top previous "
                f"L{top['previous']['layer']}H{top['previous']['head']} ({top['previous']['score']:.2f})>")


MAX_SAMPLES = 1_000_000


def check_options(length, repeats, samples, seed, batch_size=32) -> None:
    """InputError naming the first bad option (before any model loads)."""
    from ..engine.batches import MAX_BATCH_SIZE

    for name, value, low in (("length (--length)", length, MIN_LENGTH), ("repeats (--repeats)", repeats, 2),
                             ("samples (--samples)", samples, 1), ("seed (--seed)", seed, 0),
                             ("batch_size (--batch-size)", batch_size, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise InputError(f"{name} must be a whole number, not {value!r}")
        if value < low:
            why = {"length (--length)": " (at 2 the token after a previous occurrence is the previous token: "
                                          "induction and previous would be one score)",
                   "repeats (--repeats)": " (the scores are read in the repeats after the first)"}.get(name, "")
            raise InputError(f"{name} must be at least {low}, not {value}{why}")
    if batch_size > MAX_BATCH_SIZE:
        raise InputError(f"batch_size (--batch-size) must be at most {MAX_BATCH_SIZE:,}, not {batch_size:,}")
    if samples > MAX_SAMPLES:  # every sequence is drawn at once: 10**12 of them would ask for terabytes
        raise InputError(f"samples (--samples) must be at most {MAX_SAMPLES:,}, not {samples:,} (a few dozen give stable "
                         "scores)")


def candidate_ids(loaded) -> np.ndarray:
    """(V,) int64 token ids to draw from: every id the embeddings have, without the tokenizer's special and added
    tokens, SentencePiece's byte-fallback tokens (<0x00> ... <0xFF>) and BERT's never-trained [unusedN]."""
    tokenizer = loaded.tokenizer
    size = min(len(tokenizer), int(loaded.model.get_input_embeddings().num_embeddings))
    left_out = set(tokenizer.all_special_ids) | set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
    ids = np.array([i for i in range(size) if i not in left_out], dtype=np.int64)
    pieces = tokenizer.convert_ids_to_tokens(ids.tolist())
    keep = np.array([not (isinstance(p, str) and (BYTE_FALLBACK.match(p) or UNUSED.match(p))) for p in pieces],
                    dtype=bool)
    return ids[keep]


def around(tokenizer) -> tuple[list[int], list[int]]:
    """The special ids the tokenizer puts before and after a text's pieces (BERT: [CLS] and [SEP]; a Llama-style
    decoder: BOS and nothing; GPT-2: nothing), read from its encoding of a word."""
    encoding = tokenizer("a", return_special_tokens_mask=True, verbose=False)
    ids, special = encoding["input_ids"], encoding["special_tokens_mask"]
    inner = [i for i, flag in enumerate(special) if not flag]
    if not inner:
        return list(ids), []
    return list(ids[:inner[0]]), list(ids[inner[-1] + 1:])


def sequences(loaded, length: int, repeats: int, samples: int, seed: int) -> tuple[np.ndarray, int, int]:
    """-> ((samples, T) int64 input ids, the offset of the first drawn token, the number of candidate ids)."""
    candidates = candidate_ids(loaded)
    if len(candidates) < 2:
        raise InputError(f"{loaded.choice.short}'s vocabulary has {len(candidates)} ordinary token(s) to draw from")
    before, after = around(loaded.tokenizer)
    total = len(before) + length * repeats + len(after)
    if total > loaded.max_tokens:
        raise InputError(f"length (--length) {length} x repeats (--repeats) {repeats} with {len(before) + len(after)} "
                         f"special token(s) is {total} tokens; {loaded.choice.short} takes at most {loaded.max_tokens}")
    drawn = np.random.default_rng(seed).choice(candidates, size=(samples, length), replace=True)
    body = np.tile(drawn, (1, repeats))  # (samples, length * repeats)
    ids = np.concatenate([np.tile(np.array(before, dtype=np.int64), (samples, 1)), body,
                          np.tile(np.array(after, dtype=np.int64), (samples, 1))], axis=1)
    return ids.astype(np.int64), len(before), len(candidates)


def chance(visible: np.ndarray, queries: np.ndarray, offset: int, length: int) -> dict[str, float]:
    """Each score under uniform attention over the keys a query sees. visible: (Q, T) bool, the keys each query
    sees (an encoder's all T, a decoder's the i + 1 up to it, a sliding window's the last few); queries: (Q,) their
    positions. Induction and duplicate add the weight on every earlier copy the query sees (and the token after it)."""
    seen = visible.sum(axis=1).astype(np.float64)  # every query sees itself (detect refuses maps without a weight)
    positions, real = copy_targets(queries, offset, length)
    rows = np.arange(len(queries))
    successors = (visible[rows[:, None], positions + 1] & real).sum(axis=1)
    copies = (visible[rows[:, None], positions] & real).sum(axis=1)
    mean = lambda counts: round(float(np.mean(counts / seen)), 6)  # noqa: E731
    return {"induction": mean(successors), "duplicate": mean(copies), "previous": mean(visible[rows, queries - 1]),
            "first": mean(visible[:, 0]), "entropy": round(float(np.mean(np.log(seen))), 6)}


def chance_summary(visible: np.ndarray, queries: np.ndarray, offset: int, length: int, *,
                   half_precision: bool = False) -> dict:
    """visible: (L, Q, T) bool per layer -> summary.json's `chance` (the layers that see the most keys: all of them
    but for sliding windows), and `chance_by_layer` (one dict per layer from 1) where some layer sees fewer keys.

    half_precision: the maps were float16 or bfloat16, where a weight below about 6e-8 rounds to 0, so a key a
    query sees can read as masked: each query's seen keys are then taken as one run (a causal mask's, a window's),
    the query itself included. In float32 a visible key's weight reaches 0 only 103 nats below its row's largest
    in every head and sample, so the maps are read as they are: a mask with gaps (block-sparse, a global key plus
    a window) counts only the keys it lets through."""
    if half_precision:
        visible = np.maximum.accumulate(visible, axis=2) & np.maximum.accumulate(visible[..., ::-1], axis=2)[..., ::-1]
        visible[:, np.arange(len(queries)), queries] = True
    per_layer = [chance(layer, queries, offset, length) for layer in visible]
    widest = int(np.argmax(visible.sum(axis=(1, 2))))
    summary: dict = {"chance": per_layer[widest]}
    if any(levels != per_layer[widest] for levels in per_layer):
        summary["chance_by_layer"] = per_layer
    return summary


def copy_targets(queries: np.ndarray, offset: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """(Q, K) the positions of every earlier copy of each query's token (K: the most a query has), and (Q, K) bool
    which are real (a query in repeat r has r earlier copies: i - L, i - 2L, ...)."""
    repeat = (np.asarray(queries) - offset) // length  # (Q,) 1 for the second repeat
    most = int(repeat.max())
    steps = np.arange(1, most + 1)  # (K,)
    positions = np.asarray(queries)[:, None] - steps[None, :] * length  # (Q, K)
    real = steps[None, :] <= repeat[:, None]
    return np.where(real, positions, 0), real


def layer_scores(weights, queries, length: int, offset: int = 0):
    """(B, H, T, T) one layer's maps -> ((len(SCORES), H) float64 sums over the samples and the queries, (Q, T) bool
    the keys each query gives any weight to in any head and sample). offset: the position of the first drawn token
    (the copies of a query are found from it)."""
    import torch

    from ..engine.models import float64_device

    q = torch.as_tensor(queries, device=weights.device)
    rows = weights[:, :, q, :].float()  # (B, H, Q, T)
    device = float64_device(rows.device)  # the sums are float64: on MPS, the CPU's
    rows, q = rows.to(device), q.to(device)
    index = torch.arange(len(q), device=q.device)
    positions, real = (torch.as_tensor(array, device=device) for array in copy_targets(queries, offset, length))
    # every earlier copy (duplicate) and the token after each (induction): TransformerLens's detector's keys
    copied = [(rows[:, :, index[:, None], targets] * real).sum(dim=(0, 2, 3), dtype=torch.float64)
              for targets in (positions + 1, positions)]
    picked = copied + [rows[:, :, index, target].sum(dim=(0, 2), dtype=torch.float64)
                       for target in (q - 1, torch.zeros_like(q))]
    entropy = -(rows * rows.clamp(min=torch.finfo(rows.dtype).tiny).log()).sum(dim=-1).sum(dim=(0, 2),
                                                                                         dtype=torch.float64)
    return torch.stack([*picked, entropy]), (rows > 0).any(dim=1).any(dim=0)


def detect(model: LoadedModel, *, length: int = 25, repeats: int = 4, samples: int = 32, seed: int = 0,
           batch_size: int = 32, progress: Callable[..., ProgressBar] | None = None) -> DetectResult:
    """Olsson's repeated-random-token test: every head's induction, duplicate, previous, first and entropy scores.

    model: a LoadedModel (ra.load). length: tokens per random sequence (at least 3); repeats: times it is repeated
    (at least 2); samples: sequences; seed: of the draw (the same seed, the same tokens and numbers);
    batch_size: sequences per forward pass; progress: a factory `progress(total=, desc=)` of a tqdm-like bar,
    advanced by one per sample (None: no bar). Returns a DetectResult (.heads: layer, head from 1, the scores;
    .summary). Token level: this test has no words.
    """
    import torch

    from ..engine.extract import Batch, forward_layers, out_of_memory_as_error
    from ..engine.models import LoadedModel
    from ..engine.pipeline import versions

    from ..engine.checks import callable_or_none

    if not isinstance(model, LoadedModel):
        raise InputError(f"detect: model must be a loaded model (ra.load(...)), not {type(model).__name__}")
    check_options(length, repeats, samples, seed, batch_size)
    length, repeats, samples, seed, batch_size = map(int, (length, repeats, samples, seed, batch_size))  # numpy ints
    callable_or_none(progress, "progress", "a factory progress(total=, desc=) of a tqdm-like bar")
    ids, offset, vocabulary = sequences(model, length, repeats, samples, seed)
    queries = offset + length + np.arange(length * (repeats - 1))  # every token of the repeats after the first
    totals = torch.zeros((len(SCORES), model.layers, model.heads), dtype=torch.float64)
    visible = np.zeros((model.layers, len(queries), ids.shape[1]), dtype=bool)  # the keys each query sees, per layer
    half_precision = False
    bar = None if progress is None else progress(total=samples, desc="detect")
    try:
        for start in range(0, samples, batch_size):
            chunk = ids[start:start + batch_size]
            empty = np.zeros((0,), dtype=np.int64)
            batch = Batch(input_ids=chunk, attention_mask=np.ones_like(chunk), units=empty, kinds=empty)

            def on_layer(layer: int, weights) -> None:
                nonlocal half_precision
                half_precision |= weights.dtype in (torch.float16, torch.bfloat16)
                sums, seen = layer_scores(weights, queries, length, offset)
                totals[:, layer] += sums.cpu()
                visible[layer] |= seen.cpu().numpy()

            with out_of_memory_as_error(model.device, batch_size):
                forward_layers(model, batch, on_layer)
            if bar is not None:
                bar.update(len(chunk))
    finally:
        if bar is not None:
            bar.close()
    blind = np.flatnonzero(~np.all(np.any(visible, axis=2), axis=1))  # layers with a query whose row has no weight > 0
    # NaN in one batch or head only (half precision overflows on some inputs) leaves the rows seen but the sums NaN
    not_finite = np.flatnonzero(~torch.isfinite(totals).all(dim=2).all(dim=0).numpy())
    for layers, what in ((blind, "gives no query weight above 0"), (not_finite, "gives scores that are not finite")):
        if layers.size:
            raise ModelUnavailable(f"layer {layers[0] + 1} of {model.choice.short} {what} (its maps hold NaN, e.g. "
                                   "from half-precision overflow): its scores cannot be read; try another --device or "
                                   "a float32 copy of the model")
    means = (totals / (samples * len(queries))).numpy()
    layer, head = np.indices((model.layers, model.heads)).reshape(2, -1)
    heads = pd.DataFrame({"layer": layer + 1, "head": head + 1,
                          **{name: means[index].reshape(-1) for index, name in enumerate(SCORES)}})[HEADS_COLUMNS]
    summary = {
        "model": model.choice.name,
        "revision": model.revision,
        "weights": model.choice.weights_note,  # how they differ from the published ones (None: they do not)
        "causal": model.causal,
        "layers": model.layers,
        "heads_per_layer": model.heads,
        "length": length, "repeats": repeats, "samples": samples, "seed": seed,
        "batch_size": batch_size, "device": str(model.device),
        "tokens_per_sample": int(ids.shape[1]),
        "specials": {"before": offset, "after": int(ids.shape[1]) - offset - length * repeats},
        "vocabulary": vocabulary,
        "queries_per_sample": len(queries),
        "scores": {"induction": "weight on i - kL + 1 summed over every earlier copy k (the token after each)",
                   "duplicate": "weight on i - kL summed over every earlier copy k", "previous": "weight on i - 1",
                   "first": "weight on position 0", "entropy": "row entropy in nats"},
        **chance_summary(visible, queries, offset, length, half_precision=half_precision),
        "top": {name: top_heads(heads, name) for name in SCORES},
        "versions": versions(),
    }
    return DetectResult(heads=heads, summary=summary)


def top_heads(heads: pd.DataFrame, name: str, count: int = TOP) -> list[dict]:
    """The `count` heads of the highest score, of the lowest for entropy (ties: lower layer, then head, first)."""
    values = heads[name].to_numpy()
    order = np.argsort(values if name == "entropy" else -values, kind="stable")[:count]
    return [{"layer": int(heads["layer"].iloc[i]), "head": int(heads["head"].iloc[i]),
             "score": round(float(heads[name].iloc[i]), 6)} for i in order]


def default_name(model: str) -> str:
    """The model's last path part, as a plain folder name."""
    from ..engine.naming import plain_name

    return plain_name(model.rstrip("/").split("/")[-1])


def write_detect(result: DetectResult, out: str | Path = ".", name: str | None = None,
                 *, formats: str | tuple[str, ...] = ("png",), wait: bool = True) -> tuple[Path, Path]:
    """Write OUT/results/detect/NAME/ (heads.csv, summary.json) and OUT/figures/detect/NAME/scores.<fmt> (the
    induction and previous grids), all at once (staged). NAME: the model's last path part. -> the two folders."""
    from ..outputs.figio import save_figure
    from ..outputs.files import write_csv, write_json
    from ..outputs.folders import plain_folder_name
    from ..outputs.formats import writer_options
    from ..outputs.staging import staged_outputs
    from .figures import detect_figure

    if not isinstance(result, DetectResult):
        raise InputError(f"write_detect takes the result of ra.detect(...), not {type(result).__name__}")
    out, formats, wait = writer_options(out, formats, wait)  # formats=(): the tables alone
    folder = plain_folder_name(default_name(result.summary["model"]) if name is None else name, "name (--name)")
    s = result.summary
    title = (f"{Path(s['model']).name}: repeated random tokens ({s['samples']} x {s['length']} tokens, "
             f"{s['repeats']} repeats, seed {s['seed']})")
    with staged_outputs(wait=wait) as staging:
        results = staging.folder(out / "results" / "detect" / folder)
        figures = staging.folder(out / "figures" / "detect" / folder)
        write_csv(result.heads, results / "heads.csv")
        write_json(result.summary, results / "summary.json")
        for fmt in formats:
            save_figure(detect_figure(result.heads, title), figures / f"{DETECT_FIGURE}.{fmt}")
    return out / "results" / "detect" / folder, out / "figures" / "detect" / folder


def describe(result: DetectResult) -> str:
    """The three strongest heads of each score (the lowest entropy), and what uniform attention would score."""
    lines = []
    by_layer = result.summary.get("chance_by_layer")
    for name in ("induction", "previous", "duplicate", "first", "entropy"):
        tops = ", ".join(f"L{t['layer']}H{t['head']} {t['score']:.2f}" for t in result.summary["top"][name][:3])
        label = "entropy (lowest)" if name == "entropy" else name
        lines.append(f"{label:<16}: {tops}  (uniform attention: {result.summary['chance'][name]:.2f})")
    if by_layer:
        narrower = [number for number, levels in enumerate(by_layer, 1) if levels != result.summary["chance"]]
        which = (f"layer {narrower[0]} sees" if len(narrower) == 1 else
                 f"layers {', '.join(map(str, narrower))} see")
        lines.append(f"{which} fewer keys (a sliding window): the uniform-attention levels of every layer are "
                     "summary.json's chance_by_layer")
    return "\n".join(lines)
