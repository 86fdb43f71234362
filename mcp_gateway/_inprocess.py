"""httpx to an ASGI app in this process, its answer handed on as the app sends it.

``/mcp`` sends its tools' requests to the node's own API in-process. httpx's ``ASGITransport``
gathers a whole answer before it returns it, so a container call's progress lines (NDJSON) reached
the gateway only when the call ended. This transport runs the app in a task of its own and hands
each ``http.response.body`` message on as it comes, as a socket would, and behaves like one:

- the read timeout bounds the wait for the answer's start and for each chunk (``httpx.ReadTimeout``);
- an answer closed before its end (read to the end, or given up on) tells the app ``http.disconnect``;
  the app runs on, as after a client that went away, and what it sends afterwards is dropped;
- an app that fails (or returns) before it answered answers 500; one that fails mid-answer breaks
  the body (``httpx.ReadError``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
from starlette.types import ASGIApp, Message

__all__ = ["InProcessTransport"]

log = logging.getLogger(__name__)

_END = b""
"""Queued after the answer's last chunk."""


class _Exchange:
    """One request and its answer, between the app's task and the reader of the response."""

    def __init__(self, body: bytes, method: str) -> None:
        self._body: bytes | None = body
        self._head = method == "HEAD"
        self.started: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] = \
            asyncio.get_running_loop().create_future()
        """The answer's status and headers, once the app sent them."""
        self.chunks: asyncio.Queue[bytes | httpx.ReadError] = asyncio.Queue()
        """The answer's chunks as the app sends them, then ``_END`` (or the app's failure)."""
        self.gone = asyncio.Event()
        """Set when the response is closed: the app hears ``http.disconnect``."""
        self._ended = False

    async def receive(self) -> Message:
        if self._body is not None:
            body, self._body = self._body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if self.gone.is_set() or self._ended:
            return
        if message["type"] == "http.response.start" and not self.started.done():
            self.started.set_result((message["status"], list(message.get("headers", []))))
        elif message["type"] == "http.response.body":
            if message.get("body") and not self._head:
                self.chunks.put_nowait(bytes(message["body"]))
            if not message.get("more_body", False):
                self._end(_END)

    async def run(self, app: ASGIApp, scope: dict[str, Any]) -> None:
        """The app's answer to the request (in a task of its own)."""
        try:
            await app(scope, self.receive, self.send)
        except Exception as e:
            log.exception("in-process request %s %s failed", scope["method"], scope["path"])
            self._end(httpx.ReadError(f"the app failed mid-answer ({type(e).__name__})"))
        finally:
            self._end(httpx.ReadError("the app returned before its answer ended"))

    def _end(self, last: bytes | httpx.ReadError) -> None:
        if self._ended:
            return
        self._ended = True
        if not self.started.done():  # it never answered: a 500, as uvicorn answers then
            self.started.set_result((500, [(b"content-type", b"text/plain; charset=utf-8")]))
            self.chunks.put_nowait(b"Internal Server Error")
            last = _END
        self.chunks.put_nowait(last)


class _Body(httpx.AsyncByteStream):
    """A response's body as the app sends it."""

    def __init__(self, exchange: _Exchange, request: httpx.Request, timeout: float | None) -> None:
        self._exchange = exchange
        self._request = request
        self._timeout = timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            try:
                with anyio.fail_after(self._timeout):
                    chunk = await self._exchange.chunks.get()
            except TimeoutError as e:
                raise httpx.ReadTimeout(f"no answer within {self._timeout:g}s", request=self._request) from e
            if isinstance(chunk, httpx.ReadError):
                chunk.request = self._request
                raise chunk
            if chunk == _END:
                return
            yield chunk

    async def aclose(self) -> None:
        self._exchange.gone.set()


class InProcessTransport(httpx.AsyncBaseTransport):
    """httpx's requests answered by ``app`` in this process (its event loop), each answer streamed."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app
        self._running: set[asyncio.Task[None]] = set()
        """The apps still answering (held, so that none is collected mid-answer)."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        exchange = _Exchange(await request.aread(), request.method)
        task = asyncio.create_task(exchange.run(self._app, _scope(request)), name="kitsune-in-process")
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        timeout = request.extensions.get("timeout", {}).get("read")
        try:
            with anyio.fail_after(timeout):
                status, headers = await asyncio.shield(exchange.started)
        except TimeoutError as e:
            exchange.gone.set()
            raise httpx.ReadTimeout(f"no answer within {timeout:g}s", request=request) from e
        except BaseException:  # cancelled while waiting: the client went away
            exchange.gone.set()
            raise
        return httpx.Response(status, headers=headers, stream=_Body(exchange, request, timeout))

    async def aclose(self) -> None:
        for task in list(self._running):
            task.cancel()


def _scope(request: httpx.Request) -> dict[str, Any]:
    """The ASGI scope of ``request`` (as httpx's ``ASGITransport`` makes it)."""
    url = request.url
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": request.method,
            "headers": [(k.lower(), v) for k, v in request.headers.raw], "scheme": url.scheme, "path": url.path,
            "raw_path": url.raw_path.split(b"?")[0], "query_string": url.query, "server": (url.host, url.port),
            "client": ("127.0.0.1", 123), "root_path": ""}
