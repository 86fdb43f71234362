"""The node's side of sessions: what it records of them, when one-shot sessions end, and the sweep.

- Every session opened, promoted, closed or swept is a ``SessionChanged`` event in the step log
  of the call it happened in (a sweep's, in that of the call that opened the session), an entry
  ``session`` in the audit log, and a count in the metrics.
- A call's one-shot session ends when the call ends ok or failed, or when its checkpoint is
  dropped (expired, pushed out, resumed to an end); a call that stopped held, unknown or skipped
  with a checkpoint keeps it, so that its resume continues in the same browser.
- A held one-shot ``newTab`` approved by a direct open (``bridge.approvals``) opens in the held call's
  session, kept like the call's own; its tab waits in :attr:`SessionKeeper.approved` for the resume.
- The sweep runs every ``sweep_interval`` seconds: reuse sessions idle over ``max_idle``, one-shot
  sessions of held calls idle over ``max_exec_idle`` (a persistent one is saved and freed, not closed).
- Persistent sessions (``driver.persistence``) used since their last save are saved every
  ``persist_interval`` seconds, and all of them by :meth:`SessionKeeper.save_persistent` (the node's
  stop; a drain). Each save and restore is an audit entry with its size, never its state.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from actors.audit_actor import Auditor
from actors.loop import IoLoop
from bridge.approvals import ApprovedTabs
from core.session_state import StateStore
from core.settings import SessionTimes
from driver.persistence import Session as Persistent
from driver.sessions import SessionChange, Sessions
from messages.events import Event, SessionChanged

__all__ = ["SessionKeeper"]

log = logging.getLogger(__name__)

_ENDED = frozenset({"ok", "failed", "internal_error"})
"""Statuses that end a call's one-shot session even when its checkpoint is kept."""


class SessionKeeper:
    """Records session changes, ends one-shot sessions with their calls, and sweeps (owned by the node)."""

    def __init__(self, sessions: Sessions, io: IoLoop, times: SessionTimes, *, emit: Callable[[Event], Any],
                 auditor: Callable[[str], Auditor], store: StateStore | None = None,
                 persist_default: Callable[[str], bool] = lambda agent: False,
                 on_change: Callable[[SessionChange], None] = lambda change: None) -> None:
        self.sessions = sessions
        self.times = times
        self._io = io
        self._on_change = on_change
        """Told of every change after it is recorded (metrics)."""
        self._emit = emit
        """Stores an event of the step log."""
        self._auditor = auditor
        """An agent's audit."""
        self._sweeper: asyncio.Task[None] | None = None
        self._saver: asyncio.Task[None] | None = None
        self.approved = ApprovedTabs()
        """Tabs opened by approving held one-shot ``newTab`` steps, for their calls' resumes (``bridge.approvals``)."""
        sessions.on_change = self._record
        persistence = sessions.persistence
        persistence.store, persistence.default, persistence.on_stored = store, persist_default, self._stored

    def start(self) -> None:
        """Sweep from now on (on the loop)."""
        loop = asyncio.get_running_loop()
        self._sweeper = loop.create_task(self._every(self.times.sweep_interval, self.sweep, "session sweep"))
        if self.sessions.persistence.store is not None:
            self._saver = loop.create_task(self._every(self.times.persist_interval, self.sessions.persistence.save_due,
                                                       "persistent sessions' save"))

    async def stop(self) -> None:
        """Stop sweeping and saving (the node saves its persistent sessions as it stops: ``Node.interrupt``)."""
        for task in (self._sweeper, self._saver):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._sweeper = self._saver = None

    async def save_persistent(self) -> int:
        """Save every persistent session this node holds, now (on the loop; the node's stop, a drain): how many
        were saved. A session whose save fails is logged and left as it is."""
        return await self.sessions.persistence.save_all() if self.sessions.persistence.store is not None else 0

    def call_ended(self, call: int, status: str, kept: bool) -> None:
        """A call or resume ran (from its thread): end its one-shot sessions now, or keep them for its resume."""
        if self.sessions.table.has_one_shot(call):  # most calls have none: no hop to the loop for them
            self._io.run(self.sessions.call_ended(call, kept=kept and status not in _ENDED), timeout=30)

    def checkpoint_dropped(self, call: int, reason: str) -> None:
        """A call's checkpoint is gone (from the checkpoint actor's thread): so are its one-shot sessions."""
        self.approved.forget(call)
        if reason != "shutdown" and self.sessions.table.has_one_shot(call):
            asyncio.run_coroutine_threadsafe(self.sessions.call_ended(call, kept=False), self._io.loop)

    def listing(self, agent: str) -> dict[str, Any]:
        """``agent``'s sessions and tombstones (on the loop)."""
        return self.sessions.table.listing(agent, self.sessions.tabs_of)

    async def close(self, agent: str, name: str) -> dict[str, Any]:
        """Close ``agent``'s session ``name``, or forget its tombstone (on the loop)."""
        return await self.sessions.close_named(agent, name)

    def debug_log(self, agent: str, name: str) -> dict[str, Any]:
        """The last CDP methods sent for ``agent``'s session ``name`` (on the loop)."""
        log = self.sessions.table.own(agent, name).debug_log
        return {"session": name, "entries": log.entries(), "dropped": log.dropped}

    def clear_debug_log(self, agent: str, name: str) -> dict[str, Any]:
        """Empty that log; how many entries it had (on the loop)."""
        return {"session": name, "cleared": self.sessions.table.own(agent, name).debug_log.clear()}

    async def sweep(self) -> int:
        """Sweep now; how many sessions closed."""
        return await self.sessions.sweep(self.times.max_idle, self.times.max_exec_idle)

    @staticmethod
    async def _every(seconds: float, work: Callable[[], Awaitable[int]], what: str) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                await work()
            except Exception as e:  # the next round tries again
                log.error("%s failed (%s)", what, type(e).__name__)

    def _stored(self, op: Literal["saved", "restored"], session: Persistent, size: int) -> None:
        self._auditor(session.agent).session(op, session.name, session.mode, None, size=size)

    def _record(self, change: SessionChange) -> None:
        if change.call is not None:
            event = SessionChanged(change.call, change.op, change.agent, change.session, change.mode, change.reason)
            contextvars.Context().run(self._emit, event)  # the sink names the call in its own context, not the loop's
        self._auditor(change.agent).session(change.op, change.session, change.mode, change.call,
                                            reason=change.reason, previous=change.previous)
        self._on_change(change)
