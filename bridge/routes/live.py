"""The Live View page and its WebSocket, on every node of the fleet.

``GET /live/{tab}`` serves the page; the link's token rides in the URL's fragment (``#t=…``), which
browsers never send to a server, so it reaches no access log, proxy or ``Referer``. The page sends
it as the first message of ``/live/{tab}/ws``: ``{"type": "hello", "token": …}``. A refused
connection gets an ``ended`` message and a close code: 4401 (the link is not valid or expired),
4403 (it is for another tab), 4409 (someone else holds control), 4410 (the tab closed), 4411 (the
link was revoked: handed back, its agent lost the tab, or pushed out by its agent's newer links),
1001 (the node stops), 1011 (the tab's node is gone); a hand-back closes with 1000.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from importlib import resources
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from bridge.live.links import LiveRefusal
from bridge.services import LiveSocketService

__all__ = ["HELLO_TIMEOUT", "live_routes"]

log = logging.getLogger(__name__)

HELLO_TIMEOUT = 10.0
"""Seconds a connection has to present its token."""
_PAGE = resources.files("bridge.live").joinpath("page.html").read_text(encoding="utf-8")
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

    return [Route("/live/{tab:int}", page, methods=["GET"]), WebSocketRoute("/live/{tab:int}/ws", socket)]


async def _serve(websocket: WebSocket, views: LiveSocketService, tab: int) -> None:
    """One person's connection: the token first, then frames out and input in until it ends."""

    async def send(message: dict[str, Any]) -> None:
        if websocket.application_state == WebSocketState.CONNECTED:
            with contextlib.suppress(RuntimeError, WebSocketDisconnect):  # the person left meanwhile
                await websocket.send_text(orjson.dumps(message).decode())

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


async def _close(websocket: WebSocket, send: Any, code: str, message: str, close_code: int) -> None:
    await send({"type": "ended", "code": code, "message": message})
    if websocket.application_state == WebSocketState.CONNECTED:
        with contextlib.suppress(RuntimeError, WebSocketDisconnect):
            await websocket.close(close_code, message[:120])
