"""The bus: one suite run against LocalBus and NatsBus, then what only a real server can show.

Each test uses subjects under its own random prefix, so tests sharing the session's server never
see each other's messages.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from actors.bus import Bus, BusError, LocalBus, NatsBus
from actors.nats_server import EmbeddedNats
from tests.nats_access import NatsAccess

pytestmark = pytest.mark.anyio

# --- helpers -------------------------------------------------------------------------------


def _recorder(into: list[bytes], reply: bytes | None = None) -> Callable[[bytes], Awaitable[bytes | None]]:
    async def handler(data: bytes) -> bytes | None:
        into.append(data)
        return reply

    return handler


async def _echo(data: bytes) -> bytes:
    return b"echo:" + data


async def _eventually(check: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.01)


async def _settle() -> None:
    """Time for a message that should not arrive to arrive anyway."""
    await asyncio.sleep(0.1)


@pytest.fixture(params=["local", "nats"])
async def bus(request: pytest.FixtureRequest) -> AsyncIterator[Bus]:
    if request.param == "local":
        made: Bus = LocalBus()
    else:
        made = await request.getfixturevalue("nats_access").bus(name="kitsune-test")
    yield made
    await made.close()


@pytest.fixture
def s() -> str:
    """A subject prefix of this test's own."""
    return f"test.{uuid.uuid4().hex[:12]}"


# --- the shared suite ----------------------------------------------------------------------


async def test_request_gets_the_handlers_reply(bus: Bus, s: str) -> None:
    await bus.subscribe(f"{s}.echo", _echo)
    assert bus.connected
    assert await bus.request(f"{s}.echo", b"hi", timeout=2) == b"echo:hi"
    assert await bus.request(f"{s}.echo", b"", timeout=2) == b"echo:"


async def test_request_without_a_subscriber_raises_no_responders(bus: Bus, s: str) -> None:
    with pytest.raises(BusError) as caught:
        await bus.request(f"{s}.nobody", b"x", timeout=2)
    assert caught.value.code == "no_responders"
    assert caught.value.retryable and not caught.value.sent
    assert caught.value.subject == f"{s}.nobody"


async def test_request_without_a_reply_raises_bus_timeout(bus: Bus, s: str) -> None:
    seen: list[bytes] = []
    await bus.subscribe(f"{s}.silent", _recorder(seen))  # returns None: no reply
    started = time.monotonic()
    with pytest.raises(BusError) as caught:
        await bus.request(f"{s}.silent", b"x", timeout=0.2)
    assert caught.value.code == "bus_timeout"
    assert caught.value.sent and not caught.value.retryable  # it was handled: its effect is unknown
    assert time.monotonic() - started >= 0.15  # a lower bound only: a busy machine makes it later, never sooner
    assert seen == [b"x"]


async def test_publish_reaches_every_subscriber_in_order(bus: Bus, s: str) -> None:
    first: list[bytes] = []
    second: list[bytes] = []
    await bus.subscribe(f"{s}.news", _recorder(first))
    await bus.subscribe(f"{s}.news", _recorder(second))
    sent = [str(i).encode() for i in range(20)]
    for data in sent:
        await bus.publish(f"{s}.news", data)
    await _eventually(lambda: len(first) == len(second) == 20)
    assert first == sent and second == sent


async def test_star_matches_exactly_one_token(bus: Bus, s: str) -> None:
    got: list[bytes] = []
    await bus.subscribe(f"{s}.tab.*.do", _recorder(got))
    for subject in (f"{s}.tab.7.do", f"{s}.tab.7.8.do", f"{s}.tab.do", f"{s}.tab.9.do"):
        await bus.publish(subject, subject.encode())
    await _eventually(lambda: len(got) == 2)
    await _settle()
    assert got == [f"{s}.tab.7.do".encode(), f"{s}.tab.9.do".encode()]


async def test_greater_than_matches_one_or_more_trailing_tokens(bus: Bus, s: str) -> None:
    got: list[bytes] = []
    await bus.subscribe(f"{s}.ckpt.>", _recorder(got))
    for subject in (f"{s}.ckpt", f"{s}.ckpt.1", f"{s}.ckpt.1.2.3", f"{s}.other.1"):
        await bus.publish(subject, subject.encode())
    await _eventually(lambda: len(got) == 2)
    await _settle()
    assert got == [f"{s}.ckpt.1".encode(), f"{s}.ckpt.1.2.3".encode()]


async def test_wildcard_subscriptions_answer_requests(bus: Bus, s: str) -> None:
    async def name_the_tab(data: bytes) -> bytes:
        return b"tab " + data

    await bus.subscribe(f"{s}.tab.*.do", name_the_tab)
    assert await bus.request(f"{s}.tab.3.do", b"3", timeout=2) == b"tab 3"


async def test_queue_group_delivers_each_message_to_exactly_one_member(bus: Bus, s: str) -> None:
    members: list[list[bytes]] = [[], [], []]
    for got in members:
        await bus.subscribe(f"{s}.fleet.open", _recorder(got), queue="nodes")
    everyone: list[bytes] = []
    await bus.subscribe(f"{s}.fleet.open", _recorder(everyone))  # not in the group: sees all
    sent = [str(i).encode() for i in range(30)]
    for data in sent:
        await bus.publish(f"{s}.fleet.open", data)
    await _eventually(lambda: sum(map(len, members)) >= 30 and len(everyone) == 30)
    await _settle()
    delivered = [data for got in members for data in got]
    assert sorted(delivered) == sorted(sent)  # each once: none lost, none twice
    assert everyone == sent


async def test_a_request_to_a_queue_group_is_handled_once(bus: Bus, s: str) -> None:
    handled: list[bytes] = []
    for _ in range(3):
        await bus.subscribe(f"{s}.fleet.open", _recorder(handled, reply=b"opened"), queue="nodes")
    for i in range(10):
        assert await bus.request(f"{s}.fleet.open", str(i).encode(), timeout=2) == b"opened"
    await _settle()
    assert sorted(handled) == sorted(str(i).encode() for i in range(10))


async def test_unsubscribe_stops_delivery_and_is_idempotent(bus: Bus, s: str) -> None:
    gone: list[bytes] = []
    kept: list[bytes] = []
    leaving = await bus.subscribe(f"{s}.x", _recorder(gone))
    staying = await bus.subscribe(f"{s}.x", _recorder(kept, reply=b"ok"))
    await leaving.unsubscribe()
    await leaving.unsubscribe()
    assert await bus.request(f"{s}.x", b"1", timeout=2) == b"ok"
    await bus.publish(f"{s}.x", b"2")
    await _eventually(lambda: kept == [b"1", b"2"])
    await _settle()
    assert gone == []
    await staying.unsubscribe()
    with pytest.raises(BusError) as caught:
        await bus.request(f"{s}.x", b"3", timeout=2)
    assert caught.value.code == "no_responders"


async def test_a_subscription_handles_its_messages_one_at_a_time(bus: Bus, s: str) -> None:
    log: list[str] = []

    async def slow(data: bytes) -> None:
        log.append(f"start {data.decode()}")
        await asyncio.sleep(0.01)
        log.append(f"end {data.decode()}")

    await bus.subscribe(f"{s}.serial", slow)
    for i in range(4):
        await bus.publish(f"{s}.serial", str(i).encode())
    await _eventually(lambda: len(log) == 8)
    assert log == [f"{what} {i}" for i in range(4) for what in ("start", "end")]


async def test_a_failing_handler_gives_no_reply_logs_no_data_and_keeps_serving(
    bus: Bus, s: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def fragile(data: bytes) -> bytes:
        if data == b"boom":
            raise ValueError("typed value hunter2")
        return b"fine"

    await bus.subscribe(f"{s}.fragile", fragile)
    with caplog.at_level(logging.INFO), pytest.raises(BusError) as caught:
        await bus.request(f"{s}.fragile", b"boom", timeout=0.2)
    assert caught.value.code == "bus_timeout"
    assert "ValueError" in caplog.text and "hunter2" not in caplog.text
    assert await bus.request(f"{s}.fragile", b"again", timeout=2) == b"fine"


async def test_malformed_subjects_are_refused(bus: Bus, s: str) -> None:
    with pytest.raises(ValueError):
        await bus.publish(f"{s}.has space", b"")
    with pytest.raises(ValueError):
        await bus.publish(f"{s}.*", b"")  # wildcards only in subscriptions
    with pytest.raises(ValueError):
        await bus.request(f"{s}..x", b"", timeout=1)
    with pytest.raises(ValueError):
        await bus.subscribe(f"{s}.>.x", _echo)


async def test_a_closed_bus_raises_bus_disconnected(bus: Bus, s: str) -> None:
    await bus.close()
    assert not bus.connected
    with pytest.raises(BusError) as caught:
        await bus.request(f"{s}.x", b"", timeout=1)
    assert caught.value.code == "bus_disconnected" and not caught.value.sent
    with pytest.raises(BusError):
        await bus.publish(f"{s}.x", b"")
    with pytest.raises(BusError):
        await bus.subscribe(f"{s}.x", _echo)
    await bus.close()  # idempotent


# --- only a real server --------------------------------------------------------------------


async def test_requests_cross_connections_as_soon_as_the_subscription_is_made(nats_access: NatsAccess, s: str) -> None:
    node_a = await nats_access.bus(name="node-a")
    node_b = await nats_access.bus(name="node-b")
    try:
        for tab in range(300):  # a subscription returns once the server has it: never no_responders right after
            await node_b.subscribe(f"{s}.tab.{tab}.do", _echo)
            assert await node_a.request(f"{s}.tab.{tab}.do", b"click", timeout=10) == b"echo:click"
    finally:
        await node_a.close()
        await node_b.close()


async def test_connecting_to_nothing_raises_bus_disconnected_without_credentials() -> None:
    with pytest.raises(BusError) as caught:
        async with asyncio.timeout(60):  # it gives up: no reconnecting for ever (a bound far from its 0.5 s)
            await NatsBus.connect("nats://kitsune:hunter2@127.0.0.1:9", connect_timeout=0.5)
    assert caught.value.code == "bus_disconnected"
    assert "hunter2" not in str(caught.value) and "127.0.0.1:9" in str(caught.value)


async def test_a_request_in_flight_when_the_server_stops_is_never_a_reply(s: str) -> None:
    server = EmbeddedNats(fleet=s)
    bus = await NatsBus.connect(server.start(), auth=server.auth, name="kitsune-test-outage")
    try:
        handling = asyncio.Event()

        async def stuck(data: bytes) -> bytes:
            handling.set()
            await asyncio.sleep(10)
            return b"too late"

        await bus.subscribe(f"{s}.slow", stuck)
        pending = asyncio.ensure_future(bus.request(f"{s}.slow", b"x", timeout=5))
        await asyncio.wait_for(handling.wait(), 30)
        await asyncio.to_thread(server.stop)
        with pytest.raises(BusError) as caught:
            await pending
        assert caught.value.code in ("bus_disconnected", "bus_timeout")
        assert caught.value.code == "bus_disconnected"  # this bus notices the loss, not the timeout
        assert caught.value.sent and not caught.value.retryable
        assert not bus.connected and bus.disconnects == 1

        with pytest.raises(BusError) as down:  # while the server is away nothing is sent
            await bus.request(f"{s}.slow", b"y", timeout=1)
        assert down.value.code == "bus_disconnected" and not down.value.sent
    finally:
        await bus.close()
        server.stop()


async def test_the_client_reconnects_when_the_server_comes_back_on_the_same_port(s: str) -> None:
    first = EmbeddedNats(fleet=s)
    bus = await NatsBus.connect(first.start(), auth=first.auth, name="kitsune-test-reconnect")
    second: EmbeddedNats | None = None
    try:
        await bus.subscribe(f"{s}.echo", _echo)
        assert await bus.request(f"{s}.echo", b"before", timeout=2) == b"echo:before"
        await asyncio.to_thread(first.stop)
        await _eventually(lambda: not bus.connected)
        assert bus.disconnects == 1 and bus.reconnects == 0

        second = EmbeddedNats(port=first.port, fleet=s, auth=first.auth)
        await asyncio.to_thread(second.start)
        await _eventually(lambda: bus.connected, timeout=5)
        assert bus.reconnects == 1 and bus.disconnects == 1
        # The subscription made before the outage was replayed on the new server.
        assert await bus.request(f"{s}.echo", b"after", timeout=2) == b"echo:after"
    finally:
        await bus.close()
        first.stop()
        if second is not None:
            second.stop()


async def test_a_future_nats_py_cancels_as_its_connection_drops_is_no_cancellation_of_the_caller(
        nats_access: NatsAccess, s: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """nats-py cancels the futures it awaits for its caller (a flush's PONG, its own tasks at close) when the
    connection drops: the caller sees the bus's error, or a close that is done, not a cancellation of its own; one
    of its own still stops it."""
    bus = await nats_access.bus(name="kitsune-test-cancelled")

    async def dropped(*_: object, **__: object) -> None:
        raise asyncio.CancelledError
    try:
        monkeypatch.setattr(bus.client, "flush", dropped)
        with pytest.raises(BusError) as error:
            await bus.subscribe(f"{s}.echo", _echo)
        assert error.value.code == "bus_disconnected"
        monkeypatch.setattr(bus.client, "close", dropped)
        await bus.close()
        assert not bus.connected
    finally:
        monkeypatch.undo()
        await bus.close()
        await bus.client.close()

    other = await nats_access.bus(name="kitsune-test-cancelled-own")
    stopped = asyncio.Event()

    async def slow_close() -> None:
        stopped.set()
        await asyncio.sleep(30)
    monkeypatch.setattr(other.client, "close", slow_close)
    closing = asyncio.ensure_future(other.close())
    await stopped.wait()
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    monkeypatch.undo()
    await other.client.close()
