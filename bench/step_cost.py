"""Benchmark: the whole cost of a step through a node, reads and writes apart, with no raw side.

300-step batches of ``title`` (a read) and of ``js`` returning 1 (a write: its dispatch and audit
entry stored before it is sent) on one tab of the calling node, run as ``POST /api/batch`` runs them
(``Node.run_async``), six rounds each after a warm-up; prints milliseconds per step, the part of it
spent outside the driver (the step minus the mean time inside ``ChromiumBrowser.execute``: the engine,
events, audit, actors and hops; under load the driver's own time swings most, this part much less), and
how many waits for a record (an acknowledgement of the event store or the audit stream) a step blocked
on: a count the machine's load does not move. Its use is a comparison of two trees in the same hour:
run it on each, interleaved.

    .venv/bin/python bench/step_cost.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests.site

from actors.call_actor import RunCall
from actors.pipeline import Pending
from bench.shared import TimedBrowser
from bridge.node import Node
from bridge.wiring import run_node
from messages.commands import parse_body
from tests.nodes import open_user_tab
from tests.site import TestSite

STEPS = 300
KINDS = {"read": {"action": "title"}, "write": {"action": "js", "code": "return 1"}}


class BlockedWaits:
    """Counts the waits for a record that found it not yet stored (the step waited for an acknowledgement)."""

    def __init__(self) -> None:
        self.count = 0
        wait = Pending.__call__

        def counted(pending: Pending) -> None:
            if not getattr(pending, "_future").done():  # noqa: B009 (a benchmark looks inside)
                self.count += 1
            wait(pending)
        Pending.__call__ = counted  # type: ignore[method-assign,assignment]


def per_step(node: Node, browser: TimedBrowser, tab: int, command: dict[str, str], rounds: int,
             waits: BlockedWaits) -> tuple[list[float], list[float], float]:
    """Milliseconds per step of each round, and of it outside the driver (the first round, a warm-up, left out),
    and blocked record waits per step."""
    times, outside = [], []
    for n in range(rounds + 1):
        spec = parse_body("batch", {"commands": [command] * STEPS, "tabId": tab})
        browser.timings.clear()
        if n == 1:
            waits.count = 0
        started = time.perf_counter()
        body = node.io.run(node.run_async(RunCall(spec))).body
        times.append((time.perf_counter() - started) * 1000 / STEPS)
        outside.append(times[-1] - statistics.mean(browser.timings))
        assert body["status"] == "ok", body.get("summary")
    return times[1:], outside[1:], waits.count / (rounds * STEPS)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    rounds = parser.parse_args().rounds
    site = TestSite()
    site.start()
    browser = TimedBrowser()
    node = run_node(browser)
    waits = BlockedWaits()
    try:
        tab = open_user_tab(node, site.url("/clicks"))
        for kind, command in KINDS.items():
            times, outside, blocked = per_step(node, browser, tab, command, rounds, waits)
            print(f"{kind}: {statistics.median(times):.3f} ms a step (rounds {min(times):.3f}..{max(times):.3f}), "
                  f"outside the driver {statistics.median(outside):.3f} ({min(outside):.3f}..{max(outside):.3f}), "
                  f"{blocked:.2f} blocked record waits a step")
    finally:
        node.stop()
        site.stop()


if __name__ == "__main__":
    main()
