"""The Starlette app of `real-attention serve`: the live page, POST /api/attend, /api/report, GET /api/health.

The model is fixed when the app is made; a request names sentences and words, never a file, a folder or a model.
Inference runs on the model thread (real_attention.live.engine); the answer is turned into JSON (or the report's
HTML) on a worker thread, so the event loop stays free, once per answer: requests for the same answer share its
bytes, and the last ones are kept (CACHED_BYTES). Every response carries a Content-Security-Policy that allows
the page's own scripts and styles only, and no CORS header: other sites' pages cannot read the answers.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
import traceback
from collections import OrderedDict
from collections.abc import Callable
from importlib import resources

import numpy as np

from ..engine.checks import whole_number
from ..engine.errors import InputError, RealAttentionError
from ..engine.text import is_blank, text_problem
from .engine import BUSY, MAX_QUEUED, Answered, Busy, Query, Worker

MAX_BODY = 256 * 1024  # bytes of a request body
BODY_TIMEOUT = 30.0  # seconds a request body may take to arrive
FIELDS = ("texts", "focus", "sense", "measure", "units", "lang", "page")
CACHED_ANSWERS = 16  # the last answers, so "download" gives the report of what is shown without a new pass
CACHED_BYTES = 64 * 1024 * 1024  # the finished answers (JSON, report) kept, in bytes over all of them
# Answers turned into JSON or a report at once, in any number of apps: each can take tens of MB while it is made
# (64 long requests at once, each made as it came, held 6 GB), and they share the interpreter's lock anyway
MAX_BUILDING = 2
BUILDING_SLOTS = threading.BoundedSemaphore(MAX_BUILDING)
CHUNK = 1024 * 1024  # bytes of an answer handed to the connection at a time: it holds one, not a copy of all
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                           "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]
TOOL = "real-attention serve"


class BadRequest(Exception):
    """The body is not JSON, or a field has the wrong type (400)."""


class SlowBody(BadRequest):
    """The body did not arrive within BODY_TIMEOUT seconds (408)."""


class TooLarge(Exception):
    """The body is over MAX_BODY bytes (413)."""


def _string(value, name: str) -> str:
    if not isinstance(value, str):
        raise BadRequest(f"{name} must be a string, got {type(value).__name__}")
    return value


def _check_text(text: str, what: str, named: str) -> None:
    """BadRequest (400) for a string no text can hold (a NUL character, an unpaired surrogate: the tokenizer
    cannot take it); InputError (422, ra.attend's message: `named` is what it calls the argument) for one with no
    visible character, as for an empty one, which is left to ra.attend (real_attention.engine.text)."""
    problem = text_problem(text) if text.strip() else None
    if problem is None:
        return
    if is_blank(text):
        raise InputError(f"{named} {problem}")
    raise BadRequest(f"{what} {problem}")


def parse_query(body: bytes, measure: str = "weights") -> tuple[Query, bool]:
    """A request body -> (its Query, whether the page's report data is wanted); BadRequest says what is wrong."""
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BadRequest(f"the body is not JSON: {error}") from None
    except ValueError as error:  # JSON the parser refuses to convert, e.g. an integer of over 4,300 digits
        raise BadRequest(f"the body holds a value this server does not read: {error}") from None
    except RecursionError:  # e.g. 100,000 nested [: the parser's stack, not a bug
        raise BadRequest("the body is nested too deeply; a request is one JSON object of strings and "
                         "lists of strings") from None
    if not isinstance(payload, dict):
        raise BadRequest('the body must be a JSON object, e.g. {"texts": ["Fui al banco."]}')
    unknown = sorted(set(payload) - set(FIELDS))
    if unknown:
        raise BadRequest(f"unknown field {unknown[0]!r}; the fields are {', '.join(FIELDS)} (the model is chosen "
                         "when the server starts)")
    # null is absent for every field but texts, as it already was for focus and sense ("measure": null was a 400)
    payload = {field: value for field, value in payload.items() if value is not None or field == "texts"}
    if "texts" not in payload:
        raise BadRequest('texts is missing: give a list of sentences, e.g. {"texts": ["Fui al banco."]}')
    texts = payload["texts"]
    if not isinstance(texts, list) or not all(isinstance(text, str) for text in texts):
        raise BadRequest("texts must be a list of strings, one sentence each")
    for number, text in enumerate(texts, start=1):
        _check_text(text, f"sentence {number}", f"texts: sentence {number}")
    focus = payload.get("focus")
    if focus is not None:
        _check_text(_string(focus, "focus"), "focus", "focus")
    sense = payload.get("sense")
    if isinstance(sense, str):
        sense = [sense]
    if sense is not None and (not isinstance(sense, list) or not all(isinstance(word, str) for word in sense)):
        raise BadRequest("sense must be a list of strings, one word per sentence")
    for number, word in enumerate(sense or (), start=1):
        _check_text(word, f"sense word {number}", f"sense: word {number}")
    lang = _string(payload.get("lang", ""), "lang").strip()  # a label only; none unless the request gives one
    if lang:
        _check_text(lang, "lang", "lang")
    page = payload.get("page", False)
    if not isinstance(page, bool):
        raise BadRequest("page must be true or false")
    options = {name: _string(payload.get(name, default), name) for name, default in (("measure", measure),
                                                                                      ("units", "text"))}
    for name, value in options.items():  # a NUL or a lone surrogate is a 400 here too, not an unknown name (422)
        if value.strip():
            _check_text(value, name, name)
    query = Query(texts=tuple(texts), focus=focus, sense=None if sense is None else tuple(sense), lang=lang,
                  **options)
    return query, page


POWERS = 10 ** np.arange(6, -1, -1)  # (7,) the digits of a weight's millionths: d.dddddd


def weights_json(weights: np.ndarray) -> str:
    """(layers, heads, n, n) weights in [0, 1] -> nested JSON lists of "d.dddddd" numbers, the text "%.6f" gives
    (attention.csv's format): a float32 times 1e6 is exact in float64, so rint rounds as printf does (half to even).
    Built as fixed-width bytes with numpy, one layer at a time, so other threads get their turn."""
    layers, heads, n, _ = weights.shape
    text = []
    for layer in range(layers):
        millionths = np.rint(weights[layer].astype(np.float64) * 1e6).astype(np.int64)  # (heads, n, n)
        digits = (millionths[..., None] // POWERS) % 10 + ord("0")  # (heads, n, n, 7)
        cells = np.empty((heads, n, n, 9), dtype=np.uint8)  # "d.dddddd" and a comma
        cells[..., 0], cells[..., 1], cells[..., 2:8], cells[..., 8] = digits[..., 0], ord("."), digits[..., 1:], ord(",")
        rows = np.empty((heads, n, 9 * n + 2), dtype=np.uint8)  # "[" numbers "]" and what follows the row
        rows[..., 0], rows[..., 1:-1] = ord("["), cells.reshape(heads, n, 9 * n)
        rows[..., -2] = ord("]")  # over the last number's comma
        rows[:, :-1, -1], rows[:, -1, -1] = ord(","), ord("]")  # a comma between rows; the last row closes the head
        text.append("[" + ",".join("[" + rows[head].tobytes().decode("ascii") for head in range(heads)) + "]")
    return "[" + ",".join(text) + "]"


def heads_rows(frame) -> list[dict]:
    """heads.csv's table as JSON rows: the labels as true/false, the statistics rounded to 6 decimals."""
    columns = []
    for name in frame.columns:
        values = frame[name].to_numpy()
        if name in ("sense_head", "marker_head"):  # booleans in ra.classify's table
            assert values.dtype == bool, (name, values.dtype)
            columns.append(values.tolist())
        elif values.dtype.kind in "iu":
            columns.append(values.tolist())
        else:
            columns.append(np.round(values.astype(np.float64), 6).tolist())
    names = list(frame.columns)
    return [dict(zip(names, row)) for row in zip(*columns)]


def answer_json(att, *, page: bool, notes: tuple[str, ...] = ()) -> bytes:
    """The API's answer for an Attention: model, revision, measure, sentences (words and weights), heads, summary,
    and `notes` (live.engine.notes_of: what `ra.attend` would warn about); with `page`, also the report data the
    live page draws (real_attention.outputs.report.report_data)."""
    from ..api.api import classify

    head = {"model": att.model, "revision": att.revision, "measure": att.measure, "units": att.units,
            "causal": att.causal, "heads": [], "summary": None, "notes": list(notes)}
    if att.result is not None:
        head["heads"] = heads_rows(classify(att))
        head["summary"] = att.summary()
        if page:
            from ..outputs.report import header_text, report_data

            data = report_data(att.result, head["summary"], notes=notes)
            data["header"] = header_text(att.result, head["summary"], TOOL, notes=notes)
            head["report"] = data
    parts = [json.dumps(head, sort_keys=True, ensure_ascii=False, allow_nan=False)[:-1], ',"sentences":[']
    for i, sentence in enumerate(att.sentences):
        parts.append(("," if i else "") + '{"words":' + json.dumps(list(sentence.words), ensure_ascii=False)
                     + ',"weights":' + weights_json(sentence.weights) + "}")
    parts.append("]}")
    return "".join(parts).encode("utf-8")


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _report_asset(suffix: str) -> str:
    from ..outputs.report import _template

    return _template(suffix)


class SecurityHeaders:
    """ASGI middleware: every response gets the Content-Security-Policy and friends; none gets CORS headers."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if not k.lower().startswith(b"access-control-")]
                message = {**message, "headers": headers + SECURITY_HEADERS}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def host_name(header: str) -> str:
    """A Host header's name, its port aside, in lower case: "LocalHost:8000" -> "localhost", "[::1]:80" -> "[::1]"."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[:header.find("]") + 1] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


def is_ip_literal(name: str) -> bool:
    """An address written as itself (127.0.0.2, [::ffff:127.0.0.1]): no name a page elsewhere could rebind."""
    import ipaddress

    try:
        ipaddress.ip_address(name[1:-1] if name.startswith("[") and name.endswith("]") else name)
    except ValueError:
        return False
    return True


class KnownHosts:
    """ASGI middleware: a request whose Host header is neither one of `hosts` nor an IP address gets 400 (JSON),
    before any route runs. A page elsewhere that rebinds its own name to 127.0.0.1 (DNS rebinding) sends its own
    name: it is refused; an address typed as itself cannot be rebound (the URL serve prints is one)."""

    def __init__(self, app, hosts: tuple[str, ...]) -> None:
        self.app, self.hosts = app, frozenset(hosts)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            header = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1")
            name = host_name(header)
            if name not in self.hosts and not is_ip_literal(name):
                names = ", ".join(sorted(self.hosts))
                response = error(400, f"this server answers requests for {names} only, not for the host "
                                      f"{header[:80]!r}: open it by one of those names")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def report_bytes(answered: Answered) -> bytes:
    """The offline report of an answer, as report.html (with the answer's notes); InputError without a focus word."""
    from ..outputs.report import report_html

    att = answered.attention
    if att.result is None:  # no focus word: the maps alone, which /api/attend gives; a report needs more
        raise InputError('/api/report needs "focus" and "sense" (one sense word per sentence): the report is built '
                         'around the focus word; /api/attend answers without them')
    return report_html(att.result, att.summary(), notes=answered.notes).encode("utf-8")


def sent(body: bytes, media_type: str, headers: dict[str, str] | None = None):
    """A response of finished bytes, handed to the connection CHUNK bytes at a time (as the client reads them):
    several clients of one big answer share its bytes instead of each holding a copy in its send buffer."""
    from starlette.responses import Response, StreamingResponse

    if len(body) <= CHUNK:
        return Response(body, media_type=media_type, headers=headers)
    view = memoryview(body)

    async def chunks():
        for start in range(0, len(body), CHUNK):
            yield view[start:start + CHUNK]

    return StreamingResponse(chunks(), media_type=media_type,
                             headers={**(headers or {}), "content-length": str(len(body))})


def error(status: int, message: str):
    """A JSON {"error": message} response with this status."""
    from starlette.responses import Response

    return Response(json.dumps({"error": message}, ensure_ascii=False), status_code=status,
                    media_type="application/json")


async def read_body(request) -> bytes:
    """The request's body; TooLarge past MAX_BODY bytes (announced or sent), BadRequest if it does not arrive
    within BODY_TIMEOUT seconds (a client that sends headers, then trickles the body or nothing)."""
    import asyncio

    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > MAX_BODY:
        raise TooLarge()

    async def receive() -> bytes:
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > MAX_BODY:
                raise TooLarge()
            chunks.append(chunk)
        return b"".join(chunks)

    try:
        return await asyncio.wait_for(receive(), BODY_TIMEOUT)
    except TimeoutError:
        raise SlowBody(f"the body did not arrive within {BODY_TIMEOUT:g} s") from None


class LiveModel:
    """The server's state for one loaded model: the model thread (a Worker), the last CACHED_ANSWERS answers,
    and the page with its assets. The endpoints are its methods; `routes()` lists them."""

    def __init__(self, model, *, lang: str | None = None, measure: str = "weights", max_sentences: int = 16,
                 max_pieces: int = 256) -> None:
        from ..engine.measures import check_measure
        from ..outputs.report import colour_rules
        from .page import live_page

        self.model, self.measure = model, check_measure(measure)
        max_sentences = whole_number(max_sentences, "max_sentences (--max-sentences)")
        max_pieces = whole_number(max_pieces, "max_pieces (--max-pieces)")
        page = live_page(model, lang=lang, measure=self.measure, max_sentences=max_sentences, max_pieces=max_pieces)
        if page.problem:  # the page says it too
            print(f"Warning: {page.problem}", file=sys.stderr, flush=True)
        self.page = page.html
        self.worker = Worker(model, max_sentences=max_sentences, max_pieces=max_pieces)
        self.answers: OrderedDict = OrderedDict()  # Query -> Answered, the last CACHED_ANSWERS
        # (Query, "json" | "page" | "report") -> its finished bytes, the last ones up to CACHED_BYTES in all
        self.finished: OrderedDict[tuple[Query, str], bytes] = OrderedDict()
        self.finished_size = 0  # their bytes
        self.building: dict[tuple[Query, str], asyncio.Task] = {}  # the bytes being made now, shared by asking
        self.assets = {
            "report.js": (_report_asset("js"), "text/javascript"),
            "report.css": (_report_asset("css") + "\n" + colour_rules() + "\n", "text/css"),
            "page.js": (_asset("page.js"), "text/javascript"),
            "page.css": (_asset("page.css"), "text/css"),
        }

    async def attention(self, query: Query):
        """The Answered (Attention and notes) of a query: from the cache, or from the model thread (then cached)."""
        answered = self.answers.get(query)
        if answered is None:
            answered = await self.worker.submit(query)
            self.answers[query] = answered
            while len(self.answers) > CACHED_ANSWERS:
                self.answers.popitem(last=False)
        else:
            self.answers.move_to_end(query)
        return answered

    async def finished_bytes(self, query: Query, kind: str, make: Callable[[Answered], bytes]) -> bytes:
        """The bytes of one form of a query's answer (kind: "json", "page" or "report"): kept from before; or those
        another request is making now, shared; or made now by make(Answered) on a worker thread. Making them
        counts against the waiting limit (Busy, 503), as the model's queue does: each can take tens of MB."""
        key = (query, kind)
        loop = asyncio.get_running_loop()
        while True:
            if key in self.finished:
                self.finished.move_to_end(key)
                return self.finished[key]
            shared = self.building.get(key)
            if shared is not None and shared.get_loop() is loop:
                return await asyncio.shield(shared)  # a client that goes away leaves it to the others
            # refused before the model runs for it, never after: a finished pass is not thrown away
            if self.worker.waiting() + len(self.building) >= MAX_QUEUED:
                raise Busy(BUSY)
            answered = await self.attention(query)
            if key in self.finished or (key in self.building and self.building[key].get_loop() is loop):
                continue  # made, or begun, while this one waited for the model
            task = loop.create_task(self._make(key, make, answered))
            task.add_done_callback(lambda done: done.cancelled() or done.exception())  # each asker gets its error
            self.building[key] = task
            return await asyncio.shield(task)

    async def _make(self, key: tuple[Query, str], make: Callable[[Answered], bytes], answered: Answered) -> bytes:
        from starlette.concurrency import run_in_threadpool

        def guarded(answered: Answered) -> bytes:
            with BUILDING_SLOTS:  # the others wait here, holding no bytes yet
                return make(answered)

        try:
            body = await run_in_threadpool(guarded, answered)
        finally:
            if self.building.get(key) is asyncio.current_task():
                del self.building[key]
        self.finished[key] = body
        self.finished_size += len(body)
        while self.finished_size > CACHED_BYTES:  # the oldest go first; a body over CACHED_BYTES alone is not kept
            self.finished_size -= len(self.finished.popitem(last=False)[1])
        return body

    async def handled(self, request, respond):
        """respond(Query, page wanted) for a POST's body, each failure turned into its status code."""
        media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media_type != "application/json":  # a form or text/plain POST from a page elsewhere needs no preflight
            return error(415, "send the query as JSON, with the header Content-Type: application/json (not "
                              f"{media_type or 'none'})")
        try:
            query, page = parse_query(await read_body(request), self.measure)
            return await respond(query, page)
        except BadRequest as bad:
            return error(408 if isinstance(bad, SlowBody) else 400, str(bad))
        except TooLarge:
            return error(413, f"the request body is over {MAX_BODY // 1024} kB")
        except Busy as busy:
            return error(503, str(busy))
        except RealAttentionError as problem:  # the library's own message, as the CLI prints it
            return error(422, str(problem))
        except Exception:  # noqa: BLE001 - a bug: say so, keep serving
            traceback.print_exc(file=sys.stderr)
            return error(500, "the server hit a bug; the traceback is in its log")

    async def attend(self, request):
        """POST /api/attend: the answer as JSON (answer_json)."""

        async def respond(query, page):
            def make(answered):
                return answer_json(answered.attention, page=page, notes=answered.notes)

            return sent(await self.finished_bytes(query, "page" if page else "json", make), "application/json")

        return await self.handled(request, respond)

    async def report(self, request):
        """POST /api/report: the offline report of the same answer, as a download."""

        async def respond(query, _page):
            return sent(await self.finished_bytes(query, "report", report_bytes), "text/html; charset=utf-8",
                        {"content-disposition": 'attachment; filename="report.html"'})

        return await self.handled(request, respond)

    async def health(self, _request):
        from starlette.responses import Response

        return Response(json.dumps({"status": "ok", "model": self.model.choice.name,
                                    "revision": self.model.revision}), media_type="application/json")

    async def no_icon(self, _request):
        """GET /favicon.ico, which every browser asks for: nothing, rather than a 404 in the console."""
        from starlette.responses import Response

        return Response(status_code=204)

    async def index(self, _request):
        from starlette.responses import Response

        return Response(self.page, media_type="text/html; charset=utf-8")

    async def static(self, request):
        from starlette.exceptions import HTTPException
        from starlette.responses import Response

        if request.path_params["name"] not in self.assets:
            raise HTTPException(404)
        text, media_type = self.assets[request.path_params["name"]]
        return Response(text, media_type=f"{media_type}; charset=utf-8")

    def routes(self) -> list:
        from starlette.routing import Route

        return [
            Route("/", self.index, methods=["GET"]),
            Route("/api/health", self.health, methods=["GET"]),
            Route("/api/attend", self.attend, methods=["POST"]),
            Route("/api/report", self.report, methods=["POST"]),
            Route("/static/{name}", self.static, methods=["GET"]),
            Route("/favicon.ico", self.no_icon, methods=["GET"]),
        ]

    @contextlib.asynccontextmanager
    async def lifespan(self, _app):
        """The model thread runs while the app does."""
        self.worker.start()
        try:
            yield
        finally:
            self.worker.stop()


# Starlette types every handler as taking any Exception (its keys can be status codes or exception classes)
async def _not_found(_request, _exc: Exception):
    return error(404, "no such page; the pages are /, /api/attend, /api/report and /api/health")


async def _not_allowed(request, _exc: Exception):
    return error(405, f"{request.method} is not allowed here")


async def _http_error(_request, exc: Exception):
    from starlette.exceptions import HTTPException

    assert isinstance(exc, HTTPException), "registered for HTTPException only"
    return error(exc.status_code, str(exc.detail))


def make_app(model, *, lang: str | None = None, measure: str = "weights", max_sentences: int = 16,
             max_pieces: int = 256, allowed_hosts: tuple[str, ...] | None = None):
    """The ASGI app for one loaded model (a LoadedModel): mount it anywhere; its URLs are relative. allowed_hosts:
    the Host names it answers (lower case; None: any)."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.middleware import Middleware

    live = LiveModel(model, lang=lang, measure=measure, max_sentences=max_sentences, max_pieces=max_pieces)
    middleware = [Middleware(SecurityHeaders)]  # the outermost: a refused Host gets the headers too
    if allowed_hosts is not None:
        middleware.append(Middleware(KnownHosts, hosts=allowed_hosts))
    app = Starlette(routes=live.routes(), middleware=middleware, lifespan=live.lifespan,
                    exception_handlers={404: _not_found, 405: _not_allowed, HTTPException: _http_error})
    app.state.worker = live.worker
    app.state.model = model
    return app
