"""The edges of the HTTP API every route shares: a 401's challenge, and JSON for a route that is not there.

Every 401 (``/api/*``, ``/mcp``, ``/metrics``, the console's) carries ``WWW-Authenticate: Bearer``
(RFC 6750), so that a client knows what to send. A path no route serves answers 404
``route_not_found``, and a method a route does not take 405 ``method_not_allowed``, as JSON like
every other error (Starlette's own answers are plain text); a route's :class:`KitsuneError` answers its JSON and
HTTP status.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from bridge.routes.responses import error_response
from messages.errors import KitsuneError

__all__ = ["CHALLENGE", "BearerChallenge", "error_handlers"]

CHALLENGE = (b"www-authenticate", b'Bearer realm="kitsune"')
"""The header of every 401."""


class BearerChallenge:
    """ASGI middleware: ``WWW-Authenticate: Bearer`` on every 401 that does not carry one."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def challenging(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 401:
                headers = list(message.get("headers", []))
                if all(name.lower() != CHALLENGE[0] for name, _ in headers):
                    message = {**message, "headers": [*headers, CHALLENGE]}
            await send(message)

        await self._app(scope, receive, challenging)


async def _not_there(request: Request, error: Exception) -> Response:
    status = error.status_code if isinstance(error, HTTPException) else 404
    if status == 405:
        refused = KitsuneError("method_not_allowed", f"{request.url.path} does not take {request.method}",
                               state={"method": request.method})
    else:
        refused = KitsuneError("route_not_found", f"No route {request.url.path}: see docs/guides/http-api.md",
                               state={"path": request.url.path})
    return error_response(refused)


def error_handlers() -> Mapping[int | type[Exception], Callable[[Request, Exception], Awaitable[Response]]]:
    """Starlette's ``exception_handlers`` for a path no route serves (404), a method it does not take (405), and a
    route's refusal (a :class:`KitsuneError` raised before its answer started)."""
    return {404: _not_there, 405: _not_there, KitsuneError: _refused}


async def _refused(request: Request, error: Exception) -> Response:
    """A route's refusal as its JSON; a WebSocket's is its endpoint's own to close (raised on, as without a handler)."""
    if request.scope["type"] != "http" or not isinstance(error, KitsuneError):
        raise error
    return error_response(error)
