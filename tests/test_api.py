"""The Python API (`import real_attention as ra`): the same numbers as the CLI, no global state, a notebook."""
import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import real_attention as ra
from conftest import SENSES, SENTENCES
from conftest import SPANISH
from real_attention import cli

ROOT = Path(__file__).resolve().parent.parent
EXTERNAL_URL = re.compile(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//|url\(\s*["']?(?:https?:)?//|@import""", re.I)


def run_cli(model_dir, out):
    config = out / "c.toml"
    out.mkdir(parents=True, exist_ok=True)
    config.write_text(SPANISH, encoding="utf-8")
    result = CliRunner().invoke(cli, ["run", "--model", str(model_dir), "--config", str(config), "--out", str(out),
                                      "--no-figures", "--no-report", "--quiet"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return out / "results" / "es"


def test_import_is_light_and_changes_nothing():
    code = (
        "import logging, sys\n"
        "import real_attention as ra\n"
        "heavy = [m for m in ('torch', 'transformers', 'matplotlib', 'pandas') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "assert callable(ra.load) and callable(ra.attend) and callable(ra.classify)\n"
        "assert callable(ra.heatmap) and callable(ra.corpus_stats) and issubclass(ra.InputError, ra.RealAttentionError)\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.stdout.strip() == "ok", done.stderr


def test_using_the_api_leaves_backend_logging_and_threads_alone(tiny_model_dir):
    code = (
        "import logging, sys\n"
        "import matplotlib\n"
        "matplotlib.use('svg')\n"
        "import torch\n"
        "torch.set_num_threads(1)\n"
        "import transformers  # it sets its own level when first imported\n"
        "logging.getLogger('transformers').setLevel(logging.DEBUG)\n"
        "import real_attention as ra\n"
        f"model = ra.load({str(tiny_model_dir)!r})\n"
        "att = ra.attend(model, ['me senté en el banco de mi jardín.'], focus='banco', sense='jardín')\n"
        "fig = ra.heatmap(att[0], layer=1, head=1)\n"
        "ra.corpus_stats(model, ['el banco.', 'mi jardín.'])\n"
        "import matplotlib.pyplot as plt\n"
        "assert matplotlib.get_backend() == 'svg', matplotlib.get_backend()\n"
        "assert plt.get_fignums() == [], plt.get_fignums()\n"
        "assert torch.get_num_threads() == 1\n"
        "assert logging.getLogger('transformers').level == logging.DEBUG\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_attend_gives_word_level_maps(tiny, tiny_att):
    assert len(tiny_att) == 2 and (tiny_att.layers, tiny_att.heads) == (tiny.layers, tiny.heads)
    first = tiny_att[0]
    assert first.words == ("[CLS]", "Me", "senté", "en", "el", "banco", "de", "mi", "jardín", ".", "[SEP]")
    assert first.weights.dtype == np.float32 and first.weights.shape == (3, 4, 11, 11)
    np.testing.assert_allclose(first.weights.sum(axis=-1), 1.0, atol=1e-5)
    plain = ra.attend(tiny, SENTENCES)  # no focus: the same maps
    np.testing.assert_array_equal(plain[1].weights, tiny_att[1].weights)
    assert "focus" not in repr(plain) and "Pass <code>focus=</code>" in plain._repr_html_()


def test_frame_and_classify_equal_the_run_tables(tiny_model_dir, tiny_att, tmp_path):
    folder = run_cli(tiny_model_dir, tmp_path)
    stored = pd.read_csv(folder / "attention.csv", keep_default_na=False)
    frame = tiny_att.frame()
    assert list(frame.columns) == list(stored.columns)
    assert frame.drop(columns="weight").astype(str).equals(stored.drop(columns="weight").astype(str))
    np.testing.assert_allclose(frame["weight"], stored["weight"], atol=5e-7)
    heads = pd.read_csv(folder / "heads.csv", keep_default_na=False)
    ours = ra.classify(tiny_att)
    assert list(ours.columns) == list(heads.columns)
    for column in heads.columns:
        if heads[column].dtype.kind == "f":
            np.testing.assert_allclose(ours[column].astype(float), heads[column], atol=5e-7)
        else:
            assert ours[column].astype(str).str.lower().tolist() == heads[column].astype(str).str.lower().tolist(), column


def test_classify_with_new_words_needs_no_model(tiny):
    plain = ra.attend(tiny, SENTENCES)
    by_words = ra.classify(plain, focus="banco", sense=SENSES)
    with_focus = ra.classify(ra.attend(tiny, SENTENCES, focus="banco", sense=SENSES))
    pd.testing.assert_frame_equal(by_words, with_focus)


@pytest.mark.parametrize("kwargs, message", [
    ({"focus": "banco"}, "give both focus="),
    ({"focus": "banco", "sense": ["jardín"]}, "sense= has 1 word(s) for 2 sentence(s)"),
    ({"focus": "banco", "sense": ["banco", "dinero"]}, "is the focus word itself"),
    ({"focus": "casa", "sense": SENSES}, "the focus word 'casa' is not in sentence 1"),
])
def test_bad_api_input_raises_input_error(tiny, kwargs, message):
    with pytest.raises(ra.InputError, match=re.escape(message)):
        ra.attend(tiny, SENTENCES, **kwargs)


def test_empty_input_raises_input_error(tiny):
    with pytest.raises(ra.InputError, match="at least one sentence"):
        ra.attend(tiny, [])
    with pytest.raises(ra.InputError, match="sentence 2 is empty"):
        ra.attend(tiny, ["el banco.", "  "])


def test_an_attentions_sentences_are_word_maps_and_one_without_maps_is_refused(tiny_att):
    first = tiny_att[0]
    assert isinstance(first, ra.WordMaps) and isinstance(first, ra.WordAttention)
    assert first.weights is tiny_att.sentences[0].weights  # the same arrays, no copy
    plain = ra.WordAttention(first.text, first.words, first.kinds, first.weights)
    again = ra.Attention(sentences=(plain,), model="m", revision="r", versions={})
    assert isinstance(again[0], ra.WordMaps) and again[0].words == first.words
    assert type(first.without_maps()) is ra.WordAttention
    with pytest.raises(ra.InputError, match="maps were not kept"):
        ra.Attention(sentences=(first.without_maps(),), model="m", revision="r", versions={})
    with pytest.raises(ra.InputError, match="maps were not kept"):
        dataclasses.replace(first, weights=None)


def test_heatmap_is_a_figure_of_the_head(tiny_att):
    from matplotlib.figure import Figure

    fig = ra.heatmap(tiny_att[0], layer=2, head=3, focus="banco", sense="jardín")
    assert isinstance(fig, Figure)
    image = fig.axes[0].get_images()[0].get_array()
    np.testing.assert_array_equal(np.asarray(image), tiny_att[0].weights[1, 2])
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == list(tiny_att[0].words)
    assert fig._repr_png_().startswith(b"\x89PNG")
    with pytest.raises(ra.InputError, match="layer 4 is out of range: 1 to 3"):
        ra.heatmap(tiny_att[0], layer=4, head=1)
    with pytest.raises(ra.InputError, match="head 0 is out of range: 1 to 4"):
        ra.heatmap(tiny_att[0], layer=1, head=0)


def test_corpus_stats_equal_the_heads_command(tiny, tiny_model_dir, tmp_path):
    lines = ["me senté en el banco de mi jardín.", "", "fui al banco a sacar dinero.", "mi jardín, el banco!"]
    corpus = tmp_path / "lines.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = CliRunner().invoke(cli, ["heads", "--corpus", str(corpus), "--model", str(tiny_model_dir), "--out",
                                      str(tmp_path), "--quiet"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    stored = pd.read_csv(tmp_path / "results" / "corpus" / "lines" / "heads.csv")
    ours = ra.corpus_stats(tiny, lines, batch_size=2)
    assert list(ours.columns) == list(stored.columns)
    assert ours["label"].tolist() == stored["label"].tolist()
    numeric = [c for c in stored.columns if c != "label"]
    np.testing.assert_allclose(ours[numeric].astype(float), stored[numeric].astype(float), atol=5e-7)
    assert ours["n_sentences"].iloc[0] == 3
    with pytest.raises(ra.InputError, match="no sentences to analyse"):
        ra.corpus_stats(tiny, ["", "  "])


def test_repr_html_is_the_report_in_an_iframe(tiny_att):
    import html as html_module

    page = tiny_att._repr_html_()
    assert page.startswith("<iframe") and "srcdoc=" in page
    srcdoc = html_module.unescape(re.search(r'srcdoc="([^"]*)"', page).group(1))
    assert srcdoc == tiny_att.report_html()
    assert not EXTERNAL_URL.search(srcdoc)


@pytest.mark.slow
def test_the_quickstart_notebook_runs(needs_minilm):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    notebook = nbformat.read(ROOT / "examples" / "quickstart.ipynb", as_version=4)
    nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}
                            ).execute()
    cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count for cell in cells)
    assert not [out for cell in cells for out in cell.outputs if out.output_type == "error"]
    heatmap = next(cell for cell in cells if "ra.heatmap" in cell.source)
    assert any("image/png" in out.get("data", {}) for out in heatmap.outputs)
    report = cells[-1].outputs[-1]["data"]["text/html"]
    assert report.startswith("<iframe") and not EXTERNAL_URL.search(report)
    assert json.dumps(notebook.cells[-1].outputs).count("srcdoc") == 1


def test_results_holding_arrays_compare_as_objects_without_raising(tiny_loaded):
    """The frozen dataclasses compared their numpy fields with ==: `att == other` raised "the truth value of an
    array with more than one element is ambiguous", and hash() a TypeError."""
    att = ra.attend(tiny_loaded, ["fui al banco a sacar dinero."], focus="banco", sense=["dinero"])
    again = ra.attend(tiny_loaded, ["fui al banco a sacar dinero."], focus="banco", sense=["dinero"])
    assert att == att and att != again and att[0] == att[0] and att[0] != again[0]
    assert len({att, again, att[0], again[0]}) == 4  # hashable, by identity
