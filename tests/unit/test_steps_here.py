"""Steps of the node's own tabs on its loop (``core.here``): a run of consecutive reads and writes goes there in one
hop, and the call tells exactly what it tells with every step through the driver: events, results, statuses, what
was sent, and each write's records made before it is sent, in the same order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from actors.threads import ThreadedSequences
from core.calls import Calls, SequentialIds
from core.engine import Ports
from core.ports import Recorded
from messages.commands import Command, is_write, parse_call
from messages.events import Event, StepDispatched, StepFailed, StepStarted, StepSucceeded
from messages.results import Outcome
from tests.unit.fakes import LoopHere, ScriptedDriver, World
from tests.unit.helpers import click, find, parallel, read, sequence

HERE = frozenset({1, 2})
"""The tabs of the node the fake loop stands for; tab 3 is another node's."""


class Records:
    """The run's records as the engine sees them: each write's audit entry and ``StepDispatched``, made in order;
    ``lost``: the store loses every ``StepDispatched``."""

    def __init__(self, world: World, *, lost: bool = False) -> None:
        self.world = world
        self.lost = lost
        self.made: list[str] = []
        """``entry <path>``, ``stored <path>`` as each record is made, ``sent <key>`` as each write is sent."""

    def sink(self, event: Event) -> Callable[[], None] | None:
        self.world.events.append(event)
        if not isinstance(event, StepDispatched):
            return None

        def stored() -> None:
            if self.lost:
                raise RuntimeError("the store did not answer")
            self.made.append(f"stored {event.path}")
        return stored

    def step(self, call: int, path: str, command: Command, tab_id: int | None, *,
             resumed: bool) -> Callable[[], None] | None:
        return lambda: self.made.append(f"entry {path}") if is_write(command) else None

    def observed(self, call: int, path: str, command: Command, tab_id: int | None) -> None:
        self.made.append(f"observed {path}")

    def withdrawn(self, call: int, path: str, command: Command, tab_id: int | None) -> None:
        self.made.append(f"withdrawn {path}")


def world_with(here: bool, *, lost: bool = False) -> tuple[World, LoopHere, Records]:
    world = World()
    loop = LoopHere(world.driver, HERE)
    records = Records(world, lost=lost)
    world.calls = Calls(lambda agent: Ports(world.driver, world.clock, world.claims, ThreadedSequences(), records,
                                            here=loop if here else None),
                        world.store, audit=SequentialIds(), sink=records.sink)
    execute = world.driver.execute

    def noted(command: Command, tab_id: int | None, timeout: float, recorded: Sequence[Recorded] = (), *,
              as_read: bool = False) -> Outcome:
        outcome = execute(command, tab_id, timeout, recorded, as_read=as_read)
        records.made.append(f"sent {ScriptedDriver.key_of(command)}")  # once its records are made
        return outcome
    world.driver.execute = noted  # type: ignore[method-assign]
    return world, loop, records


def run_both(commands: list[dict[str, Any]], script: dict[str, list[Any]] | None = None, *, lost: bool = False,
             observed: dict[str, str] | None = None, interleaved: bool = False,
             **options: Any) -> tuple[dict[str, Any], list[Event], LoopHere]:
    """Run the call with and without the loop (and resume it with ``observed``, if given); assert both tell the same:
    responses, events, what was sent, the records in order (each step's own order, when parallel sequences
    ``interleaved``); the loop's response, events, hops."""
    told = []
    loop = None
    for here in (False, True):
        world, loop, records = world_with(here, lost=lost)
        for key, answers in (script or {}).items():
            world.driver.on(key, *answers)
        spec = parse_call("batch", commands, default_tab=1, **options)
        body = world.calls.run(spec).body
        token = body.pop("resume_token", None)  # a new one each call
        if observed is not None:
            assert token is not None
            body = world.calls.resume(body["call"], token, observed).body
            body.pop("resume_token", None)
        sent = [(s.key, s.tab) for s in world.driver.sent]
        if interleaved:
            told.append((body, sorted(world.events, key=lambda e: getattr(e, "path", "")), sorted(sent),
                         sorted(records.made)))
        else:
            told.append((body, world.events, sent, records.made))
    assert told[0] == told[1]
    assert loop is not None
    return told[1][0], told[1][1], loop


def test_consecutive_steps_of_the_nodes_tabs_writes_included_take_one_hop() -> None:
    body, _, loop = run_both([read("#a"), read("#b"), {"action": "title"}, click("#go"), read("#c"), read("#d")])

    assert body["status"] == "ok"
    assert loop.hops == [6]


def test_a_step_of_another_nodes_tab_goes_through_the_driver() -> None:
    body, _, loop = run_both([read("#a"), {"action": "pageText", "selector": "#b", "tabId": 3}, read("#c"),
                              click("#d", 3), click("#e")])

    assert body["status"] == "ok"
    assert loop.hops == [1, 1, 1]


def test_a_failed_read_stops_the_list_on_the_loop_and_the_rest_is_skipped() -> None:
    body, _, loop = run_both([read("#a"), read("#b"), read("#c"), click("#d")], {"#b": ["fail"]})

    assert [p["status"] for p in body["progress"]] == ["ok", "failed", "skipped", "skipped"]
    assert loop.hops == [2]


def test_a_warning_stops_a_call_that_stops_on_warnings() -> None:
    body, _, loop = run_both([read("#a"), read("#b"), read("#c")], {"#a": ["warn"]}, stop_on_warning=True)

    assert [p["status"] for p in body["progress"]] == ["ok", "skipped", "skipped"]
    assert loop.hops == [1]


def test_references_to_earlier_reads_resolve_on_the_loop() -> None:
    body, _, loop = run_both([read("#a"), {"action": "find", "selector": "#b", "text": "${$0.text}"}])

    assert body["status"] == "ok"
    assert loop.hops == [2]


def test_reads_inside_a_sequence_run_on_the_loop_too() -> None:
    body, _, loop = run_both([sequence(read("#a"), read("#b"), click("#c"), read("#d"))])

    assert body["status"] == "ok"
    assert loop.hops == [4]


@pytest.mark.parametrize("answer", ["fail_retryable", "busy"])
def test_a_read_that_fails_or_runs_out_of_time_on_the_loop_tells_what_the_driver_would(answer: str) -> None:
    body, _, _ = run_both([read("#a"), read("#b")], {"#a": [answer]}, timeout=600)

    assert body["status"] == "failed"


@pytest.mark.parametrize("answer", ["fail", "fail_retryable", "unknown", "hang", "busy", "hold", "warn"])
def test_a_write_that_does_not_end_ok_on_the_loop_tells_what_the_driver_would(answer: str) -> None:
    body, events, loop = run_both([click("#a"), click("#b"), click("#c"), read("#d")], {"#b": [answer]},
                                  stop_on_warning=True, timeout=600)

    assert loop.hops == [2]
    assert body["progress"][2]["status"] == "skipped"  # recorded ahead, withdrawn
    assert sum(isinstance(e, StepDispatched) for e in events) == 3


def test_writes_recorded_ahead_and_at_their_turn_are_sent_after_their_records() -> None:
    commands = [read("#a"), click("#b"), find("#c", text="${$0.text}"),
                {"action": "fill", "selector": "#d", "value": "${$2.text}"}, click("#e"),
                {"action": "fill", "selector": "#f", "value": "${$2.text}"}]
    body, _, loop = run_both(commands)

    assert body["status"] == "ok"
    assert loop.hops == [6]
    world, _, records = world_with(True)
    world.calls.run(parse_call("batch", commands, default_tab=1))
    writes = [made.split()[1] for made in records.made if made.startswith("sent #") and made[6] in "bdef"]
    for path, key in zip(("1", "3", "4", "5"), writes, strict=True):
        sent = records.made.index(f"sent {key}")
        assert records.made.index(f"entry {path}") < sent and records.made.index(f"stored {path}") < sent


def test_a_write_whose_records_cannot_be_made_is_not_sent() -> None:
    body, _, loop = run_both([read("#a"), click("#b"), read("#c")], lost=True)

    assert [p["status"] for p in body["progress"]] == ["ok", "failed", "skipped"]
    assert body["results"][1]["code"] == "events_unavailable"
    assert loop.hops == [2]  # the write went there, and was not sent (the driver's sends are compared above)


def test_the_containers_deadline_stops_the_steps_on_the_loop() -> None:
    body, _, _ = run_both([click("#a"), click("#b"), read("#c")], {"#a": ["hang"]}, timeout=1)

    assert body["status"] == "unknown"
    assert [p["status"] for p in body["progress"]] == ["unknown", "skipped", "skipped"]


def test_writes_in_a_parallel_claim_their_tabs_on_the_thread() -> None:
    body, _, loop = run_both([parallel([read("#a", tabId=1), click("#b", 1)], [click("#c", 2), read("#d", tabId=2)])],
                             interleaved=True)

    assert body["status"] == "ok"
    assert sorted(loop.hops) == [1, 1]  # the reads, each its own hop; the writes through the driver


def test_a_resume_keeps_and_observes_steps_as_it_does_without_the_loop() -> None:
    body, _, _ = run_both([click("#a"), click("#b"), read("#c"), click("#d")], {"#b": ["unknown"]},
                          observed={"1": "applied"})

    assert [p["status"] for p in body["progress"]] == ["ok", "ok", "ok", "ok"]


def _before(events: list[Event], first: tuple[str, str], then: tuple[str, str]) -> bool:
    """Whether the event ``first`` (kind, path) of the run came before ``then``."""
    told = [(e.kind, getattr(e, "path", None)) for e in events]
    return told.index(first) < told.index(then)


def test_a_write_is_recorded_ahead_as_the_write_before_it_is_sent_and_carried_over_the_reads_between() -> None:
    fill = {"action": "fill", "selector": "#g", "value": "${$6.text}"}
    body, events, loop = run_both([click("#a"), read("#b"), {"action": "title"}, click("#c"), read("#d"),
                                   click("#e", 3), read("#f"), read("#h"), fill])

    assert body["status"] == "ok"
    assert loop.hops == [5, 3]  # #e is another node's tab: through the driver
    assert _before(events, ("StepDispatched", "3"), ("StepStarted", "1"))  # as #a was sent, before the reads
    assert _before(events, ("StepDispatched", "5"), ("StepStarted", "4"))  # as #c was sent
    # naming a read after #e: recorded as the read after that one is sent
    assert _before(events, ("StepStarted", "7"), ("StepDispatched", "8"))
    assert _before(events, ("StepDispatched", "8"), ("StepSucceeded", "7"))


@pytest.mark.parametrize("answer", ["fail", "fail_retryable", "hold", "warn"])
def test_a_read_between_that_stops_the_list_withdraws_the_write_carried_over_it(answer: str) -> None:
    _, events, loop = run_both([click("#a"), read("#b"), read("#c"), click("#d"), read("#e")], {"#c": [answer]},
                               stop_on_warning=True)

    assert loop.hops == [3]
    world, _, records = world_with(True)
    world.driver.on("#c", answer)
    body = world.calls.run(parse_call("batch", [click("#a"), read("#b"), read("#c"), click("#d"), read("#e")],
                                      default_tab=1, stop_on_warning=True)).body
    assert [p["status"] for p in body["progress"]][3:] == ["skipped", "skipped"]
    assert [e.kind for e in events if getattr(e, "path", None) == "3"] == ["StepDispatched", "StepSkipped"]
    assert "withdrawn 3" in records.made and "sent #d" not in records.made


def test_the_containers_deadline_between_withdraws_the_write_carried_to_it() -> None:
    body, events, _ = run_both([click("#a"), read("#b"), click("#c")], {"#b": ["hang"]}, timeout=1)

    assert [p["status"] for p in body["progress"]][::2] == ["ok", "skipped"]
    assert body["results"][1]["code"] == "container_timeout"
    assert [e.kind for e in events if getattr(e, "path", None) == "2"] == ["StepDispatched", "StepSkipped"]


def test_a_resume_records_ahead_across_kept_steps_and_reads() -> None:
    body, events, _ = run_both([click("#a"), read("#b"), click("#c"), read("#d"), click("#e")],
                               {"#b": ["fail_retryable", "ok"]}, observed={})
    first = events[:[e.kind for e in events].index("CallResumed")]
    resumed = events[len(first):]
    assert [e.kind for e in first if getattr(e, "path", None) == "2"] == ["StepDispatched", "StepSkipped"]
    assert [p["status"] for p in body["progress"]] == ["ok", "ok", "ok", "ok", "ok"]
    # #a kept: #c is recorded as the read after it is sent; #e as #c is sent, before the read between
    assert _before(resumed, ("StepStarted", "1"), ("StepDispatched", "2"))
    assert _before(resumed, ("StepDispatched", "4"), ("StepStarted", "3"))


class LoopAnsweringFirst(LoopHere):
    """A loop whose reads answer before their request is out (as a read its policy refuses does: ``sent`` comes on
    the loop's next turn, after the answer)."""

    async def read(self, command: Command, tab: int, timeout: float,
                   sent: Callable[[], None] | None) -> Outcome | None:
        return await super().read(command, tab, timeout, None)


@pytest.mark.parametrize("where", ["thread", "loop", "loop, answered first"])
def test_a_read_on_the_loop_is_told_started_once_its_request_is_out_and_before_its_outcome(where: str) -> None:
    """On the loop a read's ``StepStarted`` (and audit entry) is told once its request is out, while the browser
    works (``Step.sent``), or with its outcome when that comes first; through the driver, before it is sent. Its
    outcome's event comes after it either way."""
    world, loop, records = world_with(where != "thread")
    if where == "loop, answered first":
        loop = LoopAnsweringFirst(world.driver, HERE)

    def sink(event: Event) -> Callable[[], None] | None:
        if isinstance(event, StepStarted | StepSucceeded | StepFailed):
            records.made.append(f"{event.kind} {event.path}")
        return records.sink(event)

    world.calls = Calls(lambda agent: Ports(world.driver, world.clock, world.claims, ThreadedSequences(), records,
                                            here=None if where == "thread" else loop),
                        world.store, audit=SequentialIds(), sink=sink)
    world.driver.on("#b", "fail")
    body = world.calls.run(parse_call("batch", [read("#a"), read("#b")], default_tab=1)).body
    assert [p["status"] for p in body["progress"]] == ["ok", "failed"]
    told = {"thread": [["StepStarted 0", "sent #a", "StepSucceeded 0"], ["StepStarted 1", "sent #b", "StepFailed 1"]],
            "loop": [["sent #a", "StepStarted 0", "StepSucceeded 0"], ["sent #b", "StepStarted 1", "StepFailed 1"]]}
    told["loop, answered first"] = told["loop"]
    assert records.made == told[where][0] + told[where][1]
    assert len(loop.hops) == (where != "thread")
