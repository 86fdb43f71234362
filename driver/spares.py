"""Spare windows: one blank window kept open and warm in each browser context that opens tabs.

A tab's own window costs Chromium far more than a tab in an existing one: measured here, about
120 ms more to open a window, load a page and fill its first field (the window's compositor warms
up on its first page). A ``newTab`` with a URL therefore takes the spare window of its context when
one is ready, and once its page has loaded a new spare is made in the background for the next one,
while the browser is idle (made beside a command, it slowed the command down). One-shot sessions
get none: their context ends with their call. At most :data:`SPARE_LIMIT` spares are kept in the
whole browser (a window costs memory; many idle agents must not pay one each): when there are as
many, a context gets one only in place of a spare unused for :data:`SPARE_STALE` seconds, so that
agents taking turns do not close and make windows for one another in vain.
A context closing closes its spare with it, and drops the one on its way (its page never shows up);
a spare is no tab: it has no id, no actor, and no listing shows it.

A spare is made with ``Target.createTarget`` on a URL no one else can name (``about:blank#`` and a
random marker): the registry's page listener hands the page with that URL over here instead of
naming it. A spare that does not show up in time is closed again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import secrets
from collections.abc import Iterator
from dataclasses import dataclass

from playwright.async_api import CDPSession, Page
from playwright.async_api import Error as PlaywrightError

__all__ = ["IDLE", "SPARE_LIMIT", "SPARE_STALE", "SPARE_TIMEOUT", "Spare", "SpareWindows", "close_soon"]

log = logging.getLogger(__name__)

SPARE_LIMIT = 2
"""Spare windows kept (ready or on their way) in one browser, at most."""

SPARE_STALE = 60.0
"""Seconds after which an unused spare may be closed to make one for another context."""

IDLE = 0.1
"""Seconds without a command after which the browser is idle, and spares are made."""

SPARE_TIMEOUT = 30.0
"""Seconds a spare window has to open before its attempt is given up (and its window closed)."""

Spare = tuple[Page, str]
"""A spare window's page and its CDP target id."""


@dataclass(frozen=True)
class _Ready:
    """A ready spare window, and when (loop time) it was made."""

    page: Page
    target: str
    made: float


class SpareWindows:
    """The spare window of each browser context, by the context's CDP id (on the browser's loop).

    Spares are made one at a time, and only while the browser is idle (no command has run for
    :data:`IDLE` seconds): a window being made holds up Chromium, and the next command of an agent
    would wait for it (measured: a first fill 60 -> 150 ms). Agents' calls are apart by the time
    their model takes, when the spare is made.
    """

    def __init__(self) -> None:
        self._ready: collections.OrderedDict[str, _Ready] = collections.OrderedDict()
        """The ready spare of each context, the oldest first."""
        self._wanted: collections.OrderedDict[str, CDPSession] = collections.OrderedDict()
        """The contexts whose spare is to be made (being made included), the oldest first."""
        self._expected: dict[str, tuple[str, asyncio.Future[Page | None]]] = {}
        """The marker URL of each spare being made: its context, and the future its page (None: dropped)
        resolves."""
        self._maker: asyncio.Task[None] | None = None
        self._running = 0
        """Commands running in the browser."""
        self._last_ran = 0.0
        """When (loop time) the browser last ran a command."""

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """A command runs in the browser: spares wait until it is idle again."""
        self._running += 1
        try:
            yield
        finally:
            self._running -= 1
            self._last_ran = asyncio.get_running_loop().time()

    def claims(self, page: Page) -> bool:
        """Whether ``page``, just appeared, is a spare being made (so it is not named a tab)."""
        _context_id, appeared = self._expected.pop(page.url, (None, None))
        if appeared is None:
            return False
        if appeared.done():  # dropped: its context is closing
            close_soon(page)
        else:
            appeared.set_result(page)
        return True

    def ready(self, context_id: str) -> bool:
        """Whether the context has a spare window ready."""
        spare = self._ready.get(context_id)
        return spare is not None and not spare.page.is_closed()

    def take(self, context_id: str) -> Spare | None:
        """The ready spare window of a context, now no longer a spare; None when it has none."""
        spare = self._ready.pop(context_id, None)
        if spare is None or spare.page.is_closed():
            return None
        return spare.page, spare.target

    def drop(self, context_id: str) -> None:
        """Forget the context's spare, ready or on its way: the context is closing, and its windows with it."""
        self._ready.pop(context_id, None)
        self._wanted.pop(context_id, None)
        for owner, appeared in list(self._expected.values()):
            if owner == context_id and not appeared.done():
                appeared.set_result(None)

    def refill(self, cdp: CDPSession, context_id: str) -> None:
        """Make the context's spare window once the browser is idle, unless it has one or one is on its way
        (with :data:`SPARE_LIMIT` already, only in place of one unused for :data:`SPARE_STALE` seconds)."""
        if context_id in self._ready or context_id in self._wanted:
            return
        loop = asyncio.get_running_loop()
        if len(self._ready) + len(self._wanted) >= SPARE_LIMIT:
            stale = next(iter(self._ready.values()), None)
            if stale is None or loop.time() - stale.made < SPARE_STALE:
                return
            self._ready.popitem(last=False)
            close_soon(stale.page)
        self._wanted[context_id] = cdp
        if self._maker is None or self._maker.done():
            self._maker = loop.create_task(self._make_wanted())

    def reset(self) -> None:
        """Forget every spare (the browser is gone, and its windows with it)."""
        if self._maker is not None:
            self._maker.cancel()
        self._maker = None
        self._wanted.clear()
        self._ready.clear()
        self._expected.clear()

    async def _make_wanted(self) -> None:
        while self._wanted:
            await self.idle()
            if not self._wanted:  # dropped while the browser was busy
                return
            context_id, cdp = next(iter(self._wanted.items()))
            try:
                await self._make(cdp, context_id)
            finally:
                self._wanted.pop(context_id, None)

    async def idle(self) -> None:
        """Return once no command has run in the browser for :data:`IDLE` seconds."""
        loop = asyncio.get_running_loop()
        while (quiet := loop.time() - self._last_ran) < IDLE or self._running:
            await asyncio.sleep(max(IDLE - quiet, IDLE / 5))

    async def _make(self, cdp: CDPSession, context_id: str) -> None:
        marker = f"about:blank#kitsune-spare-{secrets.token_hex(16)}"
        appeared: asyncio.Future[Page | None] = asyncio.get_running_loop().create_future()
        self._expected[marker] = (context_id, appeared)
        target: str | None = None
        try:
            created = await asyncio.wait_for(cdp.send("Target.createTarget", {
                "url": marker, "newWindow": True, "background": False, "browserContextId": context_id,
            }), SPARE_TIMEOUT)
            target = str(created["targetId"])
            page = await asyncio.wait_for(asyncio.shield(appeared), SPARE_TIMEOUT)
        except (PlaywrightError, TimeoutError) as e:
            log.info("a spare window did not open (%s)", type(e).__name__)
            if target is not None:  # it may still open, or have opened as a tab: closing it forgets it
                with contextlib.suppress(PlaywrightError, TimeoutError):
                    await asyncio.wait_for(cdp.send("Target.closeTarget", {"targetId": target}), 2.0)
            return
        finally:
            self._expected.pop(marker, None)
        if page is None or context_id not in self._wanted:  # dropped on its way, or as its page showed up
            if page is not None:
                close_soon(page)
            return
        self._ready[context_id] = _Ready(page, target, asyncio.get_running_loop().time())
        page.on("close", lambda _page: self._closed(context_id, page))

    def _closed(self, context_id: str, page: Page) -> None:
        spare = self._ready.get(context_id)
        if spare is not None and spare.page is page:
            del self._ready[context_id]


def close_soon(page: Page) -> None:
    """Close ``page`` in the background (it may be closing already: nothing is left to report)."""
    closing = asyncio.get_running_loop().create_task(page.close())
    closing.add_done_callback(lambda t: t.cancelled() or t.exception())
