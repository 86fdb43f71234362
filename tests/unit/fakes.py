"""Fakes for unit tests of the pure core: a clock that only moves when told, a scripted driver."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections import defaultdict, deque
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from actors.threads import ThreadedSequences
from core.calls import Calls, SequentialIds
from core.checkpoints import CheckpointStore
from core.claims import ClaimTable
from core.engine import Ports
from core.ports import Recorded, wait_recorded
from messages.commands import Command, Js, NewTab, is_write
from messages.contract import CHECKPOINT_TOTAL_CAPACITY
from messages.errors import KitsuneError
from messages.events import Event
from messages.results import Done, Failed, Failure, HeldForApproval, Outcome, Unknown

T = TypeVar("T")


class FakeClock:
    """Monotonic time that advances only through ``advance`` and ``sleep``."""

    def __init__(self, start: float = 1000.0) -> None:
        self.t = start
        self._lock = threading.Lock()

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.t += seconds


@dataclass(frozen=True)
class Sent:
    """One command the driver received."""

    key: str
    action: str
    tab: int | None
    write: bool


class ScriptedDriver:
    """Answers commands from a script keyed by the command's label, selector or action.

    Answers: ``"ok"``, ``"fail"`` (failed before anything was sent), ``"fail_retryable"``,
    ``"unknown"`` (sent, outcome unknown), ``"hang"`` (sent, then runs past its timeout), ``"busy"``
    (not sent: the tab stayed busy past the timeout),
    ``"hold"`` (held for approval), ``"warn"`` (ok with a warning), an :class:`Outcome`, or
    ``("value", {...})``. Unscripted commands answer ok. ``sent`` lists every command received.
    """

    def __init__(self, clock: FakeClock, tabs: set[int] | None = None) -> None:
        self.clock = clock
        self.tabs = set(tabs if tabs is not None else {1, 2, 3})
        self.script: dict[str, deque[Any]] = defaultdict(deque)
        self.sent: list[Sent] = []
        self.tabs_unlistable = False
        self._ids = itertools.count(100)
        self._lock = threading.Lock()

    def on(self, key: str, *answers: Any) -> ScriptedDriver:
        self.script[key].extend(answers)
        return self

    @staticmethod
    def key_of(command: Command) -> str:
        selector = getattr(command, "selector", None)
        return command.label or (selector if isinstance(selector, str) else None) or command.action

    def writes_sent(self, key: str | None = None) -> int:
        return sum(1 for s in self.sent if s.write and (key is None or s.key == key))

    def list_tabs(self) -> frozenset[int]:
        if self.tabs_unlistable:
            raise KitsuneError("tabs_unavailable", "The browser did not answer the tab list", retryable=True)
        return frozenset(self.tabs)

    def execute(self, command: Command, tab_id: int | None, timeout: float,
                recorded: Sequence[Recorded] = (), *, as_read: bool = False) -> Outcome:
        wait_recorded(recorded)  # nothing is sent unless every record is made
        key = self.key_of(command)
        if isinstance(command, Js) and command.label is None:
            key = command.code if isinstance(command.code, str) else "js"
        with self._lock:
            self.sent.append(Sent(key, command.action, tab_id, is_write(command)))
            answer = self.script[key].popleft() if self.script[key] else "ok"
        if isinstance(answer, Done | Failed | Unknown | HeldForApproval):
            return answer
        if isinstance(answer, tuple):
            return Done(answer[1])
        if answer == "ok":
            return Done(self._value(command))
        if answer == "warn":
            return Done(self._value(command), warning="the page looks different than expected")
        if answer == "fail":
            return Failed(Failure(f"No element matches {key}", "not_found", False))
        if answer == "fail_retryable":
            return Failed(Failure(f"{key} is not ready yet", "not_ready", True))
        if answer == "unknown":
            return Unknown(Failure("The page navigated while the command ran", "navigated", False))
        if answer == "hang":
            self.clock.advance(timeout + 0.001)
            return Unknown(Failure(f"Command timed out after {timeout:g}s", "timeout", False))
        if answer == "busy":
            self.clock.advance(timeout + 0.001)
            return Failed(Failure(f"{command.action}: the tab was busy until the deadline; nothing was sent",
                                  "timeout", True, {"tabId": tab_id, "sent": False}))
        if answer == "hold":
            return HeldForApproval(Failure("The action needs approval; nothing was done", "needs_user", False,
                                           {"reason": "approval", "confirm_token": "confirm-secret"}))
        raise AssertionError(f"unknown scripted answer {answer!r}")

    def _value(self, command: Command) -> dict[str, Any]:
        if isinstance(command, NewTab):
            tab = next(self._ids)
            self.tabs.add(tab)
            return {"tabId": tab}
        if isinstance(command, Js):
            return {"value": True}
        if command.action == "closeTab":
            self.tabs.discard(command.tab_id)
        return {"text": f"text of {self.key_of(command)}"} if not is_write(command) else {}


class LoopHere:
    """The node's loop as the engine sees it (``core.ports.StepsHere``): its steps answered by ``driver`` (a write once
    its records are made), ``tabs`` its own; each hop counted."""

    def __init__(self, driver: ScriptedDriver, tabs: frozenset[int]) -> None:
        self.driver = driver
        self.tabs = tabs
        self.hops: list[int] = []
        """How many steps were handed to the tab in each hop, in order."""
        self._sent = threading.local()

    def holds(self, tab: int) -> bool:
        return tab in self.tabs

    def run(self, steps: Callable[[], Coroutine[Any, Any, T]], timeout: float) -> T:
        self._sent.n = 0  # each parallel sequence runs its hops on a thread of its own
        value = asyncio.run(steps())
        self.hops.append(self._sent.n)
        return value

    async def read(self, command: Command, tab: int, timeout: float,
                   sent: Callable[[], None] | None) -> Outcome | None:
        self._sent.n += 1
        try:
            return self.driver.execute(command, tab, timeout)
        finally:
            if sent is not None:
                sent()

    async def write(self, command: Command, tab: int, timeout: float, recorded: Sequence[Recorded],
                    sent: Callable[[], None] | None) -> Outcome | None:
        self._sent.n += 1
        try:
            return self.driver.execute(command, tab, timeout, recorded)
        finally:
            if sent is not None:
                sent()


class World:
    """The pure core wired with fakes: ``calls`` runs and resumes, ``events`` collects the stream."""

    def __init__(self, *, tabs: set[int] | None = None,
                 capacity_of: Callable[[str | None], int] = lambda agent: 20,
                 total_capacity: int = CHECKPOINT_TOTAL_CAPACITY) -> None:
        self.clock = FakeClock()
        self.driver = ScriptedDriver(self.clock, tabs)
        self.claims = ClaimTable()
        self.events: list[Event] = []
        self.drops: list[tuple[int, str]] = []
        self.store = CheckpointStore(self.clock, capacity_of=capacity_of, total_capacity=total_capacity,
                                     on_drop=lambda call, reason: self.drops.append((call, reason)))
        self.workflow_hashes: dict[str, str] = {}
        self.calls = Calls(lambda agent: Ports(self.driver, self.clock, self.claims, ThreadedSequences()), self.store,
                           audit=SequentialIds(), sink=self.events.append,
                           workflow_sha256=self.workflow_hashes.get)

    def events_of(self, call: int) -> list[Event]:
        return [e for e in self.events if e.call == call]
