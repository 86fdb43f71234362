"""What a node connects through, open before any of its parts is built (``bridge.wiring``).

``connect`` starts an embedded ``nats-server`` (or joins the configured one), connects the bus,
opens the event and audit streams and reserves the first tab ids; nothing is left running when a
step fails.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from actors.audit_actor import JetStreamAuditLog
from actors.bus import NatsBus
from actors.event_store import JetStreamEventStore
from actors.jetstream import all_done
from actors.nats_admin import provision
from actors.nats_server import EmbeddedNats
from actors.tab_ids import TabIds, kv_reserve
from core.settings import NatsAuth, NodeConfig

__all__ = ["Connection", "connect"]


@dataclass(frozen=True, slots=True)
class Connection:
    """What a node reaches its fleet through, open before any part of the node is built."""

    url: str
    """The NATS server or cluster it joined (comma-separated URLs)."""
    auth: NatsAuth
    bus: NatsBus
    events: JetStreamEventStore
    audit_log: JetStreamAuditLog
    tab_ids: TabIds
    """The fleet's tab ids, its first blocks reserved."""
    nats: EmbeddedNats | None
    """The server it started and owns; None when it joined one."""

    async def close(self) -> None:
        """Close the bus, then stop the server it started (if it did)."""
        await self.bus.close()
        if self.nats is not None:
            await asyncio.to_thread(self.nats.stop)


async def connect(config: NodeConfig, nats: EmbeddedNats | None = None) -> Connection:
    """Start or join NATS, connect the bus, open the streams, reserve tab ids; nothing is left
    running when a step fails. ``nats``: the embedded server, its start begun (``EmbeddedNats.start_soon``),
    where the configuration names no NATS to join."""
    url, auth = config.nats.url, config.nats.auth
    if url is None:
        nats = nats or EmbeddedNats(fleet=config.fleet)
        url = await nats.started()
        auth = nats.auth
    try:
        if nats is not None:
            await provision(url, nats.admin, checkpoint_ttl=config.checkpoints.ttl)  # as the server's owner
        bus = await NatsBus.connect(url, auth=auth, name="kitsune-node")
        tab_ids = TabIds(kv_reserve(bus.client, config.fleet))
        events = asyncio.ensure_future(JetStreamEventStore.create(bus, max_age_seconds=config.checkpoints.ttl))
        audit_log = asyncio.ensure_future(JetStreamAuditLog.create(bus.client))
        try:
            await all_done(events, audit_log, asyncio.ensure_future(tab_ids.start()))  # at once
        except BaseException:
            await bus.close()
            raise
    except BaseException:
        if nats is not None:
            await asyncio.to_thread(nats.stop)
        raise
    return Connection(url, auth, bus, events.result(), audit_log.result(), tab_ids, nats)
