"""Benchmark: the whole cost of a step through a node, reads and writes apart, with no raw side.

300-step batches of ``title`` (a read), of ``js`` returning 1 (a write: its dispatch and audit
entry stored before it is sent), and of the two alternating (``mixed``, as ``bench/overhead.py``'s batch
alternates reads and clicks) on one tab of the calling node, which keeps an audit file as ``kitsune serve``
does, run as ``POST /api/batch`` runs them (``Node.run_async``), six rounds each after a warm-up; prints
milliseconds per step, the part of it spent outside the driver (the step minus the mean time inside
``ChromiumBrowser.execute``: the engine, events, audit, actors and hops; under load the driver's own time
swings most, this part much less), and a step's counts: the waits for a record (an acknowledgement of the
event store or the audit stream) it blocked on, the threads woken (``Condition.notify`` with a thread
waiting), the process's CPU and the audit actor thread's part of it. ``--counts`` also counts, per step,
what the load does not move either: thread hops onto the loop (``IoLoop.run``, a tab actor's ask), wake-ups
of the loop from another thread (``call_soon_threadsafe`` off the loop) and iterations of the loop.
``--strace FILE`` has ``strace -c -f`` count the process's system calls over the timed rounds (in
``FILE.KIND``; the CPU figures are then strace's too). Its use is a comparison of two trees in the same
hour: run it on each, interleaved.

    .venv/bin/python bench/step_cost.py [--rounds N] [--kind read|write|mixed] [--counts] [--strace FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pykka

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests.site

from actors.call_actor import RunCall
from actors.loop import IoLoop
from actors.pipeline import Pending
from actors.tab_actor import Ticket
from bench.shared import TimedBrowser, start_node
from bridge.node import Node
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
        self._wait = wait = Pending.__call__

        def counted(pending: Pending) -> None:
            if not getattr(pending, "_future").done():  # noqa: B009 (a benchmark looks inside)
                self.count += 1
            wait(pending)
        Pending.__call__ = counted  # type: ignore[method-assign,assignment]
        self._awaited = awaited = Pending.wait  # awaited on the loop (a write of a run of steps there)

        async def counted_here(pending: Pending) -> None:
            if not getattr(pending, "_future").done():  # noqa: B009
                self.count += 1
            await awaited(pending)
        Pending.wait = counted_here  # type: ignore[method-assign,assignment]

    def stop(self) -> None:
        Pending.__call__ = self._wait  # type: ignore[method-assign]
        Pending.wait = self._awaited  # type: ignore[method-assign]


class WakeUps:
    """Counts ``Condition.notify`` (``notify_all`` calls it) that found a thread waiting: a thread woken."""

    def __init__(self) -> None:
        self.count = 0
        self._notify = notify = threading.Condition.notify

        def counted(condition: threading.Condition, n: int = 1) -> None:
            if getattr(condition, "_waiters"):  # noqa: B009 (a benchmark looks inside)
                self.count += 1
            notify(condition, n)
        threading.Condition.notify = counted  # type: ignore[method-assign,assignment]

    def stop(self) -> None:
        threading.Condition.notify = self._notify  # type: ignore[method-assign]


def audit_thread_cpu() -> float:
    """Seconds of CPU the audit actor's thread used so far."""
    actor = next(thread for thread in threading.enumerate() if thread.name.startswith("AuditActor"))
    assert actor.ident is not None
    return time.clock_gettime(time.pthread_getcpuclockid(actor.ident))


@contextmanager
def syscalls(output: str | None) -> Iterator[None]:
    """``strace -c -f`` on this process (its threads) for the block, its summary to ``output``."""
    if output is None:
        yield
        return
    tracer = subprocess.Popen(["strace", "-c", "-f", "-o", output, "-p", str(os.getpid())],
                              stderr=subprocess.PIPE, text=True)
    assert tracer.stderr is not None
    tracer.stderr.readline()  # "Process N attached"
    try:
        yield
    finally:
        tracer.send_signal(signal.SIGINT)
        tracer.wait()


class Counts:
    """What a step costs that the load does not move, counted while ``on``: thread hops onto the loop (one each way:
    ``IoLoop.run``, a tab actor's ask), wake-ups of the loop from another thread and loop iterations."""

    def __init__(self, io: IoLoop) -> None:
        self.on = False
        self.seen: Counter[str] = Counter()
        self._loop_thread = io.run(_thread_id(), timeout=5)
        self._count(IoLoop, "run", "hops", lambda *a: threading.get_ident() != self._loop_thread)
        self._count(pykka.ActorRef, "ask", "hops",  # a write from a thread, through its tab actor's mailbox
                    lambda ref, message, *a: isinstance(message, Ticket))
        self._count(type(io.loop), "call_soon_threadsafe", "wake-ups of the loop",
                    lambda *a: threading.get_ident() != self._loop_thread)
        self._count(type(io.loop), "_run_once", "loop iterations")

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
             strace: str | None, counts: Counts | None) -> tuple[list[float], list[float], dict[str, float]]:
    """Milliseconds per step of each round, and of it outside the driver (after a warm-up round), and counts a
    step: blocked record waits, thread wake-ups, microseconds of the process's CPU, and ``counts``' own."""
    spec = parse_body("batch", {"commands": cycle * (STEPS // len(cycle)), "tabId": tab})
    assert node.io.run(node.run_async(RunCall(spec))).body["status"] == "ok"  # the warm-up
    times, outside = [], []
    waits, wake_ups = BlockedWaits(), WakeUps()
    if counts is not None:
        counts.seen.clear()
        counts.on = True
    cpu, audit_cpu = time.process_time(), audit_thread_cpu()
    with syscalls(strace):
        for _ in range(rounds):
            browser.timings.clear()
            started = time.perf_counter()
            body = node.io.run(node.run_async(RunCall(spec))).body
            times.append((time.perf_counter() - started) * 1000 / STEPS)
            outside.append(times[-1] - statistics.mean(browser.timings))
            assert body["status"] == "ok", body.get("summary")
    cpu, audit_cpu = time.process_time() - cpu, audit_thread_cpu() - audit_cpu
    waits.stop()
    wake_ups.stop()
    steps = rounds * STEPS
    seen = {} if counts is None else {key: n / steps for key, n in sorted(counts.seen.items())}
    if counts is not None:
        counts.on = False
    return times, outside, {"blocked record waits": waits.count / steps, "thread wake-ups": wake_ups.count / steps,
                            "us of CPU": cpu * 1e6 / steps, "us of it the audit actor's": audit_cpu * 1e6 / steps,
                            **seen}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--kind", choices=sorted(KINDS), action="append", help="only these kinds of step")
    parser.add_argument("--counts", action="store_true", help="count hops, wake-ups of the loop, loop iterations")
    parser.add_argument("--strace", metavar="FILE", help="strace -c -f's summary of the timed rounds, to FILE.KIND")
    args = parser.parse_args()
    site = TestSite()
    site.start()
    browser = TimedBrowser()
    directory = tempfile.TemporaryDirectory()  # the audit file, as ``kitsune serve`` keeps one
    node = start_node(browser, Path(directory.name))
    counts = Counts(node.io) if args.counts else None
    try:
        tab = open_user_tab(node, site.url("/clicks"))
        for kind in args.kind or KINDS:
            times, outside, figures = per_step(node, browser, tab, KINDS[kind], args.rounds,
                                               args.strace and f"{args.strace}.{kind}", counts)
            print(f"{kind}: {statistics.median(times):.3f} ms a step (rounds {min(times):.3f}..{max(times):.3f}), "
                  f"outside the driver {statistics.median(outside):.3f} ({min(outside):.3f}..{max(outside):.3f}); "
                  "a step: " + ", ".join(f"{value:.2f} {name}" for name, value in figures.items()))
    finally:
        node.stop()
        site.stop()
        directory.cleanup()


if __name__ == "__main__":
    main()
