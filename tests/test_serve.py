"""`real-attention serve`: the JSON API (Starlette's test client), a real server process, and the live page in
headless Chromium (the `browser` tests, as tests/test_report.py's).

Regenerate the README screenshot with:  python tests/test_serve.py figures/demo-minilm/serve.png
"""
from __future__ import annotations

import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from real_attention.engine.errors import InputError
from real_attention.outputs.tables import write_csv
from real_attention.live.engine import Query, attend_many, attend_one

import real_attention as ra
from real_attention import cli

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
from starlette.testclient import TestClient

ROOT = Path(__file__).resolve().parent.parent
TEXTS = ["Me senté en el banco de mi jardín.", "Fui al banco a sacar dinero."]
LESSON = {"texts": TEXTS, "focus": "banco", "sense": ["jardín", "dinero"]}
INJECTIONS = ["</script><script>alert(1)</script>", "<img src=x onerror=alert(1)>"]


@pytest.fixture(scope="module")
def client(tiny_loaded):
    with TestClient(ra.app(tiny_loaded, max_sentences=4, max_pieces=60)) as test_client:
        yield test_client


def csv_weights(att, folder: Path) -> list[np.ndarray]:
    """Each sentence's (layers, heads, n, n) weights as attention.csv has them (6 decimals)."""
    write_csv(att.frame(), folder / "attention.csv")
    frame = pd.read_csv(folder / "attention.csv")
    out = []
    for number, sentence in enumerate(att.sentences, start=1):
        rows = frame[frame["sentence"] == number].sort_values(["layer", "head", "query_index", "key_index"])
        n = len(sentence.words)
        out.append(rows["weight"].to_numpy().reshape(sentence.layers, sentence.heads, n, n))
    return out


# ---- the API through the test client ------------------------------------------------------------

def test_api_weights_are_ra_attend_to_the_csv_rounding(client, tiny_loaded, tmp_path):
    answer = client.post("/api/attend", json=LESSON)
    assert answer.status_code == 200, answer.text
    data = answer.json()
    att = ra.attend(tiny_loaded, TEXTS, focus="banco", sense=["jardín", "dinero"])
    assert (data["model"], data["revision"], data["measure"]) == (att.model, att.revision, "weights")
    expected = csv_weights(att, tmp_path)
    for sentence, own, csv in zip(data["sentences"], att.sentences, expected):
        assert sentence["words"] == list(own.words)
        weights = np.array(sentence["weights"])
        assert weights.shape == own.weights.shape
        assert np.array_equal(weights, csv)  # both written with "%.6f"
        assert np.abs(weights - own.weights).max() <= 5e-7 + 1e-9


def test_weights_json_writes_what_percent_6f_writes():
    from real_attention.live.app import weights_json

    rng = np.random.default_rng(0)
    weights = rng.random((2, 3, 5, 5)).astype(np.float32)
    weights[0, 0, 0] = [0.0, 1.0, 0.0078125, 0.0000005, 0.9999995]  # ends, and halves (0.0078125 is exact)
    expected = [[[[float(f"{w:.6f}") for w in row] for row in head] for head in layer] for layer in weights]
    text = weights_json(weights)
    assert json.loads(text) == expected
    assert re.fullmatch(r"[\[\],.0-9]+", text) and "0.007812," in text  # half to even, as printf


def test_api_heads_are_ra_classify_and_summary_is_summary_json(client, tiny_loaded):
    data = client.post("/api/attend", json=LESSON).json()
    att = ra.attend(tiny_loaded, TEXTS, focus="banco", sense=["jardín", "dinero"])  # no language unless given
    frame = ra.classify(att)
    heads = pd.DataFrame(data["heads"])[list(frame.columns)]
    assert heads[["layer", "head"]].to_numpy().tolist() == frame[["layer", "head"]].to_numpy().tolist()
    for flag in ("sense_head", "marker_head"):
        assert heads[flag].tolist() == frame[flag].tolist()
    numbers = [c for c in frame.columns if c not in ("layer", "head", "sense_head", "marker_head")]
    assert np.abs(heads[numbers].to_numpy() - frame[numbers].to_numpy()).max() <= 5e-7 + 1e-9
    assert data["summary"] == json.loads(json.dumps(att.summary()))


@pytest.mark.parametrize("body", [LESSON, {"texts": [TEXTS[1]], "focus": "banco", "sense": ["dinero"]},
                                  {"texts": [TEXTS[0]], "focus": "banco", "sense": ["jardín"]}])
def test_api_head_flags_are_ra_classifys_booleans(client, tiny_loaded, body):
    """Each head's sense_head and marker_head in /api/attend are ra.classify's, not all false (issue 27.11)."""
    data = client.post("/api/attend", json=body).json()
    att = ra.attend(tiny_loaded, body["texts"], focus=body["focus"], sense=body["sense"])
    frame = ra.classify(att)
    assert frame["sense_head"].dtype == bool and frame["marker_head"].dtype == bool
    for flag in ("sense_head", "marker_head"):
        assert [row[flag] for row in data["heads"]] == frame[flag].tolist()
        assert all(isinstance(row[flag], bool) for row in data["heads"])
    counted = data["summary"]
    assert sum(row["marker_head"] for row in data["heads"]) == int(frame["marker_head"].sum())
    assert counted is not None


def test_some_flag_is_true_on_the_lesson_sentences(client):
    """The check above would pass with every flag false; on one sentence the tiny model has true flags."""
    flags = [row[flag] for body in ({"texts": [TEXTS[1]], "focus": "banco", "sense": ["dinero"]},
                                    {"texts": [TEXTS[0]], "focus": "banco", "sense": ["jardín"]})
             for row in client.post("/api/attend", json=body).json()["heads"] for flag in ("sense_head", "marker_head")]
    assert any(flags)


def test_without_a_focus_word_the_api_gives_the_maps_only(client, tiny_loaded):
    data = client.post("/api/attend", json={"texts": ["fui al banco."]}).json()
    att = ra.attend(tiny_loaded, ["fui al banco."])
    assert data["heads"] == [] and data["summary"] is None
    assert data["sentences"][0]["words"] == list(att[0].words)


def library_message(tiny_loaded, **kwargs) -> str:
    with pytest.raises(InputError) as caught:
        ra.attend(tiny_loaded, **kwargs)
    return str(caught.value)


@pytest.mark.parametrize("body, status, message", [
    ("{", 400, "the body is not JSON"),
    ("[1, 2]", 400, "must be a JSON object"),
    ('{"texts": "fui al banco."}', 400, "texts must be a list of strings"),
    ('{"texts": [1]}', 400, "texts must be a list of strings"),
    ('{"texts": ["a"], "focus": 3}', 400, "focus must be a string"),
    ('{"texts": ["a"], "sense": [null]}', 400, "sense must be a list of strings"),
    ('{"texts": ["a"], "model": "gpt2"}', 400, "unknown field 'model'"),
    ('{"texts": ["a"], "path": "/etc/passwd"}', 400, "unknown field 'path'"),
    ('{"focus": "banco"}', 400, "texts is missing"),
    ('{"texts": ["a", "b", "c", "d", "e"]}', 422, "5 sentences; this server takes at most 4 per request"),
])
def test_bad_input_gets_its_status_and_message(client, body, status, message):
    answer = client.post("/api/attend", content=body.encode(), headers={"content-type": "application/json"})
    assert answer.status_code == status, answer.text[:300]
    assert message in answer.json()["error"]
    assert client.get("/api/health").json()["status"] == "ok"  # and the server keeps serving


def test_too_many_pieces_counts_every_sentence(tiny_loaded):
    with TestClient(ra.app(tiny_loaded, max_pieces=20)) as small:
        one = small.post("/api/attend", json={"texts": ["fui al banco a sacar dinero."]})
        two = small.post("/api/attend", json={"texts": ["fui al banco a sacar dinero."] * 3})
    assert one.status_code == 200
    assert two.status_code == 422 and "27 word pieces together" in two.json()["error"]


@pytest.mark.parametrize("request_body, library_call", [
    ({"texts": ["fui al banco.", " "]}, {"texts": ["fui al banco.", " "]}),
    ({"texts": []}, {"texts": []}),
    ({"texts": TEXTS, "focus": "perro", "sense": ["jardín", "dinero"]},
     {"texts": TEXTS, "focus": "perro", "sense": ["jardín", "dinero"]}),
    ({"texts": TEXTS, "focus": "banco"}, {"texts": TEXTS, "focus": "banco"}),
    ({"texts": TEXTS, "focus": "banco", "sense": ["jardín"]}, {"texts": TEXTS, "focus": "banco", "sense": ["jardín"]}),
    ({"texts": TEXTS, "measure": "norms"}, {"texts": TEXTS, "measure": "norms"}),
    ({"texts": TEXTS, "units": "letters"}, {"texts": TEXTS, "units": "letters"}),
])
def test_unusable_input_gets_422_and_the_librarys_message(client, tiny_loaded, request_body, library_call):
    answer = client.post("/api/attend", json=request_body)
    assert answer.status_code == 422, answer.text[:300]
    assert answer.json() == {"error": library_message(tiny_loaded, **library_call)}


def test_a_body_over_256_kb_gets_413_and_an_unknown_path_404(client):
    big = json.dumps({"texts": ["banco " * 50_000]}).encode()
    assert len(big) > 256 * 1024
    answer = client.post("/api/attend", content=big, headers={"content-type": "application/json"})
    assert answer.status_code == 413 and "256 kB" in answer.json()["error"]
    for path in ("/nope", "/static/../real_attention.py", "/static/secret.txt", "/api/attend/x"):
        missing = client.get(path)
        assert missing.status_code == 404 and "error" in missing.json(), path
    assert client.get("/api/attend").status_code == 405


def test_health_names_the_model_and_its_revision(client, tiny_loaded):
    assert client.get("/api/health").json() == {"status": "ok", "model": tiny_loaded.choice.name,
                                                "revision": tiny_loaded.revision}


def test_every_response_has_the_csp_and_no_cors_header(client):
    origin = {"Origin": "https://evil.example"}
    for answer in (client.get("/", headers=origin), client.get("/api/health", headers=origin),
                   client.post("/api/attend", json=LESSON, headers=origin), client.get("/nope", headers=origin),
                   client.options("/api/attend", headers={**origin, "Access-Control-Request-Method": "POST"})):
        policy = answer.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "style-src 'self'" in policy and "default-src 'none'" in policy
        assert "unsafe-inline" not in policy
        assert not [name for name in answer.headers if name.lower().startswith("access-control-")]


def test_page_has_no_inline_script_or_style_and_no_network(client):
    page = client.get("/").text
    assert "Me senté en el banco de mi jardín." in page and 'value="banco"' in page  # the examples, filled in
    for tag in re.findall(r"<script[^>]*>", page):
        assert 'src="static/' in tag or 'type="application/json"' in tag, tag
    assert "<style" not in page and " style=" not in page and " on" + "click=" not in page
    assert not re.search(r"(?:src|href)=\"(?:https?:)?//", page)
    for name in ("report.js", "report.css", "page.js", "page.css"):
        asset = client.get(f"/static/{name}")
        assert asset.status_code == 200 and "http://" not in asset.text and "https://" not in asset.text
    assert "innerHTML" not in client.get("/static/page.js").text


def test_the_report_script_sets_every_word_as_text():
    """Words reach the page through fill() (textContent); esc() is left for the category and measure names decided
    in Python."""
    from real_attention.outputs.report import _template

    script = _template("js")
    escaped = re.findall(r"esc\(([^()]*(?:\([^()]*\))?[^()]*)\)", script)
    # the mixing view's measure labels (pair[1], kept in data-label) come from Python too
    assert escaped and all(re.match(r"(c\.label|c\.note|headName\(l, h\) \+ \": \" \+ c\.label|text|pair\[1\]|"
                                    r"t\.dataset\.label)$", arg)
                           for arg in escaped), escaped
    assert "textContent = e.dataset.word" in script and "words[" in script


def test_download_gives_the_report_of_the_same_input(client, tiny_loaded):
    answer = client.post("/api/report", json=LESSON)
    assert answer.status_code == 200
    assert answer.headers["content-disposition"] == 'attachment; filename="report.html"'
    expected = ra.attend(tiny_loaded, TEXTS, focus="banco", sense=["jardín", "dinero"]).report_html()
    assert answer.text == expected


def test_the_app_mounts_under_a_path(tiny_loaded):
    from starlette.applications import Starlette
    from starlette.routing import Mount

    outer = Starlette(routes=[Mount("/attention", app=ra.app(tiny_loaded))])
    with TestClient(outer) as mounted:
        assert 'href="static/report.css"' in mounted.get("/attention/").text
        assert mounted.get("/attention/static/report.js").status_code == 200
        assert mounted.post("/attention/api/attend", json=LESSON).status_code == 200


def test_queued_queries_answered_together_equal_each_alone(tiny_loaded):
    queries = [Query(texts=tuple(TEXTS), focus="banco", sense=("jardín", "dinero")),
               Query(texts=("fui al banco a sacar dinero.",)),
               Query(texts=("el banco de mi jardín.", "mi banco."), focus="banco", sense=("jardín", "mi")),
               Query(texts=("fui al banco.",), focus="perro", sense=("fui",))]  # its own error, the others answered
    together = attend_many(tiny_loaded, queries)
    for query, batched in zip(queries, together):
        try:
            alone = attend_one(tiny_loaded, query)
        except InputError as error:
            assert isinstance(batched, InputError) and str(batched) == str(error)
            continue
        for a, b in zip(alone.sentences, batched.sentences):
            assert a.words == b.words
            np.testing.assert_allclose(a.weights, b.weights, atol=1e-5)
        if alone.result is not None:
            pd.testing.assert_frame_equal(ra.classify(alone), ra.classify(batched), atol=1e-5)


def test_a_decoder_through_the_api_has_lower_triangular_maps_and_the_first_token(tiny_decoders, tmp_path_factory):
    from conftest import CAUSAL
    from test_decoders import load

    model = load(tiny_decoders("llama"))
    texts = [s.text for s in CAUSAL.sentences]
    body = {"texts": texts, "focus": CAUSAL.focus, "sense": [s.sense for s in CAUSAL.sentences], "page": True}
    with TestClient(ra.app(model)) as decoder:
        data = decoder.post("/api/attend", json=body).json()
        late = decoder.post("/api/attend", json={"texts": ["the bank flooded the river ."], "focus": "bank",
                                                 "sense": ["river"]})
    assert data["causal"] is True
    for sentence in data["sentences"]:
        weights = np.array(sentence["weights"])  # (layers, heads, n, n)
        assert sentence["words"][0] == "<s>"
        assert np.triu(weights, k=1).max() == 0.0  # nothing after the query
        np.testing.assert_allclose(weights.sum(-1), 1.0, atol=1e-5)
    assert "first" in data["summary"]["categories"] and "next" not in data["summary"]["categories"]
    assert "first" in [c["name"] for c in data["report"]["categories"]]
    assert {"first", "first_special"} <= set(data["heads"][0])
    assert late.status_code == 422 and "comes after the focus word" in late.json()["error"]


def test_examples_a_decoder_refuses_are_said_on_the_page_and_in_the_log(tiny_decoders, capsys):
    """With --lang en a decoder's page opened empty, with no message and nothing logged (review 3)."""
    import html

    from test_decoders import load

    with TestClient(ra.app(load(tiny_decoders("llama")), lang="en")) as decoder:
        page = decoder.get("/").text
    status = re.search(r'<p id="live-status" class="live-status error"[^>]*>(.*?)</p>', page, re.S).group(1)
    message = html.unescape(status)
    assert message.startswith("The example sentences of 'en' cannot be answered, so the page opens with no answer: ")
    assert "comes after the focus word" in message and "'" not in status  # escaped
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("Warning:")]
    assert line.startswith("Warning: the example sentences of 'en' cannot be answered") and "comes after" in line


def test_host_warning_and_bind_errors():
    from real_attention.live.server import bind, exposure_warning

    assert exposure_warning("127.0.0.1") is None and exposure_warning("::1") is None
    assert "anyone who can reach this machine" in exposure_warning("0.0.0.0")
    taken = bind("127.0.0.1", 0)
    try:
        with pytest.raises(InputError, match=r"cannot listen on 127.0.0.1:.*port \(--port\)"):
            bind("127.0.0.1", taken.getsockname()[1])
    finally:
        taken.close()


@pytest.mark.parametrize("host, shown", [("0.0.0.0", "127.0.0.1"), ("::", "[::1]"), ("::1", "[::1]"),
                                         ("127.0.0.1", "127.0.0.1")])
def test_the_url_printed_and_opened_is_one_a_browser_reaches(host, shown):
    """A wildcard address is printed (and opened by --open) as the loopback of its family: http://[::]/ is none."""
    from real_attention.live.server import bind, url_of

    try:
        sock = bind(host, 0)
    except InputError:
        pytest.skip(f"this machine cannot listen on {host}")
    try:
        assert url_of(sock) == f"http://{shown}:{sock.getsockname()[1]}/"
    finally:
        sock.close()


def test_an_ipv6_zone_is_written_as_a_url_writes_it():
    from types import SimpleNamespace

    from real_attention.live.server import url_of

    link_local = SimpleNamespace(getsockname=lambda: ("fe80::1%eth0", 8000, 0, 2))
    assert url_of(link_local) == "http://[fe80::1%25eth0]:8000/"


def test_serve_command_needs_a_model_and_has_help():
    runner = CliRunner()
    result = runner.invoke(cli, ["serve"])
    assert result.exit_code == 2 and result.output.startswith("Error: serve needs a model")
    help_text = runner.invoke(cli, ["serve", "--help"]).output
    for option in ("--model", "--lang", "--host", "--port", "--measure", "--max-sentences", "--max-pieces", "--open"):
        assert option in help_text


# ---- a real server process -----------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """`real-attention serve` in a child process; `url` once it prints its line."""

    def __init__(self, *args: str, timeout: float = 120.0) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
        command = [sys.executable, "-c", "import real_attention; real_attention.main()", "serve",
                   "--port", str(free_port()), *args]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                        cwd=ROOT)
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=lambda: [self.lines.put(line) for line in self.process.stdout], daemon=True).start()
        try:
            self.first_line = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.process.kill()
            raise AssertionError(f"the server printed nothing: {self.process.stderr.read()}") from None
        self.url = re.search(r"http://\S+/", self.first_line).group(0)

    def get(self, path: str, timeout: float = 30.0) -> tuple[int, dict]:
        with urllib.request.urlopen(self.url + path, timeout=timeout) as response:
            return response.status, json.loads(response.read())

    def post(self, path: str, body: dict, timeout: float = 60.0) -> tuple[int, dict]:
        request = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def interrupt(self, timeout: float = 30.0) -> tuple[int, str]:
        self.process.send_signal(signal.SIGINT)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise
        return code, self.process.stderr.read()


@pytest.fixture(scope="module")
def tiny_server(tiny_model_dir):
    server = ServerProcess("--model", str(tiny_model_dir))
    yield server
    if server.process.poll() is None:
        server.process.kill()
        server.process.wait()


def sixteen_sentences() -> list[dict]:
    words = ["mi", "el", "un", "de", "al", "en"]
    bodies = []
    for i in range(16):
        text = f"fui {words[i % 6]} banco {words[(i // 6) % 6]} sacar dinero {'a ' * (i % 3)}."
        bodies.append({"texts": [text, "me senté en el banco de mi jardín."], "focus": "banco",
                       "sense": ["dinero", "jardín"]})
    assert len({b["texts"][0] for b in bodies}) == 16
    return bodies


def test_server_prints_one_line_with_url_model_and_revision(tiny_server, tiny_loaded):
    from real_attention.engine.naming import short_revision

    assert tiny_server.first_line.startswith("Serving http://127.0.0.1:")
    assert tiny_loaded.choice.name in tiny_server.first_line
    assert short_revision(tiny_loaded.revision) in tiny_server.first_line


def test_quiet_still_says_the_port_it_chose(tiny_loaded, monkeypatch, capsys):
    """`serve --quiet --port 0` never said which port it listened on (review 10)."""
    import uvicorn

    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)  # listens, then stops at once
    ra.serve(tiny_loaded, port=0, quiet=True)
    (line,) = capsys.readouterr().out.splitlines()
    port = int(re.fullmatch(r"Serving http://127\.0\.0\.1:(\d+)/ with .* \(Ctrl-C stops it\)", line).group(1))
    assert port > 0
    ra.serve(tiny_loaded, port=free_port(), quiet=True)  # a port given: quiet says nothing
    assert capsys.readouterr().out == ""


def test_sixteen_concurrent_clients_all_get_their_own_answer(tiny_server, tiny_loaded):
    bodies = sixteen_sentences()
    health_times, stop = [], threading.Event()

    def poll_health() -> None:
        while not stop.is_set():
            start = time.monotonic()
            status, answer = tiny_server.get("api/health")
            assert status == 200 and answer["status"] == "ok"
            health_times.append(time.monotonic() - start)
            time.sleep(0.01)

    poller = threading.Thread(target=poll_health)
    poller.start()
    try:
        with ThreadPoolExecutor(16) as pool:
            answers = list(pool.map(lambda body: tiny_server.post("api/attend", body), bodies))
    finally:
        stop.set()
        poller.join()
    for body, (status, data) in zip(bodies, answers):
        assert status == 200, data
        att = ra.attend(tiny_loaded, body["texts"], focus=body["focus"], sense=body["sense"])
        for sentence, own in zip(data["sentences"], att.sentences):
            assert sentence["words"] == list(own.words)
            np.testing.assert_allclose(np.array(sentence["weights"]), own.weights, atol=2e-6)
        assert [row["sense_head"] for row in data["heads"]] == ra.classify(att)["sense_head"].tolist()
    assert health_times and max(health_times) < 5.0  # it answered throughout (a generous bound, not a timing test)


def test_sigint_stops_the_server_with_exit_0_and_no_traceback(tiny_model_dir):
    server = ServerProcess("--model", str(tiny_model_dir))
    assert server.get("api/health")[0] == 200
    code, stderr = server.interrupt()
    assert code == 0, stderr
    assert "Traceback" not in stderr and "Aborted" not in stderr


def test_sigint_while_a_request_runs_still_exits_0(tiny_model_dir):
    server = ServerProcess("--model", str(tiny_model_dir))
    with ThreadPoolExecutor(4) as pool:
        pending = [pool.submit(server.post, "api/attend", body) for body in sixteen_sentences()]
        time.sleep(0.05)
        code, stderr = server.interrupt()
        for future in pending:
            try:
                future.result()
            except OSError:  # a request the server never took: it is gone, as asked
                pass
    assert code == 0 and "Traceback" not in stderr, stderr


# ---- in a real browser -------------------------------------------------------------------------------

def wait_for(driver, script: str, timeout: float = 30.0):
    start = time.monotonic()
    while True:
        value = driver.execute_script(script)
        if value:
            return value
        assert time.monotonic() - start < timeout, f"timed out waiting for: {script}"
        time.sleep(0.05)


def ask(driver, texts: list[str], focus: str, senses: list[str]) -> None:
    """Type the sentences and words into the form, press the button and wait for the answer to be drawn."""
    from selenium.webdriver.common.by import By

    before = driver.execute_script("return Number(document.body.dataset.shown || 0)")
    for element_id, value in (("live-texts", "\n".join(texts)), ("live-focus", focus),
                              ("live-sense", "\n".join(senses))):
        box = driver.find_element(By.ID, element_id)
        box.clear()
        box.send_keys(value)
    driver.find_element(By.ID, "live-submit").click()
    wait_for(driver, f"return Number(document.body.dataset.shown || 0) > {before} || document.body.dataset.error")
    error = driver.execute_script("return document.body.dataset.error")
    assert not error, error


def open_page(driver, url: str) -> None:
    driver.get(url)
    wait_for(driver, "return document.body.dataset.ready === 'true'")
    # any alert() a word managed to run lands here
    driver.execute_script("window.alert = function () { document.body.dataset.alerted = 'yes'; };")


@pytest.mark.browser
def test_typing_a_sentence_draws_the_grid_and_a_clicked_heads_heatmap(browser, tiny_server, tiny_loaded):
    from selenium.webdriver.common.by import By

    open_page(browser, tiny_server.url)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#overview .cell")) == 12  # the examples, answered at start
    ask(browser, ["fui al banco a sacar dinero."], "banco", ["dinero"])
    cells = browser.find_elements(By.CSS_SELECTOR, "#overview .cell")
    assert len(cells) == tiny_loaded.layers * tiny_loaded.heads
    att = ra.attend(tiny_loaded, ["fui al banco a sacar dinero."], focus="banco", sense=["dinero"])
    assert browser.find_element(By.ID, "sentence-list").text.startswith("fui al banco a sacar dinero.")
    cell = browser.find_element(By.CSS_SELECTOR, '#overview .cell[data-layer="3"][data-head="2"]')
    cell.click()
    svg = browser.find_element(By.ID, "heatmap-svg")
    assert (svg.get_attribute("data-layer"), svg.get_attribute("data-head")) == ("3", "2")
    labels = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#heatmap-svg .row-label")]
    assert labels == list(att[0].words)
    shown = {(int(r.get_attribute("data-q")), int(r.get_attribute("data-k"))): float(r.get_attribute("data-w"))
             for r in browser.find_elements(By.CSS_SELECTOR, "#heatmap-svg rect[data-w]")}
    expected = att[0].weights[2, 1]
    assert max(abs(w - expected[q, k]) for (q, k), w in shown.items()) <= 1e-4
    assert browser.find_element(By.CSS_SELECTOR, "#rollout-svg") is not None
    assert browser.find_element(By.CSS_SELECTOR, "#bars-svg") is not None


@pytest.mark.browser
def test_an_error_shows_as_text_and_the_page_keeps_working(browser, tiny_server):
    from selenium.webdriver.common.by import By

    open_page(browser, tiny_server.url)
    browser.find_element(By.ID, "live-focus").clear()
    browser.find_element(By.ID, "live-focus").send_keys("perro")
    browser.find_element(By.ID, "live-submit").click()
    message = wait_for(browser, "return document.body.dataset.error")
    assert "the focus word 'perro' is not in sentence 1" in message
    # the examples' answer stays drawn: dimmed, and the status line says what it is
    assert browser.find_element(By.ID, "live-status").text == (
        message + ". The views below still show the previous answer (measure weights, units text).")
    assert browser.execute_script("return document.body.dataset.stale") == "true"
    assert browser.execute_script("return getComputedStyle(document.querySelector('main')).opacity") == "0.45"
    ask(browser, ["fui al banco a sacar dinero."], "banco", ["dinero"])  # the page keeps working
    assert browser.execute_script("return document.body.dataset.stale") is None
    assert browser.execute_script("return getComputedStyle(document.querySelector('main')).opacity") == "1"
    logs = [entry["message"] for entry in browser.get_log("browser")]
    assert not [line for line in logs if "favicon" in line], logs  # the browser's icon request is answered (204)


@pytest.mark.browser
def test_the_keyboard_keeps_its_place_while_the_page_answers(browser, tiny_server):
    """The busy button was disabled, which dropped a keyboard user's focus to the top of the page; the download was a
    link to "#", which Space scrolled instead of pressing."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    open_page(browser, tiny_server.url)
    before = browser.execute_script("return Number(document.body.dataset.shown || 0)")
    browser.find_element(By.ID, "live-submit").send_keys(Keys.SPACE)
    wait_for(browser, f"return Number(document.body.dataset.shown || 0) > {before}")
    assert browser.execute_script("return document.activeElement.id") == "live-submit"
    assert browser.find_element(By.ID, "live-submit").get_attribute("aria-disabled") is None  # not busy any more
    download = browser.find_element(By.ID, "live-download")
    assert download.tag_name == "button" and download.get_attribute("type") == "button"
    # it looks like a link, not like the form's submit button
    assert download.value_of_css_property("background-color") in ("rgba(0, 0, 0, 0)", "transparent")
    assert download.value_of_css_property("font-weight") == "400"


@pytest.mark.browser
def test_errors_name_the_forms_boxes_not_the_apis_arguments(browser, tiny_server):
    """"sense= has 1 word(s) for 2 sentence(s)" is the Python API's wording; the page's reader sees boxes."""
    from selenium.webdriver.common.by import By

    open_page(browser, tiny_server.url)
    for texts, sense, expected in (
            ("fui al banco.\nel banco de mi jardín.", "fui", "The sense words box has 1 word(s) for 2 sentence(s); "
                                                           "give one per line, one for each sentence"),
            ("fui al banco.", "", "Give both a focus word and a sense word for each sentence")):
        browser.execute_script("delete document.body.dataset.error")
        for element_id, value in (("live-texts", texts), ("live-sense", sense)):
            box = browser.find_element(By.ID, element_id)
            box.clear()
            if value:
                box.send_keys(value)
        browser.find_element(By.ID, "live-submit").click()
        message = wait_for(browser, "return document.body.dataset.error")
        assert message.startswith(expected), message


@pytest.mark.browser
def test_a_drawing_that_fails_is_not_called_the_previous_answer(browser, tiny_server):
    from selenium.webdriver.common.by import By

    open_page(browser, tiny_server.url)
    # the answer arrives, but drawing it fails partway: the views are neither the examples' answer nor the new one
    browser.execute_script("window.realAttention.show = function () { return Promise.reject(new Error('boom')); };")
    browser.find_element(By.ID, "live-submit").click()
    message = wait_for(browser, "return document.body.dataset.error")
    status = browser.find_element(By.ID, "live-status").text
    assert message.startswith("The answer arrived but could not be drawn (boom)") and status == message, status
    assert "previous answer" not in status
    assert browser.execute_script("return document.body.dataset.stale") == "true"
    assert not browser.find_element(By.ID, "live-download").is_displayed()  # nothing whole to download


@pytest.mark.browser
def test_script_injection_words_stay_text(browser, tiny_server):
    from selenium.webdriver.common.by import By

    open_page(browser, tiny_server.url)
    texts = [f"fui al banco {INJECTIONS[0]} dinero.", f"{INJECTIONS[1]} banco a sacar dinero."]  # 24 pieces at most
    ask(browser, texts, "banco", ["dinero", "dinero"])
    assert browser.execute_script("return document.body.dataset.alerted") is None
    assert browser.execute_script("return document.querySelectorAll('img, iframe, object').length") == 0
    scripts = browser.execute_script("return [...document.scripts].map(s => s.src || s.type)")
    assert all(s.startswith(tiny_server.url + "static/") or s == "application/json" for s in scripts), scripts
    header = browser.find_element(By.ID, "sentence-list").text
    assert INJECTIONS[0] in header and INJECTIONS[1] in header  # shown as the characters typed
    for number in (1, 2):
        browser.find_element(By.CSS_SELECTOR, f'#sentence-buttons button[data-sentence="{number}"]').click()
        labels = "".join(e.get_attribute("textContent")
                         for e in browser.find_elements(By.CSS_SELECTOR, "#heatmap-svg .row-label"))
        assert "alert(1)" in labels and "<" in labels
    for cell in browser.find_elements(By.CSS_SELECTOR, "#overview .cell")[:3]:
        cell.click()  # draws the views again with the words
    browser.find_element(By.CSS_SELECTOR, '#sentence-buttons button[data-sentence="1"]').click()
    assert browser.execute_script("return document.body.dataset.alerted") is None
    logs = [entry["message"] for entry in browser.get_log("browser")]
    assert not [line for line in logs if "Content Security Policy" in line and "script" in line.lower()], logs


def serve_screenshot(driver, png: Path, url: str) -> Path:
    """Ask the live page the lesson's question, open the best sense head, save a full-page screenshot."""
    open_page(driver, url)
    ask(driver, TEXTS, "banco", ["jardín", "dinero"])
    chrome = driver.execute_script("return window.outerHeight - window.innerHeight")
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1400, height + chrome)
    try:
        png.write_bytes(driver.get_screenshot_as_png())
    finally:
        driver.set_window_size(1400, 1000)
    return png


@pytest.mark.slow
@pytest.mark.browser
def test_minilm_live_page_screenshot(browser, needs_minilm, tmp_path):
    from test_report import is_blank

    server = ServerProcess("--model", "minilm")
    try:
        png = serve_screenshot(browser, tmp_path / "serve.png", server.url)
        assert not is_blank(png.read_bytes())
        status, data = server.post("api/attend", LESSON)
        assert status == 200 and len(data["heads"]) == 72
        assert len(browser.find_elements("css selector", "#overview .cell")) == 72
    finally:
        code, stderr = server.interrupt()
    assert code == 0 and "Traceback" not in stderr


if __name__ == "__main__":  # python tests/test_serve.py figures/demo-minilm/serve.png
    import tempfile

    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import start_browser
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "figures/demo-minilm/serve.png")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as work:
        browser_driver = start_browser(Path(work) / "profile")
        live = ServerProcess("--model", "minilm")
        try:
            print(serve_screenshot(browser_driver, target, live.url))
        finally:
            live.interrupt()
            browser_driver.quit()
