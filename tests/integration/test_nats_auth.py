"""The embedded nats-server takes only the node's credentials, and the node's user only its own subjects."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import nats
import nats.errors
import nats.js.errors
import pytest

from actors.audit_actor import AUDIT_STREAM, AUDIT_SUBJECT, JetStreamAuditLog
from actors.buckets import NODES_BUCKET, nodes_bucket
from actors.bus import BusError, NatsBus
from actors.event_store import EVENTS_STREAM, JetStreamEventStore
from actors.jetstream import ensure_bucket
from actors.nats_admin import provision
from actors.nats_connection import connect_options
from actors.nats_server import NODE_USER, EmbeddedNats
from core.settings import NatsAuth
from messages.errors import KitsuneError

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
            await nats.connect(server.url, allow_reconnect=False, **connect_options(auth))
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

    client = await nats.connect(server.url, error_cb=on_error, **connect_options(server.auth))
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


async def test_the_nodes_user_cannot_update_purge_or_delete_a_stream_bucket_or_entry(server: EmbeddedNats) -> None:
    """With a node's credential, shrinking the audit stream (``max_msgs=1``), purging or deleting it or
    one of its entries, and the same on a KV bucket's stream, are refused: the streams keep their
    configuration and every message. The administrator may (``kitsune provision``)."""
    refusals: list[str] = []

    async def on_error(e: Exception) -> None:
        refusals.append(str(e).removeprefix("nats: "))

    client = await nats.connect(server.url, error_cb=on_error, **connect_options(server.auth))
    try:
        await JetStreamAuditLog.create(client)  # a node makes what is missing
        kv = await ensure_bucket(client, nodes_bucket())
        js = client.jetstream(timeout=1.0)
        for entry in (b"1", b"2", b"3"):
            await js.publish(AUDIT_SUBJECT, entry)
        await kv.put("mine.node-a", b"{}")
        streams = {AUDIT_STREAM: (await js.stream_info(AUDIT_STREAM)).config,
                   f"KV_{NODES_BUCKET}": (await js.stream_info(f"KV_{NODES_BUCKET}")).config}
        for stream, config in streams.items():
            for attempt in (js.update_stream(config.evolve(max_msgs=1)), js.purge_stream(stream),
                            js.delete_msg(stream, 1), js.delete_stream(stream)):
                with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
                    await attempt
        await asyncio.sleep(0.2)
        assert sorted(set(refusals)) == sorted(
            f'permissions violation for publish to "$js.api.stream.{op}.{stream.lower()}"'
            for stream in streams for op in ("update", "purge", "msg.delete", "delete"))
        audit = await js.stream_info(AUDIT_STREAM)
        assert audit.config.max_msgs == streams[AUDIT_STREAM].max_msgs and audit.state.messages == 3
        assert (await kv.get("mine.node-a")).value == b"{}"
        admin = await nats.connect(server.url, **connect_options(server.admin))
        try:  # the administrator may
            await admin.jetstream().update_stream(audit.config.evolve(max_age=3600.0))
        finally:
            await admin.close()
        assert (await js.stream_info(AUDIT_STREAM)).config.max_age == 3600.0
    finally:
        await client.close()


async def test_a_node_that_finds_a_stream_otherwise_uses_it_as_it_is_and_provision_brings_it(
        server: EmbeddedNats, caplog: pytest.LogCaptureFixture) -> None:
    """A node's start never asks for an update (it would be refused): it says so; the owner of the
    server (or ``kitsune provision`` on a cluster) brings the stream to the node's configuration."""
    client = await nats.connect(server.url, **connect_options(server.auth))
    try:
        await JetStreamEventStore.create(client, max_age_seconds=600)
        with caplog.at_level(logging.WARNING, logger="actors.jetstream"):
            await JetStreamEventStore.create(client, max_age_seconds=900)
        assert "only an administrator changes a stream" in caplog.text and "max_age" in caplog.text
        js = client.jetstream()
        assert (await js.stream_info(EVENTS_STREAM)).config.max_age == 600
        assert f"KV_{NODES_BUCKET}" in await provision(server.url, server.admin, checkpoint_ttl=900)
        assert (await js.stream_info(EVENTS_STREAM)).config.max_age == 900
        with pytest.raises(KitsuneError) as refused:  # the node's credential is no administrator's
            await provision(server.url, server.auth, checkpoint_ttl=1200, timeout=1.0)
        assert refused.value.code == "nats_unavailable"
        assert (await js.stream_info(EVENTS_STREAM)).config.max_age == 900
    finally:
        await client.close()


async def test_a_node_cannot_empty_a_bucket_with_a_rollup(server: EmbeddedNats) -> None:
    """A KV bucket as nats-py makes it takes rollup headers (its purge's): one message with ``Nats-Rollup: all``
    from a node's credential would drop every key. Provisioned, a bucket refuses rollups and keeps its keys."""
    await provision(server.url, server.admin)
    client = await nats.connect(server.url, **connect_options(server.auth))
    try:
        kv = await ensure_bucket(client, nodes_bucket())
        await kv.put("mine.node-a", b"{}")
        js = client.jetstream(timeout=2.0)
        assert not (await js.stream_info(f"KV_{NODES_BUCKET}")).config.allow_rollup_hdrs
        with pytest.raises(nats.js.errors.APIError):
            await js.publish(f"$KV.{NODES_BUCKET}.mine.node-b", b"", headers={"Nats-Rollup": "all"})
        assert (await kv.get("mine.node-a")).value == b"{}"
        await kv.delete("mine.node-a")  # what the nodes do to a key goes on
        with pytest.raises(nats.js.errors.KeyNotFoundError):
            await kv.get("mine.node-a")
    finally:
        await client.close()
