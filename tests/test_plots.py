"""The run's figures, checked through their artists; `run --format/--no-figures` and `show` through CliRunner."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from matplotlib.colors import to_rgba_array

from real_attention.engine.categories import CATEGORIES, HEATMAP_LIGHT_TEXT_FROM, category_counts, focus_categories
from real_attention.outputs.figio import save_figure
from real_attention.engine.focus import FocusedSentence
from real_attention.engine.heads import classify
from real_attention.engine.pipeline import RunResult
from real_attention.outputs.drawing import write_run_figures
from real_attention.engine.naming import short_revision
from real_attention.outputs.plots import SENSE_COLOUR, draw_focus_bars, draw_heatmap, draw_overview, percent
from real_attention.outputs.readback import load_run, stored_head
from real_attention.engine.sentences import Sentence, SentenceSet, load_sentences
from real_attention.outputs.tables import write_results
from real_attention.engine.words import PUNCT, SPECIAL, WORD, WordAttention
from conftest import error_line, invoke
from real_attention import cli

REVISION = "3f076fdb1ab68d5b2880cb87a0886f315b8146f8"
WORDS = ("[CLS]", "Me", "senté", "en", "el", "banco", "de", "mi", "jardín", ".", "[SEP]")
KINDS = (SPECIAL, WORD, WORD, WORD, WORD, WORD, WORD, WORD, WORD, PUNCT, SPECIAL)
FOCUS, SENSE = 5, 8
# Five hand-made heads: where the focus row puts all its weight, and the category that must follow.
HAND_HEADS = ((SENSE, "sense"), (0, "marker"), (FOCUS - 1, "previous"), (FOCUS + 1, "next"), (2, "other"))




def hand_attention(keys: list[int], seed: int = 0) -> WordAttention:
    """(1 layer, len(keys) heads): random rows, except the focus row, which is one-hot on each head's key."""
    rng = np.random.default_rng(seed)
    n = len(WORDS)
    weights = rng.dirichlet(np.ones(n), size=(1, len(keys), n))  # (1, heads, n, n)
    weights[0, :, FOCUS, :] = np.eye(n)[keys]
    return WordAttention(text="Me senté en el banco de mi jardín.", words=WORDS, kinds=KINDS,
                         weights=weights.astype(np.float32))


@pytest.fixture(scope="module")
def hand_result() -> RunResult:
    """A RunResult without a model: two identical sentences with the five heads of HAND_HEADS."""
    sentences = [FocusedSentence(hand_attention([k for k, _ in HAND_HEADS], seed), FOCUS, SENSE) for seed in (0, 1)]
    sentence_set = SentenceSet(lang="es", focus="banco",
                               sentences=(Sentence("Me senté en el banco de mi jardín.", "jardín"),) * 2)
    return RunResult(sentence_set=sentence_set, sentences=tuple(sentences), report=classify(sentences),
                     model="hand-made", revision=REVISION, versions={})


@pytest.fixture(scope="module")
def tiny_result(tiny_loaded) -> RunResult:
    from real_attention.engine.pipeline import analyse

    return analyse(tiny_loaded, load_sentences(None, "es"))


def heatmap_of(result: RunResult, sentence: int, layer: int, head: int):
    located = result.sentences[sentence]
    attention = located.attention
    fig = draw_heatmap(attention.weights[layer, head], attention.words, focus=located.focus, sense=located.sense,
                       model=result.model, revision=result.revision, layer=layer, head=head, sentence=sentence,
                       text=attention.text, role="test head")
    return fig, attention


# ---------------------------------------------------------------- categories


def test_categories_follow_the_focus_rows_top_key(hand_result):
    categories = focus_categories(hand_result.report, hand_result.sentences)
    assert categories.shape == (1, len(HAND_HEADS))
    assert list(categories[0]) == [name for _, name in HAND_HEADS]
    assert category_counts(categories) == {name: 1 for name in CATEGORIES}


def test_sense_wins_over_next_when_the_sense_word_follows_the_focus_word():
    attention = hand_attention([FOCUS + 1, FOCUS + 1])
    sentences = [FocusedSentence(attention, FOCUS, FOCUS + 1)]
    assert list(focus_categories(classify(sentences), sentences)[0]) == ["sense", "sense"]


def test_previous_needs_every_sentence():
    sentences = [FocusedSentence(hand_attention([FOCUS - 1]), FOCUS, SENSE),
                 FocusedSentence(hand_attention([2]), FOCUS, SENSE)]
    assert focus_categories(classify(sentences), sentences)[0, 0] == "other"


# ---------------------------------------------------------------- heatmap


def cell_labels(ax) -> list[str]:
    """The numbers written in an axes' cells (real_attention.outputs.plots.CellLabels), row-major."""
    (cells,) = [c for c in ax.collections if c.get_gid() == "cell"]
    return cells.labels


def test_heatmap_image_ticks_and_annotations_are_the_word_matrix(tiny_result):
    fig, attention = heatmap_of(tiny_result, 0, 1, 2)
    ax = fig.axes[0]
    matrix = attention.weights[1, 2]  # (n, n)
    np.testing.assert_array_equal(np.asarray(ax.images[0].get_array()), matrix)
    assert [t.get_text() for t in ax.get_xticklabels()] == list(attention.words)
    assert [t.get_text() for t in ax.get_yticklabels()] == list(attention.words)
    (cells,) = [c for c in ax.collections if c.get_gid() == "cell"]  # one artist for every cell's number
    assert cells.labels == [str(round(100 * float(w))) for w in matrix.reshape(-1)]
    assert cells.positions[:2].tolist() == [[0, 0], [1, 0]]  # (column, row): row-major order
    # white on the dark cells, dark ink elsewhere
    light = to_rgba_array(cells.get_facecolors())[:, :3].min(axis=1) > 0.9  # (k,) white
    np.testing.assert_array_equal(light, matrix.reshape(-1) >= HEATMAP_LIGHT_TEXT_FROM)


def test_heatmap_rounds_to_whole_percentages():
    weights = np.array([[0.444, 0.556], [0.004, 0.996]], dtype=np.float32)
    fig = draw_heatmap(weights, ["banco", "jardín"], focus=0, model="m", revision="r", layer=0, head=0,
                       sentence=0, text="banco jardín")
    assert cell_labels(fig.axes[0]) == ["44", "56", "0", "100"]
    assert percent(0.65) == "65" and percent(1.0) == "100"


def test_heatmap_scale_title_and_focus_row(tiny_result):
    fig, attention = heatmap_of(tiny_result, 1, 0, 3)
    ax, colourbar = fig.axes  # one heatmap and one colour bar, nothing else
    assert ax.images[0].get_clim() == (0.0, 1.0)
    title = ax.get_title()
    assert tiny_result.model in title and short_revision(tiny_result.revision) in title
    assert "layer 1, head 4" in title and "sentence 2: Fui al banco a sacar dinero." in title
    focus = tiny_result.sentences[1].focus
    (frame,) = [p for p in ax.patches if p.get_gid() == "focus"]
    assert frame.get_xy() == (-0.5, focus - 0.5) and frame.get_height() == 1
    assert ax.get_yticklabels()[focus].get_fontweight() == "bold"


def test_long_sentences_grow_the_figure_and_rotate_the_labels():
    def figure(n: int):
        words = [f"palabra{i}" for i in range(n)]
        weights = np.full((n, n), 1 / n, dtype=np.float32)
        return draw_heatmap(weights, words, focus=1, model="m", revision="r", layer=0, head=0, sentence=0,
                            text=" ".join(words))

    small, large = figure(6), figure(30)
    assert large.get_size_inches()[0] > small.get_size_inches()[0] + 8
    assert all(t.get_rotation() == 45 for t in large.axes[0].get_xticklabels())


def test_dollar_signs_are_text_not_mathtext(tmp_path):
    words = ["[CLS]", "$\\x$", "$5", "[SEP]"]  # "$\x$" is a mathtext error if parsed
    fig = draw_heatmap(np.full((4, 4), 0.25, dtype=np.float32), words, focus=1, model="m", revision="r", layer=0,
                       head=0, sentence=0, text="cuesta $\\x$ o $5")
    save_figure(fig, tmp_path / "dollars.png")
    assert "cuesta $\\x$ o $5" in fig.axes[0].get_title()


def test_short_revision_forms():
    assert short_revision(REVISION) == "3f076fdb"
    assert short_revision("sha256:53aa51172d142c89") == "sha256:53aa5117"


# ---------------------------------------------------------------- overview and focus bars


def test_overview_categories_match_heads_csv(tiny_result, tmp_path):
    write_results(tmp_path, tiny_result)
    heads = pd.read_csv(tmp_path / "heads.csv")
    report = tiny_result.report
    categories = focus_categories(report, tiny_result.sentences)
    fig = draw_overview(categories, report.top_weight.mean(axis=0), model="m", revision="r", focus_word="banco",
                        sentence_count=2, best=report.best_sense_head)
    drawn = np.array(CATEGORIES)[np.asarray(fig.axes[0].images[0].get_array())]  # (layers, heads)
    assert drawn.shape == (3, 4)
    np.testing.assert_array_equal(drawn, categories)
    flat = drawn.reshape(-1)  # heads.csv rows: layer-major, as reshape
    assert ((flat == "sense") == (heads["sense_head"] == True)).all()  # noqa: E712
    assert ((flat == "marker") == ((heads["marker_head"] == True) & (flat != "sense"))).all()  # noqa: E712
    cells = cell_labels(fig.axes[0])
    assert cells == [percent(w) for w in report.top_weight.mean(axis=0).reshape(-1)]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert f"marker: {int(report.marker_head.sum())} of 12" in legend


def test_focus_bars_are_the_focus_row_with_the_sense_bar_highlighted(hand_result):
    located = hand_result.sentences[0]
    row = located.attention.weights[0, 0, located.focus]
    fig = draw_focus_bars(row, located.attention.words, focus=located.focus, sense=located.sense, model="m",
                          revision="r", layer=0, head=0, sentence=0, text=located.attention.text)
    bars = fig.axes[0].patches
    np.testing.assert_allclose([b.get_height() for b in bars], row)
    coloured = [i for i, b in enumerate(bars) if b.get_facecolor() == pytest.approx(_rgba(SENSE_COLOUR))]
    assert coloured == [located.sense]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == list(located.attention.words)


def _rgba(colour: str):
    from matplotlib.colors import to_rgba

    return to_rgba(colour)


# ---------------------------------------------------------------- writing


def test_run_figures_names_and_formats(hand_result, tmp_path):
    one = RunResult(sentence_set=hand_result.sentence_set, sentences=hand_result.sentences[:1],
                    report=classify(list(hand_result.sentences[:1])), model="m", revision="r", versions={})
    paths = write_run_figures(tmp_path, one, ("png", "svg", "png"))
    # Head 1 (index 0) is the sense head; prev, next and marker scores pick the heads built for them.
    report = one.report
    assert report.best_sense_head == (0, 0)
    expected = []
    for prefix, (layer, head) in (("sense", report.best_sense_head), ("prev", report.prev_head),
                                  ("next", report.next_head), ("marker_weight", report.marker_score_head)):
        expected += [f"{prefix}_L{layer + 1}H{head + 1}_s1.png", f"{prefix}_L{layer + 1}H{head + 1}_s1.svg"]
    expected += ["overview.png", "overview.svg", "focus_bars_s1.png", "focus_bars_s1.svg"]
    assert [p.name for p in paths] == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(expected)


def test_no_sense_head_skips_the_sense_figures(tmp_path):
    sentences = [FocusedSentence(hand_attention([0, 2]), FOCUS, SENSE)]
    result = RunResult(sentence_set=SentenceSet("es", "banco", (Sentence("x", "jardín"),)),
                       sentences=tuple(sentences), report=classify(sentences), model="m", revision="r", versions={})
    names = [p.name for p in write_run_figures(tmp_path, result, ("png",))]
    assert not [n for n in names if n.startswith(("sense_", "focus_bars"))]
    assert "overview.png" in names


def test_two_writes_give_identical_bytes(tiny_result, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = write_run_figures(tmp_path / "a", tiny_result, ("png",))
    second = write_run_figures(tmp_path / "b", tiny_result, ("png",))
    assert [p.name for p in first] == [p.name for p in second]
    for a, b in zip(first, second):
        assert a.read_bytes() == b.read_bytes(), a.name
    assert b"Matplotlib version" not in first[0].read_bytes()
    for fmt in ("svg", "pdf"):  # one figure is enough for the other formats' metadata
        for folder in "ab":
            fig, _ = heatmap_of(tiny_result, 0, 0, 0)
            save_figure(fig, tmp_path / folder / f"one.{fmt}")
        assert (tmp_path / "a" / f"one.{fmt}").read_bytes() == (tmp_path / "b" / f"one.{fmt}").read_bytes()


# ---------------------------------------------------------------- the command line


@pytest.fixture(scope="module")
def tiny_run(tiny_model_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run")
    result = invoke("run", "--model", tiny_model_dir, "--out", out, "--no-report", "--format", "svg")
    assert result.exit_code == 0, result.output
    return out


def test_run_writes_the_figures_in_the_format_asked(tiny_run):
    figures = tiny_run / "figures" / "es"
    names = {p.name for p in figures.iterdir()}
    assert "overview.svg" in names and not [n for n in names if n.endswith(".png")]
    assert any(n.startswith("prev_L") and n.endswith("_s2.svg") for n in names)
    assert not [n for n in names if n.startswith(".")]  # nothing staged left behind


def test_no_figures_writes_no_figures(tiny_model_dir, tmp_path):
    result = invoke("run", "--model", tiny_model_dir, "--out", tmp_path, "--no-report", "--no-figures")
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "figures").exists()


def test_readback_rebuilds_the_matrix(tiny_run, tiny_result):
    head = stored_head(load_run(tiny_run, "es"), layer=2, head=3, sentence=2)
    attention = tiny_result.sentences[1].attention
    assert head.words == attention.words
    np.testing.assert_allclose(head.weights, attention.weights[1, 2], atol=5e-7)
    assert head.focus == tiny_result.sentences[1].focus and head.sense == tiny_result.sentences[1].sense


def test_show_draws_one_head_from_the_results(tiny_run):
    result = invoke("show", "--out", tiny_run, "--layer", 2, "--head", 3, "--sentence", 1)
    assert result.exit_code == 0, result.output
    path = Path(result.output.strip())
    assert path == tiny_run / "figures" / "show" / "es" / "head_L2H3_s1.png" and path.is_file()
    every = invoke("show", "--out", tiny_run, "--layer", 1, "--head", 1, "--format", "svg")
    assert [Path(line).name for line in every.output.split()] == ["head_L1H1_s1.svg", "head_L1H1_s2.svg"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--layer", 4, "--head", 1], "Error: --layer 4 is out of range: the model has layers 1 to 3"),
        (["--layer", 1, "--head", 0], "Error: --head 0 is out of range: each layer has heads 1 to 4"),
        (["--layer", 1, "--head", 1, "--sentence", 3],
         "Error: --sentence 3 is out of range: the run has sentences 1 to 2"),
    ],
)
def test_show_rejects_out_of_range_indices(tiny_run, args, message):
    result = invoke("show", "--out", tiny_run, *args)
    assert result.exit_code == 2
    assert error_line(result) == message


def test_show_without_results_says_to_run_first(tmp_path):
    result = invoke("show", "--out", tmp_path, "--lang", "en", "--layer", 1, "--head", 1)
    assert result.exit_code == 2
    assert error_line(result) == (f"Error: no results in {tmp_path / 'results' / 'en'}; "
                                  f"run `real-attention run --lang en --out {tmp_path}` first")


def test_show_does_not_import_torch(tiny_run):
    code = ("import sys\nfrom real_attention import cli\n"
            f"sys.argv = ['real-attention', 'show', '--out', {str(tiny_run)!r}, '--layer', '1', '--head', '2']\n"
            "try:\n    cli()\nexcept SystemExit as exit:\n    assert not exit.code, exit.code\n"
            "assert 'torch' not in sys.modules and 'transformers' not in sys.modules\nprint('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("ok")


def test_minilm_run_end_to_end(needs_minilm, tmp_path):
    result = invoke("run", "--model", "minilm", "--out", tmp_path, "--no-report")
    assert result.exit_code == 0, result.output
    figures = tmp_path / "figures" / "es"
    summary = json.loads((tmp_path / "results" / "es" / "summary.json").read_text(encoding="utf-8"))
    best = summary["best_sense_head"]
    assert (figures / f"sense_L{best['layer']}H{best['head']}_s1.png").is_file()
    assert (figures / "overview.png").is_file() and (figures / "focus_bars_s2.png").is_file()
    assert summary["layers"] == 6 and summary["heads_per_layer"] == 12


# ---------------------------------------------------------------- no global state


def test_drawing_leaves_the_users_backend_rcparams_and_pyplot_alone(tmp_path):
    # A fresh interpreter whose user picked another backend and has a pyplot figure open.
    code = (
        "import matplotlib\nmatplotlib.use('svg')\nimport matplotlib.pyplot as plt\n"
        "plt.figure()\nbefore = dict(matplotlib.rcParams)\n"
        "import numpy as np\n"
        "import real_attention.outputs.plots, real_attention.outputs.figio, real_attention.lesson.plots, real_attention.outputs.corpus_figures\n"
        "from real_attention.outputs.figio import save_figure\n"
        "from real_attention.outputs.corpus_figures import label_grid\n"
        "fig = real_attention.outputs.plots.draw_heatmap(np.full((2, 2), 0.5, dtype=np.float32), ['a', 'b'], focus=0, model='m',\n"
        "                                  revision='r', layer=0, head=0, sentence=0, text='a b')\n"
        f"save_figure(fig, {str(tmp_path / 'h.png')!r})\n"
        f"save_figure(label_grid(np.array([['next']]), ('next',), 't'), {str(tmp_path / 'l.png')!r})\n"
        "assert matplotlib.get_backend() == 'svg', matplotlib.get_backend()\n"
        "assert plt.get_fignums() == [1], plt.get_fignums()\n"
        "after = dict(matplotlib.rcParams)\n"
        "assert after == before, {k for k in before if before[k] != after[k]}\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[1], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert (tmp_path / "h.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"  # drawn with Agg, not svg


# ---------------------------------------------------------------- text in any script


def _cjk_font_installed() -> bool:
    from real_attention.outputs.fonts import text_families

    return text_families(["银行"]) is not None


def _font_has(text, char: str) -> bool:
    """Whether a font of the Text artist's family list (the first, or a fallback) has the glyph of char."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    for path in font_manager.fontManager._find_fonts_by_props(text.get_fontproperties()):
        if ord(char) in FT2Font(str(path), face_index=getattr(path, "face_index", 0)).get_charmap():
            return True
    return False


def test_chinese_words_render_with_a_font_that_has_their_glyphs(tmp_path, recwarn):
    import os

    if not _cjk_font_installed():
        if os.environ.get("CI"):
            pytest.fail("CI must install fonts-noto-cjk (.ci/run)")
        pytest.skip("no CJK font installed (apt-get install fonts-noto-cjk)")
    from real_attention.outputs.drawing import font_note

    words = ["[CLS]", "我", "坐", "在", "银行", "旁边", "。", "[SEP]"]
    n = len(words)
    fig = draw_heatmap(np.full((n, n), 1 / n, dtype=np.float32), words, focus=4, model="m", revision="r", layer=0,
                       head=0, sentence=0, text="我坐在银行旁边。")
    labels = fig.axes[0].get_xticklabels() + fig.axes[0].get_yticklabels()
    for label in labels:
        assert all(_font_has(label, char) for char in label.get_text()), label.get_text()
    save_figure(fig, tmp_path / "zh.png")
    assert not [w for w in recwarn if "missing from font" in str(w.message)]
    assert font_note(words) is None


def test_latin_words_keep_the_default_font():
    from matplotlib import rcParams

    fig = draw_heatmap(np.full((2, 2), 0.5, dtype=np.float32), ["banco", "jardín"], focus=0, model="m",
                       revision="r", layer=0, head=0, sentence=0, text="banco jardín")
    assert fig.axes[0].get_xticklabels()[0].get_fontproperties().get_family() == rcParams["font.family"]


def test_missing_glyphs_give_one_line_naming_the_package(monkeypatch):
    from real_attention.outputs import fonts

    monkeypatch.setattr(fonts, "FALLBACK_FAMILIES", ())  # as if no fallback font were installed
    fonts._families.cache_clear()
    try:
        note = fonts.missing_glyphs_note(["银行", "banco"])
        assert fonts.text_families(["银行"]) is None
    finally:
        fonts._families.cache_clear()
    assert note is not None and "\n" not in note and "fonts-noto-cjk" in note and "银" in note
    assert fonts.missing_glyphs_note(["banco", "jardín"]) is None


# ---------------------------------------------------------------- many figures


def _many(result: RunResult, copies: int) -> RunResult:
    sentences = result.sentences * copies
    return RunResult(sentence_set=result.sentence_set, sentences=sentences, report=classify(list(sentences)),
                     model=result.model, revision=result.revision, versions={})


def test_per_sentence_figures_stop_at_max_sentences_unless_all(hand_result, tmp_path):
    many = _many(hand_result, 3)  # 6 sentences
    (tmp_path / "first").mkdir()
    (tmp_path / "all").mkdir()
    names = [p.name for p in write_run_figures(tmp_path / "first", many, ("png",), max_sentences=2, workers=1)]
    assert {n.rsplit("_s", 1)[1] for n in names if "_s" in n} == {"1.png", "2.png"}
    assert "overview.png" in names
    every = [p.name for p in write_run_figures(tmp_path / "all", many, ("png",), max_sentences=None, workers=1)]
    assert "focus_bars_s6.png" in every and len(every) == 5 * 6 + 1


def test_workers_draw_the_same_bytes_in_the_same_order(tiny_result, tmp_path, capsys):
    (tmp_path / "serial").mkdir()
    (tmp_path / "forked").mkdir()
    serial = write_run_figures(tmp_path / "serial", tiny_result, ("png", "svg"), workers=1)
    forked = write_run_figures(tmp_path / "forked", tiny_result, ("png", "svg"), workers=2, quiet=True)
    assert [p.name for p in serial] == [p.name for p in forked]
    for a, b in zip(serial, forked):
        assert a.read_bytes() == b.read_bytes(), a.name
    assert capsys.readouterr().err == ""  # quiet: no progress bar


def test_a_pool_started_early_draws_the_same_bytes_and_writes_the_report(tiny_result, tmp_path):
    """`run` starts its drawing processes before it loads the model (real_attention.outputs.drawing.DrawingPool) and
    hands them the figures, the font check and the report; the files are those of one process."""
    from real_attention.outputs.drawing import Drawing, DrawingPool, font_note, run_jobs, run_texts
    from real_attention.outputs.report import write_report
    from real_attention.outputs.tables import summary

    for folder in ("serial", "pooled"):
        (tmp_path / folder).mkdir()
    serial = write_run_figures(tmp_path / "serial", tiny_result, ("png",), workers=1)
    with DrawingPool(2) as pool:
        drawing = Drawing(run_jobs(tmp_path / "pooled", tiny_result, ("png",)), pool=pool)
        note = pool.font_note(run_texts(tiny_result))
        report = pool.write_report(tmp_path / "pooled" / "report.html", tiny_result, summary(tiny_result))
        pooled = drawing.wait(quiet=True)
        report.get()
    assert [p.name for p in pooled] == [p.name for p in serial]
    assert all(a.read_bytes() == b.read_bytes() for a, b in zip(serial, pooled))
    write_report(tmp_path / "report.html", tiny_result, summary(tiny_result))
    assert (tmp_path / "pooled" / "report.html").read_bytes() == (tmp_path / "report.html").read_bytes()
    assert note.get() == font_note(run_texts(tiny_result))


def test_a_run_result_unpickles_without_torch(tiny_result, tmp_path):
    """A drawing worker forked before torch was imported gets the RunResult for the report: unpickling it must
    not import torch (a TorchVersion in `versions` once did, for a second)."""
    import pickle

    (tmp_path / "result.pkl").write_bytes(pickle.dumps(tiny_result))
    code = ("import pickle, sys; pickle.loads(open(sys.argv[1], 'rb').read()); "
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "result.pkl")], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parent.parent).stdout
    assert out.strip() == "[]"


def test_a_run_that_fails_after_the_drawing_processes_started_ends_them(tmp_path, tiny_model_dir, monkeypatch):
    import multiprocessing

    from real_attention.engine import pipeline

    def fail(*args, **kwargs):
        raise RuntimeError("stop")

    monkeypatch.setattr(pipeline, "analyse", fail)
    result = CliRunner().invoke(cli, ["run", "--model", str(tiny_model_dir), "--out", str(tmp_path)])
    assert result.exit_code == 1 and "hit a bug" in result.output
    assert multiprocessing.active_children() == []  # terminated and joined, none left behind
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
