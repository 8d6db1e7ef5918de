"""`serve` against hostile input (issue 27, items 4-6 and 10): texts no sentence can be get 400, a body nested
100,000 deep gets 400 (not 500), and a connection that never sends its request head is closed."""
from __future__ import annotations

import html
import json
import re
import socket
import threading
import time

import pytest
from real_attention.engine.errors import InputError

import real_attention as ra

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
from starlette.testclient import TestClient

TEXT = "Fui al banco a sacar dinero."


@pytest.fixture(scope="module")
def client(tiny_loaded):
    with TestClient(ra.app(tiny_loaded)) as test_client:
        yield test_client


@pytest.mark.parametrize("body, said", [
    ({"texts": ["a \ud800 b"]}, "sentence 1 holds an unpaired surrogate (\\ud800 at character 3)"),
    ({"texts": ["bank\x00"]}, "sentence 1 holds a NUL character"),
    ({"texts": [TEXT], "focus": "banco\x00"}, "focus holds a NUL character"),
    ({"texts": [TEXT], "lang": "es\x00"}, "lang holds a NUL character"),
])
def test_strings_no_text_can_hold_get_400_and_the_rule(client, body, said):
    content = json.dumps(body).encode()  # ASCII escapes: "\\ud800" is how a lone surrogate travels in JSON
    answer = client.post("/api/attend", content=content, headers={"content-type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert said in answer.json()["error"]


@pytest.mark.parametrize("body", [
    {"texts": [TEXT, "\u200b\u200b"]},
    {"texts": ["\x01\x02"]},
    {"texts": [TEXT], "focus": "banco", "sense": ["\u200b"]},
    {"texts": [TEXT], "focus": "\u200b", "sense": ["dinero"]},
    {"texts": [TEXT, "   "]},
])
def test_a_sentence_with_nothing_visible_gets_422_as_an_empty_one(client, tiny_loaded, body):
    """"   " got 422 and the library's message, "\\u200b" and "\\x01" 400: one rule now, the library's (review 9)."""
    with pytest.raises(InputError) as caught:
        ra.attend(tiny_loaded, **body)
    answer = client.post("/api/attend", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json() == {"error": str(caught.value)}


def test_a_body_nested_100000_deep_gets_400_not_500(client):
    body = b"[" * 100_000  # 100 kB; the 200 kB case is the same nesting, twice as deep
    for payload in (body, b"[" * 200_000):
        answer = client.post("/api/attend", content=payload[:200_000], headers={"content-type": "application/json"})
        assert answer.status_code == 400, answer.text
        assert "nested too deeply" in answer.json()["error"]
    assert client.get("/api/health").status_code == 200  # and it keeps serving


def test_a_connection_that_sends_no_request_head_is_closed(tiny_loaded):
    import uvicorn

    from real_attention.live.server import bind, server_config

    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(server_config(ra.app(tiny_loaded), header_timeout=0.5))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        port = sock.getsockname()[1]
        silent = socket.create_connection(("127.0.0.1", port), timeout=20)
        half = socket.create_connection(("127.0.0.1", port), timeout=20)
        half.sendall(b"POST /api/attend HTTP/1.1\r\nHost: x\r\n")  # a head that never ends
        for connection in (silent, half):
            assert connection.recv(1024) == b""  # closed by the server (a timeout would raise instead)
            connection.close()
        with socket.create_connection(("127.0.0.1", port), timeout=20) as ok:  # a whole request is answered
            ok.sendall(b"GET /api/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert ok.recv(1024).startswith(b"HTTP/1.1 200")
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def test_a_typed_special_token_counts_as_the_pieces_it_runs_as(tiny_loaded):
    """The limit counted a typed "[MASK]" as 1 piece while the run splits it into the pieces of its characters: 150 of
    them passed a 256-piece limit and ran as about 450."""
    with TestClient(ra.app(tiny_loaded, max_pieces=10)) as small:
        answer = small.post("/api/attend", json={"texts": ["[MASK] [MASK] [MASK] [MASK] [MASK]"]})
    assert answer.status_code == 422, answer.text
    assert "word pieces together; this server takes at most 10" in answer.json()["error"]


def test_value_zeroing_takes_a_sixteenth_of_the_pieces(tiny_loaded):
    with TestClient(ra.app(tiny_loaded, max_pieces=64)) as small:
        answer = small.post("/api/attend", json={"texts": [TEXT], "measure": "value-zeroing"})
        assert answer.status_code == 422, answer.text
        assert "value-zeroing runs every layer again for each piece" in answer.json()["error"]
        assert "at most 4 per request for it" in answer.json()["error"]
        assert small.post("/api/attend", json={"texts": [TEXT]}).status_code == 200


def test_the_answer_carries_the_notes_ra_attend_warns_about(client):
    plain = client.post("/api/attend", json={"texts": [TEXT]}).json()
    assert plain["notes"] == []
    with pytest.warns(UserWarning, match="lacks characters"):  # ra.attend's warning, in the server's log
        unknown = client.post("/api/attend", json={"texts": ["Fui al banco \u0e01\u0e02 a sacar dinero."]}).json()
    (note,) = unknown["notes"]
    assert "lacks characters of 1 word(s)" in note and "sentence 1: '\u0e01\u0e02'" in note


def test_requests_the_model_thread_holds_count_toward_the_queue_limit(tiny_loaded, monkeypatch):
    """The thread moves every queued request into its own list each round: the limit of MAX_QUEUED waiting
    requests looked at the queue alone, and 138 were accepted at once."""
    import asyncio

    from real_attention.live import engine

    gate = threading.Event()

    def held_up(self, batch):
        gate.wait(10)
        for job in batch:
            engine._settle(job, engine.Answered(None, ()))

    monkeypatch.setattr(engine.Worker, "_answer", held_up)
    worker = engine.Worker(tiny_loaded)

    async def main():
        waiting = [asyncio.ensure_future(worker.submit(engine.Query(texts=(f"sentence {i}",))))
                   for i in range(engine.MAX_QUEUED)]
        await asyncio.sleep(0.5)  # the thread takes them all and waits at the gate
        assert worker.jobs.qsize() == 0
        with pytest.raises(engine.Busy):
            await worker.submit(engine.Query(texts=("one more",)))
        gate.set()
        return await asyncio.gather(*waiting)

    try:
        assert len(asyncio.run(main())) == engine.MAX_QUEUED
    finally:
        gate.set()
        worker.stop()


# ---- review of serve: shared passes, finished answers, the page's examples, labels and notes ----------------------

LONG = "me senté en el banco de mi jardín al sacar dinero de mi jardín en el jardín ."  # the tiny model's 24 pieces


def recorded_passes(monkeypatch) -> list[list[int]]:
    """The piece counts of the sentences of each padded batch the engine runs, as it runs them."""
    from real_attention.engine import extract

    passes: list[list[int]] = []
    padded = extract.pad_batch

    def recording(encoded, *args, **kwargs):
        passes.append([len(sentence.ids) for sentence in encoded])
        return padded(encoded, *args, **kwargs)

    monkeypatch.setattr(extract, "pad_batch", recording)
    return passes


def test_shared_passes_keep_a_long_sentence_apart():
    from real_attention.live.engine import BATCH_SENTENCES, shared_passes

    assert shared_passes([(8,), (200,), (9, 10), (8,)]) == [[0, 3, 2], [1]]
    assert shared_passes([(30,)] * 3) == [[0, 1, 2]]  # no padding: one pass
    assert shared_passes([(4,)] * (BATCH_SENTENCES + 1)) == [list(range(BATCH_SENTENCES)), [BATCH_SENTENCES]]
    assert shared_passes([]) == []


def test_short_requests_do_not_share_a_long_ones_padded_pass(tiny_loaded, monkeypatch):
    """Every queued sentence ran as one batch padded to the longest: 30 short requests beside one 254-piece sentence
    took 21 s instead of 0.3 s each (review 1). The short ones are answered first, the numbers as each alone."""
    import asyncio

    import numpy as np
    from real_attention.live import engine

    shorts = [engine.Query(texts=(f"fui al banco {word} .",)) for word in ("a", "de", "mi", "el", "en")]
    long = engine.Query(texts=(LONG,), focus="banco", sense=("dinero",))
    first = engine.Query(texts=("mi banco .",))
    worker = engine.Worker(tiny_loaded, max_pieces=256)
    order: list[engine.Query] = []

    async def main():
        async def asked(query):
            answer = await worker.submit(query)
            order.append(query)
            return answer

        with engine._FORWARD:  # the thread takes `first` and waits: the others queue up behind it
            waiting = [asyncio.ensure_future(asked(first))]
            await asyncio.sleep(0.3)
            waiting += [asyncio.ensure_future(asked(query)) for query in (long, *shorts)]
            await asyncio.sleep(0.3)
            passes.clear()
        return await asyncio.gather(*waiting)

    passes = recorded_passes(monkeypatch)
    try:
        answers = asyncio.run(main())
    finally:
        worker.stop()
    assert passes and all(max(lengths) * len(lengths) <= 2 * sum(lengths) for lengths in passes), passes
    assert [len(lengths) for lengths in passes if 24 in lengths] == [1]  # the long sentence ran alone
    assert order.index(long) == len(order) - 1  # the short ones did not wait for it
    for query, answer in zip((first, long, *shorts), answers):
        alone = engine.attend_one(tiny_loaded, query)
        assert answer.attention.sentences[0].words == alone.sentences[0].words
        np.testing.assert_allclose(answer.attention.sentences[0].weights, alone.sentences[0].weights, atol=1e-5)


def test_an_answer_is_made_once_and_its_bytes_kept(tiny_loaded, monkeypatch):
    """Each cached answer rebuilt its JSON (42 MB for a 254-piece sentence), once per request, at the same time
    for concurrent ones, past the waiting limit (review 2)."""
    import asyncio

    import httpx
    from real_attention.live import app as live_app

    made = []
    original = live_app.answer_json

    def counted(*args, **kwargs):
        made.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(live_app, "answer_json", counted)
    monkeypatch.setattr(live_app, "CHUNK", 64, raising=False)  # sent in pieces: the same bytes arrive
    application = ra.app(tiny_loaded)
    body = {"texts": [TEXT], "focus": "banco", "sense": ["dinero"], "page": True}

    async def main():
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            together = await asyncio.gather(*(client.post("/api/attend", json=body) for _ in range(8)))
            later = await client.post("/api/attend", json=body)
        return together, later

    try:
        together, later = asyncio.run(main())
    finally:
        application.state.worker.stop()
    assert {answer.status_code for answer in together} == {200}
    assert len({answer.content for answer in together} | {later.content}) == 1
    assert int(later.headers["content-length"]) == len(later.content) > 64
    assert len(made) == 1


def test_making_answers_counts_against_the_waiting_limit(tiny_loaded, monkeypatch):
    import asyncio

    import httpx
    from real_attention.live import app as live_app
    from real_attention.live import engine

    gate = threading.Event()
    original = live_app.answer_json

    def held(*args, **kwargs):
        gate.wait(20)
        return original(*args, **kwargs)

    monkeypatch.setattr(live_app, "answer_json", held)
    for module in (live_app, engine):  # one request may wait
        monkeypatch.setattr(module, "MAX_QUEUED", 1, raising=False)
    application = ra.app(tiny_loaded)

    async def main():
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            first = asyncio.ensure_future(client.post("/api/attend", json={"texts": [TEXT]}))
            await asyncio.sleep(1.0)  # answered by the model, held while its JSON is made
            second = await client.post("/api/attend", json={"texts": ["mi banco ."]})
            gate.set()
            return await first, second

    ran = []
    original_many = engine.attend_many
    monkeypatch.setattr(engine, "attend_many", lambda model, queries: ran.append(queries) or original_many(model,
                                                                                                         queries))
    try:
        first, second = asyncio.run(main())
    finally:
        gate.set()
        application.state.worker.stop()
    assert first.status_code == 200
    assert second.status_code == 503 and "requests are waiting already" in second.json()["error"]
    assert [query.texts for queries in ran for query in queries] == [(TEXT,)]  # refused before the model ran for it


def test_an_empty_request_does_not_fail_those_it_would_share_a_pass_with(tiny_loaded):
    from real_attention.live.engine import Query, attend_many

    answers = attend_many(tiny_loaded, [Query(texts=()), Query(texts=("fui al banco .",)),
                                        Query(texts=("el banco .",))])
    assert isinstance(answers[0], ra.InputError) and "at least one sentence" in str(answers[0])
    assert [answer[0].words for answer in answers[1:]] == [("[CLS]", "fui", "al", "banco", ".", "[SEP]"),
                                                           ("[CLS]", "el", "banco", ".", "[SEP]")]


def test_a_typed_sentence_has_no_language_unless_the_request_gives_one(client):
    """Every answer said the --lang of the page's examples ("es" for English sentences; review 5)."""
    body = {"texts": ["I went to the bank ."], "focus": "bank", "sense": ["went"], "page": True}
    plain = client.post("/api/attend", json=body).json()
    assert plain["summary"]["lang"] == "" and plain["report"]["header"]["lang"] == "not given"
    named = client.post("/api/attend", json={**body, "lang": "en"}).json()
    assert named["summary"]["lang"] == "en" and named["report"]["header"]["lang"] == "en"
    report = client.post("/api/report", json={**body, "lang": "en"}).text
    assert '<span data-fill="lang">en</span>' in report
    assert client.post("/api/attend", json={**body, "lang": 3}).status_code == 400


def test_words_the_tokenizer_deletes_are_named_in_the_notes(client, tiny_loaded):
    """A private-use character got no piece and vanished from the maps with no note (review 7)."""
    from real_attention.engine.models import check_encodes

    alone = client.post("/api/attend", json={"texts": ["\ue000"]}).json()
    assert alone["sentences"][0]["words"] == ["[CLS]", "[SEP]"]
    (note,) = alone["notes"]
    assert "deletes the characters of 1 word(s)" in note and "sentence 1: '\\ue000'" in note
    inside = client.post("/api/attend", json={"texts": ["banco \ue000 dinero"]}).json()
    assert "\ue000" not in inside["sentences"][0]["words"] and "'\\ue000'" in inside["notes"][0]
    assert check_encodes(tiny_loaded, ["banco dinero", "el banco ."]) is None  # every word has a piece
    both = check_encodes(tiny_loaded, ["el xyz \ue000 ."])
    assert "lacks characters of 1 word(s)" in both and "sentence 1: 'xyz'" in both
    assert "deletes the characters of 1 word(s)" in both


def test_the_report_says_the_unit_rule_and_the_notes(client):
    """Neither the page nor the downloaded report said the unit rule, nor the notes (review 8)."""
    body = {"texts": ["fui al banco xyz a sacar dinero ."], "focus": "banco", "sense": ["dinero"]}
    report = client.post("/api/report", json=body).text
    assert '<dt>Units</dt><dd class="units" data-fill="rule_units">the text rule: words as the reader sees them' \
        in report
    assert re.search(r'<p class="notes" data-fill="notes">Note: the vocabulary of .* lacks characters of 1 word\(s\)',
                     report)
    tokenizer = client.post("/api/report", json={**body, "units": "tokenizer"}).text
    assert "the tokenizer&#x27;s own words" in tokenizer
    data = client.post("/api/attend", json={**body, "page": True}).json()
    assert data["report"]["header"]["rule_units"].startswith("the text rule")
    assert data["report"]["notes"] == data["notes"] and data["report"]["header"]["notes"].startswith("Note: ")
    plain = client.post("/api/report", json={**body, "texts": [TEXT]}).text
    assert '<p class="notes" data-fill="notes"></p>' in plain  # none: the line is empty (hidden)


def status_line(page: str) -> str:
    return re.search(r'<p id="live-status"[^>]*>(.*?)</p>', page, re.S).group(1)


def form_texts(page: str) -> list[str]:
    return html.unescape(re.search(r'<textarea id="live-texts"[^>]*>(.*?)</textarea>', page, re.S).group(1)).split("\n")


@pytest.mark.parametrize("options", [{"max_sentences": 1}, {"max_pieces": 20}, {"measure": "value-zeroing"}])
def test_the_page_opens_on_the_examples_the_server_takes(tiny_loaded, capsys, options):
    """The page opened on example sentences the server then refused: pressing the button gave 422 (review 3)."""
    with TestClient(ra.app(tiny_loaded, **options)) as small:
        page = small.get("/").text
        texts = form_texts(page)
        assert texts == ["Me senté en el banco de mi jardín."]
        assert "The page opens on the first 1 of the 2 example sentences" in html.unescape(status_line(page))
        assert 'id="report-data">{' in page  # answered
        senses = html.unescape(re.search(r'<textarea id="live-sense"[^>]*>(.*?)</textarea>', page, re.S).group(1))
        answer = small.post("/api/attend", json={"texts": texts, "focus": "banco", "sense": senses.split("\n"),
                                                 "measure": options.get("measure", "weights")})
        assert answer.status_code == 200, answer.text
    assert "Warning: the page opens on the first 1 of the 2 example sentences" in capsys.readouterr().err


def test_value_zeroing_is_not_offered_where_it_takes_no_piece(tiny_loaded):
    with TestClient(ra.app(tiny_loaded, max_pieces=15)) as small:
        page = small.get("/").text
    assert '<option value="norm">' in page and 'value="value-zeroing"' not in page
    with TestClient(ra.app(tiny_loaded, max_pieces=16)) as enough:
        assert 'value="value-zeroing"' in enough.get("/").text
    with pytest.raises(InputError, match=r"of max_pieces \(--max-pieces\), .*with max_pieces 15 that is no piece at all"):
        ra.app(tiny_loaded, measure="value-zeroing", max_pieces=15)


def test_the_examples_notes_are_on_the_page_when_it_opens(tiny_loaded):
    """The notes of the examples ([UNK] words) were shown only after a new answer (review 8)."""
    with TestClient(ra.app(tiny_loaded, lang="en")) as english:  # English words the tiny vocabulary lacks
        page = english.get("/").text
    status = html.unescape(status_line(page))
    assert status.startswith("Note: the vocabulary of") and "lacks characters of" in status
    assert 'class="live-status"' in page  # a note, not an error
    assert re.search(r'<p class="notes" data-fill="notes">Note: the vocabulary', page)
