"""Persistent sessions (issue 34): a reuse session whose state outlives its browser context and its node.

A persistent session's state (:class:`core.session_state.SavedState`: Playwright's storage state with
IndexedDB, and the origins its tabs had open) is saved through the node's
:class:`~core.session_state.StateStore`:

- when its last tab closes, and when the sweep finds it idle: then its context is freed, with no
  tombstone (it is stored, not closed); the next ``newTab`` naming it restores it, on whichever node
  places it;
- every ``persist_interval`` seconds while it is used (:meth:`Persistence.save_due`), and on the
  node's stop (:meth:`Persistence.save_all`);
- closing it (``DELETE /api/sessions/{name}``) forgets what was stored.

A save that fails keeps the context (its state would be lost otherwise) and is logged by code only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

from playwright.async_api import BrowserContext, Page
from playwright.async_api import Error as PlaywrightError

from core.session_names import one_shot_call
from core.session_state import SavedState, StateStore
from messages.contract import SESSION_SAVE_TIMEOUT
from messages.errors import KitsuneError

__all__ = ["Fetch", "Persistence", "Stored"]

log = logging.getLogger(__name__)


class Session(Protocol):
    """What is read and written here of a :class:`driver.sessions.Session`."""

    persist: bool
    saved_used: float | None

    @property
    def agent(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def mode(self) -> str: ...

    @property
    def context(self) -> BrowserContext: ...

    @property
    def used(self) -> float: ...


class _Table(Protocol):
    def __iter__(self) -> Any: ...

    def wall(self) -> float: ...


class Host(Protocol):
    """What is used here of :class:`driver.sessions.Sessions`."""

    @property
    def table(self) -> _Table: ...

    @property
    def running(self) -> bool: ...

    def tabs_of(self, session: Any) -> list[int]: ...

    def of_page(self, page: Page) -> Any: ...

    async def release(self, session: Any, reason: Literal["idle", "swept"]) -> None: ...


Fetch = asyncio.Task[tuple[SavedState, int] | None]
"""The fetch of a stored state: the state and its bytes stored, or None when there is none."""

Stored = Callable[[Literal["saved", "restored"], Session, int], None]
"""Told of a state saved or restored: the session and the bytes stored (never the state)."""


class Persistence:
    """The persistent sessions of one :class:`~driver.sessions.Sessions` (on the loop)."""

    def __init__(self, sessions: Host) -> None:
        self._sessions = sessions
        self.store: StateStore | None = None
        """Where states are kept; None when no key is configured (persistence is then refused)."""
        self.default: Callable[[str], bool] = lambda agent: False
        """Whether an agent's reuse sessions are persistent when it does not say (its policy's)."""
        self.on_stored: Stored = lambda op, session, size: None
        self._retiring: dict[tuple[str, str], asyncio.Task[None]] = {}

    async def settled(self, agent: str, name: str) -> None:
        """Once a save that frees ``agent``'s session ``name`` is done (a ``newTab`` naming it waits for it)."""
        retiring = self._retiring.get((agent, name))
        if retiring is not None:
            with contextlib.suppress(Exception):
                await asyncio.shield(retiring)

    def restoring(self, agent: str, name: str, persist: bool | None) -> tuple[bool, Fetch | None]:
        """Whether a session ``agent`` makes now is asked to persist, and the fetch of the state it starts from,
        begun now (on the loop: the context is made meanwhile), None with no store or for a one-shot session
        (``persistence_not_configured`` when it asks for persistence and no key is configured). A stored state
        is restored whatever ``persist`` says: the session is that one."""
        if one_shot_call(name) is not None:
            if persist:
                raise KitsuneError("invalid_parameter", 'newTab: a one-shot session ("call") cannot persist',
                                   state={"param": "persist"})
            return False, None
        wanted = self.default(agent) if persist is None else persist
        if self.store is None:
            if wanted:
                raise not_configured()
            return False, None
        return wanted, asyncio.get_running_loop().create_task(self._stored(self.store, agent, name, wanted))

    @staticmethod
    async def _stored(store: StateStore, agent: str, name: str, wanted: bool) -> tuple[SavedState, int] | None:
        try:
            return await store.load(agent, name)
        except KitsuneError as e:  # a session that did not ask to persist opens without the store
            if wanted or e.code != "session_state_unavailable":
                raise
            return None

    def made_persistent(self, session: Session) -> None:
        """An open reuse session becomes persistent (a ``newTab`` naming it asked for it)."""
        if self.store is None:
            raise not_configured()
        if session.mode == "one-shot":
            raise KitsuneError("invalid_parameter", 'newTab: a one-shot session ("call") cannot persist',
                               state={"param": "persist"})
        session.persist = True

    async def save(self, session: Session) -> int | None:
        """Save a persistent session's state now: the bytes stored, or None when it could not be (logged)."""
        assert self.store is not None
        used = session.used
        try:
            async with asyncio.timeout(SESSION_SAVE_TIMEOUT):  # a page's storage is the page's: its read is bounded
                state = SavedState(dict(await session.context.storage_state(indexed_db=True)),
                                   _origins(session.context.pages), self._sessions.table.wall())
                size = await self.store.save(session.agent, session.name, state)
        except (PlaywrightError, KitsuneError, TimeoutError) as e:
            log.error("the state of a persistent session was not saved (%s)", getattr(e, "code", type(e).__name__))
            return None
        session.saved_used = used
        self.on_stored("saved", session, size)
        return size

    async def save_due(self) -> int:
        """Save the persistent sessions used since their last save; how many were saved."""
        due = [s for s in self._persistent() if s.used != s.saved_used]
        return sum([await self.save(s) is not None for s in due])

    async def save_all(self) -> int:
        """Save every persistent session the node holds (its stop, or a drain); how many were saved."""
        return sum([await self.save(s) is not None for s in self._persistent()])

    def _persistent(self) -> list[Session]:
        sessions: Iterable[Session] = self._sessions.table
        return [s for s in sessions if s.persist]

    async def retire(self, session: Session, reason: Literal["idle", "swept"]) -> bool:
        """Save a persistent session and free its context and tabs (no tombstone); False when it stays open (its
        save failed, or a tab opened in it after its last closed)."""
        if await self.save(session) is None or (reason == "idle" and self._sessions.tabs_of(session)):
            return False
        await self._sessions.release(session, reason)
        return True

    def page_gone(self, page: Page) -> None:
        """A tab's page was forgotten: when it was a persistent session's last, that session is retired."""
        session: Session | None = self._sessions.of_page(page)
        if session is None or not session.persist or self._sessions.tabs_of(session) or not self._sessions.running:
            return
        key = (session.agent, session.name)
        if key in self._retiring:
            return
        task = asyncio.get_running_loop().create_task(self._retire_quietly(session))
        self._retiring[key] = task
        task.add_done_callback(lambda _: self._retiring.pop(key, None))

    async def _retire_quietly(self, session: Session) -> None:
        try:
            await self.retire(session, "idle")
        except Exception as e:  # a task's failure is logged, never raised into the loop
            log.error("a persistent session was not retired (%s)", type(e).__name__)

    async def forget(self, agent: str, name: str) -> bool:
        """Delete what is stored of ``agent``'s session ``name``; whether there was something."""
        return self.store is not None and await self.store.delete(agent, name)

    def answer(self, session: Session, state: SavedState | None) -> dict[str, Any]:
        """What a ``newTab`` that opened ``session`` says of its persistence (nothing for another session)."""
        if not session.persist:
            return {}
        if state is None:
            return {"persist": True, "restored": False}
        return {"persist": True, "restored": True, "saved_at": state.saved_at,
                "age": round(max(0.0, self._sessions.table.wall() - state.saved_at), 3)}


def not_configured() -> KitsuneError:
    return KitsuneError("persistence_not_configured", "Persistent sessions need a key on the node "
                        "(sessions.persist_key, persist_key_env or persist_key_file); nothing is stored in clear",
                        state={"param": "persist"})


def _origins(pages: list[Page]) -> tuple[str, ...]:
    """The http(s) origins ``pages`` have open."""
    parts = [urlsplit(page.url) for page in pages]
    return tuple(sorted({f"{p.scheme}://{p.netloc}" for p in parts if p.scheme in ("http", "https")}))
