"""A node on a real 3-server NATS cluster (issue 14, points 1 and 7): its streams and bucket have
three replicas, and it keeps working when the server it is connected to is killed, under a load of
writes too, with the test site counting every write it receives."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.aio.client import Client
from nats.js.api import KeyValueConfig

from actors.audit_actor import AUDIT_STREAM, JetStreamAuditLog
from actors.buckets import FLEET_BUCKET
from actors.bus import BusError, NatsBus
from actors.event_store import EVENTS_STREAM, JetStreamEventStore
from actors.jetstream import _made_here, ensure_bucket, stream_replicas
from actors.nats_admin import provision
from actors.nats_connection import connect_options
from bridge.node import Node
from bridge.wiring import run_node
from driver import ChromiumBrowser
from kitsune.fleet import FLEET
from messages.errors import KitsuneError
from messages.events import CallStarted, Event
from messages.steplog import StepLog
from tests.integration.calls import batch
from tests.nats_access import NatsAccess
from tests.nats_cluster import ClusterAccess
from tests.nodes import open_user_tab
from tests.site import TestSite

HIT = "POST /clicks/hit"
THREADS = 3
"""Batches running at once in the test under load, each on a tab of its own."""
WRITES = 3
"""Clicks in each of its batches."""
CLICK = {"action": "click", "selector": "#hit"}
CALL_TIMEOUT = 10.0
"""Each batch's own deadline."""
ANSWER_GRACE = 5.0
"""How long past its deadline a call may take to answer."""
BACK_WITHIN = 15.0
"""The node takes new calls this soon after its server is killed."""
STREAMS = (EVENTS_STREAM, AUDIT_STREAM, f"KV_{FLEET_BUCKET}")


@pytest.fixture(scope="module")
def node(nats_cluster: ClusterAccess) -> Iterator[Node]:
    started = run_node(ChromiumBrowser(), nats_cluster.node_config(step_timeout=5.0))
    try:
        yield started
    finally:
        started.stop()


def _client_of(node: Node) -> Client:
    assert isinstance(node.bus, NatsBus)
    return node.bus.client


async def _num_replicas(client: Client, stream: str) -> int:
    return (await client.jetstream().stream_info(stream)).config.num_replicas or 1


def test_on_one_server_streams_keep_one_replica(nats_access: NatsAccess) -> None:
    async def scenario() -> None:
        client = await nats_access.client()
        try:
            assert await stream_replicas(client) == 1
            await JetStreamEventStore.create(client)
            await JetStreamAuditLog.create(client)
            assert [await _num_replicas(client, stream) for stream in (EVENTS_STREAM, AUDIT_STREAM)] == [1, 1]
        finally:
            await client.close()
    asyncio.run(scenario())


def test_a_node_makes_its_streams_with_three_replicas_and_the_administrator_raises_one_that_has_fewer(
        node: Node, nats_cluster: ClusterAccess) -> None:
    """A node may not change a stream (its user is refused the update): one found with fewer replicas is
    used as it is, and ``kitsune provision`` (the administrator) gives it three again."""
    assert nats_cluster.admin is not None
    with asyncio.Runner() as runner:
        client = runner.run(nats_cluster.client())
        admin = runner.run(nats.connect(nats_cluster.url.split(","), **connect_options(nats_cluster.admin)))
        try:
            assert runner.run(stream_replicas(client)) == 3
            assert [runner.run(_num_replicas(client, stream)) for stream in STREAMS] == [3, 3, 3]

            made_by: dict[str, Callable[[], Coroutine[Any, Any, object]]] = {
                EVENTS_STREAM: lambda: JetStreamEventStore.create(client),
                AUDIT_STREAM: lambda: JetStreamAuditLog.create(client),
                f"KV_{FLEET_BUCKET}": lambda: ensure_bucket(client, KeyValueConfig(bucket=FLEET_BUCKET))}
            for stream, make in made_by.items():  # each, found with one replica, is left so by a node
                have = runner.run(admin.jetstream().stream_info(stream)).config
                runner.run(admin.jetstream().update_stream(have.evolve(num_replicas=1)))
                assert runner.run(_num_replicas(client, stream)) == 1
                runner.run(make())
                assert runner.run(_num_replicas(client, stream)) == 1, stream
            runner.run(provision(nats_cluster.url, nats_cluster.admin))
            assert [runner.run(_num_replicas(client, stream)) for stream in STREAMS] == [3, 3, 3]
        finally:
            runner.run(admin.close())
            runner.run(client.close())


def test_a_stream_another_node_made_first_with_other_replicas_is_taken_not_an_error(
        node: Node, nats_cluster: ClusterAccess) -> None:
    """Nodes starting together race to make a stream; the one whose create loses to another
    configuration goes on with the stream there instead of failing its start."""
    with asyncio.Runner() as runner:
        client = runner.run(nats_cluster.client())
        try:
            js = client.jetstream()
            have = runner.run(js.stream_info(EVENTS_STREAM)).config
            other = have.evolve(num_replicas=1)
            assert runner.run(_made_here(lambda: js.add_stream(other))) is False
            assert runner.run(_made_here(lambda: js.add_stream(have))) is True  # the same: made, as if here
            assert runner.run(_num_replicas(client, EVENTS_STREAM)) == 3
        finally:
            runner.run(client.close())


def test_a_node_whose_server_is_killed_reconnects_to_another_and_its_streams_and_bucket_survive(
        node: Node, nats_cluster: ClusterAccess, site: TestSite) -> None:
    tab = open_user_tab(node, site.url("/clicks"))
    started: list[int] = []

    def listen(event: Event) -> None:
        if type(event) is CallStarted:
            started.append(event.call)
    node.event_listeners.append(listen)
    try:
        before = batch(node, [CLICK], tabId=tab)
    finally:
        node.event_listeners.remove(listen)
    assert before["status"] == "ok", before["summary"]
    [call] = started
    assert site.wait_for_count(HIT) == 1
    client = _client_of(node)
    connected = nats_cluster.member_of(client)

    with nats_cluster.killed(connected):
        after = _Tally()
        deadline = time.monotonic() + BACK_WITHIN
        while after.batch(node, tab, 1) != "ok":
            assert time.monotonic() < deadline, f"no batch answered ok within {BACK_WITHIN:g} s: {after}"
            time.sleep(0.1)
        assert nats_cluster.member_of(client) != connected
        assert after.ok <= site.wait_for_count(HIT, at_least=1 + after.ok) - 1 <= after.ok + after.unknown, after

        assert _replayed(node, call).progress == before["progress"]  # the events stream survived
        asyncio.run(_audit_and_bucket_kept(nats_cluster, call, tab))


def _replayed(node: Node, call: int) -> StepLog:
    """The step log of ``call`` from the events stream, once JetStream answers (its meta leader may be
    the server killed: reading makes a consumer, which it places)."""
    deadline = time.monotonic() + BACK_WITHIN
    while True:
        try:
            return node.replay(call)
        except BusError:
            assert time.monotonic() < deadline, "the events stream did not answer"
            time.sleep(0.1)


async def _audit_and_bucket_kept(access: ClusterAccess, call: int, tab: int) -> None:
    """The call's audit entry and the fleet's tab-id counter are there, once JetStream answers (a
    stream whose leader was the server killed elects another)."""
    client = await access.client()
    deadline = time.monotonic() + BACK_WITHIN
    try:
        js = client.jetstream()
        while True:
            try:
                entry = await js.get_msg(AUDIT_STREAM, seq=call)
                counter = await (await js.key_value(FLEET_BUCKET)).get(f"{FLEET}.tab-ids")
                break
            except (nats.errors.TimeoutError, nats.js.errors.ServiceUnavailableError):  # 503: electing its leader
                assert time.monotonic() < deadline, "JetStream did not answer"
                await asyncio.sleep(0.1)
        assert entry.data  # the call's audit entry
        assert int(counter.value or b"0") >= tab
    finally:
        await client.close()


def test_a_server_killed_under_a_load_of_writes_answers_every_call_and_sends_no_write_twice(
        node: Node, nats_cluster: ClusterAccess, site: TestSite) -> None:
    tabs = [open_user_tab(node, site.url("/clicks")) for _ in range(THREADS)]
    tally = _Tally()
    stop = threading.Event()
    killed_at: list[float] = []
    back = threading.Event()
    """Set when a batch started after the kill answers ok."""

    def load(tab: int) -> None:
        while not stop.is_set():
            started = time.monotonic()
            if tally.batch(node, tab, WRITES) == "ok" and killed_at and started > killed_at[0]:
                back.set()

    workers = [threading.Thread(target=load, args=(tab,), daemon=True) for tab in tabs]
    for worker in workers:
        worker.start()
    try:
        deadline = time.monotonic() + 30
        while tally.ok < THREADS * WRITES:  # the load runs
            assert time.monotonic() < deadline, f"the load did not start: {tally}"
            time.sleep(0.05)
        with nats_cluster.killed(nats_cluster.member_of(_client_of(node))):
            killed_at.append(time.monotonic())
            assert back.wait(BACK_WITHIN), f"no batch answered ok within {BACK_WITHIN:g} s of the kill: {tally}"
    finally:
        stop.set()
        for worker in workers:
            worker.join(CALL_TIMEOUT + ANSWER_GRACE)
    assert not any(worker.is_alive() for worker in workers), f"a call was never answered: {tally}"
    assert tally.late == [], tally
    assert tally.ok <= site.wait_for_count(HIT, at_least=tally.ok) <= tally.ok + tally.unknown, tally


@dataclass
class _Tally:
    """The calls answered and their clicks, by status, and how long the calls answered late took."""

    ok: int = 0
    unknown: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    """The calls, by status (or error code)."""
    steps: Counter[str] = field(default_factory=Counter)
    """The clicks, by status."""
    late: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def batch(self, node: Node, tab: int, writes: int) -> str:
        """Run a batch of ``writes`` clicks on ``tab``, count its steps by status, and return its status
        (or the code of the error it was refused with, nothing sent)."""
        started = time.monotonic()
        try:
            body = batch(node, [CLICK] * writes, tabId=tab, timeout=CALL_TIMEOUT)
        except KitsuneError as e:  # the API answers it as an error: the call was refused before any step
            body = {"status": e.code, "progress": []}
        took = time.monotonic() - started
        with self._lock:
            if took > CALL_TIMEOUT + ANSWER_GRACE:
                self.late.append(took)
            self.statuses[body["status"]] += 1
            for step in body["progress"]:
                self.steps[step["status"]] += 1
            self.ok += sum(step["status"] == "ok" for step in body["progress"])
            self.unknown += sum(step["status"] == "unknown" for step in body["progress"])
        return str(body["status"])
