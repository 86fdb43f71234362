"""Publishes acknowledged on an inbox of the publisher's own (``actors.acked.AckedPublisher``), on a real nats-server
with JetStream: each answered with its stream's sequence number, a subject no stream takes refused at once, an
answer that never comes run out, and nothing kept for it after."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import nats.js.errors
import pytest

from actors import acked
from actors.acked import AckedPublisher
from actors.bus import NatsBus
from actors.event_store import EVENTS_STREAM, JetStreamEventStore, events_subject
from actors.jetstream import kept_in
from tests.nats_access import NatsAccess

pytestmark = pytest.mark.anyio


@pytest.fixture
async def bus(nats_access: NatsAccess) -> AsyncIterator[NatsBus]:
    made = await nats_access.bus(name="kitsune-test-acked")
    await JetStreamEventStore.create(made)  # the events stream, on whose subjects the publishes go
    yield made
    await made.close()


async def test_each_publish_is_answered_with_its_own_sequence_number_in_the_stream(bus: NatsBus) -> None:
    publisher = AckedPublisher(bus.client, 5.0)
    subject = events_subject(uuid.uuid4().int % 10**15)
    answers = [await publisher.publish(subject, b'{"n":%d}' % n) for n in range(20)]  # all on their way at once
    numbers = [kept_in(await answer, EVENTS_STREAM) for answer in answers]
    assert numbers == sorted(numbers) and len(set(numbers)) == 20
    stored = await bus.client.jetstream().get_msg(EVENTS_STREAM, numbers[7])
    assert stored.data == b'{"n":7}' and stored.subject == subject


async def test_a_subject_no_stream_takes_is_refused_at_once(bus: NatsBus) -> None:
    publisher = AckedPublisher(bus.client, 5.0)
    answer = await publisher.publish(f"kitsune-test-{uuid.uuid4().hex}.nowhere", b"{}")
    async with asyncio.timeout(2):
        with pytest.raises(nats.js.errors.NoStreamResponseError):
            await answer


async def test_an_answer_that_never_comes_runs_out_and_is_not_kept(bus: NatsBus,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(acked, "_PRUNE_AT", 8)
    silent = f"kitsune-test-{uuid.uuid4().hex}.silent"
    listener = await bus.client.subscribe(silent)  # takes the messages and never answers: no "no responders"
    try:
        publisher = AckedPublisher(bus.client, 0.2)
        answers = [await publisher.publish(silent, b"{}") for _ in range(8)]
        for answer in answers:
            with pytest.raises(TimeoutError, match=r"no acknowledgement within 0\.2 s"):
                await answer
        await publisher.publish(events_subject(uuid.uuid4().int % 10**15), b"{}")
        assert len(publisher._waiting) == 1  # the eight that ran out are forgotten as the ninth goes
    finally:
        await listener.unsubscribe()
