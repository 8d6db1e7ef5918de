"""Labels of heads from their pooled means: the thresholds (Clark et al. 2019) and the rule of precedence."""
from __future__ import annotations

import numbers

from dataclasses import asdict, dataclass
from collections.abc import Iterable

import numpy as np

from .reading import CorpusError


# The labels a head can get, in order of precedence: the first rule a head meets decides its label.
# "first" (the first unit, whatever it is) comes after the markers: when the first unit is a special token, its
# heads are first_special heads; it names the attention sink of a decoder whose tokenizer adds no special token.
LABELS = ("previous", "next", "self", "first_special", "last_special", "punct", "markers", "first", "broad", "mixed")


@dataclass(frozen=True)
class Thresholds:
    """When a head gets a label; defaults follow Clark et al. (2019), "What Does BERT Look At?".

    Precedence, first match wins: previous, next, self, first_special, last_special, punct, markers, first,
    broad, otherwise mixed.
    """

    # previous / next / self: mean weight on the unit at PREVIOUS_OFFSET / NEXT_OFFSET / the query itself
    # above this. Clark et al. Sec. 3.1 name the heads that put "> 50% of their attention" on the
    # previous or next token.
    position: float = 0.5
    # first_special / last_special / punct / markers / first: mean weight on the first special token ([CLS], <s>) /
    # the last one ([SEP], </s>) / punctuation-only words / every marker / the first unit, whatever it is
    # above this. Clark et al. Sec. 3.2: "over half of BERT's attention" in layers 6-10 goes to [SEP].
    marker: float = 0.5
    # broad: mean row entropy at least this fraction of the entropy of uniform attention over the same rows
    # (the mean of ln n). Clark et al. Sec. 3.3: broad heads "spend at most 10% of their attention mass on
    # any single word" and come close to their uniform-attention baseline.
    broad: float = 0.8

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise CorpusError(f"threshold {name} must be a number between 0 and 1, not {type(value).__name__} "
                                  f"{value!r:.40}")
            if not 0.0 <= value <= 1.0:
                raise CorpusError(f"threshold {name} = {value} is not between 0 and 1")

    @classmethod
    def parse(cls, settings: Iterable[str]) -> Thresholds:
        """The defaults with NAME=VALUE settings (--threshold) applied; CorpusError names a bad one."""
        names = list(asdict(cls()))
        values: dict[str, float] = {}
        for setting in settings:
            if not isinstance(setting, str):
                raise CorpusError(f"a threshold setting must be a string NAME=VALUE (e.g. 'broad=0.7'), not "
                                  f"{type(setting).__name__} {setting!r:.40}")
            name, equals, text = setting.partition("=")
            name = name.strip()
            if not equals or name not in names:
                raise CorpusError(f"thresholds (--threshold) {setting!r}: expected NAME=VALUE with NAME one of "
                                  f"{', '.join(names)}")
            try:
                value = float(text)
            except ValueError:
                raise CorpusError(f"thresholds (--threshold) {setting!r}: {text.strip()!r} is not a number") from None
            if not 0.0 <= value <= 1.0:
                raise CorpusError(f"thresholds (--threshold) {setting!r}: {name} must be between 0 and 1")
            values[name] = value
        return cls(**values)


def thresholds_from(value: object) -> Thresholds:
    """The API's thresholds in any of the forms it takes: None (the defaults), a Thresholds, a dict {"broad": 0.7},
    one "name=value" string or a list of them; CorpusError otherwise (or for a bad name or value)."""
    if value is None:
        return Thresholds()
    if isinstance(value, Thresholds):
        return value
    if isinstance(value, dict):
        value = [f"{name}={float(number)!r}" if isinstance(number, numbers.Real) and not isinstance(number, bool)
                 else f"{name}={number}" for name, number in value.items()]  # numpy's floats too, written plainly
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise CorpusError(f"thresholds must be a ra.Thresholds, a dict, a \"name=value\" string or a list of them, "
                          f"not {type(value).__name__}")
    return Thresholds.parse(tuple(value))


def label_heads(means: dict[str, np.ndarray], uniform_entropy: float, thresholds: Thresholds) -> np.ndarray:
    """Pooled means, each (layers, heads) -> (layers, heads) array of labels from LABELS."""
    rules = [  # in LABELS order
        ("previous", means["prev"] > thresholds.position),
        ("next", means["next"] > thresholds.position),
        ("self", means["self"] > thresholds.position),
        ("first_special", means["first_special"] > thresholds.marker),
        ("last_special", means["last_special"] > thresholds.marker),
        ("punct", means["punct"] > thresholds.marker),
        ("markers", means["markers"] > thresholds.marker),
        ("first", means["first"] > thresholds.marker),
        ("broad", means["entropy"] >= thresholds.broad * uniform_entropy),
    ]
    assert [name for name, _ in rules] == list(LABELS[:-1])
    labels = np.full(means["prev"].shape, LABELS[-1], dtype=object)
    for name, hit in reversed(rules):  # the earlier rule is written last, so it wins
        labels[hit] = name
    return labels
