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

Only an administrator changes a stream that is there (``admin=True``: ``actors.nats_admin``); a
node's user may make a missing one but not update, purge or delete one (``actors.nats_server``), so
a node that finds one otherwise than it would make it says so in its log and uses it as it is.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import KeyValueConfig, PubAck, StreamConfig
from nats.js.kv import KeyValue

__all__ = ["MAX_REPLICAS", "AckDeadlines", "all_done", "ensure_bucket", "ensure_stream", "kept_in", "patiently",
           "stream_replicas"]

log = logging.getLogger(__name__)

MAX_REPLICAS = 3
_KEPT = ("subjects", "storage", "max_age")
"""The fields of a stream's configuration that :func:`ensure_stream` brings an existing stream to."""
_TIMEOUT = 5.0
_SETTLING = 30.0
_EXPECTED_LAST = "Nats-Expected-Last-Sequence"
_NEVER = str(2**63)
"""A last sequence no stream has."""
_NAME_IN_USE = 10058
"""JetStream's error code for a stream made already with another configuration."""

_T = TypeVar("_T")


async def all_done(*tasks: asyncio.Future[Any]) -> None:
    """Once every task is done (the streams and buckets a start makes, each its own round trips, made at once, not
    one after another); the first to fail cancels the others, awaited, and its error is raised as it is."""
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def stream_replicas(client: Client) -> int:
    """``min(3, servers with JetStream)`` for the cluster of the server ``client`` is connected to
    (a coroutine, so that a way that asks the cluster can replace this one)."""
    info: dict[str, Any] = client._server_info  # nats-py's copy of the server's INFO (no public accessor)
    if not info.get("jetstream") or not info.get("cluster"):
        return 1
    return min(MAX_REPLICAS, len(set(info.get("connect_urls") or ())) or MAX_REPLICAS)


async def ensure_stream(client: Client, config: StreamConfig, *, timeout: float = _TIMEOUT,
                        admin: bool = False) -> None:
    """Create the stream ``config`` describes with :func:`stream_replicas` replicas, or (``admin``) bring
    the one there to ``config``'s subjects, storage and maximum age (those it sets) and raise its replicas."""
    js = client.jetstream(timeout=timeout)
    assert config.name is not None
    name = config.name
    replicas = await stream_replicas(client)
    have = await _found_or_made(js, name, lambda: js.add_stream(config.evolve(num_replicas=replicas)))
    if have is not None:
        stale = {name: getattr(config, name) for name in _KEPT
                 if getattr(config, name) is not None and getattr(config, name) != getattr(have, name)}
        await _bring(js, have, replicas, stale, admin=admin)
    await _receiving(js, config.subjects or [])


async def ensure_bucket(client: Client, config: KeyValueConfig, *, timeout: float = _TIMEOUT,
                        admin: bool = False) -> KeyValue:
    """The KV bucket ``config`` describes, made with :func:`stream_replicas` replicas when missing;
    (``admin``) the replicas of one there are raised to that number and its rollups refused (its other
    settings are kept)."""
    js = client.jetstream(timeout=timeout)
    replicas = await stream_replicas(client)
    name = f"KV_{config.bucket}"
    have = await _found_or_made(js, name, lambda: js.create_key_value(config.evolve(replicas=replicas))) \
        or await _existing(js, name)
    if have is None:
        raise nats.js.errors.NotFoundError(description=f"bucket {config.bucket} was made and is gone")
    # nats-py makes a bucket that takes rollups (its purge's): one published with ``Nats-Rollup: all`` would
    # empty the bucket, which no node may do, and no node purges; so rollups are refused
    await _bring(js, have, replicas, {"allow_rollup_hdrs": False} if have.allow_rollup_hdrs else {}, admin=admin)
    await _receiving(js, [f"$KV.{config.bucket}.>"])
    return await js.key_value(config.bucket)


async def _existing(js: JetStreamContext, stream: str) -> StreamConfig | None:
    """The configuration of ``stream``, or ``None`` when there is none."""
    try:
        return (await patiently(lambda: js.stream_info(stream))).config
    except nats.js.errors.NotFoundError:
        return None


async def _found_or_made(js: JetStreamContext, stream: str,
                         create: Callable[[], Awaitable[object]]) -> StreamConfig | None:
    """The configuration of ``stream`` when it is there, made before or by another node a moment
    ago; ``None`` when ``create()`` made it now."""
    have = await _existing(js, stream)
    if have is None and await _made_here(create):
        return None
    have = have or await _existing(js, stream)
    if have is None:
        raise nats.js.errors.NotFoundError(description=f"stream {stream} was made by another node and is gone")
    return have


async def _made_here(create: Callable[[], Awaitable[object]]) -> bool:
    """Whether ``create()`` made the stream; ``False`` when another node made it first with another
    configuration (nodes starting together on a fresh cluster race to make them)."""
    try:
        await patiently(create)
    except nats.js.errors.BadRequestError as e:
        if e.err_code != _NAME_IN_USE:
            raise
        return False
    return True


async def patiently(request: Callable[[], Awaitable[_T]]) -> _T:
    """``request()`` to the JetStream API, asked again while it times out, for :data:`_SETTLING` seconds:
    a cluster just formed (or just lost a server) answers once its meta leader is elected."""
    deadline = asyncio.get_running_loop().time() + _SETTLING
    while True:
        try:
            return await request()
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _bring(js: JetStreamContext, have: StreamConfig, replicas: int, stale: dict[str, Any], *,
                 admin: bool) -> None:
    """Update the stream ``have`` describes with the ``stale`` fields' values and at least ``replicas``
    (never fewer than it has); nothing when nothing changes. Not an administrator: a warning instead."""
    had = have.num_replicas or 1
    if not stale and replicas <= had:
        return
    if admin:
        await js.update_stream(have.evolve(**stale, num_replicas=max(replicas, had)))
        return
    wanted = {**stale, **({"num_replicas": replicas} if replicas > had else {})}
    log.warning("stream %s is used as it is, not as this node would make it (%s): only an administrator "
                "changes a stream (kitsune provision)", have.name, ", ".join(sorted(wanted)))


async def _receiving(js: JetStreamContext, subjects: list[str]) -> None:
    """Once the stream takes what is published on ``subjects`` through this client's server. A
    replicated stream is made before its leader is elected and its interest has reached every
    server, and until then a publish finds no responders: one found there may have been made by
    another node a moment ago, so every stream is probed (for up to :data:`_SETTLING` seconds: the
    election is slow on a loaded machine). The probe asks for a last sequence the stream never has,
    so the stream refuses it and stores nothing."""
    subject = ".".join("probe" if token in ("*", ">") else token for token in subjects[0].split("."))
    deadline = asyncio.get_running_loop().time() + _SETTLING
    while True:
        try:
            await js.publish(subject, b"", headers={_EXPECTED_LAST: _NEVER})
        except nats.js.errors.NoStreamResponseError:
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"no stream took {subject} in {_SETTLING:g} s") from None
            await asyncio.sleep(0.02)
        except nats.js.errors.APIError:  # refused: the stream has it
            return
        else:
            raise AssertionError(f"the stream stored the probe on {subject}")


def kept_in(acknowledgement: PubAck, stream: str) -> int:
    """The sequence number ``acknowledgement`` gives a message in ``stream``; an error when another stream kept it.

    Published without ``Nats-Expected-Stream`` (a header the client builds and the server parses on every message):
    a node's subjects are its streams' alone (the streams of one account never share a subject, and
    :func:`ensure_stream` made or found the stream on them), and the answer is checked all the same."""
    if acknowledgement.stream != stream:
        raise nats.js.errors.Error(description=f"stored in stream {acknowledgement.stream}, not {stream}")
    return int(acknowledgement.seq)


class AckDeadlines:
    """The acknowledgements of one publisher's publishes (``actors.acked.AckedPublisher``), each failed with
    ``TimeoutError`` unless it comes within ``seconds`` of its sending. The deadline runs from the sending, not from
    when someone awaits it: acknowledgements awaited in order, all lost with a dead server, would otherwise run out
    one after the other. One timer for them all, at the oldest one's deadline (they come in the order they were
    sent, so the deadlines do too), instead of a timer and a callback for each: a read's audit entry is one."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._waiting: collections.deque[tuple[float, asyncio.Future[Any]]] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def within(self, acknowledgement: asyncio.Future[_T]) -> asyncio.Future[_T]:
        """``acknowledgement``, with its deadline running from now (on the loop)."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # a store used on a new loop: the old one's timer is gone with it
            self._loop, self._waiting, self._timer = loop, collections.deque(), None
        waiting = self._waiting
        while waiting and waiting[0][1].done():  # those that came: nothing kept past its acknowledgement
            waiting.popleft()
        waiting.append((loop.time() + self._seconds, acknowledgement))
        if self._timer is None:
            self._timer = loop.call_at(self._waiting[0][0], self._expire)
        return acknowledgement

    def _expire(self) -> None:
        """Fail what is past its deadline and forget what came; the timer again at the oldest one left's."""
        assert self._loop is not None
        now = self._loop.time()
        waiting = self._waiting
        while waiting and (waiting[0][1].done() or waiting[0][0] <= now):
            _, acknowledgement = waiting.popleft()
            if not acknowledgement.done():
                acknowledgement.set_exception(TimeoutError(f"no acknowledgement within {self._seconds:g} s"))
        self._timer = self._loop.call_at(waiting[0][0], self._expire) if waiting else None
