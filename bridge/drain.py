"""A node that leaves its fleet gracefully: its drain, one ordered sequence (issue 34).

``kitsune drain``, ``POST /api/fleet/nodes/{id}/drain`` and SIGTERM start it; it runs once, in order:

1. **Stop taking.** The node's registry entry says ``draining`` at once (the fleet places new tabs on
   the other nodes), ``/readyz`` answers 503, and a new call that reaches the node (its HTTP API, its
   MCP tools, a call another node forwards, a step on one of its tabs) is refused with
   ``node_draining`` (503, retryable; nothing sent), with ``home``: the node that holds the call's session now,
   when another one does (a persistent session restored there). A call the fleet numbered before the drain
   began is in flight: it goes on. Call ids are the audit stream's sequence numbers, shared by the
   fleet, so the last one when the drain begins (its *watermark*) tells the two apart.
2. **Finish.** The calls in flight on the node (its own, and those forwarded to it) run to their end,
   up to the deadline.
3. **Save and interrupt.** The node's persistent sessions are saved while the browser is whole, then the calls
   still running past the deadline end as an interrupted call ends (``Node.interrupt`` does both, in that
   order): a write that was running ends ``unknown``, and the audit log says ``interrupted``. Their next
   use, on another node, restores them.
4. **Leave.** Its heartbeat stops and its registry entry, its tabs' keys (their claims with them) and
   its sessions' keys are deleted at once: the other nodes see it leave and end their part of its
   calls, nothing is left to expire.
5. **Left.** :attr:`Drain.left` is set; ``kitsune serve`` exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Literal

from actors.bus import Handler
from actors.serving import typed
from messages.commands import Command
from messages.contract import MAX_DRAIN_DEADLINE
from messages.errors import KitsuneError
from messages.fleet import DrainNode, DrainState
from messages.requests import TabRequest
from messages.results import Failed, Failure, Outcome

__all__ = ["Drain", "DrainParts"]

log = logging.getLogger(__name__)

Step = Callable[[], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class DrainParts:
    """What the drain does with the rest of its node, in its order."""

    announce: Step
    """Say ``draining`` in the fleet's registry (placement skips the node)."""
    watermark: Callable[[], Awaitable[int]]
    """The fleet's last call id now (the audit stream's last sequence number)."""
    interrupt: Step
    """Save the node's persistent sessions, then end what still runs on its tabs (writes running end ``unknown``)."""
    leave: Step
    """Stop the heartbeat; delete the node's registry entry and its keys."""
    home: Callable[[str | None, int | None, Command | None], Awaitable[str | None]]
    """Where the session of an agent's call (on a tab, or a command's) lives now, when another node serves it."""


class Drain:
    """The drain of one node (on its loop): the calls in flight counted, new ones refused once it began."""

    def __init__(self, node: str, deadline: float, parts: DrainParts) -> None:
        self.node = node
        self.default_deadline = deadline
        """Seconds the calls in flight get when the drain names no deadline (``drain_deadline``)."""
        self._parts = parts
        self.state: Literal["serving", "draining", "left"] = "serving"
        self.deadline: float | None = None
        self._since: int | None = None
        """The watermark: the fleet's last call id when the drain began (None until it is read)."""
        self._flight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self.left = asyncio.Event()
        """Set once the node left the fleet (or its drain failed): it stops."""
        self._task: asyncio.Task[None] | None = None

    @property
    def draining(self) -> bool:
        """Whether the drain began (the node takes no new calls)."""
        return self.state != "serving"

    def describe(self) -> DrainState:
        return DrainState(self.node, self.state, self.deadline, self._flight)

    def start(self, deadline: float | None = None) -> DrainState:
        """Begin the drain (from the loop), ``deadline`` seconds for the calls in flight (the node's setting when
        None); a drain under way goes on as it began. Where it is."""
        if deadline is not None and not 0 <= deadline <= MAX_DRAIN_DEADLINE:
            raise KitsuneError("invalid_parameter", f"deadline must be seconds from 0 to {MAX_DRAIN_DEADLINE:g}",
                               state={"param": "deadline"})
        if not self.draining:
            self.state, self.deadline = "draining", self.default_deadline if deadline is None else deadline
            log.warning("node %s drains: it takes no new calls; its calls in flight get %g s", self.node,
                        self.deadline)
            self._task = asyncio.get_running_loop().create_task(self._run())
        return self.describe()

    def refusal(self, tab: int | None = None, home: str | None = None) -> KitsuneError:
        """``node_draining``: what a new call that reaches the node is answered (``home``: where the call's session
        lives now, when it is known)."""
        return KitsuneError("node_draining", f"Node {self.node} is leaving the fleet: send the call again, another "
                            "node takes it", retryable=True, state={"node": self.node, "tabId": tab, "home": home})

    def admits(self, call: int | None) -> bool:
        """Whether a call may run on the node now: any while it serves; while it drains, one the fleet numbered
        before the drain began (all of them until the watermark is read); never a call not numbered yet."""
        if not self.draining:
            return True
        return call is not None and (self._since is None or call <= self._since)

    def admission(self, tab: int | None, request: TabRequest) -> Outcome | None:
        """``node_draining`` for a request of a call numbered after the drain began (nothing is sent)."""
        if request.call is None or self.admits(request.call):
            return None
        return Failed(Failure.of(self.refusal(tab)))

    def serving(self, subject: str) -> dict[str, Handler]:
        """The drains other nodes ask of this one, on ``subject`` (``<fleet>.node.<name>.drain``)."""

        async def drain_for(request: DrainNode) -> DrainState:
            return self.start(request.deadline)

        return {subject: typed(subject, {DrainNode: drain_for})}

    async def admitting(self, agent: str | None, tab: int | None,
                        command: Command | None = None) -> contextlib.AbstractContextManager[None]:
        """:meth:`flight` of a new call of ``agent`` (on ``tab``, or ``command``'s session): refused while the node
        drains, with its session's ``home`` when another node serves it now (restored there)."""
        if self.draining:
            raise self.refusal(tab, await self._parts.home(agent, tab, command))
        return self.flight()

    @contextlib.contextmanager
    def flight(self, call: int | None = None) -> Iterator[None]:
        """A call in flight on the node while in the block; ``node_draining`` when the node does not admit it."""
        if not self.admits(call):
            raise self.refusal()
        self._flight += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._flight -= 1
            if not self._flight:
                self._idle.set()

    async def _run(self) -> None:
        """The drain's steps, in order; a step that fails is logged and the next ones still run."""
        assert self.deadline is not None
        ends = time.monotonic() + self.deadline
        steps: list[tuple[str, Step]] = [("stop taking", self._stop_taking), ("finish", lambda: self._finish(ends)),
                                         ("save and interrupt", self._parts.interrupt),
                                         ("leave", self._parts.leave)]
        try:
            for name, step in steps:
                try:
                    await step()
                except Exception as e:
                    log.error("drain of node %s: step %r failed (%s)", self.node, name, type(e).__name__)
        finally:
            self.state = "left"
            self.left.set()
            log.warning("node %s left the fleet", self.node)

    async def _stop_taking(self) -> None:
        try:
            self._since = await self._parts.watermark()
        finally:  # without it, the steps of the calls other nodes send go on until the node leaves
            await self._parts.announce()

    async def _finish(self, ends: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), max(0.0, ends - time.monotonic()))
        if self._flight:
            log.warning("node %s drains: %d calls still in flight at the deadline are interrupted", self.node,
                        self._flight)
