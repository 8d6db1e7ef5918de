"""The Python API behind `import real_attention as ra`: load, attend, classify, heatmap, corpus_stats.

Every command of the CLI is a thin layer over these functions. They raise only the errors of
real_attention.engine.errors for bad input; torch, transformers and matplotlib are imported when first needed.
"""
from __future__ import annotations

import html
import numbers
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from ..engine.errors import InputError
from ..engine.text import check_text, is_blank, text_problem
from ..engine.units import check_rule

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from ..engine.mixing import Mixing
    from ..statistics.sums import Thresholds
    from ..engine.models import LoadedModel
    from ..engine.pipeline import RunResult
    from ..engine.progress import Progress
    from ..engine.words import WordAttention

DEFAULT_LANG = "es"  # the lesson's


def load(model: str | None = "minilm", *, revision: str | None = None, lang: str | None = None,
         device: str = "cpu", offline: bool = False) -> LoadedModel:
    """Load a model with eager attention, pinned to an exact revision.

    model: "minilm" (the packaged offline encoder), "smollm2" (the packaged offline decoder), a Hub id (with
    `revision`, default "main"), a local folder (a string or a path), or None for the pinned model of `lang`
    ("es": mBERT, "en": bert-base-uncased).
    Returns a LoadedModel: `.layers`, `.heads`, `.revision` (the resolved commit, or "sha256:..." of a
    folder's weights), `.tokenizer`, `.model`, `.causal`. Raises ModelUnavailable (with what to do) or InputError.
    """
    from ..engine.models import choose_model, load_model

    if isinstance(model, os.PathLike):
        model = os.fspath(model)
    _optional_text(model, "model", "a model name, a Hub id or a folder")
    _optional_text(revision, "revision", "a branch, tag or commit")
    _optional_text(lang, "lang", "a language code such as \"es\"")
    _text(device, "device", "such as \"cpu\" or \"cuda\"")
    _flag(offline, "offline")
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
    units: str = "text"  # the unit rule the sentences were cut by: "text", "tokenizer" or "words" (given)
    measure: str = "weights"  # what the maps measure: "weights" or "norm" (real_attention.engine.measures)
    rollout: tuple = ()  # (S,) each (layers, n_i, n_i) float32: the attention rollout (real_attention.engine.rollout)
    causal: bool = False  # a decoder's maps: W[i, j] = 0 for j > i

    def __post_init__(self) -> None:
        shapes = {(s.layers, s.heads) for s in self.sentences}
        if len(shapes) > 1:
            raise InputError(f"the sentences of one Attention come from one model; got maps of {sorted(shapes)} "
                             "(layers, heads)")

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

    def heatmap(self, index: int, layer: int, head: int, *, focus: str | None = None,
                sense: str | None = None) -> Figure:
        """The word x word heatmap of one head on sentence `index` (as in att[index], from 0), as a matplotlib
        Figure titled with this Attention's model, revision and measure. layer and head count from 1.
        focus/sense: words of the sentence to frame; with focus and sense given to `attend`, theirs."""
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


def _kind(value: object) -> str:
    return "None" if value is None else type(value).__name__


def _text(value: object, name: str, what: str) -> str:
    """A non-empty string, or InputError naming the argument."""
    if not isinstance(value, str) or not value.strip():
        shown = "an empty string" if isinstance(value, str) else f"{_kind(value)} {value!r:.60}"
        raise InputError(f"{name} must be a non-empty string ({what}), not {shown}")
    return check_text(value, name)


def _optional_text(value: object, name: str, what: str) -> str | None:
    return None if value is None else _text(value, name, what)


def _flag(value: object, name: str) -> bool:
    if not isinstance(value, (bool, numbers.Integral)) or value not in (0, 1):
        raise InputError(f"{name} must be True or False, not {_kind(value)} {value!r:.60}")
    return bool(value)


def whole_number(value: object, name: str, low: int = 1, high: int | None = None) -> int:
    """Any integral number (int, numpy int64, ...) from `low` to `high` as an int, or InputError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"{name} must be a whole number, not {_kind(value)} {value!r:.60}")
    number = int(value)
    if number < low or (high is not None and number > high):
        span = f"{low} to {high}" if high is not None else f"at least {low}"
        raise InputError(f"{name} {number} is out of range: {span}")
    return number


def _strings(values: object, name: str, item: str = "sentence") -> list[str]:
    """A string (one item) or an iterable of non-empty strings as a list; InputError names the argument and
    the item. bytes are refused (decode them first), as is any item that is no string: None and 3 are never
    "None" and "3"."""
    if isinstance(values, str):
        return [values]
    if isinstance(values, (bytes, bytearray, memoryview)):
        raise InputError(f"{name} must be a string or a list of strings, not bytes; decode them first "
                         "(e.g. data.decode('utf-8'))")
    if not isinstance(values, Iterable):
        raise InputError(f"{name} must be a string or a list of strings, not {_kind(values)} {values!r:.60}")
    items = list(values)
    for number, value in enumerate(items, start=1):
        if not isinstance(value, str):
            raise InputError(f"{name}: {item} {number} is {_kind(value)} {value!r:.60}, not a string")
        if not value.strip():
            raise InputError(f"{name}: {item} {number} is empty; pass non-empty strings")
        check_text(value, f"{name}: {item} {number}")
    return items


def _texts(texts: object) -> list[str]:
    items = [text.strip() for text in _strings(texts, "texts")]
    if not items:
        raise InputError("attend needs at least one sentence (texts is empty)")
    return items


def _loaded(model: object, function: str) -> LoadedModel:
    from ..engine.models import LoadedModel

    if not isinstance(model, LoadedModel):
        raise InputError(f"{function}: model must be a loaded model (model = ra.load(\"minilm\")), "
                         f"not {_kind(model)} {model!r:.60}")
    return model


def _given_words(words) -> list[tuple[str, ...]]:
    """words= of attend: sentences, each a list of words -> tuples of stripped words; InputError otherwise."""
    sentences = [words] if isinstance(words, str) else list(words)
    if not sentences:
        raise InputError("attend needs at least one sentence")
    result = []
    for number, sentence in enumerate(sentences, start=1):
        if isinstance(sentence, str):
            raise InputError(f"words= sentence {number} is a string; give each sentence as a list of words, "
                             "e.g. words=[['The', 'bank', '.']]")
        items = list(sentence)
        if not items:
            raise InputError(f"words= sentence {number} has no words")
        for index, word in enumerate(items, start=1):
            if not isinstance(word, str) or not word.strip():
                raise InputError(f"words= sentence {number}, word {index} is "
                                 f"{'empty' if isinstance(word, str) else repr(word)}; pass non-empty strings")
        result.append(tuple(word.strip() for word in items))
    return result


def attend(model: LoadedModel, texts: str | Iterable[str] | None = None, *,
           words: Iterable[Sequence[str]] | None = None, focus: str | None = None,
           sense: str | Sequence[str] | None = None, lang: str = "", units: str = "text",
           measure: str = "weights", batch_size: int = 32, pieces: bool = False) -> Attention:
    """Every head's word-level attention for each sentence, in batched forward passes.

    texts: one sentence or several. Or words (instead of texts): each sentence as its own words, e.g.
    `words=[["The", "bank", "'s", "rates"]]` for pre-tokenised input: the units are exactly those words plus the
    tokenizer's special tokens, the text is the words joined by single spaces, and a piece belongs to the word
    its first character is in (the "words" rule; focus, sense and units do not apply). With `focus` (the
    ambiguous word) and `sense` (one word per sentence that decides its sense) the words are located and every
    head is classified, as `real-attention run` does.
    units: "text" (words as the reader sees them, the same for every tokenizer; the focus and sense words are
    always units) or "tokenizer" (the tokenizer's own words, as Clark et al.'s code has them).
    measure: "weights" (post-softmax attention) or "norm" (||alpha f(x)||, Kobayashi et al. 2020, rows
    rescaled to sum to 1); see real_attention.engine.measures.
    batch_size: at most this many sentences per forward pass; with more sentences they are sorted by length
    into batches (little padding), and the results come back in the order given, the same numbers as one batch.
    pieces: also keep each sentence's piece-level maps: `att[i].pieces` (the tokenizer's pieces, specials
    included) and `att[i].piece_weights`, float32 (layers, heads, t, t), as bertviz and TransformerLens show them.
    Raises UnitError (an InputError) if a piece straddles a focus or sense word and its neighbour.
    Raises InputError (a sentence too long, a word not found, an unknown measure). Warns (UserWarning) naming
    the words the model's vocabulary has no pieces for: they run as the unknown token.
    """
    from ..engine.measures import check_measure
    from ..engine.models import check_encodes
    from ..engine.pipeline import analyse, attend_with_sums, versions

    model = _loaded(model, "attend")
    check_measure(measure)
    if (texts is None) == (words is None):
        raise InputError("give attend either texts or words=, exactly one")
    if words is not None:
        if focus is not None or sense is not None or units != "text":
            raise InputError("words= sets the units and takes no focus=, sense= or units=")
        given = _given_words(words)
        attentions, _, rollouts = attend_with_sums(model, None, words=given, measure=measure,
                                                   batch_size=whole_number(batch_size, "batch_size"),
                                                   pieces=_flag(pieces, "pieces"))
        return Attention(sentences=tuple(attentions), model=model.choice.name, revision=model.revision,
                         versions=versions(), units="words", measure=measure, rollout=tuple(rollouts),
                         causal=model.causal)
    items = _texts(texts)
    check_measure(measure)
    check_rule(units)
    size = whole_number(batch_size, "batch_size")
    keep_pieces = _flag(pieces, "pieces")
    if not isinstance(lang, str):
        raise InputError(f"lang must be a string, not {_kind(lang)} {lang!r:.60}")
    chosen = None if focus is None and sense is None else sentence_set(items, focus, sense, lang)
    note = check_encodes(model, items)
    if note:  # the words still run, as [UNK]
        import warnings

        warnings.warn(note, UserWarning, stacklevel=2)
    if chosen is None:
        attentions, _, rollouts = attend_with_sums(model, items, units=units, measure=measure, batch_size=size,
                                                   pieces=keep_pieces)
        return Attention(sentences=tuple(attentions), model=model.choice.name, revision=model.revision,
                         versions=versions(), units=units, measure=measure, rollout=tuple(rollouts),
                         causal=model.causal)
    result = analyse(model, chosen, units=units, measure=measure, batch_size=size, pieces=keep_pieces)
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
    _text(focus, "focus", "the ambiguous word")
    senses = _strings(sense, "sense", "word")
    if len(senses) != len(texts):
        raise InputError(f"sense= has {len(senses)} word(s) for {len(texts)} sentence(s); give one per sentence")
    for number, word in enumerate(senses, start=1):
        if same_word(word, focus):
            raise InputError(f"sentence {number}: the sense word {word!r} is the focus word itself")
    return SentenceSet(lang=lang, focus=focus, sentences=tuple(Sentence(t, s) for t, s in zip(texts, senses)))


def classify(att: Attention, focus: str | None = None, sense: str | Sequence[str] | None = None) -> pd.DataFrame:
    """The heads.csv table: one row per head (layer and head from 1) with its focus-word labels
    (sense_head, marker_head) and its pooled statistics. Uses the focus and sense given to `attend`
    unless new ones are given here (no model needed: the words are located in `att`).
    sense_head and marker_head are bool columns (heads.csv writes them as true/false)."""
    from ..outputs.tables import heads_frame

    if not isinstance(att, Attention):
        raise InputError(f"classify takes the result of ra.attend(...), not {_kind(att)} {att!r:.60}")

    if focus is None and sense is None:
        return heads_frame(att._focused("classify").report)
    from ..engine.pipeline import classify_words

    texts = [s.text for s in att.sentences]
    result = classify_words(list(att.sentences), sentence_set(texts, focus, sense),
                            model=att.model, revision=att.revision, versions=att.versions, units=att.units,
                            measure=att.measure, causal=att.causal)
    return heads_frame(result.report)


def heatmap(sentence: Attention | WordAttention, layer: int, head: int, *, index: int = 0,
            focus: str | None = None, sense: str | None = None, model: str | None = None,
            revision: str | None = None, number: int | None = None, measure: str | None = None) -> Figure:
    """The word x word heatmap of one head on one sentence, as a matplotlib Figure (no pyplot, no backend change).

    sentence: an Attention (`ra.heatmap(att, 1, 4, index=0)`, the same as `att.heatmap(0, 1, 4)`): the title
    takes its model, revision and measure, and the focus and sense words given to `attend`; or one sentence
    `att[i]` (a WordAttention), whose title facts are `model`, `revision` and `measure` if given.
    layer and head count from 1, as in every table; any integral number (numpy's too) will do.
    `focus`/`sense` (words of the sentence) frame the focus row and colour the sense column.
    number: the sentence number in the title (from 1; default index + 1).
    """
    from ..engine.focus import find_word
    from ..engine.measures import check_measure
    from ..engine.words import WordAttention
    from ..outputs.plots import draw_heatmap

    focus_index = sense_index = None
    if isinstance(sentence, Attention):
        att = sentence
        position = whole_number(index, "index", -len(att), len(att) - 1)
        sentence = att[position]
        model = att.model if model is None else model
        revision = att.revision if revision is None else revision
        measure = att.measure if measure is None else measure
        number = (position % len(att)) + 1 if number is None else number
        if att.result is not None and focus is None and sense is None:
            located = att.result.sentences[position]
            focus_index, sense_index = located.focus, located.sense
    elif not isinstance(sentence, WordAttention):
        raise InputError(f"heatmap takes an Attention (ra.attend(...)) or one of its sentences (att[0]), "
                         f"not {_kind(sentence)} {sentence!r:.60}")
    check_measure("weights" if measure is None else measure)
    layer = whole_number(layer, "layer", 1, sentence.layers)
    head = whole_number(head, "head", 1, sentence.heads)
    number = whole_number(1 if number is None else number, "number")
    if focus is not None:
        focus_index = find_word(sentence, _text(focus, "focus", "a word of the sentence"), "focus")
    if sense is not None:
        sense_index = find_word(sentence, _text(sense, "sense", "a word of the sentence"), "sense")
    return draw_heatmap(sentence.checked_weights()[layer - 1, head - 1], sentence.words, focus=focus_index,
                        sense=sense_index, model=model or "model", revision=revision or "", layer=layer - 1,
                        head=head - 1, sentence=number - 1, text=sentence.text, measure=measure or "weights")


def corpus_stats(model: LoadedModel, lines: Iterable[str], *, batch_size: int = 32, truncate: bool = False,
                 thresholds: Thresholds | None = None, progress: Progress | None = None, units: str = "text",
                 measure: str = "weights") -> pd.DataFrame:
    """The corpus heads.csv table: per head (layer, head from 1), its label and the pooled statistics over
    every word of every line, plus n_sentences and n_words. Blank lines are skipped; lines longer than the
    model takes are skipped (or cut, with truncate=True). Memory does not grow with the number of lines.
    lines: an iterable of strings (a list, a generator, an open text file); a single string is one sentence,
    never its characters. Anything that is no string (None, 3, bytes) is an InputError.
    units: the unit rule, and measure: "weights" or "norm", as in `attend`."""
    from ..statistics.sums import CorpusReader, Thresholds, check_analysable, corpus_heads_frame, corpus_sums, label_heads
    from ..engine.measures import check_measure

    model = _loaded(model, "corpus_stats")
    check_measure(measure)
    check_rule(units)
    batch_size = whole_number(batch_size, "batch_size")
    _flag(truncate, "truncate")
    if thresholds is not None and not isinstance(thresholds, Thresholds):
        raise InputError(f"thresholds must be a ra.Thresholds, not {_kind(thresholds)}")
    lines = _checked_lines(lines)
    # The reader takes the bytes of a file: one line each, so a text with a newline stays one sentence.
    stream = ((" ".join(line.splitlines()) + "\n").encode("utf-8") for line in lines)
    reader = CorpusReader(stream, "text", source="lines")
    sums = corpus_sums(model, reader, batch_size=batch_size, truncate=truncate, progress=progress,
                       units=units, measure=measure)
    check_analysable(sums, "the lines")
    labels = label_heads(sums.means(), sums.uniform_entropy, thresholds or Thresholds())
    return corpus_heads_frame(sums, labels)


def _checked_lines(lines: object) -> Iterable[str]:
    """corpus_stats's lines, checked as they stream by (a generator stays lazy): a string is one sentence."""
    if isinstance(lines, str):
        return [lines]
    if isinstance(lines, (bytes, bytearray, memoryview)) or not isinstance(lines, Iterable):
        _strings(lines, "lines")  # raises, naming the argument

    def checked(items: Iterable[Any]):
        for number, item in enumerate(items, start=1):
            if not isinstance(item, str):
                raise InputError(f"lines: line {number} is {_kind(item)} {item!r:.60}, not a string")
            problem = text_problem(item)
            if problem is not None and not is_blank(item):  # a line with nothing visible is counted as blank
                raise InputError(f"lines: line {number} {problem}")
            yield item

    assert isinstance(lines, Iterable), "_strings raised for anything else"
    return checked(lines)


def mixing(model: LoadedModel, texts: str | Iterable[str], *, focus: str | None = None,
           sense: str | Sequence[str] | None = None, units: str = "text") -> Mixing:
    """Context mixing of each sentence, layer by layer, by four measures: "attention" and "norm" (head averages,
    rolled out with 0.5 A + 0.5 I), "alti" (Ferrando et al., 2022) and "value_zeroing" (Mohebbi et al., 2023),
    each rolled over layers (real_attention.engine.mixing).

    Returns a Mixing: `mix[i].maps[measure]` and `mix[i].rolled[measure]` are float64 `(layers, n_i, n_i)`, query
    rows by key columns, each row summing to 1; `mix[i].words` the units; `mix.frame()` the table of mixing.csv,
    `mix.agreement()` that of mixing_agreement.csv. With `focus` and `sense` (one word per sentence) those words
    are units, as in `run --mixing`.
    Raises InputError for a model whose layers cannot be re-run one by one (MPNet, DeBERTa, ALBERT), a sentence
    too long, or a focus or sense word that a piece straddles.
    """
    from ..engine.mixing import compute_mixing

    model = _loaded(model, "mixing")
    items = _texts(texts)
    check_rule(units)
    required: list[tuple[str, ...]] | None = None
    if focus is not None or sense is not None:
        chosen = sentence_set(items, focus, sense)
        required = [(chosen.focus, s.sense) for s in chosen.sentences]
    return compute_mixing(model, items, units=units, required=required)
