"""ChromiumBrowser: one Chromium, its tabs, and the actions that run on them, as the node sees it.

:meth:`ChromiumBrowser.execute` runs one action (never a block) and answers an outcome of the
step engine, never an exception:

- ``Done`` when the page did what was asked (``warning`` for what deserves a look);
- ``Failed`` when nothing reached the page (element missing or not actionable in time, invalid
  selector, closed tab), retryable for transient causes; reads always end ``Failed``;
- ``Unknown`` when a write was sent and its effect is not known: it timed out after it was
  sent (``timeout``), its tab closed or crashed while it ran (``tab_closed``), the page
  navigated away under it (``navigated``), or agent JavaScript threw half-way (``js_error``).
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

from playwright.async_api import CDPSession, Page
from playwright.async_api import Error as PlaywrightError

from core.url_policy import UrlPolicy
from driver.actions import ACTIONS, DEADLINE_BOUND
from driver.cdp_tabs import CdpTabs
from driver.client_zone import as_one_call
from driver.devtools import DevtoolsSession, FrontEnd, FrontEndFile
from driver.errors import Stop, closed, is_closed_error, stopped, timed_out, translate
from driver.guard import UrlGuard
from driver.launch import Chromium
from driver.navigation import goto
from driver.page_js import NEEDS_USER
from driver.process import FirstLaunch
from driver.proxy import Endpoint
from driver.quotas import Quotas
from driver.reads import evaluate_settled
from driver.refs import RefBook
from driver.run import Action, Caller, Result, Run
from driver.sessions import Session, Sessions
from driver.site_tools import SiteTools
from driver.snapshots import resolve_ref
from driver.tabs import TabRegistry
from messages.commands import (
    ENGINE_STEPS,
    CloseTab,
    Command,
    GetTabs,
    KeepSession,
    NewTab,
    ResetSession,
    Snapshot,
    is_write,
    own_references,
)
from messages.errors import KitsuneError
from messages.results import Done, Failed, Failure, Outcome, Unknown

__all__ = ["ChromiumBrowser"]

_OPEN_TAB_TIMEOUT = 30.0
_GRACE = 1.0
"""Seconds past a command's timeout before the backstop cancels it (Playwright's own timeouts fire first)."""
_HINT_SETTLE = 5.0
"""Seconds a needs-user read waits for a loading page before it fails."""
_NOBODY = Caller()
"""The caller of the driver's own steps (opening a tab's first page)."""
_RUNS = frozenset((*ACTIONS, NewTab, GetTabs, KeepSession, ResetSession))
"""The commands the browser runs (its actions, and the node's own: tabs, sessions)."""


async def _perform(run: Run, action: Action) -> Outcome:
    """Run an action within the command's time (and a backstop, a grace past it: none for ``DEADLINE_BOUND``
    actions, which have no Playwright timeout to fire first), its Playwright calls as one call of Playwright's
    client (:mod:`driver.client_zone`); every failure as an outcome."""
    try:
        async with asyncio.timeout(run.remaining() + (0.0 if type(run.command) in DEADLINE_BOUND else _GRACE)):
            value, warning = await as_one_call(run.command.action, lambda: _act(run, action))
    except Stop as stop:
        return stopped(run, stop)
    except TimeoutError:
        return timed_out(run, run.gone())
    except PlaywrightError as e:
        return translate(run, e, run.gone())
    return Done(value, warning)


async def _act(run: Run, action: Action) -> Result:
    """The action; a command that names a ``ref`` (not a snapshot's own) has it resolved first: ``stale_ref``,
    with nothing sent, when it is not this session's ref of the tab's current document."""
    ref = getattr(run.command, "ref", None)
    if isinstance(ref, str) and not isinstance(run.command, Snapshot):
        run.target = await resolve_ref(run, ref)
    return await action(run)


class ChromiumBrowser:
    """One Chromium (its user context and the agents' sessions), its tabs, and the actions that run on them.

    Everything runs on the asyncio loop that called :meth:`start`. It launches its Chromium at :meth:`start` (or
    :meth:`launch_early`), or takes over ``first``, a launch begun before it was made (with its own executable and
    headless mode).
    """

    def __init__(self, *, executable: Path | None = None, downloads_dir: Path | None = None,
                 headless: bool = True, first: FirstLaunch | None = None) -> None:
        self.downloads_dir = downloads_dir
        """Where downloads are saved; a temporary directory (removed at stop) when None."""
        self.next_tab_id: Callable[[], int] = itertools.count(1).__next__
        """Names each new page, popups included, at once (the node gives ids unique in its fleet)."""
        self._own_downloads = downloads_dir is None
        self._guard = first.guard if first is not None else UrlGuard()
        self._tabs = TabRegistry(lambda: self.next_tab_id())  # noqa: PLW0108 - the node replaces next_tab_id
        self.site_tools = SiteTools(self._tabs.tab_of)
        """The WebMCP tools its pages declare, and the continuations of the calls of them."""
        self._chromium = Chromium(self._guard, self._tabs, self.site_tools, executable=executable, headless=headless,
                                 first=first)
        self.sessions = Sessions(self._chromium, self._tabs)
        """The agents' sessions (browser contexts) and the tombstones of closed ones."""
        self.spares = self._tabs.spares
        """The spare windows made ahead for the contexts' next tabs."""
        self.quotas = Quotas(self._tabs.held, self.sessions.table.held)
        """Each agent's tabs and sessions, the node's caps and the fair share: checked before a tab opens."""
        self._tabs.agent_of = lambda page: session.agent if (session := self.sessions.of_page(page)) else None
        self._tabs.admits_page = self.quotas.admits_page
        self.refs = RefBook()
        """The refs each session holds on each tab (``snapshot``)."""
        self.cdp = CdpTabs(lambda: self._chromium.executable)
        """Each tab's own CDP session and events, the protocol's description, the CDP methods sent (metrics)."""
        self.devtools = FrontEnd(lambda: self._chromium.bare_context(_OPEN_TAB_TIMEOUT))
        """Chromium's bundled DevTools front end, read from this browser (Live View ``mode=devtools``)."""
        self.cdp.debug_log_of = lambda page: session.debug_log if (session := self.sessions.of_page(page)) else None

    @property
    def url_policy(self) -> Callable[[str | None], UrlPolicy] | None:
        """An agent's URL lists (the node's for None) that every request of every page of its sessions must
        pass (see :class:`UrlGuard`); None lets everything through. Set it before :meth:`start`."""
        return self._guard.url_policy

    @url_policy.setter
    def url_policy(self, policy: Callable[[str | None], UrlPolicy] | None) -> None:
        self._guard.url_policy = policy
        self.site_tools.url_policy = policy

    @property
    def on_navigated(self) -> Callable[[int, str], None]:
        """Told (on the loop) of each navigation of a tab's main frame: the tab and its new URL."""
        return self._tabs.navigated

    @on_navigated.setter
    def on_navigated(self, listener: Callable[[int, str], None]) -> None:
        self._tabs.navigated = listener

    @property
    def own_endpoints(self) -> set[Endpoint]:
        """The node's listening endpoints (its HTTP API, NATS), which the proxy refuses."""
        return self._guard.own_endpoints

    @own_endpoints.setter
    def own_endpoints(self, endpoints: set[Endpoint]) -> None:
        self._guard.own_endpoints = endpoints

    @property
    def restarts(self) -> int:
        """How many times the browser died and was restarted."""
        return self._chromium.restarts

    @property
    def running(self) -> bool:
        """Whether Chromium is up (it is restarted when it dies)."""
        return self._chromium.running

    # -- lifecycle -----------------------------------------------------------------------------

    def launch_early(self) -> None:
        """Begin launching Chromium in the background (on the running loop), before the node is built:
        :meth:`start` finishes it (see ``Chromium.launch_early``)."""
        self._chromium.launch_early()

    def context_ahead(self, agent: str) -> None:
        """Make ``agent``'s next session (its context, and a spare window in it) ahead, in the background, once
        started (see ``Chromium.context_ahead``)."""
        self._chromium.context_ahead(agent)

    async def ahead_made(self, agent: str) -> bool:
        """Wait for the context made ahead for ``agent``'s next session, if any; whether one is ready."""
        return await self._chromium.ahead_made(agent)

    def ahead_ids(self, agent: str | None = None) -> frozenset[str]:
        """The CDP ids of the contexts made ahead and ready, not yet a session's (``agent``'s, or every agent's)."""
        return self._chromium.ahead_ids(agent)

    async def start(self) -> None:
        """Launch Chromium; raises :class:`KitsuneError` (``browser_unavailable``) when it cannot."""
        if self._chromium.started:
            return
        if self.downloads_dir is None:
            self.downloads_dir = Path(tempfile.mkdtemp(prefix="kitsune-downloads-"))
        self.downloads_dir.mkdir(parents=True, exist_ok=True)
        try:
            await self._chromium.start()
        except BaseException:
            await self.stop()
            raise

    async def stop(self) -> None:
        """Close every tab and the browser; no Chromium process (nor site-tool checker) is left."""
        await self.devtools.close()
        await self._chromium.stop()
        await self.site_tools.checker.close()
        if self._own_downloads and self.downloads_dir is not None:
            shutil.rmtree(self.downloads_dir, ignore_errors=True)
            self.downloads_dir = None

    # -- tabs ----------------------------------------------------------------------------------

    async def new_tab(self, url: str | None = None) -> int:
        """Open a tab in its own window (at ``url`` when given); its id.

        Raises :class:`KitsuneError` when the tab cannot be opened or ``url`` cannot be loaded.
        """
        outcome = await self.execute(NewTab(url=url), None, _OPEN_TAB_TIMEOUT)
        if isinstance(outcome, Done):
            return int(outcome.value["tabId"])
        failure = outcome.failure
        raise KitsuneError(failure.code, failure.error, retryable=failure.retryable, state=failure.state)

    async def close_tab(self, tab_id: int) -> None:
        """Close a tab now (a command running on it ends ``tab_closed``); closing a closed tab does nothing."""
        await self._tabs.close(tab_id)
        self.refs.forget(tab_id)
        self.cdp.forget(tab_id)

    def tab_ids(self) -> frozenset[int]:
        """Ids of the open tabs (safe to call from any thread)."""
        return self._tabs.ids()

    async def target_of(self, tab_id: int) -> str | None:
        """The CDP target id of an open tab (its stable handle's ``target:<id>``)."""
        return await self._tabs.target_of(tab_id)

    def page(self, tab_id: int) -> Page:
        """The Playwright page of an open tab; raises :class:`KitsuneError` (``tab_closed``)."""
        return self._tabs.page(tab_id)

    async def devtools_session(self, tab_id: int, send: Callable[[dict[str, Any]], Awaitable[None]], *,
                               limit: int | None = None) -> DevtoolsSession:
        """A person's DevTools on a tab (not started): every event of the browser's protocol is relayed."""
        page = self._tabs.page(tab_id)
        browser = page.context.browser
        assert browser is not None  # every context is made by Browser.new_context
        protocol = await self.cdp.protocols.of(browser.version)
        events = [f"{domain['name']}.{event['name']}" for domain in protocol for event in domain["events"]]
        return DevtoolsSession(page, events, send, limit=limit)

    async def devtools_file(self, path: str) -> FrontEndFile | None:
        """A file of the DevTools front end this browser bundles (None when there is none)."""
        try:
            return await self.devtools.file(path)
        except PlaywrightError as e:
            raise KitsuneError("browser_unavailable", "The browser could not read its DevTools front end",
                               retryable=True) from e

    async def tabs(self) -> list[dict[str, Any]]:
        """The open tabs: ``[{"tabId", "url", "title", "session"}]`` in id order (the session's
        agent and name, or None for a user tab). A tab whose session has ended is not listed, even while
        its page is still closing: the session's tombstone and its tabs are never seen together."""
        described = [tab for tab in await self._tabs.describe() if self.sessions.expired(tab["tabId"]) is None]
        for tab in described:
            page = self._tabs.get(tab["tabId"])
            session = self.sessions.of_page(page) if page is not None else None
            tab["session"] = {"agent": session.agent, "name": session.name} if session is not None else None
        return described

    async def needs_user(self, tab_id: int) -> dict[str, Any]:
        """Whether the tab shows something only a person can do: ``sign_in``, ``human_check``.

        A read: it looks at the page and changes nothing. ``evidence`` says what was seen. A page that is
        loading is read once its document has loaded; one that cannot be read within
        :data:`_HINT_SETTLE` seconds raises (``navigated``; ``tab_closed``, ``browser_error``): a failed
        read never says no.
        """
        page = self.page(tab_id)
        try:
            async with asyncio.timeout(_HINT_SETTLE):
                hint = await evaluate_settled(page, NEEDS_USER, loaded=True)
        except TimeoutError:
            raise KitsuneError("navigated", f"Tab {tab_id} could not be read: its page was still loading after "
                                            f"{_HINT_SETTLE:g}s", retryable=True, state={"tabId": tab_id}) from None
        except PlaywrightError as e:
            code = "tab_closed" if is_closed_error(e) else "browser_error"
            raise KitsuneError(code, f"Tab {tab_id} could not be read", state={"tabId": tab_id}) from None
        if not isinstance(hint, dict):
            return {"needs_user": False, "reason": None, "evidence": None}
        return {"needs_user": True, "reason": hint.get("reason"), "evidence": hint.get("evidence")}

    # -- execute -------------------------------------------------------------------------------

    async def execute(self, command: Command, tab_id: int | None, timeout: float, *,
                      pause: Callable[[float], Awaitable[None]] | None = None,
                      agent: str | None = None, call: int | None = None, path: str | None = None,
                      within: float | None = None, session: str | None = None, as_read: bool = False) -> Outcome:
        """Run one action (never a block) on a tab within ``timeout`` seconds (a tab's current tab is its agent's,
        which the node keeps: here a command for a tab that names none finds no tab).

        Never raises for what happens in the browser: every failure is an outcome. Actions on one
        tab are not serialized here: its tab actor runs its writes one at a time (``pause`` is
        awaited between the polls of a ``waitForResult``), and reads beside them. A ``newTab`` opens
        in a session of ``agent`` (a user tab when None) for ``call``; ``path`` is the step's (site tools' events).
        ``within``, when given, is the time it has (less than ``timeout`` after its way to this node); its
        messages name ``timeout``, the step's own ("Command timed out after 30s"). ``session`` is the agent's
        session (``X-Kitsune-Session``): refs belong to (agent, session). ``as_read``: run only as a read
        (a ``callSiteTool`` of a tool its page declares ``readOnlyHint``; else ``site_tool_writes``, nothing sent).
        """
        try:
            with self._tabs.spares.busy():
                ready = self._ready(command, tab_id, float(timeout), pause or asyncio.sleep,
                                    Caller(agent, call, path, session, as_read),
                                    float(timeout if within is None else within))
                if not isinstance(ready, Run):
                    return await ready if isinstance(ready, Coroutine) else ready
                with self.sessions.using(self.sessions.of_page(ready.page)):
                    return await _perform(ready, ACTIONS[type(command)])
        except KitsuneError as e:
            return Failed(Failure.of(e))
        except Exception as e:  # a bug here must still answer as an outcome, never as an exception
            sent = is_write(command) and not as_read
            failure = Failure(f"{command.action}: internal driver error ({type(e).__name__})", "internal", False)
            return Unknown(failure) if sent else Failed(failure)

    def _ready(self, command: Command, tab_id: int | None, timeout: float, pause: Callable[[float], Awaitable[None]],
               caller: Caller, within: float) -> Run | Outcome | Coroutine[Any, Any, Outcome]:
        """What ``execute`` does with ``command``: the run of an action on its tab, the outcome when it cannot run,
        or the work of a command that is not an action on a tab (``newTab``, ``getTabs``...). Not a coroutine:
        one coroutine less a step."""
        action = command.action
        if type(command) not in _RUNS or isinstance(command, ENGINE_STEPS):
            return Failed(Failure(f"{action} is not an action the browser runs", "invalid_call", False))
        if own_references(command):
            return Failed(Failure(f"{action}: its ${{$N...}} references are not resolved", "invalid_call", False))
        if within <= 0:
            return Failed(Failure(f"Command timed out after {timeout:g}s", "timeout", True))
        if isinstance(command, NewTab):
            return self._new_tab(command, timeout, caller.agent, caller.call, within)
        if isinstance(command, GetTabs):
            return self._listed()
        if isinstance(command, ResetSession):
            return self._reset_session(command, caller, within)
        tab = tab_id
        if tab is None:
            return Failed(Failure(f"{action}: no tab named; open one or name a tabId", "no_tab", False))
        page = self._tabs.get(tab)
        if page is None or page.is_closed():
            expired = self.sessions.expired(tab)
            return Failed(Failure.of(expired.error()) if expired is not None else closed(tab))
        if isinstance(command, KeepSession):
            self.sessions.promote(page, caller.agent, command.name, caller.call)
            return Done({"session": command.name, "tabId": tab})
        if isinstance(command, CloseTab) and command.forget:
            return self._forget_session(page, tab, caller.agent)
        deadline = asyncio.get_running_loop().time() + within
        return self._run(command, tab, page, timeout, deadline, is_write(command) and not caller.as_read, pause=pause,
                         caller=caller)

    async def _listed(self) -> Outcome:
        return Done({"tabs": await self.tabs()})

    async def _forget_session(self, page: Page, tab: int, agent: str | None) -> Outcome:
        """``closeTab`` with ``forget``: the tab's reuse session closed for good, as ``DELETE /api/sessions/{name}``
        closes it (its tabs close, its stored state is deleted, its tombstone stays)."""
        session = self.sessions.of_page(page)
        if agent is None or session is None or session.agent != agent or session.mode == "one-shot":
            return Failed(Failure.of(KitsuneError("invalid_parameter", f"closeTab: forget closes a reuse session of "
                                                  f"yours; tab {tab} is in none", state={"param": "forget"})))
        return Done({"tabId": tab, **await self.sessions.close_named(agent, session.name)})

    async def _reset_session(self, command: ResetSession, caller: Caller, within: float) -> Outcome:
        if caller.agent is None:
            return Failed(Failure("resetSession: a session is an agent's; this call has no agent", "invalid_call",
                                  False))
        return Done(await self.sessions.reset(caller.agent, command.name, caller.call, within))

    def _run(self, command: Command, tab: int, page: Page, timeout: float, deadline: float, write: bool, *,
             sent: bool = False, pause: Callable[[float], Awaitable[None]] = asyncio.sleep,
             caller: Caller = _NOBODY) -> Run:
        return Run(command, tab, timeout, write, sent, page=page, deadline=deadline, tabs=self._tabs,
                   guard=self._guard, downloads=self.downloads_dir, pause=pause, site_tools=self.site_tools,
                   caller=caller, refs=self.refs, cdp=self.cdp)

    async def _new_tab(self, command: NewTab, timeout: float, agent: str | None, call: int | None,
                       within: float) -> Outcome:
        deadline = asyncio.get_running_loop().time() + within
        session = None
        said: dict[str, Any] = {}
        try:
            if agent is None and (command.session is not None or command.persist):
                raise KitsuneError("invalid_parameter", "newTab: a session is an agent's; this tab has no agent")
            new_session = agent is not None and self.sessions.is_new(agent, command.session, call)
            with self.quotas.reserving(agent, new_session=new_session, movable=new_session and command.node is None):
                cdp, context_id = await self._chromium.ready(within)
                if agent is not None:
                    session, said = await self.sessions.open_for(agent, command.session, call, within,
                                                                 command.persist)
                    context_id = session.context_id
                with self.sessions.using(session):
                    return await self._open_tab(command, cdp, context_id, session, timeout, deadline, said)
        except KitsuneError as e:
            return Failed(Failure.of(e))

    async def _open_tab(self, command: NewTab, cdp: CDPSession, context_id: str, session: Session | None,
                        timeout: float, deadline: float, said: dict[str, Any]) -> Outcome:
        """Open the tab of a ``newTab`` in the context ``context_id`` (``session``'s, or the user context's);
        its answer carries what ``said`` of the session's persistence."""
        one_shot = session is not None and session.mode == "one-shot"  # its context ends with its call
        tab = await self._tabs.open_window(cdp, context_id, timeout, deadline,
                                           spare=command.url is not None and not one_shot)
        if not isinstance(tab, int):
            return tab
        page = self._tabs.get(tab)
        if page is None:
            return Unknown(Failure(f"newTab: tab {tab} closed as it opened", "tab_closed", False, {"tabId": tab}))
        named = {"session": session.name, **said} if session is not None else {}
        await self.site_tools.attached(page, deadline - asyncio.get_running_loop().time())
        if command.url is None:
            return Done({"tabId": tab, "url": page.url, **named})
        url = command.url
        assert isinstance(url, str)
        run = self._run(command, tab, page, timeout, deadline, True, sent=True)
        outcome = await _perform(run, lambda r: goto(r, url, "load"))
        if not one_shot:  # made once the browser is idle: made beside a command, a spare slows it down
            self._tabs.spares.refill(cdp, context_id)
        if isinstance(outcome, Done):
            return Done({"tabId": tab, "url": outcome.value["url"], **named}, outcome.warning)
        failure = outcome.failure
        if isinstance(outcome, Failed):  # the write was sent, yet nothing reached the server: no tab is left either
            await self.close_tab(tab)
            return Failed(Failure(failure.error, failure.code, failure.retryable))
        return Unknown(Failure(failure.error, failure.code, failure.retryable, {"tabId": tab}))
