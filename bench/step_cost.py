"""Benchmark: the whole cost of a step through a node, reads and writes apart, with no raw side.

300-step batches of ``title`` (a read), of ``js`` returning 1 (a write: its dispatch and audit
entry stored before it is sent), and of the two alternating (``mixed``, as ``bench/overhead.py``'s batch alternates
reads and clicks) on one tab of the calling node, run as ``POST /api/batch`` runs them
(``Node.run_async``), six rounds each after a warm-up; prints milliseconds per step, the part of it
spent outside the driver (the step minus the mean time inside ``ChromiumBrowser.execute``: the engine,
events, audit, actors and hops; under load the driver's own time swings most, this part much less), and
how many waits for a record (an acknowledgement of the event store or the audit stream) a step blocked
on: a count the machine's load does not move. ``--counts`` also counts, per step, what the load does not move
either: thread hops onto the loop (``IoLoop.run``), wake-ups of the loop from another thread
(``call_soon_threadsafe`` off the loop), iterations of the loop, thread wake-ups (``Condition.notify``), and the
process's CPU time. Its use is a comparison of two trees in the same hour: run it on each, interleaved.

    .venv/bin/python bench/step_cost.py [--rounds N] [--counts]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pykka

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests.site

from actors.call_actor import RunCall
from actors.loop import IoLoop
from actors.pipeline import Pending
from actors.tab_actor import Ticket
from bench.shared import TimedBrowser
from bridge.node import Node
from bridge.wiring import run_node
from messages.commands import parse_body
from tests.nodes import open_user_tab
from tests.site import TestSite

STEPS = 300
READ, WRITE = {"action": "title"}, {"action": "js", "code": "return 1"}
KINDS = {"read": [READ], "write": [WRITE], "mixed": [READ, WRITE]}


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
        if hasattr(Pending, "wait"):  # awaited on the loop (a write of a run of steps there)
            awaited = Pending.wait

            async def counted_here(pending: Pending) -> None:
                if not getattr(pending, "_future").done():  # noqa: B009
                    self.count += 1
                await awaited(pending)
            Pending.wait = counted_here  # type: ignore[method-assign,assignment]


class Counts:
    """What a step costs that the load does not move, counted while ``on``: thread hops onto the loop (one each way:
    ``IoLoop.run``, a tab actor's ask), wake-ups of
    the loop from another thread, loop iterations, thread wake-ups (``Condition.notify``); and the process's CPU."""

    def __init__(self, io: IoLoop) -> None:
        self.on = False
        self.seen: Counter[str] = Counter()
        self._loop_thread = io.run(_thread_id(), timeout=5)
        self._count(IoLoop, "run", "hops", lambda *a: threading.get_ident() != self._loop_thread)
        self._count(pykka.ActorRef, "ask", "hops",  # a write from a thread, through its tab actor's mailbox
                    lambda ref, message, *a: isinstance(message, Ticket))
        self._count(type(io.loop), "call_soon_threadsafe", "wake-ups",
                    lambda *a: threading.get_ident() != self._loop_thread)
        self._count(type(io.loop), "_run_once", "loop iterations")
        self._count(threading.Condition, "notify", "notify")

    def _count(self, cls: type, name: str, key: str, when: Callable[..., bool] = lambda *a: True) -> None:
        original = getattr(cls, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            if self.on and when(*args):
                self.seen[key] += 1
            return original(*args, **kwargs)
        setattr(cls, name, counted)


async def _thread_id() -> int:
    await asyncio.sleep(0)
    return threading.get_ident()


def per_step(node: Node, browser: TimedBrowser, tab: int, cycle: list[dict[str, str]], rounds: int,
             waits: BlockedWaits, counts: Counts | None) -> tuple[list[float], list[float], float, float]:
    """Milliseconds per step of each round, and of it outside the driver (the first round, a warm-up, left out),
    blocked record waits per step, and the process's CPU milliseconds per step."""
    times, outside = [], []
    cpu = 0.0
    for n in range(rounds + 1):
        spec = parse_body("batch", {"commands": cycle * (STEPS // len(cycle)), "tabId": tab})
        browser.timings.clear()
        if n == 1:
            waits.count = 0
            if counts is not None:
                counts.seen.clear()
                counts.on = True
        started, cpu_started = time.perf_counter(), time.process_time()
        body = node.io.run(node.run_async(RunCall(spec))).body
        times.append((time.perf_counter() - started) * 1000 / STEPS)
        if n:
            cpu += (time.process_time() - cpu_started) * 1000 / STEPS
        outside.append(times[-1] - statistics.mean(browser.timings))
        assert body["status"] == "ok", body.get("summary")
    if counts is not None:
        counts.on = False
    return times[1:], outside[1:], waits.count / (rounds * STEPS), cpu / rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--counts", action="store_true", help="count hops, wake-ups, loop iterations, notifies")
    args = parser.parse_args()
    rounds = args.rounds
    site = TestSite()
    site.start()
    browser = TimedBrowser()
    node = run_node(browser)
    waits = BlockedWaits()
    counts = Counts(node.io) if args.counts else None
    try:
        tab = open_user_tab(node, site.url("/clicks"))
        for kind, cycle in KINDS.items():
            times, outside, blocked, cpu = per_step(node, browser, tab, cycle, rounds, waits, counts)
            print(f"{kind}: {statistics.median(times):.3f} ms a step (rounds {min(times):.3f}..{max(times):.3f}), "
                  f"outside the driver {statistics.median(outside):.3f} ({min(outside):.3f}..{max(outside):.3f}), "
                  f"{blocked:.2f} blocked record waits a step, CPU {cpu:.3f} ms a step")
            if counts is not None:
                print("  a step: " + ", ".join(f"{key} {n / (rounds * STEPS):.2f}"
                                               for key, n in sorted(counts.seen.items())))
    finally:
        node.stop()
        site.stop()


if __name__ == "__main__":
    main()
