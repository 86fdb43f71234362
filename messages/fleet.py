"""The requests one node of a fleet sends another, and their answers, by the subject they travel on
(:class:`messages.requests.Subjects`; Live View's are ``messages.live``).

A request that raised an error is answered :class:`~messages.wire.ErrorAnswer` (read back, it is raised);
the answers here are the others. The nodes of a fleet trust each other (their NATS credentials
authenticate them): an agent a request names is the one its sending node authenticated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Self

from messages.commands import CallKind, CallSpec, command_to_json, parse_command
from messages.errors import KitsuneError, invalid_call
from messages.results import Failure
from messages.wire import KIND, Message, checked

__all__ = [
    "Acknowledged", "AskCallResult", "AskCallStatus", "AskNodePart", "AskThumbnail", "CallAnswered",
    "CallDeclined", "CallGone", "CallStatus", "ClaimDecided", "ClaimTab", "DrainNode", "DrainState", "ForwardedCall",
    "NodePart", "PingHolder", "ReissueToken", "Reissued", "ReleaseClaims", "ResumeRequest", "TakeOver",
    "TaskAnswered", "TaskOp", "Thumbnail", "TookOver",
]


@dataclass(frozen=True, slots=True)
class Acknowledged(Message):
    """The answer to a request that has nothing to say but that it was done (a release, a ping)."""


# --- <fleet>.node.<name>.claims: claims and takeovers of the node's tabs ----------------------

@dataclass(frozen=True, slots=True)
class TakeOver(Message):
    """Make ``agent`` the owner of ``tab``; answered :class:`TookOver`."""

    tab: int
    """The tab, one of the answering node's."""
    agent: str
    """Its new owner."""


@dataclass(frozen=True, slots=True)
class TookOver(Message):
    """A takeover done."""

    previous: str
    """The tab's owner before it."""


@dataclass(frozen=True, slots=True)
class ClaimTab(Message):
    """Claim ``tab`` for the writes of one sequence of a call; answered :class:`ClaimDecided`."""

    call: int
    """The call."""
    owner: str
    """The sequence of the call that claims it."""
    tab: int
    """The tab, one of the answering node's."""
    node: str
    """The node the call runs on."""


@dataclass(frozen=True, slots=True)
class ClaimDecided(Message):
    """Whether a claim holds."""

    failure: Failure | None
    """Why it does not (``tab_claimed``, ``fleet_unavailable``); None: it holds."""

    def to_json(self) -> dict[str, Any]:
        return {KIND: self.KIND, "failure": self.failure.to_json() if self.failure is not None else None}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        failure = checked(data, "failure", dict[str, Any] | None)
        if failure is None:
            return cls(None)
        return cls(Failure(checked(failure, "error", str), checked(failure, "code", str),
                           checked(failure, "retryable", bool), checked(failure, "state", dict[str, Any] | None, None)))


@dataclass(frozen=True, slots=True)
class ReleaseClaims(Message):
    """Release a call's claims on the answering node's tabs; answered :class:`Acknowledged`."""

    call: int
    """The call."""
    owner: str | None
    """The sequence whose claims end; None: all of the call's."""


# --- <fleet>.node.<name>.tasks: the ``tab`` tasks the node keeps (bridge.tasks.fleet) ------------

TaskOpName = Literal["find", "create", "get", "heartbeat", "checkpoint", "complete", "delete", "may_take_over",
                     "take_over", "call_started", "call_ended", "tabs_free"]


@dataclass(frozen=True, slots=True)
class TaskOp(Message):
    """A request about a ``tab`` task, sent to the node of its tab that keeps it; answered :class:`TaskAnswered`."""

    op: TaskOpName
    """``find`` (its record), ``create`` (keep ``body.task``), ``tabs_free`` (``task_conflict`` when one of
    ``body.tabs`` is in a ``tab`` task the node keeps), a route's operation on it, or a call of the
    session's through the sending node (``call_started``, ``call_ended``: ``bridge.tasks.calls.Forward``)."""
    task: str
    """The task's id."""
    agent: str | None
    """The agent the request is for (None: an operator's revocation)."""
    session: str | None
    """The agent's session (``X-Kitsune-Session``)."""
    body: dict[str, Any]
    """The operation's arguments: ``task`` (a record), ``summary``, ``messages``, ``force``, ``expire``, ``by``."""


@dataclass(frozen=True, slots=True)
class TaskAnswered(Message):
    """A ``tab`` task's node answered."""

    answer: dict[str, Any] | None
    """What the operation answered (a view, a record); None: the node keeps no such task."""
    record: dict[str, Any] | None = None
    """The task's record after it (the asking node remembers it)."""


# --- <fleet>.node.<name>.call: a call on the node's tabs, sent whole ---------------------------

@dataclass(frozen=True, slots=True)
class ForwardedCall(Message):
    """A call sent whole to the node of its tabs; answered :class:`CallAnswered` or :class:`CallDeclined`."""

    call: int
    """Its id: the forwarding node recorded it."""
    spec: CallSpec
    """What to run, its default tab filled in."""
    workflow: tuple[str, str] | None
    """The name and SHA-256 of the workflow file it ran, for a workflow call (the tab's node must have the same)."""
    agent: str | None
    """The agent who asked."""
    session: str | None
    """The agent's session it runs for (its tasks' leases)."""
    rules: str
    """The digest of the agent's rules on the forwarding node (``bridge.fleet.calls.rules_digest``)."""
    relay: str | None
    """Where its events go as they happen (a streamed call), or None."""
    origin: str
    """The node that sent it (when it leaves the fleet, the call's later steps are not sent)."""

    def to_json(self) -> dict[str, Any]:
        spec = self.spec
        return {KIND: self.KIND, "call": self.call, "agent": self.agent, "session": self.session,
                "rules": self.rules, "relay": self.relay, "origin": self.origin, "workflow": self.workflow,
                "spec": {"kind": spec.kind, "commands": [command_to_json(c) for c in spec.commands],
                         "tabId": spec.default_tab, "stopOnWarning": spec.stop_on_warning, "timeout": spec.timeout}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        spec = checked(data, "spec", dict[str, Any])
        commands = tuple(parse_command(raw, str(i)) for i, raw in enumerate(checked(spec, "commands", list[Any])))
        kind: CallKind = checked(spec, "kind", CallKind)
        return cls(checked(data, "call", int),
                   CallSpec(kind, commands, checked(spec, "tabId", int | None), checked(spec, "stopOnWarning", bool),
                            checked(spec, "timeout", float)),
                   checked(data, "workflow", tuple[str, str] | None), checked(data, "agent", str | None),
                   checked(data, "session", str | None), checked(data, "rules", str),
                   checked(data, "relay", str | None), checked(data, "origin", str))


@dataclass(frozen=True, slots=True)
class CallAnswered(Message):
    """A call's or a resume's response, as the node that ran it answered it."""

    body: dict[str, Any]
    """The response's body."""
    status: int
    """Its HTTP status."""


@dataclass(frozen=True, slots=True)
class CallDeclined(Message):
    """The tab's node does not run the call: the forwarding node runs it itself."""

    reason: Literal["rules", "workflow"]
    """What differs: the agent's rules, or the workflow file."""


@dataclass(frozen=True, slots=True)
class AskCallStatus(Message):
    """How a call forwarded to the answering node is; answered :class:`CallStatus`."""

    call: int
    """The call."""


@dataclass(frozen=True, slots=True)
class CallStatus(Message):
    """How a forwarded call is."""

    status: Literal["running", "ended", "unknown"]
    """Running, ended (its response kept a while), or unknown (never arrived, or forgotten)."""


@dataclass(frozen=True, slots=True)
class AskCallResult(Message):
    """The response of a forwarded call that ended, whose answer was lost; answered :class:`CallAnswered` (with
    a new resume token when it kept a checkpoint), :class:`~messages.wire.ErrorAnswer` or :class:`CallGone`."""

    call: int
    """The call."""


@dataclass(frozen=True, slots=True)
class CallGone(Message):
    """A forwarded call's response is no longer kept (or was given already)."""


# --- <fleet>.ckpt.<call>: the node that holds a call's checkpoint ------------------------------

@dataclass(frozen=True, slots=True)
class PingHolder(Message):
    """Whether a node still holds the checkpoint; answered :class:`Acknowledged`."""


@dataclass(frozen=True, slots=True)
class ResumeRequest(Message):
    """A resume of a checkpointed call (spec: browser_resume), parsed once where it enters
    (:meth:`from_body`) and carried as is to the node that holds the checkpoint; answered :class:`CallAnswered`."""

    call: int
    """The call whose checkpoint is resumed."""
    resume_token: str
    """The token as the caller gave it (the holder compares its hash)."""
    observed: Any = None
    """What the caller observed of steps, as it gave it (checked against the checkpoint's steps)."""
    agent: str | None = None
    """The agent who asked."""
    session: str | None = None
    """The agent's session it asked for (its tasks' leases)."""

    @classmethod
    def from_body(cls, body: Mapping[str, Any], agent: str | None, session: str | None) -> ResumeRequest:
        """The resume an HTTP body asks for: ``invalid_parameter``, ``unknown_parameter`` when it is malformed."""
        unknown = sorted(set(body) - {"call", "resume_token", "observed"})
        if unknown:
            raise invalid_call("unknown_parameter", "", f"a resume takes no {unknown[0]!r}", param=unknown[0])
        call, token = body.get("call"), body.get("resume_token")
        if isinstance(call, bool) or not isinstance(call, int):
            raise KitsuneError("invalid_parameter", "call must be an integer", state={"param": "call"})
        if not isinstance(token, str):
            raise KitsuneError("invalid_parameter", "resume_token must be a string", state={"param": "resume_token"})
        return cls(call, token, body.get("observed"), agent, session)


@dataclass(frozen=True, slots=True)
class ReissueToken(Message):
    """A new resume token for ``agent``'s checkpoint of ``call`` (the old one stops working); answered
    :class:`Reissued`."""

    call: int
    """The call."""
    agent: str | None
    """The agent whose checkpoint it is."""


@dataclass(frozen=True, slots=True)
class Reissued(Message):
    """A new resume token."""

    resume_token: str | None
    """The token; None when the node holds no such checkpoint (any more)."""


# --- <fleet>.node.<name>.console: what only the node knows, for the fleet's consoles ------------

@dataclass(frozen=True, slots=True)
class AskNodePart(Message):
    """What only the answering node knows; answered :class:`NodePart`."""


@dataclass(frozen=True, slots=True)
class NodePart(Message):
    """What only one node knows, as the console lists it (metadata only: no token, no typed value)."""

    calls: list[dict[str, Any]]
    """Its calls in flight."""
    checkpoints: list[dict[str, Any]]
    """Its checkpoints."""
    sessions: list[dict[str, Any]]
    """Its sessions."""
    tombstones: list[dict[str, Any]]
    """Its sessions that ended, a while."""
    held: list[dict[str, Any]]
    """Its tabs a person controls in Live View (``tabId``, ``by``)."""


@dataclass(frozen=True, slots=True)
class AskThumbnail(Message):
    """A thumbnail of one of the answering node's tabs; answered :class:`Thumbnail`."""

    tab: int
    """The tab."""


@dataclass(frozen=True, slots=True)
class Thumbnail(Message):
    """A tab's thumbnail."""

    jpeg: str
    """The JPEG, in base64."""



# --- <fleet>.node.<name>.drain: the node leaves the fleet gracefully --------------------------

@dataclass(frozen=True, slots=True)
class DrainNode(Message):
    """Drain the answering node (``bridge.drain``); answered :class:`DrainState` (a node draining already keeps
    its first deadline)."""

    deadline: float | None = None
    """Seconds its calls in flight get to finish; None: the node's ``drain_deadline``."""


@dataclass(frozen=True, slots=True)
class DrainState(Message):
    """Where a node's drain is."""

    node: str
    """The node."""
    state: Literal["serving", "draining", "left"]
    """Serving (no drain), draining, or left the fleet."""
    deadline: float | None = None
    """Seconds its calls in flight were given (None while serving)."""
    calls: int = 0
    """Its calls in flight now."""
