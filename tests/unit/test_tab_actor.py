"""The tab actor: deadlines, withdrawals and reads beside writes, against a tab that records what it ran.

The tab is a fake (the browser's part is tested in tests/integration); the actor, its mailbox
and the loop are the real ones.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pykka
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors.loop import IoLoop
from actors.tab_actor import Interrupt, Pause, ServedRequests, TabActor, TabWork, Ticket
from messages.commands import Command, is_write, parse_command
from messages.contract import SETTLE
from messages.requests import RequestEnded, RequestRunning, RequestWithdrawn, TabCancel, TabRequest
from messages.results import Done, Failed, Outcome, Unknown


@dataclass
class Ran:
    """One command the tab ran; ``ended`` is set when it ended."""

    label: str
    write: bool
    ended: threading.Event = field(default_factory=threading.Event)


@dataclass
class RecordingTab:
    """A tab that runs each command as long as its selector says (``#d<ms>``) and records what it ran.

    A command held with ``hold(label)`` runs until ``release(label)`` instead; ``started(label)``
    waits until it runs. ``waitForResult`` polls ``polls`` times (its code, ``polls:<n>``), or until
    released when held, with the actor's pause between.
    """

    ran: list[Ran] = field(default_factory=list)
    writing: int = 0
    overlapped_writes: bool = False
    timeouts: list[tuple[float, float | None]] = field(default_factory=list)
    """Each run's ``timeout`` (the step's own, for messages) and ``within`` (the time it had left)."""
    _gates: dict[str, threading.Event] = field(default_factory=dict)
    _started: dict[str, threading.Event] = field(default_factory=dict)

    def hold(self, command: Command) -> Command:
        """Hold ``command`` running until it is released; the command."""
        self._gates[_label(command)] = threading.Event()
        return command

    def release(self, command: Command) -> None:
        self._gates[_label(command)].set()

    def started(self, command: Command) -> None:
        """Wait until the tab runs ``command``."""
        assert self._started_event(_label(command)).wait(10), f"{_label(command)} did not start"

    def _started_event(self, label: str) -> threading.Event:
        return self._started.setdefault(label, threading.Event())

    async def execute(self, command: Command, tab_id: int | None, timeout: float, *,
                      pause: Pause | None = None, agent: str | None = None, call: int | None = None,
                      path: str | None = None, within: float | None = None,
                      session: str | None = None, as_read: bool = False) -> Outcome:
        label = _label(command)
        self.timeouts.append((timeout, within))
        record = Ran(label, is_write(command))
        self.ran.append(record)
        gate = self._gates.get(label)
        self._started_event(label).set()
        try:
            if command.action == "waitForResult":
                polls = int(str(getattr(command, "code", "polls:1")).split(":")[1])
                for poll in itertools.count(1):
                    await self._section(0.002, record.write)
                    if (gate.is_set() if gate is not None else poll == polls):
                        break
                    assert pause is not None
                    await pause(0.01)
            elif gate is not None:
                await self._section(gate, record.write)
            else:
                await self._section(int(label.split("#d")[1].split(".")[0]) / 1000, record.write)
        finally:
            record.ended.set()
        return Done({"ran": label})

    async def _section(self, until: float | threading.Event, write: bool) -> None:
        if write:
            self.writing += 1
            self.overlapped_writes |= self.writing > 1
        try:
            if isinstance(until, threading.Event):
                while not until.is_set():
                    await asyncio.sleep(0.002)  # the fake page's work: it ends when the test releases it
            else:
                await asyncio.sleep(until)
        finally:
            if write:
                self.writing -= 1


def _label(command: Command) -> str:
    return str(getattr(command, "selector", None) or getattr(command, "code", ""))


def click(ms: int, tag: int = 0) -> Command:
    return parse_command({"action": "click", "selector": f"#d{ms}.t{tag}"})


def wait_for(ms: int, tag: int = 0) -> Command:
    return parse_command({"action": "waitFor", "selector": f"#d{ms}.t{tag}"})


def wait_for_result(polls: int, tag: int = 0) -> Command:
    return parse_command({"action": "waitForResult", "code": f"polls:{polls}:{tag}", "interval": 0.01})


class WatchedTicket(Ticket):
    """A ticket that remembers whether it let the tab start it (which it does only before its deadline)."""

    def __init__(self, request: TabRequest, seconds: float) -> None:
        super().__init__(request, seconds)
        self.let_start = False

    def start(self) -> bool:
        started = super().start()
        self.let_start |= started
        return started


def ticket(command: Command, timeout: float) -> WatchedTicket:
    return WatchedTicket(TabRequest(command, timeout, time.time() + timeout), timeout)


def was_not_sent(outcome: Outcome) -> bool:
    return isinstance(outcome, Failed) and (outcome.failure.state or {}).get("sent") is False


@pytest.fixture
def io() -> Iterator[IoLoop]:
    loop = IoLoop()
    yield loop
    loop.close()


@pytest.fixture
def tab() -> RecordingTab:
    return RecordingTab()


@pytest.fixture
def actor(io: IoLoop, tab: RecordingTab) -> Iterator[pykka.ActorRef[TabActor]]:
    ref = TabActor.start(7, tab, io)
    yield ref
    ref.stop()


def test_a_read_runs_beside_a_long_write_and_does_not_wait_for_it(
        actor: pykka.ActorRef[TabActor], tab: RecordingTab) -> None:
    long_write = tab.hold(click(400))
    write = actor.ask(ticket(long_write, 30.0), block=False)
    tab.started(long_write)
    assert isinstance(actor.ask(ticket(wait_for(10), 30.0), timeout=10), Done)  # answered while the write runs
    assert not tab.ran[0].ended.is_set()
    tab.release(long_write)
    assert isinstance(write.get(timeout=10), Done)


def test_a_long_read_never_holds_up_a_write(actor: pykka.ActorRef[TabActor], tab: RecordingTab) -> None:
    long_read = tab.hold(wait_for(600))  # the other agent's waitFor that never comes
    read = actor.ask(ticket(long_read, 30.0), block=False)
    tab.started(long_read)
    assert isinstance(actor.ask(ticket(click(5), 30.0), timeout=10), Done)
    assert [r.label for r in tab.ran if r.write] == ["#d5.t0"]
    assert not tab.ran[0].ended.is_set()
    tab.release(long_read)
    read.get(timeout=10)


def test_a_write_queued_past_its_deadline_is_never_run_and_says_nothing_was_sent(
        actor: pykka.ActorRef[TabActor], tab: RecordingTab) -> None:
    held = tab.hold(click(500))
    long_write = actor.ask(ticket(held, 30.0), block=False)
    tab.started(held)
    queued = actor.ask(ticket(click(5, tag=1), 0.1), timeout=10)  # its deadline passes while the tab is held
    assert isinstance(queued, Failed) and was_not_sent(queued), queued
    assert queued.failure.retryable
    tab.release(held)
    assert isinstance(long_write.get(timeout=10), Done)
    assert isinstance(actor.ask(ticket(click(5, tag=2), 30.0), timeout=10), Done)  # writes run in order
    assert [r.label for r in tab.ran] == ["#d500.t0", "#d5.t2"]  # the queued click never ran, not even later


def test_a_withdrawn_ticket_never_runs_and_withdraw_tells_whether_it_had_started(
        actor: pykka.ActorRef[TabActor], tab: RecordingTab) -> None:
    held = tab.hold(click(300))
    long_write = actor.ask(ticket(held, 30.0), block=False)
    tab.started(held)
    queued = ticket(click(5, tag=1), 30.0)
    answer = actor.ask(queued, block=False)
    assert queued.withdraw() is True
    tab.release(held)  # the queued write is answered when its turn comes
    assert was_not_sent(answer.get(timeout=10))
    long_write.get(timeout=10)
    assert [r.label for r in tab.ran] == ["#d300.t0"]
    running = ticket(tab.hold(click(200, tag=2)), 30.0)
    answer = actor.ask(running, block=False)
    tab.started(running.request.command)
    assert running.withdraw() is False  # it had started: its outcome is whatever the tab says
    tab.release(running.request.command)
    assert isinstance(answer.get(timeout=10), Done)


def test_writes_stay_one_at_a_time_and_in_order(actor: pykka.ActorRef[TabActor], tab: RecordingTab) -> None:
    answers = [actor.ask(ticket(click(20, tag=n), 5.0), block=False) for n in range(5)]
    assert all(isinstance(a.get(timeout=3), Done) for a in answers)
    assert [r.label for r in tab.ran] == [f"#d20.t{n}" for n in range(5)]
    assert not tab.overlapped_writes


def test_writes_from_the_loop_take_the_tabs_turn_with_the_mailboxs_writes_one_at_a_time(io: IoLoop,
                                                                                          tab: RecordingTab) -> None:
    """A call's write from the loop (``TabWork.run``, in the asking task: ``core.here``) waits for the tab's turn on the
    lock the mailbox's writes take: behind a write that holds the tab, never beside one, each caller's in its order."""
    work = TabWork(7, tab)
    ref = TabActor.start(7, tab, io, work=work)
    try:
        first = tab.hold(click(5, tag=0))
        held = ref.ask(ticket(first, 30.0), block=False)
        tab.started(first)

        async def from_loop() -> list[Outcome]:
            return list(await asyncio.gather(*(work.run(ticket(click(5, tag=n), 30.0)) for n in range(1, 4))))
        here = asyncio.run_coroutine_threadsafe(from_loop(), io.loop)
        mailbox = [ref.ask(ticket(click(5, tag=n), 30.0), block=False) for n in range(4, 7)]
        assert [r.label for r in tab.ran] == ["#d5.t0"]  # the others wait for the write holding the tab
        tab.release(first)
        assert isinstance(held.get(timeout=10), Done)
        assert all(isinstance(outcome, Done) for outcome in here.result(timeout=10))
        assert all(isinstance(answer.get(timeout=10), Done) for answer in mailbox)
    finally:
        ref.stop()
    labels = [r.label for r in tab.ran]
    assert [label for label in labels if label[-1] in "123"] == ["#d5.t1", "#d5.t2", "#d5.t3"]
    assert [label for label in labels if label[-1] in "456"] == ["#d5.t4", "#d5.t5", "#d5.t6"]
    assert not tab.overlapped_writes


def test_wait_for_result_gives_the_tab_back_to_other_writes_between_its_polls(
        actor: pykka.ActorRef[TabActor], tab: RecordingTab) -> None:
    polls = tab.hold(wait_for_result(1))  # it polls until released
    polling = actor.ask(ticket(polls, 30.0), block=False)
    tab.started(polls)
    assert isinstance(actor.ask(ticket(click(5), 30.0), timeout=10), Done)  # between two of its polls
    assert not tab.ran[0].ended.is_set()
    tab.release(polls)
    assert isinstance(polling.get(timeout=10), Done)
    assert not tab.overlapped_writes


def test_an_interrupt_ends_running_writes_unknown_and_refuses_the_rest(
        io: IoLoop, actor: pykka.ActorRef[TabActor], tab: RecordingTab) -> None:
    running = ticket(tab.hold(click(5000)), 30.0)
    answer = actor.ask(running, block=False)
    queued = actor.ask(ticket(click(5, tag=1), 30.0), block=False)
    tab.started(running.request.command)
    interrupted = actor.ask(Interrupt(), timeout=2)
    assert interrupted == [running]
    outcome = answer.get(timeout=2)
    assert isinstance(outcome, Unknown) and outcome.failure.code == "node_stopped"
    refused = [queued.get(timeout=2), actor.ask(ticket(wait_for(5), 5.0), timeout=2)]
    assert all(was_not_sent(o) and o.failure.code == "node_stopped" for o in refused), refused
    assert [r.label for r in tab.ran] == ["#d5000.t0"]


def test_a_request_over_the_bus_can_be_withdrawn_before_it_arrives_while_queued_and_after_it_ended() -> None:
    served = ServedRequests(capacity=3)
    early = TabRequest(click(5), 5.0, time.time() + 5.0, id="a")
    assert served.withdraw(TabCancel("a")) == RequestWithdrawn()
    assert served.admit(early) is None  # it came after its withdrawal: never run
    queued = TabRequest(click(5), 5.0, time.time() + 5.0, id="b")
    admitted = served.admit(queued)
    assert admitted is not None
    assert served.withdraw(TabCancel("b")) == RequestWithdrawn() and not admitted.start()
    running = TabRequest(click(5), 5.0, time.time() + 5.0, id="c")
    started = served.admit(running)
    assert started is not None and started.start()
    assert served.withdraw(TabCancel("c")) == RequestRunning()
    served.ended(running, Done({"x": 1}))
    assert served.withdraw(TabCancel("c")) == RequestEnded(Done({"x": 1}))
    late = TabRequest(click(5), 5.0, time.time() - 1.0, id="d")  # its deadline passed on the way
    arrived = served.admit(late)
    assert arrived is not None and not arrived.start()


def test_a_request_from_another_node_times_out_naming_the_step_s_own_timeout(
        actor: pykka.ActorRef[TabActor], tab: RecordingTab) -> None:
    """Issue 29: through a node a step's timeout read "Command timed out after 0.99988s" (the time it had left
    on arrival); the message names the step's own timeout, and the browser gets both."""
    request = TabRequest(tab.hold(click(5)), 1.0, time.time() + 0.9)  # 0.1 s spent on its way
    admitted = ServedRequests().admit(request)
    assert admitted is not None
    outcome = actor.ask(admitted, timeout=10)
    assert isinstance(outcome, Unknown) and outcome.failure.error == "Command timed out after 1s"
    [(timeout, within)] = tab.timeouts
    assert timeout == 1.0 and within is not None and 0.8 < within < 0.9
    tab.release(click(5))


def test_a_ticket_starts_once_and_never_after_its_deadline() -> None:
    fresh = ticket(click(5), 5.0)
    assert fresh.start() and not fresh.start() and not fresh.withdraw()
    stale = Ticket(TabRequest(click(5), 0.01), -1.0)  # its deadline passed on the way
    assert not stale.start() and stale.withdraw()


# --- a property: whatever the schedule, nothing runs late, withdrawn or twice, and writes never overlap ---

_REQUEST = st.fixed_dictionaries({
    "kind": st.sampled_from(["read", "write", "write", "poll"]),
    "ms": st.integers(0, 25),
    "timeout_ms": st.integers(1, 80),
    "delay_ms": st.integers(0, 15),
    "withdraw_ms": st.none() | st.integers(0, 60),
})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(schedule=st.lists(_REQUEST, min_size=1, max_size=7))
def test_queued_requests_deadlines_and_withdrawals_never_run_a_request_late_withdrawn_or_twice(
        io: IoLoop, schedule: list[dict[str, Any]]) -> None:
    tab = RecordingTab()
    actor = TabActor.start(1, tab, io)
    try:
        tickets: list[WatchedTicket] = []
        for n, item in enumerate(schedule):
            command = {"read": wait_for(item["ms"], n), "write": click(item["ms"], n),
                       "poll": wait_for_result(1 + item["ms"] % 3, n)}[item["kind"]]
            tickets.append(ticket(command, item["timeout_ms"] / 1000))
        withdrawn: dict[int, bool] = {}
        with ThreadPoolExecutor(max_workers=len(schedule)) as pool:
            def submit(n: int) -> Outcome:
                time.sleep(schedule[n]["delay_ms"] / 1000)
                answer = actor.ask(tickets[n], block=False)
                if schedule[n]["withdraw_ms"] is not None:
                    time.sleep(schedule[n]["withdraw_ms"] / 1000)
                    withdrawn[n] = tickets[n].withdraw()
                outcome: Outcome = answer.get(timeout=tickets[n].request.timeout + SETTLE + 1)
                return outcome
            outcomes = list(pool.map(submit, range(len(schedule))))
        assert not tab.overlapped_writes
        labels = [r.label for r in tab.ran]
        assert len(labels) == len(set(labels)), "a request ran twice"
        for n, (item, outcome) in enumerate(zip(schedule, outcomes, strict=True)):
            mine = [r for r in tab.ran if r.label == _label(tickets[n].request.command)]
            if was_not_sent(outcome):
                assert not mine, f"request {n} said nothing was sent, but it ran"
            else:
                assert mine, f"request {n} answered {outcome} without running"
                assert tickets[n].let_start, f"request {n} ran without its ticket letting it start"
            if withdrawn.get(n) is True:
                assert not mine and was_not_sent(outcome), f"request {n} ran after it was withdrawn"
            if item["kind"] == "read" and not was_not_sent(outcome):
                assert isinstance(outcome, Done | Failed)  # a read never ends unknown
    finally:
        actor.stop()
