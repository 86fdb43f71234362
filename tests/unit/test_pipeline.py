"""OrderedWriter: items from many threads reach the store in order; acknowledgements settle in order."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from collections.abc import Awaitable, Iterator

import pytest

from actors.loop import IoLoop
from actors.pipeline import LINGER, OrderedWriter, Pending


class Store:
    """Keeps what it receives in order; acknowledges sends after a delay that shrinks, so that later
    acknowledgements come in before earlier ones. Refuses items named in ``refused``."""

    def __init__(self, refused: frozenset[str] = frozenset()) -> None:
        self.received: list[str] = []
        self.runs: list[list[str]] = []
        """The items of each send or post, as the writer handed them together."""
        self.refused = refused

    async def send(self, items: list[str]) -> Awaitable[int]:
        if items[-1] in self.refused:
            raise ConnectionError(items[-1])
        await self.post(items)
        seq = len(self.received)

        async def acknowledged() -> int:
            await asyncio.sleep(0.02 / seq)
            return seq
        return asyncio.ensure_future(acknowledged())

    async def post(self, items: list[str]) -> None:
        self.runs.append(list(items))
        self.received.extend(items)


@pytest.fixture
def io() -> Iterator[IoLoop]:
    loop = IoLoop()
    yield loop
    loop.close()


def _writer(io: IoLoop, store: Store) -> tuple[OrderedWriter[str, int], list[tuple[str, object]]]:
    reports: list[tuple[str, object]] = []  # appended on the loop only
    writer: OrderedWriter[str, int] = OrderedWriter(
        io, send=store.send, post=store.post,
        on_stored=lambda item, seq: reports.append((item, seq)),
        on_lost=lambda item, error: reports.append((item, type(error).__name__)))
    io.run(writer.start(), timeout=5)
    return writer, reports


def test_items_from_many_threads_reach_the_store_in_the_order_they_were_handed_over(io: IoLoop) -> None:
    store = Store()
    writer, reports = _writer(io, store)
    handed: list[str] = []
    lock = threading.Lock()

    def producer(p: int) -> None:
        for i in range(200):
            item = f"{p}.{i}"
            with lock:  # one order of handing over, as the engine emits under its lock
                handed.append(item)
                writer.put(item, acknowledged=i % 7 == 0, urgent=i % 7 == 0)

    threads = [threading.Thread(target=producer, args=(p,)) for p in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    io.run(writer.stop(), timeout=30)

    assert store.received == handed
    acknowledged = [item for item in handed if int(item.split(".")[1]) % 7 == 0]
    assert [item for item, _ in reports] == acknowledged  # settled in order, though acknowledged out of order
    assert all(seq == handed.index(item) + 1 for item, seq in reports)


def test_an_item_the_store_refuses_is_reported_lost_and_the_rest_go_on(io: IoLoop) -> None:
    store = Store(refused=frozenset({"b"}))
    writer, reports = _writer(io, store)
    for item in "abc":
        writer.put(item, acknowledged=True, urgent=True)
    io.run(writer.stop(), timeout=30)
    assert store.received == ["a", "c"]
    assert sorted(reports) == [("a", 1), ("b", "ConnectionError"), ("c", 2)]


def test_stop_returns_only_once_everything_handed_over_is_settled(io: IoLoop) -> None:
    store = Store()
    writer, reports = _writer(io, store)
    for item in ("x", "y", "z"):
        writer.put(item, acknowledged=True, urgent=item == "z")
    io.run(writer.stop(), timeout=30)
    assert reports == [("x", 1), ("y", 2), ("z", 3)]


def test_items_nobody_waits_for_linger_then_go_out_and_an_urgent_one_takes_them_along(io: IoLoop) -> None:
    store = Store()
    writer, reports = _writer(io, store)
    writer.put("lingering", acknowledged=False, urgent=False)
    deadline = time.monotonic() + 5
    while not store.received:  # goes out on its own, once the linger is over
        assert time.monotonic() < deadline
        time.sleep(LINGER / 4)
    for item in ("a", "b"):
        writer.put(item, acknowledged=False, urgent=False)
    writer.put("waited", acknowledged=True, urgent=True)
    io.run(writer.stop(), timeout=30)
    assert store.received == ["lingering", "a", "b", "waited"]
    assert reports == [("waited", 4)]


def test_posted_items_of_one_pass_go_to_the_store_together_and_with_the_acknowledged_one_after_them(io: IoLoop) -> None:
    """A burst of items handed over at once reaches the store in two runs: the posted ones before the acknowledged
    item with it, those after it together; each item once, in order, and only the acknowledged one settles."""
    store = Store()
    writer, reports = _writer(io, store)

    async def burst() -> None:  # on the loop: the writer runs only once every item is handed over
        for item in ("a", "b", "c"):
            writer.put(item, acknowledged=False, urgent=False)
        writer.put("waited", acknowledged=True, urgent=True)
        for item in ("d", "e"):
            writer.put(item, acknowledged=False, urgent=False)
    io.run(burst(), timeout=5)
    io.run(writer.stop(), timeout=30)
    assert store.runs == [["a", "b", "c", "waited"], ["d", "e"]]
    assert reports == [("waited", 4)]


def test_when_a_run_is_refused_each_of_its_items_is_reported_lost(io: IoLoop) -> None:
    store = Store(refused=frozenset({"refused"}))
    writer, reports = _writer(io, store)

    async def burst() -> None:
        writer.put("a", acknowledged=False, urgent=False)
        writer.put("refused", acknowledged=True, urgent=True)
        writer.put("after", acknowledged=True, urgent=True)
    io.run(burst(), timeout=5)
    io.run(writer.stop(), timeout=30)
    assert store.received == ["after"]
    assert reports == [("a", "ConnectionError"), ("refused", "ConnectionError"), ("after", 1)]


def test_items_handed_over_on_the_loop_itself_linger_or_go_at_once_as_from_a_thread(io: IoLoop) -> None:
    """On the loop (a step run there) the writer is woken, or its linger timer set, with no hop through the loop."""
    store = Store()
    writer, reports = _writer(io, store)

    async def on_the_loop() -> None:
        writer.put("lingering", acknowledged=False, urgent=False)
        while not store.received:  # goes out on its own, once the linger is over
            await asyncio.sleep(LINGER / 4)
        writer.put("a", acknowledged=False, urgent=False)
        writer.put("waited", acknowledged=True, urgent=True)  # takes "a" along, at the loop's next turn
        while len(store.received) < 3:
            await asyncio.sleep(0)

    io.run(on_the_loop(), timeout=5)
    writer.put("from a thread", acknowledged=True, urgent=True)
    io.run(writer.stop(), timeout=30)
    assert store.received == ["lingering", "a", "waited", "from a thread"]
    assert reports == [("waited", 3), ("from a thread", 4)]


def test_a_pending_item_is_awaited_on_the_loop_as_it_is_waited_for_on_a_thread(io: IoLoop) -> None:
    """``Pending.wait``: returns once the item is stored (at once when it is already), raises why it was not, and
    never blocks the loop meanwhile."""
    stored: concurrent.futures.Future[None] = concurrent.futures.Future()
    lost: concurrent.futures.Future[None] = concurrent.futures.Future()
    done: concurrent.futures.Future[None] = concurrent.futures.Future()
    done.set_result(None)

    async def awaited() -> list[str]:
        heard: list[str] = []
        await Pending(done, 5).wait()
        heard.append("stored already")
        waiting = asyncio.ensure_future(Pending(stored, 5).wait())
        await asyncio.sleep(0)  # the loop goes on while the item is on its way
        heard.append("the loop went on")
        stored.set_result(None)
        await waiting
        heard.append("stored")
        lost.set_exception(ConnectionError("the store did not answer"))
        with pytest.raises(ConnectionError):
            await Pending(lost, 5).wait()
        return heard

    assert io.run(awaited(), timeout=10) == ["stored already", "the loop went on", "stored"]
