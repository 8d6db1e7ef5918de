"""`merge`: the exact sums of every shard of one corpus run added up, after checking they belong together."""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from collections.abc import Iterable

from ..engine.heads import HeadSums
from .labels import Thresholds
from .reading import CorpusError
from .results import CorpusRun
from .sums_checks import validate_sums_json


def read_shard(folder: Path) -> tuple[dict, HeadSums]:
    """A shard's summary and exact sums; CorpusError if the folder is not a corpus result."""
    folder = Path(folder)
    paths = [folder / "summary.json", folder / "sums.json"]
    if not all(path.is_file() for path in paths):
        raise CorpusError(
            f"{folder} is not a corpus result folder (no summary.json and sums.json); "
            "pass results/corpus/NAME/ folders written by `heads --shard`"
        )
    try:
        data, sums = (json.loads(path.read_text(encoding="utf-8")) for path in paths)
    except (OSError, ValueError) as error:
        raise CorpusError(f"{folder} holds an unreadable summary.json or sums.json ({error})") from None
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
    return data, head_sums


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# What merge reads from a shard's summary.json: field -> (check, what it must be).
SUMMARY_FIELDS = {
    "model": (lambda v: isinstance(v, str) and v, "a model name"),
    "revision": (lambda v: isinstance(v, str) and v, "a revision string"),
    "corpus": (lambda v: isinstance(v, dict) and all(isinstance(v.get(k), str) for k in ("name", "sha256"))
               and v.get("format") in ("text", "jsonl"), 'an object with string "name", "sha256" and "format"'),
    "shard": (lambda v: v is None or (isinstance(v, dict) and _is_int(v.get("index")) and _is_int(v.get("count"))
                                      and 1 <= v["index"] <= v["count"]),
              'null or an object with whole numbers "index" and "count", 1 <= index <= count'),
    "truncate": (lambda v: isinstance(v, bool), "true or false"),
    "thresholds": (lambda v: isinstance(v, dict) and set(v) == set(asdict(Thresholds()))
                   and all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x <= 1 for x in v.values()),
                   f"an object of {', '.join(asdict(Thresholds()))} between 0 and 1"),
    "layers": (lambda v: _is_int(v) and v >= 1, "a whole number >= 1"),
    "heads_per_layer": (lambda v: _is_int(v) and v >= 1, "a whole number >= 1"),
    "versions": (lambda v: isinstance(v, dict), "an object"),
}


def check_summary(folder: Path, data) -> None:
    """CorpusError naming the folder and the first field of summary.json that merge cannot use."""
    if not isinstance(data, dict):
        raise CorpusError(f"{folder}/summary.json is not a JSON object")
    for name, (valid, expected) in SUMMARY_FIELDS.items():
        if name not in data:
            raise CorpusError(f"{folder}/summary.json has no field {name!r}")
        if not valid(data[name]):
            raise CorpusError(f"{folder}/summary.json: field {name!r} is {data[name]!r}, expected {expected}")


# Settings under which a sentence's float32 maps can differ in the last bits (real_attention.engine.batches): shards
# that differ in one of them merge to sums that match an unsharded run to about 6 decimals, not bit for bit.
SAME_FOR_EXACT_SUMS = ("batch_size", "torch_threads", "device", "shapes")
# What a shard written before a setting was recorded ran with: the shape rules were version 1 until `shapes` was added.
UNRECORDED = {"shapes": 1}
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
            raise CorpusError(f"{folder} was not written with --shard; merge takes the shards of one run")
        for key in SAME_IN_EVERY_SHARD:
            if data.get(key) != first.get(key):
                raise CorpusError(f"{folder} and {first_folder} differ in {key}; merge takes the shards of one run")
        if data["shard"]["count"] != first["shard"]["count"]:
            raise CorpusError(f"{folder} and {first_folder} come from runs with different shard counts")
    count = first["shard"]["count"]
    by_index: dict[int, tuple[Path, HeadSums]] = {}
    for folder, data, sums in shards:
        index = data["shard"]["index"]
        if index in by_index:
            raise CorpusError(f"{folder} and {by_index[index][0]} are both shard {index}/{count}")
        by_index[index] = (folder, sums)
    missing = sorted(set(range(1, count + 1)) - set(by_index))
    if missing:
        raise CorpusError(f"shard(s) {', '.join(f'{i}/{count}' for i in missing)} missing; merge needs all {count}")
    total = by_index[1][1]
    for index in range(2, count + 1):  # shard order, whatever the argument order: the same bits every time
        total = total + by_index[index][1]
    run = CorpusRun(
        model=first["model"],
        revision=first["revision"],
        name=first["corpus"]["name"],
        sha256=first["corpus"]["sha256"],
        format=first["corpus"]["format"],
        truncate=first["truncate"],
        versions=first["versions"],
        thresholds=Thresholds(**first["thresholds"]),
        engine={"name": "merge", "shards": count, **shared_settings([data for _, data, _ in shards])},
        units=first.get("units", "tokenizer"),  # results from before the text rule used the tokenizer's words
        measure=first.get("measure", "weights"),
    )
    return run, total


def shared_settings(summaries: list[dict]) -> dict:
    """The SAME_FOR_EXACT_SUMS settings of the shards' engines: each value if every shard has it, else None, and
    "differs": the names of those that are missing or not the same in every shard. A shard that does not record
    `shapes` ran under the first shape rules (UNRECORDED)."""
    values = {key: {json.dumps((data.get("engine") or {}).get(key, UNRECORDED.get(key))) for data in summaries}
              for key in SAME_FOR_EXACT_SUMS}
    shared = {key: json.loads(next(iter(seen))) if len(seen) == 1 else None for key, seen in values.items()}
    return {**shared, "differs": [key for key in SAME_FOR_EXACT_SUMS if shared[key] is None]}


def differing_settings_warning(engine: dict) -> str | None:
    """merge's warning when the shards did not all run with the same batch size, torch threads, device and batch
    shape rules."""
    differs = engine.get("differs") or []
    if not differs:
        return None
    names = ", ".join({"batch_size": "--batch-size", "torch_threads": "torch threads",
                       "shapes": "batch shapes (versions of real-attention that pad batches differently)"}.get(key, key)
                      for key in differs)
    return (f"the shards did not all run with the same {names} (or some do not say): a sentence's maps can differ "
            "in the last bits with these, so the merged means match an unsharded run to about 6 decimals, not bit "
            "for bit")
