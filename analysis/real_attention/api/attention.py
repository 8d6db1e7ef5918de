"""The result of `ra.attend`: `Attention`, a sequence of sentences' word-level maps from one model."""
from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, overload

from ..engine.errors import InputError

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    from matplotlib.figure import Figure

    from ..engine.models import LoadedModel
    from ..engine.pipeline import RunResult
    from ..engine.words import WordAttention, WordMaps


@dataclass(frozen=True, eq=False)
class Attention(Sequence["WordMaps"]):  # the name only: numpy loads on first use
    """Word-level attention of S sentences from one model: `att[i]` is sentence i's WordMaps (a WordAttention
    whose maps are there).

    Each `att[i].weights` is float32 numpy `(layers, heads, n_i, n_i)`, query rows by key columns, every row
    summing to 1; `att[i].words` are the n_i units as written (special tokens keep the tokenizer's text).
    `att.rollout[i]` is sentence i's rollout of the same maps after each layer, `(layers, n_i, n_i)`.
    With `focus` and `sense` given to `attend`, `result` holds the located words and the head labels, and
    in Jupyter the object shows the interactive report inline (offline, in an iframe).
    """

    sentences: tuple[WordMaps, ...]  # (S,) WordAttentions given are taken as WordMaps (they must have their maps)
    model: str  # as the user named it
    revision: str  # resolved commit, or sha256 of a folder's weights
    versions: dict[str, str]  # python, torch, transformers
    result: RunResult | None = None  # with focus and sense: located words and head labels
    units: str = "text"  # the unit rule the sentences were cut by: "text", "tokenizer" or "words" (given)
    measure: str = "weights"  # what the maps measure: "weights" or "norm" (real_attention.engine.measures)
    rollout: tuple[np.ndarray, ...] = ()  # (S,) each (layers, n_i, n_i) float32: the rollout (engine.rollout)
    causal: bool = False  # a decoder's maps: W[i, j] = 0 for j > i
    # what ra.attend warned about (words the vocabulary lacks or the tokenizer deletes): the report shows it
    warnings: tuple[str, ...] = field(default=(), repr=False)

    @classmethod
    def from_maps(cls, model: LoadedModel, sentences: Iterable[WordAttention], rollout: Iterable[np.ndarray], *,
                  units: str, measure: str) -> Attention:
        """The Attention of the word maps (and their rollouts) that `model` has just computed, with no focus word."""
        from ..engine.pipeline import versions
        from ..engine.words import WordMaps

        return cls(sentences=tuple(map(WordMaps.of, sentences)), model=model.choice.name, revision=model.revision,
                   versions=versions(), units=units, measure=measure, rollout=tuple(rollout), causal=model.causal)

    @classmethod
    def from_result(cls, result: RunResult) -> Attention:
        """The Attention around a finished run (what `run` computed): its maps, located words and head labels."""
        from ..engine.words import WordMaps

        return cls(sentences=tuple(WordMaps.of(s.attention) for s in result.sentences), model=result.model,
                   revision=result.revision, versions=result.versions, result=result, units=result.units,
                   measure=result.measure, rollout=result.rollout, causal=result.causal)

    def __post_init__(self) -> None:
        from ..engine.words import WordMaps

        if not self.sentences:  # layers and heads come from the sentences' maps
            raise InputError("an Attention holds at least one sentence")
        object.__setattr__(self, "sentences", tuple(WordMaps.of(sentence) for sentence in self.sentences))
        shapes = {(s.layers, s.heads) for s in self.sentences}
        if len(shapes) > 1:
            raise InputError(f"the sentences of one Attention come from one model; got maps of {sorted(shapes)} "
                             "(layers, heads)")

    @overload
    def __getitem__(self, index: int) -> WordMaps: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[WordMaps, ...]: ...

    def __getitem__(self, index):
        return self.sentences[index]

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def layers(self) -> int:
        """The model's layers (each sentence's maps have this many)."""
        return self.sentences[0].layers

    @property
    def heads(self) -> int:
        """Heads per layer."""
        return self.sentences[0].heads

    def heatmap(self, index: int, layer: int | np.integer, head: int | np.integer, *, focus: str | None = None,
                sense: str | None = None) -> Figure:
        """The word x word heatmap of one head on sentence `index` (as in att[index], from 0), as a matplotlib
        Figure titled with this Attention's model, revision and measure. layer and head count from 1.
        focus/sense: words of the sentence to frame; with focus and sense given to `attend`, theirs."""
        from .api import heatmap

        return heatmap(self, layer, head, index=index, focus=focus, sense=sense)

    def frame(self) -> pd.DataFrame:
        """The tidy table of attention.csv: sentence, layer, head (from 1), query_index, query, key_index, key,
        weight; one row per sentence, head, query and key."""
        from ..outputs.tables import attention_frame

        return attention_frame(list(self.sentences))

    def summary(self) -> dict:
        """summary.json's content (needs focus and sense)."""
        from ..outputs.tables import summary

        return summary(self._focused("summary"))

    def report_html(self) -> str:
        """The whole self-contained report page, as report.html (needs focus and sense)."""
        from ..outputs.report import report_html

        result = self._focused("report_html")
        return report_html(result, self.summary(), notes=self.notes)

    @property
    def notes(self) -> tuple[str, ...]:
        """What a reader must see beside the maps, as the report and the live page show it: ra.attend's warnings
        (words the vocabulary lacks or the tokenizer deletes) and the words of the text rule one piece joins."""
        from ..engine.units import joined_notes

        return self.warnings + joined_notes([sentence.joined for sentence in self.sentences])

    def _focused(self, what: str) -> RunResult:
        if self.result is None:
            raise InputError(f"{what} needs the focus word: call ra.attend(model, texts, focus=..., sense=[...])")
        return self.result

    def __repr__(self) -> str:
        focus = "" if self.result is None else f", focus {self.result.sentence_set.focus!r}"
        measure = "" if self.measure == "weights" else f", measure {self.measure}"
        return (f"<Attention: {len(self)} sentence(s), {self.layers} layers x {self.heads} heads of "
                f"{self.model}{focus}{measure}>")

    def _repr_html_(self) -> str:
        if self.result is not None:
            from ..outputs.report import report_iframe

            return report_iframe(self.report_html())
        rows = "".join(
            f"<tr><td>{i + 1}</td><td>{html.escape(' '.join(s.words))}</td><td>{len(s.words)}</td></tr>"
            for i, s in enumerate(self.sentences)
        )
        return (f"<div><b>{html.escape(repr(self))}</b><table><tr><th>sentence</th><th>units</th><th>n</th></tr>"
                f"{rows}</table><p>Pass <code>focus=</code> and <code>sense=</code> to <code>ra.attend</code> "
                "for the interactive report.</p></div>")
