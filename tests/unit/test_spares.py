"""The spare windows' bookkeeping (driver/spares.py), with a CDP session and pages faked.

The real windows are tested in tests/integration/test_browser.py; here what the browser cannot be made
to do on cue: a context closing while its spare is on its way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, cast

from driver.spares import SpareWindows


class FakeCdp:
    """Answers ``Target.createTarget`` at once, and keeps what it was asked to create."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []

    async def send(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert method == "Target.createTarget"
        self.created.append(params)
        return {"targetId": f"target-{len(self.created)}"}


class FakePage:
    def __init__(self, url: str) -> None:
        self.url = url
        self.closed = False

    def is_closed(self) -> bool:
        return self.closed

    def on(self, event: str, handler: Callable[[Any], None]) -> None:
        assert event == "close"

    async def close(self) -> None:
        self.closed = True


async def _until(check: Callable[[], bool], within: float = 1.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not check():
        assert loop.time() < deadline, "not within the time"
        await asyncio.sleep(0.01)


def _markers(cdp: FakeCdp) -> list[str]:
    return [params["url"] for params in cdp.created]


async def _ready_spare(spares: SpareWindows, cdp: FakeCdp, context: str, made: int) -> None:
    """Have ``context``'s spare made (the ``made``-th window) and its page show up."""
    spares.refill(cast(Any, cdp), context)
    await _until(lambda: len(cdp.created) == made)
    assert spares.claims(cast(Any, FakePage(_markers(cdp)[-1])))
    await _until(lambda: spares.ready(context))


def test_a_context_closing_drops_its_spare_on_its_way_and_the_next_context_gets_one_at_once() -> None:
    async def scenario() -> None:
        spares, cdp = SpareWindows(), FakeCdp()
        spares.refill(cast(Any, cdp), "a")
        spares.refill(cast(Any, cdp), "b")
        await _until(lambda: len(cdp.created) == 1)
        assert cdp.created[0]["browserContextId"] == "a"
        spares.drop("a")  # a's page never shows up: its context is closing
        await _until(lambda: len(cdp.created) == 2)  # not after SPARE_TIMEOUT (30 s)
        assert cdp.created[1]["browserContextId"] == "b"
        b_page = cast(Any, FakePage(_markers(cdp)[1]))
        assert spares.claims(b_page)
        await _until(lambda: spares.ready("b"))
        assert not spares.ready("a") and spares.take("a") is None
        assert spares.take("b") == (b_page, "target-2")

    asyncio.run(scenario())


def test_a_spare_whose_context_closed_as_its_page_showed_up_is_closed_not_kept() -> None:
    async def scenario() -> None:
        spares, cdp = SpareWindows(), FakeCdp()
        spares.refill(cast(Any, cdp), "a")
        await _until(lambda: len(cdp.created) == 1)
        late = FakePage(_markers(cdp)[0])
        spares.drop("a")
        assert spares.claims(cast(Any, late))  # a spare, never a tab
        await _until(lambda: late.closed)
        assert not spares.ready("a")

    asyncio.run(scenario())


def test_a_dropped_ready_spare_frees_its_place_and_a_wanted_one_is_never_made() -> None:
    async def scenario() -> None:
        spares, cdp = SpareWindows(), FakeCdp()
        for made, context in enumerate(("a", "b"), start=1):
            await _ready_spare(spares, cdp, context, made)
        spares.refill(cast(Any, cdp), "c")  # two spares kept, none unused long enough: none for c
        spares.drop("a")
        assert not spares.ready("a")
        with spares.busy():
            spares.refill(cast(Any, cdp), "c")  # a's place is free
            spares.refill(cast(Any, cdp), "d")  # the limit: c's is on its way
            spares.drop("c")  # before it was made: the browser was busy
        spares.refill(cast(Any, cdp), "d")
        await _until(lambda: len(cdp.created) == 3)
        await asyncio.sleep(0.3)
        assert [params["browserContextId"] for params in cdp.created] == ["a", "b", "d"]

    asyncio.run(scenario())
