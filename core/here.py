"""Reads where the browser runs: a run of consecutive reads of the node's own tabs in one hop.

A step list's reads of tabs of this node (``Ports.here``) go onto the node's loop together: each read's
own work (its ``StepStarted``, references, audit entry, result and events, folded as any step's) runs
there around the read, and the call's thread waits once for the whole run instead of once a read. A
read is never a write: nothing in it is dispatched, claimed or leased; the policy still judges it
(``ReadsHere.read``). The run ends before the first step that is not such a read, after a step that
stops the list, and at the container's deadline; the engine goes on from there as usual.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from core.ahead import Ahead, Intent
from core.blocks import Lookup, lookup_in, tab_of
from core.ports import Ports, ReadsHere
from core.step import Step, deadline_outcome
from messages.commands import BLOCKS, Command, SyncBarrier, is_write
from messages.errors import KitsuneError
from messages.paths import StepPath
from messages.results import Failed, Failure, Outcome, Result

__all__ = ["reads_here", "read_target"]


class ListRun(Protocol):
    """The run of a call as its reads on the loop talk to it (``core.engine``)."""

    ports: Ports
    deadline: float
    timeout: float
    timed_out: bool
    results: dict[str, Result]

    def runs(self, path: str) -> bool:
        """Whether the step at ``path`` is to be sent (not kept or observed from an earlier run)."""

    def begin(self, command: Command, path: StepPath, lookup: Lookup, owner: StepPath | None,
              tab: int | None) -> tuple[Step, Command, int | None] | None:
        """Start a step (``StepStarted``, references, audit entry); None when it ended already."""

    def finish(self, step: Step, outcome: Outcome) -> None:
        """Tell a step's outcome (its event and result)."""

    def budget(self, command: Command) -> tuple[float, float]:
        """The step's own timeout and what is left of the container's."""

    def late(self, outcome: Outcome, step_timeout: float, remaining: float) -> Outcome:
        """The outcome, or the container's timeout when its deadline cut the step short."""

    def stops(self, path: str, kept: bool) -> bool:
        """Whether the list stops after the step at ``path``."""

    def ahead(self, commands: tuple[Command, ...], paths: list[StepPath], scope: list[Result | None], i: int,
              tab: int | None) -> Ahead | None:
        """What records step ``i + 1`` ahead while step ``i`` runs, if it may be (``core.ahead``)."""

    def withdraw(self, intent: Intent) -> None:
        """A write recorded ahead whose turn did not come: skipped, and its audit entry told it was not sent."""


def read_target(run: ListRun, here: ReadsHere, command: Command, path: str, lookup: Lookup,
                tab: int | None) -> int | None:
    """The tab of this node the step reads, when it is a read that may run on the loop; None otherwise."""
    if (isinstance(command, (*BLOCKS, SyncBarrier)) or not command.acts_on_tab or is_write(command)
            or not run.runs(path)):
        return None
    try:
        target = tab_of(command, lookup, tab)
    except KitsuneError:  # the engine tells it as a step of its own
        return None
    return target if target is not None and here.holds(target) else None


def reads_here(run: ListRun, here: ReadsHere, commands: tuple[Command, ...], paths: list[StepPath],
               scope: list[Result | None], start: int, owner: StepPath | None,
               tab: int | None) -> Callable[[], Coroutine[Any, Any, tuple[int, bool, Ahead | None]]]:
    """The work ``here.run`` takes: run the list's steps from ``start`` on while each is such a read, on the loop;
    it answers how many ran, whether the list stops after the last of them, and what recorded the write after
    them ahead (``core.ahead``: as the last read is sent), if anything did."""

    async def reads() -> tuple[int, bool, Ahead | None]:
        i, ahead = start, None
        try:
            while i < len(commands) and run.ports.clock.now() < run.deadline:
                lookup = lookup_in(scope[:i])
                target = read_target(run, here, commands[i], paths[i], lookup, tab)
                if target is None:
                    break
                begun, ahead = run.begin(commands[i], paths[i], lookup, owner, tab), None
                if begun is not None:
                    step, resolved, _ = begun
                    ahead = run.ahead(commands, paths, scope, i, tab)
                    run.finish(step, await _read(run, here, resolved, target, ahead))
                scope[i] = run.results.get(paths[i])
                i += 1
                if run.stops(paths[i - 1], False):
                    return i - start, True, ahead
        except BaseException:
            if ahead is not None and ahead.intent is not None:  # recorded, never sent
                run.withdraw(ahead.intent)
            raise
        return i - start, False, ahead
    return reads


async def _read(run: ListRun, here: ReadsHere, command: Command, tab: int, ahead: Ahead | None) -> Outcome:
    """Send one read within its own timeout and the container's deadline (``Step``'s way, for a read), the next
    step's write recorded ``ahead`` as it is sent."""
    if run.ports.clock.now() >= run.deadline:
        run.timed_out = True
        return deadline_outcome(run.timeout, False)
    if ahead is not None:
        ahead()
    step_timeout, remaining = run.budget(command)
    try:
        outcome = await here.read(command, tab, min(step_timeout, remaining))
    except KitsuneError as e:  # a port answered with an error instead of an outcome
        return Failed(Failure.of(e))
    if outcome is None:  # its actor went between the look and the read: the tab closed
        return Failed(Failure(f"Tab {tab} is closed", "tab_closed", False, {"tabId": tab}))
    return run.late(outcome, step_timeout, remaining)
