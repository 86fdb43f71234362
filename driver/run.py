"""The run context of one action on one tab, and the waits the actions share.

An action is a plain async function from a :class:`Run` to its value and warning
(:data:`Action`); it raises :class:`~driver.errors.Stop` for a failure it names itself,
and lets Playwright's errors and timeouts through for the driver to classify.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Locator, Page
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from driver.errors import Step, Stop, absent, closed_message, never_matched, pointer_sent, unanswered, unchecked
from driver.guard import UrlGuard
from driver.site_tools.runtime import SiteTools
from driver.tabs import TabRegistry

if TYPE_CHECKING:
    from driver.cdp_tabs import CdpTabs
    from driver.refs import RefBook

__all__ = ["Action", "Caller", "Result", "Run"]

T = TypeVar("T")

_PROBE_TIMEOUT = 0.5
"""Seconds for the look after a failure (does the element exist at all?)."""


@dataclass(frozen=True, slots=True)
class Caller:
    """Whose step an action runs for (what its site tools' events and audit name)."""

    agent: str | None = None
    call: int | None = None
    path: str | None = None
    """The step's progress path in that call."""
    session: str | None = None
    """The agent's session (``X-Kitsune-Session``): whose refs a snapshot gives and a command may name."""
    as_read: bool = False
    """The step may run only as a read: a ``callSiteTool`` of a tool its page declares ``readOnlyHint``."""


@dataclass(slots=True, kw_only=True)
class Run(Step):
    """One execution of one action on one tab, with what the actions reach through it."""

    page: Page
    deadline: float
    """Loop time by which the action must be done."""
    tabs: TabRegistry
    guard: UrlGuard
    downloads: Path | None = None
    """Where downloads are saved."""
    pause: Callable[[float], Awaitable[None]] = asyncio.sleep
    """Awaited between the rounds of a write that polls (``waitForResult``): the tab actor lets its
    other writes run meanwhile."""
    site_tools: SiteTools | None = None
    """The tools the browser's pages declare (``siteTools``, ``callSiteTool``)."""
    caller: Caller = Caller()
    refs: RefBook | None = None
    """The refs each session holds on each tab (``snapshot``, and every command that names a ``ref``)."""
    cdp: CdpTabs | None = None
    """Each tab's own CDP session and events (``cdp``, ``cdpEvents``, ``cdpSpec``)."""

    @property
    def owner(self) -> tuple[str | None, str | None]:
        """Whose refs this run gives and takes: (agent, session)."""
        return self.caller.agent, self.caller.session

    def remaining(self) -> float:
        return max(0.0, self.deadline - asyncio.get_running_loop().time())

    def ms(self) -> float:
        """Milliseconds left, for Playwright (whose 0 means no timeout at all)."""
        return max(1.0, self.remaining() * 1000.0)

    def gone(self) -> bool:
        """Whether the tab closed (or is no longer this page) since the action began."""
        return not self.tabs.holds(self.tab, self.page)

    def locator(self) -> Locator:
        """The element the command's selector names."""
        assert self.selector is not None
        return self.page.locator(self.selector)

    async def within(self, awaitable: Awaitable[T]) -> T:
        """Await something without a timeout of its own (an evaluation) within the command's time."""
        async with asyncio.timeout(max(0.001, self.remaining())):  # no task of its own, unlike wait_for
            return await awaitable

    async def missing(self, locator: Locator, what: str, error: PlaywrightTimeoutError) -> Stop:
        """Why an element wait timed out (``error``): no element at all, one that never became ``what``, or one the
        wait never got to check (its time ran out on a stalled machine before the selector resolved).

        The page is asked how many elements match now (a probe a loaded page may not answer in time: then, if the
        timeout's call log shows something matched, ``what`` it was not; if nothing did, a timeout that says the
        page could not tell, never ``not_found``: on a stalled machine the wait may end before its selector is
        even resolved).
        """
        if self.gone():
            return Stop("tab_closed", closed_message(self), state={"tabId": self.tab})
        matched = not never_matched(error.message or "")
        try:
            count = await asyncio.wait_for(locator.count(), _PROBE_TIMEOUT)
        except (PlaywrightError, TimeoutError):
            if not matched:
                return unanswered(self)
            count = -1
        if count > 0 and not matched:
            return unchecked(self)
        return absent(self, count, what)

    async def ready_element(self, locator: Locator, state: str) -> None:
        """Wait until the element is ``state`` (which sends nothing); else fail, saying nothing was sent."""
        try:
            await locator.wait_for(state=state, timeout=self.ms())  # type: ignore[arg-type]
        except PlaywrightTimeoutError as e:
            raise await self.missing(locator, state, e) from None

    async def pointer_write(self, locator: Locator, action: Callable[[float], Awaitable[Any]]) -> None:
        """Run a Playwright pointer action (a click) as one call, and tell from its call log, when it
        fails, whether it was sent: one round trip instead of a trial run followed by the action.

        ``sent`` is True while it runs (a timeout of the backstop, which has no call log, is
        Unknown); a failure whose call log shows the input was never dispatched is Failed, with
        nothing sent (see :func:`~driver.errors.pointer_sent`).
        """
        self.sent = True
        try:
            await action(self.ms())
        except PlaywrightError as e:
            if pointer_sent(e.message or ""):
                raise
            self.sent = False
            if isinstance(e, PlaywrightTimeoutError):
                raise await self.missing(locator, "visible, enabled and stable", e) from None
            raise


Result = tuple[dict[str, Any], str | None]
"""What an action answers: its value, and a warning for what deserves a look (or None)."""

Action = Callable[[Run], Awaitable[Result]]
"""An action: runs one command on the run's tab."""
