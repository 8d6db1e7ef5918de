"""Staged output folders: all land together on success, none on failure or Ctrl-C."""

import pytest

from real_attention.outputs.staging import OutputError, staged_outputs


def test_all_folders_land_together_and_replace_the_old_ones(tmp_path):
    old = tmp_path / "results" / "es"
    old.mkdir(parents=True)
    (old / "stale.csv").write_text("old\n")
    with staged_outputs() as staging:
        for name in ("results/es", "figures/es"):
            (staging.folder(tmp_path / name) / "new.csv").write_text("new\n")
    assert [p.name for p in old.iterdir()] == ["new.csv"]
    assert (tmp_path / "figures" / "es" / "new.csv").read_text() == "new\n"
    assert sorted(p.name for p in (tmp_path / "results").iterdir()) == ["es"]


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_a_failure_leaves_the_old_folder_and_no_staging(tmp_path, error):
    target = tmp_path / "results" / "lesson"
    target.mkdir(parents=True)
    (target / "old.csv").write_text("old\n")
    with pytest.raises(type(error)):
        with staged_outputs() as staging:
            (staging.folder(target) / "half.csv").write_text("half\n")
            raise error
    assert [p.name for p in target.iterdir()] == ["old.csv"]
    assert sorted(p.name for p in target.parent.iterdir()) == ["lesson"]


def test_an_unwritable_parent_is_an_output_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OutputError, match=f"cannot write to {blocker / 'out'}"):
        with staged_outputs() as staging:
            staging.folder(blocker / "out" / "es")


def test_a_failed_run_leaves_no_empty_folders_it_made(tiny_model_dir, tmp_path):
    """The staging made OUT/results/ and OUT/figures/ for its folders; a run that then failed left them empty."""
    from conftest import invoke

    config = tmp_path / "long.toml"
    long = "fui al jardín " * 20 + "y al banco"  # more pieces than the tiny model's positions
    config.write_text(f'[es]\nfocus = "banco"\nsentences = [{{ text = "{long}", sense = "jardín", '
                      'focus_occurrence = 1, sense_occurrence = 1 }]\n', encoding="utf-8")
    out = tmp_path / "new" / "out"
    result = invoke("run", "--config", config, "--model", tiny_model_dir, "--out", out, "--quiet", "--mixing")
    assert result.exit_code != 0
    assert not (tmp_path / "new").exists(), sorted(str(p) for p in (tmp_path / "new").rglob("*"))
    kept = tmp_path / "kept"
    (kept / "results" / "mine").mkdir(parents=True)
    result = invoke("run", "--config", config, "--model", tiny_model_dir, "--out", kept, "--quiet", "--mixing")
    assert result.exit_code != 0
    assert sorted(p.name for p in kept.iterdir()) == ["results"] and (kept / "results" / "mine").is_dir()
