"""TabIds: ids handed out at once from reserved blocks, the next block reserved ahead."""

from __future__ import annotations

import asyncio

import pytest

from actors.tab_ids import BLOCK, TabIds, local_reserve
from messages.errors import KitsuneError

pytestmark = pytest.mark.anyio


class Counter:
    """Reserves blocks like the fleet's counter, and can be told to stall."""

    def __init__(self) -> None:
        self.next = 1
        self.calls = 0
        self.stalled = asyncio.Event()
        self.stalled.set()

    async def reserve(self, n: int) -> int:
        await self.stalled.wait()
        self.calls += 1
        first, self.next = self.next, self.next + n
        return first


async def test_ids_are_handed_out_in_order_and_the_next_block_is_reserved_ahead() -> None:
    counter = Counter()
    ids = TabIds(counter.reserve)
    await ids.start()
    assert counter.calls == 2  # the first block and a spare
    taken = []
    for _ in range(3 * BLOCK):  # pages appear across turns of the loop, where reservations run
        taken.append(ids.take())
        await asyncio.sleep(0)
    assert taken == list(range(1, 3 * BLOCK + 1))
    assert counter.calls >= 4  # reserved ahead while ids were taken, never waited for


async def test_ids_run_out_only_when_reserving_stalls_for_two_blocks() -> None:
    counter = Counter()
    ids = TabIds(counter.reserve)
    await ids.start()
    counter.stalled.clear()  # NATS does not answer
    assert [ids.take() for _ in range(2 * BLOCK)] == list(range(1, 2 * BLOCK + 1))
    with pytest.raises(KitsuneError) as caught:
        ids.take()
    assert caught.value.code == "tab_ids_unavailable"
    stalled_at = counter.calls
    counter.stalled.set()
    async with asyncio.timeout(10):
        while counter.calls == stalled_at:  # the stalled reservation goes through on a later turn of the loop
            await asyncio.sleep(0)
    assert ids.take() == 2 * BLOCK + 1  # back as soon as a block comes in


async def test_without_nats_a_local_counter_serves() -> None:
    ids = TabIds(local_reserve())
    await ids.start()
    assert [ids.take() for _ in range(BLOCK + 2)] == list(range(1, BLOCK + 3))
