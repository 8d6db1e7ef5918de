"""The Python API behind `import real_attention as ra`: load, attend, classify, heatmap, corpus_stats.

Every command of the CLI is a thin layer over these functions. They raise only the errors of
real_attention.engine.errors for bad input; torch, transformers and matplotlib are imported when first needed.
"""
from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

from ..engine.errors import InputError
from ..engine.units import check_rule

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from ..corpus.sums import Thresholds
    from ..engine.models import LoadedModel
    from ..engine.pipeline import RunResult
    from ..engine.words import WordAttention

DEFAULT_LANG = "es"  # the lesson's


def load(model: str | None = "minilm", *, revision: str | None = None, lang: str | None = None,
         device: str = "cpu", offline: bool = False) -> LoadedModel:
    """Load a model with eager attention, pinned to an exact revision.

    model: "minilm" (the packaged offline encoder), "smollm2" (the packaged offline decoder), a Hub id (with `revision`, default "main"), a local folder,
    or None for the pinned model of `lang` ("es": mBERT, "en": bert-base-uncased).
    Returns a LoadedModel: `.layers`, `.heads`, `.revision` (the resolved commit, or "sha256:..." of a
    folder's weights), `.tokenizer`, `.model`. Raises ModelUnavailable (with what to do) or InputError.
    """
    from ..engine.models import choose_model, load_model

    if model is None and lang is None:
        lang = DEFAULT_LANG
    return load_model(choose_model(lang, model, revision), device=device, offline=offline)


@dataclass(frozen=True)
class Attention(Sequence):
    """Word-level attention of S sentences from one model: `att[i]` is sentence i's WordAttention.

    Each `att[i].weights` is float32 numpy `(layers, heads, n_i, n_i)`, query rows by key columns, every row
    summing to 1; `att[i].words` are the n_i units as written (special tokens keep the tokenizer's text).
    `att.rollout[i]` is sentence i's rollout of the same maps after each layer, `(layers, n_i, n_i)`.
    With `focus` and `sense` given to `attend`, `result` holds the located words and the head labels, and
    in Jupyter the object shows the interactive report inline (offline, in an iframe).
    """

    sentences: tuple[WordAttention, ...]  # (S,)
    model: str  # as the user named it
    revision: str  # resolved commit, or sha256 of a folder's weights
    versions: dict[str, str]  # python, torch, transformers
    result: RunResult | None = None  # with focus and sense: located words and head labels
    units: str = "text"  # the unit rule the sentences were cut by: "text" or "tokenizer"
    measure: str = "weights"  # what the maps measure: "weights" or "norm" (real_attention.engine.measures)
    rollout: tuple = ()  # (S,) each (layers, n_i, n_i) float32: the attention rollout (real_attention.engine.rollout)
    causal: bool = False  # a decoder's maps: W[i, j] = 0 for j > i

    def __post_init__(self) -> None:
        shapes = {(s.layers, s.heads) for s in self.sentences}
        assert len(shapes) <= 1, shapes

    @overload
    def __getitem__(self, index: int) -> WordAttention: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[WordAttention, ...]: ...

    def __getitem__(self, index):
        return self.sentences[index]

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def layers(self) -> int:
        return self.sentences[0].layers

    @property
    def heads(self) -> int:
        return self.sentences[0].heads

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
        return report_html(result, self.summary())

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


def _texts(texts: str | Iterable[str]) -> list[str]:
    items = [texts] if isinstance(texts, str) else list(texts)
    if not items:
        raise InputError("attend needs at least one sentence")
    for number, text in enumerate(items, start=1):
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"sentence {number} is {'empty' if isinstance(text, str) else repr(text)}; "
                             "pass non-empty strings")
    return [text.strip() for text in items]


def attend(model: LoadedModel, texts: str | Iterable[str], *, focus: str | None = None,
           sense: str | Sequence[str] | None = None, lang: str = "", units: str = "text",
           measure: str = "weights") -> Attention:
    """Every head's word-level attention for each sentence, in one batched forward pass.

    texts: one sentence or several. With `focus` (the ambiguous word) and `sense` (one word per sentence that
    decides its sense) the words are located and every head is classified, as `real-attention run` does.
    units: "text" (words as the reader sees them, the same for every tokenizer; the focus and sense words are
    always units) or "tokenizer" (the tokenizer's own words, as Clark et al.'s code has them).
    measure: "weights" (post-softmax attention) or "norm" (||alpha f(x)||, Kobayashi et al. 2020, rows
    rescaled to sum to 1); see real_attention.engine.measures.
    Raises UnitError (an InputError) if a piece straddles a focus or sense word and its neighbour.
    Raises InputError (a sentence too long, a word not found, an unknown measure). Warns (UserWarning) naming
    the words the model's vocabulary has no pieces for: they run as the unknown token.
    """
    from ..engine.measures import check_measure
    from ..engine.models import check_encodes
    from ..engine.pipeline import analyse, attend_with_sums, versions

    check_measure(measure)
    items = _texts(texts)
    check_rule(units)
    note = check_encodes(model, items)
    if note:  # the words still run, as [UNK]
        import warnings

        warnings.warn(note, UserWarning, stacklevel=2)
    if focus is None and sense is None:
        attentions, _, rollouts = attend_with_sums(model, items, units=units, measure=measure)
        return Attention(sentences=tuple(attentions), model=model.choice.name, revision=model.revision,
                         versions=versions(), units=units, measure=measure, rollout=tuple(rollouts),
                         causal=model.causal)
    result = analyse(model, sentence_set(items, focus, sense, lang), units=units, measure=measure)
    return from_result(result)


def from_result(result: RunResult) -> Attention:
    """An Attention around a finished run (what `run` computed)."""
    return Attention(sentences=tuple(s.attention for s in result.sentences), model=result.model,
                     revision=result.revision, versions=result.versions, result=result, units=result.units,
                     measure=result.measure, rollout=result.rollout, causal=result.causal)


def sentence_set(texts: list[str], focus: str | None, sense: str | Sequence[str] | None, lang: str = ""):
    """A SentenceSet from the API's arguments; InputError says what is missing."""
    from ..engine.sentences import Sentence, SentenceSet, same_word

    if focus is None or sense is None:
        raise InputError("give both focus= (the ambiguous word) and sense= (one word per sentence)")
    senses = [sense] if isinstance(sense, str) else list(sense)
    if len(senses) != len(texts):
        raise InputError(f"sense= has {len(senses)} word(s) for {len(texts)} sentence(s); give one per sentence")
    for number, word in enumerate(senses, start=1):
        if same_word(word, focus):
            raise InputError(f"sentence {number}: the sense word {word!r} is the focus word itself")
    return SentenceSet(lang=lang, focus=focus, sentences=tuple(Sentence(t, s) for t, s in zip(texts, senses)))


def classify(att: Attention, focus: str | None = None, sense: str | Sequence[str] | None = None) -> pd.DataFrame:
    """The heads.csv table: one row per head (layer and head from 1) with its focus-word labels
    (sense_head, marker_head) and its pooled statistics. Uses the focus and sense given to `attend`
    unless new ones are given here (no model needed: the words are located in `att`)."""
    from ..outputs.tables import heads_frame

    if focus is None and sense is None:
        return heads_frame(att._focused("classify").report)
    from ..engine.pipeline import classify_words

    texts = [s.text for s in att.sentences]
    result = classify_words(list(att.sentences), sentence_set(texts, focus, sense),
                            model=att.model, revision=att.revision, versions=att.versions, units=att.units,
                            measure=att.measure, causal=att.causal)
    return heads_frame(result.report)


def heatmap(sentence: WordAttention, layer: int, head: int, *, focus: str | None = None,
            sense: str | None = None, model: str = "", revision: str = "", number: int = 1,
            measure: str = "weights") -> Figure:
    """The word x word heatmap of one head on one sentence, as a matplotlib Figure (no pyplot, no backend change).

    layer and head count from 1, as in every table. `focus`/`sense` (words of the sentence) frame the focus
    row and colour the sense column. `measure`: what the maps hold, for the title and colour bar (pass
    `att.measure` for the sentences of `ra.attend(..., measure="norm")`).
    """
    from ..engine.focus import find_word
    from ..engine.measures import check_measure
    from ..outputs.plots import draw_heatmap

    check_measure(measure)

    for name, value, count in (("layer", layer, sentence.layers), ("head", head, sentence.heads)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= count:
            raise InputError(f"{name} {value!r} is out of range: 1 to {count}")
    focus_index = None if focus is None else find_word(sentence, focus, "focus")
    sense_index = None if sense is None else find_word(sentence, sense, "sense")
    return draw_heatmap(sentence.weights[layer - 1, head - 1], sentence.words, focus=focus_index,
                        sense=sense_index, model=model or "model", revision=revision, layer=layer - 1,
                        head=head - 1, sentence=number - 1, text=sentence.text, measure=measure)


def corpus_stats(model: LoadedModel, lines: Iterable[str], *, batch_size: int = 32, truncate: bool = False,
                 thresholds: Thresholds | None = None, progress=None, units: str = "text",
                 measure: str = "weights") -> pd.DataFrame:
    """The corpus heads.csv table: per head (layer, head from 1), its label and the pooled statistics over
    every word of every line, plus n_sentences and n_words. Blank lines are skipped; lines longer than the
    model takes are skipped (or cut, with truncate=True). Memory does not grow with the number of lines.
    units: the unit rule, and measure: "weights" or "norm", as in `attend`."""
    from ..corpus.sums import CorpusReader, Thresholds, check_analysable, corpus_sums, heads_frame, label_heads
    from ..engine.measures import check_measure

    check_measure(measure)
    # The reader takes the bytes of a file: one line each, so a text with a newline stays one sentence.
    stream = ((" ".join(str(line).splitlines()) + "\n").encode("utf-8") for line in lines)
    reader = CorpusReader(stream, "text", source="lines")
    sums = corpus_sums(model, reader, batch_size=batch_size, truncate=truncate, progress=progress,
                       units=check_rule(units), measure=measure)
    check_analysable(sums, "the lines")
    labels = label_heads(sums.means(), sums.uniform_entropy, thresholds or Thresholds())
    return heads_frame(sums, labels)
