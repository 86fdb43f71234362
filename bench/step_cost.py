"""Benchmark: the whole cost of a step through a node, reads and writes apart, with no raw side.

300-step batches of ``title`` (a read) and of ``js`` returning 1 (a write: its dispatch and audit
entry stored before it is sent) on one tab of the calling node, which keeps an audit file as ``kitsune
serve`` does, run as ``POST /api/batch`` runs them (``Node.run_async``), six rounds each after a
warm-up; prints milliseconds per step, the part of it spent outside the driver (the step minus the
mean time inside ``ChromiumBrowser.execute``: the engine, events, audit, actors and hops; under load
the driver's own time swings most, this part much less), and a step's counts: the waits for a record
(an acknowledgement of the event store or the audit stream) it blocked on, the threads woken
(``Condition.notify`` with a thread waiting), the process's CPU and the audit actor thread's part of
it. Its use is a comparison of two trees in the same hour: run it on each, interleaved. ``--strace
FILE`` has ``strace -c -f`` count the process's system calls over the timed rounds (in ``FILE.read``
and ``FILE.write``; the CPU figures are then strace's too).

    .venv/bin/python bench/step_cost.py [--rounds N] [--kind read|write] [--strace FILE]
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests.site

from actors.call_actor import RunCall
from actors.pipeline import Pending
from bench.shared import TimedBrowser
from bridge.node import Node
from bridge.wiring import run_node
from core.settings import NodeConfig
from messages.commands import parse_body
from tests.nodes import open_user_tab
from tests.site import TestSite

STEPS = 300
KINDS = {"read": {"action": "title"}, "write": {"action": "js", "code": "return 1"}}


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

    def stop(self) -> None:
        Pending.__call__ = self._wait  # type: ignore[method-assign]


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


def per_step(node: Node, browser: TimedBrowser, tab: int, command: dict[str, str], rounds: int,
             strace: str | None) -> tuple[list[float], list[float], dict[str, float]]:
    """Milliseconds per step of each round, and of it outside the driver (after a warm-up round), and counts a
    step: blocked record waits, thread wake-ups, microseconds of the process's CPU."""
    spec = parse_body("batch", {"commands": [command] * STEPS, "tabId": tab})
    assert node.io.run(node.run_async(RunCall(spec))).body["status"] == "ok"  # the warm-up
    times, outside = [], []
    waits, wake_ups = BlockedWaits(), WakeUps()
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
    return times, outside, {"blocked record waits": waits.count / steps, "thread wake-ups": wake_ups.count / steps,
                            "us of CPU": cpu * 1e6 / steps, "us of it the audit actor's": audit_cpu * 1e6 / steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--kind", choices=sorted(KINDS), action="append", help="only these kinds of step")
    parser.add_argument("--strace", metavar="FILE", help="strace -c -f's summary of the timed rounds, to FILE.KIND")
    args = parser.parse_args()
    site = TestSite()
    site.start()
    browser = TimedBrowser()
    directory = tempfile.TemporaryDirectory()  # the audit file, as ``kitsune serve`` keeps one
    node = run_node(browser, NodeConfig(audit_file=Path(directory.name) / "audit.jsonl"))
    try:
        tab = open_user_tab(node, site.url("/clicks"))
        for kind in args.kind or KINDS:
            command = KINDS[kind]
            times, outside, counts = per_step(node, browser, tab, command, args.rounds,
                                              args.strace and f"{args.strace}.{kind}")
            print(f"{kind}: {statistics.median(times):.3f} ms a step (rounds {min(times):.3f}..{max(times):.3f}), "
                  f"outside the driver {statistics.median(outside):.3f} ({min(outside):.3f}..{max(outside):.3f}); "
                  "a step: " + ", ".join(f"{value:.2f} {name}" for name, value in counts.items()))
    finally:
        node.stop()
        site.stop()
        directory.cleanup()


if __name__ == "__main__":
    main()
