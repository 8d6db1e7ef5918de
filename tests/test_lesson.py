"""Tests of the lesson's model-free numbers, their figures and the `lesson` command."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import real_attention.lesson.numbers as L
from real_attention.lesson.files import format_report, lesson_summary, write_tables
from real_attention import cli

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def results() -> L.LessonResults:
    return L.compute_lesson()  # the slow part (about 2 s): the 100 000 draws and the 4 x 20 000 dot products


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    if "matplotlib.pyplot" in sys.modules:  # don't import it just to close nothing
        sys.modules["matplotlib.pyplot"].close("all")


# ---------------------------------------------------------------- the formula


def test_softmax_rows_sum_to_one_and_survive_large_scores():
    scores = np.array([[1000.0, 1000.0, -1000.0], [0.0, 0.0, 0.0]])
    w = L.softmax(scores)
    np.testing.assert_allclose(w.sum(axis=-1), 1.0)
    np.testing.assert_allclose(w[0], [0.5, 0.5, 0.0])
    np.testing.assert_allclose(w[1], 1 / 3)


def test_attention_matches_the_seed_formula():
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((2, 4)), rng.standard_normal((5, 4)), rng.standard_normal((5, 3))
    out, w = L.attention(q, k, v)
    s = q @ k.T / 2.0
    expected = np.exp(s) / np.exp(s).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(w, expected)
    np.testing.assert_allclose(out, expected @ v)
    assert out.shape == (2, 3) and w.shape == (2, 5)


# ---------------------------------------------------------------- 1. the scene


def test_scene_weights_and_outputs_are_the_lessons():
    s = L.scene()
    assert s.words == ("Me", "senté", "en", "el", "banco", "de", "mi", "jardín")
    np.testing.assert_array_equal(np.round(s.weights_unscaled, 2), [0.02, 0.2, 0.02, 0.02, 0.1, 0.02, 0.02, 0.6])
    np.testing.assert_array_equal(np.round(s.output_unscaled, 2), [0.75, 0.05])
    np.testing.assert_array_equal(np.round(s.weights_scaled, 2), [0.04, 0.21, 0.04, 0.04, 0.13, 0.04, 0.04, 0.46])
    np.testing.assert_array_equal(np.round(s.output_scaled, 2), [0.63, 0.06])
    np.testing.assert_allclose(s.weights_unscaled.sum(), 1.0)
    np.testing.assert_allclose(s.weights_scaled.sum(), 1.0)


def test_scene_prose_numbers():
    # q·k for jardín is 1.8; the prose rounds the weights to 60, 20, 10 and 2 % (46, 21, 13, 4 % scaled).
    s = L.scene()
    assert s.scores[7] == pytest.approx(1.8)
    assert [round(100 * s.weights_unscaled[i]) for i in (7, 1, 4, 0)] == [60, 20, 10, 2]
    assert [round(100 * s.weights_scaled[i]) for i in (7, 1, 4, 0)] == [46, 21, 13, 4]


# ---------------------------------------------------------------- 2. why sqrt(d_k)


def test_score_spread_is_the_seeds(results):
    sp = results.spread
    assert sp.dims == (1, 2, 64, 512)
    assert [round(float(x), 1) for x in sp.std_unscaled] == [1.0, 1.4, 8.0, 22.6]
    assert [round(float(x), 2) for x in sp.std_scaled] == [1.0, 1.0, 1.0, 1.0]


def test_score_spread_draws_in_the_seeds_order(results):
    # The seed's own loop, verbatim: the same generator, q then k for each d.
    rng = np.random.default_rng(0)
    for i, d in enumerate((1, 2, 64, 512)):
        q = rng.standard_normal((20000, d))
        k = rng.standard_normal((20000, d))
        np.testing.assert_array_equal(results.spread.scores[i], (q * k).sum(axis=1))


# ---------------------------------------------------------------- 3. saturation


def test_saturation_100_draws_and_expectation(results):
    sat = results.saturation
    assert (sat.d_k, sat.n_keys, sat.n_draws, sat.n_large) == (64, 8, 100, 100_000)
    # The lesson's seed is unknown; it says its averages agree to about ±0.03.
    assert sat.expect_unscaled == pytest.approx(0.89, abs=0.03)
    assert sat.expect_scaled == pytest.approx(0.36, abs=0.03)
    assert sat.mean_unscaled == pytest.approx(0.89, abs=0.03)
    assert sat.mean_scaled == pytest.approx(0.36, abs=0.03)
    np.testing.assert_allclose(sat.weights_unscaled.sum(axis=-1), 1.0)
    # The batch means spread around the expectation, and much less than single draws do.
    assert sat.batch_unscaled.mean() == pytest.approx(sat.expect_unscaled)
    assert sat.batch_unscaled.std() < sat.max_unscaled.std() / 5


def test_largest_weights_is_vectorised_per_draw():
    scores = L.draw_scores(np.random.default_rng(5), d_k=16, n_keys=8, n_draws=3)
    rng = np.random.default_rng(5)
    q, k = rng.standard_normal((3, 16)), rng.standard_normal((3, 8, 16))
    for b in range(3):
        np.testing.assert_allclose(scores[b], k[b] @ q[b])
    u, s = L.largest_weights(np.random.default_rng(5), d_k=16, n_keys=8, n_draws=3)
    np.testing.assert_allclose(u, L.softmax(scores).max(axis=1))
    np.testing.assert_allclose(s, L.softmax(scores / 4.0).max(axis=1))


def test_sweep_saturates_without_scaling_only(results):
    sw = results.sweep
    assert sw.dims[0] == 1 and sw.dims[-1] == 512
    assert sw.mean_unscaled[0] == pytest.approx(sw.mean_scaled[0])  # d_k = 1: sqrt(1) changes nothing
    assert sw.mean_unscaled[-1] > 0.9
    assert np.all(sw.mean_scaled < 0.45)


def test_softmax_jacobian_formula():
    alpha = L.softmax(np.array([0.3, -1.0, 2.0, 0.1]))
    jac = L.softmax_jacobian(alpha)
    # Central differences of the softmax itself.
    s = np.log(alpha)
    eps = 1e-6
    numeric = np.stack([(L.softmax(s + eps * e) - L.softmax(s - eps * e)) / (2 * eps) for e in np.eye(4)], axis=1)
    np.testing.assert_allclose(jac, numeric, atol=1e-8)
    np.testing.assert_allclose(jac.sum(axis=0), 0.0, atol=1e-15)  # the weights always sum to 1


def test_jacobian_vanishes_as_one_weight_tends_to_one(results):
    jac = L.jacobian_slope()
    assert np.all(np.diff(jac.largest_entry) < 0)
    np.testing.assert_allclose(jac.largest_entry, jac.peaks * (1 - jac.peaks))
    assert jac.largest_entry[-1] < 1e-3
    sat = results.saturation
    # Saturated draws have flatter slopes than scaled ones.
    assert sat.jacobian_unscaled.mean() < sat.jacobian_scaled.mean() / 2


# ---------------------------------------------------------------- 4. positional encoding


def test_sinusoidal_encoding_is_the_seeds_formula():
    enc = L.sinusoidal_encoding(np.array([0, 1, 7]), d=8)
    assert enc.shape == (3, 8)
    np.testing.assert_allclose(enc[0, 0::2], 0.0)  # sin 0
    np.testing.assert_allclose(enc[0, 1::2], 1.0)  # cos 0
    t, k, d = 7, 2, 8
    theta = t / 10_000 ** (2 * k / d)
    assert enc[2, 2 * k] == pytest.approx(np.sin(theta))
    assert enc[2, 2 * k + 1] == pytest.approx(np.cos(theta))


def test_complex_form_matches_the_real_form_and_rotates():
    t = np.arange(30)
    z = L.complex_encoding(t, d=16)
    enc = L.sinusoidal_encoding(t, d=16)
    np.testing.assert_allclose(z.real, enc[:, 1::2])
    np.testing.assert_allclose(z.imag, enc[:, 0::2])
    assert L.rotation_error(t, np.array([-3.0, 0.25, 5.0]), d=16) < 1e-12
    # The rotation holds for f but not for an arbitrary map: a wrong base breaks the check.
    shifted = L.complex_encoding(t + 5, d=16)
    wrong = L.complex_encoding(np.array([5.0]), d=16, base=100.0) * z
    assert np.abs(shifted - wrong).max() > 0.1


def test_positional_result(results):
    pos = results.positions
    assert pos.encoding.shape == (50, 64) and pos.base == 10_000
    assert pos.rotation_error < 1e-9


# ---------------------------------------------------------------- 5. causal mask


def test_causal_mask_is_the_seeds_triangle():
    n = 5
    seed_mask = (1 - np.triu(np.ones((1, n, n)), k=1)).astype(bool)[0]  # seed 003, in numpy
    np.testing.assert_array_equal(L.causal_mask(n), seed_mask)


def test_masked_weights_never_look_ahead(results):
    c = results.causal
    n = len(c.tokens)
    assert c.tokens == ("orange", "is", "my", "favorite")  # "fruit" is what the model predicts, not an input
    np.testing.assert_allclose(c.weights_masked.sum(axis=-1), 1.0)
    np.testing.assert_allclose(c.weights_unmasked.sum(axis=-1), 1.0)
    assert np.all(c.weights_masked[np.triu_indices(n, k=1)] == 0.0)
    assert c.weights_masked[0, 0] == 1.0
    for i in range(n):  # each row is the softmax over its prefix alone
        np.testing.assert_allclose(c.weights_masked[i, : i + 1], L.softmax(c.scores[i, : i + 1]))
    # Without the mask, some row does look ahead.
    assert c.weights_unmasked[np.triu_indices(n, k=1)].max() > 0.1


# ---------------------------------------------------------------- 6. cost


def test_cost_table():
    rows = L.cost_table()
    assert [r.n for r in rows] == [8, 128, 512, 4096] and {r.d for r in rows} == {768}
    for r in rows:
        assert r.attention_ops == r.n**2 * 768 and r.recurrent_ops == r.n * 768**2
        assert r.ratio == pytest.approx(r.n / 768)
        assert (r.attention_steps, r.attention_path) == (1, 1)
        assert (r.recurrent_steps, r.recurrent_path) == (r.n, r.n)
    assert rows[2].attention_ops < rows[2].recurrent_ops < rows[3].recurrent_ops < rows[3].attention_ops


# ---------------------------------------------------------------- report, tables, command


def test_every_check_agrees_and_the_report_marks_it(results):
    checks = L.lesson_checks(results)
    assert len(checks) == 24 and all(c.agrees for c in checks)
    report = format_report(results)
    assert "✗" not in report and report.count("✓") == 24
    assert "24 of 24 agree with the lesson." in report
    # the lesson's multi-head numbers (h = 8 of 64; BERT base's 144 heads of 64), and the saturation's spread under
    # its own heading, not the last one's
    assert [c.ours for c in checks if c.item == "multi-head"] == ["64", "64", "144"]
    lines = report.splitlines()
    assert lines.index("positions") > max(i for i, line in enumerate(lines) if "draw mean strays" in line)


def test_draws_are_seeded():
    a, b = L.saturation(n_large=1_000), L.saturation(n_large=1_000)
    np.testing.assert_array_equal(a.weights_unscaled, b.weights_unscaled)
    np.testing.assert_array_equal(a.batch_scaled, b.batch_scaled)
    np.testing.assert_array_equal(L.causal_example().scores, L.causal_example().scores)


def test_lesson_json_records_every_seed_and_they_redraw_the_tables(results, tmp_path):
    """A reader can redraw every random number from lesson.json: the sweep's and the causal example's seeds were in
    no output, and the saturation figure's d_k = 64 point (seed 2) differed from the printed one (seed 0) unsaid."""
    import pandas as pd

    from real_attention.lesson.plots import saturation_figure

    summary = lesson_summary(results)
    sweep = summary["saturation"]["sweep"]
    again = L.saturation_sweep(tuple(sweep["dims"]), n_draws=sweep["n_draws"], seed=sweep["seed"])
    write_tables(results, tmp_path)
    table = pd.read_csv(tmp_path / "saturation_sweep.csv")
    np.testing.assert_allclose(table["mean_scaled"], again.mean_scaled, atol=5e-7)
    assert sweep["seed"] != summary["saturation"]["seed"]  # two draws: the figure must say which is which
    title = saturation_figure(results.sweep, results.saturation, results.jacobian).axes[0].get_title()
    assert f"seed {sweep['seed']}" in title and f"seed {summary['saturation']['seed']}" in title
    causal = summary["causal_mask"]["draws"]
    assert causal == (f"queries then keys ({len(results.causal.tokens)}, 8), standard normal, "
                      "numpy.random.default_rng(0); scores q·k/sqrt(8)")
    redrawn = L.causal_example(d_k=results.causal.d_k, seed=results.causal.seed)
    np.testing.assert_array_equal(redrawn.weights_masked, results.causal.weights_masked)
    assert summary["score_spread"]["draws"].startswith(f"numpy.random.default_rng({results.spread.seed});")


def test_tables_are_byte_identical_twice(results, tmp_path):
    write_tables(results, tmp_path)
    first = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    write_tables(results, tmp_path)
    assert first == {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    summary = lesson_summary(results)
    assert summary["scene"]["output_unscaled"] == pytest.approx([0.75, 0.05], abs=0.005)
    header = (tmp_path / "scene.csv").read_text(encoding="utf-8").splitlines()[0]
    assert header == "case,position,word,key_1,key_2,value_seat,value_money,score,weight"


@pytest.fixture
def fast_cli(results, monkeypatch):
    """The command with the cached results, so the CLI tests time the writing only."""
    monkeypatch.setattr(L, "compute_lesson", lambda: results)
    return CliRunner()


def test_command_writes_results_and_figures_deterministically(fast_cli, tmp_path):
    run = fast_cli.invoke(cli, ["lesson", "--out", str(tmp_path)])
    assert run.exit_code == 0, run.output
    assert "24 of 24 agree with the lesson." in run.output
    results_dir, figures_dir = tmp_path / "results" / "lesson", tmp_path / "figures" / "lesson"
    assert sorted(p.name for p in results_dir.iterdir()) == [
        "causal_mask.csv", "cost.csv", "lesson.json", "positional_encoding.csv", "saturation_draws.csv",
        "saturation_sweep.csv", "scene.csv", "score_spread.csv", "softmax_jacobian.csv",
    ]
    assert sorted(p.name for p in figures_dir.iterdir()) == [
        "causal_mask.png", "cost.png", "positional_encoding.png", "saturation.png", "scene.png", "score_spread.png",
    ]
    png = (figures_dir / "scene.png").read_bytes()
    assert png.startswith(b"\x89PNG") and b"Software" not in png and b"Matplotlib" not in png
    first = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}

    rerun = fast_cli.invoke(cli, ["lesson", "--out", str(tmp_path)])  # over the earlier output
    assert rerun.exit_code == 0, rerun.output
    second = {p.relative_to(tmp_path): p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert first == second


def test_command_reports_an_unwritable_folder(fast_cli, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    run = fast_cli.invoke(cli, ["lesson", "--out", str(blocker / "sub")])
    assert run.exit_code == 1
    lines = run.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: cannot write to {blocker / 'sub'}")
    assert lines[0].endswith("Choose a writable folder as out (--out).")


def test_command_has_help():
    run = CliRunner().invoke(cli, ["lesson", "--help"])
    assert run.exit_code == 0
    assert "--out" in run.output and "results/lesson/" in run.output


def test_lesson_imports_no_torch():
    # A fresh interpreter: everything the command imports, and a run on small inputs.
    code = (
        "import sys\n"
        "import real_attention, real_attention.lesson.numbers, real_attention.lesson.files, real_attention.lesson.plots, real_attention.outputs.figio\n"
        "from real_attention.lesson.numbers import scene\n"
        "from real_attention.lesson.plots import scene_figure\n"
        "from real_attention.outputs.figio import save_figure\n"
        "import tempfile, pathlib\n"
        "save_figure(scene_figure(scene()), pathlib.Path(tempfile.mkdtemp()) / 'x.png')\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'transformers'))\n"
        "assert not bad, bad\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
def test_save_figure_is_byte_identical(tmp_path, suffix):
    import matplotlib.pyplot as plt

    from real_attention.outputs.figio import save_figure

    def draw() -> plt.Figure:
        fig, ax = plt.subplots(figsize=(2, 2))
        ax.plot([0, 1], [1, 0], label="a")
        ax.legend()
        return fig

    a = save_figure(draw(), tmp_path / f"a{suffix}").read_bytes()
    b = save_figure(draw(), tmp_path / f"b{suffix}").read_bytes()
    assert a == b
    assert b"Matplotlib v" not in a and not plt.get_fignums()  # no version; the figure is closed


def test_save_figure_refuses_unknown_formats(tmp_path):
    import matplotlib.pyplot as plt

    from real_attention.outputs.figio import save_figure

    with pytest.raises(ValueError, match="use one of .pdf, .png, .svg"):
        save_figure(plt.figure(), tmp_path / "x.jpg")


def test_ctrl_c_is_one_line_and_exit_130(monkeypatch, tmp_path):
    """Ctrl-C printed Click's "Aborted!" with exit 1, the status of a failure; a shell reports 128 + SIGINT."""
    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(L, "compute_lesson", interrupted)
    result = CliRunner().invoke(cli, ["lesson", "--out", str(tmp_path / "out")])
    assert result.exit_code == 130 and result.output.strip().splitlines()[-1] == "Interrupted.", result.output
    assert not (tmp_path / "out").exists()
