"""Requests between actors over the bus, and the subjects they travel on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from messages.commands import Command, command_to_json, parse_command

__all__ = ["NODE_OPS", "Subjects", "TabCancel", "TabRequest"]

NODE_OPS = ("open", "tabs", "claims", "call")
"""What a request to ``<fleet>.node.<name>.<op>`` asks of that node (:meth:`Subjects.node`)."""


@dataclass(frozen=True, slots=True)
class Subjects:
    """The subjects of one fleet: nodes that share a NATS server but not a fleet never meet."""

    fleet: str = "kitsune"
    """The fleet's name, the first token of its subjects."""

    def tab(self, tab_id: int) -> str:
        """Where the actor of tab ``tab_id`` takes its requests (and their cancellations)."""
        return f"{self.fleet}.tab.{tab_id}.do"

    @property
    def tabs(self) -> str:
        """Request (a ``getTabs``): the open tabs; the reply is ``Done({"tabs": [...]})``."""
        return f"{self.fleet}.tabs.list"

    def node(self, name: str, op: str) -> str:
        """Where node ``name`` takes fleet requests ``op``: ``open`` (a ``newTab`` placed there), ``tabs``
        (its own tabs), ``claims`` (claims and takeovers of its tabs), ``call`` (a call on its tabs)."""
        return f"{self.fleet}.node.{name}.{op}"

    def live(self, viewer: str, direction: str) -> str:
        """A Live View relayed from the node a person reached to the tab's node: ``in`` carries their
        messages to the tab's node, ``out`` its frames and messages back."""
        return f"{self.fleet}.live.{viewer}.{direction}"

    def relay(self, key: str) -> str:
        """Where a call sent to another node has its events relayed as they happen (``key``: unguessable)."""
        return f"{self.fleet}.relay.{key}"

    def checkpoint(self, call: int) -> str:
        """Where the node holding call ``call``'s checkpoint takes resumes of it, while it holds it."""
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

    def seconds_left(self, wall_clock: float) -> float:
        """Seconds left on arrival, ``wall_clock`` being ``time.time()`` then: the earlier of both ends."""
        return min(self.timeout, self.deadline - wall_clock) if self.deadline else self.timeout

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"command": command_to_json(self.command), "timeout": self.timeout,
                                "deadline": self.deadline}
        for key in ("call", "path", "id", "agent", "session"):
            if (value := getattr(self, key)) is not None:
                body[key] = value
        return body

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TabRequest:
        call, path, id_, agent = data.get("call"), data.get("path"), data.get("id"), data.get("agent")
        return cls(parse_command(data["command"]), float(data["timeout"]), float(data.get("deadline", 0.0)),
                   int(call) if call is not None else None, str(path) if path is not None else None,
                   str(id_) if id_ is not None else None, str(agent) if agent is not None else None,
                   str(data["session"]) if data.get("session") is not None else None)


@dataclass(frozen=True, slots=True)
class TabCancel:
    """Withdraw a request sent over the bus whose answer did not come in time.

    The reply says what became of it: ``{"withdrawn": true}`` (it never started and never will:
    nothing was sent), ``{"outcome": ...}`` (it ended, with this outcome), or ``{"running": true}``.
    """

    id: str
    """The :attr:`TabRequest.id` of the request."""

    def to_json(self) -> dict[str, Any]:
        return {"cancel": self.id}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TabCancel:
        return cls(str(data["cancel"]))
