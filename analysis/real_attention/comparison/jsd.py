"""The Jensen-Shannon divergence between heads, summed over rows as a corpus streams by, and what is drawn from it.

For two rows p and q (each sums to 1) with m = (p + q) / 2, in nats (so 0 <= JS <= ln 2):

    JS(p, q) = H(m) - (H(p) + H(q)) / 2 = sum_k [p_k ln p_k + q_k ln q_k] / 2 - sum_k m_k ln m_k

Summed over the rows of a batch, the first part is one number per head (its rows' sum of p ln p); only
sum m ln m depends on the pair. With s = p + q, sum m ln m = (sum s ln s - ln 2 sum s) / 2, so the one
quantity computed per head pair is G = sum over the batch's elements of s ln s: a broadcast add and one xlogy
over (heads_a, heads_b, elements), in chunks that bound its memory.

A decoder's causal rows are zero after the diagonal. Elements where both rows are zero add nothing, so a pair
with a decoder needs only the elements on and below the diagonal ("lower"); an encoder's weight above the
diagonal, where the decoder's is 0, adds (p ln p) / 2 - m ln m = p ln 2 / 2 for m = p / 2: a number per head of
the encoder. So every block with a decoder runs over about half the elements.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

LN2 = math.log(2.0)
CHUNK_ELEMENTS = 1 << 17  # the most float32 elements one pair chunk holds at once (512 kB: stays in cache)


def js_rows(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """JS of each pair of rows p[..., k] and q[..., k] in nats, in float64, directly by its definition
    (0 ln 0 = 0): the reference the streaming sums are tested against."""
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    m = (p + q) / 2

    def kl(a: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(a > 0, a * np.log(np.where(a > 0, a, 1.0) / np.where(m > 0, m, 1.0)), 0.0).sum(axis=-1)

    return (kl(p) + kl(q)) / 2


@dataclass
class Packed:
    """One model's word rows of one batch, flattened: every compared (query, key) element of every sentence.

    full: (heads, E) float32, each sentence's n x n elements, row-major, sentences in batch order; None for a
    decoder (its elements above the diagonal are 0). lower: (heads, E_low) the elements with key <= query; None
    when no model of the comparison is a decoder. full_xlogx / lower_xlogx: (heads,) float64 sum of p ln p over
    those elements; full_sum / lower_sum: (heads,) float64 sum of p.
    """

    full: Any  # torch tensors (torch is imported when first needed)
    lower: Any
    causal: bool
    full_xlogx: Any = None
    full_sum: Any = None
    lower_xlogx: Any = None
    lower_sum: Any = None

    @classmethod
    def of(cls, maps, full_mask, lower_mask, causal: bool) -> Packed:
        """maps: (B, heads, n, n) word rows of a batch; full_mask / lower_mask: (B, n, n) bool, the elements to
        compare (lower_mask None when no model is a decoder)."""
        import torch

        by_head = maps.transpose(0, 1)  # (heads, B, n, n), a view
        tiny = torch.finfo(torch.float32).tiny  # a weight that underflowed to 0: 0 ln 0 = 0, as the smallest normal
        full = None if causal else by_head[:, full_mask].float().clamp_(min=tiny)  # (heads, E)
        lower = None if lower_mask is None else by_head[:, lower_mask].float().clamp_(min=tiny)  # (heads, E_low)
        packed = cls(full=full, lower=lower, causal=causal)
        for name, values in (("full", full), ("lower", lower)):
            if values is not None:
                setattr(packed, f"{name}_xlogx", (values * values.log()).sum(dim=1, dtype=torch.float64))
                setattr(packed, f"{name}_sum", values.sum(dim=1, dtype=torch.float64))
        return packed


def pair_xlogx(a, b, *, triangle: bool = False, backend: str | None = None):
    """G[i, j] = sum_e s ln s with s = a[i, e] + b[j, e]: a (Ha, E), b (Hb, E) float32 tensors, every value > 0
    (Packed clamps them) -> (Ha, Hb) float64 tensor on their device.

    In chunks of at most CHUNK_ELEMENTS elements, each summed in float32 and added in float64. On the CPU in numpy,
    one thread, into two reused buffers (torch's elementwise kernels were many times slower here, on a busy
    machine, and allocate per call); on another device in torch. triangle (a is b): only j >= i is computed (the
    block is symmetric) and mirrored. backend: "numpy" or "torch" (default: numpy on the CPU, else torch)."""
    import torch

    heads_a, elements = a.shape
    heads_b = b.shape[0]
    columns = max(1, min(elements, CHUNK_ELEMENTS // max(1, heads_b)))
    rows = max(1, CHUNK_ELEMENTS // (heads_b * columns))
    on_cpu = (backend or ("numpy" if a.device.type == "cpu" else "torch")) == "numpy"
    out = np.zeros((heads_a, heads_b)) if on_cpu else torch.zeros((heads_a, heads_b), dtype=torch.float64,
                                                                       device=a.device)
    if on_cpu:
        a_np, b_np = a.numpy(), b.numpy()
        buffers = np.empty((2, rows * heads_b * columns), dtype=np.float32)
    for start in range(0, heads_a, rows):
        stop = min(heads_a, start + rows)
        first = start if triangle else 0  # columns before `start` come from the mirror
        for begin in range(0, elements, columns):
            end = min(elements, begin + columns)
            if on_cpu:
                shape = (stop - start, heads_b - first, end - begin)
                size = shape[0] * shape[1] * shape[2]
                s, logs = buffers[0, :size].reshape(shape), buffers[1, :size].reshape(shape)
                np.add(a_np[start:stop, None, begin:end], b_np[None, first:, begin:end], out=s)
                np.log(s, out=logs)
                out[start:stop, first:] += np.einsum("rhe,rhe->rh", s, logs)
            else:
                s = a[start:stop, None, begin:end] + b[None, first:, begin:end]  # (rows, Hb - first, chunk)
                out[start:stop, first:] += torch.linalg.vecdot(s, s.log())
    if triangle:
        out = np.triu(out) + np.triu(out, 1).T if on_cpu else torch.triu(out) + torch.triu(out, 1).T
    return torch.from_numpy(out) if on_cpu else out


def block_sums(pa: Packed, pb: Packed, same: bool = False):
    """The (Ha, Hb) float64 sum over the batch's rows of JS between each head of model a and each of model b.

    same: pa is pb (a model against itself): only half the pairs are computed."""
    if not pa.causal and not pb.causal:
        g = pair_xlogx(pa.full, pb.full, triangle=same)
        total = pa.full_sum[:, None] + pb.full_sum[None, :]
        m_log_m = (g - LN2 * total) / 2
        return (pa.full_xlogx[:, None] + pb.full_xlogx[None, :]) / 2 - m_log_m
    g = pair_xlogx(pa.lower, pb.lower, triangle=same)
    m_log_m = (g - LN2 * (pa.lower_sum[:, None] + pb.lower_sum[None, :])) / 2  # on and below the diagonal
    # above the diagonal the decoder's weight is 0 and the encoder's p adds p ln p / 2 - (p/2) ln(p/2) = p ln 2 / 2
    above = [0.0 if packed.causal else LN2 / 2 * (packed.full_sum - packed.lower_sum) for packed in (pa, pb)]
    below = (pa.lower_xlogx[:, None] + pb.lower_xlogx[None, :]) / 2 - m_log_m
    return below + _column(above[0], 0) + _column(above[1], 1)


def _column(values, axis: int):
    if isinstance(values, float):
        return values
    return values[:, None] if axis == 0 else values[None, :]


def _torgerson(distances: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(N, N) symmetric distances -> the eigenvalues (N,), largest first, and eigenvectors (N, N) of the doubly
    centred matrix -D**2 / 2: the Gram matrix of points with those distances, if any exist in a Euclidean space."""
    d = np.asarray(distances, dtype=np.float64)
    assert d.ndim == 2 and d.shape[0] == d.shape[1], d.shape
    n = d.shape[0]
    centre = np.eye(n) - np.full((n, n), 1.0 / n)
    b = -0.5 * centre @ (d ** 2) @ centre
    values, vectors = np.linalg.eigh((b + b.T) / 2)  # ascending
    order = np.argsort(-values, kind="stable")
    return values[order], vectors[:, order]


def mds_fit(distances: np.ndarray, dimensions: int = 2) -> dict[str, float]:
    """How well `dimensions` axes of classical MDS show the distances: `shown`, the share of the positive eigenvalues
    that the axes hold (1: the plot is exact), and `negative`, the share of all eigenvalues' size that is negative
    (0 for distances of points in a Euclidean space; JS is not one, its square root is), clipped away by the MDS."""
    values, _ = _torgerson(distances)
    values = np.where(np.abs(values) > 1e-12 * np.abs(values).max(initial=0.0), values, 0.0)  # rounding is no sign
    positive, size = float(values[values > 0].sum()), float(np.abs(values).sum())
    shown = float(np.clip(values[:dimensions], 0.0, None).sum())
    return {"shown": round(shown / positive, 6) if positive > 0 else 1.0,
            "negative": round(float(-values[values < 0].sum()) / size, 6) + 0.0 if size > 0 else 0.0}  # no -0.0


def classical_mds(distances: np.ndarray, dimensions: int = 2) -> np.ndarray:
    """Classical (Torgerson) multidimensional scaling: (N, N) symmetric distances -> (N, dimensions) float64
    coordinates whose Euclidean distances approximate them. Deterministic: each axis's sign is chosen so that its
    largest coordinate (in absolute value, the first such) is positive."""
    values, vectors = _torgerson(distances)
    coords = vectors[:, :dimensions] * np.sqrt(np.clip(values[:dimensions], 0.0, None))
    for axis in range(coords.shape[1]):
        pivot = int(np.argmax(np.abs(coords[:, axis])))
        if coords[pivot, axis] < 0:
            coords[:, axis] = -coords[:, axis]
    if coords.shape[1] < dimensions:  # fewer heads than dimensions
        coords = np.pad(coords, ((0, 0), (0, dimensions - coords.shape[1])))
    return coords + 0.0  # no -0.0 in the tables
