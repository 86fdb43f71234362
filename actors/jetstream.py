"""Streams and KV buckets replicated across the NATS cluster: ``min(3, servers with JetStream)`` replicas.

How many servers run JetStream, asked without the system account: no JetStream API answer of an
account names the meta group's peers, so the connected server's INFO says it. A server that has no
JetStream or belongs to no cluster (``jetstream``, ``cluster``: the embedded one) counts 1; in a
cluster, the client URLs it advertises for the servers it routes to, its own included
(``connect_urls``), count the servers, each taken to run JetStream as deploy/'s do, and a cluster
that advertises none (``no_advertise``) counts 3. Trying is no way to count: JetStream keeps
placing replicas on a server that died until its heartbeats have been missed for a minute or more;
a count too high shows as JetStream's "no suitable peers" error when a stream is made.

An existing stream is raised to that number, never lowered: a member down for a while must not
cost a stream its replicas. INFO is read when the client connects, so a node that joined a
cluster still forming raises its streams when it reconnects.
"""

from __future__ import annotations

from typing import Any

import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, StreamConfig
from nats.js.kv import KeyValue

__all__ = ["MAX_REPLICAS", "ensure_bucket", "ensure_stream", "stream_replicas"]

MAX_REPLICAS = 3
_KEPT = ("subjects", "storage", "max_age")
"""The fields of a stream's configuration that :func:`ensure_stream` brings an existing stream to."""
_TIMEOUT = 5.0


async def stream_replicas(client: Client) -> int:
    """``min(3, servers with JetStream)`` for the cluster of the server ``client`` is connected to
    (a coroutine, so that a way that asks the cluster can replace this one)."""
    info: dict[str, Any] = client._server_info  # nats-py's copy of the server's INFO (no public accessor)
    if not info.get("jetstream") or not info.get("cluster"):
        return 1
    return min(MAX_REPLICAS, len(set(info.get("connect_urls") or ())) or MAX_REPLICAS)


async def ensure_stream(client: Client, config: StreamConfig, *, timeout: float = _TIMEOUT) -> None:
    """Create the stream ``config`` describes with :func:`stream_replicas` replicas, or bring the one
    there to ``config``'s subjects, storage and maximum age (those it sets) and raise its replicas."""
    js = client.jetstream(timeout=timeout)
    assert config.name is not None
    replicas = await stream_replicas(client)
    try:
        have = (await js.stream_info(config.name)).config
    except nats.js.errors.NotFoundError:
        await js.add_stream(config.evolve(num_replicas=replicas))
        return
    stale = {name: getattr(config, name) for name in _KEPT
             if getattr(config, name) is not None and getattr(config, name) != getattr(have, name)}
    await _bring(js, have, replicas, stale)


async def ensure_bucket(client: Client, config: KeyValueConfig, *, timeout: float = _TIMEOUT) -> KeyValue:
    """The KV bucket ``config`` describes, made with :func:`stream_replicas` replicas when missing;
    the replicas of one already there are raised to that number (its other settings are kept)."""
    js = client.jetstream(timeout=timeout)
    replicas = await stream_replicas(client)
    try:
        have = (await js.stream_info(f"KV_{config.bucket}")).config
    except nats.js.errors.NotFoundError:
        return await js.create_key_value(config.evolve(replicas=replicas))
    await _bring(js, have, replicas, {})
    return await js.key_value(config.bucket)


async def _bring(js: JetStreamContext, have: StreamConfig, replicas: int, stale: dict[str, Any]) -> None:
    """Update the stream ``have`` describes with the ``stale`` fields' values and at least ``replicas``
    (never fewer than it has); nothing when nothing changes."""
    had = have.num_replicas or 1
    if stale or replicas > had:
        await js.update_stream(have.evolve(**stale, num_replicas=max(replicas, had)))
