"""One store's acknowledgement deadlines (``actors.jetstream.AckDeadlines``): each acknowledgement fails with
``TimeoutError`` unless it comes within its time from its own sending, with one timer for them all."""

from __future__ import annotations

import asyncio

import pytest

from actors.jetstream import AckDeadlines

SECONDS = 0.2


async def _sent(deadlines: AckDeadlines) -> asyncio.Future[int]:
    return deadlines.within(asyncio.get_running_loop().create_future())


def test_an_acknowledgement_that_never_comes_fails_once_its_time_from_its_sending_is_up() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        deadlines = AckDeadlines(SECONDS)
        first = await _sent(deadlines)
        sent = loop.time()
        await asyncio.sleep(SECONDS / 2)
        second = await _sent(deadlines)  # its deadline runs from its own sending
        second_sent = loop.time()
        with pytest.raises(TimeoutError, match=r"no acknowledgement within 0\.2 s"):
            await first
        assert loop.time() - sent >= SECONDS
        with pytest.raises(TimeoutError):
            await second
        assert loop.time() - second_sent >= SECONDS

    asyncio.run(scenario())


def test_acknowledgements_that_come_keep_their_answer_and_those_after_them_still_run_out() -> None:
    async def scenario() -> None:
        deadlines = AckDeadlines(SECONDS)
        answered = [await _sent(deadlines) for _ in range(3)]
        lost = await _sent(deadlines)
        later = await _sent(deadlines)
        for seq, acknowledgement in enumerate(answered, 1):
            acknowledgement.set_result(seq)
        later.set_result(9)
        with pytest.raises(TimeoutError):
            await lost
        assert [await a for a in answered] == [1, 2, 3] and await later == 9
        again = await _sent(deadlines)  # the timer is armed again once nothing was waiting
        with pytest.raises(TimeoutError):
            await again

    asyncio.run(scenario())


def test_a_store_used_on_a_new_loop_times_its_acknowledgements_there() -> None:
    deadlines = AckDeadlines(SECONDS)

    async def lost() -> None:
        with pytest.raises(TimeoutError):
            await (await _sent(deadlines))

    async def left_waiting() -> None:
        await _sent(deadlines)  # the loop ends with its timer still set

    asyncio.run(left_waiting())
    asyncio.run(lost())
