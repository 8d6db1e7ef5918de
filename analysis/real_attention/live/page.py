"""The live page: the report's template (analysis/outputs/report_template.*) with a form above the views.

The page loads its script and styles as same-origin files (static/report.js, static/report.css, static/page.js,
static/page.css), so the Content-Security-Policy can refuse every inline script and style. It opens on the
example sentences of the language, already answered; the form sends new ones to api/attend and the report's own
script draws the answer.
"""
from __future__ import annotations

import html

from ..engine.errors import RealAttentionError
from ..engine.measures import MEASURES
from ..engine.sentences import DEFAULT_LANG
from ..engine.units import UNIT_RULES

DECODER_LANG = "en-causal"  # the packaged config's sentences whose sense word comes before the focus word
STYLES = '<link rel="stylesheet" href="static/report.css">\n<link rel="stylesheet" href="static/page.css">'
SCRIPTS = '<script src="static/report.js"></script>\n<script src="static/page.js"></script>'


def example_lang(model, lang: str | None) -> str:
    """The table of the packaged config whose sentences fill the form: `lang`, else the lesson's (a decoder's own)."""
    return lang if lang is not None else DECODER_LANG if model.causal else DEFAULT_LANG


def controls(sentence_set, measure: str, units: str = "text") -> str:
    """The form: sentences, focus word, sense words, measure, unit rule, the button and the download link."""
    texts = "\n".join(s.text for s in sentence_set.sentences)
    senses = "\n".join(s.sense for s in sentence_set.sentences)

    def options(values, chosen):
        return "".join(f'<option value="{v}"{" selected" if v == chosen else ""}>{v}</option>' for v in values)

    return f"""
<section class="live" aria-label="Try your own sentences">
  <form id="live-form" class="live-form" autocomplete="off">
    <label class="live-texts">Sentences, one per line
      <textarea id="live-texts" name="texts" rows="4" spellcheck="false">{html.escape(texts)}</textarea></label>
    <label class="live-sense">Sense word of each sentence, one per line
      <textarea id="live-sense" name="sense" rows="4" spellcheck="false">{html.escape(senses)}</textarea></label>
    <div class="live-side">
      <label>Focus word <input id="live-focus" name="focus" value="{html.escape(sentence_set.focus)}"></label>
      <label>Measure <select id="live-measure" name="measure">{options(MEASURES, measure)}</select></label>
      <label>Units <select id="live-units" name="units">{options(UNIT_RULES, units)}</select></label>
      <button type="submit" id="live-submit">Show every head</button>
      <a id="live-download" href="#" class="live-download">download report.html</a>
    </div>
  </form>
  <p id="live-status" class="live-status" role="status" aria-live="polite"></p>
</section>"""


def live_page(model, *, lang: str | None = None, measure: str = "weights") -> tuple[str, bytes]:
    """-> (the language of the examples, the page as UTF-8). The examples are answered now, so the page opens
    with every head drawn; if the model cannot take them, the page opens with the form only."""
    from ..engine.sentences import load_sentences
    from ..outputs.report import header_text, page_html, report_data
    from .engine import _FORWARD, Query, attend_one

    chosen = example_lang(model, lang)
    sentence_set = load_sentences(None, chosen)
    form = controls(sentence_set, measure)
    query = Query(texts=tuple(s.text for s in sentence_set.sentences), focus=sentence_set.focus,
                  sense=tuple(s.sense for s in sentence_set.sentences), measure=measure)
    try:
        with _FORWARD:
            att = attend_one(model, query, chosen)
    except RealAttentionError:
        att = None
    if att is not None:
        summary = att.summary()
        data = report_data(att.result, summary)
        data["header"] = header_text(att.result, summary, "real-attention serve")
        page = page_html(att.result, summary, styles=STYLES, scripts=SCRIPTS, controls=form,
                         tool="real-attention serve", data=data)
    else:
        page = page_html(None, None, styles=STYLES, scripts=SCRIPTS, controls=form, tool="real-attention serve",
                         header=empty_header(model, chosen, sentence_set.focus))
    return chosen, page.encode("utf-8")


def empty_header(model, lang: str, focus: str) -> dict[str, str]:
    """The header's values before any answer: what is known of the model."""
    values = dict.fromkeys(("versions", "model_kind", "rule_words", "rule_markers", "rule_categories",
                            "rule_counting", "rule_measure", "rule_rollout"), "")
    values.update(title=f"real-attention: every head of {model.choice.name}", model=model.choice.name,
                  revision=model.revision, lang=lang, focus=focus, tool="real-attention serve",
                  heads_total=str(model.layers * model.heads), layers=str(model.layers),
                  heads_per_layer=str(model.heads), footer="")
    return values
