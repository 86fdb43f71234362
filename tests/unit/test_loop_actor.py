"""LoopActor: a pykka actor whose messages are handled on the event loop, one at a time."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pykka
import pytest

from actors.loop import IoLoop, LoopActor, ask_from_loop


class Recorder(LoopActor):
    """Answers ("echo", x) with x after a pause, ("boom",) by raising; records what it ran where."""

    def __init__(self, io: IoLoop) -> None:
        super().__init__(io)
        self.running = 0
        self.overlapped = False
        self.threads: set[int] = set()
        self.stopped = threading.Event()

    async def handle(self, message: Any) -> Any:
        self.threads.add(threading.get_ident())
        self.running += 1
        self.overlapped |= self.running > 1
        try:
            await asyncio.sleep(0.002)  # other messages may arrive meanwhile; they wait their turn
            if message[0] == "boom":
                raise ValueError("boom")
            return message[1]
        finally:
            self.running -= 1

    async def doubled(self, value: int) -> int:
        await asyncio.sleep(0)
        return value * 2

    def on_stop(self) -> None:
        self.stopped.set()


@pytest.fixture
def io() -> Iterator[IoLoop]:
    loop = IoLoop()
    yield loop
    loop.close()


def _loop_thread(io: IoLoop) -> int:
    async def ident() -> int:
        return threading.get_ident()
    return io.run(ident(), timeout=5)


def test_asks_from_many_threads_are_answered_one_at_a_time_on_the_loop(io: IoLoop) -> None:
    ref = Recorder.start(io)
    try:
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda i: ref.ask(("echo", i), timeout=10), range(40)))
        assert answers == list(range(40))
        actor = ref.proxy()
        assert actor.overlapped.get(timeout=5) is False
        assert actor.threads.get(timeout=5) == {_loop_thread(io)}
    finally:
        ref.stop()


def test_a_coroutine_on_the_loop_asks_without_blocking_it(io: IoLoop) -> None:
    ref = Recorder.start(io)

    async def both() -> list[Any]:
        return list(await asyncio.gather(ask_from_loop(ref, ("echo", "a")), ask_from_loop(ref, ("echo", "b"))))
    try:
        assert io.run(both(), timeout=10) == ["a", "b"]
    finally:
        ref.stop()


def test_a_failure_goes_back_to_the_asker_and_the_actor_goes_on(io: IoLoop) -> None:
    ref = Recorder.start(io)
    try:
        with pytest.raises(ValueError, match="boom"):
            ref.ask(("boom",), timeout=10)
        with pytest.raises(ValueError, match="boom"):
            io.run(ask_from_loop(ref, ("boom",)), timeout=10)
        assert ref.ask(("echo", 7), timeout=10) == 7
    finally:
        ref.stop()


def test_proxy_calls_of_coroutine_methods_are_awaited(io: IoLoop) -> None:
    ref = Recorder.start(io)
    try:
        assert ref.proxy().doubled(21).get(timeout=10) == 42
    finally:
        ref.stop()


def test_a_stopped_actor_runs_on_stop_and_refuses_messages(io: IoLoop) -> None:
    ref = Recorder.start(io)
    actor = ref.proxy()
    stopped = actor.stopped.get(timeout=5)
    ref.stop(block=True, timeout=10)
    assert stopped.is_set()
    assert not ref.is_alive()
    with pytest.raises(pykka.ActorDeadError):
        ref.ask(("echo", 1), timeout=10)


def test_closing_the_loop_stops_an_actor_left_running() -> None:
    io = IoLoop()
    ref = Recorder.start(io)
    assert ref.ask(("echo", 1), timeout=10) == 1
    io.close()
    assert not ref.is_alive()


def test_closing_the_loop_ends_its_executor_s_threads_first() -> None:
    """As ``asyncio.run`` ends a loop: a job still running on the loop's default executor is finished and its thread
    gone once ``close`` returns (a node's stop leaves no thread behind)."""
    io = IoLoop()
    before = set(threading.enumerate())

    async def job_left_running() -> None:
        asyncio.get_running_loop().run_in_executor(None, time.sleep, 0.3)

    io.run(job_left_running(), timeout=5)
    io.close()
    assert {thread.name for thread in set(threading.enumerate()) - before} == set()

