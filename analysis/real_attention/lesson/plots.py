"""The lesson's figures, drawn from `real_attention.lesson.numbers`'s results as bare Figures on their own Agg canvas."""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from ..outputs.figio import new_figure
from .numbers import (
    LESSON,
    CausalExample,
    CostRow,
    JacobianSlope,
    Positions,
    Saturation,
    SaturationSweep,
    Scene,
    ScoreSpread,
)

# Fixed margins rather than constrained layout: same look, a third of the drawing time.
UNSCALED = "#c0392b"  # red: without the division, saturates
SCALED = "#2471a3"  # blue: divided by sqrt(d_k)


def scene_figure(scene: Scene) -> Figure:
    """Left: the 2-D keys and the query as arrows, each word labelled. Right: the weights, unscaled and scaled."""
    fig = new_figure(figsize=(11, 4.5))
    ax_vec, ax_bar = fig.subplots(1, 2, gridspec_kw={"width_ratios": (1, 1.3)})
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.16, top=0.92, wspace=0.2)

    # Several words share a key; label each distinct key once with all its words.
    labels: dict[tuple[float, float], list[str]] = {}
    for word, key in zip(scene.words, scene.keys):
        labels.setdefault((float(key[0]), float(key[1])), []).append(word)
    for (x, y), words in labels.items():
        ax_vec.annotate("", xy=(x, y), xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": "0.35", "lw": 1.5})
        right = x > 0  # label beside the arrowhead, away from the query
        ax_vec.text(x + (0.08 if right else -0.08), y - 0.06, ", ".join(words), ha="left" if right else "right",
                    va="center", fontsize=9)
    qx, qy = scene.query
    ax_vec.annotate("", xy=(qx, qy), xytext=(0, 0), arrowprops={"arrowstyle": "->", "color": "#117a65", "lw": 2.5})
    ax_vec.text(qx, qy + 0.12, "q (banco)", color="#117a65", ha="center", fontsize=10, weight="bold")
    ax_vec.axhline(0, color="0.85", lw=0.8, zorder=0)
    ax_vec.axvline(0, color="0.85", lw=0.8, zorder=0)
    ax_vec.set_xlim(-2.0, 1.6)
    ax_vec.set_ylim(-1.2, 1.4)
    ax_vec.set_aspect("equal")
    ax_vec.set_xlabel("key dimension 1")
    ax_vec.set_ylabel("key dimension 2")
    ax_vec.set_title("Keys (grey) and the query of «banco»")

    slots = np.arange(len(scene.words))
    width = 0.4
    bars_u = ax_bar.bar(slots - width / 2, scene.weights_unscaled, width, color=UNSCALED, label="q·k")
    bars_s = ax_bar.bar(slots + width / 2, scene.weights_scaled, width, color=SCALED, label="q·k / √2")
    ax_bar.bar_label(bars_u, fmt="%.2f", fontsize=7, padding=1)
    ax_bar.bar_label(bars_s, fmt="%.2f", fontsize=7, padding=1)
    ax_bar.set_xticks(slots, scene.words, rotation=30)
    ax_bar.set_ylim(0, 0.7)
    ax_bar.set_ylabel("weight of «banco» on the word")
    ou, os_ = scene.output_unscaled, scene.output_scaled
    # the values' two dimensions are the lesson's (asiento, dinero): how much of "seat" and of "money" the output holds
    ax_bar.set_title(f"Output (seat, money): ({ou[0]:.2f}, {ou[1]:.2f}) unscaled, ({os_[0]:.2f}, {os_[1]:.2f}) scaled")
    ax_bar.legend(frameon=False)
    return fig


def score_spread_figure(spread: ScoreSpread) -> Figure:
    """One histogram of q·k per d, before and after dividing by sqrt(d)."""
    fig = new_figure(figsize=(13, 3.6))
    axes = fig.subplots(1, len(spread.dims))
    fig.subplots_adjust(left=0.06, right=0.99, bottom=0.15, top=0.91, wspace=0.25)
    for ax, d, scores, su, ss in zip(axes, spread.dims, spread.scores, spread.std_unscaled, spread.std_scaled):
        scaled = scores / np.sqrt(d)
        lim = max(np.abs(scores).max(), np.abs(scaled).max())
        bins = np.linspace(-lim, lim, 61)
        ax.hist(scores, bins=bins, histtype="stepfilled", color=UNSCALED, alpha=0.6, label=f"q·k, std {su:.1f}")
        ax.hist(scaled, bins=bins, histtype="stepfilled", color=SCALED, alpha=0.6, label=f"q·k/√d, std {ss:.2f}")
        ax.set_title(f"d = {d}")
        ax.set_xlabel("score")
        ax.legend(frameon=False, fontsize=8, loc="upper left")
    axes[0].set_ylabel(f"count of {spread.scores.shape[1]:,} dot products".replace(",", " "))
    return fig


def saturation_figure(sweep: SaturationSweep, sat: Saturation, jac: JacobianSlope) -> Figure:
    """Left: the mean largest weight against d_k. Right: the softmax's largest slope against the largest weight."""
    fig = new_figure(figsize=(11, 4.4))
    ax, ax_j = fig.subplots(1, 2)
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.12, top=0.88, wspace=0.25)  # room for a two-line title
    dims = np.asarray(sweep.dims)
    ax.fill_between(dims, sweep.p10_unscaled, sweep.p90_unscaled, color=UNSCALED, alpha=0.15, lw=0)
    ax.fill_between(dims, sweep.p10_scaled, sweep.p90_scaled, color=SCALED, alpha=0.15, lw=0)
    ax.plot(dims, sweep.mean_unscaled, "o-", color=UNSCALED, label="q·k (mean; band: 10th–90th percentile)")
    ax.plot(dims, sweep.mean_scaled, "o-", color=SCALED, label="q·k / √d_k")
    ax.plot([sat.d_k] * 2, [LESSON["saturation_unscaled"], LESSON["saturation_scaled"]], "kx", ms=9,
            label=f"the lesson at d_k = {sat.d_k}")
    ax.axhline(1 / sat.n_keys, color="0.6", ls=":", lw=1)
    ax.text(dims[-1], 1 / sat.n_keys + 0.02, "uniform 1/8", ha="right", fontsize=8, color="0.4")
    ax.set_xscale("log", base=2)
    ax.set_xticks(dims, [str(d) for d in dims])
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("d_k")
    ax.set_ylabel("largest of 8 weights")
    # the sweep draws every d_k from one generator: its point at 64 is not the printed draws
    ax.set_title(f"Saturation: {sweep.n_draws} draws per d_k (seed {sweep.seed}; the numbers printed\nfor d_k = "
                 f"{sat.d_k} come from their own {sat.n_draws} draws, seed {sat.seed})", fontsize=10)
    ax.legend(frameon=False, fontsize=8, loc="center right")

    ax_j.scatter(sat.max_unscaled, sat.jacobian_unscaled, s=12, color=UNSCALED, alpha=0.7,
                 label=f"{sat.n_draws} draws at d_k = {sat.d_k}, q·k")
    ax_j.scatter(sat.max_scaled, sat.jacobian_scaled, s=12, color=SCALED, alpha=0.7, label="q·k / √d_k")
    ax_j.plot(jac.peaks, jac.largest_entry, "k.-", lw=1, label="one weight p, the rest equal: p(1 − p)")
    ax_j.set_yscale("log")
    ax_j.set_xlabel("largest weight")
    ax_j.set_ylabel("largest |∂α_i/∂s_j| = |α_i(δ_ij − α_j)|")
    ax_j.set_title("The slope of the softmax vanishes as one weight → 1")
    ax_j.legend(frameon=False, fontsize=8, loc="lower left")
    return fig


def positional_figure(pos: Positions) -> Figure:
    """Heatmap of the sinusoidal encoding, positions x dimensions."""
    fig = new_figure(figsize=(8, 5))
    ax = fig.subplots()
    fig.subplots_adjust(left=0.09, right=0.99, bottom=0.11, top=0.93)
    im = ax.imshow(pos.encoding, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest",
                   extent=(-0.5, pos.d - 0.5, pos.positions[-1] + 0.5, pos.positions[0] - 0.5))
    fig.colorbar(im, ax=ax, label="f(t)_i")
    ax.set_xlabel("i (even: sin θ, odd: cos θ, θ = t / N^(2k/d), k = ⌊i/2⌋)")
    ax.set_ylabel("position t")
    ax.set_title(f"Sinusoidal positional encoding, d = {pos.d}, N = {pos.base:g}")
    return fig


def causal_figure(ex: CausalExample) -> Figure:
    """The weight matrices without and with the causal mask, side by side."""
    fig = new_figure(figsize=(10, 4.0))
    axes = fig.subplots(1, 2)
    fig.subplots_adjust(left=0.1, right=0.88, bottom=0.2, top=0.92, wspace=0.35)
    n = len(ex.tokens)
    for ax, weights, title in zip(
        axes, (ex.weights_unmasked, ex.weights_masked), ("Without the mask", "With the causal mask")
    ):
        im = ax.imshow(weights, cmap="Greys", vmin=0, vmax=1, interpolation="nearest")
        for i in range(n):  # 25 cells: a loop is clearer than a vectorised annotate
            for j in range(n):
                w = weights[i, j]
                ax.text(j, i, f"{w:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if w > 0.5 else "black")
        ax.set_xticks(range(n), ex.tokens, rotation=30)
        ax.set_yticks(range(n), ex.tokens)
        ax.set_xlabel("key (attended to)")
        ax.set_ylabel("query (attending)")
        ax.set_title(title)
    fig.colorbar(im, ax=axes, label="weight", shrink=0.8)
    return fig


def cost_figure(rows: tuple[CostRow, ...]) -> Figure:
    """Operation counts of one layer against n: attention n²·d, recurrent n·d²."""
    fig = new_figure(figsize=(6.5, 4.2))
    ax = fig.subplots()
    fig.subplots_adjust(left=0.13, right=0.97, bottom=0.13, top=0.92)
    n = np.array([r.n for r in rows])
    d = rows[0].d
    ax.loglog(n, [r.attention_ops for r in rows], "o-", color=SCALED, label="self-attention, n²·d")
    ax.loglog(n, [r.recurrent_ops for r in rows], "s-", color=UNSCALED, label="recurrent, n·d²")
    ax.axvline(d, color="0.6", ls=":", lw=1)
    ax.text(d * 1.05, ax.get_ylim()[0] * 3, f"n = d = {d}", fontsize=8, color="0.4")
    ax.set_xticks(n, [str(v) for v in n])
    ax.set_xlabel("n (tokens)")
    ax.set_ylabel("operations per layer (leading term)")
    ax.set_title(f"Cost of one layer, d = {d}")
    ax.legend(frameon=False)
    return fig

