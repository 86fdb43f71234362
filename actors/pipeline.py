"""Ordered writes to a store, handed over from any thread without waiting (the event sink, the audit log).

Items reach the store in the order they were handed over. An item to be acknowledged is sent at
once and does not hold back the next one: up to ``IN_FLIGHT`` are on their way together, and
their acknowledgements are taken in the same order, so an item is reported stored only once it
and every item before it are. Other items are posted: sent in order, no acknowledgement.

Items handed over close together are written in one pass of the writer: one wake-up of the
loop for a burst, and no task per item. The store takes them in runs: the posted items of a
pass that come before an acknowledged one are sent with it, those after the last one posted
together, so that it may keep several in one record. An item nobody waits for may linger up to
``LINGER`` seconds, so that the items of many steps go out together: until the loop's next linger tick (its
clock's next multiple of ``LINGER``), which every writer shares, so that the lingering items of all of them (a
read's events and its audit entry) go out in one pass of the loop, one write to the socket. An urgent item (one its
sender waits for) wakes the writer at once, and everything handed over before it goes out first. A sender
waits on its thread (:class:`Pending`).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from actors.loop import IoLoop

__all__ = ["IN_FLIGHT", "LINGER", "RECORD_WAIT", "OrderedWriter", "Pending", "linger_tick"]

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

IN_FLIGHT = 256
"""Items sent and not yet acknowledged, at most."""
LINGER = 0.02
"""Seconds an item that is not urgent may wait for others to go out with."""
RECORD_WAIT = 30.0
"""Seconds a sender waits for its acknowledged item (an event, an audit entry) to be stored."""


class Pending:
    """An acknowledged item as its sender waits for it: called (off the loop), it returns once the
    item is stored and raises why not; awaited (:meth:`wait`) on the loop."""

    __slots__ = ("_future", "_timeout")

    def __init__(self, future: concurrent.futures.Future[Any], timeout: float) -> None:
        self._future = future
        self._timeout = timeout

    def __call__(self) -> None:
        self._future.result(timeout=self._timeout)

    async def wait(self) -> None:
        """The same wait, on the loop (never blocking it); no wake-up at all when the item is stored already."""
        if not self._future.done():
            async with asyncio.timeout(self._timeout):
                await asyncio.wrap_future(self._future)
        self._future.result()


def linger_tick(now: float) -> float:
    """The loop's next linger tick after ``now`` (its clock): the writers' timers due at one time fire in one pass."""
    return (now // LINGER + 1) * LINGER


class _Flush:
    """Handed over by ``stop``: answered once everything before it is settled."""

    def __init__(self, done: asyncio.Future[None]) -> None:
        self.done = done


class OrderedWriter(Generic[T, R]):
    """One writer task on the loop that hands items to a store in order."""

    def __init__(self, io: IoLoop, *, send: Callable[[list[T]], Awaitable[Awaitable[R]]],
                 post: Callable[[list[T]], Awaitable[None]] | None = None,
                 on_stored: Callable[[T, R], None], on_lost: Callable[[T, Exception], None]) -> None:
        self._io = io
        self._send = send
        """Send items now, in order (without suspending): posted ones, then the last, acknowledged; answers the
        awaitable of its acknowledgement (which covers the ones before it)."""
        self._post = post
        """Send items in order without an acknowledgement (when items may be posted)."""
        self._on_stored = on_stored
        """Told (on the loop) of each acknowledged item once it and all before it are stored."""
        self._on_lost = on_lost
        """Told (on the loop) of each item that could not be stored."""
        self._handed: collections.deque[tuple[Any, bool]] = collections.deque()
        self._scheduled = False
        """Whether the writer has been woken for what is in ``_handed``."""
        self._lingering = False
        """Whether a linger timer will wake the writer."""
        self._wake: asyncio.Event | None = None
        self._in_flight: asyncio.Queue[tuple[T, Awaitable[R]]] | None = None
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        """Start the writer (on the loop)."""
        loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        in_flight: asyncio.Queue[tuple[T, Awaitable[R]]] = asyncio.Queue(IN_FLIGHT)
        self._in_flight = in_flight
        self._tasks = [loop.create_task(self._write(in_flight)), loop.create_task(self._settle(in_flight))]

    async def stop(self) -> None:
        """Write and settle what was handed over, then stop."""
        if self._wake is None:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._handed.append((_Flush(done), True))
        self._wake.set()
        await done
        for task in self._tasks:
            task.cancel()

    def in_flight(self) -> int:
        """How many items are sent and not yet settled, besides the one being told of (on the loop)."""
        return 0 if self._in_flight is None else self._in_flight.qsize()

    def put(self, item: T, *, acknowledged: bool, urgent: bool) -> None:
        """Hand ``item`` over (from any thread): sent and acknowledged when ``acknowledged``, posted
        otherwise; at once when ``urgent``, else within ``LINGER`` seconds."""
        assert self._wake is not None, "the writer is not started"
        assert acknowledged or self._post is not None, "this store takes acknowledged items only"
        self._handed.append((item, acknowledged))
        # Each flag is cleared on the loop before the items are taken: none is left behind. Handed over on the loop
        # itself (a step run there), the writer is woken or its timer set at once: no wake-up of the loop through its
        # self-pipe, no callback later (in the middle of the step's request).
        loop = self._io.loop
        here = asyncio._get_running_loop() is loop
        if urgent:
            if not self._scheduled:
                self._scheduled = True
                if here:
                    self._wake.set()
                else:
                    loop.call_soon_threadsafe(self._wake.set)
        elif not self._lingering:
            self._lingering = True
            tick = linger_tick(loop.time())
            if here:
                loop.call_at(tick, self._linger_over)
            else:
                loop.call_soon_threadsafe(loop.call_at, tick, self._linger_over)

    def _linger_over(self) -> None:
        assert self._wake is not None
        self._lingering = False
        self._wake.set()

    async def _write(self, in_flight: asyncio.Queue[tuple[T, Awaitable[R]]]) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            self._scheduled = False
            posted: list[T] = []
            while self._handed:
                item, acknowledged = self._handed.popleft()
                if not acknowledged and not isinstance(item, _Flush):
                    posted.append(item)
                    continue
                if isinstance(item, _Flush):
                    await self._post_all(posted)
                    await in_flight.join()
                    item.done.set_result(None)
                else:
                    await self._send_after(posted, item, in_flight)
                posted = []
            await self._post_all(posted)

    async def _send_after(self, posted: list[T], item: T, in_flight: asyncio.Queue[tuple[T, Awaitable[R]]]) -> None:
        """Send ``item``, acknowledged, with the ``posted`` items before it."""
        try:
            acknowledgement = await self._send([*posted, item])
        except Exception as e:
            for lost in (*posted, item):
                self._on_lost(lost, e)
        else:
            await in_flight.put((item, acknowledgement))

    async def _post_all(self, posted: list[T]) -> None:
        """Post ``posted`` together (if any)."""
        if posted:
            assert self._post is not None
            try:
                await self._post(posted)
            except Exception as e:
                for lost in posted:
                    self._on_lost(lost, e)

    async def _settle(self, in_flight: asyncio.Queue[tuple[T, Awaitable[R]]]) -> None:
        while True:
            item, acknowledgement = await in_flight.get()
            try:
                stored = await acknowledgement
            except Exception as e:
                self._on_lost(item, e)
            else:
                try:
                    self._on_stored(item, stored)
                except Exception as e:  # the writer goes on with the next item
                    log.error("after storing an item: %s", type(e).__name__)
            finally:
                in_flight.task_done()
