"""The console's routes, all under ``/console``; they authenticate by themselves (``bridge.routes.console_auth``).

No operator configured: every route answers 404 saying so. A request with no operator session
gets the sign-in form (``GET /console``), a redirect to it (a Live View link), or 401; a bearer
token that is no operator's, or a wrong secret at sign-in, gets 403 and nothing else. Failed
secrets are counted per client address (``bridge.routes.console_limits``): past the limit, a sign-in or
a bearer token from that address answers 429 ``login_rate_limited`` with ``Retry-After``, unchecked.
The client's address is the connection's unless ``forwarded_allow_ips`` names the proxy it came
through. Sign-in and sign-out are refused (403) when a browser says another site's page sent them:
SameSite keeps the cookie from such a request, not a sign-out's answer from clearing it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from bridge.console.fleet import ConsoleNode, fleet_state, thumbnail
from bridge.console.thumbs import THUMB_SECONDS, Thumbnails
from bridge.live import OPERATOR
from bridge.routes.console_auth import COOKIE, SESSION_SECONDS, Operators
from bridge.routes.console_limits import LoginLimiter
from bridge.routes.console_page import console_page, login_page, message_page
from core.settings import Settings
from messages.errors import KitsuneError

__all__ = ["MAX_LOGIN_BYTES", "console_routes"]

log = logging.getLogger(__name__)

MAX_LOGIN_BYTES = 4096
"""The largest sign-in form read."""
_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                                       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; "
                                       "base-uri 'none'"}
_NO_OPERATORS = ("The operator console is off: no operators are configured (add an operators entry to the "
                 "configuration: a token, token_env or password_env).")
_ASSETS = {name: (resources.files("bridge.console").joinpath(name).read_bytes(), media)
           for name, media in (("console.js", "text/javascript"), ("console.css", "text/css"))}

Endpoint = Callable[[Request, str], Awaitable[Response]]
"""A console route's handler, given the operator the request is from."""


def _html(body: str, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return HTMLResponse(body, status_code=status, headers={**_HEADERS, **(headers or {})})


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json",
                    headers={**_HEADERS, **(headers or {})})


def rate_limited(wait: int, page: bool) -> Response:
    """429 ``login_rate_limited`` (a page, or JSON) with ``Retry-After``: ``wait`` seconds, nothing checked."""
    limited = KitsuneError("login_rate_limited", f"Too many failed sign-ins from your address: try again in {wait} s.",
                           state={"retry_after": wait})
    retry = {"Retry-After": str(wait)}
    if page:
        return _html(message_page(limited.message, limited.code), limited.http_status, retry)
    return _json(limited.to_json(), limited.http_status, retry)


def cross_site(request: Request) -> bool:
    """Whether a browser says the request comes from another site's page (``Sec-Fetch-Site``, else
    ``Origin`` naming another host than the request's, or ``null``): a form there may not sign anyone
    in or out. The console's pages send no referrer, so their own forms' ``Origin`` is ``null``; the
    browsers that say ``Sec-Fetch-Site`` (all current ones) are judged by it alone. A request with
    neither header (a script, not a browser) is not judged here."""
    fetched_from = request.headers.get("sec-fetch-site")
    if fetched_from is not None:
        return fetched_from not in ("same-origin", "none")
    origin = request.headers.get("origin")
    if origin is None:
        return False
    return origin == "null" or urlsplit(origin).netloc.lower() != request.headers.get("host", "").lower()


def _refused_cross_site() -> Response:
    return _html(message_page("The console's forms are sent from the console's own page only.", "forbidden"), 403)


def client_address(request: Request) -> str:
    """The key of the request's client for the limiter: its address."""
    return f"address:{request.client.host if request.client else 'unknown'}"


class Console:
    """The console of one node's app."""

    def __init__(self, node: ConsoleNode, operators: Operators, limiter: LoginLimiter) -> None:
        self.node = node
        self.operators = operators
        self.limiter = limiter
        self.thumbnails = Thumbnails(node.browser)

    def guarded(self, endpoint: Endpoint, *, page: bool = False) -> Callable[[Request], Awaitable[Response]]:
        """``endpoint`` for operators only; ``page`` answers an HTML page (else JSON) when it refuses."""

        async def route(request: Request) -> Response:
            if not self.operators.configured:
                return _html(message_page(_NO_OPERATORS), 404) if page else _json(
                    {"error": _NO_OPERATORS, "code": "console_off"}, 404)
            wait = self.limiter.retry_after(client_address(request)) if "authorization" in request.headers else None
            if wait is not None:
                return rate_limited(wait, page)
            try:
                operator, refused = self.operators.of_request(request)
            except KitsuneError as e:  # two Authorization headers
                return _json(e.to_json(), e.http_status)
            if refused:
                self._failed(request)
                return _html(message_page("That token is not an operator's."), 403) if page else _json(
                    {"error": "That token is not an operator's", "code": "forbidden"}, 403)
            if operator is None:
                if not page:
                    return _json({"error": "Sign in to the console first", "code": "unauthorized"}, 401)
                if request.url.path == "/console":
                    return _html(login_page())
                return RedirectResponse("/console", 303, headers=_HEADERS)
            return await endpoint(request, operator)

        return route

    async def page(self, request: Request, operator: str) -> Response:
        return _html(console_page(await fleet_state(self.node), operator))

    async def state(self, request: Request, operator: str) -> Response:
        return _json({**await fleet_state(self.node), "operator": operator})

    async def thumb(self, request: Request, operator: str) -> Response:
        tab = int(request.path_params["tab"])
        try:
            jpeg = await thumbnail(self.node, self.thumbnails, tab)
        except KitsuneError as e:
            gone = e.code in ("unknown_tab", "tab_closed")
            return _json(e.to_json(), 404 if gone else 503)
        return Response(jpeg, media_type="image/jpeg", headers={
            **_HEADERS, "Cache-Control": f"private, max-age={THUMB_SECONDS:g}"})

    async def live(self, request: Request, operator: str) -> Response:
        """A Live View link of the tab for the operator (``operator:<name>``), followed at once (``?mode=devtools``:
        DevTools for the tab)."""
        tab = int(request.path_params["tab"])
        mode = request.query_params.get("mode", "tab")
        if mode not in ("tab", "devtools"):
            return _html(message_page("mode is tab or devtools"), 400)
        try:
            link = await self.node.live.issue(tab, f"{OPERATOR}{operator}", str(request.base_url), mode=mode)
        except KitsuneError as e:
            return _html(message_page(f"No Live View of tab {tab}: {e.message}"), e.http_status)
        return RedirectResponse(link["url"], 303, headers=_HEADERS)

    async def decide(self, request: Request, operator: str) -> Response:
        """``POST /console/takeovers/{hold} {"approve": true|false}``: an operator's decision on a takeover held
        on this node (``bridge.tasks.held``); refused from another site's page."""
        if cross_site(request) or request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return _json({"error": "A decision is sent as JSON from the console's own page", "code": "forbidden"},
                         403)
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            body = None
        if not isinstance(body, dict) or set(body) != {"approve"} or not isinstance(body["approve"], bool):
            error = KitsuneError("invalid_parameter", 'A decision is {"approve": true} or {"approve": false}',
                                 state={"param": "approve"})
            return _json(error.to_json(), error.http_status)
        try:
            row = await self.node.held_takeovers.decide(request.path_params["hold"], body["approve"], operator)
        except KitsuneError as e:
            return _json(e.to_json(), e.http_status)
        log.info("operator %s %s held takeover %s", operator, row["decision"], row["id"])
        return _json({"ok": True, "takeover": row})

    async def login(self, request: Request) -> Response:
        """Check the secret of the form; on a match, a session cookie and back to the console."""
        if not self.operators.configured:
            return _html(message_page(_NO_OPERATORS), 404)
        if cross_site(request):
            return _refused_cross_site()
        wait = self.limiter.retry_after(client_address(request))
        if wait is not None:
            return rate_limited(wait, page=True)
        operator = self.operators.named(await _secret_of(request))
        if operator is None:
            self._failed(request)
            return _html(message_page("That token or password is not valid."), 403)
        self.limiter.succeeded(client_address(request))
        response = RedirectResponse("/console", 303, headers=_HEADERS)
        response.set_cookie(COOKIE, self.operators.sign_in(operator), max_age=int(SESSION_SECONDS), path="/console",
                            secure=request.url.scheme == "https", httponly=True, samesite="strict")
        log.info("operator %s signed in to the console", operator)
        return response

    def _failed(self, request: Request) -> None:
        """Count a wrong secret of the request's address (the secret itself is nowhere)."""
        address = client_address(request)
        if self.limiter.failed(address):
            log.warning("console sign-ins from %s refused for a while: too many failed", address)

    async def logout(self, request: Request) -> Response:
        """End the session of the request's cookie; refused (the cookie kept) from another site's page."""
        if cross_site(request):
            return _refused_cross_site()
        self.operators.sign_out(request.cookies.get(COOKIE))
        response = RedirectResponse("/console", 303, headers=_HEADERS)
        response.delete_cookie(COOKIE, path="/console", httponly=True, samesite="strict")
        return response

    async def asset(self, request: Request) -> Response:
        if not self.operators.configured:
            return _json({"error": _NO_OPERATORS, "code": "console_off"}, 404)
        body, media = _ASSETS[request.url.path.rpartition("/")[2]]
        return Response(body, media_type=media, headers={**_HEADERS, "Cache-Control": "no-cache"})


async def _secret_of(request: Request) -> str:
    """The ``secret`` field of a sign-in form (empty when there is none, or the form is not one)."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/x-www-form-urlencoded":
        return ""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_LOGIN_BYTES:
            return ""
    try:
        fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=8)
    except ValueError:  # too many fields (its message names none of them)
        return ""
    return fields.get("secret", [""])[0]


def console_routes(node: ConsoleNode, config: Settings, clock: Callable[[], float] = time.monotonic, *,
                   limiter: LoginLimiter | None = None) -> list[BaseRoute]:
    """The operator console of ``node``'s app: its page, sign-in and out, state, thumbnails, Live View links
    (sessions and, unless ``limiter`` is the app's, the sign-in limit on ``clock``, monotonic seconds)."""
    console = Console(node, Operators(config.operators, clock), LoginLimiter(clock) if limiter is None else limiter)
    return [
        Route("/console", console.guarded(console.page, page=True), methods=["GET"]),
        Route("/console/login", console.login, methods=["POST"]),
        Route("/console/logout", console.logout, methods=["POST"]),
        Route("/console/state", console.guarded(console.state), methods=["GET"]),
        Route("/console/thumb/{tab:int}", console.guarded(console.thumb), methods=["GET"]),
        Route("/console/live/{tab:int}", console.guarded(console.live, page=True), methods=["GET"]),
        Route("/console/takeovers/{hold}", console.guarded(console.decide), methods=["POST"]),
        *(Route(f"/console/{name}", console.asset, methods=["GET"]) for name in _ASSETS),
    ]
