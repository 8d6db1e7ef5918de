"""`ra.app` (the ASGI app, mountable) and `ra.serve` (the app on uvicorn, until Ctrl-C): the live page's entry points."""
from __future__ import annotations

import asyncio
import socket
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..engine.errors import InputError

if TYPE_CHECKING:
    from starlette.applications import Starlette

    from ..engine.models import LoadedModel

LOCALHOST = "127.0.0.1"
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")  # the Host headers a server bound to loopback answers
HEADER_TIMEOUT = 10.0  # seconds a connection may take to send a request's headers (slowloris, half-open)
KEEP_ALIVE_TIMEOUT = 5  # seconds an idle keep-alive connection stays open after a response
MAX_HEADER_BYTES = 16 * 1024  # h11's limit on an incomplete request head


def _timed_protocol(header_timeout: float):
    """uvicorn's h11 protocol, closing a connection that has not sent a whole request head within
    `header_timeout` seconds of connecting or of its last response (uvicorn's own keep-alive timeout only runs
    between requests that have been answered; nothing bounds a connection that never sends its headers)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TimedH11Protocol(H11Protocol):
        _header_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._header_timer = self.loop.call_later(header_timeout, self._no_headers)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.cycle is not None and self._header_timer is not None:  # a request head arrived
                self._header_timer.cancel()
                self._header_timer = None

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self._header_timer is None and not self.transport.is_closing():
                self._header_timer = self.loop.call_later(header_timeout, self._no_headers)

        def connection_lost(self, exc) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None
            super().connection_lost(exc)

        def _no_headers(self) -> None:
            self._header_timer = None
            waiting = self.cycle is None or self.cycle.response_complete
            if waiting and not self.transport.is_closing():
                self.transport.close()

    return TimedH11Protocol


def server_config(application, *, header_timeout: float = HEADER_TIMEOUT):
    """The uvicorn.Config `serve` runs `application` with: quiet logs, a header timeout, a short keep-alive."""
    import uvicorn

    return uvicorn.Config(application, log_level="warning", access_log=False, lifespan="on",
                          timeout_graceful_shutdown=10, http=_timed_protocol(header_timeout),
                          timeout_keep_alive=KEEP_ALIVE_TIMEOUT, h11_max_incomplete_event_size=MAX_HEADER_BYTES)


def _loaded(model: LoadedModel | str) -> LoadedModel:
    """A LoadedModel as given, or one loaded from a name ("minilm", a Hub id, a folder)."""
    from ..engine.checks import described
    from ..engine.errors import InputError
    from ..engine.models import LoadedModel

    if not isinstance(model, (str, LoadedModel)):
        raise InputError(f"model must be a loaded model (ra.load(\"minilm\")) or a model's name, not "
                         f"{described(model)}")
    if isinstance(model, str):
        from ..api.api import load

        return load(model)
    return model


def require_serve_extra() -> None:
    """MissingPackage naming the extra to install when the live page's web stack (Starlette, uvicorn) is missing."""
    import importlib.util

    from ..engine.errors import MissingPackage

    missing = [name for name in ("starlette", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        raise MissingPackage(f"serve needs {' and '.join(missing)}: pip install \"real-attention[serve]\"")


def app(model: LoadedModel | str, *, lang: str | None = None, measure: str = "weights", max_sentences: int = 16,
        max_pieces: int = 256, allowed_hosts: Sequence[str] | None = None) -> Starlette:
    """The live page and its JSON API as a Starlette (ASGI) app, for one model fixed now.

    model: a LoadedModel (`ra.load(...)`) or a name to load. lang: the packaged config's table whose sentences
    fill the form (default: the lesson's "es"; "en-causal" for a decoder); a request's answer has the language it
    names, none by default. measure: that of a request that names none, the form's default.
    max_sentences, max_pieces: the most sentences, and word pieces over all of them, one request may have (the
    page opens on the examples that fit). InputError for measure value-zeroing with max_pieces under 16.
    Mount it under any path (`Mount("/attention", app=ra.app(model))`): its page uses relative URLs.
    allowed_hosts: the Host header names it answers (a port aside), e.g. ("localhost", "127.0.0.1", "[::1]") for a
    server bound to this machine alone, as `serve` does, so that no page elsewhere can rebind its own name to it
    (DNS rebinding); None: any (behind a proxy, or mounted in an app that checks them).
    """
    require_serve_extra()
    from .app import make_app

    if allowed_hosts is not None and (isinstance(allowed_hosts, str) or not isinstance(allowed_hosts, (list, tuple))
                                      or not all(isinstance(h, str) and h.strip() for h in allowed_hosts)):
        raise InputError(f"allowed_hosts must be a list of host names, or None, not {allowed_hosts!r:.60}")
    return make_app(_loaded(model), lang=lang, measure=measure, max_sentences=max_sentences, max_pieces=max_pieces,
                    allowed_hosts=None if allowed_hosts is None else tuple(h.strip().lower() for h in allowed_hosts))


def is_loopback(address: str) -> bool:
    """Whether a socket's address (as getsockname gives it: 127.0.0.1, ::1, ::ffff:127.0.0.1, fe80::1%eth0) is one
    only this machine reaches."""
    import ipaddress

    try:
        ip = ipaddress.ip_address(address.split("%")[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def exposure_warning(host: str, address: str | None = None) -> str | None:
    """The warning for a server that listens beyond this machine, or None for a loopback address. address: the
    bound socket's (what `host` resolved to); without it, `host` as written (a name is read as reaching further)."""
    if is_loopback(address if address is not None else host):
        return None
    return (f"listening on {host}: anyone who can reach this machine on the network can use the model "
            "(no password, no limit on who asks); bind 127.0.0.1, the default, to keep it to yourself")


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: a free one); InputError when it cannot be had."""
    from ..engine.checks import text, whole_number

    port = whole_number(port, "port (--port)", 0, 65535)
    text(host, "host (--host)", "an address or a host name, such as 127.0.0.1 or localhost")
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
    except (OSError, UnicodeError) as error:
        raise InputError(f"cannot listen on {host!r}: {error}") from None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as error:
        sock.close()
        hint = "; choose another port (--port)" if error.errno in (98, 48, 10048) else ""
        raise InputError(f"cannot listen on {host}:{port}: {error.strerror or error}{hint}") from None
    return sock


def url_of(sock: socket.socket) -> str:
    """The page's URL: a wildcard address (0.0.0.0, ::) is not one a browser can open, so its loopback is shown."""
    host, port = sock.getsockname()[:2]
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    # an IPv6 zone (fe80::1%eth0) is written %25 in a URL (RFC 6874)
    shown = f"[{host.replace('%', '%25')}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def serve(model: LoadedModel | str, *, host: str = LOCALHOST, port: int = 8000, lang: str | None = None, measure: str = "weights",
          max_sentences: int = 16, max_pieces: int = 256, open_browser: bool = False, quiet: bool = False) -> None:
    """Serve the live page of `model` on host:port until Ctrl-C (or SIGTERM), then return.

    Prints one line when it listens: the URL, the model and its revision (none with quiet, unless port is 0: then
    only that line says which port it has), and a warning first if `host` is not a loopback address (also with
    quiet). The arguments are those of `app`; open_browser opens the
    page in the default browser.
    """
    require_serve_extra()
    import uvicorn

    from ..engine.naming import short_revision

    loaded = _loaded(model)
    sock = bind(host, port)
    address = sock.getsockname()[0]
    # bound to this machine alone: a page elsewhere may still rebind its name to 127.0.0.1 (DNS rebinding) and read
    # the answers as its own origin, so only the loopback names are answered (Host header); bound wider, any name
    hosts = LOOPBACK_HOSTS if is_loopback(address) else None
    application = app(loaded, lang=lang, measure=measure, max_sentences=max_sentences, max_pieces=max_pieces,
                      allowed_hosts=hosts)
    url = url_of(sock)
    warning = exposure_warning(host, address)
    if warning:  # a warning is shown even with quiet, as every command's --quiet promises
        print(f"Warning: {warning}", file=sys.stderr, flush=True)
    if not quiet or port == 0:  # a port the system chose: nothing else says which
        print(f"Serving {url} with {loaded.choice.name} @ {short_revision(loaded.revision)} (Ctrl-C stops it)",
              flush=True)
    if open_browser:
        import webbrowser

        threading.Timer(0.5, webbrowser.open, [url]).start()
    server = uvicorn.Server(server_config(application))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn stops cleanly, then raises the Ctrl-C it caught again
        pass
    finally:
        sock.close()
