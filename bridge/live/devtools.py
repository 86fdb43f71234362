"""A person's DevTools on a tab of this node (Live View ``mode=devtools``): one connection, its CDP relayed.

A DevTools link always controls its tab (DevTools runs script in the page): its connection holds the tab as a
Live View that controls it does, so the agents' writes wait (``tab_claimed``) until it closes or the person
presses "Done" on DevTools' page. Its messages are CDP messages (:class:`~driver.devtools.DevtoolsSession`
answers them, refusing what would step outside the tab); they cross between nodes in the same relay as the
screencast's (:class:`~bridge.live.viewer.RelayedViewer`). The audit records the connection's opening and its
end (``opened``, ``closed`` with how many methods were sent and refused), never a method's params or answer.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from bridge.live.links import DEVTOOLS_VIEW_ONLY, Control, LiveLinks, LiveRefusal
from driver.devtools import DevtoolsSession

__all__ = ["DevtoolsViewer"]

log = logging.getLogger(__name__)

Ending = tuple[str, str, int]


class DevtoolsViewer:
    """A person's DevTools connection to a tab of this node; ``closed`` is told how it went, once."""

    def __init__(self, links: LiveLinks, control: Control, page: Page, session: DevtoolsSession,
                 may_control: Callable[[], bool], closed: Callable[[Control, dict[str, Any]], None]) -> None:
        self.control = control
        self._links = links
        self._page = page
        self._session = session
        self._may_control = may_control
        """Whether its link may still control the tab (its agent's policy, as it is now)."""
        self._closed = closed
        self._done = False
        page.on("close", self._page_closed)

    def _page_closed(self, page: Page) -> None:
        self.control.end("tab_closed", f"Tab {self.control.link.tab} was closed; this Live View has ended.", 4410)

    async def start(self) -> None:
        """Attach to the tab: the front end's messages may come."""
        try:
            await self._session.start()
        except PlaywrightError as e:
            tab = self.control.link.tab
            raise LiveRefusal("tab_closed", f"Tab {tab} cannot be shown ({type(e).__name__})", 4410, 410) from e

    async def deliver(self, message: dict[str, Any]) -> None:
        """One CDP message of the front end, while the link still controls the tab (else the connection ends:
        DevTools has no view-only form)."""
        if self.control.ended.is_set():
            return
        if not self._may_control():
            self._links.withdraw(self.control)
            log.info("tab %s: a DevTools Live View ended: its agent's policy gives it no control",
                     self.control.link.tab)
            code, text, close_code, _ = DEVTOOLS_VIEW_ONLY
            self.control.end(code, text, close_code)
            return
        await self._session.handle(message)

    async def ended(self) -> Ending:
        await self.control.ended.wait()
        assert self.control.reason is not None
        return self.control.reason

    async def close(self) -> None:
        if self._done:
            return
        self._done = True
        self._page.remove_listener("close", self._page_closed)
        self._links.release(self.control)
        self.control.ended.set()
        await self._session.stop()
        reason = self.control.reason[0] if self.control.reason is not None else "viewer_gone"
        self._closed(self.control, {"mode": "devtools", "reason": reason, "sent": self._session.sent,
                                    "refused": self._session.refused})
