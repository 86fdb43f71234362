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
  sessions of held calls idle over ``max_exec_idle``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Callable
from typing import Any

from actors.audit_actor import Auditor
from actors.loop import IoLoop
from bridge.approvals import ApprovedTabs
from core.settings import SessionTimes
from driver.sessions import SessionChange, Sessions
from messages.events import Event, SessionChanged

__all__ = ["SessionKeeper"]

log = logging.getLogger(__name__)

_ENDED = frozenset({"ok", "failed", "internal_error"})
"""Statuses that end a call's one-shot session even when its checkpoint is kept."""


class SessionKeeper:
    """Records session changes, ends one-shot sessions with their calls, and sweeps (owned by the node)."""

    def __init__(self, sessions: Sessions, io: IoLoop, times: SessionTimes, *, emit: Callable[[Event], Any],
                 auditor: Callable[[str], Auditor],
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
        self.approved = ApprovedTabs()
        """Tabs opened by approving held one-shot ``newTab`` steps, for their calls' resumes (``bridge.approvals``)."""
        sessions.on_change = self._record

    def start(self) -> None:
        """Sweep from now on (on the loop)."""
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever())

    async def stop(self) -> None:
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sweeper

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

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self.times.sweep_interval)
            try:
                await self.sweep()
            except Exception as e:  # the next sweep tries again
                log.error("session sweep failed (%s)", type(e).__name__)

    def _record(self, change: SessionChange) -> None:
        if change.call is not None:
            event = SessionChanged(change.call, change.op, change.agent, change.session, change.mode, change.reason)
            contextvars.Context().run(self._emit, event)  # the sink names the call in its own context, not the loop's
        self._auditor(change.agent).session(change.op, change.session, change.mode, change.call,
                                            reason=change.reason, previous=change.previous)
        self._on_change(change)
