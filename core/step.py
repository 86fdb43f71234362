"""One step as it runs: an action, or a one-step block with everything inside it.

Before a write is sent, its tab is claimed (in a parallel) and the write is recorded: its
``StepDispatched`` stored and its audit entry written. The step hands both records to the driver
with the write, which waits for them where it sends (one hop for the records and the request);
if either cannot be made, nothing is sent. The next write of a list is recorded ahead
(``core.ahead``), as the step before it (or the write before the reads before it) is sent, so
that its records are stored by its turn: its wait is then no round trip. A write inside a block
that ran ok is told once (``BlockWriteSucceeded``): resume never sends that block again unobserved.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from core.blocks import Lookup, run_block
from core.log_context import STEP
from core.ports import NotRecorded, Ports, Recorded, not_recorded, wait_recorded
from messages.commands import Command, NewTab, SyncBarrier, is_write
from messages.events import BlockWriteSucceeded, Event, StepDispatched
from messages.paths import StepPath
from messages.results import Done, Failed, Failure, Outcome, Unknown
from messages.steplog import StepRecord

__all__ = ["Run", "Step", "deadline_outcome"]

log = logging.getLogger(__name__)


class Run(Protocol):
    """The run of the call a step is in, as the step talks to it."""

    call: int
    timeout: float
    """The container's timeout in seconds."""
    deadline: float
    """When it ends, on the clock of ``ports``."""
    ports: Ports
    timed_out: bool
    """Set when the deadline stopped a step."""

    def emit(self, event: Event) -> None:
        """Fold an event in and store it; a lost event is logged."""

    def hand_over(self, event: Event) -> Callable[[], None] | None:
        """Fold an event in and queue it; the wait until it is stored, if any."""

    def record(self, path: str) -> StepRecord:
        """The step's record as the events so far tell it."""

    def claim(self, tab: int, owner: StepPath | None) -> Failure | None:
        """Claim a tab for a parallel sequence (or check that none holds it); the conflict, if any."""

    def barrier(self, command: SyncBarrier, owner: StepPath | None) -> Outcome:
        """Meet the other sequences of the parallel at a barrier."""

    def send(self, command: Command, tab: int | None, recorded: tuple[Recorded, ...] = ()) -> Outcome:
        """Send an action to the driver once ``recorded`` are made (:class:`NotRecorded`: nothing sent)."""


class Step:
    """One step being run, an action or a one-step block with all inside it (the :class:`~core.blocks.Body`
    its block runs in), and what only it needs while it runs."""

    def __init__(self, run: Run, path: StepPath, owner: StepPath | None, secrets: list[str],
                 ahead: Callable[[], None] | None = None) -> None:
        self.run, self.path, self.owner = run, path, owner
        self.ahead = ahead
        """Records a later step's write ahead (``core.ahead``), once, as this step first sends."""
        self.intent: tuple[Recorded, ...] | None = None
        """This write's records, made ahead of its turn."""
        self.secrets = secrets
        """Typed values and JavaScript bodies of the step, nested commands' included: cut from its failures."""
        self.audit: Recorded | None = None
        """Its audit entry being written: a write waits for it before it is sent."""
        self.dispatched = False
        """Its ``StepDispatched`` is stored: a write was sent, or is about to be."""
        self.warning: str | None = None
        """The first warning of a command inside the block."""
        self.untold: Callable[[], None] | None = None
        """Tells that the step starts (its ``StepStarted``, its audit entry), until it is told."""

    def perform(self, command: Command, tab: int | None, lookup: Lookup, *, inner: bool = True) -> Outcome:
        """Run an action or a one-step block; everything it sends is under the step's path."""
        outcome = run_block(command, tab, lookup, self)
        return self._action(command, tab, inner=inner) if outcome is None else outcome

    def remaining(self) -> float:
        return self.run.deadline - self.run.ports.clock.now()

    def sleep(self, seconds: float) -> None:
        self.run.ports.clock.sleep(seconds)

    def _action(self, command: Command, tab: int | None, *, inner: bool) -> Outcome:
        run = self.run
        writes = is_write(command)
        if writes and tab is not None and command.acts_on_tab:
            conflict = run.claim(tab, self.owner)
            if conflict is not None:
                return Failed(conflict)
        if run.ports.clock.now() >= run.deadline:
            run.timed_out = True
            return deadline_outcome(run.timeout, self.dispatched)
        recorded = self.dispatch() if writes and not self.dispatched else ()
        self.record_next()
        try:
            if isinstance(command, SyncBarrier):
                wait_recorded(recorded)
                outcome = run.barrier(command, self.owner)
            else:
                outcome = run.send(command, tab, recorded)
        except NotRecorded:
            self.dispatched = False  # nothing was sent
            raise
        if isinstance(outcome, Done):
            if inner and self.warning is None:
                self.warning = outcome.warning
            if inner and writes and not run.record(self.path).wrote:
                run.emit(BlockWriteSucceeded(run.call, self.path))
            new_tab = outcome.value.get("tabId")
            if isinstance(command, NewTab) and self.owner is not None and isinstance(new_tab, int):
                run.claim(new_tab, self.owner)
        return outcome

    def tell_started(self) -> None:
        """Tell that the step starts if that was left until its request is out (``Run.begin``), once; its request
        may be out already, so a failure to tell it is logged, as a lost event is, not raised."""
        if self.untold is None:
            return
        untold, self.untold = self.untold, None
        try:
            untold()
        except Exception as e:
            log.error("step %s of call %s: its start not recorded (%s)", self.path, self.run.call, type(e).__name__)

    def sent(self) -> None:
        """Its request is out (a step on the loop, ``core.here``): the step told started if it waited for that,
        and a later step's write recorded ahead (:meth:`record_next`)."""
        self.tell_started()
        self.record_next()

    def record_next(self) -> None:
        """Record a later step's write ahead (``core.ahead``), once, as this step sends: after this write's own
        records, so that their wait is not the next one's."""
        if self.ahead is not None:
            ahead, self.ahead = self.ahead, None
            ahead()

    def dispatch(self) -> tuple[Recorded, ...]:
        """Start recording a write before it is sent: its ``StepDispatched`` handed over, its audit
        entry on its way already (or both made ahead: ``core.ahead``); the records the send waits
        for, the audit entry first. Raises :class:`KitsuneError` if the event cannot be handed over:
        nothing is sent."""
        if self.intent is not None:
            recorded, self.intent = self.intent, None
        else:
            try:
                stored = self.run.hand_over(StepDispatched(self.run.call, self.path))
            except Exception as e:
                raise not_recorded() from e
            written, self.audit = self.audit, None
            recorded = tuple(record for record in (written, stored) if record is not None)
        STEP.set(self.path)  # the write about to be sent names its step (a tab request, log lines)
        self.dispatched = True
        return recorded


def deadline_outcome(timeout: float, sent: bool) -> Outcome:
    """A step the container's deadline stopped: unknown if it was sent, else failed unsent."""
    failure = Failure(f"Container timed out after {timeout:g}s", "container_timeout", False)
    return Unknown(failure) if sent else Failed(failure)
