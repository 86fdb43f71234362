"""Reads of the node's own tabs on its loop (``core.here``): a run of consecutive reads goes there in one hop,
and the call tells exactly what it tells with every step through the driver: events, results, statuses."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from actors.threads import ThreadedSequences
from core.calls import Calls, SequentialIds
from core.engine import Ports
from messages.commands import Command, parse_call
from messages.events import Event
from messages.results import Outcome
from tests.unit.fakes import ScriptedDriver, World
from tests.unit.helpers import click, read, sequence

T = TypeVar("T")
HERE = frozenset({1, 2})
"""The tabs of the node the fake loop stands for; tab 3 is another node's."""


class FakeHere:
    """The node's loop as the engine sees it: its reads answered by the same scripted driver; each hop counted."""

    def __init__(self, driver: ScriptedDriver) -> None:
        self.driver = driver
        self.hops: list[int] = []
        """How many reads ran in each hop, in order."""

    def holds(self, tab: int) -> bool:
        return tab in HERE

    def run(self, reads: Callable[[], Coroutine[Any, Any, T]], timeout: float) -> T:
        before = len(self.driver.sent)
        value = asyncio.run(reads())
        self.hops.append(len(self.driver.sent) - before)
        return value

    async def read(self, command: Command, tab: int, timeout: float) -> Outcome | None:
        return self.driver.execute(command, tab, timeout)


def world_with(here: bool) -> tuple[World, FakeHere]:
    world = World()
    loop = FakeHere(world.driver)
    world.calls = Calls(lambda agent: Ports(world.driver, world.clock, world.claims, ThreadedSequences(),
                                            here=loop if here else None),
                        world.store, audit=SequentialIds(), sink=world.events.append)
    return world, loop


def run_both(commands: list[dict[str, Any]], script: dict[str, list[Any]] | None = None,
             **options: Any) -> tuple[dict[str, Any], list[Event], FakeHere]:
    """Run the call with and without the loop; assert both tell the same; the loop's response, events, hops."""
    told = []
    loop = None
    for here in (False, True):
        world, loop = world_with(here)
        for key, answers in (script or {}).items():
            world.driver.on(key, *answers)
        spec = parse_call("batch", commands, default_tab=1, **options)
        body = world.calls.run(spec).body
        body.pop("resume_token", None)  # a new one each call
        told.append((body, world.events, [(s.key, s.tab) for s in world.driver.sent]))
    assert told[0] == told[1]
    assert loop is not None
    return told[1][0], told[1][1], loop


def test_consecutive_reads_of_the_nodes_tabs_take_one_hop_and_a_write_splits_them() -> None:
    body, _, loop = run_both([read("#a"), read("#b"), {"action": "title"}, click("#go"), read("#c"), read("#d")])

    assert body["status"] == "ok"
    assert loop.hops == [3, 2]  # the click went through the driver, between the two hops


def test_a_read_of_another_nodes_tab_goes_through_the_driver() -> None:
    body, _, loop = run_both([read("#a"), {"action": "pageText", "selector": "#b", "tabId": 3}, read("#c")])

    assert body["status"] == "ok"
    assert loop.hops == [1, 1]


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
    assert loop.hops == [2, 1]


@pytest.mark.parametrize("answer", ["fail_retryable", "busy"])
def test_a_read_that_fails_or_runs_out_of_time_on_the_loop_tells_what_the_driver_would(answer: str) -> None:
    body, _, _ = run_both([read("#a"), read("#b")], {"#a": [answer]}, timeout=600)

    assert body["status"] == "failed"
