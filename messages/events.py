"""Events of the step log: what happened to a call and its steps, in the past tense.

A write records :class:`StepDispatched` before it is sent, so a dispatched write with no
terminal event is ``unknown``, never guessed ``ok``. Events name steps by their progress path
(``"2"``, ``"1.2"``, ``"0.1.3"``) and never carry typed values, JavaScript, results or tokens.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

__all__ = [
    "BlockWriteSucceeded", "CallEnded", "CallResumed", "CallStarted", "ContinuationExpired", "ContinuationRedeemed",
    "ContinuationRequested", "ContinuationRevoked", "EndReason", "Event", "EVENT_TYPES", "Observation",
    "OutlineStep", "SITE_TOOL_EVENTS", "SessionChanged", "SiteToolCalled", "SiteToolChainCompleted",
    "SiteToolEvent", "StepDispatched", "StepFailed", "StepHeld", "StepEvent", "StepKept", "StepObserved",
    "StepOutcomeUnknown", "StepSkipped", "StepStarted", "StepSucceeded", "event_from_json", "event_to_json",
]

EndReason = Literal["completed", "stopped", "container_timeout", "internal_error"]
Observation = Literal["applied", "not_applied"]


@dataclass(frozen=True, slots=True)
class OutlineStep:
    """The shape of one step, without its parameters: enough to lay out ``progress``."""

    action: str
    """The step's action or block name."""
    tab_id: int | None = None
    """The tab it acts on when known before it runs."""
    steps: tuple[OutlineStep, ...] = ()
    """A sequence's steps."""
    sequences: tuple[tuple[OutlineStep, ...], ...] = ()
    """A parallel's sequences."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.action, "tab_id": self.tab_id}
        if self.steps:
            out["steps"] = [s.to_json() for s in self.steps]
        if self.sequences:
            out["sequences"] = [[s.to_json() for s in seq] for seq in self.sequences]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> OutlineStep:
        steps, sequences = data.get("steps"), data.get("sequences")  # absent for most: a leaf step
        return cls(data["action"], data["tab_id"],
                   tuple(cls.from_json(s) for s in steps) if steps else (),
                   tuple(tuple(cls.from_json(s) for s in seq) for seq in sequences) if sequences else ())


@dataclass(frozen=True, slots=True)
class Event:
    """Base of every event."""

    kind: ClassVar[str]
    call: int
    """The call's audit id."""


@dataclass(frozen=True, slots=True)
class CallStarted(Event):
    """A container call began; its steps are laid out, none started."""

    kind = "CallStarted"
    call_kind: str
    """batch, parallel or workflow."""
    outline: tuple[OutlineStep, ...]
    """The top-level steps."""
    timeout: float
    """The container deadline in seconds."""


@dataclass(frozen=True, slots=True)
class CallResumed(CallStarted):
    """A checkpointed call began again; the step log starts over for this run."""

    kind = "CallResumed"
    attempt: int
    """1 for the first resume, 2 for the next, ..."""


@dataclass(frozen=True, slots=True)
class StepEvent(Event):
    """Base of the events of one step."""

    path: str
    """The step's progress path."""


@dataclass(frozen=True, slots=True)
class StepStarted(StepEvent):
    """A step began (its references resolved, its tab known)."""

    kind = "StepStarted"
    action: str
    tab_id: int | None


@dataclass(frozen=True, slots=True)
class StepDispatched(StepEvent):
    """A write is about to be sent to the page: from here its outcome can be unknown. It may come before the
    step's ``StepStarted`` (recorded ahead of its turn); a step the run then never sends ends ``StepSkipped``."""

    kind = "StepDispatched"


@dataclass(frozen=True, slots=True)
class BlockWriteSucceeded(StepEvent):
    """A write inside a one-step block (if, while, try, retry, broadcast) ran ok."""

    kind = "BlockWriteSucceeded"


@dataclass(frozen=True, slots=True)
class StepSucceeded(StepEvent):
    """A step did what it was asked."""

    kind = "StepSucceeded"
    warning: str | None = None


@dataclass(frozen=True, slots=True)
class StepFailed(StepEvent):
    """A step failed, and either nothing was sent or sending it again is safe."""

    kind = "StepFailed"
    code: str
    error: str
    retryable: bool


@dataclass(frozen=True, slots=True)
class StepOutcomeUnknown(StepEvent):
    """A step was sent and whether it took effect is not known."""

    kind = "StepOutcomeUnknown"
    code: str
    error: str


@dataclass(frozen=True, slots=True)
class StepHeld(StepEvent):
    """A write was held for approval (ask-before-act); nothing was sent."""

    kind = "StepHeld"
    code: str
    error: str


@dataclass(frozen=True, slots=True)
class StepSkipped(StepEvent):
    """A step never started."""

    kind = "StepSkipped"
    reason: str


@dataclass(frozen=True, slots=True)
class StepKept(StepEvent):
    """A resume kept a step that ran ok before; nothing is sent, its result is reused."""

    kind = "StepKept"
    tab_id: int | None


@dataclass(frozen=True, slots=True)
class StepObserved(StepEvent):
    """The caller reported a step's outcome; ``applied`` marks it ok without sending it."""

    kind = "StepObserved"
    observed: Observation


@dataclass(frozen=True, slots=True)
class CallEnded(Event):
    """The call stopped; steps that never started are skipped."""

    kind = "CallEnded"
    reason: EndReason


@dataclass(frozen=True, slots=True)
class SessionChanged(Event):
    """A browser session of the call's agent opened, was promoted, reset, closed, swept or stored during the call (or,
    for a sweep or a close outside any call, after the call that opened it)."""

    kind = "SessionChanged"
    op: Literal["opened", "promoted", "reset", "closed", "swept", "stored"]
    """``stored``: a persistent session saved and its context freed (it is restored on its next use)."""
    agent: str
    session: str
    mode: str
    reason: str | None = None
    """Why it closed."""


@dataclass(frozen=True, slots=True)
class SiteToolEvent(Event):
    """Base of what happened inside a ``callSiteTool`` step: never its input, output or tokens."""

    path: str | None
    """The step's progress path (None for a direct call)."""
    tab_id: int
    tool: str
    """The site tool's name."""
    origin: str
    """The origin of the document it happened in."""


@dataclass(frozen=True, slots=True)
class SiteToolCalled(SiteToolEvent):
    """The node called a page's tool with the step's input."""

    kind = "SiteToolCalled"


@dataclass(frozen=True, slots=True)
class ContinuationRequested(SiteToolEvent):
    """A running invocation asked for a continuation token (its work goes on in another document)."""

    kind = "ContinuationRequested"


@dataclass(frozen=True, slots=True)
class ContinuationRedeemed(SiteToolEvent):
    """A document of the same origin and tab redeemed the token; the tool goes on there."""

    kind = "ContinuationRedeemed"
    frame: str
    """``main`` or ``iframe``: where it goes on."""


@dataclass(frozen=True, slots=True)
class SiteToolChainCompleted(SiteToolEvent):
    """The last invocation settled and no token is outstanding: its output is the step's result."""

    kind = "SiteToolChainCompleted"
    documents: int
    """How many documents the chain crossed."""


@dataclass(frozen=True, slots=True)
class ContinuationExpired(SiteToolEvent):
    """A token was not redeemed within its lifetime: the step's outcome is unknown."""

    kind = "ContinuationExpired"


@dataclass(frozen=True, slots=True)
class ContinuationRevoked(SiteToolEvent):
    """An outstanding token was revoked: its call ended another way first."""

    kind = "ContinuationRevoked"
    reason: str
    """``timeout``, ``cancelled``, ``tab_closed``, ``navigated``, ``failed``, or the end of its authority:
    ``task_revoked``, ``task_leased`` (its task taken over), ``url_denied``."""


SITE_TOOL_EVENTS: tuple[type[SiteToolEvent], ...] = (
    SiteToolCalled, ContinuationRequested, ContinuationRedeemed, SiteToolChainCompleted, ContinuationExpired,
    ContinuationRevoked,
)

_EVENTS: tuple[type[Event], ...] = (
    CallStarted, CallResumed, StepStarted, StepDispatched, BlockWriteSucceeded, StepSucceeded, StepFailed,
    StepOutcomeUnknown, StepHeld, StepSkipped, StepKept, StepObserved, CallEnded, SessionChanged, *SITE_TOOL_EVENTS,
)
EVENT_TYPES: Mapping[str, type[Event]] = {cls.kind: cls for cls in _EVENTS}
_FIELDS: Mapping[type[Event], tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in EVENT_TYPES.values()
}


_WITH_OUTLINE = frozenset(cls for cls, names in _FIELDS.items() if "outline" in names)


def event_to_json(event: Event) -> dict[str, Any]:
    """An event's wire form: ``{"type": ..., fields}``."""
    out: dict[str, Any] = {"type": event.kind}
    for name in _FIELDS[type(event)]:
        value = getattr(event, name)
        out[name] = [step.to_json() for step in value] if name == "outline" else value
    return out


def event_from_json(data: Mapping[str, Any]) -> Event:
    """Parse an event's wire form back."""
    cls = EVENT_TYPES[data["type"]]
    if cls in _WITH_OUTLINE:
        fields = {name: data[name] for name in _FIELDS[cls]}
        fields["outline"] = tuple(OutlineStep.from_json(s) for s in fields["outline"])
        return cls(**fields)
    return cls(*[data[name] for name in _FIELDS[cls]])  # positional: a replay decodes thousands
