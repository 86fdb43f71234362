"""Audit entries (spec: Audit log): what is about to happen, recorded before it acts.

Each kind of entry is a frozen record; :meth:`AuditEntry.to_json` gives the form the audit stream
and the JSON-lines file keep (the file puts the entry's id first, as ``call``). A command's
parameters enter an entry only as :func:`redacted_params` gives them, typed values redacted and
JavaScript bodies dropped: no token, typed value or script is ever a field of an entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, NewType

from messages.commands import Command, audit_params

__all__ = ["AuditEntry", "CallEntry", "DirectEntry", "InterruptedEntry", "LiveViewEntry", "ObservedStepEntry",
           "RedactedParams", "ResumeEntry", "SiteToolEntry", "StepEntry", "TakeoverEntry", "TaskEntry",
           "WithdrawnEntry", "redacted_params"]

RedactedParams = NewType("RedactedParams", Mapping[str, Any])
"""A command's parameters as the audit log may keep them (only :func:`redacted_params` makes one)."""


def redacted_params(command: Command) -> RedactedParams:
    """``command``'s parameters with typed values redacted and JavaScript bodies dropped."""
    return RedactedParams(audit_params(command))


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditEntry:
    """Base of every audit entry."""

    kind: ClassVar[str]
    time: float
    """Unix time in seconds, to the millisecond."""
    agent: str | None
    """The agent it was done for; None for the node itself."""

    def to_json(self) -> dict[str, Any]:
        """The entry as the audit stream keeps it: ``{"time", "agent", "kind", fields}``."""
        return {"time": self.time, "agent": self.agent, "kind": self.kind, **self._fields()}

    def _fields(self) -> dict[str, Any]:
        return {}


@dataclass(frozen=True, slots=True, kw_only=True)
class CallEntry(AuditEntry):
    """A container call is about to run; its entry's id is the call's id."""

    kind = "call"
    call_kind: str
    """batch, parallel or workflow."""
    commands: int
    """How many top-level commands it has."""
    tab_id: int | None
    """Its default tab."""

    def _fields(self) -> dict[str, Any]:
        return {"call_kind": self.call_kind, "commands": self.commands, "tabId": self.tab_id}


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeEntry(AuditEntry):
    """A checkpointed call is about to be resumed."""

    kind = "resume"
    call: int
    """The resumed call's id."""

    def _fields(self) -> dict[str, Any]:
        return {"parent": {"call": self.call}}


@dataclass(frozen=True, slots=True, kw_only=True)
class StepEntry(AuditEntry):
    """A step of a container call is about to be sent."""

    kind = "step"
    action: str
    tab_id: int | None
    params: RedactedParams
    call: int
    """The container call's id (the original call's, for a resumed step)."""
    path: str
    """The step's progress path."""
    resumed: bool = False
    """The step runs in a resume."""

    def _fields(self) -> dict[str, Any]:
        parent: dict[str, Any] = {"call": self.call, "path": self.path}
        if self.resumed:
            parent["resumed"] = True
        return {"action": self.action, "tabId": self.tab_id, "params": self.params, "parent": parent}


@dataclass(frozen=True, slots=True, kw_only=True)
class ObservedStepEntry(StepEntry):
    """A resumed step the caller reported ``applied``: marked ok, and not sent."""

    resumed: bool = True
    """Always: only a resume takes observations."""

    def _fields(self) -> dict[str, Any]:
        fields = StepEntry._fields(self)  # not super(): slotted dataclasses are rebuilt classes
        return {**fields, "params": {**self.params, "observed": "applied", "sent": False}}


@dataclass(frozen=True, slots=True, kw_only=True)
class InterruptedEntry(AuditEntry):
    """A write was running when its node stopped: its outcome is unknown."""

    kind = "interrupted"
    action: str
    tab_id: int
    call: int | None
    """The call it belonged to, when known."""
    path: str | None
    """Its step's progress path, when known."""

    def _fields(self) -> dict[str, Any]:
        return {"action": self.action, "tabId": self.tab_id, "outcome": "unknown", "reason": "node_stopped",
                "parent": {"call": self.call, "path": self.path}}


@dataclass(frozen=True, slots=True, kw_only=True)
class WithdrawnEntry(AuditEntry):
    """A write whose ``step`` entry was written ahead of its turn (``core.ahead``) was not sent: the call stopped
    before it."""

    kind = "withdrawn"
    action: str
    tab_id: int | None
    call: int
    path: str

    def _fields(self) -> dict[str, Any]:
        return {"action": self.action, "tabId": self.tab_id, "outcome": "skipped", "sent": False,
                "parent": {"call": self.call, "path": self.path}}


@dataclass(frozen=True, slots=True, kw_only=True)
class TakeoverEntry(AuditEntry):
    """An agent is about to take a tab over."""

    kind = "takeover"
    tab_id: int

    def _fields(self) -> dict[str, Any]:
        return {"tabId": self.tab_id}


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveViewEntry(AuditEntry):
    """A Live View of a tab: a link made for ``agent`` (an agent, or ``operator:<name>``), a person
    who opened it, or handed the tab back. Never its token."""

    kind = "live_view"
    op: str
    """``link``, ``opened``, ``input``, ``input_refused`` or ``handed_back``."""
    tab_id: int
    detail: Mapping[str, Any] = field(default_factory=dict)
    """``control`` of a link or connection; of an input, its ``input`` event type and for a named key its
    ``key`` and ``modifiers`` (typed text only as ``"[redacted]"``: ``driver.live_inputs``)."""

    def _fields(self) -> dict[str, Any]:
        return {"op": self.op, "tabId": self.tab_id, **self.detail}


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskEntry(AuditEntry):
    """A task of ``agent`` is about to be created, forked, taken over, completed, revoked or expired."""

    kind = "task"
    op: str
    """``created``, ``forked``, ``takeover``, ``completed``, ``revoked`` or ``expired``; an operator's
    ``takeover_approved`` or ``takeover_denied`` of a held takeover."""
    task_id: str
    source: str | None = None
    """The task a fork was made from."""

    def _fields(self) -> dict[str, Any]:
        return {"op": self.op, "taskId": self.task_id, **({"from": self.source} if self.source else {})}


@dataclass(frozen=True, slots=True, kw_only=True)
class SiteToolEntry(AuditEntry):
    """A page's tool is about to be called by a ``callSiteTool`` step (its input is in the step's entry,
    redacted); never a continuation token."""

    kind = "site_tool"
    tool: str
    origin: str
    """The origin of the document that declared it."""
    tab_id: int
    call: int
    path: str | None

    def _fields(self) -> dict[str, Any]:
        return {"op": "called", "tool": self.tool, "origin": self.origin, "tabId": self.tab_id,
                "parent": {"call": self.call, "path": self.path}}


@dataclass(frozen=True, slots=True, kw_only=True)
class DirectEntry(AuditEntry):
    """A direct call (one action outside any container) is about to run; its id is the call's id."""

    kind = "direct"
    action: str
    tab_id: int | None
    params: RedactedParams

    def _fields(self) -> dict[str, Any]:
        return {"action": self.action, "tabId": self.tab_id, "params": self.params}


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEntry(AuditEntry):
    """An agent's browser session opened, was promoted, closed, swept or stored, or its state saved or restored."""

    kind = "session"
    op: str
    """``opened``, ``promoted``, ``closed``, ``swept``, ``stored`` (a persistent one freed after its save), or a
    persistent one's state ``saved`` or ``restored``."""
    session: str
    mode: str
    call: int | None
    """The call it happened in (or the one that opened the session)."""
    reason: str | None = None
    """Why it closed."""
    previous: str | None = None
    """The one-shot name of a promoted session."""
    size: int | None = None
    """The bytes of a state saved or restored (never the state)."""

    def _fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"op": self.op, "session": self.session, "mode": self.mode,
                                  "parent": {"call": self.call}}
        return fields | {k: v for k, v in (("reason", self.reason), ("previous", self.previous),
                                           ("bytes", self.size)) if v is not None}
