"""Approving a held one-shot ``newTab`` of a container call (docs/guides/sessions.md and security.md).

Under ask-before-act a container call's ``newTab {"session": "call"}`` is held with a confirm token
bound to that call's own session ``call:<id>`` and to the step (:class:`core.policy.HeldStep`);
its hold names both (``state.session``, ``state.call``). A direct call cannot ask for a one-shot
session, so ``POST /api/tabs {"op": "open", "session": "call"}`` (or ``"call:<id>"``) with that
token approves it: the tab opens in the held call's session, in the call's name (made if absent, the
call's like every one-shot session: it ends with the call or its checkpoint, and the sweep keeps it
for ``sessions.max_exec_idle`` meanwhile). The tab's result is kept here, by call and step path,
for the resume that reports the step ``applied``: that step's result is then the tab's
(``core.ports.Approvals``), so ``${$N.tabId}`` names it. A token that names no held call's step,
or a call whose checkpoint is gone, is refused with nothing opened.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, Protocol

from core.policy import ConfirmTokens, HeldStep
from core.session_names import ONE_SHOT, one_shot_name
from driver.sessions import Sessions
from messages.commands import Command, parse_command
from messages.errors import KitsuneError
from messages.results import Done, Outcome

__all__ = ["ApprovedTabs", "Approving", "open_approved"]


class ApprovedTabs:
    """The tabs opened by approving held ``newTab`` steps, by call and step path: each until the resume
    that reports its step ``applied`` takes it, or until its call's checkpoint is dropped (from any thread)."""

    def __init__(self) -> None:
        self._tabs: dict[tuple[int, str], dict[str, Any]] = {}
        self._lock = threading.Lock()

    def record(self, call: int, path: str, result: Mapping[str, Any]) -> None:
        with self._lock:
            self._tabs[(call, path)] = dict(result)

    def take(self, call: int, path: str) -> dict[str, Any] | None:
        with self._lock:
            return self._tabs.pop((call, path), None)

    def forget(self, call: int) -> None:
        with self._lock:
            for key in [key for key in self._tabs if key[0] == call]:
                del self._tabs[key]


class _KeptSessions(Protocol):
    @property
    def sessions(self) -> Sessions: ...

    @property
    def approved(self) -> ApprovedTabs: ...


class _Resumes(Protocol):
    def holds(self, call: int) -> bool: ...


class Approving(Protocol):
    """What approving a held ``newTab`` needs of the node: its confirm tokens, its checkpoints, its sessions,
    and a direct action in the held call's name."""

    @property
    def confirms(self) -> ConfirmTokens: ...

    @property
    def resumes(self) -> _Resumes: ...

    @property
    def sessions(self) -> _KeptSessions: ...

    async def act(self, agent: str, command: Command, tab: int | None, confirm_token: str | None = None,
                  held: HeldStep | None = None) -> tuple[Outcome, int]: ...


async def open_approved(node: Approving, agent: str, body: dict[str, Any], token: str | None) -> tuple[Outcome, int]:
    """``POST /api/tabs {"op": "open", "session": "call" | "call:<id>", "confirm_token"}``: open the tab of a
    held one-shot ``newTab`` in its call's session; the outcome and the direct call's id."""
    if token is None:
        raise KitsuneError("invalid_parameter", 'open: a one-shot session ("call") is a container call\'s; a direct '
                           "open names a reuse session, or gives the confirm token of a call's held newTab",
                           state={"param": "session"})
    held = node.confirms.held_step(token, agent)
    if held is None:
        raise KitsuneError("confirm_token_invalid", "The confirm token approves no held newTab of a container call "
                           "of yours (wrong, used, expired or another action's); resume the call to be asked again; "
                           "nothing was done", state={"param": "confirm_token"})
    if body["session"] not in (ONE_SHOT, one_shot_name(held.call)):
        raise KitsuneError("invalid_parameter", f"open: the confirm token is call {held.call}'s; name its session "
                           f'"call" or "{one_shot_name(held.call)}"', state={"param": "session", "call": held.call})
    if not node.resumes.holds(held.call):
        raise KitsuneError("checkpoint_not_found", f"Call {held.call} holds no checkpoint on this node: its held "
                           "newTab cannot be approved; nothing was done", state={"call": held.call})
    command = parse_command({"action": "newTab", "session": ONE_SHOT,
                             **{k: body[k] for k in ("url", "node") if k in body}}, "")
    try:
        outcome, call = await node.act(agent, command, None, token, held=held)
    finally:  # the session is the held call's: kept for its resume, or closed if its checkpoint went meanwhile
        await node.sessions.sessions.call_ended(held.call, kept=node.resumes.holds(held.call))
    if isinstance(outcome, Done):
        node.sessions.approved.record(held.call, held.path, outcome.value)
    return outcome, call
