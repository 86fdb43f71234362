"""A call's driver over a real NATS server: where a new tab's request goes when its node has no responder.

A node is placed from the fleet's registry, which can name a node whose subscription has not yet
crossed the cluster's routes (it just started) or that just died: the driver places and asks again
until the request's deadline, since nothing reached a subject without responders. A request to a
tab's subject with no responder is answered at once (the tab is closed).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from actors.bus import NatsBus
from actors.call_actor import BusDriver
from actors.loop import IoLoop
from messages.codec import decode, encode
from messages.commands import Click, Command, NewTab
from messages.requests import Subjects, TabRequest
from messages.results import Done, Failed
from tests.nats_access import NatsAccess


@pytest.fixture
def bus(nats_access: NatsAccess) -> Iterator[tuple[IoLoop, NatsBus]]:
    io = IoLoop()
    connected = io.run(nats_access.bus(name="kitsune-test-driver"), timeout=10)
    yield io, connected
    io.run(connected.close(), timeout=10)


def _driver(io: IoLoop, bus: NatsBus, subjects: Subjects, placed: list[str]) -> BusDriver:
    def place(command: Command, agent: str | None, call: int | None) -> str:
        placed.append(subjects.node("late", "open"))
        return placed[-1]

    async def no_tabs() -> frozenset[int]:
        return frozenset()

    return BusDriver(io, bus, subjects, local=lambda tab, request: None, place=place, open_tabs=no_tabs,
                     agent="alice")


def test_a_new_tab_whose_node_answers_late_is_opened_there_once(bus: tuple[IoLoop, NatsBus]) -> None:
    io, nats = bus
    subjects, placed, asked = Subjects(fleet=f"f{uuid.uuid4().hex[:10]}"), list[str](), list[TabRequest]()

    async def opens(data: bytes) -> bytes:
        asked.append(decode(TabRequest, data))
        return encode(Done({"tabId": 41}))

    def subscribe_late() -> None:
        time.sleep(0.4)  # the node's interest arrives after the first tries
        io.run(nats.subscribe(subjects.node("late", "open"), opens), timeout=10)

    late = threading.Thread(target=subscribe_late)
    late.start()
    outcome = _driver(io, nats, subjects, placed).execute(NewTab(), None, 5.0)
    late.join()
    assert outcome == Done({"tabId": 41}), outcome
    assert len(asked) == 1 and asked[0].agent == "alice"
    assert len(placed) >= 3  # placed again before each new try: a node that left is not asked again


def test_a_new_tab_whose_node_never_answers_fails_retryably_at_its_deadline(bus: tuple[IoLoop, NatsBus]) -> None:
    io, nats = bus
    subjects, placed = Subjects(fleet=f"f{uuid.uuid4().hex[:10]}"), list[str]()
    outcome = _driver(io, nats, subjects, placed).execute(NewTab(), None, 1.0)
    assert isinstance(outcome, Failed), outcome
    assert (outcome.failure.code, outcome.failure.retryable) == ("no_responders", True)
    assert 3 <= len(placed) <= 8, placed  # tried, then again with pauses doubling until its deadline


def test_a_step_on_a_tab_nobody_serves_is_tab_closed_at_once(bus: tuple[IoLoop, NatsBus]) -> None:
    io, nats = bus
    subjects, placed = Subjects(fleet=f"f{uuid.uuid4().hex[:10]}"), list[str]()
    outcome = _driver(io, nats, subjects, placed).execute(Click(selector="#hit"), 7, 5.0)
    assert isinstance(outcome, Failed), outcome
    assert (outcome.failure.code, outcome.failure.retryable) == ("tab_closed", False)
    assert placed == []
