"""`merge`: the exact sums of every shard of one corpus run added up, after checking they belong together."""
from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import asdict
from pathlib import Path
from collections.abc import Iterable

from ..engine.checks import is_number, is_whole, not_a_file, shown
from ..engine.heads import HeadSums
from ..engine.measure_names import MEASURES
from ..engine.units import UNIT_RULES
from .labels import Thresholds
from .reading import CorpusError
from .results import CorpusRun
from .sums_checks import validate_sums_json


def read_shard(folder: Path) -> tuple[dict, HeadSums]:
    """A shard's summary and exact sums; CorpusError if the folder is not a corpus result."""
    folder = Path(folder)
    paths = [folder / "summary.json", folder / "sums.json"]
    for path in paths:
        what = not_a_file(path)
        if what is not None:
            raise CorpusError(f"{path} is {what}, not the file `heads --shard` writes; merge takes the shards as "
                              "`heads --shard` wrote them: run that shard again")
    if not all(path.is_file() for path in paths):
        raise CorpusError(
            f"{folder} is not a corpus result folder (no summary.json and sums.json); "
            "pass results/corpus/NAME/ folders written by `heads --shard`"
        )
    parsed = []
    for path in paths:
        try:
            raw = path.read_bytes()
            parsed.append((raw, json.loads(raw.decode("utf-8"))))
        except (OSError, ValueError, RecursionError) as error:  # UnicodeDecodeError, JSONDecodeError: ValueErrors
            why = "nested too deeply" if isinstance(error, RecursionError) else error
            raise CorpusError(f"{path} cannot be read as JSON ({why}); merge takes the shards as "
                              "`heads --shard` wrote them: run that shard again") from None
    (_, data), (sums_bytes, sums) = parsed
    check_summary(folder, data)
    try:
        validate_sums_json(sums)
        head_sums = HeadSums.from_json(sums)
    except ValueError as error:  # check_sums_json names the field
        raise CorpusError(f"{folder / 'sums.json'}: {error}; merge takes the sums.json that `heads --shard` "
                          "wrote, unchanged") from None
    if head_sums.shape != (data["layers"], data["heads_per_layer"]):
        raise CorpusError(f"{folder}: sums.json has {head_sums.shape} heads but summary.json says "
                          f"({data['layers']}, {data['heads_per_layer']})")
    check_same_sums(folder, data, head_sums)
    said = sums.get("shard")  # sums written since they record their shard
    if said is not None and (not isinstance(data["shard"], dict) or said != {key: data["shard"].get(key)
                                                                          for key in ("index", "count")}):
        where = data["shard"] and f"{data['shard'].get('index')}/{data['shard'].get('count')}"
        raise CorpusError(f"{folder}: sums.json holds the sums of shard {_shard_text(said)}, but summary.json says "
                          f"{where or 'no shard'}; merge takes the shards as `heads --shard` wrote them: a copied "
                          "shard folder with another index in summary.json would be added twice")
    if said is not None:  # a shard new enough to record its shard in sums.json records all of these too
        missing = [name for name in RECORDED_SINCE_SHARD if name not in data]
        missing += [] if not isinstance(data["shard"], dict) or "inputs" in data["shard"] else ["shard.inputs"]
        counts = data.get("counts")
        missing += [f"counts.{key}" for key in SUMMARY_COUNTS if not isinstance(counts, dict) or key not in counts]
        if missing:  # without it merge read a default (units: tokenizer) or skipped a check (sums_sha256)
            why = "the check of sums.json's bytes was removed" if missing[0] == "sums_sha256" else "it was removed"
            raise CorpusError(f"{folder / 'summary.json'} has no {missing[0]}, which every shard whose sums.json "
                              f"records its shard has ({why}); merge takes the shards as `heads --shard` wrote "
                              "them: run that shard again")
        if data["uniform_entropy"] is not None and not is_number(data["uniform_entropy"]):  # None: no sentence
            raise CorpusError(f"{folder / 'summary.json'}: field 'uniform_entropy' is "
                              f"{shown(data['uniform_entropy'])}, expected a number")
    recorded = data.get("sums_sha256")  # shards written before it was recorded: the cross-check above alone
    if recorded is not None and hashlib.sha256(sums_bytes).hexdigest() != recorded:
        raise CorpusError(f"{folder / 'sums.json'} is not the sums.json written with its summary.json (its sha256 "
                          f"is not the {recorded[:12]}... that summary.json records); merge takes the shards as "
                          "`heads --shard` wrote them: run that shard again")
    return data, head_sums


# The fields of summary.json that every shard has whose sums.json records its shard (written since 2026-12-06).
RECORDED_SINCE_SHARD = ("sums_sha256", "units", "measure", "causal", "engine", "uniform_entropy", "counts")


def _shard_text(said) -> str:
    return f"{said.get('index')}/{said.get('count')}" if isinstance(said, dict) else shown(said)


# summary.json's counts -> the HeadSums field that holds the same number
SUMMARY_COUNTS = {"lines": "lines", "blank": "blank", "sentences": "sentences", "skipped": "skipped",
                  "truncated": "truncated", "words": "units", "tokens": "tokens"}


def check_same_sums(folder: Path, data: dict, sums: HeadSums) -> None:
    """CorpusError unless sums.json says what its summary.json says: every count summary.json has, `causal` and the
    uniform entropy (the layer x head shape is read_shard's). Catches a sums.json copied from another shard or
    edited by hand in shards too old to record its sha256."""
    counts = data.get("counts", {})
    if not isinstance(counts, dict):
        raise CorpusError(f"{folder}/summary.json: field 'counts' is {counts!r}, expected an object")
    said = [(f"counts.{key}", counts[key], getattr(sums, name))
            for key, name in SUMMARY_COUNTS.items() if key in counts]
    if "causal" in data:
        said.append(("causal", data["causal"], sums.causal))
    for field, recorded, actual in said:
        if type(recorded) is not type(actual) or recorded != actual:
            raise CorpusError(f"{folder}: sums.json does not match its summary.json: {field} is "
                              f"{json.dumps(actual)} in sums.json, {json.dumps(recorded)} in summary.json; merge "
                              "takes the shards as `heads --shard` wrote them: run that shard again")
    entropy = data.get("uniform_entropy")
    if is_number(entropy) and sums.units and not abs(entropy - sums.uniform_entropy) <= 1e-6:  # rounded to 6 places
        raise CorpusError(f"{folder}: sums.json does not match its summary.json: its uniform entropy is "
                          f"{sums.uniform_entropy:.6f}, summary.json says {entropy!r}; merge takes the shards as "
                          "`heads --shard` wrote them: run that shard again")


def _is_sha256(value) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def _shard_record(v) -> bool:
    """summary.json's "shard": null, or index and count, 1 <= index <= count, and (since it is recorded) the
    input layout (statistics.inputs.CorpusText.layout)."""
    if v is None:
        return True
    if not (isinstance(v, dict) and is_whole(v.get("index")) and is_whole(v.get("count"))
            and 1 <= v["index"] <= v["count"]):
        return False
    if "inputs" not in v:  # a shard written before the layout was recorded
        return True
    layout = v["inputs"]
    return isinstance(layout, dict) and is_whole(layout.get("count")) and layout["count"] >= 1 \
        and _is_sha256(layout.get("sha256"))


# What merge reads from a shard's summary.json: field -> (check, what it must be).
SUMMARY_FIELDS = {
    "model": (lambda v: isinstance(v, str) and v, "a model name"),
    "revision": (lambda v: isinstance(v, str) and v, "a revision string"),
    "corpus": (lambda v: isinstance(v, dict) and all(isinstance(v.get(k), str) for k in ("name", "sha256"))
               and v.get("format") in ("text", "jsonl", "mixed")
               and ("limit" not in v or (is_whole(v["limit"]) and v["limit"] >= 1)),
               'an object with string "name", "sha256" and "format" (and a whole number "limit" >= 1, if any)'),
    "shard": (_shard_record, 'null or an object with whole numbers "index" and "count", 1 <= index <= count '
                             '(and "inputs": an object with a whole number "count" and a "sha256")'),
    "truncate": (lambda v: isinstance(v, bool), "true or false"),
    "thresholds": (lambda v: isinstance(v, dict) and set(v) == set(asdict(Thresholds()))
                   and all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 1 for x in v.values()),
                   f"an object of {', '.join(asdict(Thresholds()))} between 0 and 1"),
    "layers": (lambda v: is_whole(v) and v >= 1, "a whole number >= 1"),
    "heads_per_layer": (lambda v: is_whole(v) and v >= 1, "a whole number >= 1"),
    "versions": (lambda v: isinstance(v, dict), "an object"),
}
# Fields that older shards may lack (merge reads the default then); when there, each must be what it says.
OPTIONAL_SUMMARY_FIELDS = {
    "units": (lambda v: v in UNIT_RULES, f"one of {', '.join(map(repr, UNIT_RULES))}"),
    "measure": (lambda v: v in MEASURES, f"one of {', '.join(map(repr, MEASURES))}"),
    "engine": (lambda v: v is None or isinstance(v, dict), "null or an object"),
    "causal": (lambda v: isinstance(v, bool), "true or false"),
    "sums_sha256": (_is_sha256, "the sha256 of sums.json (64 lowercase hex digits)"),
}


def check_summary(folder: Path, data) -> None:
    """CorpusError naming the folder and the first field of summary.json that merge cannot use."""
    if not isinstance(data, dict):
        raise CorpusError(f"{folder}/summary.json is not a JSON object")
    for name, (valid, expected) in {**SUMMARY_FIELDS, **OPTIONAL_SUMMARY_FIELDS}.items():
        if name not in data and name in SUMMARY_FIELDS:
            raise CorpusError(f"{folder}/summary.json has no field {name!r}")
        if name in data and not valid(data[name]):
            raise CorpusError(f"{folder}/summary.json: field {name!r} is {shown(data[name])}, expected {expected}")


# Settings under which a sentence's float32 maps can differ in the last bits (real_attention.engine.batches): shards
# that differ in one of them merge to sums that match an unsharded run to about 6 decimals, not bit for bit.
SAME_FOR_EXACT_SUMS = ("batch_size", "torch_threads", "device", "shapes")
# What a shard written before a setting was recorded ran with: the shape rules were version 1 until `shapes` was added.
UNRECORDED = {"shapes": 1}
# A missing-shard error lists this many; a run of --shard i/1000000000 would list a billion.
MISSING_LISTED = 5
SAME_IN_EVERY_SHARD = ("model", "revision", "corpus", "truncate", "units", "thresholds", "layers", "heads_per_layer",
                       "measure")


def merge_shards(folders: Iterable[Path]) -> tuple[CorpusRun, HeadSums]:
    """Add up the sums of every shard of one corpus run; the result is that of the unsharded run."""
    shards = [(Path(folder), *read_shard(folder)) for folder in folders]
    if not shards:
        raise CorpusError("merge needs at least one shard folder")
    first_folder, first, _ = shards[0]
    for folder, data, _ in shards:
        if data.get("shard") is None:
            raise CorpusError(f"{folder} was not written with shard (--shard); merge takes the shards of one run")
        for key in SAME_IN_EVERY_SHARD:
            if _setting(data, key) != _setting(first, key):
                raise CorpusError(f"{folder} and {first_folder} differ in {_difference(key, data, first)}; merge "
                                  "takes the shards of one run" + (" (the default name is the corpus file's: give "
                                  "every shard the same name (--name))" if _only_the_name_differs(key, data, first)
                                  else ""))
        if data["shard"]["count"] != first["shard"]["count"]:
            raise CorpusError(f"{folder} and {first_folder} come from runs with different shard counts")
    # --shard counts lines within each input: the same corpus read as other files puts other lines in a shard
    layouts = [(folder, data["shard"]["inputs"]) for folder, data, _ in shards if "inputs" in data["shard"]]
    for folder, layout in layouts[1:]:  # a shard written before the layout was recorded: not compared
        base_folder, base = layouts[0]
        if layout != base:
            how = (f"{layout['count']} and {base['count']} inputs" if layout["count"] != base["count"]
                   else "inputs split at other lines")
            raise CorpusError(f"{folder} and {base_folder} read the corpus as {how}: shard (--shard) takes lines i, "
                              "i+N, ... of each input, so their lines overlap or are left out; run every shard with "
                              "the same inputs (--corpus)")
    count = first["shard"]["count"]
    by_index: dict[int, tuple[Path, HeadSums]] = {}
    for folder, data, sums in shards:
        index = data["shard"]["index"]
        if index in by_index:
            raise CorpusError(f"{folder} and {by_index[index][0]} are both shard {index}/{count}")
        by_index[index] = (folder, sums)
    # What the merged summary takes from one shard comes from shard 1, whatever the argument order: the same bytes.
    first = next(data for _, data, _ in shards if data["shard"]["index"] == 1) if 1 in by_index else first
    if len(by_index) < count:  # every index is in 1..count: some are missing (count may be 10**30: no range)
        # the first missing ones lie within len(by_index) + MISSING_LISTED of 1: no range of `count` is built
        listed = list(itertools.islice((i for i in itertools.count(1) if i not in by_index),
                                       min(MISSING_LISTED, count - len(by_index))))
        more = count - len(by_index) - len(listed)
        raise CorpusError(f"shard(s) {', '.join(f'{i}/{count}' for i in listed)}{f' and {more} more' if more else ''}"
                          f" missing; merge needs all {count}")
    total = by_index[1][1]
    for index in range(2, count + 1):  # shard order, whatever the argument order: the same bits every time
        total = total + by_index[index][1]
    run = CorpusRun(
        model=first["model"],
        revision=first["revision"],
        name=first["corpus"]["name"],
        sha256=first["corpus"]["sha256"],
        format=first["corpus"]["format"],
        limit=first["corpus"].get("limit"),
        truncate=first["truncate"],
        versions=first["versions"],
        thresholds=Thresholds(**first["thresholds"]),
        engine={"name": "merge", "shards": count, **shared_settings([data for _, data, _ in shards])},
        units=_setting(first, "units"),
        measure=_setting(first, "measure"),
    )
    return run, total


# What a shard written before a field was recorded ran with: the tokenizer's words before the text rule, the weights
# before other measures.
UNRECORDED_RUN = {"units": "tokenizer", "measure": "weights"}


def _setting(data: dict, key: str):
    return data.get(key, UNRECORDED_RUN.get(key))


def _difference(key: str, data: dict, first: dict) -> str:
    """`key`, or for an object such as corpus its first differing field and both values: what the user must fix."""
    mine, theirs = _setting(data, key), _setting(first, key)
    if isinstance(mine, dict) and isinstance(theirs, dict):
        field = next((name for name in sorted({*mine, *theirs}) if mine.get(name) != theirs.get(name)), None)
        if field is not None:
            return f"{key} {field} ({_value(mine, field)} against {_value(theirs, field)})"
    return key


def _value(record: dict, field: str) -> str:
    """A field's value as a message shows it; a corpus read whole has no limit (the field is left out)."""
    if field == "limit" and record.get(field) is None:
        return "no limit"
    return shown(record.get(field))


def _only_the_name_differs(key: str, data: dict, first: dict) -> bool:
    mine, theirs = data.get(key), first.get(key)
    return key == "corpus" and isinstance(mine, dict) and isinstance(theirs, dict) and \
        {**mine, "name": None} == {**theirs, "name": None}


def shared_settings(summaries: list[dict]) -> dict:
    """The SAME_FOR_EXACT_SUMS settings of the shards' engines: each value if every shard has it, else None, and
    "differs": the names of those that are missing or not the same in every shard. A shard that does not record
    `shapes` ran under the first shape rules (UNRECORDED). "versions" is in "differs" when the shards' versions of
    Python, torch, transformers or real-attention are not all the same."""
    values = {key: {json.dumps((data.get("engine") or {}).get(key, UNRECORDED.get(key))) for data in summaries}
              for key in SAME_FOR_EXACT_SUMS}
    shared = {key: json.loads(next(iter(seen))) if len(seen) == 1 else None for key, seen in values.items()}
    # Other versions of Python, torch, transformers or real-attention can change a sentence's bits (or its tokens)
    versions = len({json.dumps(data.get("versions"), sort_keys=True) for data in summaries}) > 1
    return {**shared, "differs": [key for key in SAME_FOR_EXACT_SUMS if shared[key] is None]
            + (["versions"] if versions else [])}


def differing_settings_warning(engine: dict) -> str | None:
    """merge's warning when the shards did not all run with the same batch size, torch threads, device and batch
    shape rules."""
    differs = engine.get("differs") or []
    if not differs:
        return None
    names = ", ".join({"batch_size": "--batch-size", "torch_threads": "torch threads",
                       "shapes": "batch shapes (versions of real-attention that pad batches or round a "
                                 "sentence's totals differently)",
                       "versions": "versions of Python, torch, transformers or real-attention (the merged summary "
                                   "records shard 1's)"}.get(key, key)
                      for key in differs)
    return (f"the shards did not all run with the same {names} (or some do not say): a sentence's maps can differ "
            "in the last bits with these, so the merged means match an unsharded run to about 6 decimals, not bit "
            "for bit")
