"""Checks on a shard's sums.json before `merge` adds it up, beyond the format's own (HeadSums.from_json, which
refuses NaN, infinities, negative or fractional counts and totals above their counts): no count larger than any
corpus can have.

JSON allows whole numbers of any size, and Python reads them without complaint: `"blank": 10**400` (an integer
of 401 digits) is a whole number >= 0, so the format's check passes it, and the merged result would report an
absurd count. merge refuses it with one line naming the file and the field.
"""
from __future__ import annotations

from ..engine.heads import COUNT_FIELDS, FIXED_BITS

# No corpus has more lines, sentences, units or pairs than this: 2^53, the largest whole number a float64 (and so
# every JSON reader) holds exactly.
MAX_COUNT = 2**53


def validate_sums_json(data) -> None:
    """ValueError naming the first count of a parsed sums.json (COUNT_FIELDS, layers, heads) above 2^53. The
    caller names the file. Everything else (types, signs, NaN, infinities, the totals) is HeadSums.from_json's
    to check."""
    if not isinstance(data, dict):
        return  # HeadSums.from_json says it is not an object
    for name in (*COUNT_FIELDS, "layers", "heads"):
        value = data.get(name)
        if name == "uniform" and "fixed_point_bits" in data and isinstance(value, int):
            value = value >> FIXED_BITS  # in fixed point: whole nats are what a corpus bounds
        if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > MAX_COUNT \
                and value == value and abs(value) != float("inf"):
            shown = f"a number of {len(str(abs(value)))} digits" if isinstance(value, int) else repr(value)
            raise ValueError(f"field {name!r} is {shown}, more than any corpus can have (at most 2^53)")
