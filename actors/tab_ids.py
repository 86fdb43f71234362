"""Tab ids unique in the fleet: small integers from one counter that every node of a fleet shares.

A node reserves ids in blocks (the counter is a key of the JetStream KV bucket ``KITSUNE_FLEET``,
moved on by compare-and-set) and hands them out one by one without waiting: the browser names a
new page, a popup included, the moment it appears. The next block is reserved while half of
the current one is left, so a tab never waits for NATS. Without NATS, a counter in memory serves.

Two nodes of one fleet never hold the same tab id, so a request for a tab reaches one node only.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Awaitable, Callable, Iterator

import nats.js.errors
from nats.aio.client import Client
from nats.js.kv import KeyValue

from actors.buckets import fleet_bucket
from actors.jetstream import ensure_bucket, patiently
from messages.errors import KitsuneError

__all__ = ["BLOCK", "TabIds", "kv_reserve", "local_reserve"]

log = logging.getLogger(__name__)

BLOCK = 64
"""Ids reserved at a time."""

Reserve = Callable[[int], Awaitable[int]]
"""Reserves ``n`` ids; the first of them (the block is ``first .. first + n - 1``)."""


class TabIds:
    """Hands out tab ids from reserved blocks (on the loop)."""

    def __init__(self, reserve: Reserve) -> None:
        self._reserve = reserve
        self._blocks: list[range] = []
        self._ids: Iterator[int] = iter(())
        self._left = 0
        self._refill: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Reserve the first blocks."""
        await self._reserve_block()
        await self._reserve_block()
        self._next_block()

    def take(self) -> int:
        """The next id, at once; ``tab_ids_unavailable`` in the unlikely case no block is left."""
        if self._left == 0 and not self._next_block():
            raise KitsuneError("tab_ids_unavailable", "No tab id is left to give (NATS too slow to reserve more)",
                               retryable=True)
        self._left -= 1
        if not self._blocks and self._left < BLOCK // 2 and (self._refill is None or self._refill.done()):
            self._refill = asyncio.get_running_loop().create_task(self._refill_block())
        return next(self._ids)

    def _next_block(self) -> bool:
        if not self._blocks:
            return False
        block = self._blocks.pop(0)
        self._ids, self._left = iter(block), len(block)
        return True

    async def _reserve_block(self) -> None:
        first = await self._reserve(BLOCK)
        self._blocks.append(range(first, first + BLOCK))

    async def _refill_block(self) -> None:
        try:
            await self._reserve_block()
        except Exception as e:  # tried again at the next id handed out
            log.error("tab ids not reserved (%s)", type(e).__name__)


def local_reserve() -> Reserve:
    """Blocks from a counter in this process (a node without NATS)."""
    counter = itertools.count(1, BLOCK)

    async def reserve(n: int) -> int:
        assert n == BLOCK
        return next(counter)
    return reserve



def kv_reserve(client: Client, fleet: str) -> Reserve:
    """Blocks from the fleet's counter in the KV bucket ``KITSUNE_FLEET``.

    The bucket (replicated: ``actors.jetstream``) and the counter are made when missing (a NATS
    server replaced with a fresh one loses them): the counter then starts past every id this node
    has reserved, and a node that finds it behind its own ids moves it past them, so no id of a
    live tab is given twice.
    """
    key = f"{fleet}.tab-ids"
    reserved = 0
    """The highest id this node has reserved."""

    async def reserve(n: int) -> int:
        nonlocal reserved
        bucket = await ensure_bucket(client, fleet_bucket())
        first = await _advance(bucket, key, n, reserved)
        reserved = first + n - 1
        return first
    return reserve


async def _advance(bucket: KeyValue, key: str, n: int, floor: int) -> int:
    """Move the counter at ``key`` (at least ``floor``) on by ``n`` with compare-and-set, retried on a
    race; the first id of the block moved past."""
    while True:
        try:
            entry = await patiently(lambda: bucket.get(key))  # a bucket just made may still elect its leader
        except nats.js.errors.KeyNotFoundError:
            try:
                await bucket.create(key, str(floor + n).encode())
            except nats.js.errors.KeyWrongLastSequenceError:
                continue  # another node made it first
            return floor + 1
        last = max(int(entry.value or b"0"), floor)
        try:
            await bucket.update(key, str(last + n).encode(), last=entry.revision)
        except nats.js.errors.KeyWrongLastSequenceError:
            continue  # another node reserved meanwhile
        return last + 1
