"""A page's site-tool channel: a CDP session of its own, through which the page's documents speak to the node.

The session adds the binding every document's ``navigator.modelContext`` speaks through (``Runtime.addBinding``)
and follows the page's frames (``Page`` events) and the main world of each frame's document (``Runtime`` events).
The browser names the execution context of every call of the binding: a message is the document's of that context,
in the frame the browser says, whatever the page says. The node answers, and calls into a document, with
``Runtime.callFunctionOn`` in its context: no Playwright utility script is injected into a document for it (a
13.6 KB evaluation in a renderer that is loading the page), no evaluation of Playwright's waits on it, and a message
that wants no answer costs no command.

What else the ``Runtime`` events carry, every console message and exception of the page's documents, reaches the
node's loop: a page past :data:`MAX_NOISE` of them a second goes unheard for :data:`QUIET` seconds, twice as long
each time again. Its documents
still speak (the browser reports a binding's calls to the session all the same); those it loads meanwhile get the
binding as it is heard again, and keep their messages until.

The session covers the frames in the page's own renderer: a frame the browser moves to a process of its own
(another site's, or a sandboxed one) leaves it, and its documents have no ``modelContext``: no such frame can be of
the top document's origin, the only one whose tools a tab lists.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from playwright.async_api import CDPSession, Page
from playwright.async_api import Error as PlaywrightError

from driver.client_zone import as_one_call

__all__ = ["BINDING", "MAX_MESSAGE_CHARS", "Channel", "NotTaken"]

log = logging.getLogger(__name__)

BINDING = "__kitsuneSiteTools"
"""The binding's name in the page (``model_context.js`` takes it out of the page's reach at once)."""
MAX_MESSAGE_CHARS = 1024 * 1024 + 64 * 1024
"""Characters of one message at most (a tool's output of 1 MiB of JSON, and its envelope): a longer one is
dropped unread."""
MAX_NOISE = 200
"""Console messages and exceptions of a page's documents a second that its channel hears at most (those already on
their way when it stops hearing them come too)."""
QUIET = 10.0
"""Seconds a page past :data:`MAX_NOISE` goes unheard the first time: its ``Runtime`` events off, and the console
messages it logged meanwhile discarded as they come back on (the browser would report each again). Each time after,
twice as long as the time before, up to :data:`MAX_QUIET` (the messages on their way as it stops hearing them, a few
thousand from a page that logs as fast as it can, come all the same)."""
MAX_QUIET = 320.0
_ANSWER = "(reply, outcome) => globalThis[Symbol.for('kitsune.siteTools')]?.answer(reply, outcome)"
_ATTACH = "() => globalThis[Symbol.for('kitsune.siteTools')]?.attach()"


class NotTaken(Exception):
    """A message the node does not take: its answer is ``{"ok": false}``, with nothing the page can learn from."""


@dataclass(slots=True)
class _Frame:
    """A frame of the page as the browser reports it."""

    parent: str | None
    url: str
    context: int | None = None
    """The execution context of its document's main world (None until the browser reports it)."""


Take = Callable[["Channel", str, int, Any], Awaitable[Any]]
"""Takes a message (the channel, the frame and the context it came from, the message's JSON): its answer, or raises
:class:`NotTaken`."""
Lost = Callable[["Channel", str, int], None]
"""Told of a document gone: the channel, its frame and the context its main world had."""


class Channel:
    """The site-tool channel of one page (made by :meth:`open`; used on the loop only)."""

    def __init__(self, page: Page, session: CDPSession, take: Take, lost: Lost, changed: Callable[[], None]) -> None:
        self.page = page
        self.session = session
        self._cdp: Any = session._impl_obj
        """The session as Playwright's client has it: its events heard and its commands sent without the API's
        wrapping (which walks each event's parameters and reads its handler's signature, every event)."""
        self.main = ""
        """The id of the page's main frame."""
        self.tab: int | None = None
        """The page's tab, once a message of its documents named it (the tab's name outlives its page)."""
        self._frames: dict[str, _Frame] = {}
        """The page's frames in its renderer, in the order they were attached."""
        self._contexts: dict[int, tuple[str, str]] = {}
        """The main-world execution context of each frame's document -> the frame and the document's origin."""
        self._take, self._lost, self._changed = take, lost, changed
        self._noise = 0
        self._noise_since = 0.0
        self._quiet = QUIET
        """Seconds the page goes unheard the next time it is too noisy."""
        self._heard = True
        """Whether the session hears the page's ``Runtime`` events (off while it is too noisy)."""

    @classmethod
    async def open(cls, page: Page, take: Take, lost: Lost, changed: Callable[[], None]) -> Channel:
        """The channel of ``page``, once the binding is in every document it loads from now on. A document that
        loaded before (a popup's first one: its page is there only once it runs) gets it too, and is told to send
        what it kept meanwhile."""
        session = await page.context.new_cdp_session(page)
        channel = cls(page, session, take, lost, changed)
        for event, handler in (("Page.frameAttached", channel._attached), ("Page.frameDetached", channel._detached),
                               ("Page.frameNavigated", channel._navigated),
                               ("Page.navigatedWithinDocument", channel._moved),
                               ("Runtime.executionContextCreated", channel._created),
                               ("Runtime.executionContextDestroyed", channel._destroyed),
                               ("Runtime.executionContextsCleared", channel._cleared),
                               ("Runtime.consoleAPICalled", channel._noisy),
                               ("Runtime.exceptionThrown", channel._noisy),
                               ("Runtime.bindingCalled", channel._called)):
            channel._cdp.on(event, handler)
        _, tree = await asyncio.gather(channel._send("Page.enable"), channel._send("Page.getFrameTree"))
        channel._seed(tree["frameTree"], None)
        await channel._hear()
        return channel

    async def _hear(self) -> None:
        """Hear the page's ``Runtime`` events, the binding in every document (those there already too), each told
        to send what it kept. The contexts first: the browser reports each before a call of the binding in it."""
        await asyncio.gather(self._send("Runtime.enable"), self._send("Runtime.addBinding", {"name": BINDING}))
        for context in self._contexts:
            self.send(context, _ATTACH)

    def frame_ids(self) -> list[str]:
        """The page's frames (in its renderer), the main one first."""
        return list(self._frames)

    def has(self, frame: str) -> bool:
        return frame in self._frames

    def url(self, frame: str) -> str:
        """The URL of the document the browser reports in ``frame`` ('' when it is gone)."""
        known = self._frames.get(frame)
        return known.url if known is not None else ""

    def context(self, frame: str) -> int | None:
        """The main-world context of the document in ``frame`` now (None: none reported yet, or the frame is gone)."""
        known = self._frames.get(frame)
        return known.context if known is not None else None

    def origin(self, context: int) -> str:
        """The origin of the document of ``context`` as the browser reports it (``null`` for an opaque one)."""
        origin = self._contexts.get(context, ("", "null"))[1]
        return origin if "://" in origin and not origin.startswith("://") else "null"

    async def call(self, context: int, function: str, *args: Any, wait: bool = False) -> Any:
        """What ``function`` returns (as JSON), called with ``args`` in ``context`` (``wait``: the promise it returns
        settled); raises :class:`PlaywrightError` when the context is gone or the function threw."""
        result = await self._send("Runtime.callFunctionOn", {
            "functionDeclaration": function, "executionContextId": context, "returnByValue": True,
            "awaitPromise": wait, "arguments": [{"value": arg} for arg in args]})
        if "exceptionDetails" in result:
            raise PlaywrightError("the function threw in the page")
        return result.get("result", {}).get("value")

    def _send(self, method: str, params: dict[str, Any] | None = None) -> Awaitable[Any]:
        """A CDP command of the session, past Playwright's API wrapping: as one call of its client
        (:mod:`driver.client_zone`), with no walk of its parameters or its answer."""
        return as_one_call(method, lambda: self._cdp.send(method, params, None))

    def send(self, context: int, function: str, *args: Any) -> None:
        """Call ``function`` in ``context`` without waiting for it (a context gone meanwhile drops it)."""
        _spawn(self.call(context, function, *args))

    def add_script(self, source: str) -> Callable[[], None]:
        """Evaluate ``source`` in every document the page loads from now on, before the page's own scripts (after
        the context's, whose session came first); the call returned takes it out again. The command goes out in a
        task of the loop's, started now (before any task started after this call)."""
        adding = asyncio.ensure_future(self._send("Page.addScriptToEvaluateOnNewDocument", {"source": source}))
        adding.add_done_callback(lambda f: f.cancelled() or f.exception())

        async def removed() -> None:
            identifier = (await adding)["identifier"]
            await self._send("Page.removeScriptToEvaluateOnNewDocument", {"identifier": identifier})
        return lambda: _spawn(removed())

    def _noisy(self, _event: Any) -> None:
        """A console message or an exception: past :data:`MAX_NOISE` this second, the page goes unheard awhile."""
        loop = asyncio.get_running_loop()
        if loop.time() - self._noise_since >= 1.0:
            self._noise, self._noise_since = 0, loop.time()
        self._noise += 1
        if self._noise > MAX_NOISE and self._heard:
            self._heard = False
            _spawn(self._send("Runtime.disable"))
            loop.call_later(self._quiet, self._hear_again)
            self._quiet = min(2 * self._quiet, MAX_QUIET)

    def _hear_again(self) -> None:
        self._heard = True
        _spawn(self._send("Runtime.discardConsoleEntries"))
        _spawn(self._hear())

    # -- what the browser reports ------------------------------------------------------------------

    def _seed(self, tree: dict[str, Any], parent: str | None) -> None:
        frame = tree["frame"]
        if parent is None:
            self.main = frame["id"]
        self._frames.setdefault(frame["id"], _Frame(parent, frame.get("url", "") + frame.get("urlFragment", "")))
        for child in tree.get("childFrames", ()):
            self._seed(child, frame["id"])

    def _attached(self, event: dict[str, Any]) -> None:
        self._frames.setdefault(event["frameId"], _Frame(event.get("parentFrameId"), "about:blank"))

    def _navigated(self, event: dict[str, Any]) -> None:
        """A frame's new document. Its last one is gone: while the page is heard the browser says so itself (and may
        report the new document's context first), while it is not, this is all the channel learns."""
        frame = event["frame"]
        url = frame.get("url", "") + frame.get("urlFragment", "")
        known = self._frames.get(frame["id"])
        if known is None:
            self._frames[frame["id"]] = _Frame(frame.get("parentId"), url)
            return
        known.url = url
        if not self._heard and known.context is not None:
            self._contexts.pop(known.context, None)
            self._lost(self, frame["id"], known.context)
            known.context = None

    def _moved(self, event: dict[str, Any]) -> None:
        known = self._frames.get(event["frameId"])
        if known is not None:
            known.url = event["url"]

    def _detached(self, event: dict[str, Any]) -> None:
        known = self._frames.pop(event["frameId"], None)
        if known is not None and known.context is not None:
            self._contexts.pop(known.context, None)
            self._lost(self, event["frameId"], known.context)

    def _created(self, event: dict[str, Any]) -> None:
        context = event["context"]
        data = context.get("auxData") or {}
        known = self._frames.get(data.get("frameId", ""))
        if known is None or data.get("isDefault") is not True:
            return  # an isolated world (Playwright's, an extension's): no document of the page speaks from it
        if known.context not in (None, context["id"]):  # (as it is heard again, the browser reports it anew)
            self._contexts.pop(known.context, None)
            self._lost(self, data["frameId"], known.context)
        known.context = context["id"]
        self._contexts[context["id"]] = data["frameId"], str(context.get("origin", ""))
        self._changed()

    def _destroyed(self, event: dict[str, Any]) -> None:
        frame, _ = self._contexts.pop(event["executionContextId"], (None, ""))
        if frame is not None:
            known = self._frames.get(frame)
            if known is not None and known.context == event["executionContextId"]:
                known.context = None
            self._lost(self, frame, event["executionContextId"])

    def _cleared(self, _event: Any) -> None:
        gone, self._contexts = self._contexts, {}
        for frame in self._frames.values():
            frame.context = None
        for context, (frame_id, _) in gone.items():
            self._lost(self, frame_id, context)

    def _called(self, event: dict[str, Any]) -> None:
        """A message from the document of a main-world context, as the browser says (taken in the order they came);
        one from any other context, over the bound or not JSON is dropped unread."""
        known = self._contexts.get(event.get("executionContextId", -1))
        payload = event.get("payload")
        if (known is None or event.get("name") != BINDING or not isinstance(payload, str)
                or len(payload) > MAX_MESSAGE_CHARS):
            return
        try:
            message = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return
        task = asyncio.get_running_loop().create_task(self._answer(known[0], event["executionContextId"], message))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _answer(self, frame: str, context: int, message: Any) -> None:
        """Take ``message``, and answer it in its document when it carries ``reply``: ``{"ok": true, "value"}``, or
        ``{"ok": false}`` when it is not taken."""
        try:
            outcome = {"ok": True, "value": await self._take(self, frame, context, message)}
        except NotTaken:
            outcome = {"ok": False}
        except Exception as e:  # a page's message never breaks the node's loop; what it held stays out of the log
            log.error("a site-tool message failed (%s)", type(e).__name__)
            outcome = {"ok": False}
        reply = message.get("reply") if isinstance(message, dict) else None
        if type(reply) is int:
            with contextlib.suppress(PlaywrightError):  # the document went meanwhile
                await self.call(context, _ANSWER, reply, outcome)


def _spawn(work: Awaitable[Any]) -> None:
    """Run ``work`` without waiting for it: what it raises (the page went meanwhile) is dropped."""
    task = asyncio.ensure_future(work)
    task.add_done_callback(lambda t: t.cancelled() or t.exception())
