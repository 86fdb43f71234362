"""The tab actor: deadlines, withdrawals and reads beside writes, against a tab that records what it ran.

The tab is a fake (the browser's part is tested in tests/integration); the actor, its mailbox
and the loop are the real ones.
"""

from __future__ import annotations

import asyncio
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
from actors.tab_actor import Interrupt, Pause, ServedRequests, TabActor, Ticket
from messages.commands import Command, is_write, parse_command
from messages.contract import SETTLE
from messages.requests import TabCancel, TabRequest
from messages.results import Done, Failed, Outcome, Unknown, outcome_from_json


@dataclass
class Ran:
    """One command the tab ran: when it started and ended (``time.monotonic()``)."""

    label: str
    write: bool
    started: float
    ended: float = 0.0


@dataclass
class RecordingTab:
    """A tab that sleeps as long as each command's selector says (``#d<ms>``) and records what it ran.

    ``waitForResult`` polls ``polls`` times (its code, ``polls:<n>``) with the actor's pause between.
    """

    ran: list[Ran] = field(default_factory=list)
    writing: int = 0
    overlapped_writes: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def execute(self, command: Command, tab_id: int | None, timeout: float, *,
                      pause: Pause | None = None) -> Outcome:
        label = _label(command)
        record = Ran(label, is_write(command), time.monotonic())
        self.ran.append(record)
        try:
            if command.action == "waitForResult":
                polls = int(str(getattr(command, "code", "polls:1")).split(":")[1])
                for poll in range(polls):
                    await self._section(0.002, record.write)
                    if poll < polls - 1:
                        assert pause is not None
                        await pause(0.01)
            else:
                await self._section(int(label.split("#d")[1].split(".")[0]) / 1000, record.write)
        finally:
            record.ended = time.monotonic()
        return Done({"ran": label})

    async def _section(self, seconds: float, write: bool) -> None:
        if write:
            self.writing += 1
            self.overlapped_writes |= self.writing > 1
        try:
            await asyncio.sleep(seconds)
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


def ticket(command: Command, timeout: float) -> Ticket:
    return Ticket(TabRequest(command, timeout, time.time() + timeout), timeout)


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
    write = actor.ask(ticket(click(400), 5.0), block=False)
    time.sleep(0.05)
    read = actor.ask(ticket(wait_for(10), 5.0), block=False)
    assert isinstance(read.get(timeout=0.3), Done)  # answered while the write still runs
    assert isinstance(write.get(timeout=2), Done)
    read_ran = next(r for r in tab.ran if not r.write)
    write_ran = next(r for r in tab.ran if r.write)
    assert read_ran.ended < write_ran.ended


def test_a_long_read_never_holds_up_a_write(actor: pykka.ActorRef[TabActor], tab: RecordingTab) -> None:
    read = actor.ask(ticket(wait_for(600), 5.0), block=False)  # the other agent's waitFor that never comes
    time.sleep(0.05)
    assert isinstance(actor.ask(ticket(click(5), 0.5), timeout=1), Done)
    assert [r.label for r in tab.ran if r.write] == ["#d5.t0"]
    read.get(timeout=2)


def test_a_write_queued_past_its_deadline_is_never_run_and_says_nothing_was_sent(
        actor: pykka.ActorRef[TabActor], tab: RecordingTab) -> None:
    long_write = actor.ask(ticket(click(500), 5.0), block=False)
    time.sleep(0.05)
    queued = actor.ask(ticket(click(5, tag=1), 0.1), timeout=2)
    assert was_not_sent(queued), queued
    assert queued.failure.retryable
    assert isinstance(long_write.get(timeout=2), Done)
    time.sleep(0.1)
    assert [r.label for r in tab.ran] == ["#d500.t0"]  # the queued click never ran, not even later


def test_a_withdrawn_ticket_never_runs_and_withdraw_tells_whether_it_had_started(
        actor: pykka.ActorRef[TabActor], tab: RecordingTab) -> None:
    long_write = actor.ask(ticket(click(300), 5.0), block=False)
    time.sleep(0.05)
    queued = ticket(click(5, tag=1), 5.0)
    answer = actor.ask(queued, block=False)
    assert queued.withdraw() is True
    assert was_not_sent(answer.get(timeout=2))
    long_write.get(timeout=2)
    assert [r.label for r in tab.ran] == ["#d300.t0"]
    running = ticket(click(200, tag=2), 5.0)
    answer = actor.ask(running, block=False)
    time.sleep(0.05)
    assert running.withdraw() is False  # it had started: its outcome is whatever the tab says
    assert isinstance(answer.get(timeout=2), Done)


def test_writes_stay_one_at_a_time_and_in_order(actor: pykka.ActorRef[TabActor], tab: RecordingTab) -> None:
    answers = [actor.ask(ticket(click(20, tag=n), 5.0), block=False) for n in range(5)]
    assert all(isinstance(a.get(timeout=3), Done) for a in answers)
    assert [r.label for r in tab.ran] == [f"#d20.t{n}" for n in range(5)]
    assert not tab.overlapped_writes


def test_wait_for_result_gives_the_tab_back_to_other_writes_between_its_polls(
        actor: pykka.ActorRef[TabActor], tab: RecordingTab) -> None:
    polling = actor.ask(ticket(wait_for_result(20), 5.0), block=False)  # about 20 x 12 ms
    time.sleep(0.03)
    assert isinstance(actor.ask(ticket(click(5), 5.0), timeout=1), Done)
    with pytest.raises(pykka.Timeout):
        polling.get(timeout=0)  # the click was answered while the polls went on
    assert isinstance(polling.get(timeout=3), Done)
    click_ran = next(r for r in tab.ran if r.label.startswith("#d5"))
    poll_ran = next(r for r in tab.ran if r.label.startswith("polls"))
    assert click_ran.ended < poll_ran.ended
    assert not tab.overlapped_writes


def test_an_interrupt_ends_running_writes_unknown_and_refuses_the_rest(
        io: IoLoop, actor: pykka.ActorRef[TabActor], tab: RecordingTab) -> None:
    running = ticket(click(5000), 30.0)
    answer = actor.ask(running, block=False)
    queued = actor.ask(ticket(click(5, tag=1), 30.0), block=False)
    time.sleep(0.05)
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
    assert served.withdraw(TabCancel("a")) == {"withdrawn": True}
    assert served.admit(early) is None  # it came after its withdrawal: never run
    queued = TabRequest(click(5), 5.0, time.time() + 5.0, id="b")
    admitted = served.admit(queued)
    assert admitted is not None
    assert served.withdraw(TabCancel("b")) == {"withdrawn": True} and not admitted.start()
    running = TabRequest(click(5), 5.0, time.time() + 5.0, id="c")
    started = served.admit(running)
    assert started is not None and started.start()
    assert served.withdraw(TabCancel("c")) == {"running": True}
    served.ended(running, Done({"x": 1}))
    reply = served.withdraw(TabCancel("c"))
    assert outcome_from_json(reply["outcome"]) == Done({"x": 1})
    late = TabRequest(click(5), 5.0, time.time() - 1.0, id="d")  # its deadline passed on the way
    arrived = served.admit(late)
    assert arrived is not None and not arrived.start()


def test_a_ticket_starts_once_and_never_after_its_deadline() -> None:
    fresh = ticket(click(5), 5.0)
    assert fresh.start() and not fresh.start() and not fresh.withdraw()
    stale = Ticket(TabRequest(click(5), 0.01), 0.01)
    time.sleep(0.02)
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
        tickets: list[Ticket] = []
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
                # the tab notes the time just after the ticket started: 50 ms of slack for a busy machine
                assert mine[0].started < tickets[n].deadline + 0.05, f"request {n} started after its deadline"
            if withdrawn.get(n) is True:
                assert not mine and was_not_sent(outcome), f"request {n} ran after it was withdrawn"
            if item["kind"] == "read" and not was_not_sent(outcome):
                assert isinstance(outcome, Done | Failed)  # a read never ends unknown
    finally:
        actor.stop()
