"""Checks on a shard's sums.json before `merge` adds it up, apart from the format's own (HeadSums.from_json):
every number in it finite, and no count larger than any corpus can have.

JSON allows numbers Python reads without complaint but no corpus run writes: `"blank": 10**400` (an integer of
401 digits), `1e400` (read as infinity), `NaN`. Added up, they would give a merged result of absurd or
non-finite counts and means; merge refuses them with one line naming the file and the field.
"""
from __future__ import annotations

import math

from ..engine.heads import COUNT_FIELDS

# No corpus has more lines, sentences, units or pairs than this: 2^53, the largest whole number a float64 (and so
# every JSON reader) holds exactly.
MAX_COUNT = 2**53


def _bad_number(value, where: str, bound: bool) -> str | None:
    """The first non-finite number in a JSON value (with `bound`, or one above MAX_COUNT), as 'field ... is ...';
    None if there is none."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"field {where!r} is {value!r}, not a finite number"
    if bound and isinstance(value, (int, float)) and abs(value) > MAX_COUNT:
        shown = f"a number of {len(str(abs(value)))} digits" if isinstance(value, int) else repr(value)
        return f"field {where!r} is {shown}, more than any corpus can have (at most 2^53)"
    if isinstance(value, dict):
        return next((bad for key, item in value.items() if (bad := _bad_number(item, f"{where}.{key}", bound))), None)
    if isinstance(value, list):
        return next((bad for index, item in enumerate(value) if (bad := _bad_number(item, f"{where}[{index}]", bound))),
                    None)
    return None


def validate_sums_json(data) -> None:
    """ValueError naming the first field of a parsed sums.json that holds a non-finite number (NaN, an infinity),
    or a count (COUNT_FIELDS, layers, heads) above 2^53; the counts first, then every other field. The sums'
    totals are left to the format's own check (each at most its count). The caller names the file."""
    if not isinstance(data, dict):
        return  # HeadSums.from_json says it is not an object
    counts = (*COUNT_FIELDS, "layers", "heads")
    for name in (*counts, *sorted(set(data) - set(counts), key=str)):
        if name in data and (bad := _bad_number(data[name], str(name), name in counts)) is not None:
            raise ValueError(bad)
