"""The interactive report: one self-contained HTML file (CSS, JavaScript and data inline) of every head.

The page opens from file:// with no network: no CDN, no library, no external URL. The template lives in
analysis/report_template.{html,css,js}; this module only fills it with the run's data as inline JSON.
"""
from __future__ import annotations

import base64
import html
import re
import zlib
from importlib import resources
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ..engine import words as words_module
from ..engine.categories import (
    CATEGORY_COLOURS, CATEGORY_LABELS, CATEGORY_NOTES, DARK_CATEGORIES, FOCUS_COLOUR, FOCUS_TEXT_COLOUR,
    HEATMAP_CMAP, SENSE_TEXT_COLOUR,
    HEATMAP_LIGHT_TEXT_FROM, SENSE, categories_for, category_counts, focus_categories, head_rules, key_relations,
)
from ..engine.heads import NEXT_OFFSET, PREVIOUS_OFFSET
from ..engine.measures import MEASURE_TEXT
from ..engine.pipeline import RunResult
from .files import json_text
from .tables import describe_run
from ..engine.words import MARKERS_TEXT, WordAttention

REPORT_NAME = "report.html"
WEIGHT_SCALE = 10_000  # weights are stored as whole ten-thousandths, i.e. rounded to 4 decimals
TEMPLATE = "report_template"  # .html, .css and .js in the analysis package
IFRAME_HEIGHT = 900  # px: the report inside a notebook cell
REPORT_SENTENCES = 200  # the page holds the maps of this many sentences, the first ones (run --report-sentences)


def shown_sentences(result: RunResult, max_sentences: int | None = REPORT_SENTENCES) -> int:
    """How many of the first sentences the page holds: max_sentences (None: all), at most those whose maps the
    result kept."""
    total = min(len(result.sentences), result.maps_kept)
    return total if max_sentences is None else min(total, max_sentences)


def sentences_note(result: RunResult, shown: int) -> str | None:
    """The page's line when it holds fewer sentences than the run has, else None."""
    total = len(result.sentences)
    if shown == total:
        return None
    return (f"This page holds the first {shown:,} of the run's {total:,} sentences (real-attention run "
            f"--report-sentences N changes that); the head categories and scores count all {total:,}, and "
            "attention.csv holds every sentence's maps.")


def _template(suffix: str) -> str:
    return resources.files(__package__).joinpath(f"{TEMPLATE}.{suffix}").read_text(encoding="utf-8")


def _ten_thousandths(weights: np.ndarray) -> np.ndarray:
    """Any float array -> flat int64 array of whole ten-thousandths (C order)."""
    return np.rint(np.asarray(weights, dtype=np.float64) * WEIGHT_SCALE).astype(np.int64).reshape(-1)


def _scaled(weights: np.ndarray) -> list[int]:
    return _ten_thousandths(weights).tolist()


def _packed(weights: np.ndarray) -> str:
    """Weights as whole ten-thousandths in uint16, all low bytes then all high bytes (apart, they deflate
    better), zlib-deflated and base64-encoded: about a third of the size of a JSON list of the same ints.
    The page inflates them with the browser's DecompressionStream("deflate")."""
    ints = _ten_thousandths(weights).astype("<u2")
    planes = ints.view(np.uint8).reshape(-1, 2).T  # (2, N): low bytes, high bytes
    return base64.b64encode(zlib.compress(planes.tobytes(), 9)).decode("ascii")


def _rounded(values: np.ndarray) -> list[float]:
    """The 6 decimals of the tables (heads.csv, focus.csv): the page rounds them once more to show them, so a
    coarser value here was rounded twice (0.122497 shown as 12.3 %, where the table's 12.2 % is right)."""
    return [round(float(v), 6) for v in np.asarray(values, dtype=np.float64).reshape(-1)]


# What each category's rule is, in the words of the report's legend note.
CATEGORY_RULES = {
    "sense": "sense word (the word that decides the sense)",
    "first": "first token (the first unit, whatever it is: a decoder's attention sink)",
    "marker": "marker",
    "previous": f"previous word (the word at offset {PREVIOUS_OFFSET:+d})",
    "next": f"next word (offset {NEXT_OFFSET:+d})",
}
# The pooled statistics the page shows for the selected head: (statistic, label).
HEAD_SCORES = {False: (("prev", "previous word"), ("next", "next word"), ("markers", "markers")),
               True: (("prev", "previous word"), ("first", "first token"), ("markers", "markers"))}


def definitions(focus: str, causal: bool = False) -> dict[str, str]:
    """The rules the numbers rest on, in words, taken from the modules that apply them."""
    merge_rule = words_module.__doc__.strip().splitlines()[0]
    rules = ", ".join(CATEGORY_RULES[name] for name in categories_for(causal)[:-1])
    decoder = (" The model is a decoder: each word sees only itself and the words before it, so no head can look at "
               "the next word, and the first word (which sees only itself) enters no mean.") if causal else ""
    return {
        "words": merge_rule + " Each row still sums to 1 (100 %).",
        "markers": "Markers: " + MARKERS_TEXT + ".",
        "categories": (
            f"Each head is coloured by where the focus word \u00ab{focus}\u00bb looks most (its top target), "
            f"if that holds in every sentence; the first rule that holds wins: {rules}, otherwise other.{decoder}"
        ),
        "counting": "Layers and heads are counted from 1. Weights are rounded to 4 decimals.",
        "rollout": "Rollout (Abnar & Zuidema, 2020): per layer, the heads' mean map mixed half and half with the "
                   "identity (the residual stream), rows summing to 1, multiplied up layer by layer over the word "
                   "pieces, then merged into words as above.",
    }


def heatmap_colours(name: str = HEATMAP_CMAP) -> list[str]:
    """The matplotlib colour map `name` as its N hex colours ("#rrggbb"), the lookup table imshow uses.

    A weight w in [0, 1] takes colour min(floor(w * N), N - 1), as matplotlib maps it with vmin=0, vmax=1.
    Imports matplotlib's colour maps only, never pyplot, and sets no backend.
    """
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    cmap = colormaps[name]
    return [to_hex(colour) for colour in cmap(np.arange(cmap.N))]  # (N,)


def sentence_gaps(attention: WordAttention) -> list[str | None]:
    """(n,) what the page writes before each unit to show the sentence as written: " ", "" (glued, as in
    "banco." or "«dinero»"), or None for a special token, which the sentence does not show."""
    gaps: list[str | None] = []
    cursor, shown = 0, False
    for word, kind in zip(attention.words, attention.kinds):
        if kind.group == "special":
            gaps.append(None)
            continue
        start = attention.text.find(word, cursor)
        if start < 0:  # not in the text as written: show it after a space
            gaps.append(" " if shown else "")
        else:
            gaps.append(" " if shown and start > cursor else "")
            cursor = start + len(word)
        shown = True
    return gaps


def start_head(summary: dict) -> dict:
    """The head the page opens on (counted from 1): the best sense head, else the strongest previous-word head."""
    best = summary["best_sense_head"] or summary["prev_head"]
    return {"layer": best["layer"], "head": best["head"]}


def report_data(result: RunResult, summary: dict, max_sentences: int | None = REPORT_SENTENCES,
                notes: Sequence[str] = ()) -> dict:
    """Everything the page draws, as plain JSON: weights (K x (layers, heads, n, n)) as ten-thousandths, for the
    first K = shown_sentences(result, max_sentences) sentences; categories and scores count every sentence.
    notes: what a reader must know beside the maps (e.g. words the vocabulary lacks, as `serve` lists them), shown
    in the header.

    Every rule is applied here, not in the page's script: each head's category, each unit's marker flag,
    what each key unit is to the focus word (the bars' colours), the heatmap's colours and text rule.
    `summary` is tables.summary(result), in memory or read back from summary.json.
    """
    report = result.report
    sentences = list(result.sentences)[:shown_sentences(result, max_sentences)]
    layers, heads = report.shape
    categories = focus_categories(report, result.sentences)  # (layers, heads), over every sentence
    counts = category_counts(categories, result.causal)
    return {
        "model": result.model,
        "revision": result.revision,
        "lang": result.sentence_set.lang,
        "focus_word": result.sentence_set.focus,
        "measure": result.measure,
        "measure_text": MEASURE_TEXT[result.measure],
        "notes": list(notes),
        "versions": result.versions,
        "layers": layers,
        "heads": heads,
        "sentences_total": len(result.sentences),  # the page may hold fewer (shown_sentences)
        "weight_scale": WEIGHT_SCALE,
        "weights_packing": "uint16 ten-thousandths, low bytes then high bytes, zlib, base64",
        "focus_colour": FOCUS_COLOUR,
        "heatmap": {
            "cmap": HEATMAP_CMAP,
            "colours": heatmap_colours(HEATMAP_CMAP),  # (N,) weight w -> colours[min(floor(w * N), N - 1)]
            "light_text_from": HEATMAP_LIGHT_TEXT_FROM,  # white cell text when w >= this
        },
        "start_head": start_head(summary),
        "causal": result.causal,
        "sentence_count": len(result.sentences),  # all of the run's; "sentences" holds the first ones
        "sentences_note": sentences_note(result, len(sentences)),
        "categories": [
            {"name": name, "label": CATEGORY_LABELS[name], "note": CATEGORY_NOTES.get(name, ""),
             "colour": CATEGORY_COLOURS[name],
             "dark": name in DARK_CATEGORIES, "count": counts[name]}
            for name in categories_for(result.causal)
        ],
        "head_category": categories.reshape(-1).tolist(),  # (layers * heads,) row-major
        # (layers * heads,) bool per rule: the page names the rules a head meets besides its category's
        "head_rules": {name: met.reshape(-1).tolist() for name, met in head_rules(report, result.sentences).items()},
        "head_scores": {
            **{name: _rounded(getattr(report, name)) for name, _ in HEAD_SCORES[result.causal]},
            "entropy": _rounded(report.entropy),
        },
        "head_score_names": [list(pair) for pair in HEAD_SCORES[result.causal]],  # (statistic, label) shown
        "sentences": [
            {
                "text": sentence.attention.text,
                "words": list(sentence.attention.words),
                "kinds": [kind.group for kind in sentence.attention.kinds],  # "special", "punct" or "word"
                "markers": sentence.attention.markers.tolist(),  # (n,) bool
                "relations": key_relations(sentence, result.causal).tolist(),  # (n,) category name of each key, any head
                "gaps": sentence_gaps(sentence.attention),  # (n,) text before each unit, None: not shown
                "focus": sentence.focus,
                "sense": sentence.sense,
                "top_key": report.top_key[i].reshape(-1).tolist(),  # (layers * heads,)
                "top_weight": _rounded(report.top_weight[i]),  # (layers * heads,) as in focus.csv
                "weights": _packed(sentence.attention.checked_weights()),  # (layers * heads * n * n,) packed
                # (layers * n,) the focus word's rollout row after each layer; None if not computed
                "rollout": _scaled(result.rollout[i][:, sentence.focus]) if result.rollout else None,
                # measure -> (layers * n,) the focus word's rolled context-mixing row; None without run --mixing
                "mixing": None if result.mixing is None else {
                    measure: _scaled(rolled[:, sentence.focus])
                    for measure, rolled in result.mixing.sentences[i].rolled.items()},
            }
            for i, sentence in enumerate(sentences)
        ],
        "mixing_labels": _mixing_labels(result),  # [measure, label] in the order drawn; [] without --mixing
        "summary": page_summary(summary, len(sentences)),
        "summary_lines": describe_run(summary).splitlines(),
    }


# summary.json's lists with one entry per sentence: the page keeps those of the sentences it holds
PER_SENTENCE = ("sentences", "word_positions", "marker_head_count_per_sentence")


def page_summary(summary: dict, shown: int) -> dict:
    """summary.json as the page holds it: without the tables' checksums, and its per-sentence lists cut to the
    `shown` sentences the page holds (the page of a million sentences stays the size of its first 200)."""
    page = {key: value for key, value in summary.items() if key != "tables"}
    for key in PER_SENTENCE:
        if isinstance(page.get(key), list):
            page[key] = page[key][:shown]
    if isinstance(page.get("joined_units"), list):  # the words joined across pieces, by sentence number from 1
        page["joined_units"] = [join for join in page["joined_units"]
                                if not isinstance(join, dict) or join.get("sentence", 0) <= shown]
    return page


def _mixing_labels(result: RunResult) -> list[list[str]]:
    if result.mixing is None:
        return []
    from .mixing import MEASURE_LABELS

    return [[measure, MEASURE_LABELS[measure]] for measure in result.mixing.measures]


def _json_for_script(data: dict) -> str:
    """JSON that cannot close its <script> tag: "</" becomes "<\\/" and "<!--" cannot open a comment."""
    text = json_text(data, compact=True)
    return text.replace("</", "<\\/").replace("<!--", "<\\u0021--")


def _header_sentences(result: RunResult, shown: int) -> str:
    items = []
    for configured, located in list(zip(result.sentence_set.sentences, result.sentences))[:shown]:
        items.append(
            f"<li>{html.escape(configured.text)} <span class=\"sense-note\" lang=\"en\">sense word: "
            f"<b>{html.escape(located.attention.words[located.sense])}</b></span></li>"
        )
    note = sentences_note(result, shown)
    if note:  # a list item without a number, after the numbered ones
        items.append(f"<li class=\"sentences-note\" style=\"list-style: none\"><b>{html.escape(note)}</b></li>")
    return "\n".join(items)


FOOTERS = {
    "real-attention run": "One self-contained file made by real-attention: it needs no network and no other file.",
    "real-attention serve": "The live page of real-attention serve: the model runs on this server, nothing else is "
                            "asked of the network; \u201cdownload report.html\u201d saves a self-contained copy.",
}


# The unit rules (--units, real_attention.engine.units), as the header says them
UNITS_TEXT = {
    "text": "the text rule: words as the reader sees them, by one rule for every tokenizer (whitespace separates "
            "words; punctuation at a word's edge is a unit of its own, inside it stays: don't, 3.14; each CJK "
            "ideograph is a unit; the focus and sense words always are)",
    "tokenizer": "the tokenizer's own words (the pieces of one word id), as Clark et al.'s code has them",
}
NO_LANG = "not given"  # the header's language of sentences given with no lang (ra.attend, serve's typed ones)


def notes_text(notes: Sequence[str]) -> str:
    """The header's line of notes ("" for none: the page hides it)."""
    return "Note: " + " ".join(notes) if notes else ""


def header_text(result: RunResult, summary: dict, tool: str = "real-attention run",
                notes: Sequence[str] = ()) -> dict[str, str]:
    """The page header's values as plain text, keyed by the template's placeholders (and the live page's
    data-fill names): the report escapes them into the HTML, the live page sets them as text. notes: what a
    reader must know beside the maps (report_data's), one line."""
    rules = definitions(result.sentence_set.focus, result.causal)
    return {
        # each name between FSI and PDI: a word with its own direction (a U+202E) reorders itself, not the title
        "title": f"real-attention: «\u2068{result.sentence_set.focus}\u2069» in every head of \u2068{result.model}\u2069",
        "model": result.model,
        "revision": result.revision,
        "lang": result.sentence_set.lang or NO_LANG,
        "focus": result.sentence_set.focus,
        "tool": tool,
        "versions": ", ".join(f"{name} {version}" for name, version in sorted(result.versions.items())),
        "heads_total": str(summary["heads_total"]),
        "layers": str(summary["layers"]),
        "heads_per_layer": str(summary["heads_per_layer"]),
        "model_kind": "; a decoder" * result.causal + (f"; weights {result.weights_note}" if result.weights_note else ""),
        "rule_words": rules["words"],
        "rule_markers": rules["markers"],
        "rule_categories": rules["categories"],
        "rule_counting": rules["counting"],
        "rule_measure": MEASURE_TEXT[result.measure],
        "rule_units": UNITS_TEXT.get(result.units, result.units),
        "rule_rollout": rules["rollout"],
        "notes": notes_text(notes),
        "footer": FOOTERS.get(tool, FOOTERS["real-attention run"]),
    }


def page_html(result: RunResult | None, summary: dict | None, *, styles: str, scripts: str, controls: str = "",
              tool: str = "real-attention run", data: dict | None = None, header: dict[str, str] | None = None,
              notes: Sequence[str] = ()) -> str:
    """The report template filled with a run: `styles` and `scripts` are the HTML that brings the CSS and the
    script (inline in report.html, same-origin files in the live page), `controls` goes after the header.
    With no run (result None: the live page before an answer) `header` gives the header's text and nothing is drawn.
    notes: the header's notes (report_data's)."""
    if result is None:
        assert header is not None, "no run and no header"
        values = {name: html.escape(text) for name, text in header.items()}
        values.update({"sentences": "", "summary_lines": "", "data": ""})
    else:
        assert summary is not None, "a run comes with its summary"
        data = report_data(result, summary, notes=notes) if data is None else data
        values = {name: html.escape(text) for name, text in header_text(result, summary, tool, notes).items()}
        values.update({
            "sentences": _header_sentences(result, len(data["sentences"])),
            "summary_lines": "<br>\n".join(html.escape(line) for line in data["summary_lines"]),
            "data": _json_for_script(data),
        })
    values.update({"styles": styles, "scripts": scripts, "controls": controls})
    # One pass, so nothing inserted is scanned again for placeholders.
    return re.sub(r"\{\{(\w+)\}\}", lambda match: values[match.group(1)], _template("html"))


def colour_rules() -> str:
    """The CSS variables of the focus and sense colours, and their darker shades for text (decided in Python)."""
    return (f":root {{ --focus: {html.escape(FOCUS_COLOUR)}; --sense: {html.escape(CATEGORY_COLOURS[SENSE])}; "
            f"--focus-text: {html.escape(FOCUS_TEXT_COLOUR)}; --sense-text: {html.escape(SENSE_TEXT_COLOUR)}; }}")


def report_html(result: RunResult, summary: dict, max_sentences: int | None = REPORT_SENTENCES,
                notes: Sequence[str] = ()) -> str:
    """The whole page as one string; the same inputs give the same string (no dates, sorted keys). It holds the
    maps of the first max_sentences sentences (None: every one) and says so when the run has more. notes: what
    a reader must know beside the maps (e.g. words the vocabulary lacks), in the header."""
    return page_html(result, summary, styles=f"<style>\n{_template('css')}\n{colour_rules()}\n</style>",
                     scripts=f"<script>\n{_template('js')}\n</script>",
                     data=report_data(result, summary, max_sentences, notes), notes=notes)


def report_iframe(page_html: str, height: int = IFRAME_HEIGHT) -> str:
    """The whole page in an <iframe srcdoc>, e.g. for a notebook's _repr_html_.

    The page stays self-contained and offline; the sandbox allows its scripts and nothing else (no same
    origin, no forms, no pop-ups, no top navigation), so its script and styles cannot touch the notebook's.
    """
    assert height > 0, height
    title = html.escape("real-attention report")
    return (
        f'<iframe srcdoc="{html.escape(page_html, quote=True)}" sandbox="allow-scripts" title="{title}" '
        f'style="width: 100%; height: {int(height)}px; border: 1px solid #d0d7de;"></iframe>'
    )


def write_report(path: Path, result: RunResult, summary: dict, max_sentences: int | None = REPORT_SENTENCES,
                 notes: Sequence[str] = ()) -> Path:
    """Write the report to `path` (e.g. figures/<lang>/report.html), with the first max_sentences sentences
    (None: all) and `notes` in its header; returns the path."""
    path = Path(path)
    path.write_text(report_html(result, summary, max_sentences, notes), encoding="utf-8", newline="\n")
    return path
