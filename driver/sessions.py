"""Sessions: the browser contexts an agent's tabs live in (DESIGN: Agents are tenants).

A session is one Playwright browser context, with its own cookies, storage, permissions and
cache, owned by one agent; two agents never share one. Its modes:

- ``reuse``: named by the agent (``default`` when a ``newTab`` names none), made on first use and
  shared by the agent's calls until it is closed or swept;
- ``one-shot``: ``"session": "call"``, a fresh context for one call (named ``call:<N>``), closed
  when the call ends for good (:meth:`Sessions.of_call`);
- ``dynamic``: a one-shot session that ``keepSession`` promoted to a reuse session of a name.

A reuse session may be persistent (``driver.persistence``): its state is saved, and a session freed
after a save is restored by the next ``newTab`` naming it, with no tombstone in between.

Every use touches a session. A session that closes leaves a tombstone (name, mode, closed at,
why) for ``tombstone_ttl`` seconds: a request that names it, or one of its tabs, answers
``session_expired``, never a fresh browser in its place (a ``newTab`` that names no session gets a
fresh ``default`` one: it named nothing that could be expected to still hold its state). Tabs opened
without an agent (user tabs) live in the browser's first context, which is no session.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from playwright.async_api import BrowserContext, Page
from playwright.async_api import Error as PlaywrightError

from core.quotas import Held
from core.session_names import ONE_SHOT, names_one_shot, one_shot_call, one_shot_name
from driver.debug_log import DebugLog
from driver.launch import Chromium
from driver.persistence import Fetch, Persistence
from driver.tabs import TabRegistry
from messages.contract import CHECKPOINT_TTL
from messages.errors import KitsuneError

__all__ = ["CloseReason", "Session", "SessionChange", "SessionMode", "SessionTable", "Sessions", "Tombstone"]

SessionMode = Literal["reuse", "one-shot", "dynamic"]
CloseReason = Literal["closed", "swept", "call_ended", "browser_restarted"]
StoreReason = Literal["idle", "swept"]
"""Why a persistent session was saved and its context freed: its last tab closed, or the sweep."""

DEFAULT = "default"
"""The reuse session a ``newTab`` naming none opens in."""
@dataclass(slots=True, eq=False)
class Session:
    """One agent's browser context and what is known of its life."""

    agent: str
    name: str
    mode: SessionMode
    context: BrowserContext = field(repr=False)
    context_id: str
    """Its CDP ``browserContextId`` (new windows are opened in it)."""
    call: int | None
    """The call whose one-shot session it is (None for a reuse or promoted session)."""
    opened_in: int | None
    """The call that opened it (its events go to that call's step log)."""
    created: float
    """Wall-clock time it was made."""
    used: float
    """When it was last used, on the sessions' clock."""
    held: bool = False
    """Its one-shot call stopped held or unknown with a checkpoint: swept after ``max_exec_idle``."""
    in_use: int = 0
    """Actions running in it now: a session in use is never idle."""
    debug_log: DebugLog = field(default_factory=DebugLog, repr=False)
    """The last CDP methods its ``cdp`` steps sent (``GET /api/sessions/{name}/debug-log``)."""
    persist: bool = False
    """Whether its state is saved (``driver.persistence``)."""
    saved_used: float | None = None
    """Its :attr:`used` when its state was last saved (None: never saved by this node)."""

    def describe(self, tabs: list[int], now_wall: float, now: float) -> dict[str, Any]:
        return {"name": self.name, "mode": self.mode, "tabs": tabs, "created": self.created,
                "last_used": now_wall - (now - self.used), **({"persist": True} if self.persist else {})}


@dataclass(frozen=True, slots=True)
class Tombstone:
    """What is left of a closed session."""

    agent: str
    name: str
    mode: SessionMode
    closed_at: float
    """Wall-clock time it closed."""
    reason: CloseReason
    until: float
    """When it is forgotten, on the sessions' clock."""

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "mode": self.mode, "closed_at": self.closed_at, "reason": self.reason}

    def error(self) -> KitsuneError:
        """The ``session_expired`` a request naming it answers."""
        why = {"closed": "was closed", "swept": "was swept after it sat idle", "call_ended": "ended with its call",
               "browser_restarted": "was lost when the browser restarted"}[self.reason]
        return KitsuneError("session_expired", f"Session {self.name!r} {why}; open a new one",
                            state={"session": self.name, "reason": self.reason, "closed_at": self.closed_at})


@dataclass(frozen=True, slots=True)
class SessionChange:
    """A session opened, promoted, closed or swept: what the node records of it (events, audit, metrics)."""

    op: Literal["opened", "promoted", "reset", "closed", "swept", "stored"]
    agent: str
    session: str
    mode: SessionMode
    call: int | None
    """The call it is recorded in: the one that did it, or else the one that opened the session."""
    reason: CloseReason | StoreReason | Literal["stored"] | None = None
    """Why it closed, or was stored (``stored``: the metrics' single reason for either)."""
    previous: str | None = None
    """The one-shot name a promoted session had."""


class SessionTable:
    """Every session of the browser, by agent and name, and the tombstones of closed ones (on the loop)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 tombstone_ttl: float = CHECKPOINT_TTL) -> None:
        self.clock = clock
        self.wall = wall
        self.tombstone_ttl = tombstone_ttl
        """How long a tombstone is kept (at least the checkpoint TTL: a resume may name the session)."""
        self._open: dict[tuple[str, str], Session] = {}
        self._by_context: dict[int, Session] = {}  # id(context) -> session
        self._tombstones: dict[tuple[str, str], Tombstone] = {}
        self._one_shot_calls: set[int] = set()
        """The calls that have a one-shot session open."""
        self.held = Held()
        """The sessions each agent holds (``driver.quotas``)."""

    def __iter__(self) -> Iterator[Session]:
        return iter(list(self._open.values()))

    def name_for(self, agent: str, requested: str | None, call: int | None) -> str:
        """The session a ``newTab`` of ``agent`` asks for: ``default``, a reuse name, or its call's one-shot."""
        if requested is None:
            return DEFAULT
        if requested != ONE_SHOT:
            return requested
        if call is None:
            raise KitsuneError("invalid_parameter", "newTab: session \"call\" (one-shot) needs a container call")
        return one_shot_name(call)

    def find(self, agent: str, name: str) -> Session | None:
        """The open session, or None; raises ``session_expired`` for a tombstoned one."""
        self._forget_old_tombstones()
        found = self._open.get((agent, name))
        if found is not None:
            return found
        tombstone = self._tombstones.get((agent, name))
        if tombstone is not None:
            raise tombstone.error()
        return None

    def own(self, agent: str, name: str) -> Session:
        """``agent``'s open session ``name``: ``session_not_found`` when it has none (another agent's is none of
        its own), ``session_expired`` for a tombstoned one."""
        found = self.find(agent, name)
        if found is None:
            raise KitsuneError("session_not_found", f"You have no session {name!r}", state={"session": name})
        return found

    def add(self, agent: str, name: str, context: BrowserContext, context_id: str, call: int | None) -> Session:
        """Record a session just made for ``agent`` (one-shot when ``name`` is a call's)."""
        one_shot = one_shot_call(name)
        session = Session(agent, name, "one-shot" if one_shot is not None else "reuse", context, context_id,
                          call=one_shot, opened_in=call,
                          created=self.wall(), used=self.clock())
        self._open[(agent, name)] = session
        self._by_context[id(context)] = session
        self.held.arrived(agent)
        if session.call is not None:
            self._one_shot_calls.add(session.call)
        return session

    def is_open(self, agent: str, name: str) -> bool:
        return (agent, name) in self._open

    def of_context(self, context: BrowserContext) -> Session | None:
        """The session a context is (None for the user context)."""
        return self._by_context.get(id(context))

    def of_call(self, call: int) -> list[Session]:
        """The one-shot sessions of ``call`` (one per agent at most)."""
        return [s for s in self._open.values() if s.call == call] if call in self._one_shot_calls else []

    def has_one_shot(self, call: int) -> bool:
        """Whether ``call`` has a one-shot session open (safe to ask from any thread)."""
        return call in self._one_shot_calls

    def touch(self, session: Session) -> None:
        session.used = self.clock()

    def promote(self, session: Session, name: str) -> None:
        """Make a one-shot session the agent's reuse session ``name`` (``dynamic``); promoting it again
        to the same name does nothing. Raises ``session_exists`` when the name is taken, and
        ``session_not_promotable`` for a session that is not one-shot."""
        if session.name == name and session.mode == "dynamic":
            return
        if session.mode != "one-shot":
            raise KitsuneError("session_not_promotable", f"Session {session.name!r} is a {session.mode} session; only "
                               'a one-shot session ("call") is kept under a name', state={"session": session.name})
        if names_one_shot(name):
            raise KitsuneError("invalid_parameter", f"keepSession: {name!r} is reserved for one-shot sessions")
        key = (session.agent, name)
        if key in self._open:
            raise KitsuneError("session_exists", f"Session {name!r} is open already; close it or pick another name",
                               state={"session": name})
        self._tombstones.pop(key, None)  # promoting under a closed name reuses it knowingly
        del self._open[(session.agent, session.name)]
        self._forget_call(session)
        session.name, session.mode, session.call, session.held = name, "dynamic", None, False
        self._open[key] = session
        self.touch(session)

    def renew(self, session: Session, context: BrowserContext, context_id: str) -> None:
        """Give ``session`` a fresh context under its name (``resetSession``)."""
        self._by_context.pop(id(session.context), None)
        session.context, session.context_id = context, context_id
        self._by_context[id(context)] = session
        self.touch(session)

    def closed(self, session: Session, reason: CloseReason) -> Tombstone:
        """Forget a session that is closing; its tombstone."""
        self.released(session)
        tombstone = Tombstone(session.agent, session.name, session.mode, self.wall(), reason,
                              self.clock() + self.tombstone_ttl)
        self._tombstones[(session.agent, session.name)] = tombstone
        return tombstone

    def released(self, session: Session) -> None:
        """Forget a session whose context is freed (closing, or stored: then with no tombstone)."""
        if self._open.pop((session.agent, session.name), None) is not None:
            self.held.left(session.agent)
        self._by_context.pop(id(session.context), None)
        self._forget_call(session)

    def _forget_call(self, session: Session) -> None:
        if session.call is not None and not any(s.call == session.call for s in self._open.values()):
            self._one_shot_calls.discard(session.call)

    def clear_tombstone(self, agent: str, name: str) -> bool:
        """Forget a tombstone (the agent closed it knowingly: the name may be used again); whether there was one."""
        return self._tombstones.pop((agent, name), None) is not None

    def idle(self, max_idle: float, max_exec_idle: float) -> list[Session]:
        """Sessions to sweep now: reuse and promoted ones idle over ``max_idle``, one-shot ones of held
        calls idle over ``max_exec_idle`` (a one-shot session of a running call is never swept)."""
        now = self.clock()
        return [s for s in self._open.values() if not s.in_use and (
            (s.mode != "one-shot" and now - s.used > max_idle) or (s.held and now - s.used > max_exec_idle))]

    def listing(self, agent: str, tabs_of: Callable[[Session], list[int]]) -> dict[str, Any]:
        """``agent``'s sessions (name, mode, tabs, created, last used) and tombstones (closed at, reason)."""
        self._forget_old_tombstones()
        now, now_wall = self.clock(), self.wall()
        return {"sessions": [s.describe(tabs_of(s), now_wall, now) for s in self._open.values() if s.agent == agent],
                "tombstones": [t.describe() for t in self.tombstones() if t.agent == agent]}

    def tombstones(self) -> list[Tombstone]:
        """The tombstones kept now, of every agent."""
        self._forget_old_tombstones()
        return list(self._tombstones.values())

    def _forget_old_tombstones(self) -> None:
        now = self.clock()
        for key in [k for k, t in self._tombstones.items() if t.until <= now]:
            del self._tombstones[key]


async def _storage_state(fetch: Fetch) -> dict[str, Any] | None:
    """The storage state a persistent session's fetch brings (None: none is stored)."""
    found = await fetch
    return found[0].storage_state if found is not None else None


class Sessions:
    """The sessions of one Chromium: opened on first use, promoted, closed, swept (on the loop)."""

    def __init__(self, chromium: Chromium, tabs: TabRegistry, table: SessionTable | None = None) -> None:
        self.table = table or SessionTable()
        self.on_change: Callable[[SessionChange], None] = lambda change: None
        """Told of every session opened, promoted, closed or swept."""
        self._chromium = chromium
        self._tabs = tabs
        self._opening: dict[tuple[str, str], asyncio.Task[tuple[Session, dict[str, Any]]]] = {}
        self._expired_tabs: collections.OrderedDict[int, Tombstone] = collections.OrderedDict()
        chromium.on_lost = self._lost
        self.persistence = Persistence(self)
        """Its persistent sessions' saves and restores."""
        tabs.page_gone = self.persistence.page_gone

    async def open_for(self, agent: str, requested: str | None, call: int | None, timeout: float,
                       persist: bool | None = None) -> tuple[Session, dict[str, Any]]:
        """The session a ``newTab`` of ``agent`` opens in, made on first use (two asking at once get one;
        ``persist``: a reuse session made persistent, None: as the agent's policy says), and what the
        ``newTab`` answers of its persistence (``restored`` when it made it from a stored state)."""
        name = self.table.name_for(agent, requested, call)
        if requested is None:  # a newTab naming no session gets a default one, even after the last was swept
            self.table.clear_tombstone(agent, name)
        await self.persistence.settled(agent, name)
        found = self.table.find(agent, name)
        said: dict[str, Any] = {}
        if found is None:
            task = self._opening.get((agent, name))
            if task is None:
                task = asyncio.get_running_loop().create_task(self._make(agent, name, call, timeout, persist))
                self._opening[(agent, name)] = task
                task.add_done_callback(lambda _: self._opening.pop((agent, name), None))
            session, said = await asyncio.shield(task)
        else:
            session = found
            if persist and not session.persist:
                self.persistence.made_persistent(session)
        self.table.touch(session)
        return session, said or self.persistence.answer(session, None)

    @property
    def running(self) -> bool:
        """Whether the browser is up (the pages that go as it stops retire no session)."""
        return self._chromium.running

    def is_new(self, agent: str, requested: str | None, call: int | None) -> bool:
        """Whether a ``newTab`` of ``agent`` naming ``requested`` would make a session (none open or opening)."""
        name = self.table.name_for(agent, requested, call)
        return (agent, name) not in self._opening and not self.table.is_open(agent, name)

    async def _make(self, agent: str, name: str, call: int | None, timeout: float,
                    persist: bool | None) -> tuple[Session, dict[str, Any]]:
        persistent, fetch = self.persistence.restoring(agent, name, persist)  # fetched as the context is made
        storage = None if fetch is None else asyncio.ensure_future(_storage_state(fetch))
        try:
            context, context_id = await self._chromium.new_context(agent, timeout, storage)
        finally:
            for task in (storage, fetch):  # given up when the browser failed first; quiet either way
                if task is not None:
                    task.cancel()
                    task.add_done_callback(lambda done: done.cancelled() or done.exception())
        found = None if fetch is None else fetch.result()
        session = self.table.add(agent, name, context, context_id, call)
        session.persist = persistent or found is not None
        self.on_change(SessionChange("opened", agent, name, session.mode, call))
        if found is not None:
            self.persistence.on_stored("restored", session, found[1])
        return session, self.persistence.answer(session, found[0] if found is not None else None)

    def of_page(self, page: Page) -> Session | None:
        """The session a tab's page lives in (None for a user tab)."""
        return self.table.of_context(page.context)

    @contextlib.contextmanager
    def using(self, session: Session | None) -> Iterator[None]:
        """An action runs in ``session`` (if any): it is touched as it starts and ends, and never swept meanwhile."""
        if session is None:
            yield
            return
        self.table.touch(session)
        session.in_use += 1
        try:
            yield
        finally:
            session.in_use -= 1
            self.table.touch(session)

    def of_tab(self, tab: int) -> Session | None:
        """The session an open tab lives in (None for a user tab, or a tab that is not open)."""
        page = self._tabs.get(tab)
        return self.of_page(page) if page is not None else None

    def expired(self, tab: int) -> Tombstone | None:
        """The tombstone of the session a closed tab was in, when that session's end closed it."""
        return self._expired_tabs.get(tab)

    def tabs_of(self, session: Session) -> list[int]:
        return [tab for tab in sorted(self._tabs.ids())
                if (page := self._tabs.get(tab)) is not None and page.context is session.context]

    def promote(self, page: Page, agent: str | None, name: str, call: int | None) -> Session:
        """Keep the one-shot session of a tab's page as ``agent``'s reuse session ``name``."""
        session = self.of_page(page)
        if session is None or session.agent != agent:
            raise KitsuneError("session_not_promotable", "keepSession: the tab is in no one-shot session of yours")
        previous = session.name
        was_dynamic = session.mode == "dynamic"
        self.table.promote(session, name)
        if not (was_dynamic and previous == name):
            self.on_change(SessionChange("promoted", agent, name, "dynamic", call, previous=previous))
        return session

    async def release(self, session: Session, reason: StoreReason) -> None:
        """Free a persistent session's context after its save: its tabs close, and no tombstone stays."""
        tabs = self.tabs_of(session)
        self.table.released(session)
        self._tabs.spares.drop(session.context_id)
        with contextlib.suppress(PlaywrightError):
            await session.context.close()
        for tab in tabs:
            self._tabs.forget(tab)
        self.on_change(SessionChange("stored", session.agent, session.name, session.mode, session.opened_in, reason))

    async def close(self, session: Session, reason: CloseReason, call: int | None = None) -> Tombstone:
        """End a session now: its tabs close, and its tombstone stays (recorded in ``call``, or its opener's)."""
        tabs = self.tabs_of(session)
        tombstone = self.table.closed(session, reason)
        for tab in tabs:
            self._expired_tabs[tab] = tombstone
            while len(self._expired_tabs) > 10_000:
                self._expired_tabs.popitem(last=False)
        self._tabs.spares.drop(session.context_id)
        with contextlib.suppress(PlaywrightError):
            await session.context.close()
        for tab in tabs:
            self._tabs.forget(tab)
        self.on_change(SessionChange("swept" if reason == "swept" else "closed", session.agent, session.name,
                                     session.mode, call if call is not None else session.opened_in, reason))
        return tombstone

    async def reset(self, agent: str, name: str, call: int | None, timeout: float) -> dict[str, Any]:
        """``resetSession``: close every tab of ``agent``'s reuse session ``name`` and give it a fresh context (no
        cookies, storage or cache) under the same name (recorded in ``call``)."""
        session = self.table.own(agent, name)
        if session.mode == "one-shot":
            raise KitsuneError("invalid_parameter", f"resetSession: {name!r} is a one-shot session, which ends with "
                               "its call", state={"param": "name"})
        tabs, old = self.tabs_of(session), session.context
        context, context_id = await self._chromium.new_context(agent, timeout)
        self._tabs.spares.drop(session.context_id)
        self.table.renew(session, context, context_id)
        with contextlib.suppress(PlaywrightError):
            await old.close()
        for tab in tabs:
            self._tabs.forget(tab)
        self.on_change(SessionChange("reset", agent, name, session.mode, call if call is not None else
                                     session.opened_in))
        return {"session": name, "mode": session.mode, "closed": tabs}

    async def close_named(self, agent: str, name: str) -> dict[str, Any]:
        """``DELETE /api/sessions/{name}``: close an open session, or forget a tombstone (the name is then free);
        what is stored of a persistent one is deleted."""
        await self.persistence.settled(agent, name)
        try:
            session = self.table.find(agent, name)
        except KitsuneError:
            self.table.clear_tombstone(agent, name)
            return {"closed": name, "was": "tombstone"}
        forgot = {"forgot_state": True} if await self.persistence.forget(agent, name) else {}
        if session is None:
            if forgot:
                return {"closed": name, "was": "stored", **forgot}
            raise KitsuneError("session_not_found", f"You have no session {name!r}", state={"session": name})
        tabs = self.tabs_of(session)
        session.persist = False  # closed for good: its last tab's close saves nothing
        await self.close(session, "closed")
        return {"closed": name, "mode": session.mode, "tabs": tabs, **forgot}

    async def call_ended(self, call: int, *, kept: bool) -> None:
        """A call ended: its one-shot sessions close, unless it stopped held or unknown with a checkpoint
        (``kept``), which they then outlive until it is resumed to an end or dropped."""
        for session in self.table.of_call(call):
            if kept:
                session.held = True
            else:
                await self.close(session, "call_ended", call)

    async def sweep(self, max_idle: float, max_exec_idle: float) -> int:
        """Close the sessions idle too long (a persistent one is saved and freed); how many."""
        swept = 0
        for session in self.table.idle(max_idle, max_exec_idle):
            if not session.persist:
                await self.close(session, "swept")
            elif not await self.persistence.retire(session, "swept"):  # its save failed: it stays open
                continue
            swept += 1
        return swept

    def _lost(self) -> None:
        """The browser died: every session is gone with it (its tabs end ``tab_closed``, as every tab's)."""
        for session in list(self.table):
            self.table.closed(session, "browser_restarted")
            self.on_change(SessionChange("closed", session.agent, session.name, session.mode, session.opened_in,
                                         "browser_restarted"))
