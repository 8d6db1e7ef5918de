"""`serve` against hostile input (issue 27, items 4-6 and 10): texts no sentence can be get 400, a body nested
100,000 deep gets 400 (not 500), and a connection that never sends its request head is closed."""
from __future__ import annotations

import json
import socket
import threading
import time

import pytest

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
    ({"texts": [TEXT, "\u200b\u200b"]}, "sentence 2 has no visible character"),
    ({"texts": ["\x01\x02"]}, "sentence 1 has no visible character"),
    ({"texts": ["bank\x00"]}, "sentence 1 holds a NUL character"),
    ({"texts": [TEXT], "focus": "banco\x00"}, "focus holds a NUL character"),
    ({"texts": [TEXT], "focus": "banco", "sense": ["\u200b"]}, "sense word 1 has no visible character"),
])
def test_texts_no_sentence_can_be_get_400_and_the_rule(client, body, said):
    content = json.dumps(body).encode()  # ASCII escapes: "\\ud800" is how a lone surrogate travels in JSON
    answer = client.post("/api/attend", content=content, headers={"content-type": "application/json"})
    assert answer.status_code == 400, answer.text
    assert said in answer.json()["error"]


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
