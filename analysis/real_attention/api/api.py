"""The Python API behind `import real_attention as ra`: load, attend, classify, heatmap, corpus_stats, mixing.

Every command of the CLI is a thin layer over these functions. They raise only the errors of
real_attention.engine.errors for bad input; torch, transformers and matplotlib are imported when first needed.
What `attend` returns is an Attention (real_attention.api.attention); the API's argument checks are in
real_attention.api.arguments, those every stage shares in real_attention.engine.checks.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..engine.checks import flag, kind, loaded_model, model_arg, optional_text, text, whole_number
from ..engine.errors import InputError, RealAttentionWarning
from ..engine.units import check_rule
from .arguments import checked_lines, given_words, sentence_set, sentence_texts
from .attention import Attention

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    from matplotlib.figure import Figure

    from ..engine.mixing import Mixing
    from ..statistics.sums import Thresholds
    from ..engine.models import LoadedModel
    from ..engine.progress import Progress
    from ..engine.words import WordAttention


def load(model: str | os.PathLike[str] | None = None, *, revision: str | None = None, lang: str | None = None,
         device: str = "cpu", offline: bool = False) -> LoadedModel:
    """Load a model with eager attention, pinned to an exact revision.

    model: "minilm" (the packaged offline encoder, also what `ra.load()` loads), "smollm2" (the packaged offline
    decoder), a Hub id (with `revision`, default "main") or a local folder (a string or a path). Or `lang`
    instead: the pinned model of a language ("es": mBERT, "en": bert-base-uncased); not both.
    Returns a LoadedModel: `.layers`, `.heads`, `.revision` (the resolved commit, or "sha256:..." of a
    folder's weights), `.tokenizer`, `.model`, `.causal`. Raises ModelUnavailable (with what to do) or InputError.
    """
    from ..engine.models import choose_model, load_model

    model = model_arg(model)
    optional_text(revision, "revision", "a branch, tag or commit")
    optional_text(lang, "lang", "a language code such as \"es\"")
    text(device, "device", "such as \"cpu\" or \"cuda\"")
    flag(offline, "offline")
    if model is not None and lang is not None:  # lang would be ignored: ra.load(lang="es") once loaded MiniLM
        raise InputError(f"load takes model or lang (the pinned model of a language), not both: model={model!r}, "
                         f"lang={lang!r}")
    if model is None and lang is None:
        model = "minilm"
    return load_model(choose_model(lang, model, revision), device=device, offline=offline)


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
    measure: "weights" (post-softmax attention), "norm" (||alpha f(x)||, Kobayashi et al. 2020, rows
    rescaled to sum to 1) or "value-zeroing" (Mohebbi et al. 2023); see real_attention.engine.measures.
    batch_size: at most this many sentences per forward pass; with more sentences they are sorted by length
    into batches (little padding), and the results come back in the order given, the same numbers as one batch.
    pieces: also keep each sentence's piece-level maps: `att[i].pieces` (the tokenizer's pieces, specials
    included) and `att[i].piece_weights`, float32 (layers, heads, t, t), as bertviz and TransformerLens show them.
    Raises UnitError (an InputError) if a piece straddles a focus or sense word and its neighbour.
    Raises InputError (a sentence too long, a word not found, an unknown measure). Warns (RealAttentionWarning, a
    UserWarning) naming the words the model's vocabulary has no pieces for: they run as the unknown token.
    """
    from ..engine.measures import check_measure
    from ..engine.models import check_encodes
    from ..engine.pipeline import analyse, attend_with_sums

    model = loaded_model(model, "attend")
    check_measure(measure)
    if (texts is None) == (words is None):
        raise InputError("give attend either texts or words=, exactly one")
    if words is not None:
        if focus is not None or sense is not None or units != "text":
            raise InputError("words= sets the units and takes no focus=, sense= or units=")
        given = given_words(words)
        check_measure(measure)
        note = check_encodes(model, [" ".join(sentence) for sentence in given])  # the text the words rule runs
        if note:  # the words still run, as [UNK]
            import warnings

            warnings.warn(note, RealAttentionWarning, stacklevel=2)
        attentions, _, rollouts = attend_with_sums(model, None, words=given, measure=measure,
                                                   batch_size=whole_number(batch_size, "batch_size"),
                                                   pieces=flag(pieces, "pieces"))
        return replace(Attention.from_maps(model, attentions, rollouts, units="words", measure=measure),
                       warnings=(note,) if note else ())
    items = sentence_texts(texts)
    check_measure(measure)
    check_rule(units)
    size = whole_number(batch_size, "batch_size")
    keep_pieces = flag(pieces, "pieces")
    if not isinstance(lang, str):
        raise InputError(f"lang must be a string, not {kind(lang)} {lang!r:.60}")
    chosen = None if focus is None and sense is None else sentence_set(items, focus, sense, lang)
    note = check_encodes(model, items)
    if note:  # the words still run, as [UNK]
        import warnings

        warnings.warn(note, RealAttentionWarning, stacklevel=2)
    if chosen is None:
        attentions, _, rollouts = attend_with_sums(model, items, units=units, measure=measure, batch_size=size,
                                                   pieces=keep_pieces)
        return replace(Attention.from_maps(model, attentions, rollouts, units=units, measure=measure),
                       warnings=(note,) if note else ())
    result = analyse(model, chosen, units=units, measure=measure, batch_size=size, pieces=keep_pieces)
    return replace(Attention.from_result(result), warnings=(note,) if note else ())


def classify(att: Attention, focus: str | None = None, sense: str | Sequence[str] | None = None) -> pd.DataFrame:
    """The heads.csv table: one row per head (layer and head from 1) with its focus-word labels
    (sense_head, marker_head) and its pooled statistics. Uses the focus and sense given to `attend`
    unless new ones are given here (no model needed: the words are located in `att`).
    sense_head and marker_head are bool columns (heads.csv writes them as true/false)."""
    from ..outputs.tables import heads_frame

    if not isinstance(att, Attention):
        raise InputError(f"classify takes the result of ra.attend(...), not {kind(att)} {att!r:.60}")

    if focus is None and sense is None:
        return heads_frame(att._focused("classify").report)
    from ..engine.pipeline import classify_words

    texts = [s.text for s in att.sentences]
    result = classify_words(list(att.sentences), sentence_set(texts, focus, sense),
                            model=att.model, revision=att.revision, versions=att.versions, units=att.units,
                            measure=att.measure, causal=att.causal)
    return heads_frame(result.report)


def heatmap(sentence: Attention | WordAttention, layer: int | np.integer, head: int | np.integer, *, index: int = 0,
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

    optional_text(model, "model", "the model's name for the title")
    optional_text(revision, "revision", "the revision for the title")
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
                         f"not {kind(sentence)} {sentence!r:.60}")
    elif index != 0:  # it was ignored: the heatmap of att[0] with index=5 drew att[0]
        raise InputError(f"index picks a sentence of an Attention; one sentence (att[i]) takes none, not {index!r:.60}")
    check_measure("weights" if measure is None else measure)
    layer = whole_number(layer, "layer", 1, sentence.layers)
    head = whole_number(head, "head", 1, sentence.heads)
    number = whole_number(1 if number is None else number, "number")
    if focus is not None:
        focus_index = find_word(sentence, text(focus, "focus", "a word of the sentence"), "focus")
    if sense is not None:
        sense_index = find_word(sentence, text(sense, "sense", "a word of the sentence"), "sense")
    if focus_index is not None and focus_index == sense_index:
        raise InputError(f"focus and sense name the same word ({sentence.words[focus_index]!r}): the sense word is "
                         "another word of the sentence, the one that decides the focus word's sense")
    return draw_heatmap(sentence.checked_weights()[layer - 1, head - 1], sentence.words, focus=focus_index,
                        sense=sense_index, model=model or "", revision=revision or "", layer=layer - 1,
                        head=head - 1, sentence=number - 1, text=sentence.text, measure=measure or "weights")


def corpus_stats(model: LoadedModel, lines: Iterable[str], *, batch_size: int = 32, truncate: bool = False,
                 thresholds: Thresholds | dict[str, float] | Sequence[str] | None = None,
                 progress: Progress | None = None, units: str = "text",
                 measure: str = "weights") -> pd.DataFrame:
    """The corpus heads.csv table: per head (layer, head from 1), its label and the pooled statistics over
    every word of every line, plus n_sentences and n_words. Blank lines are skipped; lines longer than the
    model takes are skipped (or cut, with truncate=True). Memory does not grow with the number of lines.
    lines: an iterable of strings (a list, a generator, an open text file); a single string is one sentence,
    never its characters. Anything that is no string (None, 3, bytes) is an InputError.
    units: the unit rule, and measure: "weights", "norm" or "value-zeroing", as in `attend`."""
    from ..engine.batches import MAX_BATCH_SIZE
    from ..statistics.labels import thresholds_from
    from ..statistics.sums import CorpusReader, check_analysable, corpus_heads_frame, corpus_sums, label_heads
    from ..engine.measures import check_measure

    model = loaded_model(model, "corpus_stats")
    check_measure(measure)
    check_rule(units)
    batch_size = whole_number(batch_size, "batch_size", 1, MAX_BATCH_SIZE)  # before corpus_sums' own check
    flag(truncate, "truncate")
    chosen = thresholds_from(thresholds)  # a Thresholds, a dict, "name=value" strings, as ra.corpus takes
    lines = checked_lines(lines)
    # The reader takes the bytes of a file: one line each, so a text with a newline stays one sentence.
    stream = ((" ".join(line.splitlines()) + "\n").encode("utf-8") for line in lines)
    reader = CorpusReader(stream, "text", source="lines")
    if progress is not None and not callable(getattr(progress, "update", None)):
        raise InputError(f"progress must be a tqdm-like bar (with update(n)) or None, not {kind(progress)} "
                         f"{progress!r:.60}")
    sums = corpus_sums(model, reader, batch_size=batch_size, truncate=truncate, progress=progress,
                       units=units, measure=measure)
    check_analysable(sums, "the list of lines")
    labels = label_heads(sums.means(), sums.uniform_entropy, chosen)
    return corpus_heads_frame(sums, labels)


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

    model = loaded_model(model, "mixing")
    items = sentence_texts(texts, "mixing")
    check_rule(units)
    required: list[tuple[str, ...]] | None = None
    if focus is not None or sense is not None:
        chosen = sentence_set(items, focus, sense)
        required = [(chosen.focus, s.sense) for s in chosen.sentences]
    def check_words(encoded) -> None:
        """Each word must be a unit of its sentence, as `attend` finds them: before the work."""
        from ..engine.focus import locate, without_maps

        assert required is not None
        for number, (words, (focus_word, sense_word)) in enumerate(zip(without_maps(encoded), required), start=1):
            locate(words, focus_word, None, "focus", number)
            locate(words, sense_word, None, "sense", number)

    return compute_mixing(model, items, units=units, required=required,
                          check_words=None if required is None else check_words)
