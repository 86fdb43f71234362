"""A node's heartbeat, sent by a thread of its own, and the watchdog of the node's event loop.

The node's asyncio loop runs everything else (HTTP, NATS, Playwright); work that holds it (a page
that stalls it, a slow call made on it by mistake) must not make the fleet judge a node lost while
it still serves: its tabs would answer ``tab_closed`` through the other nodes and still work through
their own. So the heartbeat does not depend on that loop being free:

- :class:`LoopWatch` ticks on the node's loop every :data:`TICK` seconds. A tick that comes more
  than :data:`STALL` seconds late is a stall: logged as a warning and observed in
  ``kitsune_event_loop_lag_seconds`` (a histogram, no labels); every tick's lateness is observed too.
  It also refreshes the record the heartbeat carries (the node's tabs and room), read on the loop.
- :class:`Heartbeat` is a thread with its own small asyncio loop and its own NATS connection (the
  node's URL, credentials and TLS), which puts that record into ``KITSUNE_NODES`` every
  :data:`~actors.fleet_registry.HEARTBEAT` seconds, with ``loop_lag``: how long the node's loop has
  not ticked. A loop silent for :data:`LOOP_DEAD_AFTER` seconds is taken for dead: the thread logs
  an error and stops beating, so the fleet judges the node lost :data:`~actors.fleet_registry.NODE_LOST_AFTER`
  seconds later (a node whose loop is gone for good must not beat forever); it beats again if
  the loop comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace

import nats
import nats.errors
from prometheus_client import CollectorRegistry, Histogram

from actors.buckets import NODES_BUCKET
from actors.fleet_registry import HEARTBEAT, NodeEntry
from actors.nats_connection import connect_options
from core.settings import NatsAuth

__all__ = ["LAG_BUCKETS", "LOOP_DEAD_AFTER", "STALL", "TICK", "Heartbeat", "LoopWatch"]

log = logging.getLogger(__name__)

TICK = 0.1
"""Seconds between two ticks of the watchdog on the node's loop."""
STALL = 0.25
"""A tick this many seconds late is a stall of the loop: a warning in the log."""
LOOP_DEAD_AFTER = 60.0
"""A loop that has not ticked for this many seconds is taken for dead: the heartbeat stops."""
LAG_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_CONNECT_TIMEOUT = 5.0


class LoopWatch:
    """The watchdog of the node's loop (started and stopped on it); ``silent_for`` from any thread."""

    def __init__(self, registry: CollectorRegistry, record: Callable[[], NodeEntry] | None = None) -> None:
        self._lag = Histogram("kitsune_event_loop_lag_seconds", "How late the node's event loop ran its "
                              f"watchdog's tick (every {TICK:g} s); a stall is one over {STALL:g} s",
                              buckets=LAG_BUCKETS, registry=registry)
        self._record = record
        self.last_tick = time.monotonic()
        """When the loop last ticked (``time.monotonic()``; read from the heartbeat's thread)."""
        self.record: NodeEntry | None = None
        """The heartbeat's record as the loop last read it (None before its first tick)."""
        self.stalls = 0
        """Stalls seen so far."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.last_tick = time.monotonic()
        self._task = asyncio.get_running_loop().create_task(self._ticking())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def silent_for(self) -> float:
        """Seconds since the loop last ticked."""
        return max(0.0, time.monotonic() - self.last_tick)

    def tick(self, now: float) -> float:
        """One tick at ``now``: how late it came, observed (and a stall logged)."""
        late = max(0.0, now - self.last_tick - TICK)
        self.last_tick = now
        self._lag.observe(late)
        if late > STALL:
            self.stalls += 1
            log.warning("the event loop stalled for %.2f s (nothing else ran on it meanwhile)", late)
        if self._record is not None:
            try:
                self.record = self._record()
            except Exception as e:  # the previous record goes on
                log.error("heartbeat record not read (%s)", type(e).__name__)
        return late

    async def _ticking(self) -> None:
        while True:
            await asyncio.sleep(TICK)
            self.tick(time.monotonic())


class Heartbeat:
    """The thread that puts this node's heartbeat into the fleet's bucket, off the node's loop."""

    def __init__(self, url: str, auth: NatsAuth, key: str, watch: LoopWatch, *,
                 every: float = HEARTBEAT, dead_after: float = LOOP_DEAD_AFTER) -> None:
        self._url = url
        self._auth = auth
        self._key = key
        """``<fleet>.<node>``: the node's key in ``KITSUNE_NODES``."""
        self._watch = watch
        self._every = every
        self._dead_after = dead_after
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kitsune-heartbeat", daemon=True)
        self.beats = 0
        """Heartbeats put so far."""

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop beating (from any thread but this one's); the thread ends within moments."""
        self._stopping.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=_CONNECT_TIMEOUT + 5.0)

    def _run(self) -> None:
        try:
            asyncio.run(self._beating())
        except Exception as e:  # the thread ends; the node's loop is judged by the others
            log.error("heartbeat thread ended (%s)", type(e).__name__)

    async def _beating(self) -> None:
        client = await nats.connect([u.strip() for u in self._url.split(",") if u.strip()], name="kitsune-heartbeat",
                                    connect_timeout=_CONNECT_TIMEOUT, max_reconnect_attempts=-1,
                                    **connect_options(self._auth))
        try:
            kv = await client.jetstream(timeout=_CONNECT_TIMEOUT).key_value(NODES_BUCKET)
            dead = False
            while not self._stopping.is_set():
                silent = self._watch.silent_for()
                if silent > self._dead_after:
                    if not dead:
                        log.error("the event loop has not run for %.0f s: heartbeats stop (the fleet will "
                                  "judge this node lost)", silent)
                    dead = True
                elif (record := self._watch.record) is not None:
                    if dead:
                        log.warning("the event loop runs again: heartbeats resume")
                    dead = False
                    try:
                        await kv.put(self._key, replace(record, loop_lag=round(silent, 3)).to_json())
                        self.beats += 1
                    except (nats.errors.Error, TimeoutError) as e:  # NATS away: the next beat tries again
                        log.warning("heartbeat not sent (%s)", type(e).__name__)
                await asyncio.to_thread(self._stopping.wait, self._every)
        finally:
            await client.close()
