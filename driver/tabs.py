"""The tab registry: tab ids, their pages and windows, and their CDP target ids.

Tabs have small integer ids (from the ``name`` given, never reused); pages the site opens itself
(``window.open``, ``target=_blank``) get ids too, the moment they appear. A tab that closes or
crashes is forgotten at once. Every tab gets a window of its own (CDP ``Target.createTarget`` with
``newWindow``): in one window only the front tab renders, and Playwright's actionability checks on
a background tab wait for animation frames that never come (DESIGN.md, Browser). A window made
ahead of time (:mod:`.spares`) serves a ``newTab`` with a URL when its context has one ready.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from playwright.async_api import BrowserContext, CDPSession, Frame, Page
from playwright.async_api import Error as PlaywrightError

from core.quotas import Held
from driver.spares import SpareWindows, close_soon
from messages.errors import KitsuneError
from messages.results import Failed, Failure, Unknown

__all__ = ["CLOSE_WAIT", "TabRegistry"]

log = logging.getLogger(__name__)

CLOSE_WAIT = 10.0
"""Seconds a closing tab's page has to say it closed."""


class TabRegistry:
    """The open tabs of every browser context: id -> page, page -> id, id -> CDP target id."""

    def __init__(self, name: Callable[[], int]) -> None:
        self.name = name
        """Names each new page, popups included, at once."""
        self.context: BrowserContext | None = None
        """The browser context of the user tabs (None while the browser is down)."""
        self._pages: dict[int, Page] = {}
        self._navigations: dict[int, int] = {}
        self._open: frozenset[int] = frozenset()  # a snapshot of the keys of _pages, safe to read from any thread
        self._page_tabs: dict[int, int] = {}  # id(page) -> tab id
        self._target_ids: dict[int, str] = {}  # tab id -> CDP target id
        self._page_added = asyncio.Event()
        self.spares = SpareWindows()
        """The spare window of each context that opens tabs."""
        self.held = Held()
        """The tabs each agent holds (``driver.quotas``), as they appear and go."""
        self.agent_of: Callable[[Page], str | None] = lambda page: None
        """The agent whose session a page lives in (None: a user tab)."""
        self.admits_page: Callable[[str | None], bool] = lambda agent: True
        """Whether a page that appeared in an agent's session may stay (a popup past a quota may not)."""
        self._agents: dict[int, str | None] = {}  # tab id -> the agent it counts against
        self.navigated: Callable[[int, str], None] = lambda tab, url: None
        """Told (on the loop) of each navigation of a tab's main frame: the tab and its new URL."""
        self.page_gone: Callable[[Page], None] = lambda page: None
        """Told (on the loop) of each tab's page forgotten, after it is."""

    def reset(self) -> None:
        """Start over (a new start of the browser): no tab, no spare window and nobody waiting for one."""
        self.forget_all()
        self._page_added = asyncio.Event()

    def on_page(self, page: Page) -> None:
        """A page appeared in the context (one we opened, or one the site opened): give it an id,
        unless it is a spare window being made."""
        if id(page) in self._page_tabs or self.spares.claims(page):
            return
        if not self.admits_page(self.agent_of(page)):  # a popup past its agent's quota: closed at once
            close_soon(page)
            return
        self._add(page)

    def _add(self, page: Page) -> int:
        """Name ``page`` a tab."""
        tab = self.name()
        self._pages[tab] = page
        self._open = frozenset(self._pages)
        self._page_tabs[id(page)] = tab
        self._agents[tab] = agent = self.agent_of(page)
        self.held.arrived(agent)
        page.on("close", lambda _page: self.forget(tab))
        page.on("crash", lambda _page: self._crashed(tab))
        page.on("framenavigated", lambda frame: self._navigated(tab, frame))
        event, self._page_added = self._page_added, asyncio.Event()
        event.set()
        return tab

    def forget(self, tab: int) -> None:
        page = self._pages.pop(tab, None)
        self._open = frozenset(self._pages)
        if page is not None:
            self._page_tabs.pop(id(page), None)
            self.held.left(self._agents.pop(tab, None))
        self._target_ids.pop(tab, None)
        self._navigations.pop(tab, None)
        if page is not None:
            self.page_gone(page)

    def _navigated(self, tab: int, frame: Frame) -> None:
        if frame.parent_frame is None:
            self._navigations[tab] = self._navigations.get(tab, 0) + 1
            try:
                self.navigated(tab, frame.url)
            except Exception as e:  # a listener's failure is no navigation's
                log.error("tab %s's navigation was not followed (%s)", tab, type(e).__name__)

    def navigations(self, tab: int) -> int:
        """How many times the tab's main frame navigated so far. Playwright tells a navigation before it answers
        any request to the page that ran after it: the same count before and after a read means it read one
        document, with no round trip to ask which."""
        return self._navigations.get(tab, 0)

    def forget_all(self) -> None:
        """Forget every tab and spare window (the browser is gone or going)."""
        for tab in list(self._pages):
            self.forget(tab)
        self.spares.reset()

    def _crashed(self, tab: int) -> None:
        page = self._pages.get(tab)
        self.forget(tab)
        if page is not None:
            close_soon(page)

    def get(self, tab: int) -> Page | None:
        """The page of a tab, or None when it is not open."""
        return self._pages.get(tab)

    def ids(self) -> frozenset[int]:
        """Ids of the open tabs (safe to call from any thread)."""
        return self._open

    def page(self, tab_id: int) -> Page:
        """The Playwright page of an open tab; raises :class:`KitsuneError` (``tab_closed``)."""
        page = self._pages.get(tab_id)
        if page is None or page.is_closed():
            raise KitsuneError("tab_closed", f"Tab {tab_id} is closed", state={"tabId": tab_id})
        return page

    def tab_of(self, page: Page) -> int | None:
        """The id of an open page, or None."""
        return self._page_tabs.get(id(page))

    def holds(self, tab: int, page: Page) -> bool:
        """Whether ``page`` is still the open page of ``tab``."""
        return not page.is_closed() and self._pages.get(tab) is page

    async def close(self, tab_id: int) -> None:
        """Close a tab now, waiting at most :data:`CLOSE_WAIT` seconds for its page to say it closed (a page
        whose renderer does not answer is forgotten all the same); closing a closed tab does nothing."""
        page = self._pages.get(tab_id)
        if page is None:
            return
        try:
            await asyncio.wait_for(page.close(), CLOSE_WAIT)
        except TimeoutError:
            log.warning("tab %d did not say it closed within %gs; forgotten", tab_id, CLOSE_WAIT)
        except PlaywrightError:
            pass
        self.forget(tab_id)

    async def describe(self) -> list[dict[str, Any]]:
        """The open tabs: ``[{"tabId", "url", "title"}]`` in id order."""

        async def describe(tab: int, page: Page) -> dict[str, Any] | None:
            try:
                title = await asyncio.wait_for(page.title(), 2.0)
            except (PlaywrightError, TimeoutError):
                title = ""
            if page.is_closed():
                return None
            return {"tabId": tab, "url": page.url, "title": title}

        found = await asyncio.gather(*(describe(tab, page) for tab, page in sorted(self._pages.items())))
        return [tab for tab in found if tab is not None]

    async def target_of(self, tab: int) -> str | None:
        """The CDP target id of an open tab (None: not open, or the browser did not say)."""
        page = self._pages.get(tab)
        return None if page is None else await self._target_id(tab, page)

    async def _target_id(self, tab: int, page: Page) -> str | None:
        if tab in self._target_ids:
            return self._target_ids[tab]
        try:  # the session stays attached (no domain enabled): it ends with its page, and a detach costs a round trip
            info = await (await page.context.new_cdp_session(page)).send("Target.getTargetInfo")
        except PlaywrightError:
            return None
        target = str(info["targetInfo"]["targetId"])
        self._target_ids[tab] = target
        return target

    async def open_window(self, cdp: CDPSession, context_id: str, timeout: float, deadline: float, *,
                          spare: bool) -> int | Failed | Unknown:
        """A new tab in a window of its own by ``deadline`` (loop time): its id, or the outcome of the
        attempt that failed (``timeout`` is the command's, for messages). With ``spare``, the context's
        spare window when it has one ready (a blank page whose URL is a marker: for a tab that is
        navigated at once)."""
        if spare:
            taken = self.spares.take(context_id)
            if taken is not None:
                page, target = taken
                tab = self._add(page)
                self._target_ids[tab] = target
                return tab
        return await self._create_window(cdp, context_id, timeout, deadline)

    async def _create_window(self, cdp: CDPSession, context_id: str, timeout: float,
                             deadline: float) -> int | Failed | Unknown:
        loop = asyncio.get_running_loop()
        try:
            created = await asyncio.wait_for(cdp.send("Target.createTarget", {
                "url": "about:blank", "newWindow": True, "background": False, "browserContextId": context_id,
            }), max(0.001, deadline - loop.time()))
        except TimeoutError:  # the browser may still open it
            return Unknown(Failure(f"Command timed out after {timeout:g}s", "timeout", False))
        except PlaywrightError:
            return Failed(Failure("newTab: the browser could not open a tab", "browser_unavailable", True))
        target = str(created["targetId"])
        while True:
            added = self._page_added
            for tab, page in sorted(self._pages.items(), reverse=True):
                if await self._target_id(tab, page) == target:
                    return tab
            left = deadline - loop.time()
            if left <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(added.wait(), left)
        try:  # take the window back, so that nothing is left of the attempt
            await asyncio.wait_for(cdp.send("Target.closeTarget", {"targetId": target}), 2.0)
        except (PlaywrightError, TimeoutError):
            return Unknown(Failure(f"Command timed out after {timeout:g}s", "timeout", False))
        return Failed(Failure(f"newTab: the new tab did not answer within {timeout:g}s; it was closed again",
                              "timeout", True))
