"""Read a finished run back from results/<lang>/ (attention.csv or .parquet, summary.json): no model, no torch."""
from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..engine.errors import InputError
from ..engine.measure_names import MEASURES
from .table_checks import DamagedTable, damaged, quoted, read_checked, read_summary  # noqa: F401  (DamagedTable re-exported)


class ResultsError(InputError):
    """The stored results are missing, or a requested layer, head or sentence is not in them."""


@dataclass(frozen=True)
class StoredHead:
    """One head on one sentence, rebuilt from attention.csv; layer, head and sentence count from 0."""

    words: tuple[str, ...]  # (n,) as written in the sentence
    weights: np.ndarray  # (n, n) float32, query rows x key columns
    layer: int
    head: int
    sentence: int
    text: str
    focus: int | None  # unit index of the focus word, None if it cannot be found
    sense: int | None  # unit index of the sense word, None if it cannot be found


@dataclass(frozen=True)
class StoredRun:
    """summary.json and attention.csv of one language."""

    summary: dict
    attention: pd.DataFrame  # the long table, columns of real_attention.outputs.tables.ATTENTION_COLUMNS

    @property
    def layers(self) -> int:
        return int(self.summary["layers"])

    @property
    def heads(self) -> int:
        return int(self.summary["heads_per_layer"])

    @property
    def sentence_count(self) -> int:
        return len(self.summary["sentences"])


def load_run(out_dir: Path, lang: str, measure: str = "weights") -> StoredRun:
    """Read OUT/results/LANG/ (LANG-norm/ for the norm measure); ResultsError (with the command to run first)
    if it is not there, DamagedTable (naming the file) if summary.json or the table is not what `run` wrote."""
    from ..engine.measures import WEIGHTS, folder_suffix

    folder = Path(out_dir) / "results" / (lang + folder_suffix(measure))
    summary_path = folder / "summary.json"
    check_file_if_there(summary_path)
    table = table_path(folder, "attention")
    if not (summary_path.is_file() and table is not None):
        option = "" if measure == WEIGHTS else f" --measure {measure}"
        option = _model_option(Path(out_dir), lang) + option
        raise ResultsError(
            f"no results in {folder}; run `real-attention run --lang {shlex.quote(lang)}{option} --out "
            f"{shlex.quote(str(out_dir))}` first"
        )
    summary = check_run_summary(summary_path, read_summary(summary_path))
    check_folder(summary_path, summary, lang, measure)
    table = table_path(folder, "attention", summary)
    assert table is not None  # one of the two was there above
    attention = read_checked(table, summary)
    check_word_positions(summary_path, summary, sentence_words(attention))
    return StoredRun(summary=summary, attention=attention)


def check_file_if_there(path: Path) -> None:
    """DamagedTable if something that is not a regular file (a folder, a dangling link, a pipe) is at `path`: a
    reader must not take it for an absent file and read the table beside it unchecked."""
    from ..engine.checks import not_a_file

    what = not_a_file(path)
    if what is not None:
        raise damaged(path, f"it is {what}, not the file `run` writes")


def check_folder(path: Path, summary: dict, lang: str, measure: str) -> None:
    """DamagedTable unless summary.json's lang and measure (where it records them) are the folder's: a run's
    folder copied or moved under another name would be shown as what it is not."""
    from ..engine.measures import WEIGHTS, folder_suffix

    recorded = summary.get("lang")
    if recorded is not None and (not isinstance(recorded, str) or recorded.casefold() != lang.casefold()):
        raise damaged(path, f"it records lang {quoted(recorded)}, but this is results/{lang + folder_suffix(measure)} "
                            "(a run's folder renamed or copied under another language)")
    recorded = summary.get("measure", WEIGHTS)
    if recorded != measure:
        raise damaged(path, f"it records measure {quoted(recorded)}, but this is results/{lang + folder_suffix(measure)},"
                            f" the folder of --measure {measure}")


# The heads summary.json names for the lesson's roles (head_role), each None or {"layer", "head", ...} from 1.
ROLE_HEADS = ("best_sense_head", "prev_head", "next_head", "first_head", "strongest_markers_head")


def _whole(value, low: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _text(value) -> bool:
    return isinstance(value, str)


def _index(value) -> bool:
    return value is None or _whole(value)


def check_run_summary(path: Path, summary: dict) -> dict:
    """The fields of a run's summary.json that a reader of its tables (or `show`) uses, checked; DamagedTable
    names the first that is not as `run` writes it. Fields an older run lacks may be missing; none may be
    another type, or a head outside the run's layers and heads."""
    checks = [("layers", lambda v: _whole(v, 1), "a whole number >= 1"),
              ("heads_per_layer", lambda v: _whole(v, 1), "a whole number >= 1"),
              ("focus", _text, "a word"),
              ("sentences", lambda v: isinstance(v, list) and len(v) > 0 and all(
                  isinstance(s, dict) and _text(s.get("text")) and _text(s.get("sense")) for s in v),
               'a list of {"text", "sense"} objects'),
              ("model", lambda v: _text(v) and v != "", "a model name"),
              ("revision", lambda v: _text(v) and v != "", "a revision string")]
    for name, valid, expected in checks:
        if name not in summary:
            raise damaged(path, f"it has no field {name!r}")
        if not valid(summary[name]):
            raise damaged(path, f"its field {name!r} is not {expected}")
    _check_optional(path, summary, "measure", lambda v: v in MEASURES, f"one of {', '.join(MEASURES)}")
    _check_optional(path, summary, "causal", lambda v: isinstance(v, bool), "true or false")
    layers, heads = summary["layers"], summary["heads_per_layer"]
    for name in ROLE_HEADS:  # head_role compares them to the shown head: a list or a string there is a TypeError
        _check_optional(path, summary, name, lambda v: v is None or (
            isinstance(v, dict) and _whole(v.get("layer"), 1) and v["layer"] <= layers
            and _whole(v.get("head"), 1) and v["head"] <= heads),
            f'null or a {{"layer", "head"}} object within the run\'s {layers} layers and {heads} heads')
    positions = summary.get("word_positions")
    if positions is not None and not (
            isinstance(positions, list) and len(positions) == len(summary["sentences"])
            and all(isinstance(p, dict) and {"focus_index", "sense_index"} <= p.keys()  # null, never missing
                    and _index(p["focus_index"]) and _index(p["sense_index"]) for p in positions)):
        raise damaged(path, "its field 'word_positions' is not one {focus_index, sense_index} per sentence")
    return summary


def _check_optional(path: Path, summary: dict, name: str, valid: Callable[[Any], bool], expected: str) -> None:
    """A field older runs may lack: absent is fine, present it must be `valid`."""
    if name in summary and not valid(summary[name]):
        shown = repr(summary[name])
        shown = shown if len(shown) <= 40 else shown[:40] + "..."
        raise damaged(path, f"its field {name!r} is {shown}, not {expected}")


def sentence_words(attention: pd.DataFrame) -> list[tuple[str, ...]]:
    """(S,) the units of each sentence of a checked attention table, as written: the keys of its first row
    (check_structure has checked that every row of a sentence names the same units)."""
    first = attention[(attention["layer"] == 1) & (attention["head"] == 1) & (attention["query_index"] == 0)]
    return [tuple(str(word) for word in rows.sort_values("key_index")["key"])
            for _, rows in first.groupby("sentence", sort=True)]


def check_word_positions(path: Path, summary: dict, words: list[tuple[str, ...]]) -> None:
    """DamagedTable (naming summary.json) unless, for each sentence, the focus and sense words are in its text
    and its focus_index and sense_index in 'word_positions' are null or units of the sentence (below its unit
    count) that are the summary's focus and sense words (as `run` compares words); `words`: sentence_words."""
    import unicodedata

    from ..engine.sentences import same_word

    def folded(text: str) -> str:  # as same_word compares words
        return unicodedata.normalize("NFC", text).casefold()

    for number, info in enumerate(summary["sentences"][:len(words)], start=1):
        for role, word in (("focus", summary["focus"]), ("sense", info["sense"])):
            if folded(word) not in folded(info["text"]):
                raise damaged(path, f"sentence {number}'s text {info['text'][:60]!r} does not hold its {role} "
                                    f"word {quoted(word)}")
    for number, (position, units) in enumerate(zip(summary.get("word_positions") or [], words), start=1):
        for key, word in (("focus_index", summary["focus"]), ("sense_index", summary["sentences"][number - 1]["sense"])):
            value = position.get(key)
            if value is None:
                continue
            if value >= len(units):
                raise damaged(path, f"its field 'word_positions' gives sentence {number} {key} {value}, but the "
                                    f"sentence has {len(units)} units (0 to {len(units) - 1})")
            if not same_word(units[value], word):
                raise damaged(path, f"its field 'word_positions' gives sentence {number} {key} {value}, the word "
                                    f"{quoted(units[value])}, not {quoted(word)}")


TABLE_SUFFIXES = (".parquet", ".csv")  # run --table-format: a run writes one of them


def table_path(folder: Path, name: str, summary: dict | None = None) -> Path | None:
    """FOLDER/NAME.parquet or FOLDER/NAME.csv, whichever the run wrote (the one its summary.json records, if it
    records one of them and that file is there); None if neither is there."""
    paths = [Path(folder) / f"{name}{suffix}" for suffix in TABLE_SUFFIXES]
    tables = summary.get("tables") if summary is not None else None
    recorded = [path for path in paths if isinstance(tables, dict) and path.name in tables and path.is_file()]
    return next(iter(recorded), next((path for path in paths if path.is_file()), None))


def read_attention(path: str | Path) -> pd.DataFrame:
    """attention.csv or attention.parquet (`run --table-format`) read back as one DataFrame, the same for both:
    the columns of attention.csv (rollout.csv's, for a rollout table) in order, integers as int64, words as
    str, weights as float64 (the CSV holds 6 decimals, Parquet float32's 7 digits).

    path: the table file, or a results folder (results/LANG/), which holds one of the two and the summary.json it
    is checked against. Also reads rollout tables. ResultsError if there is no such table, or the folder has no
    summary.json (a table file read alone has its structure checked, not its sentences). The table is checked as
    it is read (real_attention.outputs.table_checks): against the row count and sha256 that the summary.json beside it
    records, and for the structure every such table has (whole numbers, weights in [0, 1], complete n x n
    blocks, rows summing to 1); DamagedTable (an InputError) names the file if it is not what `run` wrote.
    """
    from ..engine.checks import path_arg

    path = Path(path_arg(path, "path"))
    is_folder = path.is_dir() and path.suffix not in TABLE_SUFFIXES
    summary_path = (path if is_folder else path.parent) / "summary.json"  # read once, for the table's choice too
    check_file_if_there(summary_path)
    summary = read_summary(summary_path) if summary_path.is_file() else None
    if is_folder:
        found = table_path(path, "attention", summary)
        if found is None:
            raise ResultsError(f"no attention.csv or attention.parquet in {path}; run `real-attention run` first")
        if summary is None:  # run writes it with the tables: without it, a sentence cut out of a table goes unseen
            raise ResultsError(f"no summary.json in {path}, which `real-attention run` writes beside its tables and "
                               "which they are checked against (sentences, rows, sha256); run it again, or pass "
                               f"{found.name} itself to read the table with its structure checked alone")
        path = found
    if not path.is_file():
        raise ResultsError(f"no attention table at {path}" + (" (a folder is there)" if path.is_dir() else ""))
    if path.stem not in ("attention", "rollout") or path.suffix not in TABLE_SUFFIXES:
        raise ResultsError(f"{path} is not an attention or rollout table; read_attention takes attention.csv, "
                           "attention.parquet, rollout.csv or rollout.parquet, or the results folder that holds them")
    if summary is not None and path.stem == "attention":  # the checks `show` makes of a run's summary.json
        check_run_summary(summary_path, summary)
    frame = read_checked(path, summary)
    if summary is not None and path.stem == "attention":
        check_word_positions(summary_path, summary, sentence_words(frame))
    return frame


def _model_option(out_dir: Path, lang: str) -> str:
    """` --model M` when another measure's run of this language used a model other than the language's pinned one,
    so the hint to run first repeats the model the user chose (and never downloads another)."""
    from ..engine.measures import MEASURES, folder_suffix
    from ..engine import models

    aliases = {models.MINILM_NAME: models.MINILM_ALIAS, models.SMOLLM2_NAME: models.SMOLLM2_ALIAS}
    for other in MEASURES:
        path = out_dir / "results" / (lang + folder_suffix(other)) / "summary.json"
        try:
            model = json.loads(path.read_text(encoding="utf-8")).get("model")
        except (OSError, ValueError, AttributeError):
            continue
        pinned = models.PINNED_MODELS.get(lang, ("",))[0]
        if isinstance(model, str) and model and model != pinned:
            return f" --model {shlex.quote(aliases.get(model, model))}"
    return ""


def _check_range(name: str, value: int, count: int, owner: str) -> None:
    if not 1 <= value <= count:
        raise ResultsError(f"--{name} {value} is out of range: {owner} {name}s 1 to {count}")


def _find(words: tuple[str, ...], word: str) -> int | None:
    """The first unit that is `word`, as a reader compares words; None if none is."""
    from ..engine.sentences import same_word

    return next((i for i, w in enumerate(words) if same_word(w, word)), None)


def stored_head(run: StoredRun, layer: int, head: int, sentence: int) -> StoredHead:
    """The (n, n) map of one head on one sentence; layer, head and sentence count from 1 here, as on the CLI."""
    _check_range("layer", layer, run.layers, "the model has")
    _check_range("head", head, run.heads, "each layer has")
    _check_range("sentence", sentence, run.sentence_count, "the run has")
    table = run.attention
    rows = table[(table["sentence"] == sentence) & (table["layer"] == layer) & (table["head"] == head)]
    n = int(rows["query_index"].max()) + 1 if len(rows) else 0
    if n == 0 or len(rows) != n * n:
        raise ResultsError(
            f"attention.csv has {len(rows)} rows for sentence {sentence}, layer {layer}, head {head}; "
            "rerun `real-attention run`"
        )
    query, key = rows["query_index"].to_numpy(), rows["key_index"].to_numpy()
    weights = np.zeros((n, n), dtype=np.float32)
    weights[query, key] = rows["weight"].to_numpy(dtype=np.float32)  # (n, n), one scatter, no loop
    keys = np.empty(n, dtype=object)
    keys[key] = rows["key"].to_numpy()
    words = tuple(str(w) for w in keys)
    info = run.summary["sentences"][sentence - 1]
    positions = run.summary.get("word_positions")
    if positions:
        focus, sense = positions[sentence - 1]["focus_index"], positions[sentence - 1]["sense_index"]
    else:  # results of an older version: the first occurrence of each word
        focus, sense = _find(words, run.summary["focus"]), _find(words, info["sense"])
    return StoredHead(words=words, weights=weights, layer=layer - 1, head=head - 1, sentence=sentence - 1,
                      text=info["text"], focus=focus, sense=sense)


def head_role(summary: dict, layer: int, head: int) -> str:
    """Which of the lesson's heads (layer, head from 0) is, e.g. 'best sense-word head'; '' if none."""
    roles = []
    best = summary.get("best_sense_head")
    if best and (best["layer"], best["head"]) == (layer + 1, head + 1):
        roles.append("best sense-word head")
    keys = [("prev_head", "previous-word head"), ("next_head", "next-word head"),
            ("strongest_markers_head", "top marker-weight head")]
    if summary.get("causal"):  # as `run` names them: a first-token head only in a decoder
        keys.append(("first_head", "first-token head"))
    for key, name in keys:
        chosen = summary.get(key)
        if chosen and (chosen["layer"], chosen["head"]) == (layer + 1, head + 1):
            roles.append(name)
    return ", ".join(roles)
