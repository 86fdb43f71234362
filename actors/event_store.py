"""Where step-log events go: in memory, or the JetStream stream ``KITSUNE_EVENTS``.

The stream keeps events in memory only (never on disk) for as long as a checkpoint lives; a
call's events are on ``kitsune.events.<call>``, in the order they were appended, and folding
them rebuilds the call's step log after the actor that ran it is gone. A message of the stream
holds one event, or several of one call sent together (a run of a batch's steps), one per line:
each line is the event's wire form, and reading the call gives the lines in order.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Iterator, Sequence
from typing import Any, Protocol

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType, StreamConfig

from actors.acked import AckedPublisher
from actors.buckets import EVENTS_STREAM, EVENTS_SUBJECTS
from actors.bus import BusError, NatsBus
from actors.jetstream import ensure_stream, kept_in
from messages.codec import decode_events, encode
from messages.contract import CHECKPOINT_TTL
from messages.events import Event

__all__ = ["EVENTS_STREAM", "EVENTS_SUBJECTS", "EventStore", "JetStreamEventStore", "LocalEventStore", "events_config",
           "events_subject"]

_FETCH_BATCH = 256
_TIMEOUT = 5.0
MAX_RECORD_BYTES = 256 * 1024
"""Bytes of events one message holds at most (an event longer than that goes alone): NATS takes 1 MiB a message."""


def events_subject(call: int) -> str:
    """The subject a call's events are published on."""
    return f"kitsune.events.{call}"


class EventStore(Protocol):
    """The port the call actors record events through."""

    async def append(self, event: Event) -> None:
        """Record ``event`` durably enough to rebuild its call; returns once it is stored."""
        ...

    async def send(self, events: Sequence[Event]) -> Awaitable[None]:
        """Send ``events`` now, in order, without waiting; what it answers completes once the last (and so every
        one before it) is stored."""
        ...

    async def post(self, events: Sequence[Event]) -> None:
        """Record ``events`` without waiting for the store: they are stored before any event handed over
        after them, so the next :meth:`append` that returns has stored them too."""
        ...

    async def read(self, call: int) -> list[Event]:
        """Every event of ``call``, in the order appended; empty if none (or expired)."""
        ...

    async def records(self, call: int) -> list[bytes]:
        """What :meth:`read` gives, in wire form: what a replay folds (``messages.codec.replay``)."""
        ...


class LocalEventStore:
    """Events in this process's memory, kept in their wire form as the stream keeps them."""

    def __init__(self) -> None:
        self._calls: dict[int, list[bytes]] = {}

    async def append(self, event: Event) -> None:
        self._calls.setdefault(event.call, []).append(encode(event))

    async def post(self, events: Sequence[Event]) -> None:
        for event in events:
            await self.append(event)

    async def send(self, events: Sequence[Event]) -> Awaitable[None]:
        await self.post(events)
        return _done()

    async def read(self, call: int) -> list[Event]:
        return decode_events(await self.records(call))

    async def records(self, call: int) -> list[bytes]:
        return list(self._calls.get(call, ()))


def events_config(max_age_seconds: float = CHECKPOINT_TTL) -> StreamConfig:
    """The events stream as a node makes it (and ``actors.nats_admin`` provisions it)."""
    return StreamConfig(name=EVENTS_STREAM, subjects=[EVENTS_SUBJECTS], storage=StorageType.MEMORY,
                        max_age=float(max_age_seconds))


class JetStreamEventStore:
    """Events in the JetStream stream ``KITSUNE_EVENTS`` (memory storage, bounded age)."""

    def __init__(self, client: Client, *, timeout: float = _TIMEOUT) -> None:
        self._nc = client
        self._js: JetStreamContext = client.jetstream(timeout=timeout)
        self._timeout = timeout
        self._acked = AckedPublisher(client, timeout)

    @classmethod
    async def create(
        cls, nats_client_or_bus: Client | NatsBus, max_age_seconds: float = CHECKPOINT_TTL, *, timeout: float = _TIMEOUT
    ) -> JetStreamEventStore:
        """Ensure the stream exists with this configuration and its replicas (``actors.jetstream``) and wrap it."""
        client = nats_client_or_bus.client if isinstance(nats_client_or_bus, NatsBus) else nats_client_or_bus
        try:
            await ensure_stream(client, events_config(max_age_seconds), timeout=timeout)
        except nats.errors.Error as e:
            raise _error(e, EVENTS_STREAM, "set up the stream") from e
        return cls(client, timeout=timeout)

    async def append(self, event: Event) -> None:
        await (await self.send([event]))

    async def send(self, events: Sequence[Event]) -> Awaitable[None]:
        *before, (subject, last) = _messages(events)
        await self._publish(before)
        self._connected(subject)
        try:
            acknowledgement = await self._acked.publish(subject, last)  # the answer names its stream (below)
        except nats.errors.Error as e:
            raise _error(e, subject, "store an event", sent=True) from e
        return self._stored(acknowledgement, subject)

    async def _stored(self, acknowledgement: asyncio.Future[Any], subject: str) -> None:
        try:
            kept_in(await acknowledgement, EVENTS_STREAM)
        except (TimeoutError, nats.errors.Error) as e:
            raise _error(e, subject, "store an event", sent=True) from e

    async def post(self, events: Sequence[Event]) -> None:
        await self._publish(list(_messages(events)))

    async def _publish(self, messages: list[tuple[str, bytes]]) -> None:
        # A plain publish on the stream's subject: the stream stores it, in the order of this
        # connection, and no acknowledgement comes back (an append's acknowledgement covers it).
        for subject, data in messages:
            self._connected(subject)
            try:
                await self._nc.publish(subject, data)
            except nats.errors.Error as e:
                raise _error(e, subject, "store an event", sent=True) from e

    def _connected(self, subject: str) -> None:
        """``bus_disconnected`` while the connection is down (nothing is sent on ``subject``)."""
        if not self._nc.is_connected:
            raise BusError("bus_disconnected", f"not connected to NATS; event not stored on {subject}",
                           subject=subject)

    async def read(self, call: int) -> list[Event]:
        return decode_events(await self.records(call))

    async def records(self, call: int) -> list[bytes]:
        subject = events_subject(call)
        config = ConsumerConfig(
            deliver_policy=DeliverPolicy.ALL,
            ack_policy=AckPolicy.NONE,
            mem_storage=True,
            inactive_threshold=max(self._timeout * 2, 10.0),
        )
        try:
            sub = await self._js.pull_subscribe(subject, stream=EVENTS_STREAM, config=config)
        except nats.errors.Error as e:
            raise _error(e, subject, "read events") from e
        consumer: str | None = None
        try:
            info = await sub.consumer_info()
            consumer, total = info.name, info.num_pending or 0
            records: list[bytes] = []
            fetched = 0
            while fetched < total:
                messages = await sub.fetch(min(total - fetched, _FETCH_BATCH), timeout=self._timeout)
                fetched += len(messages)
                for message in messages:  # orjson escapes a newline in a string: a line is one event, whatever
                    records.extend(message.data.split(b"\n"))  # text of a page's an event carries
            return records
        except nats.errors.Error as e:
            raise _error(e, subject, "read events") from e
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
            if consumer is not None:
                with contextlib.suppress(Exception):
                    await self._js.delete_consumer(EVENTS_STREAM, consumer)


def _messages(events: Sequence[Event]) -> Iterator[tuple[str, bytes]]:
    """The messages (subject, data) that carry ``events`` in order: each run of one call's events in one, a line
    each, up to :data:`MAX_RECORD_BYTES`."""
    lines: list[bytes] = []
    size = 0
    for i, event in enumerate(events):
        line = encode(event)
        if lines and (event.call != events[i - 1].call or size + len(line) > MAX_RECORD_BYTES):
            yield events_subject(events[i - 1].call), b"\n".join(lines)
            lines, size = [], 0
        lines.append(line)
        size += len(line) + 1
    if lines:
        yield events_subject(events[-1].call), b"\n".join(lines)


async def _done() -> None:
    """An acknowledgement that is already in."""


def _error(e: nats.errors.Error | TimeoutError, subject: str, doing: str, *, sent: bool = False) -> BusError:
    if isinstance(e, nats.js.errors.NoStreamResponseError | nats.errors.NoRespondersError):
        return BusError("no_responders", f"JetStream did not answer ({subject}): is it enabled?", subject=subject)
    if isinstance(e, TimeoutError):
        return BusError("bus_timeout", f"JetStream did not answer in time ({subject})", subject=subject, sent=sent)
    if isinstance(e, nats.errors.ConnectionClosedError | nats.errors.ConnectionReconnectingError
                  | nats.errors.ConnectionDrainingError | nats.errors.NoServersError):
        return BusError("bus_disconnected", f"connection to NATS lost ({subject})", subject=subject, sent=sent)
    return BusError("bus_error", f"could not {doing} on {subject}: {type(e).__name__}", subject=subject, sent=sent)
