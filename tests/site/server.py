"""The test web site: a standard-library HTTP server in a daemon thread, counting every write it receives.

It uses no asyncio, so it never competes with the event loops of the code under test. Every write
(every POST/PUT/PATCH/DELETE, plus GET of the download file and of the cookie-setting endpoint) is
counted under "METHOD /path" (path without query) as soon as the request has been read, before any
slow sleep, under a lock.

Every request of any kind (any method, any path, pages included, even one the server cannot parse) is
also counted under ANY ("ANY") as soon as its request line has arrived, before any answer, so
`site.count(ANY) == 0` proves that nothing reached the site. ANY is not a write: counts() leaves it out.

`TestSite(host="127.0.0.2")` serves on another loopback address (Linux routes all of 127.0.0.0/8 to lo), so
a test can have a second, different host that really serves pages. Every answer carries
`Access-Control-Allow-Origin: *`, so a cross-host fetch() fails only when something blocks it.
"""

from __future__ import annotations

import json
import secrets
import socket
import threading
import time
from email.parser import BytesParser
from email.policy import HTTP
from http import HTTPStatus
from http.cookies import CookieError, SimpleCookie
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar
from urllib.parse import parse_qs, quote, unquote, urlsplit

from tests.site import pages, shop
from tests.site.ports import bind_held

# GET routes that are writes, and so are counted.
COUNTED_GETS = frozenset({f"/download/{pages.REPORT_NAME}", "/cookies/set", "/session/start"})
MAX_BODY = 1 << 20
# The key under which every request is counted (never a write key, which is always "METHOD /path").
ANY = "ANY"
REDIRECT_STATUSES = frozenset({"301", "302", "303", "307", "308"})
PRINTABLE_ASCII = "".join(chr(c) for c in range(0x21, 0x7F))


class TestSite:
    """The site the integration tests drive; `with TestSite() as site:` starts and stops it."""

    __test__ = False  # not a pytest test class, although its name starts with "Test"

    def __init__(self, slow_seconds: float = 3.0, host: str = "127.0.0.1") -> None:
        self.slow_seconds = slow_seconds
        self.host = host
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._counts: dict[str, int] = {}
        self.session_tokens: list[str] = []
        """The session cookies ``/session/start`` gave, each a secret the server made (no client ever named it)."""
        self._last_form: dict[str, list[str]] = {}
        self._orders = 0
        self._checkout: dict[str, str] = {}
        self.shop = shop.Shop()
        self._stopping = threading.Event()
        self._slow_gate: threading.Event | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._base: str | None = None
        self._port_hold: socket.socket | None = None

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> str:
        """Start serving on self.host (an IPv4 address) at a free port (held on 127.0.0.1 too); the base URL.

        Starting twice is a no-op.
        """
        if self._server is not None and self._base is not None:
            return self._base
        self._stopping.clear()
        server, self._port_hold = bind_held(self.host, lambda address: _Server(address, _Handler))
        server.site = self
        host, port = server.server_address[:2]
        self._server = server
        self._base = f"http://{host!s}:{port}"
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"test-site-{port}", daemon=True)
        self._thread.start()
        return self._base

    def stop(self) -> None:
        """Stop serving and free the port; slow requests still sleeping are cut short. Safe to call twice."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        self._base = None
        self._stopping.set()
        self.release_slow()
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._port_hold is not None:
            self._port_hold.close()
            self._port_hold = None
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> TestSite:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    # -- addresses ---------------------------------------------------------------------------------

    @property
    def base(self) -> str:
        if self._base is None:
            raise RuntimeError("TestSite is not started")
        return self._base

    def url(self, path: str) -> str:
        return self.base + path

    # -- counters and state ------------------------------------------------------------------------

    def count(self, key: str) -> int:
        """How many writes "METHOD /path" the server has received since the last reset().

        count(ANY) is how many requests of any kind it has received since then.
        """
        with self._lock:
            return self._counts.get(key, 0)

    def counts(self) -> dict[str, int]:
        """Every write key and its count (without ANY)."""
        with self._lock:
            return {key: n for key, n in self._counts.items() if key != ANY}

    @property
    def last_form(self) -> dict[str, list[str]]:
        """Fields of the last counted form POST (any route), as parse_qs gives them; {} if none."""
        with self._lock:
            return {name: list(values) for name, values in self._last_form.items()}

    def reset(self) -> None:
        """Zero all counters (ANY too) and server-side state (click total, orders, checkout, last form).

        slow_seconds is a setting, not state: reset() leaves it as it is. A hold_slow() is released and dropped.
        """
        self.release_slow()
        with self._lock:
            self._counts.clear()
            self._last_form = {}
            self._orders = 0
            self._checkout = {}
            self._changed.notify_all()
        self.shop.reset()

    def wait_for_count(self, key: str, at_least: int = 1, timeout: float = 5.0) -> int:
        """Block until count(key) >= at_least or timeout passes; return the count then. Works for ANY too."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._counts.get(key, 0) < at_least:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
            return self._counts.get(key, 0)

    # -- used by the handler -----------------------------------------------------------------------

    def _record(self, key: str, form: dict[str, list[str]] | None = None) -> int:
        with self._lock:
            n = self._counts.get(key, 0) + 1
            self._counts[key] = n
            if form is not None:
                self._last_form = form
            self._changed.notify_all()
            return n

    def hold_slow(self) -> None:
        """Hold every /slow answer (after its write is counted) until release_slow(), reset() or stop(),
        instead of sleeping slow_seconds: a test sees the "counted, not yet answered" state for as long
        as it needs, however slow the machine."""
        with self._lock:
            self._slow_gate = threading.Event()

    def release_slow(self) -> None:
        """Let the held /slow answers go, and answer the next ones after slow_seconds again."""
        with self._lock:
            gate, self._slow_gate = self._slow_gate, None
        if gate is not None:
            gate.set()

    def _sleep_slow(self) -> None:
        with self._lock:
            gate = self._slow_gate
        if gate is not None:
            gate.wait()  # set by release_slow(), which reset() and stop() call
            return
        self._stopping.wait(max(0.0, float(self.slow_seconds)))

    def _ship(self, address: str) -> None:
        with self._lock:
            self._checkout = {"address": address}

    def _place_order(self, card: str) -> None:
        with self._lock:
            self._orders += 1
            self._checkout["card"] = card
            self._checkout["order_id"] = f"ORDER-{self._orders:04d}"

    def _checkout_state(self) -> dict[str, str]:
        with self._lock:
            return dict(self._checkout)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # many tabs and threads connect at once
    site: TestSite

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Browsers close tabs and connections mid-answer all the time in these tests: stay quiet.
        return


def _parse_form(content_type: str, body: bytes) -> dict[str, list[str]] | None:
    """Fields of a form body (urlencoded or multipart; file parts give their file name), or None."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        return parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    if kind == "multipart/form-data":
        message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {content_type}\r\n\r\n".encode("latin-1") + body)
        fields: dict[str, list[str]] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if not name:
                continue
            filename = part.get_filename()
            if filename is not None:
                value = filename
            else:
                payload = part.get_payload(decode=True)
                data = payload if isinstance(payload, bytes) else b""
                value = data.decode(part.get_content_charset() or "utf-8", "replace")
            fields.setdefault(str(name), []).append(value)
        return fields
    return None


def _first(fields: dict[str, list[str]], name: str) -> str:
    values = fields.get(name) or [""]
    return values[0]


def _milliseconds(query: dict[str, list[str]], default: int) -> int:
    """``?ms=``: a whole number of milliseconds, ``default`` when missing or not one."""
    given = _first(query, "ms")
    return int(given) if given.isdigit() else default


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "KitsuneTestSite/1.0"
    protocol_version = "HTTP/1.0"

    GET_PAGES: ClassVar[dict[str, Any]] = {
        "/": pages.index,
        "/form": pages.form,
        "/form20": pages.form20,
        "/slow": pages.slow,
        "/checkout/shipping": pages.shipping,
        "/links": pages.links,
        "/links/next": pages.links_next,
        "/links/other": pages.links_other,
        "/popups": pages.popups,
        "/popups/child": pages.popup_child,
        "/storage": pages.storage,
        "/download": pages.download,
        "/text": pages.text,
        "/navigate-on-click": pages.navigate_on_click,
        "/policy/sw": pages.policy_sw,
        "/policy/target": pages.policy_target,
        "/needs-user/sign-in": pages.needs_user_sign_in,
        "/needs-user/captcha": pages.needs_user_captcha,
        "/needs-user/marked": pages.needs_user_marked,
        "/needs-user/none": pages.needs_user_none,
    }
    # Pages made from the request's headers.
    REQUEST_PAGES: ClassVar[dict[str, Any]] = {
        "/cookies": lambda handler: pages.cookies(handler.headers.get("Cookie", "")),
        "/account": lambda handler: pages.account(handler._signed_in_as()),
        "/session": lambda handler: handler._session_page(),
    }
    # Pages that take their target in ?to=, with the target used when it is missing.
    TARGET_PAGES: ClassVar[dict[str, tuple[Any, str]]] = {
        "/policy/open": (pages.policy_open, "/policy/target"),
        "/policy/fetch": (pages.policy_fetch, "/policy/target"),
        "/policy/frame": (pages.policy_frame, "/policy/target"),
        "/policy/image": (pages.policy_image, "/policy/pixel.gif"),
        "/policy/ws": (pages.policy_ws, ""),  # "" -> ws:// of this site's own /ws
        "/policy/object": (pages.policy_object, "/policy/target"),
        "/policy/form": (pages.policy_form, "/form"),
        "/policy/location": (pages.policy_location, "/policy/target"),
        "/policy/meta": (pages.policy_meta, "/policy/target"),
        "/policy/refresh": (pages.policy_refresh, "/policy/target"),
        "/policy/prefetch": (pages.policy_prefetch, "/policy/target"),
        "/policy/prerender": (pages.policy_prerender, "/policy/target"),
        "/policy/webrtc": (pages.policy_webrtc, "stun:127.0.0.1:3478"),
    }

    def log_message(self, format: str, *args: Any) -> None:
        return

    @property
    def site(self) -> TestSite:
        return self.server.site

    def parse_request(self) -> bool:
        # Called for every request line that arrives, before any answer: count it under ANY.
        self.site._record(ANY)
        return super().parse_request()

    # -- answers -----------------------------------------------------------------------------------

    def _send(self, status: int, body: bytes, content_type: str,
              headers: list[tuple[str, str]] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("Access-Control-Allow-Origin", "*")
        for name, value in headers or []:
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _html(self, html: str, status: int = HTTPStatus.OK) -> None:
        self._send(status, html.encode("utf-8"), "text/html; charset=utf-8")

    def _json(self, data: object, status: int = HTTPStatus.OK) -> None:
        self._send(status, json.dumps(data).encode("utf-8"), "application/json")

    def _redirect(self, location: str, status: int = HTTPStatus.SEE_OTHER,
                  headers: list[tuple[str, str]] | None = None) -> None:
        self._send(status, b"", "text/plain", [("Location", location), *(headers or [])])

    def _not_found(self, path: str) -> None:
        self._html(pages.not_found(path), HTTPStatus.NOT_FOUND)

    def _read_body(self) -> bytes:
        try:
            length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY)
            return self.rfile.read(length) if length > 0 else b""
        except (OSError, ValueError):
            return b""

    # -- GET ---------------------------------------------------------------------------------------

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        if shop.owns(parts.path):
            self._send(*self.site.shop.get(parts.path, parse_qs(parts.query, keep_blank_values=True)))
        else:
            self._get_site_page()

    def _get_site_page(self) -> None:
        parts = urlsplit(self.path)
        path, query = parts.path, parse_qs(parts.query, keep_blank_values=True)
        if path in COUNTED_GETS:
            self.site._record(f"GET {path}", None)
        if path in self.GET_PAGES:
            self._html(self.GET_PAGES[path]())
        elif path in self.TARGET_PAGES:
            page, default = self.TARGET_PAGES[path]
            to = _first(query, "to") or default or self.site.base.replace("http://", "ws://", 1) + "/ws"
            if path == "/policy/refresh":
                self._send(HTTPStatus.OK, page(to).encode("utf-8"), "text/html; charset=utf-8",
                           [("Refresh", f"0;url={quote(to, safe=PRINTABLE_ASCII)}")])
            else:
                self._html(page(to))
        elif path == "/redirect":
            self._redirect_to(query)
        elif path == "/policy/pixel.gif":
            self._send(HTTPStatus.OK, pages.PIXEL_GIF, "image/gif")
        elif path == "/sw.js":
            self._send(HTTPStatus.OK, pages.SERVICE_WORKER_JS, "application/javascript; charset=utf-8")
        elif path == "/checkout/billing":
            self._html(pages.billing(self.site._checkout_state().get("address", "")))
        elif path == "/checkout/confirmation":
            state = self.site._checkout_state()
            self._html(pages.confirmation(state.get("order_id", ""), state.get("address", ""),
                                          state.get("card", "")[-4:]))
        elif path in self.REQUEST_PAGES:
            self._html(self.REQUEST_PAGES[path](self))
        elif path in ("/cookies/set", "/session/start"):
            self._set_cookie(query) if path == "/cookies/set" else self._start_session()
        elif path == "/clicks":
            self._html(pages.clicks(self.site.count("POST /clicks/hit")))
        elif path == "/wait":
            self._html(pages.wait(_milliseconds(query, 500), on_click=_first(query, "start") == "click"))
        elif path == f"/download/{pages.REPORT_NAME}":
            self._send(HTTPStatus.OK, pages.REPORT_CONTENT, "text/plain; charset=utf-8",
                       [("Content-Disposition", f'attachment; filename="{pages.REPORT_NAME}"')])
        elif path == "/api/echo":
            self._json({name: values[0] if len(values) == 1 else values for name, values in query.items()})
        elif path == "/trickle":
            self._trickle(_milliseconds(query, 2000))
        else:
            self._not_found(path)

    def _trickle(self, delay_ms: int) -> None:
        """/trickle?ms=N: a sign-in page whose password field arrives N ms (2000 by default) after its
        first bytes: a page that has committed and is still loading meanwhile."""
        first, rest = pages.document("Trickle", "<h1>Sign in</h1>\n<!--later-->\n"
                                     '<p><input id="password" type="password"></p>').split("<!--later-->")
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Cache-Control", "no-store")
        self.end_headers()  # no Content-Length: HTTP/1.0, the body ends when the connection closes
        self.wfile.write(first.encode("utf-8"))
        self.wfile.flush()
        self.site._stopping.wait(delay_ms / 1000)
        self.wfile.write(rest.encode("utf-8"))

    def _start_session(self) -> None:
        """/session/start: a sign-in, a session cookie of the server's making (``/session`` checks it)."""
        token = secrets.token_hex(16)
        with self.site._lock:
            self.site.session_tokens.append(token)
        self._redirect("/session", HTTPStatus.FOUND, [("Set-Cookie", f"sid={token}; Path=/; HttpOnly")])

    def _session_page(self) -> str:
        """/session: whether the request carries a session cookie the server gave (``signed in``, ``signed out``)."""
        sid = SimpleCookie(self.headers.get("Cookie", "")).get("sid")
        with self.site._lock:
            known = sid is not None and sid.value in self.site.session_tokens
        return pages.document("Session", f'<p id="session">{"signed in" if known else "signed out"}</p>')

    def _set_cookie(self, query: dict[str, list[str]]) -> None:
        name, value = _first(query, "name"), _first(query, "value")
        cookie: SimpleCookie = SimpleCookie()
        try:
            if not name:
                raise CookieError("missing name")
            cookie[name] = value
        except CookieError as error:
            self._send(HTTPStatus.BAD_REQUEST, f"bad cookie: {error}\n".encode(), "text/plain; charset=utf-8")
            return
        cookie[name]["path"] = "/"
        self._redirect("/cookies", HTTPStatus.FOUND, [("Set-Cookie", cookie[name].OutputString())])

    def _redirect_to(self, query: dict[str, list[str]]) -> None:
        """/redirect?to=URL[&status=301|302|303|307|308]: that redirect (302 by default) to URL.

        URL goes into Location as given, except that spaces and non-ASCII characters are percent-encoded.
        """
        to, status = _first(query, "to"), _first(query, "status") or "302"
        problem = ""
        if not to:
            problem = "missing ?to="
        elif any(c in to for c in "\r\n\0"):
            problem = "?to= may not hold CR, LF or NUL"
        elif status not in REDIRECT_STATUSES:
            problem = f"?status= must be one of {', '.join(sorted(REDIRECT_STATUSES))}"
        if problem:
            self._send(HTTPStatus.BAD_REQUEST, f"bad redirect: {problem}\n".encode(), "text/plain; charset=utf-8")
            return
        self._redirect(quote(to, safe=PRINTABLE_ASCII), int(status))

    # -- writes ------------------------------------------------------------------------------------

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        body = self._read_body()
        fields = _parse_form(self.headers.get("Content-Type", ""), body)
        n = self.site._record(f"POST {path}", fields)
        fields = fields or {}
        if path == "/form":
            self._html(pages.thanks(fields, n))
        elif path == "/form20":
            self._html(pages.form20_thanks(fields, n))
        elif path == "/slow":
            self.site._sleep_slow()
            self._html(pages.done(_first(fields, "item"), n))
        elif path == "/checkout/shipping":
            self.site._ship(_first(fields, "address"))
            self._redirect("/checkout/billing")
        elif path == "/checkout/billing":
            self.site._place_order(_first(fields, "card"))
            self._redirect("/checkout/confirmation")
        elif path == "/clicks/hit":
            self._json({"total": n})
        elif path == "/sign-in":  # a session cookie for a user name and a password, then back to the account
            user, password = _first(fields, "username"), _first(fields, "password")
            if not user or not password:
                self._redirect("/account")
            else:
                self._redirect("/account", headers=[("Set-Cookie", f"account={quote(user)}; Path=/; HttpOnly")])
        elif path == "/account/order":
            self._html(pages.done("order", n) if self._signed_in_as() else pages.account(None))
        elif shop.owns(path):
            self._send(*self.site.shop.post(path, fields))
        else:
            self._not_found(path)

    def _signed_in_as(self) -> str | None:
        """The user name of the account cookie /sign-in set, if any."""
        cookie = SimpleCookie(self.headers.get("Cookie", ""))
        return unquote(cookie["account"].value) if "account" in cookie else None

    def _other_write(self) -> None:
        path = urlsplit(self.path).path
        self._read_body()
        self.site._record(f"{self.command} {path}", None)
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, b"method not allowed\n", "text/plain; charset=utf-8")

    do_PUT = do_PATCH = do_DELETE = _other_write
