"""Ordered writes to a store, handed over from any thread without waiting (the event sink, the audit log).

Items reach the store in the order they were handed over. An item to be acknowledged (appended)
does not hold back the next one: up to ``IN_FLIGHT`` appends are on their way at once, and their
acknowledgements are taken in the same order, so an item is reported stored only once it and
every item before it are. Other items are posted: sent in order, no acknowledgement awaited.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Generic, TypeVar

from actors.loop import IoLoop

__all__ = ["IN_FLIGHT", "OrderedWriter"]

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

IN_FLIGHT = 256
"""Appends sent and not yet acknowledged, at most."""


class OrderedWriter(Generic[T, R]):
    """One writer task on the loop that hands items to a store in order."""

    def __init__(self, io: IoLoop, *, append: Callable[[T], Coroutine[Any, Any, R]],
                 post: Callable[[T], Awaitable[None]] | None = None,
                 on_stored: Callable[[T, R], None], on_lost: Callable[[T, Exception], None]) -> None:
        self._io = io
        self._append = append
        """Store an item and answer its acknowledgement; it must send the item in its first step."""
        self._post = post
        """Send an item without waiting for an acknowledgement (when items may be posted)."""
        self._on_stored = on_stored
        """Told (on the loop) of each appended item once it and all before it are stored."""
        self._on_lost = on_lost
        """Told (on the loop) of each item that could not be stored."""
        self._queue: asyncio.Queue[tuple[T, bool]] | None = None
        self._writer: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the writer (on the loop)."""
        self._queue = asyncio.Queue()
        self._writer = asyncio.get_running_loop().create_task(self._write())

    async def stop(self) -> None:
        """Write what was handed over, then stop."""
        if self._queue is not None and self._writer is not None:
            await self._queue.join()
            self._writer.cancel()

    def put(self, item: T, *, acknowledged: bool) -> None:
        """Hand ``item`` over (from any thread): appended when ``acknowledged``, posted otherwise."""
        assert self._queue is not None, "the writer is not started"
        assert acknowledged or self._post is not None, "this store takes appends only"
        self._io.loop.call_soon_threadsafe(self._queue.put_nowait, (item, acknowledged))

    async def _write(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        in_flight: asyncio.Queue[tuple[T, asyncio.Task[R]]] = asyncio.Queue(IN_FLIGHT)
        settler = loop.create_task(self._settle(in_flight))
        try:
            while True:
                item, acknowledged = await self._queue.get()
                if not acknowledged:
                    await self._send(item)
                    continue
                await in_flight.put((item, loop.create_task(self._append(item))))
                # The append sends its item in its task's first step; yielding once lets that step run
                # before the next item goes out, so the store receives the items in queue order.
                await asyncio.sleep(0)
        finally:
            settler.cancel()

    async def _send(self, item: T) -> None:
        assert self._queue is not None and self._post is not None
        try:
            await self._post(item)
        except Exception as e:
            self._on_lost(item, e)
        finally:
            self._queue.task_done()

    async def _settle(self, in_flight: asyncio.Queue[tuple[T, asyncio.Task[R]]]) -> None:
        assert self._queue is not None
        while True:
            item, append = await in_flight.get()
            try:
                stored = await append
            except Exception as e:
                self._on_lost(item, e)
            else:
                try:
                    self._on_stored(item, stored)
                except Exception as e:  # the writer goes on with the next item
                    log.error("after storing an item: %s", type(e).__name__)
            finally:
                self._queue.task_done()
