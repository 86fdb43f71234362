"""The ports of the step engine: what a run talks to, as ``Protocol``s.

The actors of ``actors/`` (``actors/threads.py`` has the system clock and plain-thread sequences)
and the Playwright driver of ``bridge/`` plug in; unit tests use fakes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from core.claims import TabClaims
from messages.commands import Command
from messages.errors import KitsuneError
from messages.events import Event
from messages.results import Outcome

__all__ = ["NO_APPROVALS", "NO_AUDIT", "Approvals", "Clock", "Driver", "EventSinkPort", "NotRecorded", "Ports",
           "StepsHere", "Recorded", "Sequences", "StepAudit", "not_recorded", "wait_recorded"]

T = TypeVar("T")

Recorded = Callable[[], None]
"""A record a write waits for before it is sent (its ``StepDispatched`` stored, its audit entry
written): called, it returns once the record is made and raises when it cannot be."""


class NotRecorded(KitsuneError):
    """A record a write waited for could not be made: nothing was sent."""


def not_recorded(error: BaseException | None = None) -> NotRecorded:
    """Why a record could not be made: the :class:`KitsuneError` it raised (the audit's
    ``audit_unavailable``), else ``events_unavailable``."""
    if isinstance(error, KitsuneError):
        return NotRecorded(error.code, error.message, retryable=error.retryable)
    return NotRecorded("events_unavailable", "The step could not be recorded before sending; nothing was sent",
                       retryable=True)


def wait_recorded(recorded: Sequence[Recorded]) -> None:
    """Wait for each record in turn; :class:`NotRecorded` when one cannot be made."""
    for wait in recorded:
        try:
            wait()
        except Exception as e:
            raise not_recorded(e) from e


class Driver(Protocol):
    """Runs one action in one tab; answers within ``timeout`` seconds."""

    def execute(self, command: Command, tab_id: int | None, timeout: float,
                recorded: Sequence[Recorded] = (), *, as_read: bool = False) -> Outcome:
        """Run an action (never a block) whose references are resolved, once every record in
        ``recorded`` is made (:class:`NotRecorded`, with nothing sent, when one cannot be). ``as_read``: run it
        only if the tab's node counts it as a read (a ``callSiteTool`` of a tool its page declares
        ``readOnlyHint``); anything else answers ``site_tool_writes``, nothing sent."""

    def list_tabs(self) -> frozenset[int]:
        """Ids of the open tabs; raises :class:`KitsuneError` when they cannot be listed."""


class StepsHere(Protocol):
    """Where the browser of the node's own tabs runs (its loop): a run of consecutive steps of those tabs, reads and
    writes, goes there in one hop, the engine's work for each of them with it, instead of one round trip a step
    (``core.here``)."""

    def holds(self, tab: int) -> bool:
        """Whether ``tab`` is read there (a tab of this node)."""

    def run(self, reads: Callable[[], Coroutine[Any, Any, T]], timeout: float) -> T:
        """Run ``reads()`` there and answer its value (from a thread, never from there); ``TimeoutError`` when it
        has not answered within ``timeout`` seconds (a backstop: each step is bounded on its own)."""

    def read(self, command: Command, tab: int, timeout: float,
             sent: Callable[[], None] | None) -> Awaitable[Outcome | None]:
        """Run a read whose references are resolved on ``tab`` (awaited there), as the driver would, its policy
        included; None when the tab is not there. ``sent``, if given, is called there once, after the read's request
        is out (the loop's next turn), whatever the read's end."""

    def write(self, command: Command, tab: int, timeout: float, recorded: Sequence[Recorded],
              sent: Callable[[], None] | None) -> Awaitable[Outcome | None]:
        """Run a write action whose references are resolved on ``tab`` (awaited there) as the driver would: the
        policy's judgement first, then every record in ``recorded`` awaited (:class:`NotRecorded`, nothing sent,
        when one cannot be), then the tab's admission and its turn among the tab's writes; None when the tab is
        not there. ``sent``, if given, is called there once, when the write first waits (its request out, or its
        records or judgement awaited), whatever its end."""


class Clock(Protocol):
    """Monotonic time, injectable for tests."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class Sequences(Protocol):
    """Runs the sequences of a parallel, and their ``syncBarrier`` meetings."""

    def run_all(self, jobs: list[Callable[[], None]]) -> None:
        """Run every job (concurrently where it can) and return when all have ended."""

    def barrier(self, key: str, parties: int, timeout: float) -> bool:
        """Wait until ``parties`` sequences reached ``key``; False on timeout or abort."""

    def abort(self, key: str) -> None:
        """Release everyone waiting at ``key`` with a failure (a party will not come)."""

    def discard(self, key: str) -> None:
        """Forget ``key``: every sequence that meets there has ended."""


class StepAudit(Protocol):
    """Where a run records its steps before it sends them (the audit log)."""

    def step(self, call: int, path: str, command: Command, tab_id: int | None, *,
             resumed: bool) -> Callable[[], None] | None:
        """Start recording a step about to be sent.

        Answers a wait that returns once the entry is written and raises :class:`KitsuneError`
        when it cannot be (or None when it is written already); the engine waits on it only
        before sending a write, so the entry is written meanwhile.
        """

    def observed(self, call: int, path: str, command: Command, tab_id: int | None) -> None:
        """Record a step the caller reported ``applied``: marked ok, not sent."""

    def withdrawn(self, call: int, path: str, command: Command, tab_id: int | None) -> None:
        """Record that a write whose entry was written ahead of its turn was not sent (``core.ahead``)."""


class _NoAudit:
    def step(self, call: int, path: str, command: Command, tab_id: int | None, *,
             resumed: bool) -> Callable[[], None] | None:
        return None

    def observed(self, call: int, path: str, command: Command, tab_id: int | None) -> None:
        return None

    def withdrawn(self, call: int, path: str, command: Command, tab_id: int | None) -> None:
        return None


NO_AUDIT: StepAudit = _NoAudit()


class Approvals(Protocol):
    """What approving a held step did, when the resume that reports it ``applied`` needs its result: the
    tab a held one-shot ``newTab`` opened in its call's session (``bridge.approvals``)."""

    def take(self, call: int, path: str) -> dict[str, Any] | None:
        """The result of the approved step ``path`` of ``call`` (given once), or None."""


class _NoApprovals:
    def take(self, call: int, path: str) -> dict[str, Any] | None:
        return None


NO_APPROVALS: Approvals = _NoApprovals()


EventSinkPort = Callable[[Event], Callable[[], None] | None]
"""Where a run's events go: answers None, or a wait that returns once the event is stored."""


@dataclass(frozen=True, slots=True)
class Ports:
    """Everything a run talks to."""

    driver: Driver
    clock: Clock
    claims: TabClaims
    sequences: Sequences
    audit: StepAudit = NO_AUDIT
    approvals: Approvals = NO_APPROVALS
    here: StepsHere | None = None
    """Where reads of the node's own tabs run in one hop (None: every step through ``driver``)."""
