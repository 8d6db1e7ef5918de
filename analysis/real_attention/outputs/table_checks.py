"""A table read back is the table `run` wrote, or one error that names the file and says it is damaged.

On write, summary.json records each per-sentence table (attention and rollout, CSV or Parquet) under "tables":
its row count and the sha256 of its bytes. On read, a table is checked

  - against that record, when summary.json has one (results written before it have none);
  - for what every such table is, record or not: the columns in order; whole numbers where they belong (layers,
    heads and sentences from 1, indices from 0), words as text, every weight a finite number in [0, 1]; each
    sentence's (layer, head) blocks complete, one n x n block each, in the order run writes them; one word per
    unit; every query row summing to 1 (every measure run writes has rows that do: weights, norm and value
    zeroing are rescaled so, rollout keeps it); and, given the run's summary, its sentences, layers and heads.

Any reader failure (a truncated or empty Parquet, a CSV that is not UTF-8, a cut-off line) is the same one error.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from ..engine.checks import shown
from ..engine.errors import InputError, MissingPackage
from ..engine.hashing import file_sha256
from ..engine.measures import NORM, WEIGHTS

ATTENTION_COLUMNS = ["sentence", "layer", "head", "query_index", "query", "key_index", "key", "weight"]
ROLLOUT_COLUMNS = ["sentence", "layer", "query_index", "query", "key_index", "key", "weight"]
INTEGER_COLUMNS = ("sentence", "layer", "head", "query_index", "key_index")
WORD_COLUMNS = ("query", "key")
TABLES = ("attention", "rollout")  # the per-sentence tables a run writes and ra.read_attention reads
SUFFIXES = (".parquet", ".csv")

# A weight may pass 1 or a row sum miss 1 by rounding only: the CSV's 6 decimals (5e-7 a cell) or float32's
# (6e-8 relative) on maps that were float32 to begin with. Per row: ROW_SLACK plus CELL_SLACK per cell.
ROW_SLACK = 1e-4
CELL_SLACK = 1e-6


class DamagedTable(InputError):
    """A results file that cannot be what `run` wrote: the message names the file and says what is wrong."""


def quoted(value, most: int = 40) -> str:
    """repr(value), cut to `most` characters: a damaged cell may hold megabytes, and an error is one line."""
    shown = repr(value)
    return shown if len(shown) <= most else shown[:most] + "..."


def damaged(path: Path, what: str) -> DamagedTable:
    return DamagedTable(f"{path} is damaged: {what}; it is not the file `real-attention run` wrote. Run "
                        "`real-attention run` again to write it anew")


# --- on write -----------------------------------------------------------------------------------------------------


def table_records(folder: Path, words: list[tuple[str, ...]], layers: int, heads: int) -> dict:
    """summary.json's "tables": for each per-sentence table in `folder`, {"rows": ..., "sha256": ...}.

    words: (S,) each sentence's units, as in the tables; the rows are sum(layers * heads * n^2) for attention and
    sum(layers * n^2) for rollout.
    """
    squares = sum(len(units) ** 2 for units in words)
    rows = {"attention": layers * heads * squares, "rollout": layers * squares}
    records = {}
    for name in TABLES:
        for suffix in SUFFIXES:
            path = Path(folder) / f"{name}{suffix}"
            if path.is_file():
                records[path.name] = {"rows": rows[name], "sha256": file_sha256(path)}
    return records


# --- on read ------------------------------------------------------------------------------------------------------


def read_summary(path: Path) -> dict:
    """summary.json as a dict; DamagedTable if it is not JSON (cut off, overwritten) or not an object."""
    import json

    try:
        data = json.loads(Path(path).read_bytes().decode("utf-8"))
    except UnicodeDecodeError as error:
        raise damaged(path, f"it is not UTF-8 text ({error.reason} at byte {error.start})") from None
    except ValueError as error:  # json.JSONDecodeError
        raise damaged(path, f"it is not complete JSON ({error})") from None
    except RecursionError:  # 100,000 nested [: no summary run wrote
        raise damaged(path, "it is not this tool's JSON (nested too deeply)") from None
    if not isinstance(data, dict):
        raise damaged(path, "it is not a JSON object")
    return data


def _records_tool_version(summary: dict) -> bool:
    versions = summary.get("versions")
    return isinstance(versions, dict) and "real-attention" in versions


def check_record(path: Path, summary: dict | None) -> dict | None:
    """The table's record in summary.json, checked against the file's bytes; None when summary.json has no
    "tables" (an older run) or the file is not one `run` writes. DamagedTable if the bytes differ, or "tables" or
    the record is not what `run` writes (not an object, or without the record of this table)."""
    if summary is None:
        return None
    summary_path = path.with_name("summary.json")
    if "tables" not in summary:
        # Only a run older than the record lacks it, and such a run does not record the tool's version either
        # (written since): without this, deleting one key of summary.json would switch off the check of every
        # table's bytes.
        if not _records_tool_version(summary):
            return None
        raise damaged(summary_path, "it has no field 'tables', which every run that records the real-attention "
                                    "version in 'versions' writes (the record of the tables' rows and sha256 was "
                                    "removed)")
    # A record that is there but unreadable must not switch the check off either.
    tables = summary["tables"]
    if not isinstance(tables, dict):
        raise damaged(summary_path, f"its field 'tables' is {shown(tables)}, not an object of table records")
    if path.name not in tables:
        if path.stem not in TABLES or path.suffix not in SUFFIXES:  # a file run never writes: nothing to check it by
            return None
        others = [name for name in tables if Path(name).stem == path.stem and not path.with_name(name).exists()]
        if others:  # the recorded table was replaced by a file of the other format
            raise damaged(path, f"summary.json records {others[0]} for this run, not {path.name}: {others[0]} was "
                                f"removed or replaced by a table that is not this run's")
        raise damaged(summary_path, f"its field 'tables' has no record of {path.name}, which is in the folder")
    record = tables[path.name]
    rows, digest = (record.get("rows"), record.get("sha256")) if isinstance(record, dict) else (None, None)
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 0 or not isinstance(digest, str):
        raise damaged(summary_path, f"its record of {path.name} is {quoted(record)}, not a row count and a sha256")
    actual = file_sha256(path)
    if actual != digest:
        raise damaged(path, f"its sha256 is {actual[:12]}..., but summary.json records {digest[:12]}... for the "
                            "file as written (the bytes changed since)")
    return record


def _read_parquet(path: Path, columns: list[str]) -> pd.DataFrame:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingPackage(f"{path} is a Parquet file, read with pyarrow: pip install "
                             "\"real-attention[parquet]\"") from None
    try:
        table = pq.read_table(path)
    except Exception as error:  # noqa: BLE001  pyarrow raises ArrowInvalid, OSError, ValueError, ... on a bad file
        raise damaged(path, f"it cannot be read as Parquet ({type(error).__name__}: {_first_line(error)})") from None
    if table.column_names != columns:
        raise damaged(path, f"its columns are {', '.join(table.column_names) or 'none'}, expected "
                            f"{', '.join(columns)}")
    for name in columns:
        kind = table.schema.field(name).type
        if pa.types.is_dictionary(kind):
            kind = kind.value_type
        expected = (pa.types.is_integer if name in INTEGER_COLUMNS else pa.types.is_floating if name == "weight"
                    else lambda t: pa.types.is_string(t) or pa.types.is_large_string(t))
        if not expected(kind):
            raise damaged(path, f"its column {name!r} holds {kind}")
    try:
        frame = table.to_pandas()
    except Exception as error:  # noqa: BLE001  a damaged page can still fail here
        raise damaged(path, f"it cannot be read as Parquet ({type(error).__name__}: {_first_line(error)})") from None
    for name in WORD_COLUMNS:
        if name in frame:
            if frame[name].isna().any():
                raise damaged(path, f"its column {name!r} has missing words")
            frame[name] = frame[name].astype(str)
    for name in INTEGER_COLUMNS:
        if name in frame:
            if frame[name].isna().any():
                raise damaged(path, f"its column {name!r} has missing numbers")
            frame[name] = frame[name].astype(np.int64)
    frame["weight"] = frame["weight"].astype(np.float64)
    return frame


def _read_csv(path: Path, columns: list[str]) -> pd.DataFrame:
    try:
        with open(path, "rb") as handle:
            header = handle.readline().decode("utf-8").rstrip("\r\n")
            handle.seek(0, os.SEEK_END)
            if handle.tell():
                handle.seek(-1, os.SEEK_END)
                last = handle.read(1)
            else:
                last = b"\n"
    except UnicodeDecodeError as error:
        raise damaged(path, f"it is not UTF-8 text ({error.reason} at byte {error.start})") from None
    if last != b"\n":  # every table is written line by line: a last line without its end was cut short
        raise damaged(path, "its last line has no line end: the file was cut short")
    if header != ",".join(columns):
        shown = header if len(header) <= 80 else header[:80] + "..."
        raise damaged(path, f"its header is {shown!r}, expected {','.join(columns)!r}")
    types = {name: (np.int64 if name in INTEGER_COLUMNS else str if name in WORD_COLUMNS else np.float64)
             for name in columns}
    try:
        # Words are text: never let pandas read "null", "NA" or "1" as a missing value or a number.
        frame = pd.read_csv(path, dtype=types, keep_default_na=False, na_filter=False, encoding="utf-8",
                            encoding_errors="strict")
    except UnicodeDecodeError as error:
        raise damaged(path, f"it is not UTF-8 text ({error.reason})") from None
    except (ValueError, OverflowError, pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise damaged(path, f"a line is not a row of numbers and words as written ({_first_line(error)})") from None
    if list(frame.columns) != columns:
        raise damaged(path, f"its columns are {', '.join(map(str, frame.columns))}")
    return frame


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    line = text[0] if text else ""
    return line if len(line) <= 160 else line[:160] + "..."


def read_checked(path: Path, summary: dict | None = None) -> pd.DataFrame:
    """attention or rollout (.csv or .parquet) read back and checked (see the module's docstring); the columns
    of the CSV in order, integers int64, words str, weights float64. summary: the run's summary.json, if known."""
    path = Path(path)
    columns = ROLLOUT_COLUMNS if path.stem == "rollout" else ATTENTION_COLUMNS
    record = check_record(path, summary)
    frame = _read_parquet(path, columns) if path.suffix == ".parquet" else _read_csv(path, columns)
    if record is not None and len(frame) != record["rows"]:
        raise damaged(path, f"it has {len(frame)} rows, but summary.json records {record['rows']}")
    check_structure(path, frame, summary, verified=record is not None)
    return frame


def _shape(summary: dict | None) -> tuple[int | None, int | None, int | None]:
    """(sentences, layers, heads) as summary.json says, each None where it does not say."""
    if not isinstance(summary, dict):
        return None, None, None

    def count(value) -> int | None:
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None

    sentences = summary.get("sentences")
    return (len(sentences) if isinstance(sentences, list) else None, count(summary.get("layers")),
            count(summary.get("heads_per_layer")))


def check_structure(path: Path, frame: pd.DataFrame, summary: dict | None = None, verified: bool = False) -> None:
    """DamagedTable unless `frame` has the structure every attention or rollout table of `run` has (the module's
    docstring); vectorised, a few passes over the columns. verified: the table's bytes matched the sha256 that
    summary.json records, so a table whose blocks do not fit summary.json's sentences, layers and heads names
    summary.json."""
    if len(frame) == 0:
        raise damaged(path, "it has no rows")
    rollout = "head" not in frame.columns
    sentence = frame["sentence"].to_numpy()
    layer = frame["layer"].to_numpy()
    head = np.ones_like(layer) if rollout else frame["head"].to_numpy()
    query = frame["query_index"].to_numpy()
    key = frame["key_index"].to_numpy()
    weight = frame["weight"].to_numpy()

    finite = np.isfinite(weight)
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0])
        raise damaged(path, f"row {row + 1} has weight {weight[row]}, not a finite number")
    outside = (weight < -CELL_SLACK) | (weight > 1 + CELL_SLACK)
    if outside.any():
        row = int(np.flatnonzero(outside)[0])
        raise damaged(path, f"row {row + 1} has weight {weight[row]:g}, outside 0 to 1 "
                            f"({int(outside.sum())} rows are)")
    for name, values, low in (("sentence", sentence, 1), ("layer", layer, 1), ("head", head, 1),
                              ("query_index", query, 0), ("key_index", key, 0)):
        if values.min() < low:
            raise damaged(path, f"its column {name!r} holds {int(values.min())}; it counts from {low}")

    # The blocks: one per sentence, layer and head, in that order, each n x n in query-then-key order.
    starts = np.flatnonzero(np.r_[True, (sentence[1:] != sentence[:-1]) | (layer[1:] != layer[:-1])
                                  | (head[1:] != head[:-1])])  # (G,) the first row of each block
    sizes = np.diff(np.r_[starts, len(frame)])  # (G,)
    n = np.rint(np.sqrt(sizes)).astype(np.int64)  # (G,) units per sentence of each block
    if not (n * n == sizes).all():
        block = int(np.flatnonzero(n * n != sizes)[0])
        raise damaged(path, f"sentence {sentence[starts[block]]}, layer {layer[starts[block]]}"
                            f"{'' if rollout else f', head {head[starts[block]]}'} has {sizes[block]} rows, not "
                            "n x n for its n words")
    block_of = np.repeat(np.arange(len(starts)), sizes)  # (N,)
    position = np.arange(len(frame)) - starts[block_of]
    units = n[block_of]
    wrong = (query != position // units) | (key != position % units)
    if wrong.any():
        row = int(np.flatnonzero(wrong)[0])
        raise damaged(path, f"row {row + 1} has query_index {query[row]} and key_index {key[row]} where "
                            f"{position[row] // units[row]} and {position[row] % units[row]} belong")
    block_sentence, block_layer, block_head = sentence[starts], layer[starts], head[starts]
    sentences, layers, heads = _shape(summary)
    sentences = sentences or int(block_sentence.max())
    layers = layers or int(block_layer.max())
    heads = 1 if rollout else heads or int(block_head.max())
    found = np.stack([block_sentence, block_layer, block_head])
    # Compared as counts first: a damaged summary.json's layer count (say 10**15) must not size an array.
    expected = np.indices((sentences, layers, heads)).reshape(3, -1) + 1 if sentences * layers * heads == len(
        starts) else np.zeros((3, 0), dtype=np.int64)  # (3, S * L * H) in run's order, or none: the counts differ
    if verified and (found.shape != expected.shape or not (found == expected).all()):
        said = f"{sentences} sentences x {layers} layers" + ("" if rollout else f" x {heads} heads")
        held = f"{int(block_sentence.max())} sentences x {int(block_layer.max())} layers" + (
            "" if rollout else f" x {int(block_head.max())} heads")
        raise damaged(path.with_name("summary.json"), f"its sentences, layers and heads_per_layer ({said}) do not "
                                                      f"fit {path.name}, whose bytes match the sha256 it records "
                                                      f"({held})")
    if found.shape != expected.shape or not (found == expected).all():
        if found.shape == expected.shape:
            block = int(np.flatnonzero((found != expected).any(axis=0))[0])
        else:
            block = min(found.shape[1], expected.shape[1])
        what = "" if rollout else " and head"
        if block < found.shape[1] and block < expected.shape[1]:
            raise damaged(path, f"block {block + 1} is sentence {found[0, block]}, layer {found[1, block]}"
                                f"{'' if rollout else f', head {found[2, block]}'}; expected sentence "
                                f"{expected[0, block]}, layer {expected[1, block]}"
                                f"{'' if rollout else f', head {expected[2, block]}'}")
        raise damaged(path, f"it holds {found.shape[1]} (sentence, layer{what}) blocks, but the run has "
                            f"{sentences * layers * heads} ({sentences} sentences x {layers} layers"
                            f"{'' if rollout else f' x {heads} heads'})")
    per_sentence = n.reshape(sentences, layers * heads)
    if not (per_sentence == per_sentence[:, :1]).all():
        bad = int(np.flatnonzero((per_sentence != per_sentence[:, :1]).any(axis=1))[0])
        raise damaged(path, f"sentence {bad + 1} has blocks of different sizes")

    # One word per unit: every block of a sentence names its units as the sentence's first block does. Compared as
    # codes of the distinct words (a hash of each column once), not word by word.
    key_codes, key_words = pd.factorize(frame["key"])  # (N,) int64, (V,) distinct words
    query_codes, query_words = pd.factorize(frame["query"])
    query_codes = pd.Index(key_words).get_indexer(query_words)[query_codes]  # in key_words' codes; -1: no key
    units_of = per_sentence[:, 0]  # (S,)
    first_block = starts[np.arange(0, len(starts), layers * heads)]  # (S,) the first block of each sentence
    first_row = np.r_[0, np.cumsum(units_of)][:-1]  # (S,) where each sentence's units start in `names`
    names = key_codes[np.repeat(first_block - first_row, units_of) + np.arange(units_of.sum())]  # (sum n,)
    sentence_of = np.repeat(np.arange(sentences), layers * heads)[block_of]  # (N,) sentence index of each row
    mismatch = (key_codes != names[first_row[sentence_of] + key]) | (query_codes != names[first_row[sentence_of] + query])
    if mismatch.any():
        row = int(np.flatnonzero(mismatch)[0])
        raise damaged(path, f"row {row + 1} names unit {key[row]} {quoted(frame['key'].iloc[row])} (or unit "
                            f"{query[row]} {quoted(frame['query'].iloc[row])}), where the sentence's other rows name "
                            "another word")

    # Every query row sums to 1; under the norm measure a row whose keys all add nothing stays all 0, so there (and
    # for a table read without its summary, whose measure is not known) 0 is a row sum too.
    row_starts = np.flatnonzero(key == 0)
    sums = np.add.reduceat(weight, row_starts)  # (rows,)
    slack = ROW_SLACK + CELL_SLACK * np.diff(np.r_[row_starts, len(frame)])
    off = np.abs(sums - 1) > slack
    measure = summary.get("measure", WEIGHTS) if isinstance(summary, dict) else None
    if not rollout and measure in (None, NORM):
        off &= np.abs(sums) > slack
    if off.any():
        bad = int(np.flatnonzero(off)[0])
        row = int(row_starts[bad])
        raise damaged(path, f"the weights of sentence {sentence[row]}, layer {layer[row]}"
                            f"{'' if rollout else f', head {head[row]}'}, query {query[row]} sum to {sums[bad]:.6g}, "
                            f"not 1 ({int(off.sum())} of {len(sums)} rows do not)")
