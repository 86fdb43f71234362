"""The CDP actions: ``cdp`` sends one method on the tab's own CDP session, ``cdpEvents`` collects and reads the
tab's events, ``cdpSpec`` describes the protocol (:mod:`driver.cdp_protocol`).

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
from typing import Any, cast

import orjson
from playwright.async_api import CDPSession, Page
from playwright.async_api import Error as PlaywrightError

from driver.cdp_protocol import ProtocolBook
from driver.errors import Stop, first_line, is_closed_error
from driver.run import Result, Run
from messages.cdp_methods import EVENT_DOMAINS, EventDomain, domain_label
from messages.commands import Cdp, CdpEvents, CdpSpec, secret_values

__all__ = ["MAX_CDP_RESULT", "MAX_EVENT_BYTES", "MAX_EVENTS", "CdpTabs", "cdp", "cdp_events", "cdp_spec"]

MAX_CDP_RESULT = 800 * 1024
"""Bytes of JSON a ``cdp`` answer may have (under NATS's 1 MB message): past it the answer is not returned."""
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
class _TabSession:
    page: Page
    session: CDPSession
    enabled: list[EventDomain] = field(default_factory=list)
    events: _Events = field(default_factory=_Events)


class CdpTabs:
    """Each tab's own CDP session and events, the protocol's description, and the methods sent (used on the loop)."""

    def __init__(self, executable: Callable[[], Path | None]) -> None:
        self._tabs: dict[int, _TabSession] = {}
        self.protocols = ProtocolBook(executable)
        self.sent: collections.Counter[str] = collections.Counter()
        """Methods sent, by domain as a metric label names it (``messages.cdp_methods.domain_label``)."""

    async def of(self, tab: int, page: Page) -> _TabSession:
        """``tab``'s session, made at its first use (again when the tab's page is another)."""
        found = self._tabs.get(tab)
        if found is None or found.page is not page:
            found = self._tabs[tab] = _TabSession(page, await page.context.new_cdp_session(page))
            page.once("close", lambda _page: self.forget(tab))
        return found

    def forget(self, tab: int) -> None:
        """A tab closed: its session and its events go."""
        self._tabs.pop(tab, None)

    async def send(self, tab: _TabSession, method: str, params: Mapping[str, Any]) -> Any:
        self.sent[domain_label(method)] += 1
        return await tab.session.send(method, dict(params))


def _tabs(run: Run) -> CdpTabs:
    assert run.cdp is not None
    return run.cdp


async def cdp(run: Run) -> Result:
    command = cast(Cdp, run.command)
    tab = await run.within(_tabs(run).of(run.tab, run.page))
    run.sent = run.write
    try:
        answer = await run.within(_tabs(run).send(tab, command.method, command.params or {}))
    except PlaywrightError as e:
        raise _refusal(command, e) from None
    size = len(orjson.dumps(answer))
    if size > MAX_CDP_RESULT:
        return {"result": None, "resultBytes": size}, (f"the answer of {command.method} is {size} bytes, over "
                                                       f"{MAX_CDP_RESULT}: not returned (ask for less)")
    return {"result": answer}, None


def _refusal(command: Cdp, error: PlaywrightError) -> Exception:
    """The browser's error answer to a method as a stop (nothing took effect), or the error itself (a closed tab)."""
    message = error.message or str(error)
    if is_closed_error(error) or "Protocol error" not in message:
        return error
    if "wasn't found" in message:
        return Stop("invalid_parameter", f"cdp: the browser has no method {command.method}; nothing was sent",
                    took_effect=False, state={"param": "method"})
    detail = first_line(message).partition("): ")[2][:200]
    if not detail or any(secret in detail for secret in secret_values(command)):
        detail = "its parameters or the page's state"
    return Stop("cdp_error", f"cdp: the browser refused {command.method}: {detail}", took_effect=False,
                state={"method": command.method})


async def cdp_events(run: Run) -> Result:
    command = cast(CdpEvents, run.command)
    tab = await run.within(_tabs(run).of(run.tab, run.page))
    for domain in command.enable:
        if domain in tab.enabled:
            continue
        source = EVENT_DOMAINS[domain]
        for event in source.events:
            tab.session.on(event, lambda params, name=event: tab.events.add(name, params))
        for method, params in source.enable:
            await run.within(_tabs(run).send(tab, method, params))
        tab.enabled.append(domain)
    if command.enable:
        return {"enabled": list(tab.enabled)}, None
    events, dropped = tab.events.take()
    return {"events": events, "dropped": dropped, "enabled": list(tab.enabled)}, None


async def cdp_spec(run: Run) -> Result:
    command = cast(CdpSpec, run.command)
    browser = run.page.context.browser
    assert browser is not None  # every context is made by Browser.new_context
    version = browser.version
    protocol = await run.within(_tabs(run).protocols.of(version))
    if command.domain is None:
        return {"browser": version, "domains": [domain["name"] for domain in protocol]}, None
    found = next((domain for domain in protocol if domain["name"] == command.domain), None)
    if found is None:
        raise Stop("invalid_parameter", f"cdpSpec: the browser has no domain {command.domain}",
                   state={"param": "domain"})
    return {"browser": version, "domain": found}, None
