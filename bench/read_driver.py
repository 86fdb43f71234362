"""Benchmark: the driver's own cost of a read, against raw Playwright on the same page, in CPU.

One Chromium launched as a node launches it (``ChromiumBrowser``), the test site's /clicks page, one loop: rounds of
``title`` and ``pageText #local-count`` run through ``ChromiumBrowser.execute`` (the driver's checks, its ``Run``,
its backstop, Playwright's client) and as raw ``page.title()`` / ``page.inner_text()``, interleaved. Prints the loop
thread's CPU (``time.thread_time()``) per call, medians over the rounds (CPU is what load disturbs least), and
what Playwright's client spends capturing the caller's stack on each of its API calls (``capture_library_stack_trace``,
which reads the locals of each frame of the caller's await chain) with the frames it kept: none through the driver,
whose actions run their calls as one call of the client (``driver/client_zone.py``). The node's engine is not in it
(``bench/read_stages.py`` and ``bench/overhead.py`` run whole nodes).

    PYTHONPATH=$PWD .venv/bin/python bench/read_driver.py [--rounds N] [--calls N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests.site

from playwright._impl import channel_owner

from bench.overhead import RawSide
from bench.shared import load_line
from messages.commands import parse_body
from messages.results import Done
from tests.site import TestSite

_captured: list[tuple[float, int]] = []
"""(microseconds, frames kept) of each stack capture while a side is timed."""


def _hook() -> None:
    capture = channel_owner.capture_library_stack_trace  # type: ignore[attr-defined]

    def timed() -> Any:
        started = time.thread_time_ns()
        trace = capture()
        _captured.append(((time.thread_time_ns() - started) / 1000, len(trace["frames"])))
        return trace

    channel_owner.capture_library_stack_trace = timed  # type: ignore[attr-defined]


async def _rounds(raw: RawSide, rounds: int, calls: int) -> dict[str, list[tuple[float, float, float]]]:
    page, browser = raw.page, raw.browser
    tab = next(t for t in browser.tab_ids() if browser.page(t) is page)
    title, text = parse_body("batch", {"commands": [{"action": "title"},
                                                    {"action": "pageText", "selector": "#local-count"}]}).commands

    async def driver(command: Any) -> None:
        assert isinstance(await browser.execute(command, tab, 30.0), Done)

    sides: dict[str, Callable[[], Awaitable[Any]]] = {
        "raw title": page.title, "driver title": lambda: driver(title),
        "raw pageText": lambda: page.inner_text("#local-count"), "driver pageText": lambda: driver(text)}
    out: dict[str, list[tuple[float, float, float]]] = {name: [] for name in sides}
    for r in range(rounds + 1):
        for name, call in (sides.items() if r % 2 else reversed(sides.items())):
            _captured.clear()
            started = time.thread_time()
            for _ in range(calls):
                await call()
            cpu = (time.thread_time() - started) / calls * 1000
            if r:  # the first round warms up
                out[name].append((cpu, statistics.median(c for c, _ in _captured) if _captured else 0.0,
                                  statistics.median(f for _, f in _captured) if _captured else 0.0))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6, help="measured rounds of each side")
    parser.add_argument("--calls", type=int, default=300, help="calls a round")
    args = parser.parse_args()
    _hook()
    load_before = os.getloadavg()
    with TestSite() as site:
        raw = RawSide(site)
        try:
            out = raw.io.run(_rounds(raw, args.rounds, args.calls), 1800)
        finally:
            raw.stop()
    print(f"a read through the driver and raw, {args.rounds} rounds of {args.calls} calls a side, one loop")
    print(load_line(load_before, os.getloadavg()))
    print("                  | loop CPU a call, ms | stack capture, us (frames kept)")
    for name, rounds in out.items():
        print(f"  {name:15s} | {statistics.median(c for c, _, _ in rounds):19.3f} | "
              f"{statistics.median(s for _, s, _ in rounds):6.1f} ({statistics.median(f for _, _, f in rounds):.0f})")


if __name__ == "__main__":
    main()
