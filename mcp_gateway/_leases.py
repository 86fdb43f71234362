"""The leases of the tasks one MCP session owns, renewed while it lives (``POST /api/tasks/{id}/heartbeat``).

A session holds a task once an answer names it the task's owner (it created the task or took it
over); it beats every held task each lease_ttl/3 seconds, and lets a task go once an answer says
the session lost it: the task was completed, revoked or expired, or another session took it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import anyio

from mcp_gateway._bridge import Bridge

__all__ = ["DEFAULT_TTL", "LOST", "Leases", "heartbeat_path"]

DEFAULT_TTL = 30.0
"""The lease TTL assumed when an answer names none (the bridge's default ``tasks.lease_ttl``)."""

LOST = frozenset({"task_leased", "task_expired", "task_closed", "task_revoked", "task_not_found",
                  "session_required"})
"""The codes that say the session does not own the task (any more): its heartbeats stop."""


def heartbeat_path(task: str) -> str:
    return f"/api/tasks/{quote(task, safe='')}/heartbeat"


@dataclass
class _Held:
    bridge: Bridge
    """The bridge of the request that last named the session the task's owner."""
    ttl: float
    due: float
    """When its next heartbeat is due (anyio's clock)."""


def _ttl(view: Mapping[str, Any]) -> float:
    ttl = view.get("lease_ttl")
    if isinstance(ttl, int | float) and not isinstance(ttl, bool) and math.isfinite(ttl) and ttl > 0:
        return float(ttl)
    return DEFAULT_TTL


class Leases:
    """The tasks one MCP session owns, and the loop (:meth:`run`) that beats them while it lives.

    ``live``, when given, says whether the session's client is heard from now: while it is not, no
    heartbeat is sent (the lease then runs out unless the client is heard again).
    """

    def __init__(self, live: Callable[[], bool] | None = None) -> None:
        self._held: dict[str, _Held] = {}
        self._changed: anyio.Event | None = None
        self._live = live

    @property
    def held(self) -> dict[str, float]:
        """The tasks held, and their lease TTLs."""
        return {task: held.ttl for task, held in self._held.items()}

    def heard(self, bridge: Bridge, answer: Mapping[str, Any], task: str | None = None) -> None:
        """Note what a task answer says of the session's tasks (``task``: the one the request named)."""
        views = [answer["task"]] if isinstance(answer.get("task"), dict) else []
        if isinstance(answer.get("tasks"), list):
            views += [view for view in answer["tasks"] if isinstance(view, dict)]
        for view in views:
            if not isinstance(view.get("id"), str):
                continue
            if view.get("state") == "owner":
                self.hold(bridge, view["id"], _ttl(view))
            else:
                self.drop(view["id"])
        state = answer.get("state")
        named = state.get("taskId") if isinstance(state, dict) else None
        if "error" in answer and answer.get("code") in LOST:
            for lost in {task, named} - {None}:
                self.drop(str(lost))

    def hold(self, bridge: Bridge, task: str, ttl: float) -> None:
        """Beat ``task`` every ``ttl``/3 seconds from now on."""
        known = self._held.get(task)
        due = anyio.current_time() + ttl / 3
        self._held[task] = _Held(bridge, ttl, min(due, known.due) if known is not None else due)
        self._wake()

    def drop(self, task: str) -> None:
        if self._held.pop(task, None) is not None:
            self._wake()

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()

    async def run(self) -> None:
        """Beat each held task when it is due, until cancelled."""
        while True:
            self._changed = anyio.Event()
            now = anyio.current_time()
            for task in [task for task, held in self._held.items() if held.due <= now]:
                await self._beat(task)
            wait = min((held.due for held in self._held.values()), default=math.inf) - anyio.current_time()
            with anyio.move_on_after(max(wait, 0.0)):
                await self._changed.wait()

    async def _beat(self, task: str) -> None:
        held = self._held.get(task)
        if held is None:
            return
        held.due = anyio.current_time() + held.ttl / 3
        if self._live is not None and not self._live():
            return
        answer = await held.bridge.post(heartbeat_path(task), {}, timeout=min(max(held.ttl / 3, 1.0), 10.0))
        self.heard(held.bridge, answer, task)
