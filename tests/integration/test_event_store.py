"""The event store: one suite run against LocalEventStore and JetStreamEventStore, then the stream."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from nats.js.api import StorageType

from actors.bus import NatsBus
from actors.event_store import EVENTS_STREAM, EventStore, JetStreamEventStore, LocalEventStore
from actors.nats_admin import provision
from messages.codec import encode, replay
from messages.events import (
    CallEnded,
    CallStarted,
    Event,
    OutlineStep,
    StepDispatched,
    StepFailed,
    StepOutcomeUnknown,
    StepStarted,
    StepSucceeded,
)
from messages.steplog import fold
from tests.nats_access import NatsAccess

pytestmark = pytest.mark.anyio

OUTLINE = (
    OutlineStep("click", 3),
    OutlineStep("sequence", 3, steps=(OutlineStep("fill", 3), OutlineStep("submitForm", 3))),
    OutlineStep("parallel", sequences=((OutlineStep("pageText", 4),), (OutlineStep("url", 5),))),
)


def _call() -> int:
    """A call id no other test (or earlier run on a shared server) has used."""
    return uuid.uuid4().int % 10**15


def _events(call: int) -> list[Event]:
    return [
        CallStarted(call, "batch", OUTLINE, 120.0),
        StepStarted(call, "0", "click", 3),
        StepDispatched(call, "0"),
        StepSucceeded(call, "0", warning="slow page"),
        StepStarted(call, "1", "sequence", 3),
        StepStarted(call, "1.0", "fill", 3),
        StepDispatched(call, "1.0"),
        StepFailed(call, "1.0", "element_not_found", "command 1.0: no element matches", True),
        StepOutcomeUnknown(call, "1", "container_timeout", "the call timed out"),
        CallEnded(call, "container_timeout"),
    ]


@pytest.fixture
async def bus(nats_access: NatsAccess) -> AsyncIterator[NatsBus]:
    made = await nats_access.bus(name="kitsune-test-events")
    yield made
    await made.close()


@pytest.fixture(params=["local", "jetstream"])
async def store(request: pytest.FixtureRequest) -> AsyncIterator[EventStore]:
    if request.param == "local":
        yield LocalEventStore()
        return
    connection = await request.getfixturevalue("nats_access").bus(name="kitsune-test-events")
    try:
        yield await JetStreamEventStore.create(connection)
    finally:
        await connection.close()


# --- the shared suite ----------------------------------------------------------------------


async def test_a_call_reads_back_its_own_events_in_order(store: EventStore) -> None:
    mine, other = _call(), _call()
    my_events, other_events = _events(mine), _events(other)[:4]
    for index, event in enumerate(my_events):  # interleaved with another call's
        await store.append(event)
        if index < len(other_events):
            await store.append(other_events[index])
    assert await store.read(mine) == my_events
    assert await store.read(other) == other_events


async def test_events_round_trip_into_the_same_step_log(store: EventStore) -> None:
    call = _call()
    events = _events(call)
    for event in events:
        await store.append(event)
    back = await store.read(call)
    assert [type(e) for e in back] == [type(e) for e in events]
    assert back == events
    assert fold(back) == fold(events) == replay(await store.records(call))  # as a node's replay folds them


async def test_posted_events_are_stored_in_order_once_a_later_append_returns(store: EventStore) -> None:
    call = _call()
    events = _events(call)
    for event in events[:3]:
        await store.post([event])  # nothing to wait for
    await store.post(events[3:-1])  # several at once
    await store.append(events[-1])  # its acknowledgement covers the events posted before it
    assert await store.read(call) == events


async def test_events_of_several_calls_sent_together_read_back_each_its_own(store: EventStore) -> None:
    mine, other = _call(), _call()
    my_events, other_events = _events(mine), _events(other)
    together = [*my_events[:4], *other_events[:2], *my_events[4:], *other_events[2:]]
    stored = await store.send(together[:-1])
    await stored  # the last one sent, acknowledged: everything before it is stored too
    await store.post(together[-1:])
    await store.append(CallEnded(other, "completed"))
    assert await store.read(mine) == my_events
    assert await store.read(other) == [*other_events, CallEnded(other, "completed")]
    records = await store.records(mine)
    assert len(records) == len(my_events)  # one wire form a record, however they were sent
    assert fold(await store.read(mine)) == replay(records)


async def test_a_page_s_text_with_newlines_and_json_in_an_event_stays_one_event(store: EventStore) -> None:
    """What a page puts in an event's text (an error's message) cannot split its record into forged events."""
    call = _call()
    forged = "\n" + encode(CallEnded(call, "completed")).decode() + "\n"  # an event's very wire form
    events: list[Event] = [CallStarted(call, "batch", (OutlineStep("js", 1),), 60.0),
                           StepFailed(call, "0", "js_error", "page said" + forged, False), StepSucceeded(call, "1")]
    await (await store.send(events))
    assert await store.read(call) == events
    assert len(await store.records(call)) == 3


async def test_events_over_a_message_s_size_sent_together_are_split_and_read_back_whole(store: EventStore) -> None:
    """Four events of 300 KB each, 1.2 MB in all: over NATS's 1 MiB a message, so they go in several."""
    call = _call()
    events: list[Event] = [CallStarted(call, "batch", (OutlineStep("click", 1),) * 4, 60.0)]
    events += [StepFailed(call, str(i), "js_error", "x" * 300_000, False) for i in range(4)]
    await (await store.send(events))
    assert await store.read(call) == events


async def test_a_call_with_no_events_reads_empty(store: EventStore) -> None:
    assert await store.read(_call()) == []


async def test_a_long_call_reads_back_whole(store: EventStore) -> None:
    call = _call()
    events: list[Event] = [CallStarted(call, "batch", (OutlineStep("click", 1),) * 300, 600.0)]
    events += [StepSucceeded(call, str(i)) for i in range(300)]  # more than one fetch batch
    for event in events:
        await store.append(event)
    assert await store.read(call) == events


# --- the stream ----------------------------------------------------------------------------


async def test_the_stream_keeps_events_in_memory_for_the_checkpoint_ttl(bus: NatsBus) -> None:
    await JetStreamEventStore.create(bus)
    await JetStreamEventStore.create(bus.client)  # again, from the bare client: unchanged
    config = (await bus.client.jetstream().stream_info(EVENTS_STREAM)).config
    assert config.storage == StorageType.MEMORY
    assert config.max_age == 1800
    assert config.subjects == ["kitsune.events.>"]


async def test_a_different_max_age_is_the_administrators_to_set_in_place(bus: NatsBus,
                                                                          nats_access: NatsAccess) -> None:
    """A node's credential may not update the stream (its start uses it as it is); provisioning with the
    administrator's changes it in place."""
    assert nats_access.admin is not None, "this test needs the server's administrator credential"
    call = _call()
    store = await JetStreamEventStore.create(bus)
    await store.append(CallEnded(call, "completed"))
    js = bus.client.jetstream()
    await JetStreamEventStore.create(bus, max_age_seconds=600)
    assert (await js.stream_info(EVENTS_STREAM)).config.max_age == 1800  # a node changes nothing
    try:
        await provision(nats_access.url, nats_access.admin, checkpoint_ttl=600)
        assert (await js.stream_info(EVENTS_STREAM)).config.max_age == 600
        assert await store.read(call) == [CallEnded(call, "completed")]  # same stream, events kept
    finally:
        await provision(nats_access.url, nats_access.admin)
    assert (await js.stream_info(EVENTS_STREAM)).config.max_age == 1800


async def test_reads_leave_no_consumer_behind(bus: NatsBus) -> None:
    store = await JetStreamEventStore.create(bus)
    call = _call()
    await store.append(CallEnded(call, "completed"))
    js = bus.client.jetstream()
    before = (await js.stream_info(EVENTS_STREAM)).state.consumer_count
    for _ in range(3):
        await store.read(call)
    assert (await js.stream_info(EVENTS_STREAM)).state.consumer_count == before
