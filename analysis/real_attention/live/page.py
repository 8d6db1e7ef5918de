"""The live page: the report's template (analysis/outputs/report_template.*) with a form above the views.

The page loads its script and styles as same-origin files (static/report.js, static/report.css, static/page.js,
static/page.css), so the Content-Security-Policy can refuse every inline script and style. It opens on the
example sentences of the language, already answered, as many as the server's limits take; the form sends new
ones to api/attend and the report's own script draws the answer. What keeps the examples from being answered is
said in the page's status line.
"""
from __future__ import annotations

import dataclasses
import html
from dataclasses import dataclass

from ..engine.errors import InputError, RealAttentionError
from ..engine.measure_names import VALUE_ZEROING
from ..engine.measures import MEASURES
from ..engine.sentences import DEFAULT_LANG, SentenceSet
from ..engine.units import UNIT_RULES

DECODER_LANG = "en-causal"  # the packaged config's sentences whose sense word comes before the focus word
STYLES = '<link rel="stylesheet" href="static/report.css">\n<link rel="stylesheet" href="static/page.css">'
SCRIPTS = '<script src="static/report.js"></script>\n<script src="static/page.js"></script>'


def example_lang(model, lang: str | None) -> str:
    """The table of the packaged config whose sentences fill the form: `lang`, else the lesson's (a decoder's own)."""
    return lang if lang is not None else DECODER_LANG if model.causal else DEFAULT_LANG


def offered_measures(max_pieces: int) -> tuple[str, ...]:
    """The measures the form offers: value-zeroing only where a request can have a piece of it (it takes
    --max-pieces / VALUE_ZEROING_SHARE pieces)."""
    from .engine import VALUE_ZEROING_SHARE

    return tuple(m for m in MEASURES if m != VALUE_ZEROING or max_pieces // VALUE_ZEROING_SHARE > 0)


def check_page_measure(measure: str, max_pieces: int) -> None:
    """InputError if the form's measure can answer nothing under max_pieces (value-zeroing under 16 pieces)."""
    from .engine import VALUE_ZEROING_SHARE

    if measure not in offered_measures(max_pieces):
        raise InputError(f"measure (--measure) {measure} takes a sixteenth of max_pieces (--max-pieces), as it runs "
                         f"every layer again for each piece: with max_pieces {max_pieces} that is no piece at all; "
                         f"raise max_pieces to {VALUE_ZEROING_SHARE} or more, or choose weights or norm")


def controls(sentence_set, measure: str, units: str = "text", measures: tuple[str, ...] = MEASURES,
             status: str = "", status_error: bool = False) -> str:
    """The form: sentences, focus word, sense words, measure (of `measures`), unit rule, the button and the
    download link; then the status line, which opens with `status` (plain text; an error with status_error).
    The form's data-lang is the examples' language, the label of the report "download" gives before a new answer."""
    texts = "\n".join(s.text for s in sentence_set.sentences)
    senses = "\n".join(s.sense for s in sentence_set.sentences)

    def options(values, chosen):
        return "".join(f'<option value="{v}"{" selected" if v == chosen else ""}>{v}</option>' for v in values)

    status_class = "live-status error" if status_error else "live-status"
    return f"""
<section class="live" aria-label="Try your own sentences">
  <form id="live-form" class="live-form" autocomplete="off" data-lang="{html.escape(sentence_set.lang)}">
    <label class="live-texts">Sentences, one per line
      <textarea id="live-texts" name="texts" rows="4" spellcheck="false">{html.escape(texts)}</textarea></label>
    <label class="live-sense">Sense word of each sentence, one per line
      <textarea id="live-sense" name="sense" rows="4" spellcheck="false">{html.escape(senses)}</textarea></label>
    <div class="live-side">
      <label>Focus word <input id="live-focus" name="focus" value="{html.escape(sentence_set.focus)}"></label>
      <label>Measure <select id="live-measure" name="measure">{options(measures, measure)}</select></label>
      <label>Units <select id="live-units" name="units">{options(UNIT_RULES, units)}</select></label>
      <button type="submit" id="live-submit">Show every head</button>
      <button type="button" id="live-download" class="live-download">download report.html</button>
    </div>
  </form>
  <p id="live-status" class="{status_class}" role="status" aria-live="polite">{html.escape(status)}</p>
</section>"""


@dataclass(frozen=True)
class LivePage:
    """The page GET / serves, and what kept its examples from being answered in full (None: nothing)."""

    html: bytes  # the page, UTF-8
    problem: str | None  # said in the page's status line too; the server prints it


def fitted_examples(model, sentence_set: SentenceSet, measure: str, max_sentences: int,
                    max_pieces: int) -> tuple[SentenceSet, str | None, bool]:
    """The examples a request may hold under this server's limits (live.engine.check_limits): the first ones
    that fit -> (those, what was left out and why or None, whether any fits). Called with the model's lock held."""
    from .engine import Query, check_limits

    sentences = sentence_set.sentences
    reason = ""
    for count in range(len(sentences), 0, -1):
        query = Query(texts=tuple(s.text for s in sentences[:count]), measure=measure)
        try:
            check_limits(model, query, max_sentences, max_pieces)
        except InputError as error:
            reason = str(error)
            continue
        if count == len(sentences):
            return sentence_set, None, True
        return (dataclasses.replace(sentence_set, sentences=sentences[:count]),
                f"the page opens on the first {count} of the {len(sentences)} example sentences of "
                f"{sentence_set.lang!r}, as this server's limits allow (with one more: {reason})", True)
    return sentence_set, (f"the example sentences of {sentence_set.lang!r} are over this server's limits, so the "
                          f"page opens with no answer: {reason}"), False


def live_page(model, *, lang: str | None = None, measure: str = "weights", max_sentences: int = 16,
              max_pieces: int = 256) -> LivePage:
    """The page, opening on the examples of `lang` (example_lang), answered now under the server's limits, so
    it shows every head at once; if the model cannot take them, the page opens with the form and says why.
    InputError if the form's measure can answer nothing (check_page_measure)."""
    from ..engine.sentences import load_sentences
    from ..outputs.report import header_text, page_html, report_data
    from .engine import _FORWARD, Query, attend_one, notes_of

    check_page_measure(measure, max_pieces)
    chosen = example_lang(model, lang)
    att = None
    notes: tuple[str, ...] = ()
    with _FORWARD:
        sentence_set, problem, fits = fitted_examples(model, load_sentences(None, chosen), measure, max_sentences,
                                                      max_pieces)
        query = Query(texts=tuple(s.text for s in sentence_set.sentences), focus=sentence_set.focus,
                      sense=tuple(s.sense for s in sentence_set.sentences), measure=measure, lang=chosen)
        try:
            att = attend_one(model, query) if fits else None
            notes = notes_of(model, att) if att is not None else ()
        except RealAttentionError as error:
            att, problem = None, (f"the example sentences of {chosen!r} cannot be answered, so the page opens with "
                                  f"no answer: {error}")
    said = [problem[0].upper() + problem[1:] + "."] if problem else []
    said += ["Note: " + " ".join(notes)] if notes else []
    status = " ".join(said)
    form = controls(sentence_set, measure, measures=offered_measures(max_pieces), status=status,
                    status_error=att is None)
    if att is not None:
        summary = att.summary()
        data = report_data(att.result, summary, notes=notes)
        data["header"] = header_text(att.result, summary, "real-attention serve", notes=notes)
        page = page_html(att.result, summary, styles=STYLES, scripts=SCRIPTS, controls=form,
                         tool="real-attention serve", data=data, notes=notes)
    else:
        page = page_html(None, None, styles=STYLES, scripts=SCRIPTS, controls=form, tool="real-attention serve",
                         header=empty_header(model, chosen, sentence_set.focus))
    return LivePage(html=page.encode("utf-8"), problem=problem)


def empty_header(model, lang: str, focus: str) -> dict[str, str]:
    """The header's values before any answer: what is known of the model."""
    values = dict.fromkeys(("versions", "model_kind", "rule_words", "rule_markers", "rule_categories",
                            "rule_counting", "rule_measure", "rule_units", "rule_rollout", "notes"), "")
    values.update(title=f"real-attention: every head of {model.choice.name}", model=model.choice.name,
                  revision=model.revision, lang=lang, focus=focus, tool="real-attention serve",
                  heads_total=str(model.layers * model.heads), layers=str(model.layers),
                  heads_per_layer=str(model.heads), footer="")
    return values
