"""A write recorded ahead of its turn, while a step before it runs.

A write waits for its records (its ``StepDispatched`` stored, its audit entry written) before it is
sent. The engine records the next write of a list as the step before it is sent or, when only reads
lie between it and the write before it, as that write is sent (``writes_ahead``), and carries it over
the reads to its turn; if its arguments are known by then (no reference to the step running or a
later one). By its turn its records are stored, and its wait costs no round trip; recorded as the
write before it is sent, they go out while that write waits for the page (a click waits for animation
frames), not while the reads run. The guarantee is the same: nothing is sent before its records are
made. A write recorded ahead whose turn never comes (an earlier step failed, was held, or the call
stopped) is closed ``skipped`` by the run, which knows it was not sent; only a crash between the two
leaves it ``unknown`` (a dispatched write without a terminal event), as a crash while it runs would.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from core.blocks import Lookup, tab_of
from core.ports import Recorded, not_recorded
from core.step import Run
from messages.commands import BLOCKS, Command, is_write, own_references, resolve_command
from messages.errors import KitsuneError
from messages.events import StepDispatched

__all__ = ["Ahead", "Intent", "ahead_of", "at_turn", "writes_ahead"]


@dataclass(frozen=True, slots=True)
class Intent:
    """A write recorded ahead: sent with these records at its turn (never recorded twice), or closed unsent."""

    path: str
    command: Command
    """The write with its references resolved, as its audit entry has it."""
    tab: int | None
    recorded: tuple[Recorded, ...]
    """The waits for its records, the audit entry first."""


class Ahead:
    """Records one write ahead of its turn; called as a step before it is sent (once: a second call records nothing)."""

    def __init__(self, run: Run, command: Command, path: str, lookup: Lookup, tab: int | None, *,
                 resumed: bool) -> None:
        self._run, self._command, self.path, self._lookup, self._tab = run, command, path, lookup, tab
        self._resumed = resumed
        self._intent: Intent | None = None
        """What it recorded; None until then, or when the write cannot be resolved yet (recorded at its turn)."""
        self._taken = self._called = False
        self._lock = threading.Lock()
        """``take`` and the recording, atomic against each other: a write taken before it was recorded never is."""

    def take(self) -> Intent | None:
        """What it recorded, for its turn or to be withdrawn, to one taker only (None after, from any thread);
        taken before it was recorded, it never records."""
        with self._lock:
            intent, self._intent, self._taken = self._intent, None, True
            return intent

    @property
    def called(self) -> bool:
        """Whether a step called it (it recorded the write, or tried to)."""
        return self._called

    def __call__(self) -> None:
        with self._lock:
            if not self._taken and not self._called:
                self._called = True
                self._record()

    def _record(self) -> None:
        run = self._run
        try:
            tab = tab_of(self._command, self._lookup, self._tab)
            command = resolve_command(self._command, self._lookup)
            written = run.ports.audit.step(run.call, self.path, command, tab, resumed=self._resumed)
        except KitsuneError:
            return  # its turn meets the same error, or records it then
        stored: Callable[[], None] | None
        try:
            stored = run.hand_over(StepDispatched(run.call, self.path))
        except Exception as e:  # its turn fails it unsent, as if it had been recorded then
            stored = _failed(e)
        self._intent = Intent(self.path, command, tab, tuple(r for r in (written, stored) if r is not None))


def _failed(error: Exception) -> Recorded:
    def wait() -> None:
        raise not_recorded() from error
    return wait


def at_turn(ahead: Ahead | None, path: str) -> tuple[Ahead | None, Intent | None]:
    """At the turn of the step at ``path``: the write recorded ahead carried on to a later step, and what this step's
    own write recorded ahead (when ``ahead`` is this step's). One that the step given it never called (that step sent
    nothing: kept, a block with lists of its own, failed before it) is dropped, so that a later step records it."""
    if ahead is None:
        return None, None
    if ahead.path == path:
        return None, ahead.take()
    if not ahead.called:
        ahead.take()  # never records now
        return None, None
    return ahead, None


def writes_ahead(commands: tuple[Command, ...]) -> list[int | None]:
    """For each step of a list, the write that may be recorded ahead as it runs: after a write action, the next write
    action when only read actions lie between (carried over them: recorded while that write waits for the page);
    after any other step, the next step when it is a write action; else None."""
    after: list[int | None] = [None] * len(commands)
    upcoming: int | None = None  # the next write action after step i with only read actions between
    for i in range(len(commands) - 1, -1, -1):
        command = commands[i]
        writes = is_write(command) and not isinstance(command, BLOCKS)
        after[i] = upcoming if writes or upcoming == i + 1 else None
        if writes:
            upcoming = i
        elif isinstance(command, BLOCKS) or is_write(command):
            upcoming = None
    return after


def ahead_of(run: Run, command: Command, path: str, running: int, lookup: Lookup, tab: int | None, *,
             resumed: bool) -> Ahead | None:
    """What records ``command`` (at ``path``, a later step than ``running`` of its list) ahead: a write action, not
    a block, whose references name only steps before ``running`` (``lookup`` has their results); else None."""
    if not is_write(command) or isinstance(command, BLOCKS):
        return None
    if any(ref.step >= running for _, ref in own_references(command)):
        return None
    return Ahead(run, command, path, lookup, tab, resumed=resumed)
