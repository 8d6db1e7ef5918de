"""Big runs: maps streamed to the tables batch by batch, CSV or Parquet, only the shown sentences' maps kept, the
report's sentence cap. Memory itself is measured in benchmarks/bench_big.py."""
import json
import re

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from real_attention.engine import pipeline
from real_attention.engine.pipeline import RUN_BATCH, analyse
from real_attention.engine.sentences import Sentence, SentenceSet
from real_attention.outputs.readback import ResultsError
from real_attention.outputs.report import report_data

from conftest import unpack_weights
from real_attention.outputs.tables import attention_frame, rollout_frame, summary

import real_attention as ra
from real_attention import cli

TEMPLATES = [("fui al banco a sacar dinero .", "dinero"), ("me senté en el banco de mi jardín .", "jardín"),
             ("el banco de mi jardín .", "jardín"), ("sacar dinero de el banco .", "dinero"),
             ("mi banco , mi dinero !", "dinero")]
COUNT = RUN_BATCH + 8  # two batches


def many_sentences(count: int = COUNT) -> SentenceSet:
    return SentenceSet(lang="es", focus="banco",
                       sentences=tuple(Sentence(*TEMPLATES[i % len(TEMPLATES)]) for i in range(count)))


def config_text(count: int = COUNT) -> str:
    lines = ['[es]', 'focus = "banco"']
    for i in range(count):
        text, sense = TEMPLATES[i % len(TEMPLATES)]
        lines += ["[[es.sentences]]", f'text = "{text}"', f'sense = "{sense}"']
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def full(tiny_loaded):
    return analyse(tiny_loaded, many_sentences())


def test_a_streamed_run_keeps_only_the_first_maps_and_labels_the_same(tiny_loaded, full):
    streamed = analyse(tiny_loaded, many_sentences(), keep_maps=3)
    assert (full.maps_kept, streamed.maps_kept) == (COUNT, 3)
    assert all(s.attention.weights is None for s in streamed.sentences[3:])
    assert len(streamed.rollout) == 3
    for name in ("top_key", "top_weight", "sense_head", "marker_head", "prev", "entropy"):
        np.testing.assert_array_equal(getattr(streamed.report, name), getattr(full.report, name))
    assert summary(streamed) == summary(full)


def test_each_sentence_is_handed_over_as_its_batch_ends(tiny_loaded, monkeypatch):
    """Streaming, not collecting: sentence 1 reaches on_sentence before the second batch runs."""
    calls, seen = [], {}
    forward = pipeline._attend_batch

    def counted(*args, **kwargs):
        calls.append(1)
        return forward(*args, **kwargs)

    monkeypatch.setattr(pipeline, "_attend_batch", counted)
    analyse(tiny_loaded, many_sentences(), keep_maps=0,
            on_sentence=lambda number, sentence, rolled: seen.setdefault(number, len(calls)))
    assert len(calls) == 2
    assert seen[1] == 1 and seen[RUN_BATCH] == 1 and seen[RUN_BATCH + 1] == 2
    assert sorted(seen) == list(range(1, COUNT + 1))


def run(model_dir, out, config, *extra):
    result = CliRunner().invoke(cli, ["run", "--model", str(model_dir), "--config", str(config), "--out", str(out),
                                      "--quiet", "--no-figures", *extra])
    assert result.exit_code == 0, result.output
    return out / "results" / "es"


@pytest.fixture(scope="module")
def runs(tiny_model_dir, tmp_path_factory):
    folder = tmp_path_factory.mktemp("big")
    config = folder / "many.toml"
    config.write_text(config_text(), encoding="utf-8")
    return {fmt: run(tiny_model_dir, folder / fmt, config, "--table-format", fmt, "--report-sentences", "5")
            for fmt in ("csv", "parquet")}


def test_the_streamed_csv_is_the_table_of_every_map(runs, full):
    """attention.csv and rollout.csv of a two-batch run hold the rows of every sentence, as the whole table."""
    folder = runs["csv"]
    expected = attention_frame([s.attention for s in full.sentences])
    got = ra.read_attention(folder)
    pd.testing.assert_frame_equal(got.drop(columns="weight"), expected.drop(columns="weight"), check_dtype=False)
    np.testing.assert_allclose(got["weight"], expected["weight"], rtol=0, atol=5e-7)
    rollout = ra.read_attention(folder / "rollout.csv")
    np.testing.assert_allclose(rollout["weight"], rollout_frame(full)["weight"], rtol=0, atol=5e-7)
    assert rollout["sentence"].max() == COUNT


def test_parquet_has_typed_columns_and_reads_back_as_the_csv(runs):
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.read_schema(runs["parquet"] / "attention.parquet")
    assert {name: str(schema.field(name).type) for name in schema.names} == {
        "sentence": "int32", "layer": "int16", "head": "int16", "query_index": "int16", "key_index": "int16",
        "query": "dictionary<values=string, indices=int32, ordered=0>",
        "key": "dictionary<values=string, indices=int32, ordered=0>", "weight": "float"}
    assert pa.types.is_dictionary(schema.field("query").type)
    assert not (runs["parquet"] / "attention.csv").exists()
    csv, parquet = ra.read_attention(runs["csv"]), ra.read_attention(runs["parquet"])
    assert list(parquet.columns) == list(csv.columns) and dict(parquet.dtypes) == dict(csv.dtypes)
    pd.testing.assert_frame_equal(parquet, csv, check_exact=False, rtol=0, atol=5.1e-7)
    # the other files are the same, but for summary.json's records of the tables it names
    for name in ("focus.csv", "heads.csv"):
        assert (runs["csv"] / name).read_bytes() == (runs["parquet"] / name).read_bytes(), name
    summaries = [json.loads((runs[fmt] / "summary.json").read_text()) for fmt in ("csv", "parquet")]
    assert [sorted(s.pop("tables")) for s in summaries] == [["attention.csv", "rollout.csv"],
                                                            ["attention.parquet", "rollout.parquet"]]
    assert summaries[0] == summaries[1]


def test_parquet_is_deterministic(tiny_model_dir, runs, tmp_path):
    config = tmp_path / "many.toml"
    config.write_text(config_text(), encoding="utf-8")
    again = run(tiny_model_dir, tmp_path / "again", config, "--table-format", "parquet")
    for name in ("attention.parquet", "rollout.parquet"):
        assert (again / name).read_bytes() == (runs["parquet"] / name).read_bytes()


def test_show_reads_a_parquet_run(runs, tmp_path):
    out = runs["parquet"].parent.parent
    result = CliRunner().invoke(cli, ["show", "--out", str(out), "--layer", "1", "--head", "2", "--sentence",
                                      str(COUNT), "--quiet"])
    assert result.exit_code == 0, result.output


def test_read_attention_names_what_is_missing(tmp_path):
    with pytest.raises(ResultsError, match="no attention.csv or attention.parquet in"):
        ra.read_attention(tmp_path)
    assert "read_attention" in dir(ra)


def test_the_report_holds_the_first_sentences_and_says_so(runs):
    page = (runs["csv"].parent.parent / "figures" / "es" / "report.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page,
                                re.DOTALL).group(1).replace("<\\/", "</"))
    assert len(data["sentences"]) == 5 and data["sentence_count"] == COUNT
    assert f"This page holds the first 5 of the run&#x27;s {COUNT} sentences" in page
    assert "--report-sentences N" in page
    assert len(unpack_weights(data["sentences"][4]["weights"])) > 0


def test_a_small_run_has_no_note(full):
    data = report_data(full, summary(full), max_sentences=None)
    assert data["sentences_note"] is None and len(data["sentences"]) == COUNT
    capped = report_data(full, summary(full))
    assert len(capped["sentences"]) == COUNT  # under the default cap of 200


def test_report_sentences_must_be_positive(tiny_model_dir, tmp_path):
    result = CliRunner().invoke(cli, ["run", "--model", str(tiny_model_dir), "--report-sentences", "0",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 2 and "--report-sentences" in result.output


def test_ra_run_takes_the_table_format_and_the_report_cap(tiny_model_dir, tmp_path):
    from real_attention.engine.errors import InputError

    config = tmp_path / "many.toml"
    config.write_text(config_text(), encoding="utf-8")
    output = ra.run(config=config, model=str(tiny_model_dir), out=tmp_path, figures=False, table_format="parquet",
                    report_sentences=5)
    (measure_run,) = output.runs
    assert (measure_run.results_dir / "attention.parquet").is_file()
    assert measure_run.result.maps_kept == 5
    with pytest.raises(InputError, match="read them all with ra.read_attention"):
        _ = measure_run.attention
    assert len(ra.read_attention(measure_run.results_dir)["sentence"].unique()) == COUNT
    for bad in ({"report_sentences": 0}, {"table_format": "xlsx"}):
        with pytest.raises(InputError):
            ra.run(config=config, model=str(tiny_model_dir), out=tmp_path / "bad", figures=False, **bad)


def test_a_small_run_without_figures_or_report_keeps_its_maps(tiny_model_dir, tmp_path):
    """RunOutput.attention raised for every run with figures=False, report=False: it kept the maps of 0 sentences."""
    config = tmp_path / "few.toml"
    config.write_text(config_text(), encoding="utf-8")
    output = ra.run(config=config, model=str(tiny_model_dir), out=tmp_path, figures=False, report=False,
                    report_sentences=COUNT)
    assert output.runs[0].result.maps_kept == COUNT
    assert len(output.attention) == COUNT
