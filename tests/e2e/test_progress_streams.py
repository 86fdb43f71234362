"""Progress that streams (issue 30): a container call's steps reach the SDK's own client as they
finish, over streamable HTTP (``/mcp``) as over stdio, and the 10 s heartbeat counts the steps done.
Arrival times are asserted, not only counts: ``/mcp`` once sent every notification when the call ended."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field

import pytest
from mcp import ClientSession

from tests.e2e.clients import call, open_tab, over_http, over_stdio
from tests.integration.serving import Served
from tests.site import TestSite

pytestmark = pytest.mark.anyio

QUICK = "await new Promise(r => setTimeout(r, 150)); return Date.now()"
"""A step that ends 150 ms after it starts, answering when it ended (the page's clock: the wall clock)."""
SLOW = "await new Promise(r => setTimeout(r, 12000)); return Date.now()"
"""A 12 s step: past the 10 s heartbeat."""


@dataclass
class Heard:
    """A call's progress notifications as the client heard them, each with its arrival (wall clock, s)."""

    notes: list[tuple[float, float | None, str, float]] = field(default_factory=list)

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.notes.append((progress, total, message or "", time.time()))

    def steps(self) -> dict[int, float]:
        """The arrival of each finished step's notification, by the steps done."""
        return {int(p): at for p, _, _, at in self.notes if p == int(p)}

    def ticks(self) -> list[tuple[float, str, float]]:
        return [(p, message, at) for p, _, message, at in self.notes if p != int(p)]


def _http(served: Served) -> AbstractAsyncContextManager[ClientSession]:
    return over_http(served)


def _stdio(served: Served) -> AbstractAsyncContextManager[ClientSession]:
    return over_stdio(served)


@pytest.mark.parametrize("connect", [_http, _stdio], ids=["http", "stdio"])
async def test_an_11_step_call_s_notifications_arrive_as_its_steps_finish_and_the_heartbeat_counts_them(
        plain: Served, site: TestSite,
        connect: Callable[[Served], AbstractAsyncContextManager[ClientSession]]) -> None:
    tab = open_tab(plain, site.url("/text"))
    steps = [{"action": "js", "code": QUICK} for _ in range(10)] + [{"action": "js", "code": SLOW}]
    heard = Heard()
    async with connect(plain) as session:
        body = await call(session, "browser_batch", {"tabId": tab, "commands": steps}, progress_callback=heard)
        answered = time.time()
    assert body["status"] == "ok", body
    arrived = heard.steps()
    assert sorted(arrived) == list(range(1, 12)), heard.notes
    # the quick steps were told as they finished, 12 s (the slow step) before the answer
    assert all(arrived[n] < answered - 10 for n in range(1, 11)), (answered, heard.notes)
    assert answered - arrived[11] < 1.0, (answered, heard.notes)
    assert {total for _, total, _, _ in heard.notes} == {11}, heard.notes
    # the step's end in the page to its notification at the client: the page's clock is the wall clock
    ended = [result["value"] / 1000 for result in body["results"]]
    latency = [arrived[n + 1] - ended[n] for n in range(11)]
    assert statistics.median(latency) < 0.5, latency
    # the heartbeat (10 s into the call: during the slow step) counts the steps done when it was sent
    ticks = heard.ticks()
    assert any(arrived[10] < at < arrived[11] for _, _, at in ticks), heard.notes
    for progress, message, at in ticks:
        done = sum(1 for step in arrived.values() if step < at)
        assert message == f"{done} of 11 steps done; running" and done < progress < done + 1, heard.notes

