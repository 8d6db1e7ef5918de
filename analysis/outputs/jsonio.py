"""The one place the tool turns data into JSON: sorted keys, UTF-8 as written, and never NaN or Infinity.

JSON has no NaN: a bare `NaN` in a file makes it unreadable to most parsers. A number that does not exist (the
mean over no units) is written as null, deliberately, where the data is built; if a NaN still reaches this
point it is a bug, and ValueError says so instead of writing a file no one can read.
"""
from __future__ import annotations

import json
from pathlib import Path


def json_text(data, compact: bool = False) -> str:
    """data -> JSON text with sorted keys (indented by 2, or compact); ValueError on NaN or an infinity."""
    layout = {"separators": (",", ":")} if compact else {"indent": 2}
    return json.dumps(data, sort_keys=True, ensure_ascii=False, allow_nan=False, **layout)


def write_json(data, path: Path) -> None:
    """Write json_text(data) and a newline to `path`, UTF-8."""
    Path(path).write_text(json_text(data) + "\n", encoding="utf-8")
