"""merge and shards that do not belong together: a sums.json that is not its summary.json's, shards of one corpus
read as other inputs, numbers too large for a float, a summary.json's engine or units of the wrong type, and a
shard count too large to list. Each: one `Error:` line naming the file (or the shards), nothing written."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from conftest import error_line, invoke
from real_attention.engine.heads import check_sums_json

LINES = ["me senté en el banco de mi jardín .", "fui al banco a sacar dinero .", "el banco de mi jardín .",
         "fui al banco .", "mi jardín .", "sacar dinero de el banco .", "el banco ."]


def heads(corpus, model_dir, out, *extra):
    result = invoke("heads", "--corpus", *corpus, "--model", model_dir, "--out", out, "--quiet", "--no-figures",
                    *extra)
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture(scope="module")
def made(tiny_model_dir, tmp_path_factory):
    """Three shards of a 7-line corpus (3, 2 and 2 lines), and shard 1/2 and 2/2 of the same lines read as two
    files (a.txt: 3 lines, b.txt: 4), as three files split elsewhere (2/5), and as one file."""
    folder = tmp_path_factory.mktemp("made")
    corpus = folder / "c.txt"
    corpus.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    for index in (1, 2, 3):
        heads([corpus], tiny_model_dir, folder / "three", "--shard", f"{index}/3")
    (folder / "a.txt").write_text("\n".join(LINES[:3]) + "\n", encoding="utf-8")
    (folder / "b.txt").write_text("\n".join(LINES[3:]) + "\n", encoding="utf-8")
    (folder / "a2.txt").write_text("\n".join(LINES[:2]) + "\n", encoding="utf-8")
    (folder / "b2.txt").write_text("\n".join(LINES[2:]) + "\n", encoding="utf-8")
    for index in (1, 2):
        heads([folder / "a.txt", folder / "b.txt"], tiny_model_dir, folder / "ab", "--name", "c", "--shard",
              f"{index}/2")
    heads([folder / "a2.txt", folder / "b2.txt"], tiny_model_dir, folder / "ab2", "--name", "c", "--shard", "2/2")
    heads([corpus], tiny_model_dir, folder / "one", "--shard", "2/2")
    heads([corpus], tiny_model_dir, folder / "whole")
    return folder


def shard(made: Path, run: str, index: int, count: int) -> Path:
    return made / run / "results" / "corpus" / f"c-shard-{index}-of-{count}"


@pytest.fixture()
def three(made, tmp_path) -> list[Path]:
    """Copies of the three shards, to damage."""
    copies = []
    for index in (1, 2, 3):
        copy = tmp_path / "shards" / f"c-shard-{index}-of-3"
        shutil.copytree(shard(made, "three", index, 3), copy)
        copies.append(copy)
    return copies


def edit(path: Path, change, raw: str | None = None) -> None:
    """Change a JSON file in place; a "@@" the change wrote is replaced by `raw` (JSON that Python does not write)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    text = json.dumps(data, indent=2, sort_keys=True)
    path.write_text(text.replace('"@@"', raw) if raw is not None else text, encoding="utf-8")


def merge(tmp_path, *folders):
    return invoke("merge", *folders, "--out", tmp_path / "merged", "--quiet", "--no-figures", catch_exceptions=True)


def refused(tmp_path, *folders) -> str:
    result = merge(tmp_path, *folders)
    assert result.exit_code == 2, result.output
    assert not (tmp_path / "merged").exists()
    return error_line(result)


AGAIN = "merge takes the shards as `heads --shard` wrote them: run that shard again"


# --- a sums.json that is not its summary.json's (defect 1) -------------------------------------------------------


def test_summary_json_records_the_sha256_of_its_sums_json_and_a_shard_its_inputs(made, tmp_path):
    for folder in (shard(made, "three", 1, 3), made / "whole" / "results" / "corpus" / "c"):
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["sums_sha256"] == hashlib.sha256((folder / "sums.json").read_bytes()).hexdigest()
    one_file, two_files = (json.loads((shard(made, run, 2, 2) / "summary.json").read_text())["shard"]
                           for run in ("one", "ab"))
    assert one_file["inputs"]["count"] == 1 and two_files["inputs"]["count"] == 2
    assert json.loads((made / "whole" / "results" / "corpus" / "c" / "summary.json").read_text())["shard"] is None
    assert merge(tmp_path, *(shard(made, "three", i, 3) for i in (1, 2, 3))).exit_code == 0
    merged = tmp_path / "merged" / "results" / "corpus" / "c"
    whole = made / "whole" / "results" / "corpus" / "c"
    assert (merged / "sums.json").read_bytes() == (whole / "sums.json").read_bytes()
    summary = json.loads((merged / "summary.json").read_text())
    assert summary["sums_sha256"] == hashlib.sha256((merged / "sums.json").read_bytes()).hexdigest()


def test_a_sums_json_copied_from_another_shard_is_refused(three, tmp_path):
    shutil.copy(three[1] / "sums.json", three[0] / "sums.json")
    assert refused(tmp_path, *three) == (f"Error: {three[0]}: sums.json does not match its summary.json: counts.lines "
                                         f"is 2 in sums.json, 3 in summary.json; {AGAIN}")


def halve(data):
    data["totals"]["prev"][1][2] //= 2


def add_pairs(data):
    data["pairs"] += 1


@pytest.mark.parametrize("change", [halve, add_pairs])
def test_a_changed_number_that_summary_json_does_not_show_is_refused_by_the_sha256(three, tmp_path, change):
    edit(three[0] / "sums.json", change)
    recorded = json.loads((three[0] / "summary.json").read_text())["sums_sha256"]
    assert refused(tmp_path, *three) == (
        f"Error: {three[0] / 'sums.json'} is not the sums.json written with its summary.json (its sha256 is not the "
        f"{recorded[:12]}... that summary.json records); {AGAIN}")


def test_added_units_are_refused(three, tmp_path):
    edit(three[2] / "sums.json", lambda data: data.update(units=data["units"] + 1000))
    line = refused(tmp_path, *three)
    assert line.startswith(f"Error: {three[2]}: sums.json does not match its summary.json: counts.words is "), line


def test_an_encoders_shards_made_causal_are_refused(three, tmp_path):
    for folder in three:
        edit(folder / "sums.json", lambda data: data.update(causal=True))
    assert refused(tmp_path, *three) == (f"Error: {three[0]}: sums.json does not match its summary.json: causal is "
                                         f"true in sums.json, false in summary.json; {AGAIN}")


def written_before_the_records(folder: Path) -> None:
    """A shard as versions before the sha256, the input layout and sums.json's shard were recorded wrote it."""
    def change(data):
        del data["sums_sha256"]
        del data["shard"]["inputs"]
    edit(folder / "summary.json", change)
    edit(folder / "sums.json", lambda data: data.pop("shard"))


def test_a_removed_sha256_of_a_shard_that_records_its_shard_is_refused(three, tmp_path):
    """Deleting one key of summary.json must not switch off the check of sums.json's bytes: a sums.json that
    records its shard was written with a summary.json that records its sha256."""
    edit(three[0] / "summary.json", lambda data: data.pop("sums_sha256"))
    edit(three[0] / "sums.json", halve)
    assert refused(tmp_path, *three) == (
        f"Error: {three[0] / 'summary.json'} has no sums_sha256, which every shard whose sums.json records its shard "
        f"has (the check of sums.json's bytes was removed); {AGAIN}")


def test_older_shards_still_merge_and_are_cross_checked(three, made, tmp_path):
    for folder in three:
        written_before_the_records(folder)
    assert merge(tmp_path, *three).exit_code == 0
    merged = tmp_path / "merged" / "results" / "corpus" / "c" / "sums.json"
    assert merged.read_bytes() == (made / "whole" / "results" / "corpus" / "c" / "sums.json").read_bytes()
    shutil.rmtree(tmp_path / "merged")
    # one sentence fewer (one more would be more sentences than lines read, refused by itself)
    edit(three[1] / "sums.json", lambda data: data.update(sentences=data["sentences"] - 1, units=data["units"] - 1))
    assert refused(tmp_path, *three).startswith(f"Error: {three[1]}: sums.json does not match its summary.json: "
                                                "counts.sentences is 1 in sums.json, 2 in summary.json")
    edit(three[1] / "sums.json", lambda data: data.update(sentences=data["sentences"] + 1, units=data["units"] + 1))
    edit(three[1] / "sums.json", lambda data: data.update(uniform=data["uniform"] * 2))
    assert "sums.json does not match its summary.json: its uniform entropy is" in refused(tmp_path, *three)


def test_a_shard_without_its_summary_json_is_still_refused(three, tmp_path):
    (three[0] / "summary.json").unlink()
    assert refused(tmp_path, *three) == (f"Error: {three[0]} is not a corpus result folder (no summary.json and "
                                         "sums.json); pass results/corpus/NAME/ folders written by `heads --shard`")


# --- shards of one corpus read as other inputs (defect 2) ----------------------------------------------------------


def test_shards_of_the_corpus_read_as_other_inputs_are_refused(made, tmp_path):
    two_files, one_file, split_elsewhere = shard(made, "ab", 1, 2), shard(made, "one", 2, 2), shard(made, "ab2", 2, 2)
    assert refused(tmp_path, two_files, one_file) == (
        f"Error: {one_file} and {two_files} read the corpus as 1 and 2 inputs: shard (--shard) takes lines i, i+N, ... of "
        "each input, so their lines overlap or are left out; run every shard with the same inputs (--corpus)")
    assert f"Error: {split_elsewhere} and {two_files} read the corpus as inputs split at other lines: " in refused(
        tmp_path, two_files, split_elsewhere)
    # the same inputs merge to the whole corpus: 7 lines, not 8
    assert merge(tmp_path, two_files, shard(made, "ab", 2, 2)).exit_code == 0
    summary = json.loads((tmp_path / "merged" / "results" / "corpus" / "c" / "summary.json").read_text())
    assert summary["counts"]["lines"] == summary["counts"]["sentences"] == len(LINES)


def test_a_shard_that_does_not_record_its_inputs_is_merged_as_before(made, tmp_path):
    old = tmp_path / "old" / "c-shard-2-of-2"
    shutil.copytree(shard(made, "one", 2, 2), old)
    written_before_the_records(old)
    assert merge(tmp_path, shard(made, "ab", 1, 2), old).exit_code == 0


def test_a_bad_input_layout_record_is_refused(three, tmp_path):
    edit(three[0] / "summary.json", lambda data: data["shard"].update(inputs="two files"))
    assert refused(tmp_path, *three).startswith(f"Error: {three[0]}/summary.json: field 'shard' is ")


# --- numbers too large for a float (defect 3) -----------------------------------------------------------------------


def to_floats(data):
    """The sums.json format before fixed point: float totals and uniform, no fixed_point_bits."""
    del data["fixed_point_bits"]
    data["totals"] = {name: [[v / 2**32 for v in row] for row in rows] for name, rows in data["totals"].items()}
    data["uniform"] /= 2**32


def huge_total(data):
    data["totals"]["self"][0][1] = "@@"


def huge_float_total(data):
    to_floats(data)
    huge_total(data)


def huge_float_uniform(data):
    to_floats(data)
    data["uniform"] = "@@"


@pytest.mark.parametrize("change, message", [
    (huge_total, "field 'totals.self' is a number of 401 digits at layer 1, head 2, more than a float64 holds"),
    (huge_float_total, "field 'totals.self' is a number of 401 digits at layer 1, head 2, more than a float64 holds"),
    (huge_float_uniform, "field 'uniform' is a number of 401 digits, more than any corpus can have"),
])
def test_a_whole_number_too_large_for_a_float_is_one_error_line(three, tmp_path, change, message):
    edit(three[1] / "sums.json", change, raw="1" + "0" * 400)
    assert refused(tmp_path, *three).startswith(f"Error: {three[1] / 'sums.json'}: {message}")


def test_check_sums_json_says_which_number_is_too_large(made):
    data = json.loads((shard(made, "three", 1, 3) / "sums.json").read_text())
    for name in ("units", "uniform"):
        with pytest.raises(ValueError, match=f"field '{name}' is a number of 401 digits, more than a float64 holds"):
            check_sums_json({**data, name: 10**400})
    to_floats(data)
    data["totals"]["entropy"][2][0] = 10**400
    with pytest.raises(ValueError, match="'totals.entropy' is a number of 401 digits at layer 3, head 1"):
        check_sums_json(data)


def test_check_sums_json_refuses_more_blank_lines_and_sentences_than_lines(made):
    """Each line read is blank, a sentence or a skipped one: 'blank: 99' of 10 lines passed with a re-recorded
    sha256."""
    data = json.loads((shard(made, "three", 1, 3) / "sums.json").read_text())
    check_sums_json(data)
    with pytest.raises(ValueError, match=f"add up to {99 + data['sentences'] + data['skipped']}, more than the "
                                         f"{data['lines']} lines read"):
        check_sums_json({**data, "blank": 99})


# --- a summary.json's engine and units (defect 4) ------------------------------------------------------------------


@pytest.mark.parametrize("field, value, expected", [
    ("engine", "single-process", "null or an object"),
    ("engine", [1], "null or an object"),
    ("units", "bogus", "one of 'text', 'tokenizer'"),
    ("units", [1], "one of 'text', 'tokenizer'"),
    ("measure", 7, "one of 'weights', "),
    ("causal", "no", "true or false"),
])
def test_a_summary_field_of_the_wrong_kind_is_refused(three, tmp_path, field, value, expected):
    for folder in three:  # in every shard: the fields agree, and each is still wrong
        edit(folder / "summary.json", lambda data: data.update({field: value}))
    assert refused(tmp_path, *three).startswith(
        f"Error: {three[0]}/summary.json: field {field!r} is {value!r}, expected {expected}")


# --- a shard count too large to list (defect 5) --------------------------------------------------------------------


@pytest.mark.parametrize("count, more", [(10**7, 10**7 - 8), (10**30, 10**30 - 8)])
def test_a_huge_shard_count_lists_the_first_missing_shards(three, tmp_path, count, more):
    for folder in three:  # shards of a run with `count` shards: summary.json and sums.json both say so
        edit(folder / "sums.json", lambda data: data["shard"].update(count=count))
        digest = hashlib.sha256((folder / "sums.json").read_bytes()).hexdigest()
        edit(folder / "summary.json",
             lambda data, digest=digest: data.update(sums_sha256=digest) or data["shard"].update(count=count))
    assert refused(tmp_path, *three) == (f"Error: shard(s) {', '.join(f'{i}/{count}' for i in range(4, 9))} and "
                                         f"{more} more missing; merge needs all {count}")


def test_a_few_missing_shards_are_all_listed(three, tmp_path):
    assert refused(tmp_path, three[1]) == "Error: shard(s) 1/3, 3/3 missing; merge needs all 3"


def test_a_decoders_shards_still_merge(tiny_decoders, tmp_path):
    """The cross-check reads a decoder's counts as its summary.json does (units: query units i >= 1)."""
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    for index in (1, 2):
        heads([corpus], tiny_decoders("llama"), tmp_path / "s", "--shard", f"{index}/2")
    folders = [tmp_path / "s" / "results" / "corpus" / f"c-shard-{i}-of-2" for i in (1, 2)]
    assert json.loads((folders[0] / "summary.json").read_text())["causal"] is True
    result = merge(tmp_path, *folders)
    assert result.exit_code == 0, result.output


def test_a_copied_shard_given_another_index_is_refused(three, tmp_path):
    """A shard's sums.json says which shard it is: a copy of shard 1 whose summary.json was made shard 2 added shard
    1 twice (358 words instead of 317, other labels)."""
    assert json.loads((three[0] / "sums.json").read_text())["shard"] == {"index": 1, "count": 3}
    copy = tmp_path / "copy"
    shutil.copytree(three[0], copy)
    edit(copy / "summary.json", lambda data: data["shard"].__setitem__("index", 2))
    line = refused(tmp_path, three[0], copy, three[2])
    assert line.startswith(f"Error: {copy}: sums.json holds the sums of shard 1/3, but summary.json says 2/3"), line


@pytest.mark.parametrize("name", ["sums.json", "summary.json"])
@pytest.mark.parametrize("damage", [b"", b'{"lines": 3', "{\"a\": \"\u00e9\"}".encode("latin-1")])
def test_an_unreadable_file_of_a_shard_is_named(name, damage, three, tmp_path):
    (three[1] / name).write_bytes(damage)
    line = refused(tmp_path, *three)
    assert line.startswith(f"Error: {three[1] / name} cannot be read as JSON ("), line


# --- a later review: argument order, versions, legacy defaults, what differs --------------------------------------


def test_the_merged_summary_does_not_depend_on_the_argument_order(three, tmp_path):
    """Shard 2 ran under other versions: the merged summary records shard 1's whatever the order, and warns."""
    edit(three[1] / "summary.json", lambda data: data["versions"].update(torch="2.99.0"))
    summaries = []
    for name, order in (("forward", three), ("backward", three[::-1])):
        result = invoke("merge", *order, "--out", tmp_path / name, "--no-figures", catch_exceptions=True)
        assert result.exit_code == 0, result.output
        assert "versions of Python, torch, transformers or real-attention" in result.output
        summaries.append((tmp_path / name / "results" / "corpus" / "c" / "summary.json").read_bytes())
    assert summaries[0] == summaries[1]
    assert json.loads(summaries[0])["versions"] == json.loads((three[0] / "summary.json").read_text())["versions"]
    assert "versions" in json.loads(summaries[0])["engine"]["differs"]


def test_a_shard_that_does_not_record_the_default_measure_and_units_merges(three, made, tmp_path):
    """A shard written before `measure` and `units` were recorded ran with the weights and the tokenizer's words:
    next to shards that say so it merges; next to shards of the text rule it is refused."""
    written_before_the_records(three[0])
    edit(three[0] / "summary.json", lambda data: data.pop("measure"))
    assert merge(tmp_path / "first", *three).exit_code == 0
    edit(three[0] / "summary.json", lambda data: data.pop("units"))
    assert refused(tmp_path, *three) == f"Error: {three[1]} and {three[0]} differ in units; {ONE_RUN}"


@pytest.mark.parametrize("removed", ["units", "measure", "causal", "engine", "uniform_entropy", "counts",
                                     "counts.words", "shard.inputs"])
def test_a_shard_that_records_its_shard_has_every_later_field(three, tmp_path, removed):
    """A field removed from a shard new enough to record its shard in sums.json is refused: merge read a default
    for it (units removed from every shard: the merged run said 'tokenizer' of sums made with the text rule) or
    skipped a check (counts, the input layout)."""
    def change(data):
        record, _, key = removed.rpartition(".")
        (data[record] if record else data).pop(key)
    for folder in three:
        edit(folder / "summary.json", change)
    assert refused(tmp_path, *three) == (
        f"Error: {three[0] / 'summary.json'} has no {removed}, which every shard whose sums.json records its shard "
        f"has (it was removed); {AGAIN}")


def test_a_uniform_entropy_that_is_no_number_is_refused(three, tmp_path):
    edit(three[0] / "summary.json", lambda data: data.update(uniform_entropy="x"))
    assert refused(tmp_path, *three) == (
        f"Error: {three[0] / 'summary.json'}: field 'uniform_entropy' is 'x', expected a number")


ONE_RUN = "merge takes the shards of one run"


def test_a_corpus_saved_under_another_name_is_named(three, tmp_path):
    edit(three[1] / "summary.json", lambda data: data["corpus"].update(name="copy"))
    assert refused(tmp_path, *three) == (
        f"Error: {three[1]} and {three[0]} differ in corpus name ('copy' against 'c'); {ONE_RUN} (the default "
        "name is the corpus file's: give every shard the same name (--name))")


def test_heads_refuses_a_model_and_a_language(tiny_model_dir, made, tmp_path):
    result = invoke("heads", "--corpus", made / "c.txt", "--model", tiny_model_dir, "--lang", "es", "--out",
                    tmp_path, catch_exceptions=True)
    assert result.exit_code == 2
    assert error_line(result) == "Error: heads takes model (--model) or lang (--lang), the pinned model of a language, not both"
