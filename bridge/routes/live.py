"""The Live View page and its WebSocket, on every node of the fleet.

``GET /live/{tab}`` serves the page; the link's token rides in the URL's fragment (``#t=…``), which
browsers never send to a server, so it reaches no access log, proxy or ``Referer``. The page sends
it as the first message of ``/live/{tab}/ws``: ``{"type": "hello", "token": …}``. A refused
connection gets an ``ended`` message and a close code: 4401 (the link is not valid or expired),
4403 (it is for another tab), 4409 (someone else holds control), 4410 (the tab closed), 4411 (the
link was revoked: handed back, its agent lost the tab, or pushed out by its agent's newer links),
1001 (the node stops), 1011 (the tab's node is gone); a hand-back closes with 1000.

A DevTools link (``mode=devtools``) opens ``GET /live/{tab}/devtools#t=…``: that page trades the token
(``POST /live/{tab}/devtools/session``, 403 with the refusal's code when it does not open the tab's DevTools)
for an HttpOnly, SameSite=Strict cookie whose path is the CDP socket's alone, then frames DevTools' front end
(``/live/{tab}/devtools/bundled/…``: the files of the node's Chromium) pointed at ``/live/{tab}/cdp``, whose
connection the cookie opens (a token never rides in a URL a server logs). "Done" on that page is
``POST /live/{tab}/devtools/done``. The socket's refusals are the close codes above, without an ``ended``
message (DevTools speaks CDP only).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from bridge.live.links import LiveRefusal
from bridge.live.viewer import Send, Viewer
from bridge.services import LiveSocketService

__all__ = ["HELLO_TIMEOUT", "live_routes"]

log = logging.getLogger(__name__)

HELLO_TIMEOUT = 10.0
"""Seconds a connection has to present its token."""
_PAGE = resources.files("bridge.live").joinpath("page.html").read_text(encoding="utf-8")
_DEVTOOLS = resources.files("bridge.live").joinpath("devtools.html").read_text(encoding="utf-8")
COOKIE = "kitsune_devtools"
"""The cookie that carries a DevTools link's token to its CDP socket (and nowhere else: its path is the socket's)."""
_MAX_POST = 4096
_HEADERS = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer",
            "Content-Security-Policy": "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
                                       "script-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'"}


def live_routes(views: LiveSocketService) -> list[BaseRoute]:
    """The page and the WebSocket of Live View (they authenticate by the link's token alone)."""

    async def page(request: Request) -> Response:
        tab = int(request.path_params["tab"])
        return HTMLResponse(_PAGE.replace("__TAB__", str(tab)), headers=_HEADERS)

    async def socket(websocket: WebSocket) -> None:
        await websocket.accept()
        async with views.connection():
            await _serve(websocket, views, int(websocket.path_params["tab"]))

    return [Route("/live/{tab:int}", page, methods=["GET"]), WebSocketRoute("/live/{tab:int}/ws", socket),
            *_devtools_routes(views)]


def _sender(websocket: WebSocket) -> Send:
    async def send(message: dict[str, Any]) -> None:
        if websocket.application_state == WebSocketState.CONNECTED:
            with contextlib.suppress(RuntimeError, WebSocketDisconnect):  # the person left meanwhile
                await websocket.send_text(orjson.dumps(message).decode())
    return send


async def _serve(websocket: WebSocket, views: LiveSocketService, tab: int) -> None:
    """One person's connection: the token first, then frames out and input in until it ends."""
    send = _sender(websocket)
    try:
        hello = orjson.loads(await asyncio.wait_for(websocket.receive_text(), HELLO_TIMEOUT))
        token = hello.get("token") if isinstance(hello, dict) and hello.get("type") == "hello" else None
        viewer = await views.open(tab, token, send)
    except LiveRefusal as refused:
        await _close(websocket, send, refused.code, refused.message, refused.close_code)
        return
    except (TimeoutError, orjson.JSONDecodeError, WebSocketDisconnect):
        await _close(websocket, send, "live_view_token_invalid", "No Live View token was presented", 4401)
        return
    await _relay(websocket, viewer, send)


async def _relay(websocket: WebSocket, viewer: Viewer, send: Send | None) -> None:
    """The person's messages to ``viewer`` until one side ends (told with ``send`` when it is given)."""
    reading = asyncio.create_task(_read(websocket, viewer.deliver))
    ending = asyncio.create_task(viewer.ended())
    try:
        await asyncio.wait({reading, ending}, return_when=asyncio.FIRST_COMPLETED)
        if not reading.cancelled() and reading.done() and (failed := reading.exception()) is not None:
            log.error("a Live View connection failed (%s)", type(failed).__name__)
            await _close(websocket, send, "internal", "The Live View failed; open the link again", 1011)
        elif ending.done():
            await _close(websocket, send, *ending.result())  # the person is told first, then it lets go
    finally:
        reading.cancel()
        ending.cancel()
        await viewer.close()


async def _read(websocket: WebSocket, deliver: Any) -> None:
    """Hand each of the person's messages to the viewer until they leave."""
    with contextlib.suppress(WebSocketDisconnect):
        while True:
            try:
                message = orjson.loads(await websocket.receive_text())
            except orjson.JSONDecodeError:
                continue
            if isinstance(message, dict):
                await deliver(message)


async def _close(websocket: WebSocket, send: Send | None, code: str, message: str, close_code: int) -> None:
    if send is not None:
        await send({"type": "ended", "code": code, "message": message})
    if websocket.application_state == WebSocketState.CONNECTED:
        with contextlib.suppress(RuntimeError, WebSocketDisconnect):
            await websocket.close(close_code, message[:120])


def _devtools_routes(views: LiveSocketService) -> list[BaseRoute]:
    """DevTools for a tab (a link of ``mode=devtools``): its page, the token's trade, "Done", the front end, the
    CDP socket."""

    async def page(request: Request) -> Response:
        tab = int(request.path_params["tab"])
        return HTMLResponse(_DEVTOOLS.replace("__TAB__", str(tab)), headers={
            **_HEADERS, "Content-Security-Policy": _HEADERS["Content-Security-Policy"].replace(
                "frame-ancestors 'none'", "frame-src 'self'; frame-ancestors 'none'")})

    async def session(request: Request) -> Response:
        return await _trade(request, views, done=False)

    async def done(request: Request) -> Response:
        return await _trade(request, views, done=True)

    async def front_end(request: Request) -> Response:
        found = await views.devtools_file(request.path_params["path"])
        if found is None:
            return Response("Not found", 404, media_type="text/plain", headers={"Cache-Control": "no-store"})
        data, media = found
        return Response(data, media_type=media, headers={
            "Cache-Control": "private, max-age=3600", "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer", "Content-Security-Policy": "frame-ancestors 'self'"})

    async def cdp(websocket: WebSocket) -> None:
        tab = int(websocket.path_params["tab"])
        await websocket.accept()
        if not _same_origin(websocket.headers):
            await _close(websocket, None, "live_view_token_invalid", "Another site's page may not open DevTools", 4401)
            return
        async with views.connection():
            try:
                viewer = await views.open(tab, websocket.cookies.get(COOKIE), _sender(websocket), "devtools")
            except LiveRefusal as refused:
                await _close(websocket, None, refused.code, refused.message, refused.close_code)
                return
            await _relay(websocket, viewer, None)

    base = "/live/{tab:int}/devtools"
    return [Route(base, page, methods=["GET"]), Route(f"{base}/session", session, methods=["POST"]),
            Route(f"{base}/done", done, methods=["POST"]),
            Route(base + "/bundled/{path:path}", front_end, methods=["GET"]),
            WebSocketRoute("/live/{tab:int}/cdp", cdp)]


async def _trade(request: Request, views: LiveSocketService, *, done: bool) -> Response:
    """``{"token"}`` of DevTools' page: whether it opens the tab's DevTools (a cookie for the CDP socket), or, with
    ``done``, the tab handed back from it."""
    tab = int(request.path_params["tab"])
    body = await request.body()
    try:
        token = orjson.loads(body).get("token") if len(body) <= _MAX_POST else None
    except (orjson.JSONDecodeError, AttributeError):
        token = None
    try:
        if not _same_origin(request.headers):
            raise LiveRefusal("live_view_token_invalid", "Another site's page may not open DevTools", 4401, 403)
        left = await views.devtools_link(tab, token, done)
    except LiveRefusal as refused:
        return JSONResponse({"code": refused.code, "message": refused.message}, refused.http_status,
                            headers={"Cache-Control": "no-store"})
    answer = JSONResponse({"ok": True, "tabId": tab, "expires_in": left}, headers={"Cache-Control": "no-store"})
    secure = request.url.scheme == "https"
    if done:
        answer.delete_cookie(COOKIE, path=f"/live/{tab}/cdp", secure=secure, httponly=True, samesite="strict")
    else:
        answer.set_cookie(COOKIE, str(token), max_age=max(1, int(left)), path=f"/live/{tab}/cdp", secure=secure,
                          httponly=True, samesite="strict")
    return answer


def _same_origin(headers: Mapping[str, str]) -> bool:
    """Whether the request came from a page of this node (or from no page at all): a browser names the site that
    sent it (``Sec-Fetch-Site``, ``Origin``)."""
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = headers.get("origin")
    return origin is None or urlsplit(origin).netloc == headers.get("host")
