"""The HTML report: self-contained, small, faithful to attention.csv, deterministic, and working in Chromium.

The tests marked `browser` drive headless Chromium through Selenium and the Debian chromedriver, with the
network off. Where Chromium, chromedriver or Selenium is missing they skip with the reason, except in CI
(the CI environment variable set), where they fail:
    apt-get install -y chromium chromium-driver && pip install selenium
Regenerate the README screenshot with:  python tests/test_report.py figures/demo-minilm/report.png
"""
from __future__ import annotations

import html
import io
import json
import math
import re
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from conftest import require_browser, start_browser
from real_attention.engine.categories import (
    CATEGORIES, CATEGORY_COLOURS, HEATMAP_CMAP, HEATMAP_LIGHT_TEXT_FROM, category_counts, focus_categories,
    key_relations, key_rules,
)
from real_attention.engine.focus import focus_sentences
from real_attention.engine.heads import classify
from real_attention.engine.pipeline import RunResult
from real_attention.outputs.report import (
    REPORT_NAME, WEIGHT_SCALE, report_html, report_iframe, sentence_gaps, write_report,
)
from real_attention.engine.sentences import Sentence, SentenceSet, load_sentences
from real_attention.outputs.tables import summary as make_summary
from real_attention.outputs.tables import write_results
from real_attention.engine.words import PUNCT, SPECIAL, WORD, WordAttention
from real_attention import cli

from conftest import unpack_weights

MB = 1024 * 1024
DATA_TAG = re.compile(r'<script type="application/json" id="report-data">(.*?)</script>', re.S)


# ---- helpers ---------------------------------------------------------------------------------------

def report_data(page: str) -> dict:
    match = DATA_TAG.search(page)
    assert match, "no <script id=report-data>"
    return json.loads(match.group(1))


def softmax(logits: np.ndarray) -> np.ndarray:
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def synthetic_result(layers: int = 12, heads: int = 12, lengths=(12, 9), seed: int = 0,
                     extra_word: str | None = None) -> tuple[RunResult, dict]:
    """Random attention over made-up sentences "[CLS] uno banco w.. senseN . [SEP]", plus hand-made heads.

    With 3 heads or more, head (1, 1) looks at the previous word, (1, 2) at the next one and (1, 3) at the sense word.
    """
    rng = np.random.default_rng(seed)
    attentions, configured = [], []
    for number, n in enumerate(lengths, start=1):
        middle = [f"w{i}" for i in range(n - 6)]
        words = ["[CLS]", "uno", "banco", *middle, f"sense{number}", ".", "[SEP]"]
        if extra_word is not None:
            words[3] = extra_word
        kinds = [SPECIAL] + [WORD] * (n - 3) + [PUNCT, SPECIAL]
        assert len(words) == n
        weights = softmax(2.5 * rng.normal(size=(layers, heads, n, n)))  # (layers, heads, n, n)
        if heads >= 3:
            previous, following = np.eye(n, k=-1), np.eye(n, k=1)  # W[i, i-1] = 1, W[i, i+1] = 1
            previous[0, 0] = following[n - 1, n - 1] = 1  # the ends look at themselves: rows sum to 1
            weights[0, 0], weights[0, 1] = previous, following
            weights[0, 2, 2] = np.eye(n)[n - 3]  # the focus row ("banco", unit 2) looks at the sense word
        text = " ".join(words[1:-1])
        attentions.append(WordAttention(text=text, words=tuple(words), kinds=tuple(kinds),
                                        weights=weights.astype(np.float32)))
        configured.append(Sentence(text=text, sense=f"sense{number}"))
    sentence_set = SentenceSet(lang="xx", focus="banco", sentences=tuple(configured))
    located = focus_sentences(attentions, sentence_set)
    report = classify(located)
    versions = {"python": "3", "torch": "2", "transformers": "5"}
    result = RunResult(sentence_set=sentence_set, sentences=tuple(located), report=report,
                       model="synthetic/model", revision="0" * 40, versions=versions)
    return result, make_summary(result)


# A hand-made run where every head's category, and every key's relation to the focus word, is known by
# construction. Sentence 1 is "uno banco w0 sense1 ." (focus 2, sense 4); sentence 2 is "banco sense2 w ."
# (focus 1, sense 2): there the sense word is also the next word and [CLS] also the previous one.
HAND_WORDS = (
    ("[CLS]", "uno", "banco", "w0", "sense1", ".", "[SEP]"),
    ("[CLS]", "banco", "sense2", "w", ".", "[SEP]"),
)
HAND_KINDS = (
    (SPECIAL, WORD, WORD, WORD, WORD, PUNCT, SPECIAL),
    (SPECIAL, WORD, WORD, WORD, PUNCT, SPECIAL),
)
HAND_FOCUS = (2, 1)
HAND_MARKERS = (
    [True, False, False, False, False, True, True],
    [True, False, False, False, True, True],
)
HAND_RELATIONS = (  # the first rule that holds: sense, marker, previous, next, else other
    ["marker", "previous", "other", "next", "sense", "marker", "marker"],
    ["marker", "other", "sense", "other", "marker", "marker"],
)
# (layers=2, heads=4, sentences=2): the key the focus word looks at, and the head's category.
HAND_TARGETS = (
    ((4, 2), (0, 4), (1, 0), (3, 2)),  # sense in both; markers; previous (and [CLS], a marker); next (and sense)
    ((4, 0), (2, 3), (5, 5), (4, 2)),  # sense then marker; itself then "w"; "." then [SEP]; sense in both
)
HAND_CATEGORIES = (
    ("sense", "marker", "previous", "next"),
    ("other", "other", "marker", "sense"),
)


def hand_made_result() -> tuple[RunResult, dict]:
    """The hand-made run above: uniform rows, except the focus row, which puts all its weight on the target."""
    layers, heads = len(HAND_TARGETS), len(HAND_TARGETS[0])
    attentions, configured = [], []
    for s, (words, kinds) in enumerate(zip(HAND_WORDS, HAND_KINDS)):
        n = len(words)
        weights = np.full((layers, heads, n, n), 1.0 / n)  # (layers, heads, n, n)
        for layer in range(layers):
            for head in range(heads):
                weights[layer, head, HAND_FOCUS[s]] = np.eye(n)[HAND_TARGETS[layer][head][s]]
        text = " ".join(words[1:-1])
        attentions.append(WordAttention(text=text, words=words, kinds=kinds, weights=weights.astype(np.float32)))
        configured.append(Sentence(text=text, sense=f"sense{s + 1}"))
    sentence_set = SentenceSet(lang="xx", focus="banco", sentences=tuple(configured))
    located = focus_sentences(attentions, sentence_set)
    assert [s.focus for s in located] == list(HAND_FOCUS)
    result = RunResult(sentence_set=sentence_set, sentences=tuple(located), report=classify(located),
                       model="hand/made", revision="0" * 40, versions={"python": "3"})
    return result, make_summary(result)


@pytest.fixture(scope="module")
def tiny_run(tiny_loaded, tmp_path_factory):
    """The tiny model on the lesson's Spanish sentences: results and report.html in one folder."""
    from real_attention.engine.pipeline import analyse

    folder = tmp_path_factory.mktemp("tiny-report")
    result = analyse(tiny_loaded, load_sentences(None, "es"))
    summary = write_results(folder, result)
    write_report(folder / REPORT_NAME, result, summary)
    return folder, result, summary


@pytest.fixture(scope="module")
def synthetic_144():
    return synthetic_result()


# ---- the file itself -------------------------------------------------------------------------------

EXTERNAL = [
    re.compile(r"""\b(?:src|href|action|poster|srcset)\s*=\s*["']?(?!#)[^"'\s>]""", re.I),
    re.compile(r"""\bimport\s*(?:\(|["'{*]|\w+\s+from)"""),
    re.compile(r"\bfetch\s*\("),
    re.compile(r"\burl\s*\(", re.I),
    re.compile(r"@import", re.I),
    re.compile(r"\bXMLHttpRequest|\bWebSocket|\bEventSource|sendBeacon"),
    re.compile(r"(?:https?:|wss?:|ftp:)?//[a-z0-9.-]+\.[a-z]{2,}", re.I),
]


def test_report_has_no_external_urls(tiny_run, synthetic_144):
    pages = [(tiny_run[0] / REPORT_NAME).read_text(encoding="utf-8"), report_html(*synthetic_144)]
    for page in pages:
        for pattern in EXTERNAL:
            found = pattern.findall(page)
            assert not found, f"{pattern.pattern}: {found[:3]}"
        assert "<link" not in page and "<iframe" not in page
        assert page.count("<script") == 2  # the data and the inline code, nothing loaded


def test_144_heads_stay_under_5_mb(synthetic_144):
    result, summary = synthetic_144
    page = report_html(result, summary)
    assert result.report.shape == (12, 12)
    size = len(page.encode("utf-8"))
    assert size < 5 * MB, f"{size / MB:.2f} MB"
    assert report_data(page)["summary"]["heads_total"] == 144
    long_sentence = report_html(*synthetic_result(layers=12, heads=12, lengths=(128,)))  # 2.4M weights
    assert len(long_sentence.encode("utf-8")) < 5 * MB


def test_the_page_holds_the_summary_of_its_own_sentences_only(synthetic_144):
    """With max_sentences, summary.json's per-sentence lists are cut too: the page grows with the sentences it
    shows, not with the run's."""
    result, summary = synthetic_144
    assert len(summary["sentences"]) == 2 and len(summary["word_positions"]) == 2
    data = report_data(report_html(result, summary, max_sentences=1))
    assert data["summary"]["sentences"] == summary["sentences"][:1]
    assert data["summary"]["word_positions"] == summary["word_positions"][:1]
    assert len(data["summary"]["marker_head_count_per_sentence"]) == 1
    assert data["summary"]["best_sense_head"] == summary["best_sense_head"] and "tables" not in data["summary"]
    whole = report_data(report_html(result, summary, max_sentences=None))["summary"]
    assert whole["sentences"] == summary["sentences"]


def test_weights_are_the_ones_in_attention_csv(tiny_run):
    folder, result, _ = tiny_run
    data = report_data((folder / REPORT_NAME).read_text(encoding="utf-8"))
    table = pd.read_csv(folder / "attention.csv")
    layers, heads = data["layers"], data["heads"]
    assert data["weight_scale"] == WEIGHT_SCALE
    for number, sentence in enumerate(data["sentences"], start=1):
        n = len(sentence["words"])
        rows = table[table.sentence == number]
        assert len(rows) == layers * heads * n * n
        stored = unpack_weights(sentence["weights"]) / WEIGHT_SCALE  # same C order as the table
        np.testing.assert_allclose(stored, rows.weight.to_numpy(), atol=5e-5 + 1e-6)
        assert sentence["words"] == list(rows[(rows.layer == 1) & (rows["head"] == 1) & (rows.query_index == 0)].key)


def test_two_reports_are_byte_identical(synthetic_144, tiny_model_dir, tmp_path):
    assert report_html(*synthetic_144) == report_html(*synthetic_144)
    pages = []
    for name in ("a", "b"):
        done = CliRunner().invoke(cli, ["run", "--model", str(tiny_model_dir), "--out", str(tmp_path / name),
                                        *no_figures()], catch_exceptions=False)
        assert done.exit_code == 0, done.output
        path = tmp_path / name / "figures" / "es" / REPORT_NAME
        assert f"wrote {path}" in done.output
        pages.append(path.read_bytes())
    assert pages[0] == pages[1]


def no_figures() -> list[str]:
    """Pass --no-figures where `run` has it, so this file tests only the report."""
    return ["--no-figures"] if any(p.name == "no_figures" for p in cli.commands["run"].params) else []


def test_no_report_writes_no_report(tiny_model_dir, tmp_path):
    done = CliRunner().invoke(cli, ["run", "--model", str(tiny_model_dir), "--out", str(tmp_path), "--no-report",
                                    *no_figures()], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert not (tmp_path / "figures" / "es" / REPORT_NAME).exists()
    assert REPORT_NAME not in done.output
    assert (tmp_path / "results" / "es" / "summary.json").exists()


def test_data_cannot_close_the_script_tag():
    result, summary = synthetic_result(layers=1, heads=2, lengths=(8,), extra_word="</script><!--x")
    page = report_html(result, summary)
    assert page.count("</script>") == 2
    assert "</script><!--x" not in page
    assert report_data(page)["sentences"][0]["words"][3] == "</script><!--x"


def test_header_names_model_revision_sentences_and_rules(tiny_run):
    folder, result, _ = tiny_run
    page = (folder / REPORT_NAME).read_text(encoding="utf-8")
    header = page[page.index("<header"):page.index("</header>")]
    assert result.model in header and result.revision in header
    for sentence in result.sentence_set.sentences:
        assert sentence.text in header and sentence.sense in header
    assert "sum over the attended-to pieces, mean over the attending ones" in header  # the merge rule
    assert "Markers: special tokens" in header and "punctuation" in header
    assert "offset -1" in header and "offset +1" in header
    assert "counted from 1" in header


def test_categories_relations_and_markers_are_the_hand_made_ones():
    result, summary = hand_made_result()
    page = report_html(result, summary)
    data = report_data(page)
    assert data["head_category"] == [name for row in HAND_CATEGORIES for name in row]
    counts = {c["name"]: c["count"] for c in data["categories"]}
    assert counts == {"sense": 2, "marker": 2, "previous": 1, "next": 1, "other": 2}
    assert (summary["sense_head_count"], summary["marker_head_count"]) == (2, 2)
    assert "sense-word heads: 2 of 8" in page
    for s, sentence in enumerate(data["sentences"]):
        assert sentence["markers"] == HAND_MARKERS[s]
        assert sentence["relations"] == HAND_RELATIONS[s]
        assert sentence["gaps"] == [None, ""] + [" "] * (len(HAND_WORDS[s]) - 3) + [None]
    assert data["start_head"] == {"layer": 1, "head": 1}  # the best sense head
    assert all(key not in data for key in ("previous_offset", "next_offset"))  # the rules came applied


def test_key_relations_take_the_first_rule_that_holds():
    result, _ = hand_made_result()
    for s, sentence in enumerate(result.sentences):
        assert key_relations(sentence).tolist() == HAND_RELATIONS[s]
        rules = key_rules(sentence)  # (4, n)
        assert rules.shape == (4, len(HAND_WORDS[s])) and rules.dtype == bool
    assert key_rules(result.sentences[1])[:, 2].tolist() == [True, False, False, True]  # sense and next: sense wins
    assert key_rules(result.sentences[1])[:, 0].tolist() == [False, True, True, False]  # marker and previous


def test_a_heads_category_is_the_first_key_rule_its_top_key_meets_in_every_sentence(synthetic_144):
    """focus_categories (from HeadReport's labels) and key_rules (per key) state the same rules."""
    runs = (synthetic_144, hand_made_result(), synthetic_result(layers=4, heads=6, lengths=(7, 7, 8), seed=3))
    for result, _ in runs:
        met = np.stack([key_rules(sentence)[:, result.report.top_key[s]]  # (4, layers, heads)
                        for s, sentence in enumerate(result.sentences)]).all(axis=0)
        expected = np.select(list(met), list(CATEGORIES[:4]), default=CATEGORIES[4])
        np.testing.assert_array_equal(focus_categories(result.report, list(result.sentences)), expected)


def test_the_page_gets_every_rule_a_head_meets_and_its_category_is_the_first(synthetic_144):
    """head_rules: the sense and marker flags of heads.csv and the other rules, each (layers * heads,); the
    category the page colours a head with is the first that holds, in the order of data["categories"]."""
    for result, summary in (synthetic_144, hand_made_result(), synthetic_result(layers=4, heads=6, lengths=(7, 7, 8),
                                                                                 seed=3)):
        data = report_data(report_html(result, summary))
        rules = data["head_rules"]  # the JSON's keys are sorted: the precedence is that of data["categories"]
        order = [category["name"] for category in data["categories"]]
        assert order == list(CATEGORIES) and sorted(rules) == sorted(CATEGORIES[:4])
        assert rules["sense"] == result.report.sense_head.reshape(-1).tolist()
        assert rules["marker"] == result.report.marker_head.reshape(-1).tolist()
        first = [next((name for name in order[:-1] if rules[name][i]), "other")
                 for i in range(len(data["head_category"]))]
        assert data["head_category"] == first
        assert "sense_head" not in data["head_scores"]  # sent once, in head_rules


@pytest.mark.browser
def test_the_head_heading_names_the_rules_it_meets_besides_its_category(browser, tmp_path):
    """A head that meets several rules shows its category and, beside it, the others (here L1H1, a sense head,
    told that it also meets the next-word rule)."""
    from selenium.webdriver.common.by import By

    result, summary = hand_made_result()
    path = write_report(tmp_path / REPORT_NAME, result, summary)
    page = path.read_text(encoding="utf-8")
    match = DATA_TAG.search(page)
    data = json.loads(match.group(1))
    data["head_rules"]["next"][0] = True
    path.write_text(page[:match.start(1)] + json.dumps(data) + page[match.end(1):], encoding="utf-8")
    open_report(browser, path)

    def also(layer: int, head: int) -> list[str]:
        browser.find_element(By.CSS_SELECTOR, f'#overview .cell[data-layer="{layer}"][data-head="{head}"]').click()
        return [badge.text for badge in browser.find_elements(By.CSS_SELECTOR, "#head-heading .badge.also")]

    assert also(1, 1) == ["also next word"]
    assert browser.find_element(By.CSS_SELECTOR, "#head-heading .badge").text == "sense word"
    assert also(1, 2) == [] and also(1, 4) == []  # L1H4: next (and sense in one sentence only)


def test_sense_and_marker_cells_are_the_heads_csv_labels(tiny_run):
    folder, _, summary = tiny_run
    data = report_data((folder / REPORT_NAME).read_text(encoding="utf-8"))
    heads = pd.read_csv(folder / "heads.csv").sort_values(["layer", "head"])
    expected = np.where(heads.sense_head, "sense", np.where(heads.marker_head, "marker", "neither"))
    shown = np.array(data["head_category"])
    shown = np.where(np.isin(shown, ["sense", "marker"]), shown, "neither")
    assert shown.tolist() == expected.tolist()
    counts = {c["name"]: c["count"] for c in data["categories"]}
    assert (counts["sense"], counts["marker"]) == (summary["sense_head_count"], summary["marker_head_count"])


def test_sentence_gaps_show_the_sentence_as_written():
    words = ("[CLS]", "¿", "Fui", "al", "«", "banco", "»", ",", "hoy", "?", "[SEP]")
    kinds = (SPECIAL, PUNCT, WORD, WORD, PUNCT, WORD, PUNCT, PUNCT, WORD, PUNCT, SPECIAL)
    text = "¿Fui al «banco», hoy?"
    gaps = sentence_gaps(WordAttention(text=text, words=words, kinds=kinds,
                                       weights=np.full((1, 1, 11, 11), 1 / 11, dtype=np.float32)))
    assert gaps == [None, "", "", " ", " ", "", "", "", " ", "", None]
    assert "".join(gap + word for gap, word in zip(gaps, words) if gap is not None) == text


def heatmap_colour(weight: float) -> str:
    """The colour matplotlib gives `weight` in the PNG heatmaps (imshow with vmin=0, vmax=1)."""
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize, to_hex

    return to_hex(ScalarMappable(norm=Normalize(0.0, 1.0), cmap=HEATMAP_CMAP).to_rgba(weight))


def test_heatmap_ramp_is_matplotlibs_colour_map():
    from real_attention.outputs import plots

    assert plots.HEATMAP_CMAP is HEATMAP_CMAP  # the PNGs use the same colour map
    heatmap = report_data(report_html(*hand_made_result()))["heatmap"]
    colours = heatmap["colours"]
    assert heatmap["cmap"] == HEATMAP_CMAP and len(colours) == 256
    assert heatmap["light_text_from"] == HEATMAP_LIGHT_TEXT_FROM
    for ints in (0, 1, 38, 39, 40, 2500, 4999, 5000, 5001, 9960, 9961, 9999, 10000):  # bin edges near 1/256
        weight = ints / WEIGHT_SCALE
        assert colours[min(int(np.floor(weight * len(colours))), len(colours) - 1)] == heatmap_colour(weight), ints


def test_js_names_no_category_or_kind():
    """The page's script draws the categories, kinds and relations it is given; it names none of them."""
    from real_attention.outputs.report import _template

    script = _template("js")
    for name in (*CATEGORIES, SPECIAL, PUNCT, WORD):
        assert not re.search(rf"""["'`]{name}["'`]""", script), name


def test_summary_in_memory_gives_the_same_page_as_summary_json(tiny_run):
    folder, result, _ = tiny_run
    written = (folder / REPORT_NAME).read_text(encoding="utf-8")
    assert report_html(result, make_summary(result)) == written  # no files needed
    assert report_html(result, json.loads((folder / "summary.json").read_text(encoding="utf-8"))) == written


def srcdoc(wrapper: str) -> str:
    match = re.fullmatch(r'<iframe srcdoc="([^"]*)" sandbox="allow-scripts" [^>]*></iframe>', wrapper)
    assert match, wrapper[:200]
    return html.unescape(match.group(1))


def test_iframe_holds_the_exact_page_and_nothing_external(synthetic_144):
    result, summary = hand_made_result()
    page = report_html(result, summary).replace("</body>", "<!-- 'quotes' & \"ampersands\" &amp; --></body>")
    wrapper = report_iframe(page, height=640)
    assert srcdoc(wrapper) == page
    assert "height: 640px" in wrapper and wrapper.count("<") == 2  # the iframe's tags: the page is all escaped
    for pattern in EXTERNAL:  # on the page as the iframe reads it (a link within the page, #overview-panel, is fine)
        assert not pattern.findall(html.unescape(wrapper)), pattern.pattern
    big = report_html(*synthetic_144)
    assert srcdoc(report_iframe(big)) == big


# ---- in a real browser -----------------------------------------------------------------------------

def test_browser_tests_fail_in_ci_and_skip_elsewhere():
    require_browser(None, {"CI": "true"})  # a browser: nothing to say
    with pytest.raises(pytest.fail.Exception, match="CI is set .*no Chromium"):
        require_browser("no Chromium or chromedriver", {"CI": "true"})
    with pytest.raises(pytest.skip.Exception, match="no Chromium"):
        require_browser("no Chromium or chromedriver", {})


def open_report(driver, path: Path, timeout: float = 15.0) -> float:
    """Load the report from file:// and wait until its script has drawn everything; returns the seconds."""
    start = time.monotonic()
    driver.get(path.resolve().as_uri())
    wait_until_ready(driver, start, timeout)
    return time.monotonic() - start


def wait_until_ready(driver, start: float, timeout: float = 15.0) -> None:
    """Wait until the report in the current document (or frame) has drawn everything."""
    while driver.execute_script("return document.body && document.body.dataset.ready") != "true":
        assert time.monotonic() - start < timeout, "the report never became ready"
        time.sleep(0.05)


def hover(driver, element) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    driver.execute_script("arguments[0].scrollIntoView({block: 'center', inline: 'center'})", element)
    ActionChains(driver).move_to_element(element).perform()


def shown_lines(driver) -> list[tuple[int, int]]:
    """The (query, key) of every line the line view shows now."""
    return [tuple(pair) for pair in driver.execute_script(
        "return [...document.querySelectorAll('#lines-svg .ln')]"
        ".filter(l => getComputedStyle(l).display !== 'none').map(l => [+l.dataset.q, +l.dataset.k])")]


def heatmap_weights(driver) -> dict[tuple[int, int], float]:
    cells = driver.execute_script(
        "return [...document.querySelectorAll('#heatmap-svg rect[data-w]')].map(r => [+r.dataset.q, +r.dataset.k, r.dataset.w])")
    return {(q, k): float(w) for q, k, w in cells}


def js_round(x: float) -> int:
    """JavaScript's Math.round: halves go up (Python's round goes to even)."""
    return int(np.floor(x + 0.5))


def is_blank(png: bytes) -> bool:
    import matplotlib.image as mpimg

    pixels = mpimg.imread(io.BytesIO(png))[..., :3]  # (height, width, 3)
    rgb = (pixels.reshape(-1, 3) * 255).round().astype(np.int64)  # (pixels, 3)
    colours = np.unique(rgb @ np.array([1 << 16, 1 << 8, 1]))
    return pixels.std() < 0.02 or len(colours) < 20


@pytest.fixture()
def tiny_page(browser, tiny_run):
    """The tiny run's report in the browser, opened again only when another test has left it."""
    folder, result, summary = tiny_run
    page = (folder / REPORT_NAME).resolve().as_uri()
    if browser.current_url.split("#")[0] != page:
        open_report(browser, folder / REPORT_NAME)
    return browser, folder, result, summary


@pytest.mark.browser
def test_overview_has_a_cell_per_head_with_its_category(tiny_page):
    from selenium.webdriver.common.by import By

    driver, folder, result, summary = tiny_page
    layers, heads = result.report.shape
    cells = driver.find_elements(By.CSS_SELECTOR, "#overview .cell")
    assert len(cells) == layers * heads == 12
    found = {(int(c.get_attribute("data-layer")), int(c.get_attribute("data-head"))): c.get_attribute("data-category")
             for c in cells}
    categories = focus_categories(result.report, list(result.sentences))
    assert found == {(l + 1, h + 1): categories[l, h] for l in range(layers) for h in range(heads)}
    counts = category_counts(categories)
    legend = {item.get_attribute("data-category"): item.find_element(By.CLASS_NAME, "count").text
              for item in driver.find_elements(By.CSS_SELECTOR, "#legend .item[data-category]")}
    assert legend == {name: f"{count} of 12" for name, count in counts.items()}
    assert legend["sense"] == f"{summary['sense_head_count']} of 12"
    assert legend["marker"] == f"{summary['marker_head_count']} of 12"
    assert f"sense-word heads: {summary['sense_head_count']} of 12" in driver.find_element(By.TAG_NAME, "body").text


@pytest.mark.browser
def test_hovering_a_cell_shows_each_sentences_top_word(tiny_page):
    from selenium.webdriver.common.by import By

    driver, folder, result, _ = tiny_page
    focus = pd.read_csv(folder / "focus.csv")
    hover(driver, driver.find_element(By.CSS_SELECTOR, '#overview .cell[data-layer="2"][data-head="3"]'))
    tip = driver.find_element(By.ID, "tooltip")
    assert tip.is_displayed()
    lines = tip.text.splitlines()
    assert lines[0].startswith("Layer 2, head 3")
    rows = focus[(focus.layer == 2) & (focus["head"] == 3)].sort_values("sentence")
    assert len(lines) == 1 + len(rows)
    for line, row in zip(lines[1:], rows.itertuples()):
        assert f"→ «{row.top_key}»" in line
        assert f"{100 * row.top_weight:.1f} %" in line  # focus.csv's value rounded once, not twice
    cells = {(int(c.get_attribute("data-layer")), int(c.get_attribute("data-head"))): c.find_element(
        By.CLASS_NAME, "pct").text for c in driver.find_elements(By.CSS_SELECTOR, "#overview .cell")}
    shown = focus[focus.sentence == focus.sentence.min()]
    assert cells == {(row.layer, row.head): f"{math.floor(100 * row.top_weight + 0.5)} %"  # JS's Math.round
                     for row in shown.itertuples()}


def test_the_page_numbers_are_the_tables_numbers(tiny_run):
    """The page's scores and top weights carry the tables' 6 decimals: at 4 they were rounded twice when shown
    (heads.csv's 0.122497 became 0.1225, then 12.3 %; entropy 0.175025 became 0.1750, then 0.17 nats)."""
    folder, result, summary = tiny_run
    data = report_data((folder / REPORT_NAME).read_text(encoding="utf-8"))
    heads = pd.read_csv(folder / "heads.csv")
    for name, values in data["head_scores"].items():
        assert values == heads[name].tolist(), name
    focus = pd.read_csv(folder / "focus.csv")
    for number, sentence in enumerate(data["sentences"], start=1):
        assert sentence["top_weight"] == focus[focus.sentence == number]["top_weight"].tolist()


@pytest.mark.browser
def test_clicking_a_cell_shows_that_heads_weights(tiny_page):
    from selenium.webdriver.common.by import By

    driver, folder, result, _ = tiny_page
    table = pd.read_csv(folder / "attention.csv")
    driver.find_element(By.CSS_SELECTOR, '#overview .cell[data-layer="3"][data-head="2"]').click()
    assert driver.find_element(By.ID, "head-title").text == "Layer 3, head 2"
    assert "selected" in driver.find_element(By.CSS_SELECTOR, '.cell[data-layer="3"][data-head="2"]').get_attribute("class")
    for number in (1, 2):
        driver.find_element(By.CSS_SELECTOR, f'#sentence-buttons button[data-sentence="{number}"]').click()
        svg = driver.find_element(By.ID, "heatmap-svg")
        assert (svg.get_attribute("data-layer"), svg.get_attribute("data-head"), svg.get_attribute("data-sentence")) == \
            ("3", "2", str(number))
        rows = table[(table.sentence == number) & (table.layer == 3) & (table["head"] == 2)]
        expected = {(r.query_index, r.key_index): r.weight for r in rows.itertuples()}
        shown = heatmap_weights(driver)
        assert shown.keys() == expected.keys()
        assert max(abs(shown[cell] - expected[cell]) for cell in expected) <= 5e-5 + 1e-6
        # the cell text is the weight in whole percent (blank when it rounds to 0)
        texts = driver.execute_script("return [...document.querySelectorAll('#heatmap-svg .cell-text')].map(t => t.textContent)")
        whole = [js_round(100 * w) for w in shown.values()]
        assert sorted(int(t) for t in texts) == sorted(p for p in whole if p > 0)
        # the bars are the focus word's row
        focus = result.sentences[number - 1].focus
        bars = driver.execute_script("return [...document.querySelectorAll('#bars-svg .bar')].map(b => +b.dataset.w)")
        assert bars == pytest.approx([expected[(focus, k)] for k in range(len(bars))], abs=5e-5 + 1e-6)


def shown_bars(driver) -> list[tuple[str, str]]:
    """(data-relation, fill) of every bar in the focus word's row, by key."""
    return [tuple(bar) for bar in driver.execute_script(
        "return [...document.querySelectorAll('#bars-svg .bar')].map(b => [b.dataset.relation, b.getAttribute('fill')])")]


@pytest.mark.browser
def test_bars_take_their_relation_from_python(tiny_page):
    from selenium.webdriver.common.by import By

    driver, _, result, _ = tiny_page
    layers, heads = result.report.shape
    for layer, head in ((1, 1), (layers, heads)):
        driver.find_element(By.CSS_SELECTOR, f'#overview .cell[data-layer="{layer}"][data-head="{head}"]').click()
        for number, sentence in enumerate(result.sentences, start=1):
            driver.find_element(By.CSS_SELECTOR, f'#sentence-buttons button[data-sentence="{number}"]').click()
            expected = key_relations(sentence).tolist()  # straight from the rules, not from the page's data
            assert shown_bars(driver) == [(name, CATEGORY_COLOURS[name]) for name in expected]


@pytest.mark.browser
def test_hand_made_page_draws_the_hand_made_rules(browser, tmp_path):
    from selenium.webdriver.common.by import By

    result, summary = hand_made_result()
    open_report(browser, write_report(tmp_path / REPORT_NAME, result, summary))
    cells = {(int(c.get_attribute("data-layer")), int(c.get_attribute("data-head"))): c.get_attribute("data-category")
             for c in browser.find_elements(By.CSS_SELECTOR, "#overview .cell")}
    assert cells == {(l + 1, h + 1): name for l, row in enumerate(HAND_CATEGORIES) for h, name in enumerate(row)}
    for number in (1, 2):
        browser.find_element(By.CSS_SELECTOR, f'#sentence-buttons button[data-sentence="{number}"]').click()
        assert [relation for relation, _ in shown_bars(browser)] == HAND_RELATIONS[number - 1]
        marked = browser.execute_script(
            "return [...document.querySelectorAll('#heatmap-svg .row-label')].map(t => t.classList.contains('marker-label'))")
        assert marked == HAND_MARKERS[number - 1]
    buttons = [b.text for b in browser.find_elements(By.CSS_SELECTOR, "#sentence-buttons button")]
    assert buttons == [f"{number}. {s.text}" for number, s in enumerate(result.sentence_set.sentences, start=1)]


@pytest.mark.browser
def test_heatmap_colours_are_the_png_colour_map(tiny_page):
    from selenium.webdriver.common.by import By

    driver = tiny_page[0]
    driver.find_element(By.CSS_SELECTOR, '#overview .cell[data-layer="1"][data-head="2"]').click()
    cells = driver.execute_script(
        "return [...document.querySelectorAll('#heatmap-svg rect[data-w]')].map(r => [r.dataset.w, r.getAttribute('fill')])")
    assert cells and all(fill == heatmap_colour(float(w)) for w, fill in cells)
    texts = driver.execute_script("return [...document.querySelectorAll('#heatmap-svg .cell-text')]"
                                  ".map(t => [t.classList.contains('light'), +t.textContent])")
    shown = sorted(js_round(100 * float(w)) for w, _ in cells if js_round(100 * float(w)) > 0)
    assert sorted(p for _, p in texts) == shown
    light_from = sorted(js_round(100 * float(w)) for w, _ in cells if float(w) >= HEATMAP_LIGHT_TEXT_FROM)
    assert sorted(p for light, p in texts if light) == light_from


@pytest.mark.browser
def test_sentence_buttons_show_the_sentences_as_written(tiny_page):
    from selenium.webdriver.common.by import By

    driver, _, result, _ = tiny_page
    buttons = [b.text for b in driver.find_elements(By.CSS_SELECTOR, "#sentence-buttons button")]
    assert buttons == [f"{number}. {s.text}" for number, s in enumerate(result.sentence_set.sentences, start=1)]


@pytest.mark.browser
def test_report_works_inside_a_sandboxed_iframe(browser, tmp_path):
    from selenium.webdriver.common.by import By

    result, summary = hand_made_result()
    wrapper = tmp_path / "notebook.html"
    notebook = ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>body { color: red; }</style></head>"
                "<body><p id=\"outside\">a notebook</p>IFRAME</body></html>")
    wrapper.write_text(notebook.replace("IFRAME", report_iframe(report_html(result, summary))), encoding="utf-8")
    browser.get_log("browser")  # forget earlier pages' messages
    browser.get(wrapper.resolve().as_uri())
    browser.switch_to.frame(browser.find_element(By.TAG_NAME, "iframe"))
    try:
        wait_until_ready(browser, time.monotonic())
        assert len(browser.find_elements(By.CSS_SELECTOR, "#overview .cell")) == 8
        assert browser.find_element(By.ID, "head-title").text == "Layer 1, head 1"
        assert [relation for relation, _ in shown_bars(browser)] == HAND_RELATIONS[0]
        assert browser.execute_script("return getComputedStyle(document.body).color") != "rgb(255, 0, 0)"
    finally:
        browser.switch_to.default_content()
    # the page's script and styles stay inside: the notebook keeps its own
    assert browser.execute_script("return getComputedStyle(document.getElementById('outside')).color") == "rgb(255, 0, 0)"
    assert browser.execute_script("return document.body.dataset.ready") is None
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors


@pytest.mark.browser
def test_arrow_keys_step_through_the_heads(tiny_page):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver = tiny_page[0]
    title = lambda: driver.find_element(By.ID, "head-title").text  # noqa: E731
    driver.find_element(By.CSS_SELECTOR, '#overview .cell[data-layer="1"][data-head="4"]').click()
    ActionChains(driver).send_keys(Keys.ARROW_RIGHT).perform()
    assert title() == "Layer 2, head 1"
    ActionChains(driver).send_keys(Keys.ARROW_LEFT, Keys.ARROW_LEFT).perform()
    assert title() == "Layer 1, head 3"
    ActionChains(driver).send_keys(Keys.ARROW_DOWN).perform()
    assert title() == "Layer 2, head 3"
    assert driver.find_element(By.ID, "heatmap-svg").get_attribute("data-layer") == "2"
    driver.find_element(By.CSS_SELECTOR, '#overview .cell[data-layer="1"][data-head="1"]').click()
    ActionChains(driver).send_keys(Keys.ARROW_LEFT).perform()
    assert title() == "Layer 3, head 4"  # wraps around
    driver.execute_script("document.activeElement.blur()")  # off the grid, the arrows scroll the page again
    ActionChains(driver).send_keys(Keys.ARROW_DOWN).perform()
    assert title() == "Layer 3, head 4"
    # a click that does not focus the button (Safari's, and a script's here) still leaves the arrows on the grid
    driver.execute_script("arguments[0].click()",
                          driver.find_element(By.CSS_SELECTOR, '#overview .cell[data-layer="2"][data-head="2"]'))
    ActionChains(driver).send_keys(Keys.ARROW_RIGHT).perform()
    assert title() == "Layer 2, head 3"


@pytest.mark.browser
def test_hovering_a_word_isolates_its_lines(tiny_page):
    from selenium.webdriver.common.by import By

    driver, _, result, _ = tiny_page
    driver.find_element(By.CSS_SELECTOR, '#overview .cell[data-layer="2"][data-head="2"]').click()
    driver.find_element(By.CSS_SELECTOR, '#sentence-buttons button[data-sentence="1"]').click()
    sentence = result.sentences[0]
    n, focus = len(sentence.attention.words), sentence.focus
    everything = shown_lines(driver)
    assert len(everything) > n
    hover(driver, driver.find_element(By.CSS_SELECTOR, f'#lines-svg .hit[data-side="q"][data-i="{focus}"]'))
    isolated = shown_lines(driver)
    row = np.rint(sentence.attention.weights[1, 1, focus].astype(np.float64) * WEIGHT_SCALE)
    assert sorted(isolated) == [(focus, k) for k in range(n) if row[k] > 0]
    annotations = driver.execute_script(
        "return [...document.querySelectorAll('#lines-svg .annot[data-side=\"k\"]')].map(a => a.textContent)")
    assert annotations[int(row.argmax())] == f"{js_round(row.max() / 100)} %"
    hover(driver, driver.find_element(By.CSS_SELECTOR, '#lines-svg .hit[data-side="k"][data-i="0"]'))
    assert {k for _, k in shown_lines(driver)} == {0}
    hover(driver, driver.find_element(By.ID, "head-heading"))  # leave the picture: all lines again
    assert len(shown_lines(driver)) == len(everything)


@pytest.mark.browser
def test_nothing_asked_of_the_network_and_no_script_errors(tiny_page):
    driver = tiny_page[0]
    page = (tiny_page[1] / REPORT_NAME).resolve().as_uri()
    driver.get_log("performance"), driver.get_log("browser")  # forget what came before: load it once more
    driver.get("about:blank")
    open_report(driver, tiny_page[1] / REPORT_NAME)
    requests = []  # (url, the document that asked)
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            requests.append((message["params"]["request"]["url"], message["params"].get("documentURL", "")))
    from_report = [url for url, document in requests if document.startswith(page)]
    assert from_report == [page]  # the report loads itself, and nothing else
    assert not [url for url, _ in requests if re.match(r"(https?|wss?|ftp):", url)]
    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors


@pytest.mark.browser
def test_screenshot_is_not_blank(tiny_page):
    from selenium.webdriver.common.by import By

    import matplotlib.image as mpimg

    driver = tiny_page[0]
    driver.execute_script("window.scrollTo(0, 0)")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, height + driver.execute_script("return window.outerHeight - window.innerHeight"))
    try:
        png = driver.get_screenshot_as_png()
        views = {view: driver.find_element(By.ID, view).rect for view in ("overview", "heatmap-svg", "lines-svg", "bars-svg")}
    finally:
        driver.set_window_size(1400, 1000)
    assert not is_blank(png)
    pixels = mpimg.imread(io.BytesIO(png))  # (height, width, channels)
    for view, rect in views.items():
        assert rect["width"] > 100 and rect["height"] > 100, view
        top, left = int(rect["y"]), int(rect["x"])
        part = pixels[top:top + int(rect["height"]), left:left + int(rect["width"])]
        assert part.shape[0] > 100 and part.shape[1] > 100, view  # inside the screenshot
        assert part.std() > 0.05, view  # not an empty box


@pytest.mark.browser
def test_128_words_stay_usable(browser, tmp_path):
    from selenium.webdriver.common.by import By

    result, summary = synthetic_result(layers=2, heads=3, lengths=(128,))
    path = write_report(tmp_path / REPORT_NAME, result, summary)
    seconds = open_report(browser, path)
    assert seconds < 10
    assert len(heatmap_weights(browser)) == 128 * 128
    assert not browser.find_elements(By.CSS_SELECTOR, "#heatmap-svg .cell-text")  # cells too small for text
    lines = browser.find_element(By.ID, "lines-svg")
    assert lines.size["height"] <= 128 * 12 + 8  # one readable row per word
    hover(browser, browser.find_element(By.CSS_SELECTOR, '#lines-svg .hit[data-side="q"][data-i="5"]'))
    assert {q for q, _ in shown_lines(browser)} == {5}


def minilm_screenshot(driver, folder: Path, png: Path) -> Path:
    """Run the packaged MiniLM on the lesson's sentences, open its report and save a full-page screenshot."""
    from real_attention.engine.models import choose_model, load_model
    from real_attention.engine.pipeline import analyse

    result = analyse(load_model(choose_model("es", "minilm", None)), load_sentences(None, "es"))
    summary = write_results(folder, result)
    open_report(driver, write_report(folder / REPORT_NAME, result, summary))
    chrome = driver.execute_script("return window.outerHeight - window.innerHeight")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, height + chrome)
    try:
        focus = result.sentences[0].focus  # show the focus word's lines, as a reader hovering it would
        hover(driver, driver.find_element("css selector", f'#lines-svg .hit[data-side="q"][data-i="{focus}"]'))
        png.write_bytes(driver.get_screenshot_as_png())
    finally:
        driver.set_window_size(1400, 1000)
    return png


@pytest.mark.browser
def test_minilm_report_screenshot(browser, needs_minilm, tmp_path):
    from selenium.webdriver.common.by import By

    png = minilm_screenshot(browser, tmp_path, tmp_path / "report.png")
    assert not is_blank(png.read_bytes())
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    cells = browser.find_elements(By.CSS_SELECTOR, "#overview .cell")
    assert len(cells) == summary["heads_total"]
    best = summary["best_sense_head"]
    assert browser.find_element(By.ID, "head-title").text == f"Layer {best['layer']}, head {best['head']}"
    assert (tmp_path / REPORT_NAME).stat().st_size < 5 * MB


if __name__ == "__main__":  # python tests/test_report.py figures/demo-minilm/report.png
    import tempfile

    target = Path(sys.argv[1] if len(sys.argv) > 1 else "figures/demo-minilm/report.png")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        browser_driver = start_browser(Path(work) / "profile")
        try:
            (Path(work) / "out").mkdir()
            print(minilm_screenshot(browser_driver, Path(work) / "out", target))
        finally:
            browser_driver.quit()


def test_packed_weights_round_trip_exactly():
    from real_attention.outputs.report import _packed

    weights = np.array([[0.0, 1.0, 0.00004, 0.00005], [0.5, 0.25, 0.12345, 0.99996]])  # (2, 4)
    expected = np.rint(weights * WEIGHT_SCALE).astype(np.int64).reshape(-1)
    assert expected.tolist() == [0, 10000, 0, 0, 5000, 2500, 1234, 10000]  # round half to even: 0.5 -> 0
    np.testing.assert_array_equal(unpack_weights(_packed(weights)), expected)
    assert _packed(weights) == _packed(weights.copy())  # deterministic bytes


@pytest.mark.browser
def test_rollout_view_draws_the_focus_row_after_each_layer(tiny_page):
    from selenium.webdriver.common.by import By

    driver, folder, result, summary = tiny_page
    driver.find_element(By.CSS_SELECTOR, '#sentence-buttons button[data-sentence="2"]').click()
    cells = driver.execute_script(
        "return [...document.querySelectorAll('#rollout-svg rect[data-w]')].map(r => [+r.dataset.layer, +r.dataset.k, r.dataset.w])")
    sentence, rolled = result.sentences[1], result.rollout[1]  # (layers, n, n)
    n = len(sentence.attention.words)
    assert len(cells) == result.report.shape[0] * n
    for layer, key, weight in cells:
        assert abs(float(weight) - rolled[layer - 1, sentence.focus, key]) <= 0.5e-4 + 1e-7
    assert "reaches «banco» in sentence 2" in driver.find_element(By.ID, "rollout-caption").text
    driver.find_element(By.CSS_SELECTOR, '#sentence-buttons button[data-sentence="1"]').click()


def test_a_page_of_the_first_sentences_says_so_in_the_tooltip_and_bars_fit(browser, tiny_run, tmp_path):
    """With --report-sentences 1 of 2, the tooltip listed sentence 1 under "hover for all sentences"; and the
    bars' "100.0 %" label ran 2.7 px past its picture."""
    from selenium.webdriver.common.by import By

    folder, result, summary = tiny_run
    assert len(result.sentences) > 1
    page = tmp_path / REPORT_NAME
    write_report(page, result, summary, max_sentences=1)
    open_report(browser, page)
    hover(browser, browser.find_element(By.CSS_SELECTOR, '#overview .cell[data-layer="1"][data-head="1"]'))
    tip = browser.find_element(By.ID, "tooltip")
    assert f"the first 1 of the run's {len(result.sentences)} sentences" in tip.text
    overflow = browser.execute_script(
        "const svg = document.getElementById('bars-svg'); const width = +svg.getAttribute('width');"
        "return Math.max(...[...svg.querySelectorAll('text.bar-text')].map(t => t.getBBox().x + t.getBBox().width))"
        " - width")
    assert overflow <= 0, overflow


def test_run_puts_its_vocabulary_note_in_the_report(tiny_model_dir, tmp_path):
    """run warned about words the vocabulary lacks on the terminal only; its report now says so too."""
    import real_attention as ra

    config = tmp_path / "c.toml"
    config.write_text('[en]\nfocus = "bank"\n[[en.sentences]]\ntext = "I take out money at the bank."\n'
                      'sense = "money"\n', encoding="utf-8")
    output = ra.run(lang="en", config=config, model=str(tiny_model_dir), out=tmp_path / "out", figures=False)
    assert output.unknown_note and "lacks characters" in output.unknown_note
    page = output.runs[0].report.read_text(encoding="utf-8")
    shown = re.search(r'<p class="notes" data-fill="notes">([^<]*)</p>', page)
    assert shown is not None and "lacks characters" in html.unescape(shown.group(1)), page[:2000]


@pytest.mark.browser
def test_a_narrow_window_scrolls_the_grid_not_the_page(tiny_page):
    """At 420 px the overview's 12 columns ran off the right edge and the whole page scrolled sideways."""
    driver, _, _, _ = tiny_page
    size = driver.get_window_size()
    try:
        driver.set_window_size(420, 900)
        width = driver.execute_script("return document.documentElement.clientWidth")
        # a panel as wide as all the heads would make the page wider than the window
        driver.execute_script("document.getElementById('overview').style.minWidth = '1200px'")
        assert driver.execute_script("return document.documentElement.scrollWidth") <= width
        assert driver.execute_script("return document.querySelector('.overview-panel').scrollWidth") > width
    finally:
        driver.execute_script("document.getElementById('overview').style.minWidth = ''")
        driver.set_window_size(size["width"], size["height"])


@pytest.mark.browser
def test_the_bars_say_each_weight_as_stored_rounded_once(tiny_page):
    """A bar's text is the focus row's weight with the page's 4 decimals (2 of a percent): shown with one decimal
    of a percent it was rounded twice (0.304504 -> 0.3045 -> 30.4 %, where attention.csv's rounds to 30.5 %)."""
    from selenium.webdriver.common.by import By

    driver, folder, result, _ = tiny_page
    driver.find_element(By.CSS_SELECTOR, '#sentence-buttons button[data-sentence="1"]').click()
    driver.find_element(By.CSS_SELECTOR, '#overview .cell[data-layer="2"][data-head="1"]').click()
    table = pd.read_csv(folder / "attention.csv")
    focus = result.sentences[0].focus
    row = table[(table.sentence == 1) & (table.layer == 2) & (table["head"] == 1) & (table.query_index == focus)]
    texts = [t.text for t in driver.find_elements(By.CSS_SELECTOR, "#bars-svg text.bar-text")][3:]  # after 0/50/100 %
    assert texts == [f"{100 * round(w, 4):.2f} %" for w in row.sort_values("key_index").weight]


@pytest.mark.browser
def test_many_sentences_get_a_list_and_the_toolbar_never_covers_the_heads(browser, tmp_path):
    """200 sentences made 200 buttons in the sticky toolbar: 2,316 px high in a 757 px window, over every head cell."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    result, summary = synthetic_result(layers=2, heads=3, lengths=(8,) * 14)
    path = write_report(tmp_path / REPORT_NAME, result, summary)
    browser.set_window_size(1000, 700)
    try:
        open_report(browser, path)
        assert browser.find_elements(By.CSS_SELECTOR, "#sentence-buttons button[data-sentence]") == []
        chooser = Select(browser.find_element(By.ID, "sentence-select"))
        assert len(chooser.options) == 14 and chooser.options[13].text == "14. " + result.sentences[13].attention.text
        toolbar = browser.find_element(By.ID, "toolbar")
        assert toolbar.size["height"] < 0.3 * 700
        for cell in browser.find_elements(By.CSS_SELECTOR, "#overview .cell"):  # each can be clicked where it is
            browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", cell)
            hit = browser.execute_script("const r = arguments[0].getBoundingClientRect(); "
                                         "return document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2)"
                                         ".closest('.cell') === arguments[0]", cell)
            assert hit, cell.get_attribute("data-layer") + "," + cell.get_attribute("data-head")
        chooser.select_by_value("11")
        assert browser.execute_script("return document.body.dataset.sentence") == "12"
        browser.find_element(By.ID, "next-sentence").click()
        assert browser.execute_script("return document.body.dataset.sentence") == "13"
        # ] as a Spanish keyboard types it: AltGr, which Windows reports as Ctrl+Alt
        browser.execute_script("document.dispatchEvent(new KeyboardEvent('keydown', "
                               "{key: ']', ctrlKey: true, altKey: true, bubbles: true}))")
        assert browser.execute_script("return document.body.dataset.sentence") == "14"
        assert chooser.options[0].get_attribute("lang") == "xx"  # the sentences' language, on each option
        assert browser.find_element(By.ID, "sentence-select").get_attribute("lang") in (None, "")
        assert chooser.first_selected_option.get_attribute("value") == "13"
        cell = browser.find_element(By.CSS_SELECTOR, '#overview .cell[data-layer="1"][data-head="1"]')
        hover(browser, cell)
        rows = browser.find_elements(By.CSS_SELECTOR, "#tooltip tr")
        assert len(rows) == 11 and rows[-1].text == "and 4 more sentences: choose one to see it here"
        assert rows[-2].text.startswith("14.")  # the chosen sentence is always among them
    finally:
        browser.set_window_size(1400, 1000)


@pytest.mark.browser
def test_screen_readers_hear_the_numbers_the_views_show(tiny_page):
    """Every head cell says its top word and weight, the chosen one is pressed, each view is one named image with the
    focus word's largest weights, and a change of head is announced."""
    from selenium.webdriver.common.by import By

    browser, _folder, result, _summary = tiny_page
    browser.find_element(By.CSS_SELECTOR, '#overview .cell[data-layer="2"][data-head="1"]').click()
    cell = browser.find_element(By.CSS_SELECTOR, '#overview .cell[data-layer="2"][data-head="1"]')
    sentence = result.sentences[0]
    words = sentence.attention.words
    row = sentence.attention.weights[1, 0, sentence.focus]
    top = int(np.argmax(row))
    label = cell.get_attribute("aria-label")
    assert label.startswith("layer 2, head 1: ") and f"looks most at «{words[top]}», " in label
    assert label.endswith(f"{js_round(100 * float(row[top]))} %") and cell.get_attribute("aria-pressed") == "true"
    assert browser.find_elements(By.CSS_SELECTOR, '#overview .cell[aria-pressed="true"]') == [cell]
    for view in ("heatmap-svg", "lines-svg", "bars-svg", "rollout-svg"):
        svg = browser.find_element(By.ID, view)
        assert svg.get_attribute("role") == "img" and svg.get_attribute("aria-label"), view
    bars = browser.find_element(By.ID, "bars-svg").get_attribute("aria-label")
    assert f"«{words[sentence.focus]}» looks most at «{words[top]}» " in bars
    assert browser.find_element(By.ID, "announce").get_attribute("aria-live") == "polite"
    assert browser.find_element(By.ID, "announce").get_attribute("textContent").startswith("Layer 2, head 1, ")
    assert browser.find_element(By.ID, "previous-head").get_attribute("aria-label") == "Previous head"
    assert browser.find_element(By.ID, "overview").get_attribute("role") == "group"  # no grid without its rows
    # the Spanish sentences are marked as Spanish for a screen reader's voice; the page's own words stay English
    assert browser.find_element(By.ID, "sentence-list").get_attribute("lang") == "es"
    assert browser.find_element(By.CSS_SELECTOR, "#sentence-list .sense-note").get_attribute("lang") == "en"
    assert browser.find_element(By.CSS_SELECTOR, '#sentence-buttons button[data-sentence="1"]').get_attribute("lang") == "es"
    assert browser.find_element(By.TAG_NAME, "html").get_attribute("lang") == "en"


def contrast(first: str, second: str) -> float:
    """WCAG 2's contrast ratio of two #rrggbb colours."""
    def luminance(colour: str) -> float:
        channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    high, low = sorted((luminance(first), luminance(second)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_text_colours_are_readable():
    """The focus word was written in its fill colour, 2.3:1 on white; white on the previous-word green was 3.4:1."""
    from real_attention.engine.categories import (CATEGORY_COLOURS, DARK_CATEGORIES, FOCUS_TEXT_COLOUR,
                                                  SENSE_TEXT_COLOUR)

    assert contrast(FOCUS_TEXT_COLOUR, "#ffffff") >= 4.5 and contrast(SENSE_TEXT_COLOUR, "#ffffff") >= 4.5
    ink, white = "#1d2530", "#ffffff"
    for name, fill in CATEGORY_COLOURS.items():  # each cell's text is the more readable of ink and white
        chosen, other = (white, ink) if name in DARK_CATEGORIES else (ink, white)
        assert contrast(chosen, fill) >= contrast(other, fill), name
    page = report_html(*hand_made_result())
    assert f"--focus-text: {FOCUS_TEXT_COLOUR}" in page and "color: var(--focus)" not in page


def test_heatmap_text_turns_white_where_white_reads_better():
    """Cell numbers were white from 0.6, where white on Blues is 3.2:1 and the page's dark text 4.9:1."""
    from matplotlib import colormaps
    from matplotlib.colors import to_hex

    from real_attention.engine.categories import HEATMAP_CMAP, HEATMAP_LIGHT_TEXT_FROM

    ramp = colormaps[HEATMAP_CMAP]
    for ink in ("#1d2530", "#1f1f1f"):  # the page's text, the figures' (outputs.plots.INK)
        below = to_hex(ramp(HEATMAP_LIGHT_TEXT_FROM - 0.01))
        at = to_hex(ramp(HEATMAP_LIGHT_TEXT_FROM))
        # the crossing, within a step of the ramp (the page's ink and the figures' cross at 0.67 and 0.69)
        assert contrast(ink, below) >= contrast("#ffffff", below) - 0.05, ink
        assert contrast("#ffffff", at) >= contrast(ink, at) - 0.05, ink
