// real-attention live page: sends the form to api/attend and lets the report's script (report.js) draw the answer.
// Every word and message is set as text (textContent), never as HTML.
"use strict";
(function () {
  const byId = function (id) { return document.getElementById(id); };
  const form = byId("live-form"), button = byId("live-submit"), status = byId("live-status"), download = byId("live-download");
  let shown = null;  // the input of what the page shows, for "download"
  let asked = 0;

  function lines(id) {
    return byId(id).value.split("\n").map(function (line) { return line.trim(); }).filter(function (line) { return line; });
  }
  function query() {
    const q = { texts: lines("live-texts"), measure: byId("live-measure").value, units: byId("live-units").value };
    const focus = byId("live-focus").value.trim(), sense = lines("live-sense");
    if (focus) q.focus = focus;
    if (sense.length) q.sense = sense;
    return q;
  }
  function post(path, body) {
    return fetch(path, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) })
      .then(function (response) {
        if (response.ok) return response;
        return response.json().catch(function () { return {}; }).then(function (answer) {
          throw new Error(answer.error ? inFormWords(answer.error) : response.status + " " + response.statusText);
        });
      });
  }
  // The API's messages name its arguments (focus=, sense=, ra.serve's max_sentences=); the form's reader knows
  // its boxes: say those instead.
  const FORM_WORDS = [
    [/^give both focus= \(the ambiguous word\) and sense= \(one word per sentence\)/,
     "Give both a focus word and a sense word for each sentence"],
    [/^sense= has (\d+) word\(s\) for (\d+) sentence\(s\); give one per sentence/,
     "The sense words box has $1 word(s) for $2 sentence(s); give one per line, one for each sentence"],
    [/ \(its --max-sentences, max_sentences= of ra\.serve\)/, " (the server's --max-sentences)"],
  ];
  function inFormWords(message) {
    return FORM_WORDS.reduce(function (text, pair) { return text.replace(pair[0], pair[1]); }, message);
  }
  function say(message, isError) {
    status.textContent = message;
    status.classList.toggle("error", Boolean(isError));
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    // busy: the button is marked, not disabled, so that a keyboard user's focus stays on it (a disabled button
    // drops the focus to the top of the page); a second press meanwhile is ignored
    if (button.getAttribute("aria-disabled") === "true") return;
    const q = query(), started = performance.now();
    asked += 1;
    const mine = asked;
    button.setAttribute("aria-disabled", "true");
    document.body.dataset.busy = "true";
    delete document.body.dataset.error;
    say("Running the model on " + q.texts.length + " sentence(s)…", false);
    post("api/attend", Object.assign({ page: true }, q))
      .then(function (response) { return response.json(); })
      .then(function (answer) {
        if (mine !== asked) return null;  // a newer question was asked meanwhile
        if (!answer.report) throw new Error("Give a focus word and one sense word per sentence to see the heads.");
        return window.realAttention.show(answer.report).catch(function (error) {
          // the drawing failed partway: the views are neither the previous answer nor this one
          shown = null;
          download.hidden = true;
          const failed = new Error("The answer arrived but could not be drawn (" + error.message + "): the views " +
            "below may be partly redrawn. Ask again or reload the page.");
          failed.drawing = true;
          throw failed;
        }).then(function () {
          shown = q;
          delete document.body.dataset.stale;
          download.hidden = false;
          // what ra.attend would warn about (words the vocabulary lacks, words one piece joins) is said here too
          const notes = (answer.notes || []).join(" ");
          say(answer.model + " answered in " + Math.round(performance.now() - started) + " ms." + (notes ? " Note: " + notes : ""), false);
        });
      })
      .catch(function (error) {
        if (mine !== asked) return;  // a newer question was asked meanwhile: its answer will be said
        // what is drawn below is still the last answer: say so, dim it, and name what it was asked with
        const stale = shown && !error.drawing ? " The views below still show the previous answer (measure " + shown.measure +
          ", units " + shown.units + ")." : "";
        const message = /[.!?]$/.test(error.message) ? error.message : error.message + ".";
        say((stale ? message : error.message) + stale, true);
        document.body.dataset.error = error.message;
        if (shown || error.drawing) document.body.dataset.stale = "true";
      })
      .finally(function () {
        if (mine !== asked) return;  // the newer question's own end re-enables the button
        button.removeAttribute("aria-disabled");
        document.body.dataset.busy = "false";
      });
  });

  download.addEventListener("click", function (event) {
    event.preventDefault();
    if (!shown) return;
    post("api/report", shown)
      .then(function (response) { return response.blob(); })
      .then(function (blob) {
        const link = document.createElement("a");
        link.href = URL.createObjectURL(blob);
        link.download = "report.html";
        document.body.append(link);
        link.click();
        link.remove();
        setTimeout(function () { URL.revokeObjectURL(link.href); }, 60000);
      })
      .catch(function (error) { say(error.message, true); });
  });

  // The page opens with the examples already answered (their data inline): that is what it shows, labelled with
  // the examples' language (a typed sentence has none unless a request gives one).
  const inline = byId("report-data");
  if (inline && inline.textContent.trim()) shown = Object.assign(query(), form.dataset.lang ? { lang: form.dataset.lang } : {});
  else download.hidden = true;
})();
