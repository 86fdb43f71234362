"""The embedded nats-server takes only the node's credentials, and the node's user only its own subjects."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import nats
import nats.errors
import pytest

from actors.audit_actor import AUDIT_STREAM, AUDIT_SUBJECT
from actors.bus import BusError, NatsBus
from actors.nats_connection import NatsAuth
from bridge.nats_server import NODE_USER, EmbeddedNats

pytestmark = pytest.mark.anyio


@pytest.fixture
async def server() -> AsyncIterator[EmbeddedNats]:
    """An embedded server as a node of fleet ``mine`` runs it, with a node connected (tab 1's actor)."""
    embedded = EmbeddedNats(fleet="mine")
    await asyncio.to_thread(embedded.start)
    try:
        yield embedded
    finally:
        await asyncio.to_thread(embedded.stop)


@pytest.mark.parametrize("auth", [NatsAuth(), NatsAuth(user=NODE_USER, password="not-the-password"),
                                  NatsAuth(user="someone", password="anything")])
async def test_a_client_without_the_nodes_credentials_is_refused_and_reaches_nothing(
        server: EmbeddedNats, auth: NatsAuth) -> None:
    node = await NatsBus.connect(server.url, auth=server.auth, name="the-node")
    handled: list[bytes] = []

    async def tab(data: bytes) -> bytes:
        handled.append(data)
        return b"done"

    try:
        await node.subscribe("mine.tab.1.do", tab)
        with pytest.raises(BusError) as refused:
            await NatsBus.connect(server.url, auth=auth, connect_timeout=1.5)
        assert refused.value.code == "bus_disconnected"
        assert "refused the credentials" in str(refused.value) and "not-the-password" not in str(refused.value)
        with pytest.raises(nats.errors.Error, match="Authorization Violation"):  # a raw client: the same
            await nats.connect(server.url, allow_reconnect=False, **auth.connect_options())
        assert handled == []  # no tab request reached the node
        assert not await _has(node.client.jetstream(), AUDIT_STREAM)  # nothing was stored
    finally:
        await node.close()


async def _has(js: object, stream: str) -> bool:
    try:
        await js.stream_info(stream)  # type: ignore[attr-defined]
    except nats.js.errors.NotFoundError:
        return False
    return True


async def test_the_nodes_user_cannot_use_another_fleets_subjects_nor_delete_the_audit_stream(
        server: EmbeddedNats) -> None:
    refusals: list[str] = []

    async def on_error(e: Exception) -> None:
        refusals.append(str(e))

    client = await nats.connect(server.url, error_cb=on_error, **server.auth.connect_options())
    try:
        js = client.jetstream()
        await js.add_stream(name=AUDIT_STREAM, subjects=[AUDIT_SUBJECT])  # allowed: the node makes it
        await js.publish(AUDIT_SUBJECT, b"{}")
        await client.subscribe("other.tab.1.do")
        await client.publish("other.tab.1.do", b"click")
        await client.flush()
        with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
            await js.delete_stream(AUDIT_STREAM)
        await asyncio.sleep(0.2)
        assert [r.removeprefix("nats: ") for r in refusals] == [
            'permissions violation for subscription to "other.tab.1.do"',
            'permissions violation for publish to "other.tab.1.do"',
            'permissions violation for publish to "$js.api.stream.delete.kitsune_audit"']
        assert (await js.stream_info(AUDIT_STREAM)).state.messages == 1  # still there, entry kept
    finally:
        await client.close()
