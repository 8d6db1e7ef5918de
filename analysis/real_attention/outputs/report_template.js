// real-attention report: hand-written, no library, no network. Draws the JSON in #report-data, or the data
// given to window.realAttention.show(data) (the live page of `real-attention serve`, analysis/live/).
// Indices are 0-based here; everything shown counts layers and heads from 1.
// The rules (categories, markers, what each word is to the focus word, colours) come decided in the data
// (analysis/report.py, report_data); this script only draws them.
"use strict";
(function () {
  let data = null, LAYERS = 0, HEADS = 0, SCALE = 1, CATEGORY = {}, RAMP = [];
  function setData(next) {
    data = next;
    LAYERS = data.layers; HEADS = data.heads; SCALE = data.weight_scale;
    CATEGORY = {};
    data.categories.forEach(function (c) { CATEGORY[c.name] = c; });
    RAMP = data.heatmap.colours;
  }
  const state = { sentence: 0, layer: 0, head: 0 };
  const byId = function (id) { return document.getElementById(id); };
  const tooltip = byId("tooltip");
  const FONT = getComputedStyle(document.body).fontFamily;
  const measureCtx = document.createElement("canvas").getContext("2d");

  // ---- small helpers -------------------------------------------------------------------------
  function esc(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" }[c];
    });
  }
  // A word goes into markup as an empty element that names it (sentence s, unit k; or k "focus": the focus
  // word); fill() then sets its text with textContent, so no word is ever parsed as HTML.
  function wordAttrs(s, k) { return " data-s=\"" + s + "\" data-word=\"" + k + "\""; }
  function wordSlot(s, k) { return "<span" + wordAttrs(s, k) + "></span>"; }
  function fill(root) {
    root.querySelectorAll("[data-word]").forEach(function (e) {
      e.textContent = e.dataset.word === "focus" ? data.focus_word :
        data.sentences[Number(e.dataset.s)].words[Number(e.dataset.word)];
    });
    return root;
  }
  function clamp(x, lo, hi) { return Math.max(lo, Math.min(hi, x)); }
  function textWidth(text, px, bold) {
    measureCtx.font = (bold ? "700 " : "") + px + "px " + FONT;
    return measureCtx.measureText(text).width;
  }
  function widest(words, px) {
    let w = 0;
    words.forEach(function (word) { w = Math.max(w, textWidth(word, px, true)); });
    return Math.ceil(w);
  }
  function percent(w, digits) { return (100 * w).toFixed(digits) + " %"; }
  function headIndex(layer, head) { return layer * HEADS + head; }
  function headName(layer, head) { return "layer " + (layer + 1) + ", head " + (head + 1); }
  // weight(s, l, h, q, k): the stored ten-thousandths as a float in [0, 1]
  function weight(s, layer, head, query, key) {
    const S = data.sentences[s], n = S.words.length;
    return S.weights[((headIndex(layer, head) * n) + query) * n + key] / SCALE;
  }
  function row(s, layer, head, query) {
    const n = data.sentences[s].words.length, out = new Array(n);
    for (let k = 0; k < n; k++) out[k] = weight(s, layer, head, query, k);
    return out;
  }
  // The heatmap's colour: matplotlib's lookup for vmin=0, vmax=1 in the colour map sampled by report.py.
  function heatColour(w) { return RAMP[clamp(Math.floor(w * RAMP.length), 0, RAMP.length - 1)]; }
  function labelClass(S, i) {
    if (i === S.focus) return "focus-label";
    if (i === S.sense) return "sense-label";
    if (S.markers[i]) return "marker-label";
    return "";
  }

  // An SVG view as one image with a spoken summary (its words set as an attribute value, never parsed).
  function name(svg, label) {
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", label);
  }
  // "«banco» looks most at «jardín» 28.00 %, «.» 13.00 %, ...": the focus word's largest weights, largest first
  function rowSummary(s, values, count, lead) {
    const S = data.sentences[s];
    const order = values.map(function (w, k) { return k; }).sort(function (a, b) { return values[b] - values[a] || a - b; });
    return (lead || "«" + S.words[S.focus] + "» looks most at ") + order.slice(0, count || 3).map(function (k) {
      return "«" + S.words[k] + "» " + percent(values[k], 2);
    }).join(", ") + ".";
  }

  // ---- tooltip -------------------------------------------------------------------------------
  function showTip(event, html) {
    fill(Object.assign(tooltip, { innerHTML: html }));
    tooltip.hidden = false;
    const pad = 14, r = tooltip.getBoundingClientRect();
    let x = event.clientX + pad, y = event.clientY + pad;
    if (x + r.width > window.innerWidth - 4) x = event.clientX - r.width - pad;
    if (y + r.height > window.innerHeight - 4) y = event.clientY - r.height - pad;
    tooltip.style.left = Math.max(4, x) + "px";
    tooltip.style.top = Math.max(4, y) + "px";
  }
  function hideTip() { tooltip.hidden = true; }

  // ---- sentence buttons ----------------------------------------------------------------------
  // The sentence's words as HTML, the focus word marked; S.gaps says what goes before each (null: not shown).
  function sentenceHtml(S, s) {
    let out = "";
    S.words.forEach(function (w, i) {
      if (S.gaps[i] === null) return;
      out += S.gaps[i] + (i === S.focus ? "<span class=\"fw\"" + wordAttrs(s, i) + "></span>" : wordSlot(s, i));
    });
    return out;
  }
  // Up to this many sentences get a button each; more get a drop-down list between previous and next buttons, so
  // that the sticky toolbar stays one line high (200 buttons made it taller than the window, over every head).
  const SENTENCE_BUTTONS = 8;
  function buildSentenceButtons() {
    const box = byId("sentence-buttons");
    if (data.sentences.length > SENTENCE_BUTTONS) {
      box.textContent = "";
      const previous = document.createElement("button"), next = document.createElement("button");
      const list = document.createElement("select");
      Object.assign(previous, { type: "button", id: "previous-sentence", textContent: "‹", title: "Previous sentence ([ key)" });
      Object.assign(next, { type: "button", id: "next-sentence", textContent: "›", title: "Next sentence (] key)" });
      previous.setAttribute("aria-label", "Previous sentence");
      next.setAttribute("aria-label", "Next sentence");
      list.id = "sentence-select";
      list.setAttribute("aria-label", "Sentence");
      data.sentences.forEach(function (S, s) {
        const option = document.createElement("option");
        option.value = String(s);
        option.textContent = (s + 1) + ". " + S.text;  // as text: a word is never parsed as HTML
        list.append(option);
      });
      box.append(previous, list, next);
      return;
    }
    box.innerHTML = data.sentences.map(function (S, s) {
      return "<button type=\"button\" data-sentence=\"" + (s + 1) + "\">" + (s + 1) + ". " + sentenceHtml(S, s) + "</button>";
    }).join("");
    fill(box).querySelectorAll("button[data-sentence]").forEach(function (button) {
      button.title = data.sentences[Number(button.dataset.sentence) - 1].text;
    });
  }

  // ---- overview ------------------------------------------------------------------------------
  function buildOverview() {
    const grid = byId("overview");
    grid.style.gridTemplateColumns = "auto repeat(" + HEADS + ", minmax(3.1rem, 4.2rem))";
    const best = data.summary.best_sense_head;
    let html = "<div class=\"corner\">layer \\ head</div>";
    for (let h = 0; h < HEADS; h++) html += "<div class=\"colhead\">" + (h + 1) + "</div>";
    for (let l = 0; l < LAYERS; l++) {
      html += "<div class=\"rowhead\">" + (l + 1) + "</div>";
      for (let h = 0; h < HEADS; h++) {
        const c = CATEGORY[data.head_category[headIndex(l, h)]];
        const isBest = best && best.layer === l + 1 && best.head === h + 1;
        html += "<button type=\"button\" class=\"cell" + (c.dark ? " dark" : "") + (isBest ? " best" : "") +
          "\" data-layer=\"" + (l + 1) + "\" data-head=\"" + (h + 1) + "\" data-category=\"" + c.name +
          "\"><span class=\"top\"></span><span class=\"pct\"></span></button>";
      }
    }
    grid.innerHTML = html;
    // colours through the style object: the live page's Content-Security-Policy refuses style attributes
    grid.querySelectorAll(".cell").forEach(function (cell) {
      cell.style.background = CATEGORY[cell.dataset.category].colour;
    });
  }
  // The listeners live on containers that stay when new data is drawn: added once.
  function listen() {
    byId("sentence-buttons").addEventListener("click", function (event) {
      const button = event.target.closest("button[data-sentence]");
      if (button) select({ sentence: Number(button.dataset.sentence) - 1 });
      else if (event.target.closest("#previous-sentence")) stepSentence(-1);
      else if (event.target.closest("#next-sentence")) stepSentence(1);
    });
    byId("sentence-buttons").addEventListener("change", function (event) {
      if (event.target.id === "sentence-select") select({ sentence: Number(event.target.value) });
    });
    const grid = byId("overview");
    grid.addEventListener("click", function (event) {
      const cell = event.target.closest(".cell");
      if (!cell) return;
      select({ layer: Number(cell.dataset.layer) - 1, head: Number(cell.dataset.head) - 1 });
      cell.focus();  // Safari and Firefox on a Mac do not focus a clicked button: the arrows would scroll instead
    });
    grid.addEventListener("mousemove", function (event) {
      const cell = event.target.closest(".cell");
      if (!cell) { hideTip(); return; }
      const l = Number(cell.dataset.layer) - 1, h = Number(cell.dataset.head) - 1;
      showTip(event, cellTip(l, h));
    });
    grid.addEventListener("mouseleave", hideTip);
  }
  const TIP_ROWS = 10;
  function cellTip(l, h) {
    const c = CATEGORY[data.head_category[headIndex(l, h)]];
    let html = "<div class=\"tt-title\">Layer " + (l + 1) + ", head " + (h + 1) + ": " + esc(c.label) + "</div><table>";
    // at most TIP_ROWS sentences (the chosen one among them): 200 rows made a tooltip taller than any window
    const rows = data.sentences.map(function (S, s) { return s; }).filter(function (s) {
      return s < TIP_ROWS - 1 || s === state.sentence || (s === TIP_ROWS - 1 && state.sentence < TIP_ROWS);
    });
    rows.forEach(function (s) {
      const S = data.sentences[s], top = S.top_key[headIndex(l, h)], w = S.top_weight[headIndex(l, h)];
      html += "<tr><td>" + (s + 1) + ".</td><td>«" + wordSlot(s, S.focus) + "» → «" + wordSlot(s, top) +
        "»</td><td class=\"num\">" + percent(w, 1) + "</td></tr>";
    });
    if (rows.length < data.sentences.length) {
      html += "<tr><td colspan=\"3\">and " + (data.sentences.length - rows.length) + " more sentences: choose one to see " +
        "it here</td></tr>";
    }
    if (data.sentences.length < data.sentences_total) {  // run --report-sentences: the page holds the first ones
      html += "<tr><td colspan=\"3\">the first " + data.sentences.length + " of the run's " + data.sentences_total +
        " sentences; the page holds no more</td></tr>";
    }
    return html + "</table>";
  }
  function updateOverview() {
    const S = data.sentences[state.sentence];
    document.querySelectorAll("#overview .cell").forEach(function (cell) {
      const i = headIndex(Number(cell.dataset.layer) - 1, Number(cell.dataset.head) - 1);
      const c = CATEGORY[data.head_category[i]], top = S.words[S.top_key[i]], pct = Math.round(100 * S.top_weight[i]) + " %";
      cell.querySelector(".top").textContent = top;
      cell.querySelector(".pct").textContent = pct;
      // what a screen reader says: the head, its category and the numbers the cell shows (set as an attribute value)
      cell.setAttribute("aria-label", headName(Number(cell.dataset.layer) - 1, Number(cell.dataset.head) - 1) + ": " +
        c.label + "; in sentence " + (state.sentence + 1) + " «" + S.words[S.focus] + "» looks most at «" + top + "», " + pct);
      const chosen = i === headIndex(state.layer, state.head);
      cell.classList.toggle("selected", chosen);
      cell.setAttribute("aria-pressed", String(chosen));
    });
  }
  function buildLegend() {
    const total = LAYERS * HEADS, best = data.summary.best_sense_head;
    let html = "<h3>Where «" + wordSlot(0, "focus") + "» looks most, in every sentence (" + (data.sentence_count || data.sentences.length) + ")</h3>";
    data.categories.forEach(function (c) {
      html += "<div class=\"item\" data-category=\"" + c.name + "\"><span class=\"swatch\"></span><span>" + esc(c.label) + (c.note ? " <span class=\"note\">" + esc(c.note) + "</span>" : "") +
        "</span><span class=\"count\">" + c.count + " of " + total +
        "</span></div>";
    });
    if (best) {
      html += "<div class=\"item\"><span class=\"swatch best\"></span><span>best sense head: layer " + best.layer +
        ", head " + best.head + "</span></div>";
    } else {
      html += "<div class=\"item\"><span class=\"swatch blank\"></span><span>no sense-word head in this model</span></div>";
    }
    fill(Object.assign(byId("legend"), { innerHTML: html }));
    byId("legend").querySelectorAll(".item[data-category] .swatch").forEach(function (swatch) {
      swatch.style.background = CATEGORY[swatch.parentNode.dataset.category].colour;
    });
  }

  // ---- head view: heatmap --------------------------------------------------------------------
  function drawHeatmap() {
    const s = state.sentence, S = data.sentences[s], n = S.words.length, l = state.layer, h = state.head;
    const cell = clamp(Math.floor(480 / n), 8, 36);
    const font = clamp(cell - 2, 7, 13);
    const labelW = widest(S.words, font) + 10;
    const diag = Math.ceil(labelW * Math.SQRT1_2);  // rotated column labels
    const left = labelW, top = diag + 8, side = n * cell;
    const width = left + side + diag + 4, height = top + side + 4;
    const showText = cell >= 26;
    let out = "<svg id=\"heatmap-svg\" width=\"" + width + "\" height=\"" + height + "\" viewBox=\"0 0 " + width + " " +
      height + "\" data-layer=\"" + (l + 1) + "\" data-head=\"" + (h + 1) + "\" data-sentence=\"" + (s + 1) + "\" data-n=\"" + n + "\">";
    out += "<g font-size=\"" + font + "\">";
    for (let i = 0; i < n; i++) {
      const y = top + i * cell + cell / 2;
      out += "<text class=\"row-label " + labelClass(S, i) + "\" data-i=\"" + i + "\" x=\"" + (left - 6) + "\" y=\"" + y +
        "\" text-anchor=\"end\" dominant-baseline=\"central\"" + wordAttrs(s, i) + "></text>";
      const x = left + i * cell + cell / 2;
      out += "<text class=\"col-label " + labelClass(S, i) + "\" data-i=\"" + i + "\" transform=\"translate(" + x + "," + (top - 5) +
        ") rotate(-45)\" dominant-baseline=\"central\"" + wordAttrs(s, i) + "></text>";
    }
    out += "</g><g class=\"cells\">";
    const textSize = clamp(Math.floor(cell * 0.34), 8, 12);
    let texts = "";
    for (let q = 0; q < n; q++) {
      for (let k = 0; k < n; k++) {
        const w = weight(s, l, h, q, k), x = left + k * cell, y = top + q * cell;
        out += "<rect x=\"" + x + "\" y=\"" + y + "\" width=\"" + cell + "\" height=\"" + cell + "\" fill=\"" + heatColour(w) +
          "\" data-q=\"" + q + "\" data-k=\"" + k + "\" data-w=\"" + w.toFixed(4) + "\"/>";
        const p = Math.round(100 * w);
        if (showText && p > 0) {
          texts += "<text class=\"cell-text" + (w >= data.heatmap.light_text_from ? " light" : "") + "\" x=\"" + (x + cell / 2) + "\" y=\"" +
            (y + cell / 2) + "\" font-size=\"" + textSize + "\">" + p + "</text>";
        }
      }
    }
    out += "</g><g>" + texts + "</g>";
    // the focus word's row, framed
    out += "<rect x=\"" + (left - 1) + "\" y=\"" + (top + S.focus * cell - 1) + "\" width=\"" + (side + 2) + "\" height=\"" +
      (cell + 2) + "\" fill=\"none\" stroke=\"" + data.focus_colour + "\" stroke-width=\"2.5\" pointer-events=\"none\"/>";
    out += "</svg>";
    const box = byId("heatmap");
    fill(Object.assign(box, { innerHTML: out }));
    const svg = box.firstChild;
    name(svg, "Heatmap of " + headName(l, h) + ", sentence " + (s + 1) + ": the % of each row word's attention on each " +
      "column word. " + rowSummary(s, row(s, l, h, S.focus)));
    svg.addEventListener("mousemove", function (event) {
      const t = event.target;
      if (t.tagName !== "rect" || t.dataset.q === undefined) { hideTip(); return; }
      const q = Number(t.dataset.q), k = Number(t.dataset.k);
      showTip(event, "«" + wordSlot(s, q) + "» → «" + wordSlot(s, k) + "»: <b>" + percent(Number(t.dataset.w), 2) + "</b>");
      svg.querySelectorAll(".hot").forEach(function (e) { e.classList.remove("hot"); });
      svg.querySelector(".row-label[data-i=\"" + q + "\"]").classList.add("hot");
      svg.querySelector(".col-label[data-i=\"" + k + "\"]").classList.add("hot");
    });
    svg.addEventListener("mouseleave", function () {
      hideTip();
      svg.querySelectorAll(".hot").forEach(function (e) { e.classList.remove("hot"); });
    });
  }

  // ---- head view: lines (bertviz-style) ------------------------------------------------------
  function drawLines() {
    const s = state.sentence, S = data.sentences[s], n = S.words.length, l = state.layer, h = state.head;
    const step = clamp(Math.floor(480 / n), 12, 24);
    const font = clamp(step - 4, 9, 14);
    const labelW = widest(S.words, font) + 4, annotW = 46, gap = clamp(160 + 2 * n, 180, 320);
    const xLeft = annotW + labelW, x1 = xLeft + 6, x2 = x1 + gap, xRight = x2 + 6;
    const width = xRight + labelW + annotW, height = n * step + 8;
    const strokeW = step >= 18 ? 2 : 1.2;
    const y = function (i) { return 4 + i * step + step / 2; };
    let out = "<svg id=\"lines-svg\" width=\"" + width + "\" height=\"" + height + "\" viewBox=\"0 0 " + width + " " + height +
      "\" font-size=\"" + font + "\">";
    out += "<g class=\"lines\">";
    for (let q = 0; q < n; q++) {
      for (let k = 0; k < n; k++) {
        const w = weight(s, l, h, q, k);
        if (w <= 0) continue;  // rounds to 0: invisible anyway
        out += "<line class=\"ln\" data-q=\"" + q + "\" data-k=\"" + k + "\" x1=\"" + x1 + "\" y1=\"" + y(q) + "\" x2=\"" + x2 +
          "\" y2=\"" + y(k) + "\" stroke-width=\"" + strokeW + "\" stroke-opacity=\"" + w.toFixed(4) + "\"/>";
      }
    }
    out += "</g>";
    for (let i = 0; i < n; i++) {
      const cls = labelClass(S, i);
      out += "<rect class=\"hit\" data-side=\"q\" data-i=\"" + i + "\" x=\"" + annotW + "\" y=\"" + (y(i) - step / 2) + "\" width=\"" +
        (labelW + 6) + "\" height=\"" + step + "\"/>";
      out += "<text class=\"wl " + cls + "\" data-side=\"q\" data-i=\"" + i + "\" x=\"" + xLeft + "\" y=\"" + y(i) +
        "\" text-anchor=\"end\" dominant-baseline=\"central\" pointer-events=\"none\"" + wordAttrs(s, i) + "></text>";
      out += "<text class=\"annot\" data-side=\"q\" data-i=\"" + i + "\" x=\"" + (annotW - 6) + "\" y=\"" + y(i) +
        "\" text-anchor=\"end\" dominant-baseline=\"central\"></text>";
      out += "<rect class=\"hit\" data-side=\"k\" data-i=\"" + i + "\" x=\"" + x2 + "\" y=\"" + (y(i) - step / 2) + "\" width=\"" +
        (labelW + 6) + "\" height=\"" + step + "\"/>";
      out += "<text class=\"wl " + cls + "\" data-side=\"k\" data-i=\"" + i + "\" x=\"" + xRight + "\" y=\"" + y(i) +
        "\" dominant-baseline=\"central\" pointer-events=\"none\"" + wordAttrs(s, i) + "></text>";
      out += "<text class=\"annot\" data-side=\"k\" data-i=\"" + i + "\" x=\"" + (xRight + labelW + 6) + "\" y=\"" + y(i) +
        "\" dominant-baseline=\"central\"></text>";
    }
    out += "</svg>";
    const box = byId("lines");
    fill(Object.assign(box, { innerHTML: out }));
    const svg = box.firstChild;
    name(svg, "Lines of " + headName(l, h) + ", sentence " + (s + 1) + ": from each word to the words it looks at, " +
      "the same weights as the heatmap");
    const lines = svg.querySelectorAll(".ln");
    const annots = svg.querySelectorAll(".annot");
    function isolate(side, i) {
      const attr = side === "q" ? "q" : "k";
      lines.forEach(function (line) { line.classList.toggle("off", Number(line.dataset[attr]) !== i); });
      svg.querySelectorAll(".wl").forEach(function (t) {
        t.classList.toggle("hot", t.dataset.side === side && Number(t.dataset.i) === i);
      });
      // the weights on the other side, in %
      annots.forEach(function (a) {
        const j = Number(a.dataset.i);
        if (a.dataset.side === side) { a.textContent = ""; return; }
        const w = side === "q" ? weight(s, l, h, i, j) : weight(s, l, h, j, i);
        a.textContent = w >= 0.005 ? Math.round(100 * w) + " %" : "";
      });
      svg.dataset.isolated = side + i;
    }
    function reset() {
      lines.forEach(function (line) { line.classList.remove("off"); });
      svg.querySelectorAll(".wl.hot").forEach(function (t) { t.classList.remove("hot"); });
      annots.forEach(function (a) { a.textContent = ""; });
      delete svg.dataset.isolated;
    }
    function pointed(event) {
      const hit = event.target.closest("[data-side]");
      if (hit && hit.classList.contains("hit")) isolate(hit.dataset.side, Number(hit.dataset.i));
    }
    svg.addEventListener("mouseover", pointed);
    svg.addEventListener("click", pointed);  // a touch screen has no hover: a tap isolates the word
    svg.addEventListener("mouseleave", reset);
  }

  // ---- head view: the focus word's row as bars -----------------------------------------------
  function drawBars() {
    const s = state.sentence, S = data.sentences[s], n = S.words.length, l = state.layer, h = state.head;
    const values = row(s, l, h, S.focus);
    const step = clamp(Math.floor(440 / n), 14, 24), font = clamp(step - 5, 9, 13);
    const labelW = widest(S.words, font) + 8, barMax = 200, textW = textWidth("100.00 %", font) + 8;
    const width = labelW + barMax + textW, height = n * step + 26;
    let top = 0;
    values.forEach(function (w, k) { if (w > values[top]) top = k; });
    let out = "<svg id=\"bars-svg\" width=\"" + width + "\" height=\"" + height + "\" viewBox=\"0 0 " + width + " " + height +
      "\" font-size=\"" + font + "\">";
    // a light scale: 0, 50 and 100 %
    [0, 0.5, 1].forEach(function (f) {
      const x = labelW + f * barMax;
      out += "<line x1=\"" + x + "\" x2=\"" + x + "\" y1=\"2\" y2=\"" + (n * step + 4) + "\" stroke=\"#e3e7ec\"/>";
      out += "<text class=\"bar-text\" x=\"" + x + "\" y=\"" + (n * step + 18) + "\" text-anchor=\"middle\" font-size=\"10\">" +
        Math.round(100 * f) + " %</text>";
    });
    values.forEach(function (w, k) {
      const y = 4 + k * step, rel = S.relations[k], c = CATEGORY[rel];
      out += "<text class=\"" + labelClass(S, k) + (k === top ? " hot" : "") + "\" x=\"" + (labelW - 6) + "\" y=\"" + (y + step / 2) +
        "\" text-anchor=\"end\" dominant-baseline=\"central\"" + wordAttrs(s, k) + "></text>";
      out += "<rect class=\"bar\" data-k=\"" + k + "\" data-w=\"" + w.toFixed(4) + "\" data-relation=\"" + rel + "\" x=\"" + labelW +
        "\" y=\"" + (y + 2) + "\" width=\"" + Math.max(w * barMax, w > 0 ? 1 : 0).toFixed(1) + "\" height=\"" + (step - 4) +
        "\" fill=\"" + c.colour + "\" stroke=\"rgba(0,0,0,0.25)\" stroke-width=\"0.6\"/>";
      out += "<text class=\"bar-text\" x=\"" + (labelW + w * barMax + 5) + "\" y=\"" + (y + step / 2) +
        // the weight as stored (4 decimals): one decimal fewer would round it a second time (0.30450 for 0.304504)
        "\" dominant-baseline=\"central\">" + percent(w, 2) + "</text>";
    });
    out += "</svg>";
    fill(Object.assign(byId("bars"), { innerHTML: out }));
    name(byId("bars").firstChild, "Bars of " + headName(l, h) + ", sentence " + (s + 1) + ": " + rowSummary(s, values, n));
    byId("bars-caption").innerHTML = "Where «<b" + wordAttrs(s, S.focus) + "></b>» looks in sentence " + (s + 1) +
      " (its row of the heatmap); bars coloured like the overview";
    fill(byId("bars-caption"));
  }

  // ---- rollout view: the focus word's rollout row, layer by layer (all heads; the chosen layer framed) ----
  function drawRollout() {
    const s = state.sentence, S = data.sentences[s], n = S.words.length;
    if (!S.rollout) { byId("rollout-view").hidden = true; return; }
    const cell = clamp(Math.floor(480 / n), 8, 36);
    const font = clamp(cell - 2, 7, 13);
    const labelW = widest(S.words, font) + 10, rowW = textWidth("layer " + LAYERS, font, true) + 10;
    const diag = Math.ceil(labelW * Math.SQRT1_2);
    const left = rowW, top = diag + 8, rowH = clamp(cell, 18, 36);
    const width = left + n * cell + diag + 4, height = top + LAYERS * rowH + 4;
    let out = "<svg id=\"rollout-svg\" width=\"" + width + "\" height=\"" + height + "\" viewBox=\"0 0 " + width + " " +
      height + "\" data-sentence=\"" + (s + 1) + "\"><g font-size=\"" + font + "\">";
    for (let k = 0; k < n; k++) {
      out += "<text class=\"col-label " + labelClass(S, k) + "\" transform=\"translate(" + (left + k * cell + cell / 2) + "," +
        (top - 5) + ") rotate(-45)\" dominant-baseline=\"central\"" + wordAttrs(s, k) + "></text>";
    }
    for (let l = 0; l < LAYERS; l++) {
      out += "<text x=\"" + (left - 6) + "\" y=\"" + (top + l * rowH + rowH / 2) + "\" text-anchor=\"end\" " +
        "dominant-baseline=\"central\">layer " + (l + 1) + "</text>";
      for (let k = 0; k < n; k++) {
        const w = S.rollout[l * n + k] / SCALE, x = left + k * cell, y = top + l * rowH;
        out += "<rect x=\"" + x + "\" y=\"" + y + "\" width=\"" + cell + "\" height=\"" + rowH + "\" fill=\"" + heatColour(w) +
          "\" data-layer=\"" + (l + 1) + "\" data-k=\"" + k + "\" data-w=\"" + w.toFixed(4) + "\"/>";
        if (cell >= 26 && Math.round(100 * w) > 0) {
          out += "<text class=\"cell-text" + (w >= data.heatmap.light_text_from ? " light" : "") + "\" x=\"" + (x + cell / 2) +
            "\" y=\"" + (y + rowH / 2) + "\" font-size=\"" + clamp(Math.floor(cell * 0.34), 8, 12) + "\">" + Math.round(100 * w) + "</text>";
        }
      }
    }
    out += "</g><rect x=\"" + (left - 1) + "\" y=\"" + (top + state.layer * rowH - 1) + "\" width=\"" + (n * cell + 2) +
      "\" height=\"" + (rowH + 2) + "\" fill=\"none\" stroke=\"" + data.focus_colour + "\" stroke-width=\"2.5\" pointer-events=\"none\"/></svg>";
    const box = byId("rollout");
    fill(Object.assign(box, { innerHTML: out }));
    const last = S.rollout.slice((LAYERS - 1) * n, LAYERS * n).map(function (w) { return w / SCALE; });
    name(box.firstChild, "Rollout, sentence " + (s + 1) + ", all heads layer by layer. After the last layer: " +
      rowSummary(s, last, 3, "most of «" + S.words[S.focus] + "» comes from "));
    box.firstChild.addEventListener("mousemove", function (event) {
      const t = event.target;
      if (t.tagName !== "rect" || t.dataset.k === undefined) { hideTip(); return; }
      showTip(event, "after layer " + t.dataset.layer + ": «" + wordSlot(s, Number(t.dataset.k)) + "» → «" +
        wordSlot(s, S.focus) + "»: <b>" + percent(Number(t.dataset.w), 2) + "</b>");
    });
    box.firstChild.addEventListener("mouseleave", hideTip);
    byId("rollout-caption").innerHTML = "Rollout (all heads, layer by layer): how much of each word reaches «<b" +
      wordAttrs(s, S.focus) + "></b>» in sentence " + (s + 1) + "; the chosen layer framed";
    fill(byId("rollout-caption"));
  }

  // ---- mixing view: the focus word's rolled row by attention, norm, ALTI and value zeroing (run --mixing) ----
  function drawMixing() {
    const s = state.sentence, S = data.sentences[s], n = S.words.length;
    if (!S.mixing) { byId("mixing-view").hidden = true; return; }
    const cell = clamp(Math.floor(240 / n), 6, 22);
    const font = clamp(cell - 2, 7, 11);
    const labelW = widest(S.words, font) + 10, rowW = textWidth("layer " + LAYERS, font, true) + 10;
    const diag = Math.ceil(labelW * Math.SQRT1_2);
    const rowH = clamp(cell, 10, 22), top = diag + 8 + font + 6, panelW = n * cell + 16;
    const width = rowW + data.mixing_labels.length * panelW + diag + 4, height = top + LAYERS * rowH + 4;
    let out = "<svg id=\"mixing-svg\" width=\"" + width + "\" height=\"" + height + "\" viewBox=\"0 0 " + width + " " +
      height + "\" data-sentence=\"" + (s + 1) + "\"><g font-size=\"" + font + "\">";
    for (let l = 0; l < LAYERS; l++) {
      out += "<text x=\"" + (rowW - 6) + "\" y=\"" + (top + l * rowH + rowH / 2) + "\" text-anchor=\"end\" " +
        "dominant-baseline=\"central\">layer " + (l + 1) + "</text>";
    }
    data.mixing_labels.forEach(function (pair, p) {
      const rows = S.mixing[pair[0]], left = rowW + p * panelW;
      out += "<text x=\"" + left + "\" y=\"" + (font + 2) + "\" font-weight=\"700\">" + esc(pair[1]) + "</text>";  // a label decided in Python
      for (let k = 0; k < n; k++) {
        out += "<text class=\"col-label " + labelClass(S, k) + "\" transform=\"translate(" + (left + k * cell + cell / 2) +
          "," + (top - 5) + ") rotate(-45)\" dominant-baseline=\"central\"" + wordAttrs(s, k) + "></text>";
      }
      for (let l = 0; l < LAYERS; l++) {
        for (let k = 0; k < n; k++) {
          const w = rows[l * n + k] / SCALE;
          out += "<rect x=\"" + (left + k * cell) + "\" y=\"" + (top + l * rowH) + "\" width=\"" + cell + "\" height=\"" +
            rowH + "\" fill=\"" + heatColour(w) + "\" data-measure=\"" + pair[0] + "\" data-label=\"" + esc(pair[1]) +
            "\" data-layer=\"" + (l + 1) + "\" data-k=\"" + k + "\" data-w=\"" + w.toFixed(4) + "\"/>";
        }
      }
    });
    out += "</g></svg>";
    const box = byId("mixing");
    fill(Object.assign(box, { innerHTML: out }));
    name(box.firstChild, "Context mixing, sentence " + (s + 1) + ": the focus word's rolled row by " +
      data.mixing_labels.map(function (pair) { return pair[1]; }).join(", ") + ", layer by layer");
    box.firstChild.addEventListener("mousemove", function (event) {
      const t = event.target;
      if (t.tagName !== "rect" || t.dataset.k === undefined) { hideTip(); return; }
      showTip(event, esc(t.dataset.label) + ", after layer " + t.dataset.layer + ": «" + wordSlot(s, Number(t.dataset.k)) +
        "» in «" + wordSlot(s, S.focus) + "»: <b>" + percent(Number(t.dataset.w), 2) + "</b>");
    });
    box.firstChild.addEventListener("mouseleave", hideTip);
    byId("mixing-caption").innerHTML = "Context mixing, rolled over layers: how much of each word is in «<b" +
      wordAttrs(s, S.focus) + "></b>» in sentence " + (s + 1) + ", by each measure (all heads)";
    fill(byId("mixing-caption"));
  }

  // ---- selection and keys --------------------------------------------------------------------
  function drawHeadInfo() {
    const l = state.layer, h = state.head, i = headIndex(l, h), c = CATEGORY[data.head_category[i]];
    const scores = data.head_scores;
    byId("head-title").textContent = "Layer " + (l + 1) + ", head " + (h + 1);
    byId("head-heading").innerHTML = "Layer " + (l + 1) + ", head " + (h + 1) + " <span class=\"badge\">" + esc(c.label) + "</span>";
    const badge = byId("head-heading").querySelector(".badge");
    badge.style.background = c.colour;
    badge.style.color = c.dark ? "#fff" : "#1d2530";
    // The rules this head meets besides its category's (a category goes to the first rule that holds)
    data.categories.forEach(function (other) {
      const met = data.head_rules[other.name];
      if (!met || !met[i] || other.name === c.name) return;
      const also = document.createElement("span");
      also.className = "badge also";
      also.dataset.category = other.name;
      also.textContent = "also " + other.label;
      also.title = "Its top key meets this rule too in every sentence; the category goes to the first rule that holds";
      also.style.borderColor = other.colour;
      byId("head-heading").appendChild(document.createTextNode(" "));
      byId("head-heading").appendChild(also);
    });
    byId("head-sentence").innerHTML = "Sentence " + (state.sentence + 1) + ": " + sentenceHtml(data.sentences[state.sentence], state.sentence);
    fill(byId("head-sentence"));
    byId("head-scores").textContent = "Mean over all words and sentences: " + data.head_score_names.map(function (pair) {
      return pair[1] + " " + percent(scores[pair[0]][i], 1);
    }).join(" · ") + " · entropy " + scores.entropy[i].toFixed(2) + " nats";
    document.querySelectorAll("#sentence-buttons button[data-sentence]").forEach(function (b) {
      const active = Number(b.dataset.sentence) === state.sentence + 1;
      b.classList.toggle("active", active);
      b.setAttribute("aria-pressed", String(active));
    });
    const list = byId("sentence-select");
    if (list) list.value = String(state.sentence);
    byId("announce").textContent = "Layer " + (l + 1) + ", head " + (h + 1) + ", " + c.label + "; sentence " +
      (state.sentence + 1) + ".";
  }
  function select(change) {
    Object.assign(state, change);
    drawHeadInfo();
    updateOverview();
    drawHeatmap();
    drawLines();
    drawBars();
    drawRollout();
    drawMixing();
    document.body.dataset.layer = state.layer + 1;
    document.body.dataset.head = state.head + 1;
    document.body.dataset.sentence = state.sentence + 1;
    try {  // a link to this head: report.html#L1H4S2
      history.replaceState(null, "", "#L" + (state.layer + 1) + "H" + (state.head + 1) + "S" + (state.sentence + 1));
    } catch (error) { /* some browsers refuse this on file:// */ }
  }
  function step(delta) {
    const i = (headIndex(state.layer, state.head) + delta + LAYERS * HEADS) % (LAYERS * HEADS);
    select({ layer: Math.floor(i / HEADS), head: i % HEADS });
  }
  function stepSentence(delta) {
    select({ sentence: (state.sentence + delta + data.sentences.length) % data.sentences.length });
  }
  document.addEventListener("keydown", function (event) {
    // [ and ] need AltGr on Spanish, German or French keyboards (Ctrl+Alt on Windows, Option on a Mac): let them by
    const bracket = event.key === "[" || event.key === "]";
    if (!data || event.metaKey || (!bracket && (event.altKey || event.ctrlKey))) return;
    if (event.target.closest && event.target.closest("input, textarea, select")) return;  // typing, not choosing
    const key = event.key;
    // the arrows choose heads on the grid and the bar above it; elsewhere they scroll the page as usual
    const onControls = event.target.closest && event.target.closest("#overview, #toolbar");
    if (key.startsWith("Arrow") && !onControls) return;
    if (key === "ArrowRight") step(1);
    else if (key === "ArrowLeft") step(-1);
    else if (key === "ArrowDown") step(HEADS);
    else if (key === "ArrowUp") step(-HEADS);
    else if (/^[1-9]$/.test(key) && Number(key) <= data.sentences.length) select({ sentence: Number(key) - 1 });
    else if (key === "[" || key === "]") stepSentence(key === "[" ? -1 : 1);
    else return;
    event.preventDefault();
    // a keyboard user on a head cell stays on the chosen one (the focus and the selection would drift apart)
    if (event.target.closest && event.target.closest("#overview .cell")) {
      const chosen = document.querySelector("#overview .cell.selected");
      if (chosen) chosen.focus();
    }
  });
  byId("previous-head").addEventListener("click", function (event) { if (data) step(-1); event.currentTarget.focus(); });
  byId("next-head").addEventListener("click", function (event) { if (data) step(1); event.currentTarget.focus(); });
  listen();

  function initial(first) {
    const match = /^#L(\d+)H(\d+)(?:S(\d+))?$/.exec(location.hash);
    if (first && match) {
      const l = Number(match[1]) - 1, h = Number(match[2]) - 1, s = match[3] ? Number(match[3]) - 1 : 0;
      if (l >= 0 && l < LAYERS && h >= 0 && h < HEADS && s >= 0 && s < data.sentences.length) {
        return { layer: l, head: h, sentence: s };
      }
    }
    return { layer: data.start_head.layer - 1, head: data.start_head.head - 1, sentence: 0 };
  }

  // The weights come packed (see analysis/report.py, _packed): base64 of zlib-deflated uint16 byte planes.
  function unpackWeights(S) {
    const text = atob(S.weights), packed = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) packed[i] = text.charCodeAt(i);
    const stream = new Blob([packed]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Response(stream).arrayBuffer().then(function (buffer) {
      const planes = new Uint8Array(buffer), count = planes.length / 2, weights = new Uint16Array(count);
      for (let i = 0; i < count; i++) weights[i] = planes[i] | (planes[count + i] << 8);  // low, then high bytes
      S.weights = weights;
    });
  }
  // The live page sends the header's values as plain text (report.py, header_text): set as text, never as HTML.
  function fillHeader(header) {
    if (!header) return;
    document.title = header.title;
    document.querySelectorAll("[data-fill]").forEach(function (element) {
      element.textContent = header[element.dataset.fill];
    });
    const list = byId("sentence-list");
    list.textContent = "";
    data.sentences.forEach(function (S) {
      const item = document.createElement("li"), note = document.createElement("span"), word = document.createElement("b");
      const text = document.createElement("span");
      text.className = "sentence-text";  // isolated (report CSS): its own direction reorders only itself
      text.textContent = S.text;
      note.className = "sense-note";
      note.lang = "en";  // the page's words, inside a sentence list marked with the sentences' language
      word.textContent = S.words[S.sense];
      note.append("sense word: ", word);
      item.append(text, " ", note);
      list.append(item);
    });
    const lines = byId("summary-lines");
    lines.textContent = "";
    data.summary_lines.forEach(function (line, i) {
      if (i) lines.append(document.createElement("br"));
      lines.append(line);
    });
  }
  let shown = 0;
  // The sentences' language for a screen reader's voice, where the config's table is named by a language code
  // (es, en-causal -> en); the page's own text stays English.
  function markLanguage() {
    const code = /^([a-z]{2,3})(?:-|$)/i.exec(data.lang || "");
    document.querySelectorAll("#sentence-list, #sentence-buttons button[data-sentence], #sentence-select option")
      .forEach(function (element) {
        if (code) element.setAttribute("lang", code[1].toLowerCase());
        else element.removeAttribute("lang");
      });
  }
  function start() {
    fillHeader(data.header);
    buildSentenceButtons();
    markLanguage();
    buildOverview();
    buildLegend();
    select(initial(shown === 0));
    shown += 1;
    document.body.dataset.ready = "true";
    document.body.dataset.shown = String(shown);
  }
  function fatal(message) {
    const p = document.createElement("p");
    p.className = "fatal";
    p.textContent = message;
    document.body.prepend(p);
  }
  // Draw the given data (report_data's JSON, packed weights); a promise that settles when it is drawn.
  function show(next) {
    if (typeof DecompressionStream !== "function") {
      fatal("This report needs a browser from 2023 or later (Chrome 80, Firefox 113, Safari 16.4): it unpacks " +
        "its weights with DecompressionStream.");
      return Promise.reject(new Error("no DecompressionStream"));
    }
    return Promise.all(next.sentences.map(unpackWeights)).then(function () {
      setData(next);
      start();
    }, function (error) {
      fatal("The weights in this report are damaged: " + String(error));
      throw error;
    });
  }
  window.realAttention = { show: show };
  const inline = byId("report-data");
  if (inline && inline.textContent.trim()) show(JSON.parse(inline.textContent)).catch(function () {});
})();
