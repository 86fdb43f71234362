"""Launch and restart: the Chromium process, its CDP session and its browser contexts.

Chromium is Debian's (``/usr/bin/chromium``) or the one ``KITSUNE_CHROMIUM`` names, launched
through Playwright with every connection sent through the node's proxy (:mod:`.guard`). Its first
context holds the user tabs; each session of an agent is a context of its own, whose connections
go through that agent's proxy. When it dies, its tabs and sessions are lost (commands on them end
``tab_closed``, the sessions are tombstoned) and it is launched again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from playwright.async_api import Browser, BrowserContext, CDPSession, Playwright
from playwright.async_api import Error as PlaywrightError

from driver.guard import UrlGuard
from driver.process import FirstLaunch, launch_process
from driver.site_tools import SiteTools
from driver.spares import SpareWindows
from driver.tabs import TabRegistry
from messages.errors import KitsuneError

__all__ = ["AHEAD_LIMIT", "Chromium"]

AHEAD_LIMIT = 4
"""Agents holding a context made ahead for their next session at once (an empty context each, and the spare
windows :mod:`.spares` allows)."""


Fetched = asyncio.Future[dict[str, Any] | None]
"""A persistent session's storage state being fetched (None: none is stored) while its context is made."""


class _Made(NamedTuple):
    """A browser context made, its CDP id, and whether it has the URL guard's hooks."""

    context: BrowserContext
    context_id: str
    hooked: bool


class _Ahead:
    """A context being made ahead for an agent's next session."""

    made: asyncio.Future[_Made]
    started = False
    """Past the wait for the browser to be idle: its context is being made (it is then awaited, not cancelled)."""


def _discard(ahead: _Ahead, spares: SpareWindows) -> None:
    """Give up a context made ahead: closed (its spare window with it) once made, or never made."""
    def close(made: asyncio.Future[_Made]) -> None:
        if not made.cancelled() and made.exception() is None:
            spares.drop(made.result().context_id)
            closing = asyncio.get_running_loop().create_task(made.result().context.close())
            closing.add_done_callback(lambda task: task.cancelled() or task.exception())
    if ahead.started:
        ahead.made.add_done_callback(close)
    else:
        ahead.made.cancel()


async def _load(context: BrowserContext, storage_state: dict[str, Any]) -> None:
    """Load a stored state into a fresh context: its cookies alone when it holds nothing else (what Playwright's
    ``set_storage_state`` does after clearing the cache, cookies and credentials a fresh context has none of),
    else ``set_storage_state`` (each origin's storage is written on a page of its own)."""
    if set(storage_state) <= {"cookies", "origins"} and not storage_state.get("origins"):
        await context.add_cookies(storage_state.get("cookies", []))
    else:
        await context.set_storage_state(storage_state)  # type: ignore[arg-type]


async def _filled(context: BrowserContext, storage_state: Fetched | None) -> None:
    """Load into a context just made the state fetched meanwhile (nothing when the fetch found none); what the
    fetch raised is raised."""
    state = None if storage_state is None else await storage_state
    if state is not None:
        await _load(context, state)


async def _context_ids(cdp: CDPSession) -> set[str]:
    return set((await cdp.send("Target.getBrowserContexts"))["browserContextIds"])


class Chromium:
    """One Chromium process and its browser contexts, restarted when it dies.

    Its pages go to ``tabs``; its connections go through ``guard``'s proxy and hooks.
    """

    def __init__(self, guard: UrlGuard, tabs: TabRegistry, site_tools: SiteTools, *, executable: Path | None,
                 headless: bool, first: FirstLaunch | None = None) -> None:
        self.executable = executable
        """The Chromium binary; ``driver.process.find_chromium``'s at start when None."""
        self.headless = headless
        self.restarts = 0
        """How many times the browser died and was restarted."""
        self._guard = guard
        self._tabs = tabs
        self._site_tools = site_tools
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._cdp: CDPSession | None = None
        self._context_id: str | None = None
        self._ready = asyncio.Event()
        self._failure: KitsuneError | None = None
        self._stopping = False
        self._restart_task: asyncio.Task[None] | None = None
        self._making_context = asyncio.Lock()
        self._first = first
        """The first launch, begun (:meth:`launch_early`, or by whoever made this) and not yet taken over."""
        self._started = False
        self._ahead: dict[str, _Ahead] = {}
        """The context made ahead for an agent's next session (:meth:`context_ahead`), by agent, the oldest first."""
        self._ahead_at_start: dict[str, bool] = {}
        """The agents whose context :meth:`context_ahead` asked for before the browser started (with a window or
        not): made as soon as it starts."""
        self._known: tuple[CDPSession, set[str]] | None = None
        """The browser's contexts as the last was made (and its CDP session): the next made is the one not in it."""
        self.on_lost: Callable[[], None] = lambda: None
        """Called when the browser died: every context, and every session with it, is gone."""

    @property
    def started(self) -> bool:
        return self._started

    @property
    def running(self) -> bool:
        """Whether Chromium is up (it is restarted when it dies)."""
        return self._browser is not None and self._browser.is_connected()

    def launch_early(self) -> None:
        """Begin launching Chromium (Playwright's driver, the proxy, the browser process) in the background,
        before whoever uses it is ready: :meth:`start` then only waits for it and makes the user context,
        with the URL lists given by then. A failure is :meth:`start`'s to raise; :meth:`stop` ends it."""
        if self._first is None:
            self._first = FirstLaunch(self._guard, executable=self.executable, headless=self.headless)

    async def start(self) -> None:
        """Launch Chromium (or finish :meth:`launch_early`'s launch); raises :class:`KitsuneError`
        (``browser_unavailable``) when it cannot.

        The caller stops it after a failure.
        """
        self.launch_early()
        first = self._first
        assert first is not None
        self._stopping = False
        self._tabs.reset()
        self._ready = asyncio.Event()
        browser = await first.browser
        self._first = None  # taken over: stopped as this browser from now on
        self._playwright, self.executable, self.headless = first.playwright, first.executable, first.headless
        await self._open(browser)
        self._started = True
        self._ready.set()
        asked, self._ahead_at_start = self._ahead_at_start, {}
        for agent, window in asked.items():
            self.context_ahead(agent, window=window)

    async def stop(self) -> None:
        """Close the browser and its tabs; no Chromium process is left."""
        self._stopping = True
        self._started = False
        self._ahead_at_start.clear()
        first, self._first = self._first, None
        if first is not None:  # launched early, never started: it ends (the proxy with it), and nothing else began
            await first.stop()
            self._ready.set()
            return
        self._forget_ahead()
        task, self._restart_task = self._restart_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        browser, playwright = self._browser, self._playwright
        self._browser = self._cdp = self._tabs.context = None
        self._playwright = None
        self._tabs.forget_all()
        if browser is not None:
            with contextlib.suppress(Exception):
                await browser.close()
        if playwright is not None:
            with contextlib.suppress(Exception):
                await playwright.stop()
        await self._guard.stop()
        self._ready.set()

    async def _launch(self) -> None:
        await self._open(await self._process())

    async def _process(self) -> Browser:
        """A new Chromium process, with no context of the node's yet."""
        assert self._playwright is not None and self.executable is not None
        return await launch_process(self._playwright, self.executable, self._guard, headless=self.headless)

    async def _open(self, browser: Browser) -> None:
        """The browser's CDP session and user context: it serves from now on (closed again when they fail)."""
        try:
            cdp = await browser.new_browser_cdp_session()
            context, context_id, _ = await self._new_context(browser, cdp, None)
        except BaseException as e:
            with contextlib.suppress(Exception):
                await browser.close()
            if isinstance(e, PlaywrightError):
                raise KitsuneError("browser_unavailable", "Chromium started but its browser context did not",
                                   retryable=True) from e
            raise
        browser.on("disconnected", self._on_disconnected)
        self._browser, self._tabs.context, self._cdp = browser, context, cdp
        self._context_id = context_id
        self._failure = None

    def context_ahead(self, agent: str, *, window: bool = True) -> None:
        """Make a context for ``agent``'s next session in the background once the browser is idle (and, with
        ``window``, a spare window in it): the agent's next session (its first ``newTab``, a restore) finds it
        ready (:meth:`new_context` takes it, and makes the next, windowless: the spare windows are the open
        sessions'). At most :data:`AHEAD_LIMIT` agents hold one: the oldest gives its up for a newer. Asked before
        the browser started (its launch under way), it is made as soon as the browser starts, right after the user
        context."""
        if not self._started and not self._stopping:
            self._ahead_at_start[agent] = window
            return
        if agent in self._ahead or self._browser is None or self._cdp is None:
            return
        while len(self._ahead) >= AHEAD_LIMIT:
            _discard(self._ahead.pop(next(iter(self._ahead))), self._tabs.spares)
        ahead = _Ahead()
        ahead.made = asyncio.ensure_future(self._made_ahead(self._browser, self._cdp, agent, ahead, window))
        ahead.made.add_done_callback(lambda task: task.cancelled() or task.exception())  # new_context retries
        self._ahead[agent] = ahead

    async def _made_ahead(self, browser: Browser, cdp: CDPSession, agent: str, ahead: _Ahead, window: bool) -> _Made:
        await self._tabs.spares.idle()
        ahead.started = True
        made = await self._new_context(browser, cdp, agent)
        if window:
            self._tabs.spares.refill(cdp, made.context_id)
        return made

    async def ahead_made(self, agent: str) -> bool:
        """Wait for the context made ahead for ``agent`` (:meth:`context_ahead`); whether it was made."""
        ahead = self._ahead.get(agent)
        if ahead is None:
            return False
        await asyncio.wait([ahead.made])
        return not ahead.made.cancelled() and ahead.made.exception() is None

    def ahead_ids(self, agent: str | None = None) -> frozenset[str]:
        """The CDP ids of the contexts made ahead and ready, not yet taken by a session (``agent``'s, or every
        agent's): a copy, read-only."""
        return frozenset(ahead.made.result().context_id for name, ahead in list(self._ahead.items())
                         if agent in (None, name) and ahead.made.done() and not ahead.made.cancelled()
                         and ahead.made.exception() is None)

    def _forget_ahead(self) -> None:
        for ahead in self._ahead.values():
            ahead.made.cancel()
        self._ahead.clear()

    async def new_context(self, agent: str, timeout: float,
                          storage_state: Fetched | None = None) -> tuple[BrowserContext, str]:
        """A new browser context for a session of ``agent`` (with a persistent session's ``storage_state``, fetched
        as the context is made), its connections through that agent's proxy, and its CDP id; raises
        :class:`KitsuneError` (``browser_unavailable``) when it cannot be made, and what the state's fetch raised
        (the context made is then closed). It is the one made ahead for the agent when there is one (never used
        before: a session's context is never another's), and the next is made ahead."""
        cdp, _ = await self.ready(timeout)
        with self._tabs.spares.busy():  # the next is made once the browser is idle again
            ahead = self._ahead.pop(agent, None)
            made = await self._warm(ahead, agent, storage_state) if ahead is not None else None
            if made is None:  # none made ahead, or it could not be
                assert self._browser is not None
                try:
                    made = await self._new_context(self._browser, cdp, agent, storage_state)
                except PlaywrightError as e:
                    raise KitsuneError("browser_unavailable", "The browser could not open a session",
                                       retryable=True) from e
            self.context_ahead(agent, window=False)
        return made.context, made.context_id

    async def _warm(self, ahead: _Ahead, agent: str, storage_state: Fetched | None) -> _Made | None:
        """The context made ahead, with ``storage_state`` loaded; None (and it is closed) when it could not be made
        or loaded, or when the agent's URL lists now want hooks it was made without; closed too when the state's
        fetch failed (raised). One still waiting for the browser to be idle is given up (a ``newTab`` keeps the
        browser busy)."""
        if not ahead.started or ahead.made.cancelled():
            ahead.made.cancel()
            return None
        try:
            made = await ahead.made
        except (PlaywrightError, KitsuneError):
            return None
        if made.hooked or not self._guard.hooks(agent):
            try:
                await _filled(made.context, storage_state)
                return made
            except PlaywrightError:
                pass
            except BaseException:  # the state's fetch failed: the context goes with it
                _discard(ahead, self._tabs.spares)
                raise
        _discard(ahead, self._tabs.spares)
        return None

    async def bare_context(self, timeout: float) -> BrowserContext:
        """A context of the node's own, apart from the tabs and sessions (none of its pages is a tab): DevTools'
        front end is read from one (``driver.devtools``). Its connections, if any, go through the node's proxy."""
        await self.ready(timeout)
        assert self._browser is not None
        async with self._making_context:
            self._known = None  # a context the next session's must be told from
            try:
                return await self._browser.new_context(service_workers="block")
            except PlaywrightError as e:
                raise KitsuneError("browser_unavailable", "The browser could not open a context",
                                   retryable=True) from e

    async def _new_context(self, browser: Browser, cdp: CDPSession, agent: str | None,
                           storage_state: Fetched | None = None) -> _Made:
        """A context with the node's options and hooks (the user context when ``agent`` is None), and its CDP id:
        the one context that appeared since the last made (the browser's are listed once, as the hooks are
        installed), so contexts are made one at a time. A ``storage_state`` is loaded as the hooks are installed, once
        fetched: no page of the session's is open before both are (what the fetch raised is raised, the context
        closed)."""
        async with self._making_context:
            known, proxy = await asyncio.gather(self._known_ids(cdp), self._proxy_of(agent))
            context = await browser.new_context(
                permissions=["clipboard-read", "clipboard-write"], accept_downloads=True, service_workers="block",
                proxy=proxy,  # type: ignore[arg-type]
            )
            hooked = self._guard.hooks(agent)
            try:
                ids, _, _, _ = await asyncio.gather(
                    _context_ids(cdp), self._guard.install(context, agent, hooked), self._site_tools.install(context),
                    _filled(context, storage_state))
            except BaseException:
                self._known = None
                with contextlib.suppress(PlaywrightError):
                    await context.close()
                raise
            self._known = (cdp, ids)
        created = ids - known
        if len(created) != 1:
            self._known = None
            await context.close()
            raise KitsuneError("browser_unavailable", "Could not identify the browser context of the tabs")
        context.on("page", self._tabs.on_page)
        return _Made(context, created.pop(), hooked)

    async def _known_ids(self, cdp: CDPSession) -> set[str]:
        """The browser's contexts as the last was made (listed again when not known)."""
        return self._known[1] if self._known is not None and self._known[0] is cdp else await _context_ids(cdp)

    async def _proxy_of(self, agent: str | None) -> dict[str, str] | None:
        """The proxy settings of ``agent``'s contexts (its proxy started on first use); None for the user context."""
        return None if agent is None else {"server": await self._guard.proxy_server(agent), "bypass": "<-loopback>"}

    def _on_disconnected(self, browser: Browser) -> None:
        if self._stopping or browser is not self._browser:
            return
        self._browser = self._cdp = self._tabs.context = None
        self._forget_ahead()
        self.on_lost()
        self._tabs.forget_all()
        self._ready.clear()
        self._restart_task = asyncio.get_running_loop().create_task(self._restart())

    async def _restart(self) -> None:
        error: KitsuneError | None = None
        for attempt in range(3):
            try:
                await self._launch()
            except Exception as e:  # the next attempt, or the failure new_tab reports
                error = e if isinstance(e, KitsuneError) else KitsuneError(
                    "browser_unavailable", f"Chromium did not restart ({type(e).__name__})", retryable=True)
                await asyncio.sleep(0.5 * (attempt + 1))
                continue
            self.restarts += 1
            self._ready.set()
            return
        self._failure = error or KitsuneError("browser_unavailable", "Chromium died and did not restart")
        self._ready.set()

    async def ready(self, timeout: float) -> tuple[CDPSession, str]:
        """The browser's CDP session and the id of its context, once it runs (waiting out a restart)."""
        if not self._started or self._stopping:
            raise KitsuneError("browser_unavailable", "The browser is not started")
        try:
            await asyncio.wait_for(self._ready.wait(), max(0.001, timeout))
        except TimeoutError:
            raise KitsuneError("browser_unavailable", "The browser is restarting", retryable=True) from None
        if self._tabs.context is None or self._cdp is None or self._context_id is None:
            raise self._failure or KitsuneError("browser_unavailable", "The browser is not running", retryable=True)
        return self._cdp, self._context_id
