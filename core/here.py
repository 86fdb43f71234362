"""Steps where the browser runs: a run of consecutive steps of the node's own tabs in one hop, writes included.

A step list's actions on tabs of this node (``Ports.here``) go onto the node's loop together: each step's own work
(its ``StepStarted``, references, audit entry, result and events, folded as any step's) runs there around it, and the
call's thread waits once for the whole run instead of once a step. A write keeps every guarantee it has on the
thread: its tab claim checked, its records (``StepDispatched``, audit entry, or both made ahead: ``core.ahead``)
awaited there before it is sent, the policy's judgement, the tab's admission, and its turn among the tab's writes
(``StepsHere.write``). The run ends before a block, a ``syncBarrier``, a tab of another node, a step kept or
observed by a resume or a write in a parallel sequence (its claim may ask the tab's node); after a step that stops
the list; and at the container's deadline. The engine goes on from there as usual. (A ``callSiteTool`` that the
policy stops as a write, tried as a read first, goes to a thread of its own there, as the engine's thread would run
it.)
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from core.ahead import Ahead, Intent, at_turn
from core.blocks import Lookup, lookup_in, tab_of
from core.ports import NotRecorded, Ports, StepsHere
from core.step import Step, deadline_outcome
from messages.commands import ENGINE_STEPS, Command, is_write
from messages.errors import KitsuneError
from messages.paths import StepPath
from messages.results import Failed, Failure, Outcome, Result, Unknown

__all__ = ["Hand", "here_target", "steps_here"]


class ListRun(Protocol):
    """The run of a call as its steps on the loop talk to it (``core.engine``)."""

    ports: Ports
    timeout: float
    deadline: float
    timed_out: bool
    results: dict[str, Result]

    def runs(self, path: str) -> bool:
        """Whether the step at ``path`` is to be sent (not kept or observed from an earlier run)."""

    def begin(self, command: Command, path: StepPath, lookup: Lookup, owner: StepPath | None, tab: int | None,
              ahead: Ahead | None = None, intent: Intent | None = None, *,
              told_when_sent: bool = False) -> tuple[Step, Command, int | None] | None:
        """Start a step (references, ``StepStarted``, audit entry, or its records made ahead: ``intent``); None when
        it ended already. ``told_when_sent``: its ``StepStarted`` and audit entry once its request is out."""

    def finish(self, step: Step, outcome: Outcome) -> None:
        """Tell a step's outcome (its event and result)."""

    def claim(self, tab: int, owner: StepPath | None) -> Failure | None:
        """Check that no parallel sequence holds ``tab`` (``owner`` None); the conflict, if any."""

    def budget(self, command: Command) -> tuple[float, float]:
        """The step's own timeout and what is left of the container's."""

    def late(self, outcome: Outcome, step_timeout: float, remaining: float) -> Outcome:
        """The outcome, or the container's timeout when its deadline cut the step short."""

    def stops(self, path: str, kept: bool) -> bool:
        """Whether the list stops after the step at ``path``."""

    def ahead(self, commands: tuple[Command, ...], paths: list[StepPath], scope: list[Result | None], running: int,
              write: int | None, tab: int | None) -> Ahead | None:
        """What records the write at ``write`` ahead while step ``running`` runs, if it may be (``core.ahead``)."""


class Hand:
    """The write recorded ahead (``core.ahead``) between the call's thread and the loop, carried over the steps before
    its turn: the run of steps on the loop takes it at its turn (by its path); the thread, when its wait for the run
    gave up, closes the hand and withdraws what it held. Atomic against each other, so a write is either sent (or may
    be) by the loop or withdrawn by the thread."""

    def __init__(self, ahead: Ahead | None) -> None:
        self._ahead = ahead
        self._closed = False
        self._lock = threading.Lock()

    def take(self, path: str) -> tuple[bool, Intent | None]:
        """For the step at ``path`` on the loop: whether it may run (the hand is open), and its write recorded ahead
        (when the hand carries that step's)."""
        with self._lock:
            if self._closed:
                return False, None
            self._ahead, intent = at_turn(self._ahead, path)
            return True, intent

    def carries(self) -> bool:
        """Whether it carries a later step's write recorded ahead (or to be), from the loop."""
        return self._ahead is not None

    def give(self, ahead: Ahead) -> None:
        """What records a later step's write ahead, from the loop when the hand carries none (never records once the
        hand is closed)."""
        with self._lock:
            if self._closed:
                ahead.take()
            else:
                self._ahead = ahead

    def back(self) -> Ahead | None:
        """What the thread goes on with once the run on the loop ended."""
        with self._lock:
            ahead, self._ahead = self._ahead, None
            return ahead

    def close(self) -> Intent | None:
        """The thread gave up on the run: nothing more runs on the loop; the write recorded ahead and never sent."""
        with self._lock:
            self._closed = True
            ahead, self._ahead = self._ahead, None
            return ahead.take() if ahead is not None else None


def here_target(run: ListRun, here: StepsHere, command: Command, path: str, lookup: Lookup, tab: int | None,
                owner: StepPath | None) -> int | None:
    """The tab of this node the step acts on, when it may run on the loop; None otherwise."""
    if isinstance(command, ENGINE_STEPS) or not command.acts_on_tab or not run.runs(path):
        return None
    if is_write(command) and owner is not None:
        return None
    try:
        target = tab_of(command, lookup, tab)
    except KitsuneError:  # the engine tells it as a step of its own
        return None
    return target if target is not None and here.holds(target) else None


def steps_here(run: ListRun, here: StepsHere, commands: tuple[Command, ...], paths: list[StepPath],
               scope: list[Result | None], writes: list[int | None], start: int, owner: StepPath | None,
               tab: int | None, hand: Hand) -> Callable[[], Coroutine[Any, Any, tuple[int, bool]]]:
    """The work ``here.run`` takes: run the list's steps from ``start`` on while each may run there, on the loop; it
    answers how many ran and whether the list stops after the last of them. ``hand`` carries the write recorded ahead
    (``writes``: which one each step may record, ``core.ahead.writes_ahead``) to its turn, and back to the thread
    when its turn is not on the loop."""

    async def steps() -> tuple[int, bool]:
        i = start
        while i < len(commands) and run.ports.clock.now() < run.deadline:
            command, path, lookup = commands[i], paths[i], lookup_in(scope, i)
            if here_target(run, here, command, path, lookup, tab, owner) is None:
                break
            runs, intent = hand.take(path)
            if not runs:  # the thread gave up waiting: it tells the rest
                break
            ahead = None if hand.carries() else run.ahead(commands, paths, scope, i, writes[i], tab)
            if ahead is not None:
                hand.give(ahead)
            begun = run.begin(command, path, lookup, owner, tab, ahead, intent,  # a read: told while the browser works
                              told_when_sent=intent is None and not is_write(command))
            if begun is not None:
                step, resolved, target = begun
                assert target is not None
                run.finish(step, await _send(run, here, step, resolved, target))
            scope[i] = run.results.get(path)
            i += 1
            if run.stops(path, False):
                return i - start, True
        return i - start, False
    return steps


async def _send(run: ListRun, here: StepsHere, step: Step, command: Command, tab: int) -> Outcome:
    """Send one action as ``Step`` does on the thread, within its own timeout and the container's deadline; a port's
    error is the step's failure (unknown once its write was recorded dispatched)."""
    try:
        writes = is_write(command)
        if writes and (conflict := run.claim(tab, None)) is not None:
            return Failed(conflict)
        if run.ports.clock.now() >= run.deadline:
            run.timed_out = True
            return deadline_outcome(run.timeout, step.dispatched)
        recorded = step.dispatch() if writes else ()
        step_timeout, remaining = run.budget(command)
        timeout = min(step_timeout, remaining)
        sent = step.sent if step.ahead is not None or step.untold is not None else None  # once the request is out
        try:
            outcome = await (here.write(command, tab, timeout, recorded, sent) if writes
                             else here.read(command, tab, timeout, sent))
        except NotRecorded:
            step.dispatched = False  # nothing was sent
            raise
        if outcome is None:  # its actor went between the look and the step: the tab closed
            return Failed(Failure(f"Tab {tab} is closed", "tab_closed", False, {"tabId": tab}))
        return run.late(outcome, step_timeout, remaining)
    except KitsuneError as e:
        failure = Failure.of(e)
        return Unknown(failure) if step.dispatched else Failed(failure)
