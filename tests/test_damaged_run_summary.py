"""A hand-edited summary.json is one `Error:` line naming it and the field, never a traceback: the fields `show`
draws from (word positions, the lesson's heads, revision, measure) are checked as the run is read back, and a
"tables" record that is there but malformed never turns the sha256 check of the tables off."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import SPANISH, as_older_run
from real_attention import cli
from real_attention.engine.errors import InputError

import real_attention as ra

pytest.importorskip("pyarrow.parquet")

FORMATS = ("csv", "parquet")


@pytest.fixture(scope="module")
def written(tiny_model_dir, tmp_path_factory) -> dict[str, Path]:
    """One run per table format of the tiny model (3 layers, 4 heads): {"csv": OUT, "parquet": OUT}; copy first."""
    folder = tmp_path_factory.mktemp("written")
    config = folder / "c.toml"
    config.write_text(SPANISH, encoding="utf-8")
    runs = {}
    for fmt in FORMATS:
        out = folder / fmt
        result = CliRunner().invoke(cli, ["run", "--config", str(config), "--model", str(tiny_model_dir), "--out",
                                          str(out), "--no-figures", "--no-report", "--quiet", "--table-format", fmt])
        assert result.exit_code == 0, result.output
        runs[fmt] = out
    return runs


def edited_copy(written: dict[str, Path], fmt: str, tmp_path: Path, edit) -> Path:
    """A copy of the run's --out whose summary.json went through edit(data) (which changes data in place)."""
    out = tmp_path / f"out-{fmt}"
    shutil.copytree(written[fmt], out)
    path = out / "results" / "es" / "summary.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    return out


def show(out: Path):
    return CliRunner().invoke(cli, ["show", "--lang", "es", "--out", str(out), "--layer", "1", "--head", "4",
                                    "--sentence", "1"])


def assert_refused(out: Path, field: str) -> str:
    """show: exit 2, one `Error:` line naming summary.json as damaged and the field, no traceback, nothing new
    under figures/."""
    result = show(out)
    summary = out / "results" / "es" / "summary.json"
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "hit a bug" not in result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"Error: {summary} is damaged: its field {field!r} "), line
    assert not (out / "figures").exists()
    return line


def set_position(key: str, value):
    return lambda data: data["word_positions"][0].__setitem__(key, value)


def set_field(key: str, value):
    return lambda data: data.__setitem__(key, value)


DAMAGE = {  # id: (edit, the field named)
    "focus-index-999": (set_position("focus_index", 999), "word_positions"),
    "sense-index-50": (set_position("sense_index", 50), "word_positions"),
    "focus-index-missing": (lambda data: data["word_positions"][0].pop("focus_index"), "word_positions"),
    "position-empty": (lambda data: data["word_positions"].__setitem__(0, {}), "word_positions"),
    "best-head-a-list": (set_field("best_sense_head", [1, 4]), "best_sense_head"),
    "prev-head-a-string": (set_field("prev_head", "L1H3"), "prev_head"),
    "next-head-out-of-range": (set_field("next_head", {"layer": 4, "head": 1, "score": 0.5}), "next_head"),
    "revision-null": (set_field("revision", None), "revision"),
    "model-a-number": (set_field("model", 7), "model"),
    "measure-bogus": (set_field("measure", "bogus"), "measure"),
    "causal-a-string": (set_field("causal", "no"), "causal"),
}


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_summary_field_is_one_error_line_naming_it(case, fmt, written, tmp_path):
    edit, field = DAMAGE[case]
    assert_refused(edited_copy(written, fmt, tmp_path, edit), field)


def test_a_word_position_is_checked_against_its_own_sentence(written, tmp_path):
    """Sentence 2 is shorter than sentence 1: an index that fits sentence 1 is still outside sentence 2."""
    units = ra.read_attention(written["csv"] / "results" / "es").groupby("sentence")["query_index"].max() + 1
    assert units[2] < units[1]
    out = edited_copy(written, "csv", tmp_path, lambda data: data["word_positions"][1].__setitem__(
        "sense_index", int(units[2])))
    line = assert_refused(out, "word_positions")
    assert f"sentence 2 sense_index {units[2]}, but the sentence has {units[2]} units" in line


def drop_attention_record(data: dict) -> None:
    data["tables"] = {name: record for name, record in data["tables"].items() if not name.startswith("attention.")}


TABLES_DAMAGE = {"empty": set_field("tables", {}), "a-string": set_field("tables", "x"),
                 "a-list": set_field("tables", [1]), "null": set_field("tables", None),
                 "no-attention-record": drop_attention_record}


def nudge_weights(original: Path, table: Path) -> None:
    """`original` into `table` with 1e-6 moved between two cells of the first row: still a table `run` could write,
    but not the bytes it did."""
    frame = ra.read_attention(original)
    frame.loc[0, "weight"] += 1e-6
    frame.loc[1, "weight"] -= 1e-6
    if table.suffix == ".parquet":
        frame.to_parquet(table, index=False)
    else:
        frame.to_csv(table, index=False, float_format="%.6f")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", list(TABLES_DAMAGE))
def test_a_malformed_tables_record_keeps_the_sha256_check_on(case, fmt, written, tmp_path):
    out = edited_copy(written, fmt, tmp_path, TABLES_DAMAGE[case])
    name = Path("results") / "es" / f"attention.{fmt}"
    nudge_weights(written[fmt] / name, out / name)
    line = assert_refused(out, "tables")
    with pytest.raises(InputError) as caught:  # the API refuses the table the same way
        ra.read_attention(out / "results" / "es")
    assert line == f"Error: {caught.value}"


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_summary_without_tables_is_an_older_run_and_still_shows(fmt, written, tmp_path):
    """Only a missing "tables" means a run older than the record; a run without the optional fields of later
    versions (measure, causal, the lesson's heads, word positions) still shows, and null heads are heads `run`
    writes (no sense head)."""
    def older(data: dict) -> None:
        as_older_run(data)
        for name in ("measure", "causal", "prev_head", "next_head", "first_head",
                     "strongest_markers_head", "word_positions"):
            del data[name]
        data["best_sense_head"] = None

    out = edited_copy(written, fmt, tmp_path, older)
    result = show(out)
    assert result.exit_code == 0, result.output
    assert (out / "figures" / "show" / "es" / "head_L1H4_s1.png").is_file()


def test_an_older_run_whose_csv_was_cut_short_is_refused(written, tmp_path):
    """Without the sha256 record, a CSV cut inside its last number (0.028221 -> 0.0282) still sums close to 1 in
    its row: its missing line end is what gives it away."""
    def older(data: dict) -> None:
        as_older_run(data)

    out = edited_copy(written, "csv", tmp_path, older)
    table = out / "results" / "es" / "attention.csv"
    table.write_bytes(table.read_bytes()[:-3])
    result = show(out)
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert f"{table} is damaged" in result.output and "its last line has no line end" in result.output


def test_null_word_positions_are_allowed(written, tmp_path):
    out = edited_copy(written, "csv", tmp_path, set_position("sense_index", None))
    assert show(out).exit_code == 0


def test_a_word_position_at_another_word_is_refused(written, tmp_path):
    """An index inside the sentence but at another word drew that word as the focus, with exit 0."""
    focus = json.loads((written["csv"] / "results" / "es" / "summary.json").read_text())["word_positions"][0]
    other = 1 if focus["focus_index"] != 1 else 2
    line = assert_refused(edited_copy(written, "csv", tmp_path, set_position("focus_index", other)), "word_positions")
    assert f"sentence 1 focus_index {other}, the word " in line and "not 'banco'" in line


def test_a_sentence_text_without_its_words_is_refused(written, tmp_path):
    def edit(data):
        data["sentences"][0]["text"] = "Otra frase distinta."

    result = show(edited_copy(written, "csv", tmp_path, edit))
    assert result.exit_code == 2
    assert "sentence 1's text 'Otra frase distinta.' does not hold its focus word 'banco'" in result.output


@pytest.mark.parametrize("field, value", [("layers", 5), ("heads_per_layer", 5)])
def test_a_shape_that_does_not_fit_a_verified_table_names_summary_json(field, value, written, tmp_path):
    out = edited_copy(written, "csv", tmp_path, set_field(field, value))
    summary = out / "results" / "es" / "summary.json"
    for reader in (lambda: show(out), lambda: ra.read_attention(out / "results" / "es")):
        try:
            result = reader()
            text = result.output
        except ra.InputError as error:
            text = f"Error: {error}"
        assert f"{summary} is damaged" in text and "whose bytes match the sha256 it records" in text, text


@pytest.mark.parametrize("name", ["heads.csv", "focus.csv", "summary.json"])
def test_read_attention_says_which_tables_it_reads(name, written):
    with pytest.raises(ra.InputError, match="is not an attention or rollout table"):
        ra.read_attention(written["csv"] / "results" / "es" / name)


def test_show_with_a_folder_in_place_of_a_figure_is_one_error_and_leaves_the_others(written, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(written["csv"], out)
    assert CliRunner().invoke(cli, ["show", "--lang", "es", "--out", str(out), "--layer", "1", "--head", "4",
                                    "--format", "svg", "--quiet"]).exit_code == 0
    folder = out / "figures" / "show" / "es"
    first = (folder / "head_L1H4_s1.svg").read_bytes()
    (folder / "head_L1H4_s1.svg").write_bytes(b"kept")  # a later show must not rewrite it if it fails
    (folder / "head_L1H4_s2.svg").unlink()
    (folder / "head_L1H4_s2.svg").mkdir()
    result = CliRunner().invoke(cli, ["show", "--lang", "es", "--out", str(out), "--layer", "1", "--head", "4",
                                      "--format", "svg"])
    assert result.exit_code != 0 and "Traceback" not in result.output and "hit a bug" not in result.output
    (line,) = result.output.strip().splitlines()
    assert line.startswith(f"Error: cannot write {folder / 'head_L1H4_s2.svg'}: a folder"), line
    assert (folder / "head_L1H4_s1.svg").read_bytes() == b"kept" and first != b"kept"
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in folder.iterdir()
                                                              if not p.name.startswith("."))


@pytest.mark.parametrize("blocker", ["file", "link", "dangling link", "link above"])
def test_show_refuses_a_file_or_a_link_where_its_folder_goes(blocker, written, tmp_path):
    """figures/show/es as a plain file or a link (to a folder outside --out, or to nothing), or figures/show as a
    link: one Error line, and nothing is written through the link."""
    out, outside = tmp_path / "out", tmp_path / "outside"
    shutil.copytree(written["csv"], out)
    outside.mkdir()
    shows = out / "figures" / "show"
    shows.mkdir(parents=True)
    place = {"file": shows / "es", "link": shows / "es", "dangling link": shows / "es", "link above": shows}[blocker]
    if place == shows:
        shows.rmdir()
    if blocker == "file":
        place.write_text("mine")
    else:
        place.symlink_to(tmp_path / "nowhere" if blocker == "dangling link" else outside, target_is_directory=True)
    result = CliRunner().invoke(cli, ["show", "--lang", "es", "--out", str(out), "--layer", "1", "--head", "4"])
    assert result.exit_code != 0 and "Traceback" not in result.output and "hit a bug" not in result.output
    (line,) = result.output.strip().splitlines()
    what = "a file, not a folder" if blocker == "file" else "a symbolic link"
    assert line == f"Error: {place} is {what}" + line.split(what, 1)[1], line
    assert list(outside.iterdir()) == [] and not (tmp_path / "nowhere").exists()
    if blocker == "file":
        assert place.read_text() == "mine"


def test_show_with_an_index_out_of_range_writes_no_folder(written, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(written["csv"], out)
    result = CliRunner().invoke(cli, ["show", "--lang", "es", "--out", str(out), "--layer", "99", "--head", "1"])
    assert result.exit_code == 2 and "--layer 99 is out of range" in result.output
    assert not (out / "figures" / "show").exists()


# --- a summary.json that no run wrote with its table (a review's findings) ----------------------------------------


def refused_line(out: Path) -> str:
    result = show(out)
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    (line,) = result.output.strip().splitlines()
    assert not (out / "figures").exists()
    return line


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_removed_tables_record_of_a_newer_run_is_refused(fmt, written, tmp_path):
    """A run that records the real-attention version records its tables: deleting "tables" alone would switch the
    sha256 off and let a changed table be read. (`device` is no sign: a few development versions wrote it alone.)"""
    out = edited_copy(written, fmt, tmp_path, lambda data: data.pop("tables"))
    name = Path("results") / "es" / f"attention.{fmt}"
    nudge_weights(written[fmt] / name, out / name)
    line = refused_line(out)
    assert line.startswith(f"Error: {out / 'results' / 'es' / 'summary.json'} is damaged: it has no field 'tables', "
                           "which every run that records the real-attention version"), line
    with pytest.raises(InputError, match="no field 'tables'"):
        ra.read_attention(out / "results" / "es")
    older = edited_copy(written, fmt, tmp_path / "older", lambda data: data.pop("tables") and data["versions"].pop(
        "real-attention"))
    assert show(older).exit_code == 0  # as such a run wrote it: device, but no version and no tables


def test_the_summary_records_the_tool_version(written):
    data = json.loads((written["csv"] / "results" / "es" / "summary.json").read_text(encoding="utf-8"))
    assert data["versions"]["real-attention"] == ra.__version__


@pytest.mark.parametrize("field, value, said", [
    ("lang", "en", "it records lang 'en', but this is results/es"),
    ("measure", "norm", "it records measure 'norm', but this is results/es, the folder of --measure weights"),
])
def test_a_summary_of_another_language_or_measure_is_refused(field, value, said, written, tmp_path):
    """A run's folder copied under another language's name (or a summary.json edited to another measure) would be
    drawn and labelled as what it is not."""
    out = edited_copy(written, "csv", tmp_path, set_field(field, value))
    assert refused_line(out).startswith(f"Error: {out / 'results' / 'es' / 'summary.json'} is damaged: {said}")


@pytest.mark.parametrize("blocker", ["folder", "dangling link"])
def test_a_summary_json_that_is_not_a_file_is_damaged_not_absent(blocker, written, tmp_path):
    """read_attention took it for an absent summary.json and read the table unchecked; show said "no results"."""
    out = tmp_path / "out"
    shutil.copytree(written["csv"], out)
    summary = out / "results" / "es" / "summary.json"
    summary.unlink()
    if blocker == "folder":
        summary.mkdir()
    else:
        summary.symlink_to(tmp_path / "nowhere")
    what = "a folder" if blocker == "folder" else "a link to nothing"
    assert refused_line(out).startswith(f"Error: {summary} is damaged: it is {what}, not the file `run` writes")
    for path in (out / "results" / "es", out / "results" / "es" / "attention.csv"):
        with pytest.raises(InputError, match=f"it is {what}"):
            ra.read_attention(path)


def test_read_attention_checks_the_summary_as_show_does(written, tmp_path):
    """A summary.json that show refuses (here a focus word in no sentence) is refused by read_attention too."""
    out = edited_copy(written, "csv", tmp_path, set_field("focus", "xyz"))
    with pytest.raises(InputError, match="does not hold its focus word 'xyz'"):
        ra.read_attention(out / "results" / "es")


def test_the_recorded_table_is_read_when_the_other_format_sits_beside_it(written, tmp_path):
    """A stray attention.parquet beside the recorded attention.csv: the CSV is read (it was the parquet, and
    summary.json was blamed); with the CSV gone, the parquet is named as not the run's."""
    out = tmp_path / "out"
    shutil.copytree(written["csv"], out)
    folder = out / "results" / "es"
    shutil.copy(written["parquet"] / "results" / "es" / "attention.parquet", folder)
    assert show(out).exit_code == 0
    assert len(ra.read_attention(folder)) == len(ra.read_attention(folder / "attention.csv"))
    (folder / "attention.csv").unlink()
    shutil.rmtree(out / "figures")
    assert refused_line(out).startswith(f"Error: {folder / 'attention.parquet'} is damaged: summary.json records "
                                 "attention.csv for this run, not attention.parquet: attention.csv was removed or "
                                        "replaced by a table that is not this run's")


def test_a_huge_layer_count_is_compared_not_allocated(written, tmp_path):
    out = edited_copy(written, "csv", tmp_path, set_field("layers", 10**15))
    line = refused_line(out)
    assert line.startswith(f"Error: {out / 'results' / 'es' / 'summary.json'} is damaged: its sentences, layers and "
                           f"heads_per_layer (2 sentences x {10**15} layers x 4 heads) do not fit"), line
