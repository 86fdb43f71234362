"""Force takeovers held for a person under ``tasks.takeover: ask`` (docs/guides/tasks.md, "Takeover policy").

A held takeover answers ``needs_user`` with a confirm token bound to the agent, its session, the task and
``force``. A person releases it either way: through the agent's client (an elicitation: the token given back),
or as an operator in the console, who sees the node's held takeovers (never their tokens) and approves one (the
takeover is made then, in the held session's name, and its answer kept for that session's next request with the
token) or denies it (the token is used up: that request answers ``takeover_denied``). A hold lasts as long as
its token; a decision is kept until the session asks with the token, or as long again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import orjson

from core.policy import ConfirmTokens
from messages.contract import CONFIRM_TTL
from messages.errors import KitsuneError
from messages.tokens import token_hash

__all__ = ["HELD_PER_AGENT", "HeldTakeovers"]

HELD_PER_AGENT = 16
"""Takeovers one agent may have waiting for a person on a node: past it, its oldest leaves the queue (its token then
answers as any unapproved one), so no agent fills the console or the node's memory."""

TakeOver = Callable[[str, str | None, str, bool], Awaitable[dict[str, Any]]]
"""The takeover an approval makes: agent, session, task id, force; its answer."""
Audit = Callable[[str, str, str], object]
"""Record a decision in the audit trail: who (``operator:<name>``), ``takeover_approved`` or ``takeover_denied``,
the task's id (a blocking write)."""


@dataclasses.dataclass
class _Held:
    id: str
    token: str
    """The hold's confirm token (in memory only: never shown, logged or answered)."""
    agent: str
    session: str | None
    task: str
    force: bool
    since: float
    expires: float
    decision: Literal["approved", "denied"] | None = None
    by: str | None = None
    answer: dict[str, Any] | None = None
    error: KitsuneError | None = None


class HeldTakeovers:
    """The force takeovers held on this node, as the console lists and decides them (from any thread)."""

    def __init__(self, confirms: ConfirmTokens, take_over: TakeOver, audit: Audit,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._confirms = confirms
        self._take_over = take_over
        self._audit = audit
        self._clock = clock
        self._held: dict[bytes, _Held] = {}
        self._lock = threading.Lock()

    def hold(self, token: str, agent: str, session: str | None, task: str, force: bool) -> str:
        """Record the takeover held with ``token`` for a person to decide; its id (the console's)."""
        now = self._clock()
        held = _Held(f"h-{secrets.token_hex(6)}", token, agent, session, task, force, now, now + CONFIRM_TTL)
        with self._lock:
            self._held = {k: h for k, h in self._held.items() if h.expires > now}
            mine = [k for k, h in self._held.items() if h.agent == agent]
            for key in mine[:max(0, len(mine) - HELD_PER_AGENT + 1)]:  # the oldest first: insertion order
                del self._held[key]
            self._held[token_hash(token)] = held
        return held.id

    def released(self, token: str) -> None:
        """The agent's client gave ``token`` back (a person approved it there): the hold leaves the queue."""
        with self._lock:
            self._held.pop(token_hash(token), None)

    def decided(self, token: str, agent: str, session: str | None, task: str, force: bool) -> dict[str, Any] | None:
        """The answer an operator's decision gave the takeover held with ``token`` for exactly this session, task
        and ``force`` (once): the takeover's; ``takeover_denied`` or the takeover's error raised. None when no
        operator decided it."""
        key = token_hash(token)
        with self._lock:
            held = self._held.get(key)
            if held is None or held.decision is None or (held.agent, held.session, held.task, held.force) != (
                    agent, session, task, force):
                return None
            del self._held[key]
        if held.decision == "denied":
            raise KitsuneError("takeover_denied", f"An operator ({held.by}) denied the takeover of task {task}; "
                               "nothing was done", state={"taskId": task})
        if held.error is not None:
            raise held.error
        return held.answer

    def pending(self) -> list[dict[str, Any]]:
        """The takeovers waiting for a person, oldest first: what the console shows of each (never its token)."""
        now = self._clock()
        with self._lock:
            waiting = [h for h in self._held.values() if h.decision is None and h.expires > now]
        return [{"id": h.id, "agent": h.agent, "session": h.session, "task": h.task, "force": h.force,
                 "waiting": round(now - h.since, 1), "expires_in": round(h.expires - now, 1), "decide": h.id}
                for h in sorted(waiting, key=lambda h: h.since)]

    async def decide(self, hold_id: str, approve: bool, operator: str) -> dict[str, Any]:
        """An operator's decision on held takeover ``hold_id``: approved, the takeover is made now in the held
        session's name; denied, its token is used up. Audited before it has effect. The hold's row, with the
        decision (and the takeover's error code, when it could not be made)."""
        held = self._waiting(hold_id)
        await asyncio.to_thread(self._audit, f"operator:{operator}",
                                "takeover_approved" if approve else "takeover_denied", held.task)
        now = self._clock()
        with self._lock:
            if self._waiting(hold_id) is not held:  # decided meanwhile
                raise _not_held(hold_id)
            used = self._confirms.redeem_for(held.token, held.agent, held.session, "takeover", None,
                                             orjson.dumps([held.task, held.force]))
            held.decision, held.by = ("approved" if approve else "denied"), operator
            held.expires = now + CONFIRM_TTL
        row = {"id": held.id, "agent": held.agent, "task": held.task, "decision": held.decision, "by": operator}
        if not used:  # redeemed meanwhile through the agent's client: that approval stands
            self.released(held.token)
            raise _not_held(hold_id)
        if approve:
            try:
                held.answer = await self._take_over(held.agent, held.session, held.task, held.force)
            except KitsuneError as e:
                held.error = e
                row["code"] = e.code
        return row

    def _waiting(self, hold_id: str) -> _Held:
        """The hold ``hold_id`` waiting for a decision (``hold_not_found`` when there is none)."""
        now = self._clock()
        found = next((h for h in list(self._held.values()) if h.id == hold_id and h.decision is None
                      and h.expires > now), None)
        if found is None:
            raise _not_held(hold_id)
        return found


def _not_held(hold_id: str) -> KitsuneError:
    return KitsuneError("hold_not_found", f"No takeover {hold_id} is waiting for a decision (decided, approved "
                        "through the agent's client, or expired)", state={"hold": hold_id})
