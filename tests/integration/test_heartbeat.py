"""The heartbeat thread and the loop's watchdog (``actors.heartbeat``), on the session's NATS server."""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid

import orjson
import pytest
from prometheus_client import CollectorRegistry

from actors.buckets import nodes_bucket
from actors.fleet_registry import NodeEntry
from actors.heartbeat import STALL, TICK, Heartbeat, LoopWatch
from actors.jetstream import ensure_bucket
from tests.nats_access import NatsAccess

pytestmark = pytest.mark.anyio


def test_the_watchdog_logs_and_measures_a_stall_of_the_loop(caplog: pytest.LogCaptureFixture) -> None:
    registry = CollectorRegistry()
    watch = LoopWatch(registry, lambda: NodeEntry("n", 2, 5))

    async def stalled() -> None:
        watch.start()
        await asyncio.sleep(3 * TICK)
        time.sleep(0.6)  # the loop held
        await asyncio.sleep(3 * TICK)
        await watch.stop()
    with caplog.at_level(logging.WARNING, logger="actors.heartbeat"):
        asyncio.run(stalled())
    assert watch.stalls == 1 and re.search(r"the event loop stalled for 0\.[4-7]\d s", caplog.text), caplog.text
    assert watch.record == NodeEntry("n", 2, 5)
    over = (registry.get_sample_value("kitsune_event_loop_lag_seconds_bucket", {"le": "+Inf"}) or 0) - (
        registry.get_sample_value("kitsune_event_loop_lag_seconds_bucket", {"le": str(STALL)}) or 0)
    assert over == 1


async def test_a_loop_silent_past_the_bound_stops_the_heartbeat_until_it_ticks_again(
        nats_access: NatsAccess, caplog: pytest.LogCaptureFixture) -> None:
    client = await nats_access.client()
    kv = await ensure_bucket(client, nodes_bucket())
    key = f"hb{uuid.uuid4().hex[:8]}.node"
    watch = LoopWatch(CollectorRegistry(), lambda: NodeEntry("node", 1, 4))
    watch.tick(time.monotonic())
    beat = Heartbeat(nats_access.url, nats_access.auth, key, watch, every=0.1, dead_after=1.0)
    try:
        with caplog.at_level(logging.WARNING, logger="actors.heartbeat"):
            beat.start()
            await asyncio.sleep(0.5)
            assert beat.beats >= 2  # no tick since, but within the bound: it beats, and says how late
            assert orjson.loads((await kv.get(key)).value or b"{}")["loop_lag"] > 0.1
            await asyncio.sleep(1.0)  # past the bound: the loop is taken for dead
            stopped = beat.beats
            await asyncio.sleep(0.5)
            assert beat.beats == stopped and "heartbeats stop" in caplog.text
            watch.tick(time.monotonic())  # it runs again
            await asyncio.sleep(0.5)
            assert beat.beats > stopped and "heartbeats resume" in caplog.text
    finally:
        await asyncio.to_thread(beat.stop)
        await kv.delete(key)
        await client.close()
