"""Writes the lesson's tables (CSV, JSON) and figures atomically, and formats the report."""
from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from ..outputs.files import write_json
from ..outputs.staging import staged_outputs
from .numbers import LessonResults, lesson_checks

FLOAT = "{:.6f}"  # one fixed float format for every CSV


def _f(x: float) -> str:
    return FLOAT.format(float(x))


def _round(x: float, digits: int = 6) -> float:
    """JSON floats rounded, so the last bits of a BLAS never show in a diff."""
    return round(float(x), digits)


def _write_csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def write_tables(r: LessonResults, folder: Path) -> None:
    """Every table of the lesson into folder: long-form CSVs and lesson.json. Positions shown count from 1."""
    s = r.scene
    rows = []
    for case, scale, weights in (("q·k", 1.0, s.weights_unscaled), ("q·k/sqrt(2)", np.sqrt(2.0), s.weights_scaled)):
        for i, word in enumerate(s.words):
            rows.append([case, i + 1, word, _f(s.keys[i, 0]), _f(s.keys[i, 1]), _f(s.values[i, 0]),
                         _f(s.values[i, 1]), _f(s.scores[i] / scale), _f(weights[i])])
    _write_csv(folder / "scene.csv",
               ["case", "position", "word", "key_1", "key_2", "value_seat", "value_money", "score", "weight"], rows)

    sp = r.spread
    _write_csv(folder / "score_spread.csv", ["d", "std_unscaled", "std_scaled"],
               [[d, _f(a), _f(b)] for d, a, b in zip(sp.dims, sp.std_unscaled, sp.std_scaled)])

    sat = r.saturation
    _write_csv(folder / "saturation_draws.csv",
               ["draw", "max_weight_unscaled", "max_weight_scaled", "max_jacobian_unscaled", "max_jacobian_scaled"],
               [[i + 1, _f(a), _f(b), f"{c:e}", f"{d:e}"] for i, (a, b, c, d) in enumerate(  # slopes reach 1e-10
                   zip(sat.max_unscaled, sat.max_scaled, sat.jacobian_unscaled, sat.jacobian_scaled))])

    sw = r.sweep
    _write_csv(folder / "saturation_sweep.csv",
               ["d_k", "mean_unscaled", "p10_unscaled", "p90_unscaled", "mean_scaled", "p10_scaled", "p90_scaled"],
               [[d, *map(_f, vals)] for d, *vals in zip(sw.dims, sw.mean_unscaled, sw.p10_unscaled, sw.p90_unscaled,
                                                        sw.mean_scaled, sw.p10_scaled, sw.p90_scaled)])

    jac = r.jacobian
    _write_csv(folder / "softmax_jacobian.csv", ["largest_weight", "largest_jacobian_entry"],
               [[_f(p), FLOAT.replace("f", "e").format(float(e))] for p, e in zip(jac.peaks, jac.largest_entry)])

    pos = r.positions
    # t and i are the formula's own variables (t = 0 is a position like any other), not row numbers.
    _write_csv(folder / "positional_encoding.csv", ["t", "i", "k", "function", "value"],
               [[int(t), i, i // 2, "sin" if i % 2 == 0 else "cos", _f(pos.encoding[a, i])]
                for a, t in enumerate(pos.positions) for i in range(pos.d)])

    c = r.causal
    n = len(c.tokens)
    _write_csv(folder / "causal_mask.csv",
               ["query_position", "query", "key_position", "key", "allowed", "score", "weight_unmasked",
                "weight_masked"],
               [[i + 1, c.tokens[i], j + 1, c.tokens[j], int(c.mask[i, j]), _f(c.scores[i, j]),
                 _f(c.weights_unmasked[i, j]), _f(c.weights_masked[i, j])] for i in range(n) for j in range(n)])

    _write_csv(folder / "cost.csv",
               ["n", "d", "attention_ops", "recurrent_ops", "ratio", "attention_steps", "recurrent_steps",
                "attention_path", "recurrent_path"],
               [[row.n, row.d, row.attention_ops, row.recurrent_ops, _f(row.ratio), row.attention_steps,
                 row.recurrent_steps, row.attention_path, row.recurrent_path] for row in r.cost])

    write_json(lesson_summary(r), folder / "lesson.json")


def lesson_summary(r: LessonResults) -> dict:
    """The headline numbers and the checks, as plain JSON-ready data."""
    s, sp, sat = r.scene, r.spread, r.saturation
    per_draw = {
        "unscaled": [_round(v, 4) for v in np.percentile(sat.max_unscaled, [5, 50, 95])],
        "scaled": [_round(v, 4) for v in np.percentile(sat.max_scaled, [5, 50, 95])],
    }
    return {
        "scene": {
            "words": list(s.words),
            "query": [_round(v) for v in s.query],
            "weights_unscaled": [_round(v) for v in s.weights_unscaled],
            "output_unscaled": [_round(v) for v in s.output_unscaled],
            "weights_scaled": [_round(v) for v in s.weights_scaled],
            "output_scaled": [_round(v) for v in s.output_scaled],
        },
        "score_spread": {
            "draws": f"numpy.random.default_rng({sp.seed}); for each d in order: q then k, each "
                     f"({sp.scores.shape[1]}, d)",
            "dims": list(sp.dims),
            "std_unscaled": [_round(v) for v in sp.std_unscaled],
            "std_scaled": [_round(v) for v in sp.std_scaled],
        },
        "saturation": {
            "draw": "q (d_k,) and 8 keys (8, d_k), standard normal; all queries drawn first, then all keys; "
                    "score q·k or q·k/sqrt(d_k); the largest softmax weight",
            "d_k": sat.d_k,
            "n_keys": sat.n_keys,
            "n_draws": sat.n_draws,
            "seed": sat.seed,
            "mean_unscaled": _round(sat.mean_unscaled),
            "mean_scaled": _round(sat.mean_scaled),
            "per_draw_percentiles_5_50_95": per_draw,
            "expectation": {
                "n_draws": sat.n_large,
                "seed": sat.large_seed,
                "unscaled": _round(sat.expect_unscaled),
                "scaled": _round(sat.expect_scaled),
            },
            "spread_of_a_100_draw_mean": {
                "how": f"the {sat.n_large} draws cut into {sat.batch_unscaled.size} batches of {sat.n_draws}",
                "std_unscaled": _round(sat.batch_unscaled.std(), 4),
                "std_scaled": _round(sat.batch_scaled.std(), 4),
                "p2_5_p97_5_unscaled": [_round(v, 4) for v in np.percentile(sat.batch_unscaled, [2.5, 97.5])],
                "p2_5_p97_5_scaled": [_round(v, 4) for v in np.percentile(sat.batch_scaled, [2.5, 97.5])],
            },
            "jacobian_largest_entry_mean": {
                "unscaled": _round(sat.jacobian_unscaled.mean()),
                "scaled": _round(sat.jacobian_scaled.mean()),
            },
            # the figure's sweep over d_k (saturation_sweep.csv): its own draws, so its d_k = 64 point differs
            "sweep": {"dims": list(r.sweep.dims), "n_draws": r.sweep.n_draws, "seed": r.sweep.seed,
                      "draws": "one generator for every d_k in order, each as above"},
        },
        "positional_encoding": {
            "d": r.positions.d,
            "N": r.positions.base,
            "n_positions": int(r.positions.positions.size),
            "rotation_error": float(f"{r.positions.rotation_error:.1e}"),
        },
        "causal_mask": {
            "tokens": list(r.causal.tokens),
            "draws": f"queries then keys ({len(r.causal.tokens)}, {r.causal.d_k}), standard normal, "
                     f"numpy.random.default_rng({r.causal.seed}); scores q·k/sqrt({r.causal.d_k})",
            "weight_on_later_tokens": float(np.abs(r.causal.weights_masked[~r.causal.mask]).sum()),
        },
        "cost": [
            {"n": row.n, "d": row.d, "attention_ops": row.attention_ops, "recurrent_ops": row.recurrent_ops,
             "attention_steps": row.attention_steps, "recurrent_steps": row.recurrent_steps,
             "attention_path": row.attention_path, "recurrent_path": row.recurrent_path}
            for row in r.cost
        ],
        "checks": [
            {"item": c.item, "name": c.name, "ours": c.ours, "lesson": c.lesson, "agrees": c.agrees}
            for c in lesson_checks(r)
        ],
    }


def write_figures(r: LessonResults, folder: Path, formats: tuple[str, ...] = ("png",)) -> None:
    """Every lesson figure into folder in each format, one at a time (each is closed once saved)."""
    from ..outputs.figio import save_figure  # matplotlib only when drawing
    from . import plots as lp

    draw = {
        "scene": lambda: lp.scene_figure(r.scene),
        "score_spread": lambda: lp.score_spread_figure(r.spread),
        "saturation": lambda: lp.saturation_figure(r.sweep, r.saturation, r.jacobian),
        "positional_encoding": lambda: lp.positional_figure(r.positions),
        "causal_mask": lambda: lp.causal_figure(r.causal),
        "cost": lambda: lp.cost_figure(r.cost),
    }
    for name, make in draw.items():
        for fmt in formats:
            save_figure(make(), folder / f"{name}.{fmt}")


def write_lesson(r: LessonResults, out: Path, formats: tuple[str, ...] = ("png",),
                 wait: bool = True) -> tuple[Path, Path]:
    """Write out/results/lesson and out/figures/lesson (figures in each format). Returns those two folders."""
    results_dir = out / "results" / "lesson"
    figures_dir = out / "figures" / "lesson"
    with staged_outputs(wait=wait) as staging:
        write_tables(r, staging.folder(results_dir))
        write_figures(r, staging.folder(figures_dir), formats)
    return results_dir, figures_dir


def format_report(r: LessonResults) -> str:
    """A short report: each number next to what the lesson says, ✓ where they agree, then the spread and cost."""
    checks = lesson_checks(r)
    width = max(len(c.name) for c in checks)
    ours_w = max(len(c.ours) for c in checks)
    sat = r.saturation
    lo_u, hi_u = np.percentile(sat.batch_unscaled, [2.5, 97.5])
    lo_s, hi_s = np.percentile(sat.batch_scaled, [2.5, 97.5])
    saturation_lines = [
        f"  a {sat.n_draws}-draw mean strays: q·k {lo_u:.2f}–{hi_u:.2f}, q·k/√d_k {lo_s:.2f}–{hi_s:.2f} "
        f"(95 % of {sat.batch_unscaled.size} batches; std {sat.batch_unscaled.std():.3f} and "
        f"{sat.batch_scaled.std():.3f})",
        f"  mean largest softmax slope over the {sat.n_draws} draws: q·k {sat.jacobian_unscaled.mean():.3f}, "
        f"q·k/√d_k {sat.jacobian_scaled.mean():.3f}",
    ]
    lines = []
    item = None
    for c in checks:
        if c.item != item:
            if item == "saturation":  # its spread and slope, under its heading
                lines += saturation_lines
            item = c.item
            lines.append(f"{item}")
        lines.append(f"  {'✓' if c.agrees else '✗'} {c.name:<{width}}  {c.ours:<{ours_w}}  lesson: {c.lesson}")
    if item == "saturation":
        lines += saturation_lines
    lines.append(f"cost (leading terms, d = {r.cost[0].d})")
    lines.append(f"  {'n':>5}  {'attention n²·d':>15}  {'recurrent n·d²':>15}  {'ratio':>6}  steps  path")
    for row in r.cost:
        lines.append(
            f"  {row.n:>5}  {row.attention_ops:>15,}  {row.recurrent_ops:>15,}  {row.ratio:>6.3f}  "
            f"1 vs {row.recurrent_steps:<4}  1 vs {row.recurrent_path}"
        )
    agree = sum(c.agrees for c in checks)
    lines.append(f"{agree} of {len(checks)} agree with the lesson.")
    return "\n".join(lines)
