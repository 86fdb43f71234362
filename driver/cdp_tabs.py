"""Each tab's own CDP session and the events it collected, for the CDP actions (:mod:`driver.cdp`).

Each tab has one CDP session of its own (not Playwright's), made at its first CDP step and kept while the page
lives: node ids, enabled domains and overrides belong to it. Its events are kept in memory only, bounded per tab
in count and bytes (the oldest dropped and counted); they may hold what a page sends (headers, console text), so
they never enter a log, an event or an exception.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from playwright.async_api import CDPSession, Page

from driver.cdp_protocol import ProtocolBook
from driver.debug_log import DebugLog
from messages.cdp_methods import EventDomain, domain_label

__all__ = ["MAX_EVENT_BYTES", "MAX_EVENTS", "CdpTabs", "TabSession"]

MAX_EVENTS = 1000
"""Events a tab keeps between two reads at most."""
MAX_EVENT_BYTES = 512 * 1024
"""Bytes of JSON of the events a tab keeps between two reads at most."""


@dataclass(slots=True)
class _Events:
    """A tab's collected events, oldest first, within :data:`MAX_EVENTS` and :data:`MAX_EVENT_BYTES`."""

    kept: collections.deque[tuple[dict[str, Any], int]] = field(default_factory=collections.deque)
    size: int = 0
    dropped: int = 0

    def add(self, method: str, params: Any) -> None:
        event = {"method": method, "params": params}
        size = len(orjson.dumps(event, default=str))
        if size > MAX_EVENT_BYTES:
            self.dropped += 1
            return
        self.kept.append((event, size))
        self.size += size
        while len(self.kept) > MAX_EVENTS or self.size > MAX_EVENT_BYTES:
            self.size -= self.kept.popleft()[1]
            self.dropped += 1

    def take(self) -> tuple[list[dict[str, Any]], int]:
        """The events since the last take and how many were dropped meanwhile; both start again."""
        events, dropped = [event for event, _ in self.kept], self.dropped
        self.kept.clear()
        self.size = self.dropped = 0
        return events, dropped


@dataclass(slots=True)
class TabSession:
    """One tab's CDP session, the domains whose events it collects, and those events."""

    page: Page
    session: CDPSession
    enabled: list[EventDomain] = field(default_factory=list)
    events: _Events = field(default_factory=_Events)
    collector: str | None = None
    """The agent the events are collected for: the tab's owner (the tab's node admits no other's ``cdpEvents``)."""

    def events_of(self, agent: str | None) -> _Events:
        """The events collected for ``agent``: those of another (an owner before a takeover) are dropped first."""
        if agent != self.collector:
            self.collector, self.events = agent, _Events()
        return self.events


class CdpTabs:
    """Each tab's own CDP session and events, the protocol's description, and the methods sent (used on the loop)."""

    def __init__(self, executable: Callable[[], Path | None]) -> None:
        self._tabs: dict[int, TabSession] = {}
        self.protocols = ProtocolBook(executable)
        self.sent: collections.Counter[str] = collections.Counter()
        """Methods sent, by domain as a metric label names it (``messages.cdp_methods.domain_label``)."""
        self.debug_log_of: Callable[[Page], DebugLog | None] = lambda page: None
        """The debug log of the session a page lives in (None: a user tab's, which has none)."""

    async def of(self, tab: int, page: Page) -> TabSession:
        """``tab``'s session, made at its first use (again when the tab's page is another)."""
        found = self._tabs.get(tab)
        if found is None or found.page is not page:
            found = self._tabs[tab] = TabSession(page, await page.context.new_cdp_session(page))
            page.once("close", lambda _page: self.forget(tab))
        return found

    def forget(self, tab: int) -> None:
        """A tab closed: its session and its events go."""
        self._tabs.pop(tab, None)

    async def send(self, tab: TabSession, method: str, params: Mapping[str, Any]) -> Any:
        self.sent[domain_label(method)] += 1
        return await tab.session.send(method, dict(params))
