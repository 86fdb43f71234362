"""The administrator's part of NATS: the fleet's streams and KV buckets made or changed as they should be.

A node's user may make a stream or bucket that is missing, publish to it and read it, but never
update, purge or delete one (``actors.nats_server.node_permissions``): a node's credential must not
be able to shrink the fleet's audit log. Changing one (a new maximum age of the events, more
replicas once a cluster has grown) is this module's, with an administrator's credential that no node
holds:

- the embedded nats-server has an administrator user of its own, with a password generated at
  each start that only the process owning the server knows; that process provisions with it once,
  before its node connects as the node's user;
- a joined cluster is provisioned by ``kitsune provision`` (deploy/: the ``nats-provision`` service
  of compose.yaml, the Job of kubernetes/kitsune.yaml) with the cluster's administrator user.
"""

from __future__ import annotations

import asyncio

import nats
import nats.errors
from nats.aio.client import Client
from nats.js.api import KeyValueConfig, StreamConfig

from actors.audit_actor import audit_config
from actors.buckets import fleet_bucket, nodes_bucket, sessions_bucket, tabs_bucket, tasks_bucket
from actors.event_store import events_config
from actors.jetstream import all_done, ensure_bucket, ensure_stream
from actors.nats_connection import connect_options, display_url
from actors.nats_server import ADMIN_USER
from core.settings import NatsAuth
from messages.contract import CHECKPOINT_TTL
from messages.errors import KitsuneError

__all__ = ["ADMIN_USER", "provision", "stream_configs"]


def stream_configs(checkpoint_ttl: float = CHECKPOINT_TTL) -> list[StreamConfig | KeyValueConfig]:
    """Every stream and bucket of a fleet, as its nodes make them (the events kept ``checkpoint_ttl``)."""
    return [events_config(checkpoint_ttl), audit_config(), fleet_bucket(), tabs_bucket(), nodes_bucket(),
            tasks_bucket(), sessions_bucket()]


async def provision(url: str, auth: NatsAuth, *, checkpoint_ttl: float = CHECKPOINT_TTL,
                    timeout: float = 10.0) -> list[str]:
    """Make or bring every stream and bucket to what :func:`stream_configs` says (each its own requests, made at
    once), as the administrator ``auth``; the names of the streams. ``nats_unavailable`` if the server cannot be
    reached or refuses."""
    try:
        client = await nats.connect([u.strip() for u in url.split(",") if u.strip()], allow_reconnect=False,
                                    connect_timeout=timeout, **connect_options(auth))
    except (nats.errors.Error, OSError) as e:
        raise KitsuneError("nats_unavailable", f"NATS at {display_url(url)} did not take the administrator "
                           f"({type(e).__name__})") from e
    made = [asyncio.ensure_future(_provisioned(client, config, timeout)) for config in stream_configs(checkpoint_ttl)]
    try:
        await all_done(*made)
    except (nats.errors.Error, TimeoutError) as e:
        raise KitsuneError("nats_unavailable", f"the streams of NATS at {display_url(url)} were not provisioned "
                           f"({type(e).__name__})") from e
    finally:
        await client.close()
    return [task.result() for task in made]


async def _provisioned(client: Client, config: StreamConfig | KeyValueConfig, timeout: float) -> str:
    """The stream or bucket of ``config`` made or brought to it, as the administrator; its stream's name."""
    if isinstance(config, StreamConfig):
        await ensure_stream(client, config, timeout=timeout, admin=True)
        return str(config.name)
    await ensure_bucket(client, config, timeout=timeout, admin=True)
    return f"KV_{config.bucket}"
