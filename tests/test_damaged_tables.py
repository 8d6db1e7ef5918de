"""A table read back is the table `run` wrote, or one error naming the file and saying it is damaged (issue 27,
items 1 to 3): the issue's damage recipes, on results with summary.json's table records and on older results
without them; hand-made damage that still parses; and undamaged tables read as before."""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from conftest import SPANISH, as_older_run
from real_attention import cli
from real_attention.engine.errors import InputError
from real_attention.outputs import tables
from real_attention.outputs.readback import load_run

import real_attention as ra

pq = pytest.importorskip("pyarrow.parquet")


@pytest.fixture(scope="module")
def written(tiny_model_dir, tmp_path_factory) -> dict[str, Path]:
    """One run per table format of the tiny model: {"csv": OUT, "parquet": OUT}; copy before damaging."""
    folder = tmp_path_factory.mktemp("written")
    config = folder / "c.toml"
    config.write_text(SPANISH, encoding="utf-8")
    runs = {}
    for fmt in ("csv", "parquet"):
        out = folder / fmt
        result = CliRunner().invoke(cli, ["run", "--config", str(config), "--model", str(tiny_model_dir), "--out",
                                          str(out), "--no-figures", "--no-report", "--quiet", "--table-format", fmt])
        assert result.exit_code == 0, result.output
        runs[fmt] = out
    return runs


def copy_of(written: dict[str, Path], fmt: str, tmp_path: Path, *, old: bool = False) -> Path:
    """A copy of the run's --out; old=True: its summary.json without the table records, as before they were."""
    out = tmp_path / f"out-{fmt}"
    shutil.copytree(written[fmt], out)
    if old:
        path = out / "results" / "es" / "summary.json"
        data = json.loads(path.read_text(encoding="utf-8"))
        as_older_run(data)
        path.write_text(json.dumps(data), encoding="utf-8")
    return out


# --- the recipes ----------------------------------------------------------------------------------------


def xor_middle(path: Path) -> None:
    """XOR 0xFF on every 7th byte of a 400-byte range in the middle of the file."""
    data = bytearray(path.read_bytes())
    start = len(data) // 2 - 200
    for index in range(start, start + 400, 7):
        data[index] ^= 0xFF
    path.write_bytes(bytes(data))


def truncate_half(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def empty(path: Path) -> None:
    path.write_bytes(b"")


def mislabel(path: Path) -> None:
    """A CSV under the Parquet name."""
    path.write_bytes(b"sentence,layer,head,query_index,query,key_index,key,weight\n1,1,1,0,a,0,a,1.0\n")


def random_bytes(path: Path) -> None:
    generator = random.Random(0)
    path.write_bytes(bytes(generator.randrange(256) for _ in range(4000)))


def rename_header(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b"key_index", b"key_idx", 1))


def cut_summary(path: Path) -> None:
    summary = path.with_name("summary.json")
    data = summary.read_bytes()
    summary.write_bytes(data[:len(data) // 2])


RECIPES = [("parquet", xor_middle), ("csv", truncate_half), ("parquet", truncate_half), ("parquet", empty),
           ("parquet", mislabel), ("csv", xor_middle), ("csv", random_bytes), ("csv", rename_header),
           ("csv", cut_summary), ("parquet", cut_summary)]


def check_refused(out: Path, damaged_file: Path) -> str:
    """show: one `Error:` line naming the file and saying it is damaged, exit 2, no traceback; the API:
    InputError with the same message."""
    result = CliRunner().invoke(cli, ["show", "--layer", "3", "--head", "1", "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "hit a bug" not in result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"Error: {damaged_file} is damaged: "), line
    with pytest.raises(InputError, match=f"^{damaged_file} is damaged: "):
        ra.read_attention(out / "results" / "es")
    assert not (out / "figures").exists()
    return line


@pytest.mark.parametrize("old", [False, True], ids=["recorded", "older-run"])
@pytest.mark.parametrize("fmt, damage", RECIPES, ids=[f"{f}-{d.__name__}" for f, d in RECIPES])
def test_a_damaged_table_or_summary_is_one_error_naming_the_file(fmt, damage, old, written, tmp_path):
    out = copy_of(written, fmt, tmp_path, old=old)
    table = out / "results" / "es" / f"attention.{fmt}"
    damage(table)
    named = table.with_name("summary.json") if damage is cut_summary else table
    line = check_refused(out, named)
    assert line.startswith(f"Error: {named} is damaged: ") and len(line) > len(f"Error: {named} is damaged: ")


def test_a_recorded_table_whose_bytes_changed_is_refused_even_if_it_parses(written, tmp_path):
    out = copy_of(written, "csv", tmp_path)
    table = out / "results" / "es" / "attention.csv"
    lines = table.read_text(encoding="utf-8").splitlines(keepends=True)
    first, second = lines[1].rsplit(",", 1), lines[2].rsplit(",", 1)  # move 0.000001 between two cells of a row
    lines[1] = f"{first[0]},{float(first[1]) + 1e-6:.6f}\n"
    lines[2] = f"{second[0]},{float(second[1]) - 1e-6:.6f}\n"
    table.write_text("".join(lines), encoding="utf-8")
    check_refused(out, table)
    # without the record the same table passes every structural check: it is a possible table
    copy = copy_of(written, "csv", tmp_path / "old", old=True)
    shutil.copy(table, copy / "results" / "es" / "attention.csv")
    assert len(ra.read_attention(copy / "results" / "es")) == len(ra.read_attention(written["csv"] / "results" / "es"))


def test_a_wrong_record_in_summary_is_named(written, tmp_path):
    out = copy_of(written, "parquet", tmp_path)
    path = out / "results" / "es" / "summary.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["tables"]["attention.parquet"]["rows"] += 1
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError, match=r"attention.parquet is damaged: it has \d+ rows, but summary.json records"):
        ra.read_attention(out / "results" / "es" / "attention.parquet")
    data["tables"]["attention.parquet"] = "abc"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(InputError, match=r"summary.json is damaged: its record of attention.parquet is 'abc'"):
        ra.read_attention(out / "results" / "es")


# --- damage that still parses: the structural checks of older runs ---------------------------------------------


def frame_of(written) -> pd.DataFrame:
    return ra.read_attention(written["csv"] / "results" / "es")


def edit_weight(frame, row, value):
    frame.loc[row, "weight"] = value
    return frame


EDITS = {
    "NaN weight": (lambda f: edit_weight(f, 5, np.nan), "row 6 has weight nan, not a finite number"),
    "huge weight": (lambda f: edit_weight(f, 7, 4e38), "row 8 has weight 4e+38, outside 0 to 1"),
    "negative weight": (lambda f: edit_weight(f, 7, -763.0), "row 8 has weight -763, outside 0 to 1"),
    "row sum": (lambda f: edit_weight(f, 0, f.loc[0, "weight"] + 0.01),
                "the weights of sentence 1, layer 1, head 1, query 0 sum to 1.01, not 1 (1 of 240 rows do not)"),
    "missing row": (lambda f: f.drop(index=3).reset_index(drop=True), "sentence 1, layer 1, head 1 has"),
    "duplicated row": (lambda f: pd.concat([f.iloc[:4], f.iloc[3:]], ignore_index=True), "sentence 1, layer 1, head 1 has"),
    "a sentence short": (lambda f: f[f.sentence == 1].reset_index(drop=True), "it holds 12 (sentence, layer and head) blocks, "
                         "but the run has 24 (2 sentences x 3 layers x 4 heads)"),
    "swapped blocks": (lambda f: pd.concat([f[(f.sentence == 1) & (f.layer == 2)], f[(f.sentence == 1) & (f.layer == 1)],
                                            f[(f.sentence == 2) | (f.layer == 3)].sort_values("sentence", kind="stable")],
                                           ignore_index=True),
                       "block 1 is sentence 1, layer 2, head 1; expected sentence 1, layer 1, head 1"),
    "wrong word": (lambda f: f.assign(key=np.where(np.arange(len(f)) == 40, "banco", f.key)), "row 41 names unit"),
    "negative index": (lambda f: f.assign(sentence=f.sentence - 1), "its column 'sentence' holds 0; it counts from 1"),
}


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("case", sorted(EDITS))
def test_a_table_that_parses_but_cannot_be_a_run_is_refused(case, fmt, written, tmp_path):
    edit, message = EDITS[case]
    if case == "NaN weight" and fmt == "csv":  # a CSV cell "nan" does not even parse as a weight
        message = "a line is not a row of numbers and words as written"
    out = copy_of(written, fmt, tmp_path, old=True)
    frame = edit(frame_of(written).copy())
    path = out / "results" / "es" / f"attention.{fmt}"
    if fmt == "csv":
        frame.to_csv(path, index=False, float_format=tables.FLOAT_FORMAT, lineterminator="\n", na_rep="nan")
    else:
        pq.write_table(__import__("pyarrow").Table.from_pandas(frame, preserve_index=False), path)
    with pytest.raises(InputError) as caught:
        load_run(out, "es")
    assert str(caught.value).startswith(f"{path} is damaged: {message}"), str(caught.value)


def test_rollout_tables_are_checked_too(written, tmp_path):
    out = copy_of(written, "csv", tmp_path)
    path = out / "results" / "es" / "rollout.csv"
    assert len(ra.read_attention(path)) == json.loads((path.with_name("summary.json")).read_text())["tables"][
        "rollout.csv"]["rows"]
    xor_middle(path)
    with pytest.raises(InputError, match="rollout.csv is damaged"):
        ra.read_attention(path)


# --- undamaged: read as before ----------------------------------------------------------------------------------


@pytest.mark.parametrize("old", [False, True], ids=["recorded", "older-run"])
def test_undamaged_tables_read_the_same_in_both_formats(old, written, tmp_path):
    from real_attention.outputs import table_checks  # new in issue 27

    csv = ra.read_attention(copy_of(written, "csv", tmp_path, old=old) / "results" / "es")
    parquet = ra.read_attention(copy_of(written, "parquet", tmp_path, old=old) / "results" / "es")
    assert list(csv.columns) == tables.ATTENTION_COLUMNS and csv.dtypes.equals(parquet.dtypes)
    exact = [*table_checks.INTEGER_COLUMNS, "query", "key"]
    assert csv[exact].equals(parquet[exact])
    assert np.abs(csv.weight - parquet.weight).max() < 1e-6


def test_summary_records_each_table_as_written(written):
    from real_attention.outputs import table_checks  # new in issue 27

    for fmt in ("csv", "parquet"):
        folder = written[fmt] / "results" / "es"
        records = json.loads((folder / "summary.json").read_text())["tables"]
        assert sorted(records) == [f"attention.{fmt}", f"rollout.{fmt}"]
        for name, record in records.items():
            assert record["sha256"] == table_checks.file_sha256(folder / name)
            assert record["rows"] == len(ra.read_attention(folder / name))


def test_the_checks_columns_are_the_tables():
    from real_attention.outputs import table_checks  # new in issue 27

    assert table_checks.ATTENTION_COLUMNS == tables.ATTENTION_COLUMNS
    assert table_checks.ROLLOUT_COLUMNS == tables.ROLLOUT_COLUMNS


def test_a_norm_row_of_zeros_is_a_row_the_norm_measure_writes(written, tmp_path):
    from real_attention.outputs import table_checks  # new in issue 27

    frame = frame_of(written)
    n = int(frame.query_index[(frame.sentence == 1)].max()) + 1
    zero = frame.copy()
    zero.loc[:n - 1, "weight"] = 0.0  # sentence 1, layer 1, head 1, query 0: every key adds nothing
    summary = {"measure": "norm", "sentences": [{}, {}], "layers": 3, "heads_per_layer": 4}
    table_checks.check_structure(Path("attention.csv"), zero, summary)
    with pytest.raises(InputError, match="sum to 0"):
        table_checks.check_structure(Path("attention.csv"), zero, {**summary, "measure": "weights"})


# --- the exact case, on MiniLM ----------------------------------------------------------------------------


@pytest.mark.slow
def test_minilm_parquet_with_flipped_bytes_is_refused_by_show_and_the_api(needs_minilm, tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(SPANISH, encoding="utf-8")
    result = CliRunner().invoke(cli, ["run", "--config", str(config), "--model", "minilm", "--out", str(tmp_path),
                                      "--no-figures", "--no-report", "--quiet", "--table-format", "parquet"])
    assert result.exit_code == 0, result.output
    table = tmp_path / "results" / "es" / "attention.parquet"
    assert len(ra.read_attention(table)) > 0
    xor_middle(table)
    result = CliRunner().invoke(cli, ["show", "--layer", "6", "--head", "1", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"Error: {table} is damaged: "), line
    with pytest.raises(InputError, match="is damaged"):
        ra.read_attention(tmp_path / "results" / "es")


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_results_folder_without_its_summary_is_not_read_unchecked(fmt, written, tmp_path):
    """Without summary.json a sentence cut out of the table went unseen: ra.read_attention(folder) returned the
    rest. The folder form needs it; the table file itself is still read with its structure checked."""
    import real_attention as ra

    folder = copy_of(written, fmt, tmp_path) / "results" / "es"
    (folder / "summary.json").unlink()
    with pytest.raises(ra.InputError, match=f"no summary.json in {folder}, which `real-attention run` writes"):
        ra.read_attention(folder)
    assert len(ra.read_attention(folder / f"attention.{fmt}")) > 0


def test_a_huge_damaged_cell_is_quoted_short_in_the_one_error_line(tmp_path):
    # the error quoted the cell whole: a 5 MB "line"
    from real_attention.outputs.table_checks import quoted

    assert quoted("x" * 5_000_000) == "'" + "x" * 39 + "..."
    assert quoted("banco") == "'banco'" and len(quoted(list(range(10 ** 5)))) == 43
