"""A write recorded ahead of its turn (``core.ahead``): which write each step records, once, and carried by path."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors.threads import ThreadedSequences
from core.ahead import Ahead, at_turn, writes_ahead
from core.blocks import lookup_in
from core.claims import ClaimTable
from core.engine import Ports
from messages.commands import Command, parse_call
from messages.events import Event, StepDispatched
from tests.unit.fakes import FakeClock, ScriptedDriver
from tests.unit.helpers import click, read, sequence


class Audit:
    def __init__(self) -> None:
        self.entries: list[str] = []

    def step(self, call: int, path: str, command: Command, tab_id: int | None, *,
             resumed: bool) -> Callable[[], None] | None:
        self.entries.append(path)
        return None

    def observed(self, call: int, path: str, command: Command, tab_id: int | None) -> None: ...

    def withdrawn(self, call: int, path: str, command: Command, tab_id: int | None) -> None: ...


class Run:
    """The run of a call as an ``Ahead`` talks to it."""

    def __init__(self) -> None:
        clock = FakeClock()
        self.call, self.timeout, self.deadline, self.timed_out = 1, 60.0, 60.0, False
        self.audit = Audit()
        self.ports = Ports(ScriptedDriver(clock), clock, ClaimTable(), ThreadedSequences(), self.audit)
        self.events: list[Event] = []

    def hand_over(self, event: Event) -> Callable[[], None] | None:
        self.events.append(event)
        return None

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"an Ahead needs no {name}")


def ahead(run: Run, path: str = "2") -> Ahead:
    return Ahead(run, parse_call("batch", [click("#a")]).commands[0], path, lookup_in([]), 1, resumed=False)


def test_a_write_records_the_next_write_across_reads_and_any_other_step_the_next_step_if_a_write() -> None:
    commands = parse_call("batch", [click("#a"), read("#b"), read("#c"), click("#d"), click("#e"), read("#f"),
                                    sequence(click("#g")), read("#h"), click("#i"), read("#j")]).commands

    assert writes_ahead(commands) == [3, None, 3, 4, None, None, None, 8, None, None]


def test_a_write_is_recorded_once_however_often_it_is_called() -> None:
    run = Run()
    write = ahead(run)

    write()
    write()

    assert run.audit.entries == ["2"] and run.events == [StepDispatched(1, "2")]
    intent = write.take()
    assert intent is not None and intent.path == "2" and write.take() is None


def test_a_write_taken_before_it_is_called_never_records() -> None:
    run = Run()
    write = ahead(run)

    assert write.take() is None
    write()

    assert run.audit.entries == [] and run.events == []


def test_a_write_is_carried_to_its_turn_by_its_path() -> None:
    run = Run()
    write = ahead(run, "3")
    write()

    assert at_turn(write, "1") == (write, None)
    carried, intent = at_turn(write, "3")
    assert carried is None and intent is not None and intent.path == "3"


def test_a_write_its_step_never_called_is_dropped_at_the_next_turn_and_never_records() -> None:
    run = Run()
    write = ahead(run, "3")

    assert at_turn(write, "1") == (None, None)
    write()
    assert run.events == []
