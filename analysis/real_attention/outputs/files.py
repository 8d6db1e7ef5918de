"""Writing tables and JSON, deterministically: the CSV edge of every table and the one place data becomes JSON.

CSV: a fixed float format (6 decimals), "\n" line ends, bool columns as true/false. JSON: sorted keys, UTF-8
as written, and never NaN or Infinity.

JSON has no NaN: a bare `NaN` in a file makes it unreadable to most parsers. A number that does not exist (the
mean over no units) is written as null, deliberately, where the data is built; if a NaN still reaches this
point it is a bug, and ValueError says so instead of writing a file no one can read.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

FLOAT_FORMAT = "%.6f"


def csv_flags(frame: pd.DataFrame) -> pd.DataFrame:
    """The CSV edge: bool columns (sense_head, marker_head, ...) as true/false, as every CSV of this tool has
    them; the DataFrames the API returns keep them bool."""
    import numpy as np

    flags = [name for name in frame.columns if frame[name].dtype == bool]
    if not flags:
        return frame
    return frame.assign(**{name: np.where(frame[name], "true", "false") for name in flags})


def write_csv(frame: pd.DataFrame, path: Path, float_format: str = FLOAT_FORMAT) -> None:
    """float_format: 6 decimals, as weights are; scores whose size is unknown keep 6 significant digits ("%.6g")."""
    csv_flags(frame).to_csv(path, index=False, float_format=float_format, lineterminator="\n")


def write_csv_chunks(frames, path: Path) -> None:
    """Write the frames one after another as one CSV (one header), without holding more than one in memory;
    the bytes are those of write_csv on their concatenation."""
    with open(path, "w", encoding="utf-8", newline="") as handle:
        for number, frame in enumerate(frames):
            csv_flags(frame).to_csv(handle, header=number == 0, index=False, float_format=FLOAT_FORMAT,
                                    lineterminator="\n")


def _plain(value):
    """A numpy scalar (an option given as np.int64, a count numpy made) as the Python number it holds."""
    import numpy as np

    if isinstance(value, np.generic) and isinstance(value.item(), (bool, int, float)):
        return value.item()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def json_text(data, compact: bool = False) -> str:
    """data -> JSON text with sorted keys (indented by 2, or compact); ValueError on NaN or an infinity."""
    layout = {"separators": (",", ":")} if compact else {"indent": 2}
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, allow_nan=False, default=_plain, **layout)
    # a lone surrogate (a file name that is not UTF-8, as Python decodes it) cannot be written as UTF-8: as its
    # \uXXXX escape (it can only stand inside a JSON string) json.loads gives back the same str
    from ..engine.text import SURROGATE

    return SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def write_json(data, path: Path) -> None:
    """Write json_text(data) and a newline to `path`, UTF-8."""
    Path(path).write_text(json_text(data) + "\n", encoding="utf-8")
