"""--measure and --compare-measures through the command line and the API; the report's rollout; MiniLM's numbers."""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from conftest import SPANISH, invoke
from real_attention import cli

TEXTS = ["Me senté en el banco de mi jardín.", "Fui al banco a sacar dinero."]



def config(tmp_path: Path) -> Path:
    path = tmp_path / "es.toml"
    path.write_text(SPANISH, encoding="utf-8")
    return path


def test_run_measure_norm_writes_its_own_folders(tiny_model_dir, tmp_path):
    ran = invoke("run", "--model", tiny_model_dir, "--config", config(tmp_path), "--out", tmp_path, "--measure", "norm")
    assert ran.exit_code == 0, ran.output
    assert "measure norm" in ran.output and "measure: norm (Norm-based" in ran.output
    assert not (tmp_path / "results" / "es").exists() and not (tmp_path / "figures" / "es").exists()
    results, figures = tmp_path / "results" / "es-norm", tmp_path / "figures" / "es-norm"
    summary = json.loads((results / "summary.json").read_text(encoding="utf-8"))
    assert summary["measure"] == "norm" and "Kobayashi" in summary["measure_text"]
    attention = pd.read_csv(results / "attention.csv", keep_default_na=False)
    assert attention.groupby(["sentence", "layer", "head", "query_index"])["weight"].sum().between(1 - 1e-5, 1 + 1e-5).all()
    rollout = pd.read_csv(results / "rollout.csv", keep_default_na=False)
    assert list(rollout.columns) == ["sentence", "layer", "query_index", "query", "key_index", "key", "weight"]
    assert rollout["layer"].between(1, 3).all() and len(rollout) == 3 * (11 * 11 + 9 * 9)
    assert rollout.groupby(["sentence", "layer", "query_index"])["weight"].sum().between(1 - 1e-5, 1 + 1e-5).all()
    assert {"rollout_s1.png", "rollout_s2.png", "overview.png", "report.html"} <= {p.name for p in figures.iterdir()}
    page = (figures / "report.html").read_text(encoding="utf-8")
    assert "Norm-based: each weight times the length" in page and 'id="rollout-view"' in page

    shown = invoke("show", "--out", tmp_path, "--layer", 1, "--head", 2, "--sentence", 1, "--measure", "norm")
    assert shown.exit_code == 0, shown.output
    assert (tmp_path / "figures" / "show" / "es-norm" / "head_L1H2_s1.png").is_file()
    missing = invoke("show", "--out", tmp_path, "--layer", 1, "--head", 2)
    assert missing.exit_code == 2
    assert missing.output.strip().splitlines()[-1] == (
        # the hint repeats the model of the run that is there (es-norm), so following it never downloads mBERT
        f"Error: no results in {tmp_path / 'results' / 'es'}; run `real-attention run --lang es --model "
        f"{tiny_model_dir} --out {tmp_path}` first")


def test_a_norm_run_is_byte_identical_when_repeated(tiny_model_dir, tmp_path):
    for out in ("a", "b"):
        ran = invoke("run", "--model", tiny_model_dir, "--config", config(tmp_path), "--out", tmp_path / out,
                     "--measure", "norm", "--no-figures", "--quiet")
        assert ran.exit_code == 0, ran.output
    for name in ("attention.csv", "rollout.csv", "heads.csv", "focus.csv", "summary.json"):
        a, b = ((tmp_path / out / "results" / "es-norm" / name).read_bytes() for out in ("a", "b"))
        assert a == b, name


def test_an_unknown_measure_is_a_usage_error(tiny_model_dir, tmp_path):
    refused = invoke("run", "--model", tiny_model_dir, "--out", tmp_path, "--measure", "size")
    assert refused.exit_code == 2 and "Invalid value for '--measure'" in refused.output
    assert not (tmp_path / "results").exists()


def test_compare_measures_puts_both_side_by_side(tiny_model_dir, tmp_path):
    ran = invoke("run", "--model", tiny_model_dir, "--config", config(tmp_path), "--out", tmp_path,
                 "--compare-measures")
    assert ran.exit_code == 0, ran.output
    heads = {m: pd.read_csv(tmp_path / "results" / f"es{suffix}" / "heads.csv")
             for m, suffix in (("weights", ""), ("norm", "-norm"))}
    compared = pd.read_csv(tmp_path / "results" / "es" / "measures.csv", keep_default_na=False)
    assert list(compared.columns) == ["layer", "head", "category_weights", "category_norm", "marker_head_weights",
                                      "marker_head_norm", "marker_share_weights", "marker_share_norm"]
    assert len(compared) == 12
    counts = {m: int(heads[m]["marker_head"].sum()) for m in heads}
    line = (f"marker heads: {counts['weights']} of 12 by weight, {counts['norm']} of 12 by norm; the focus word's "
            "share on markers is lower by norm in ")
    assert line in ran.output
    lower = int(re.search(re.escape(line) + r"(\d+) of 12 heads", ran.output).group(1))
    assert lower == int((compared.marker_share_norm < compared.marker_share_weights).sum())
    for m in heads:
        flags = [(column.astype(str).str.lower()) for column in (compared[f"marker_head_{m}"], heads[m]["marker_head"])]
        assert (flags[0] == flags[1]).all() and set(flags[0]) <= {"true", "false"}
        focus = pd.read_csv(tmp_path / "results" / f"es{'' if m == 'weights' else '-norm'}" / "focus.csv",
                            keep_default_na=False)
        share = focus.groupby(["layer", "head"])["marker_weight"].mean().to_numpy()
        np.testing.assert_allclose(compared[f"marker_share_{m}"], share, atol=2e-6)
    assert set(compared.category_weights) | set(compared.category_norm) <= {"sense", "marker", "previous", "next",
                                                                            "other"}
    assert (tmp_path / "figures" / "es" / "measures.png").is_file()
    assert not (tmp_path / "figures" / "es-norm" / "measures.png").exists()


def test_compare_figure_shows_both_measures_per_head(tiny_loaded):
    from real_attention.api.arguments import sentence_set
    from real_attention.outputs.compare import draw_compare
    from real_attention.engine.pipeline import analyse

    chosen = sentence_set(TEXTS, "banco", ["jardín", "dinero"], "es")
    by_weight, by_norm = analyse(tiny_loaded, chosen, measure="weights"), analyse(tiny_loaded, chosen, measure="norm")
    fig = draw_compare(by_weight, by_norm)
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 2
    for ax, result in zip(panels, (by_weight, by_norm)):
        np.testing.assert_allclose(ax.images[0].get_array(), result.report.marker_weight.mean(axis=0))
        assert f"marker heads (framed): {int(result.report.marker_head.sum())} of 12" in ax.get_title()
    assert "norm-based" in panels[1].get_title() and "attention weight" in panels[0].get_title()
    with pytest.raises(AssertionError):
        draw_compare(by_norm, by_weight)


def test_api_attend_takes_the_measure(tiny_loaded):
    import real_attention as ra

    weights = ra.attend(tiny_loaded, TEXTS)
    norm = ra.attend(tiny_loaded, TEXTS, measure="norm")
    assert norm.measure == "norm" and weights.measure == "weights" and "measure norm" in repr(norm)
    for a, b, rolled in zip(weights, norm, norm.rollout):
        assert a.words == b.words and not np.allclose(a.weights, b.weights, atol=1e-3)
        np.testing.assert_allclose(b.weights.sum(axis=-1), 1.0, atol=1e-5)
        assert rolled.shape == (3, len(b.words), len(b.words))
        np.testing.assert_allclose(rolled.sum(axis=-1), 1.0, atol=1e-5)
    focused = ra.attend(tiny_loaded, TEXTS, focus="banco", sense=["jardín", "dinero"], measure="norm")
    assert focused.summary()["measure"] == "norm" and len(focused.result.rollout) == 2
    assert focused.result.measure == "norm" and focused.rollout == focused.result.rollout
    with pytest.raises(ra.InputError, match="unknown measure 'size'"):
        ra.attend(tiny_loaded, TEXTS, measure="size")


def test_corpus_measure_norm(tiny_loaded, tiny_model_dir, tmp_path):
    import real_attention as ra
    from real_attention.statistics.sums import CorpusReader, corpus_sums
    from real_attention.engine.heads import STATISTICS, word_sums
    from real_attention.engine.pipeline import attend_with_sums

    lines = TEXTS + ["el banco de mi jardín ."]
    stream = iter([(line + "\n").encode() for line in lines])
    means = corpus_sums(tiny_loaded, CorpusReader(stream), batch_size=2, measure="norm").means()
    expected = word_sums(attend_with_sums(tiny_loaded, lines, measure="norm")[0]).means()
    weights = word_sums(attend_with_sums(tiny_loaded, lines)[0]).means()
    for name in STATISTICS:
        np.testing.assert_allclose(means[name], expected[name], atol=1e-6, err_msg=name)
    assert not np.allclose(expected["markers"], weights["markers"], atol=1e-3)
    frame = ra.corpus_stats(tiny_loaded, lines, measure="norm")
    np.testing.assert_allclose(frame["markers"], expected["markers"].reshape(-1), atol=1e-6)

    corpus = tmp_path / "tiny.txt"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for measure in ("norm", "weights"):
        for shard in ("1/2", "2/2"):
            pooled = invoke("heads", "--corpus", corpus, "--model", tiny_model_dir, "--out", tmp_path, "--quiet",
                            "--measure", measure, "--shard", shard)
            assert pooled.exit_code == 0, pooled.output
    folder = tmp_path / "results" / "corpus"
    summary = json.loads((folder / "tiny-norm-shard-1-of-2" / "summary.json").read_text(encoding="utf-8"))
    assert summary["measure"] == "norm"
    merged = invoke("merge", folder / "tiny-norm-shard-1-of-2", folder / "tiny-norm-shard-2-of-2", "--out", tmp_path)
    assert merged.exit_code == 0, merged.output
    merged_summary = json.loads((folder / "tiny-norm" / "summary.json").read_text(encoding="utf-8"))
    assert merged_summary["measure"] == "norm" and (tmp_path / "figures" / "corpus" / "tiny-norm").is_dir()
    heads = pd.read_csv(folder / "tiny-norm" / "heads.csv")
    np.testing.assert_allclose(heads["markers"], expected["markers"].reshape(-1), atol=1e-6)
    mixed = invoke("merge", folder / "tiny-norm-shard-1-of-2", folder / "tiny-shard-2-of-2", "--out", tmp_path / "x")
    assert mixed.exit_code == 2 and "differ in measure" in mixed.output


def test_figure_titles_name_the_norm_measure(tiny_loaded):
    from real_attention.outputs.plots import draw_heatmap, draw_rollout

    n = 4
    weights = np.full((n, n), 0.25, dtype=np.float32)
    words = ["[CLS]", "a", "b", "[SEP]"]
    common = dict(focus=1, model="m", revision="r", layer=0, head=0, sentence=0, text="a b")
    norm = draw_heatmap(weights, words, measure="norm", **common)
    plain = draw_heatmap(weights, words, **common)
    assert "norm-based" in norm.axes[0].get_title() and "norm-based" not in plain.axes[0].get_title()
    assert norm.axes[1].get_ylabel().startswith("norm-based")
    rows = np.array([[0.5, 0.2, 0.2, 0.1], [0.4, 0.3, 0.2, 0.1]], dtype=np.float32)
    fig = draw_rollout(rows, words, focus=1, sense=2, model="m", revision="r", sentence=0, text="a b",
                       measure="norm")
    np.testing.assert_allclose(fig.axes[0].images[0].get_array(), rows)
    assert "rollout of the norm-based maps" in fig.axes[0].get_title()
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["layer 1", "layer 2"]


def test_report_data_holds_the_measure_and_the_focus_rollout(tiny_loaded):
    import real_attention as ra
    from real_attention.outputs.report import report_data

    att = ra.attend(tiny_loaded, TEXTS, focus="banco", sense=["jardín", "dinero"], measure="norm")
    data = report_data(att.result, att.summary())
    assert data["measure"] == "norm" and data["measure_text"].startswith("Norm-based")
    for sentence, located, rolled in zip(data["sentences"], att.result.sentences, att.result.rollout):
        expected = np.rint(rolled[:, located.focus] * 10_000).reshape(-1)
        assert sentence["rollout"] == expected.astype(int).tolist()


def test_minilm_norm_lowers_the_marker_share_in_most_heads(minilm):
    """Kobayashi et al. (2020): the vectors of [CLS], [SEP] and punctuation are small, so the norm-based share
    of the focus word's attention on markers is lower than the raw share in most heads."""
    import real_attention as ra

    model = minilm
    share = {}
    for measure in ("weights", "norm"):
        att = ra.attend(model, TEXTS, focus="banco", sense=["jardín", "dinero"], measure=measure)
        share[measure] = att.result.report.marker_weight.mean(axis=0)  # (layers, heads)
    lower = int((share["norm"] < share["weights"]).sum())
    assert lower > share["norm"].size // 2, lower


def test_the_api_heatmap_names_the_measure_it_is_given(tiny_loaded):
    import real_attention as ra
    from real_attention.engine.measures import MEASURE_TITLE

    att = ra.attend(tiny_loaded, ["Fui al banco a sacar dinero."], measure="norm")
    figure = ra.heatmap(att[0], 1, 1, measure=att.measure)
    assert figure.axes[1].get_ylabel() == MEASURE_TITLE["norm"]  # the colour bar
    assert ra.heatmap(att[0], 1, 1).axes[1].get_ylabel() == MEASURE_TITLE["weights"]
    with pytest.raises(ra.InputError, match="unknown measure"):
        ra.heatmap(att[0], 1, 1, measure="nrom")


def test_compare_measures_with_a_measure_is_one_error(tmp_path, tiny_model_dir):
    result = CliRunner().invoke(cli, ["run", "--model", str(tiny_model_dir), "--compare-measures", "--measure", "norm",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == ["Error: compare_measures (--compare-measures) runs both measures; leave out measure (--measure) norm"]
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("args, message", [
    (["run", "--lang", "es-norm"], "Error: lang (--lang) 'es-norm' ends in '-norm', the ending of the folders of "
                                   "measure (--measure) norm; for that measure's results pass 'es' with measure "
                                   "(--measure) norm, or choose another name"),
    (["heads", "--corpus", "CORPUS", "--name", "wiki-norm"],
     "Error: name (--name) 'wiki-norm' ends in '-norm', the ending of the folders of measure (--measure) norm; "
     "for that measure's results pass 'wiki' with measure (--measure) norm, or choose another name"),
    (["heads", "--corpus", "CORPUS", "--name", "wiki-shard-1-of-2"],
     "Error: name (--name) 'wiki-shard-1-of-2' ends like the folder of a shard (-shard-i-of-N); "
     "choose another name"),
])
def test_a_name_that_ends_like_a_norm_folder_is_refused(tmp_path, tiny_model_dir, args, message):
    corpus = tmp_path / "lines.txt"
    corpus.write_text("Fui al banco.\n")
    args = [str(corpus) if arg == "CORPUS" else arg for arg in args]
    result = CliRunner().invoke(cli, [*args, "--model", str(tiny_model_dir), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1] == message
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.csv"))
