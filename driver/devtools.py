"""DevTools for one tab, as a person's Live View (``mode=devtools``) shows it: Chromium's own front end, read from
the node's browser, and a CDP session of its own on the tab that relays the front end's messages.

The front end is the one the running Chromium bundles (``devtools://devtools/bundled/``), so it always speaks
the browser's protocol version, and nothing is downloaded: :class:`FrontEnd` reads each file the person's
browser asks for from a page of a context of its own (no tab of the fleet, no network: a ``devtools://``
document only fetches its own files), and keeps it in memory. No debugging port is opened: the node's
Chromium speaks to Playwright over a pipe, and the person's DevTools reaches the tab only through the node's
WebSocket (:class:`DevtoolsSession`), which refuses what would step outside the tab
(:func:`messages.cdp_methods.devtools_refusal`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import orjson
from playwright.async_api import BrowserContext, CDPSession, Page
from playwright.async_api import Error as PlaywrightError

from messages.cdp_methods import devtools_refusal

__all__ = ["MAX_IN_FLIGHT", "DevtoolsSession", "FrontEnd", "FrontEndFile"]

log = logging.getLogger(__name__)

BUNDLED = "devtools://devtools/bundled/"
"""Where Chromium serves its front end, to its own pages only."""
_HOME = BUNDLED + "devtools_compatibility.js"
"""What the reading page shows: a script file as text (nothing of the front end runs there)."""
_PATH = re.compile(r"(?:[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,127}/){0,10}[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,127}")
"""A file's path under the bundle: a few folders and a name, none starting with a dot (no ``..``), no query."""
_MAX_FILE = 16 * 1024 * 1024
_MAX_KEPT = 96 * 1024 * 1024
"""Bytes of files kept in memory at most (the front end's modules a person's DevTools loaded)."""
_READ = """async (url) => {
  let answer;
  try { answer = await fetch(url); } catch (e) { return null; }
  if (!answer.ok) return null;
  const blob = await answer.blob();
  const data = await new Promise((done, failed) => {
    const reader = new FileReader();
    reader.onload = () => done(reader.result);
    reader.onerror = () => failed(reader.error);
    reader.readAsDataURL(blob);
  });
  return [answer.headers.get("content-type") || "application/octet-stream", data.slice(data.indexOf(",") + 1)];
}"""

FrontEndFile = tuple[bytes, str]
"""A file of the front end and its media type."""


class FrontEnd:
    """Chromium's bundled DevTools front end, file by file as asked, from a page of a context of its own."""

    def __init__(self, context: Callable[[], Awaitable[BrowserContext]]) -> None:
        self._context = context
        self._page: Page | None = None
        self._opening = asyncio.Lock()
        self._kept: dict[str, FrontEndFile] = {}
        self._size = 0

    async def file(self, path: str) -> FrontEndFile | None:
        """The file at ``path`` of the bundle (``inspector.html``, ``entrypoints/...``), or None when there is
        none (or the path is not one of a bundle's)."""
        if _PATH.fullmatch(path) is None:
            return None
        if (kept := self._kept.get(path)) is not None:
            return kept
        page = await self._reader()
        try:
            found = await page.evaluate(_READ, BUNDLED + path)
        except PlaywrightError:
            self._page = None  # the browser restarted or the page closed: the next read opens another
            raise
        if found is None:
            return None
        media, data = str(found[0]), base64.b64decode(found[1])
        if len(data) > _MAX_FILE:
            return None
        if self._size + len(data) <= _MAX_KEPT:
            self._kept[path] = (data, media)
            self._size += len(data)
        return data, media

    async def _reader(self) -> Page:
        async with self._opening:
            if self._page is None or self._page.is_closed():
                context = await self._context()
                page = await context.new_page()
                await page.goto(_HOME)
                self._page = page
            return self._page

    async def close(self) -> None:
        page, self._page = self._page, None
        if page is not None:
            with contextlib.suppress(PlaywrightError):
                await page.context.close()


MAX_IN_FLIGHT = 64
"""Messages of the front end a session answers at once (more wait to be read)."""
_CDP_ERROR = -32000
_NOT_FOUND = -32601


class DevtoolsSession:
    """One person's DevTools on one page: the front end's CDP messages, each sent on a CDP session of its own
    (unless refused: answered with a CDP error, nothing sent), its answers and the page's events sent back in the
    order they come. ``events`` names every event of the protocol (a CDP session delivers those it is told of)."""

    def __init__(self, page: Page, events: Iterable[str], send: Callable[[dict[str, Any]], Awaitable[None]], *,
                 limit: int | None = None) -> None:
        self._page = page
        self._events = tuple(events)
        self._send = send
        self._limit = limit
        """Bytes of JSON a message to the person may have (a relay's bound); None: any."""
        self._cdp: CDPSession | None = None
        self._out: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        self._tasks: set[asyncio.Task[None]] = set()
        self._sender: asyncio.Task[None] | None = None
        self.sent = 0
        """Methods sent to the page."""
        self.refused = 0
        """Methods refused, nothing sent."""

    async def start(self) -> None:
        """Attach to the page; its events flow from now on."""
        self._cdp = await self._page.context.new_cdp_session(self._page)
        for name in self._events:
            self._cdp.on(name, self._forwarder(name))
        self._sender = asyncio.create_task(self._sending())

    def _forwarder(self, name: str) -> Callable[[Any], None]:
        def forward(params: Any) -> None:
            self._out.put_nowait({"method": name, "params": params if params is not None else {}})
        return forward

    async def handle(self, message: Mapping[str, Any]) -> None:
        """One message of the front end: ``{"id", "method", "params"}``; answered through ``send``."""
        ident = message.get("id")
        if isinstance(ident, bool) or not isinstance(ident, int):
            return  # not a command: nothing to answer
        method, params = message.get("method"), message.get("params", {})
        why = devtools_refusal(method)
        if why is None and "sessionId" in message:
            why = "names a session of another target (only the tab's own is open)"
        if why is None and not isinstance(params, dict):
            why = "has params that are not an object"
        if why is not None:
            self.refused += 1
            code = _NOT_FOUND if why == "is not a method of the protocol" else _CDP_ERROR
            text = f"Kitsune refused {method!s:.80}: it {why}"
            answer: dict[str, Any] = {"id": ident, "error": {"code": code, "message": text}}
            if isinstance(message.get("sessionId"), str):
                answer["sessionId"] = message["sessionId"]
            self._out.put_nowait(answer)
            return
        await self._slots.acquire()
        task = asyncio.create_task(self._call(ident, str(method), params))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _call(self, ident: int, method: str, params: dict[str, Any]) -> None:
        try:
            if self._cdp is None:
                raise PlaywrightError("the session is closed")
            self.sent += 1
            result = await self._cdp.send(method, params)
            self._out.put_nowait({"id": ident, "result": result if result is not None else {}})
        except PlaywrightError as e:
            detail = str(e.message).removeprefix("Protocol error").split("\n", 1)[0][:300]
            self._out.put_nowait({"id": ident, "error": {"code": _CDP_ERROR, "message": detail.strip(" :")}})
        finally:
            self._slots.release()

    async def _sending(self) -> None:
        while (message := await self._out.get()) is not None:
            if self._limit is not None and len(orjson.dumps(message, default=str)) > self._limit:
                if "id" not in message:
                    continue  # an event too large to relay: dropped
                message = {"id": message["id"], "error": {"code": _CDP_ERROR, "message": "The answer is too large "
                                                                                         "to relay between nodes"}}
            await self._send(message)

    async def stop(self) -> None:
        """Detach (the page may be gone already); answers not sent yet are dropped."""
        cdp, self._cdp = self._cdp, None
        for task in list(self._tasks):
            task.cancel()
        if self._sender is not None:
            self._out.put_nowait(None)
            self._sender.cancel()
        if cdp is not None:
            with contextlib.suppress(PlaywrightError):
                await cdp.detach()
