"""`serve` as a web surface (a review of 2026-12-07): DNS rebinding, cross-site form posts, many long answers made at
once, the notes of ra.attend's report, right-to-left overrides, and the loopback check."""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

import real_attention as ra

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
from starlette.testclient import TestClient

TEXT = "Fui al banco a sacar dinero."


@pytest.fixture(scope="module")
def loopback_client(tiny_loaded):
    from real_attention.live.server import LOOPBACK_HOSTS

    with TestClient(ra.app(tiny_loaded, allowed_hosts=LOOPBACK_HOSTS), base_url="http://127.0.0.1:8000") as client:
        yield client


def test_a_server_on_loopback_answers_only_the_loopback_names(loopback_client):
    """Any Host was answered: a page whose name is rebound to 127.0.0.1 could read the answers as its own origin."""
    # an address typed as itself cannot be rebound: --host 127.0.0.2 prints http://127.0.0.2:PORT/, which must work
    for host in ("127.0.0.1:8000", "localhost", "LocalHost:80", "[::1]:8000", "127.0.0.2:8765", "[::ffff:127.0.0.1]"):
        assert loopback_client.get("/api/health", headers={"host": host}).status_code == 200, host
    for host in ("rebind.attacker.example", "rebind.attacker.example:8000", "127.0.0.1.nip.io", ""):
        answer = loopback_client.get("/api/health", headers={"host": host})
        assert answer.status_code == 400, host
        assert answer.json()["error"].startswith("this server answers requests for") and "[::1]" in answer.text
        assert answer.headers["content-security-policy"].startswith("default-src 'none'")  # headers still on


def test_host_names_and_loopback_addresses():
    from real_attention.live.app import host_name
    from real_attention.live.server import exposure_warning, is_loopback

    assert [host_name(h) for h in ("LocalHost:8000", "[::1]:80", "[::1]", "127.0.0.1", "a.b:1")] == \
        ["localhost", "[::1]", "[::1]", "127.0.0.1", "a.b"]
    assert all(map(is_loopback, ("127.0.0.1", "127.5.0.1", "::1", "::ffff:127.0.0.1", "0:0:0:0:0:0:0:1")))
    assert not any(map(is_loopback, ("0.0.0.0", "::", "192.168.1.2", "fe80::1%eth0", "127.example.org")))
    assert exposure_warning("localhost", "127.0.0.1") is None and exposure_warning("::ffff:127.0.0.1") is None
    assert exposure_warning("127.evil.example") is not None  # a name is not read as loopback for its first digits
    with pytest.raises(ra.InputError, match="allowed_hosts must be a list of host names"):
        ra.app("minilm", allowed_hosts="localhost")


def test_a_post_that_is_not_json_gets_415(loopback_client):
    """A form or text/plain POST needs no preflight: a page elsewhere could make the browser fetch a report."""
    body = '{"texts":["Fui al banco. = x"],"focus":"banco","sense":["Fui"]}\r\n'
    for media_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None):
        headers = {} if media_type is None else {"content-type": media_type}
        for path in ("/api/report", "/api/attend"):
            answer = loopback_client.post(path, content=body.encode(), headers=headers)
            assert answer.status_code == 415, (path, media_type)
            assert "Content-Type: application/json" in answer.json()["error"]
    answer = loopback_client.post("/api/attend", content=body.encode(),
                                  headers={"content-type": "Application/JSON; charset=utf-8"})
    assert answer.status_code == 200


@pytest.mark.parametrize("field", ["measure", "units"])
def test_a_nul_in_measure_or_units_is_400_as_in_any_string(loopback_client, field):
    answer = loopback_client.post("/api/attend", json={"texts": [TEXT], field: "text\x00"})
    assert answer.status_code == 400 and f"{field} holds a NUL character" in answer.json()["error"]


def test_a_body_that_never_arrives_gets_408(tiny_loaded, monkeypatch):
    from real_attention.live import app as live_app

    monkeypatch.setattr(live_app, "BODY_TIMEOUT", 0.2)
    application = ra.app(tiny_loaded)

    async def main():
        sent = []

        async def receive():
            await asyncio.sleep(5)
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message):
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/api/attend", "raw_path": b"/api/attend",
                 "headers": [(b"content-type", b"application/json"), (b"host", b"x")], "query_string": b"",
                 "root_path": "", "scheme": "http", "server": ("x", 80), "client": ("y", 1), "http_version": "1.1",
                 "asgi": {"version": "3.0"}}
        await application(scope, receive, send)
        return sent[0]["status"]

    assert asyncio.run(main()) == 408


def test_at_most_two_answers_are_made_at_once(monkeypatch):
    """64 long answers made at once held 6 GB (5.6 GB measured again, 2.0 GB with two at a time); the others wait
    before their bytes exist."""
    from real_attention.live import app as live_app

    assert live_app.MAX_BUILDING == 2
    active, most, lock = [0], [0], threading.Lock()

    def make(_answered):
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        time.sleep(0.05)
        with lock:
            active[0] -= 1
        return b"x"

    live = object.__new__(live_app.LiveModel)  # its making of bytes alone: no model needed
    live.finished, live.finished_size, live.building = {}, 0, {}

    async def main():
        return await asyncio.gather(*[live._make((f"q{i}", "json"), make, None) for i in range(8)])

    assert asyncio.run(main()) == [b"x"] * 8 and most[0] == 2


def test_the_report_of_ra_attend_carries_its_warnings(tiny_loaded):
    """report_html() and the notebook's inline report left out what ra.attend had warned about; the live page and
    run's report showed it."""
    with pytest.warns(ra.RealAttentionWarning, match="lacks characters"):
        att = ra.attend(tiny_loaded, ["I sat on the bank of the qzxv river."], focus="bank", sense=["river"])
    assert att.notes and "lacks characters" in att.notes[0]
    assert "lacks characters" in att.report_html() and "lacks characters" in att._repr_html_()


def test_a_right_to_left_override_reorders_only_its_own_word(tiny_loaded):
    """A focus word with U+202E reversed the rest of the title, the heading and the model's name."""
    from real_attention.outputs.report import header_text

    att = ra.attend(tiny_loaded, ["I sat on the bank of the river."], focus="bank", sense=["river"])
    title = header_text(att.result, att.summary())["title"]
    assert "«\u2068bank\u2069»" in title and title.count("\u2068") == title.count("\u2069") == 2
    from importlib import resources

    css = resources.files("real_attention.outputs").joinpath("report_template.css").read_text(encoding="utf-8")
    assert "[data-fill], #overview .top, .row-label, .col-label, .sense-note b, .sentence-text { unicode-bidi: isolate; }" \
        in css
