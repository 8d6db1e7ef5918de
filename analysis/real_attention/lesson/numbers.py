"""The lesson's model-free numbers: the scene, sqrt(d_k), saturation, positions, the causal mask and the cost."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from ..engine.errors import InputError



class LessonNumbers(TypedDict):
    """The lesson's printed numbers, by name (a plain dict at run time)."""

    scene_weights_unscaled: tuple[float, ...]
    scene_output_unscaled: tuple[float, ...]
    scene_weights_scaled: tuple[float, ...]
    scene_output_scaled: tuple[float, ...]
    std_unscaled: dict[int, float]
    std_scaled: dict[int, float]
    saturation_unscaled: float
    saturation_scaled: float
    saturation_tolerance: float
    saturation_one_draw: tuple[float, float]
    head_size: dict[str, int]
    bert_heads: int


# What the lesson prints, to the digits it prints. The report and the tests compare against these.
LESSON: LessonNumbers = {
    "scene_weights_unscaled": (0.02, 0.2, 0.02, 0.02, 0.1, 0.02, 0.02, 0.6),
    "scene_output_unscaled": (0.75, 0.05),
    "scene_weights_scaled": (0.04, 0.21, 0.04, 0.04, 0.13, 0.04, 0.04, 0.46),
    "scene_output_scaled": (0.63, 0.06),
    "std_unscaled": {1: 1.0, 2: 1.4, 64: 8.0, 512: 22.6},
    "std_scaled": {1: 1.0, 2: 1.0, 64: 1.0, 512: 1.0},
    "saturation_unscaled": 0.89,
    "saturation_scaled": 0.36,
    # The lesson's seed is unknown, so its 100-draw averages agree only to about this much.
    "saturation_tolerance": 0.03,
    # The one draw the scene shows (largest weight without and with scaling): a single draw of unknown seed, so
    # it is checked as a plausible draw (inside the range of ours), not as a number to reproduce.
    "saturation_one_draw": (0.98, 0.35),
    "head_size": {"transformer": 64, "BERT base": 64},  # d_k = d_v = d_model / h
    "bert_heads": 144,  # 12 layers x 12 heads
}

# The scene of the seed's code block: "Me senté en el banco de mi jardín", d = 2.
SCENE_WORDS: tuple[str, ...] = ("Me", "senté", "en", "el", "banco", "de", "mi", "jardín")
SCENE_KEYS = np.array(
    [[-1.6, 0], [-0.3, 1], [-0.8, -0.8], [-0.8, -0.8], [0.5, -0.5], [-0.8, -0.8], [-0.8, -0.8], [1, 0.8]]
)  # (8, 2)
SCENE_VALUES = np.array(
    [[0, 0], [0.5, 0], [0, 0], [0, 0], [0.5, 0.5], [0, 0], [0, 0], [1, 0]], dtype=float
)  # (8, 2): the two value dimensions are (seat, money)
SCENE_VALUE_AXES: tuple[str, str] = ("seat", "money")
SCENE_QUERY = np.array([1.0, 1.0])  # (2,): the query of "banco"

# The causal-mask example of seed 003: "favorite" attends to "orange, is, my, favorite" and the model predicts
# "fruit", the next word, which is not an input.
MASK_TOKENS: tuple[str, ...] = ("orange", "is", "my", "favorite")
# Multi-head attention of the lesson: the original transformer's d_model 512 in h = 8 heads, BERT base's 768 in 12
# heads in each of its 12 layers -> (d_model, heads per layer, layers).
MULTI_HEAD: dict[str, tuple[int, int, int]] = {"transformer": (512, 8, 6), "BERT base": (768, 12, 12)}


# ---------------------------------------------------------------- the formula


def softmax(scores: np.ndarray) -> np.ndarray:
    """Softmax over the last axis. scores (..., n) -> weights (..., n), each row sums to 1.

    -inf scores get weight 0, so a masked row still sums to 1 over what it may see.
    """
    shifted = scores - scores.max(axis=-1, keepdims=True)  # stable: the largest score becomes 0
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


def attention(
    queries: np.ndarray, keys: np.ndarray, values: np.ndarray, scale: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """Dot-product attention, as in the seed's code block.

    queries (m, d_k), keys (n, d_k), values (n, d_v) -> (outputs (m, d_v), weights (m, n)).
    With scale=True the scores are divided by sqrt(d_k).
    """
    if queries.shape[-1] != keys.shape[-1]:
        raise InputError(f"queries and keys need the same d_k, not {queries.shape[-1]} and {keys.shape[-1]}")
    if keys.shape[0] != values.shape[0]:
        raise InputError(f"one value per key: {keys.shape[0]} keys, {values.shape[0]} values")
    scores = queries @ keys.T  # (m, n)
    if scale:
        scores = scores / np.sqrt(keys.shape[-1])
    weights = softmax(scores)  # (m, n)
    return weights @ values, weights  # (m, d_v), (m, n)


def softmax_jacobian(weights: np.ndarray) -> np.ndarray:
    """d alpha_i / d s_j = alpha_i (delta_ij - alpha_j). weights (..., n) -> jacobian (..., n, n)."""
    diag = weights[..., :, None] * np.eye(weights.shape[-1])  # (..., n, n)
    return diag - weights[..., :, None] * weights[..., None, :]


# ---------------------------------------------------------------- 1. the scene


@dataclass(frozen=True)
class Scene:
    """The scene's inputs and results. keys/values (8, 2), query (2,), weights (8,), outputs (2,)."""

    words: tuple[str, ...]
    query: np.ndarray
    keys: np.ndarray
    values: np.ndarray
    scores: np.ndarray  # (8,) q·k, unscaled
    weights_unscaled: np.ndarray
    output_unscaled: np.ndarray
    weights_scaled: np.ndarray  # scores divided by sqrt(2)
    output_scaled: np.ndarray

    def __post_init__(self) -> None:
        n = len(self.words)
        assert self.keys.shape == (n, self.query.shape[0]) and self.values.shape[0] == n
        assert self.weights_unscaled.shape == self.weights_scaled.shape == (n,)


def scene() -> Scene:
    """The weights and output of "banco" in the seed's scene, without and with the division by sqrt(2)."""
    q = SCENE_QUERY[None, :]  # (1, 2)
    out_u, w_u = attention(q, SCENE_KEYS, SCENE_VALUES, scale=False)
    out_s, w_s = attention(q, SCENE_KEYS, SCENE_VALUES, scale=True)
    return Scene(
        words=SCENE_WORDS,
        query=SCENE_QUERY,
        keys=SCENE_KEYS,
        values=SCENE_VALUES,
        scores=SCENE_KEYS @ SCENE_QUERY,
        weights_unscaled=w_u[0],
        output_unscaled=out_u[0],
        weights_scaled=w_s[0],
        output_scaled=out_s[0],
    )


# ---------------------------------------------------------------- 2. why sqrt(d_k)


@dataclass(frozen=True)
class ScoreSpread:
    """Random dot products q·k per dimension d. scores (len(dims), n_products), std_* (len(dims),)."""

    dims: tuple[int, ...]
    scores: np.ndarray  # unscaled q·k
    std_unscaled: np.ndarray
    std_scaled: np.ndarray  # std of q·k / sqrt(d)
    seed: int  # of the one generator, numpy.random.default_rng

    def __post_init__(self) -> None:
        assert self.scores.shape[0] == len(self.dims) == self.std_unscaled.shape[0] == self.std_scaled.shape[0]


def score_spread(dims: tuple[int, ...] = (1, 2, 64, 512), n_products: int = 20_000, seed: int = 0) -> ScoreSpread:
    """The std of q·k before and after dividing by sqrt(d).

    Draws exactly as the seed's code: one generator, and for each d in order q then k, each (n_products, d).
    """
    rng = np.random.default_rng(seed)
    scores = np.empty((len(dims), n_products))
    for i, d in enumerate(dims):  # a loop over 4 dims, to keep the seed's draw order
        q = rng.standard_normal((n_products, d))
        k = rng.standard_normal((n_products, d))
        scores[i] = (q * k).sum(axis=1)
    scale = np.sqrt(np.asarray(dims, dtype=float))
    return ScoreSpread(
        dims=tuple(dims),
        scores=scores,
        std_unscaled=scores.std(axis=1),
        std_scaled=(scores / scale[:, None]).std(axis=1),
        seed=seed,
    )


# ---------------------------------------------------------------- 3. saturation


def draw_scores(rng: np.random.Generator, d_k: int, n_keys: int = 8, n_draws: int = 100) -> np.ndarray:
    """Unscaled scores of random draws. Returns (n_draws, n_keys).

    One draw: a query q (d_k,) and n_keys keys (n_keys, d_k), all entries standard normal; scores q·k_j.
    The generator draws all queries (n_draws, d_k) first, then all keys (n_draws, n_keys, d_k).
    """
    q = rng.standard_normal((n_draws, d_k))
    k = rng.standard_normal((n_draws, n_keys, d_k))
    return np.einsum("bkd,bd->bk", k, q)


def largest_weights(
    rng: np.random.Generator, d_k: int, n_keys: int = 8, n_draws: int = 100
) -> tuple[np.ndarray, np.ndarray]:
    """The largest softmax weight of each draw of `draw_scores`, without and with the division by sqrt(d_k).

    Returns two arrays (n_draws,): unscaled, scaled.
    """
    scores = draw_scores(rng, d_k, n_keys, n_draws)  # (n_draws, n_keys)
    return softmax(scores).max(axis=-1), softmax(scores / np.sqrt(d_k)).max(axis=-1)


def largest_jacobian_entry(weights: np.ndarray) -> np.ndarray:
    """max_ij |alpha_i (delta_ij - alpha_j)|. weights (..., n) -> (...)."""
    return np.abs(softmax_jacobian(weights)).max(axis=(-2, -1))


@dataclass(frozen=True)
class Saturation:
    """The largest weight of 8 random keys at d_k = 64.

    weights_* (n_draws, n_keys) per draw with default_rng(seed); expect_* the mean largest weight over
    n_large draws with default_rng(large_seed); batch_* (n_large // n_draws,) the means of consecutive
    batches of n_draws among those n_large draws, i.e. how far a 100-draw average strays from the expectation.
    """

    d_k: int
    n_keys: int
    n_draws: int
    n_large: int
    weights_unscaled: np.ndarray
    weights_scaled: np.ndarray
    expect_unscaled: float
    expect_scaled: float
    batch_unscaled: np.ndarray
    batch_scaled: np.ndarray
    seed: int  # of the n_draws draws
    large_seed: int  # of the n_large draws

    def __post_init__(self) -> None:
        assert self.weights_unscaled.shape == self.weights_scaled.shape == (self.n_draws, self.n_keys)
        assert self.batch_unscaled.shape == self.batch_scaled.shape == (self.n_large // self.n_draws,)

    @property
    def max_unscaled(self) -> np.ndarray:
        """(n_draws,) the largest weight of each draw."""
        return self.weights_unscaled.max(axis=-1)

    @property
    def max_scaled(self) -> np.ndarray:
        return self.weights_scaled.max(axis=-1)

    @property
    def mean_unscaled(self) -> float:
        return float(self.max_unscaled.mean())

    @property
    def mean_scaled(self) -> float:
        return float(self.max_scaled.mean())

    @property
    def jacobian_unscaled(self) -> np.ndarray:
        """(n_draws,) the largest entry of each draw's softmax Jacobian."""
        return largest_jacobian_entry(self.weights_unscaled)

    @property
    def jacobian_scaled(self) -> np.ndarray:
        return largest_jacobian_entry(self.weights_scaled)


def saturation(
    d_k: int = 64, n_keys: int = 8, n_draws: int = 100, n_large: int = 100_000, seed: int = 0, large_seed: int = 1
) -> Saturation:
    """The largest weight over n_draws (seed) and its expectation over n_large draws (large_seed).

    The lesson's own seed is unknown; no seed is searched for here.
    """
    if n_draws < 1 or n_large % n_draws:
        raise InputError(f"n_large ({n_large}) must be a whole number of batches of n_draws ({n_draws})")
    scores = draw_scores(np.random.default_rng(seed), d_k, n_keys, n_draws)  # (n_draws, n_keys)
    lu, ls = largest_weights(np.random.default_rng(large_seed), d_k, n_keys, n_large)
    return Saturation(
        d_k=d_k,
        n_keys=n_keys,
        n_draws=n_draws,
        n_large=n_large,
        weights_unscaled=softmax(scores),
        weights_scaled=softmax(scores / np.sqrt(d_k)),
        expect_unscaled=float(lu.mean()),
        expect_scaled=float(ls.mean()),
        batch_unscaled=lu.reshape(-1, n_draws).mean(axis=1),
        batch_scaled=ls.reshape(-1, n_draws).mean(axis=1),
        seed=seed,
        large_seed=large_seed,
    )


@dataclass(frozen=True)
class SaturationSweep:
    """Mean largest weight against d_k. dims (m,), mean_* (m,), p10_*/p90_* (m,) the per-draw 10th/90th percentiles."""

    dims: tuple[int, ...]
    n_draws: int
    mean_unscaled: np.ndarray
    mean_scaled: np.ndarray
    p10_unscaled: np.ndarray
    p90_unscaled: np.ndarray
    p10_scaled: np.ndarray
    p90_scaled: np.ndarray
    seed: int  # of the one generator that draws every d_k in order


SATURATION_DIMS: tuple[int, ...] = tuple(2**i for i in range(10))  # 1, 2, 4, ..., 512


def saturation_sweep(
    dims: tuple[int, ...] = SATURATION_DIMS, n_keys: int = 8, n_draws: int = 100, seed: int = 2
) -> SaturationSweep:
    """The largest weight for d_k from 1 to 512 (powers of 2), n_draws each, one generator in order of dims."""
    rng = np.random.default_rng(seed)
    per_dim = [largest_weights(rng, d, n_keys, n_draws) for d in dims]  # 10 dims; each draw is vectorised
    u = np.stack([p[0] for p in per_dim])  # (m, n_draws)
    s = np.stack([p[1] for p in per_dim])
    return SaturationSweep(
        dims=tuple(dims),
        n_draws=n_draws,
        mean_unscaled=u.mean(axis=1),
        mean_scaled=s.mean(axis=1),
        p10_unscaled=np.percentile(u, 10, axis=1),
        p90_unscaled=np.percentile(u, 90, axis=1),
        p10_scaled=np.percentile(s, 10, axis=1),
        p90_scaled=np.percentile(s, 90, axis=1),
        seed=seed,
    )


@dataclass(frozen=True)
class JacobianSlope:
    """The largest entry of the softmax Jacobian. peaks (m,), largest_entry (m,) for weights (peak, rest spread evenly)."""

    n_keys: int
    peaks: np.ndarray
    largest_entry: np.ndarray


def jacobian_slope(
    peaks: tuple[float, ...] = (0.5, 0.75, 0.9, 0.99, 0.999, 0.9999), n_keys: int = 8
) -> JacobianSlope:
    """max |d alpha_i / d s_j| when one weight is `peak` and the other n_keys - 1 share the rest.

    As the peak tends to 1 the largest entry, peak (1 - peak), tends to 0: the softmax's slope vanishes.
    """
    p = np.asarray(peaks, dtype=float)  # (m,)
    rest = np.repeat(((1 - p) / (n_keys - 1))[:, None], n_keys - 1, axis=1)  # (m, n_keys - 1)
    weights = np.concatenate([p[:, None], rest], axis=1)  # (m, n_keys)
    largest = np.abs(softmax_jacobian(weights)).max(axis=(-2, -1))  # (m,)
    return JacobianSlope(n_keys=n_keys, peaks=p, largest_entry=largest)


# ---------------------------------------------------------------- 4. positional encoding


def sinusoidal_encoding(positions: np.ndarray, d: int, base: float = 10_000.0) -> np.ndarray:
    """Seed 002: (f(t)_2k, f(t)_2k+1) = (sin θ, cos θ), θ = t / r^k, r = base^(2/d).

    positions (T,) -> encoding (T, d); d must be even.
    """
    if d % 2:
        raise InputError(f"d must be even, not {d}")
    theta = np.asarray(positions, dtype=float)[:, None] / base ** (2 * np.arange(d // 2) / d)  # (T, d/2)
    enc = np.empty((theta.shape[0], d))
    enc[:, 0::2] = np.sin(theta)
    enc[:, 1::2] = np.cos(theta)
    return enc


def complex_encoding(positions: np.ndarray, d: int, base: float = 10_000.0) -> np.ndarray:
    """Seed 002's complex form f(t) = (e^{i t / r^k})_k. positions (T,) -> (T, d/2) complex.

    Its real part is f(t)_2k+1 (cos) and its imaginary part f(t)_2k (sin).
    """
    if d % 2:
        raise InputError(f"d must be even, not {d}")
    theta = np.asarray(positions, dtype=float)[:, None] / base ** (2 * np.arange(d // 2) / d)  # (T, d/2)
    return np.exp(1j * theta)


def rotation_error(positions: np.ndarray, shifts: np.ndarray, d: int, base: float = 10_000.0) -> float:
    """max |f(t + Δt) - diag(f(Δt)) f(t)| over all t in positions (T,) and Δt in shifts (S,)."""
    t = np.asarray(positions, dtype=float)
    dt = np.asarray(shifts, dtype=float)
    shifted = complex_encoding((t[:, None] + dt[None, :]).ravel(), d, base)  # (T*S, d/2)
    rotated = complex_encoding(dt, d, base)[None, :, :] * complex_encoding(t, d, base)[:, None, :]  # (T, S, d/2)
    return float(np.abs(shifted - rotated.reshape(shifted.shape)).max())


@dataclass(frozen=True)
class Positions:
    """The sinusoidal encoding. positions (T,), encoding (T, d); rotation_error the largest |f(t+Δt) - diag(f(Δt)) f(t)|."""

    positions: np.ndarray
    d: int
    base: float
    encoding: np.ndarray
    rotation_error: float

    def __post_init__(self) -> None:
        assert self.encoding.shape == (self.positions.shape[0], self.d)


def positional_encoding(n_positions: int = 50, d: int = 64, base: float = 10_000.0) -> Positions:
    """The encoding of positions t = 0..n_positions-1 (t as in the formula), and the rotation check."""
    positions = np.arange(n_positions)
    shifts = np.array([-7.0, -1.0, 0.5, 1.0, 3.0, 25.0])  # negative, fractional and large shifts
    return Positions(
        positions=positions,
        d=d,
        base=base,
        encoding=sinusoidal_encoding(positions, d, base),
        rotation_error=rotation_error(positions, shifts, d, base),
    )


# ---------------------------------------------------------------- 5. causal mask


def causal_mask(n: int) -> np.ndarray:
    """Seed 003's triangular mask, 1 - triu(ones, diagonal=1): (n, n) bool, True where query i may see key j <= i."""
    return ~np.triu(np.ones((n, n), dtype=bool), k=1)


def masked_softmax(scores: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Softmax after setting the scores where mask is False to -inf. scores (..., n, n), mask (n, n) -> (..., n, n)."""
    return softmax(np.where(mask, scores, -np.inf))


@dataclass(frozen=True)
class CausalExample:
    """The mask applied to a short sentence. mask/weights (n, n): row = query token, column = key token."""

    tokens: tuple[str, ...]
    scores: np.ndarray
    mask: np.ndarray
    weights_unmasked: np.ndarray
    weights_masked: np.ndarray
    d_k: int  # of the random queries and keys
    seed: int  # of their generator

    def __post_init__(self) -> None:
        n = len(self.tokens)
        assert self.scores.shape == self.mask.shape == self.weights_masked.shape == (n, n)


def causal_example(tokens: tuple[str, ...] = MASK_TOKENS, d_k: int = 8, seed: int = 0) -> CausalExample:
    """Random queries and keys (n, d_k) from default_rng(seed), scaled scores, with and without the mask."""
    rng = np.random.default_rng(seed)
    n = len(tokens)
    q = rng.standard_normal((n, d_k))
    k = rng.standard_normal((n, d_k))
    scores = q @ k.T / np.sqrt(d_k)  # (n, n)
    mask = causal_mask(n)
    return CausalExample(
        tokens=tuple(tokens),
        scores=scores,
        mask=mask,
        weights_unmasked=softmax(scores),
        weights_masked=masked_softmax(scores, mask),
        d_k=d_k,
        seed=seed,
    )


# ---------------------------------------------------------------- 6. cost


@dataclass(frozen=True)
class CostRow:
    """Leading-term operation counts of one layer (constants dropped, as in table 1 of Vaswani et al. 2017)."""

    n: int
    d: int
    attention_ops: int  # n² · d
    recurrent_ops: int  # n · d²
    attention_steps: int  # sequential steps: O(1)
    recurrent_steps: int  # O(n)
    attention_path: int  # longest path between two positions: O(1)
    recurrent_path: int  # O(n)

    @property
    def ratio(self) -> float:
        """attention_ops / recurrent_ops = n / d: attention costs more once n > d."""
        return self.attention_ops / self.recurrent_ops


def cost_table(ns: tuple[int, ...] = (8, 128, 512, 4096), d: int = 768) -> tuple[CostRow, ...]:
    """One CostRow per sentence length n, for model width d."""
    return tuple(
        CostRow(
            n=n,
            d=d,
            attention_ops=n * n * d,
            recurrent_ops=n * d * d,
            attention_steps=1,
            recurrent_steps=n,
            attention_path=1,
            recurrent_path=n,
        )
        for n in ns
    )


# ---------------------------------------------------------------- everything


@dataclass(frozen=True)
class LessonResults:
    """Every model-free number of the lesson."""

    scene: Scene
    spread: ScoreSpread
    saturation: Saturation
    sweep: SaturationSweep
    jacobian: JacobianSlope
    positions: Positions
    causal: CausalExample
    cost: tuple[CostRow, ...]


def compute_lesson() -> LessonResults:
    """All six items with their fixed seeds."""
    return LessonResults(
        scene=scene(),
        spread=score_spread(),
        saturation=saturation(),
        sweep=saturation_sweep(),
        jacobian=jacobian_slope(),
        positions=positional_encoding(),
        causal=causal_example(),
        cost=cost_table(),
    )


# ---------------------------------------------------------------- against the lesson


@dataclass(frozen=True)
class Check:
    """One number (or property) next to what the lesson says. ours/lesson are display strings."""

    item: str
    name: str
    ours: str
    lesson: str
    agrees: bool


def _vec(x: np.ndarray | tuple[float, ...], digits: int = 2) -> str:
    """Round like the seed's np.round and print without trailing zeros: [0.02 0.2 0.6]."""
    return "[" + " ".join(f"{round(float(v), digits):g}" for v in x) + "]"


def lesson_checks(r: LessonResults) -> tuple[Check, ...]:
    """Every number the lesson prints, compared to the digits it prints; the properties it states."""
    s, sp, sat, tol = r.scene, r.spread, r.saturation, LESSON["saturation_tolerance"]
    checks = [
        Check("scene", "weights, q·k", _vec(s.weights_unscaled), _vec(LESSON["scene_weights_unscaled"]),
              bool(np.array_equal(np.round(s.weights_unscaled, 2), LESSON["scene_weights_unscaled"]))),
        Check("scene", "output, q·k", _vec(s.output_unscaled), _vec(LESSON["scene_output_unscaled"]),
              bool(np.array_equal(np.round(s.output_unscaled, 2), LESSON["scene_output_unscaled"]))),
        Check("scene", "weights, q·k/√2", _vec(s.weights_scaled), _vec(LESSON["scene_weights_scaled"]),
              bool(np.array_equal(np.round(s.weights_scaled, 2), LESSON["scene_weights_scaled"]))),
        Check("scene", "output, q·k/√2", _vec(s.output_scaled), _vec(LESSON["scene_output_scaled"]),
              bool(np.array_equal(np.round(s.output_scaled, 2), LESSON["scene_output_scaled"]))),
    ]
    for d, su, ss in zip(sp.dims, sp.std_unscaled, sp.std_scaled):
        # The seed prints round(std, 1) and round(std / sqrt(d), 2).
        lu, ls = LESSON["std_unscaled"].get(d), LESSON["std_scaled"].get(d)
        if lu is not None:
            checks.append(Check("sqrt(d_k)", f"std q·k, d = {d}", f"{su:.1f}", f"{lu:.1f}", round(float(su), 1) == lu))
        if ls is not None:
            checks.append(Check("sqrt(d_k)", f"std q·k/√d, d = {d}", f"{ss:.2f}", f"{ls:.1f}", round(float(ss), 2) == ls))
    for label, ours, lesson in (
        (f"mean largest weight, q·k, {sat.n_draws} draws", sat.mean_unscaled, LESSON["saturation_unscaled"]),
        (f"mean largest weight, q·k/√d_k, {sat.n_draws} draws", sat.mean_scaled, LESSON["saturation_scaled"]),
        ("expected largest weight, q·k (" + f"{sat.n_large:,}".replace(",", " ") + " draws)", sat.expect_unscaled,
         LESSON["saturation_unscaled"]),
        ("expected largest weight, q·k/√d_k (" + f"{sat.n_large:,}".replace(",", " ") + " draws)", sat.expect_scaled,
         LESSON["saturation_scaled"]),
    ):
        checks.append(Check("saturation", label, f"{ours:.3f}", f"{lesson:.2f} ± {tol:.2f}", abs(ours - lesson) <= tol))
    for label, weights, shown in (("q·k", sat.weights_unscaled, LESSON["saturation_one_draw"][0]),
                                  ("q·k/√d_k", sat.weights_scaled, LESSON["saturation_one_draw"][1])):
        largest = weights.max(axis=1)  # (n_draws,) each draw's largest weight
        below = float((largest < shown).mean())
        checks.append(Check("saturation", f"the scene's one draw, {label}, among our {sat.n_draws}",
                            f"{below * 100:.0f} % of ours below it", f"{shown:.2f} (one draw)",
                            bool(largest.min() <= shown <= largest.max())))
    jac = r.jacobian
    checks.append(Check(
        "saturation", "largest softmax slope → 0 as a weight → 1",
        f"{jac.largest_entry[-1]:.1e} at {jac.peaks[-1]:g}", "tends to 0",
        bool(np.all(np.diff(jac.largest_entry) < 0) and jac.largest_entry[-1] < 1e-3),
    ))
    checks.append(Check(
        "positions", "f(t+Δt) = diag(f(Δt)) f(t)", f"max error {r.positions.rotation_error:.1e}", "a rotation",
        r.positions.rotation_error < 1e-9,
    ))
    for model, (d_model, heads, _) in MULTI_HEAD.items():
        size = d_model // heads
        checks.append(Check("multi-head", f"d_k = d_v = {d_model} / {heads}, {model}", f"{size}",
                            f"{LESSON['head_size'][model]}", d_model % heads == 0 and size == LESSON["head_size"][model]))
    _, heads, layers = MULTI_HEAD["BERT base"]
    checks.append(Check("multi-head", f"heads of BERT base, {layers} x {heads}", f"{layers * heads}",
                        f"{LESSON['bert_heads']}", layers * heads == LESSON["bert_heads"]))
    c = r.causal
    future = float(np.abs(c.weights_masked[~c.mask]).max())
    checks.append(Check(
        "causal mask", "weight on later tokens", f"{future:g}", "0",
        future == 0.0 and bool(np.allclose(c.weights_masked.sum(axis=-1), 1.0)),
    ))
    return tuple(checks)
