"""Requests between actors over the bus, and the subjects they travel on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from messages.commands import Command, command_to_json, is_write, parse_command
from messages.results import Outcome, outcome_from_json, outcome_to_json
from messages.wire import KIND, Message, checked

__all__ = ["NODE_OPS", "RequestEnded", "RequestRunning", "RequestWithdrawn", "Subjects", "TabCancel", "TabRequest"]

NODE_OPS = ("open", "tabs", "claims", "call", "live", "console", "tasks", "drain")
"""What a request to ``<fleet>.node.<name>.<op>`` asks of that node (:meth:`Subjects.node`)."""


@dataclass(frozen=True, slots=True)
class Subjects:
    """The subjects of one fleet: nodes that share a NATS server but not a fleet never meet."""

    fleet: str = "kitsune"
    """The fleet's name, the first token of its subjects."""

    def tab(self, tab_id: int) -> str:
        """Where the actor of tab ``tab_id`` takes :class:`TabRequest` (answered an outcome) and :class:`TabCancel`."""
        return f"{self.fleet}.tab.{tab_id}.do"

    @property
    def tabs(self) -> str:
        """A call's ``getTabs`` (a :class:`TabRequest`): the open tabs, answered ``Done({"tabs": [...]})``."""
        return f"{self.fleet}.tabs.list"

    def node(self, name: str, op: str) -> str:
        """Where node ``name`` takes fleet requests ``op``: ``open`` (a :class:`TabRequest` of a ``newTab``
        placed there), ``tabs`` (one of a ``getTabs``: its own tabs), ``claims`` (``messages.fleet``'s
        ``TakeOver``, ``ClaimTab``, ``ReleaseClaims``), ``call`` (``ForwardedCall``, ``AskCallStatus``,
        ``AskCallResult``), ``tasks`` (``TaskOp``: the ``tab`` tasks it keeps), ``live`` (``messages.live``'s
        requests), ``console`` (``AskNodePart``, ``AskThumbnail``), ``drain`` (``DrainNode``)."""
        return f"{self.fleet}.node.{name}.{op}"

    def live(self, viewer: str, direction: str) -> str:
        """A Live View relayed from the node a person reached to the tab's node: ``in`` carries their
        messages to the tab's node, ``out`` its frames and messages back (``messages.live``)."""
        return f"{self.fleet}.live.{viewer}.{direction}"

    def relay(self, key: str) -> str:
        """Where a call sent to another node has its events relayed as they happen (``key``: unguessable)."""
        return f"{self.fleet}.relay.{key}"

    def checkpoint(self, call: int) -> str:
        """Where the node holding call ``call``'s checkpoint takes resumes of it while it holds it
        (``messages.fleet``'s ``ResumeRequest``, ``ReissueToken``, ``PingHolder``)."""
        return f"{self.fleet}.ckpt.{call}"


@dataclass(frozen=True, slots=True)
class TabRequest:
    """Run one action (references resolved) in a tab; the reply is an outcome.

    The request has ``timeout`` seconds from when it was sent, waiting in the tab's queue
    included: a request the tab could not start by then is never run, and answers that nothing
    was sent.
    """

    command: Command
    """The action to run."""
    timeout: float
    """Seconds the request has, from when it was sent until its outcome."""
    deadline: float = field(default=0.0)
    """The same end as wall-clock time (``time.time()``), so that a request delayed on its way
    is not started late; 0 means ``timeout`` from when it arrived."""
    call: int | None = None
    """The audit call id of the call it belongs to (for the audit of writes a stopping node ends)."""
    path: str | None = None
    """The step path of that call it runs for."""
    id: str | None = None
    """Names a request sent over the bus, so its sender can withdraw it (:class:`TabCancel`)."""
    agent: str | None = None
    """The agent whose call sent it: a ``newTab`` opens in that agent's session (None: a user tab)."""
    session: str | None = None
    """The agent's session the call is for (``X-Kitsune-Session``): refs belong to (agent, session)."""
    as_read: bool = False
    """Run it only as a read (the policy of the call's node would refuse or hold it as a write): a ``callSiteTool``
    of a tool its page declares ``readOnlyHint``, judged by the tab's node; anything else answers
    ``site_tool_writes`` with nothing sent."""

    @property
    def writes(self) -> bool:
        """Whether the tab runs it as a write (serialized, admitted against claims and owners, unknown when lost)."""
        return is_write(self.command) and not self.as_read

    def seconds_left(self, wall_clock: float) -> float:
        """Seconds left on arrival, ``wall_clock`` being ``time.time()`` then: the earlier of both ends."""
        return min(self.timeout, self.deadline - wall_clock) if self.deadline else self.timeout

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"command": command_to_json(self.command), "timeout": self.timeout,
                                "deadline": self.deadline}
        for key in ("call", "path", "id", "agent", "session"):
            if (value := getattr(self, key)) is not None:
                body[key] = value
        if self.as_read:
            body["as_read"] = True
        return body

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TabRequest:
        call, path, id_, agent = data.get("call"), data.get("path"), data.get("id"), data.get("agent")
        return cls(parse_command(data["command"]), float(data["timeout"]), float(data.get("deadline", 0.0)),
                   int(call) if call is not None else None, str(path) if path is not None else None,
                   str(id_) if id_ is not None else None, str(agent) if agent is not None else None,
                   str(data["session"]) if data.get("session") is not None else None, data.get("as_read") is True)


@dataclass(frozen=True, slots=True)
class TabCancel(Message):
    """Withdraw a request sent over the bus whose answer did not come in time; answered
    :class:`RequestWithdrawn` (it never started and never will: nothing was sent), :class:`RequestEnded`
    or :class:`RequestRunning`."""

    id: str
    """The :attr:`TabRequest.id` of the request."""


@dataclass(frozen=True, slots=True)
class RequestWithdrawn(Message):
    """A request withdrawn before it started: it never runs, nothing was sent."""


@dataclass(frozen=True, slots=True)
class RequestRunning(Message):
    """A request that started: its outcome is its own answer's."""


@dataclass(frozen=True, slots=True)
class RequestEnded(Message):
    """A request that ended before it could be withdrawn."""

    outcome: Outcome
    """How it ended."""

    def to_json(self) -> dict[str, Any]:
        return {KIND: self.KIND, "outcome": outcome_to_json(self.outcome)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RequestEnded:
        return cls(outcome_from_json(checked(data, "outcome", dict[str, Any])))
