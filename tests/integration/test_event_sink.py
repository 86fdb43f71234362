"""The event sink on a real JetStream: pipelined appends keep the order the engine emitted in."""

from __future__ import annotations

import threading
import uuid

from actors.call_actor import EventSink
from actors.event_store import JetStreamEventStore
from actors.loop import IoLoop
from messages.events import Event, StepDispatched, StepStarted, StepSucceeded
from tests.nats_access import NatsAccess


def test_events_from_many_threads_are_stored_in_the_order_they_were_emitted(nats_access: NatsAccess) -> None:
    io = IoLoop()
    bus = io.run(nats_access.bus(name="kitsune-test-sink"), timeout=10)
    try:
        store = io.run(JetStreamEventStore.create(bus), timeout=10)
        sink = EventSink(io, store)
        io.run(sink.start(), timeout=10)
        call = uuid.uuid4().int % 10**15
        emitted: list[Event] = []
        lock = threading.Lock()  # as the engine emits: one event at a time per call

        def sequence(q: int) -> None:
            for i in range(100):  # bursts of events nobody waits for, and now and then a dispatch that waits
                path = f"0.{q}.{i}"
                dispatch = [StepDispatched(call, path)] if i % 10 == 9 else []
                for event in (StepStarted(call, path, "click", q + 1), *dispatch, StepSucceeded(call, path)):
                    with lock:
                        emitted.append(event)
                        sink(event)  # a dispatch returns only once it and all before it are stored

        threads = [threading.Thread(target=sequence, args=(q,)) for q in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        io.run(sink.stop(), timeout=30)
        assert io.run(store.read(call), timeout=30) == emitted
    finally:
        io.run(bus.close(), timeout=10)
        io.close()
