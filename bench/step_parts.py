"""Benchmark: what each part of a step's infrastructure costs, switched off in turn in one node.

One node (embedded NATS, its own Chromium, an audit file, started as ``bench/shared.py`` starts nodes) runs 300-read
batches of ``title`` on one tab (``--step fill``: 300 ``fill`` of the test site's form's name field, a write: its
``StepDispatched`` and audit entry stored before it is sent, recorded ahead). For each part, rounds alternate with
the part on (A) and off (B), in one process, so that the machine's drift hits both alike; each figure is the median
over rounds of the paired difference B - A, per step: the process's CPU (every thread), the loop thread's and
nats-server's CPU (clock ticks, so in steps of 1/(ticks a second x steps a round)), the step's wall time, the
driver's part of it (``ChromiumBrowser.execute``, timed by a subclass) and the rest. A part switched off is not a
node one could run (nothing is recorded): the figures say what the part costs a step, which is where a shorter path
would gain.

The parts:

- ``events``: the events posted to the stream (``JetStreamEventStore.post`` sends nothing; the acknowledged
  ones still go);
- ``audit``: the step's audit entry (``Auditor.step`` makes none: a write then waits for its ``StepDispatched``
  alone);
- ``audit-file``: the audit actor's part (settled entries answered on the loop, no hand-over, no file line);
- ``metrics``: the metrics' event listener;
- ``all``: events, audit and metrics together.

Noise: a part that costs nothing reads 0 +- about 30 us of CPU with 20 rounds (a null run); more rounds narrow it.

    PYTHONPATH=$PWD .venv/bin/python bench/step_parts.py [--rounds N] [--part NAME ...] [--step read|fill]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests.site

from actors.audit_actor import Auditor, AuditTrail
from actors.call_actor import RunCall
from actors.event_store import JetStreamEventStore
from bench.shared import TimedBrowser, load_line, start_node
from bridge.metrics import NodeMetrics
from bridge.node import Node
from messages.commands import parse_body
from messages.errors import KitsuneError
from tests.nodes import open_user_tab
from tests.site import TestSite

STEPS = 300
FIGURES = ("process CPU", "loop CPU", "nats-server CPU", "wall", "driver", "outside the driver")


@contextmanager
def _replaced(owner: type, name: str, value: Any) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


async def _no_post(_store: JetStreamEventStore, _events: Any) -> None:
    """Sends nothing."""


def _answered_here(trail: AuditTrail) -> None:
    """The settled entries answered on the loop: no hand-over to the audit actor, no file line."""
    burst, trail._burst = trail._burst, []  # a benchmark looks inside
    for numbered in burst:
        if numbered.answer is None:
            continue
        if numbered.seq is None:
            numbered.answer.set_exception(KitsuneError("audit_unavailable", "The audit stream did not keep the entry"))
        else:
            numbered.answer.set_result(numbered.seq)


@contextmanager
def _all_off() -> Iterator[None]:
    with PARTS["events"](), PARTS["audit"](), PARTS["metrics"]():
        yield


STEPS_OF: dict[str, tuple[str, dict[str, str]]] = {
    "read": ("/clicks", {"action": "title"}),
    "fill": ("/form", {"action": "fill", "selector": "#name", "value": "Ada"}),
}
"""The batch's step, by name: the test site's page its tab shows, and the step (a read; a write)."""

PARTS: dict[str, Callable[[], Any]] = {
    "events": lambda: _replaced(JetStreamEventStore, "post", _no_post),
    "audit": lambda: _replaced(Auditor, "step", lambda *_a, **_k: None),
    "audit-file": lambda: _replaced(AuditTrail, "_hand_over", _answered_here),
    "metrics": lambda: _replaced(NodeMetrics, "on_event", lambda *_a: None),
    "all": _all_off,
}


class Meter:
    """Per-step figures of a few batches of one node: CPU of the process, its loop thread and nats-server."""

    def __init__(self, node: Node, browser: TimedBrowser, tab: int, step: dict[str, str]) -> None:
        self._node, self._browser = node, browser
        self._spec = parse_body("batch", {"commands": [step] * STEPS, "tabId": tab})
        self._loop = next(t.native_id for t in threading.enumerate() if t.name == "kitsune-io")
        self._nats = next(pid for pid in os.listdir("/proc") if pid.isdigit() and "nats-server" in _cmdline(pid))
        self._tick = os.sysconf("SC_CLK_TCK")

    def batches(self, count: int) -> tuple[float, ...]:
        """Microseconds a step over ``count`` batches, one per :data:`FIGURES`."""
        self._browser.timings.clear()
        process, loop, nats, wall = time.process_time(), self._ticks(f"self/task/{self._loop}"), \
            self._ticks(self._nats), time.perf_counter()
        for _ in range(count):
            assert self._node.io.run(self._node.run_async(RunCall(self._spec))).body["status"] == "ok"
        steps = count * STEPS / 1e6
        wall_us = (time.perf_counter() - wall) / steps
        driver = statistics.mean(self._browser.timings) * 1000
        return ((time.process_time() - process) / steps, (self._ticks(f"self/task/{self._loop}") - loop) / steps,
                (self._ticks(self._nats) - nats) / steps, wall_us, driver, wall_us - driver)

    def _ticks(self, process: str) -> float:
        fields = Path(f"/proc/{process}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self._tick


def _cmdline(pid: str) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""


def paired(meter: Meter, part: str, rounds: int) -> dict[str, tuple[float, float, float]]:
    """Per figure: the median with the part on, off, and the median of the paired differences (off - on)."""
    on: list[tuple[float, ...]] = []
    off: list[tuple[float, ...]] = []
    for r in range(rounds):
        for switched in ((False, True) if r % 2 == 0 else (True, False)):
            if switched:
                with PARTS[part]():
                    off.append(meter.batches(2))
            else:
                on.append(meter.batches(2))
    med = statistics.median
    return {name: (med(a[i] for a in on), med(b[i] for b in off),
                   med(b[i] - a[i] for a, b in zip(on, off, strict=True))) for i, name in enumerate(FIGURES)}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="rounds of each side a part")
    parser.add_argument("--part", choices=sorted(PARTS), action="append", help="only these parts")
    parser.add_argument("--step", choices=sorted(STEPS_OF), default="read", help="the batch's step")
    args = parser.parse_args()
    page, step = STEPS_OF[args.step]
    load_before = os.getloadavg()
    site = TestSite()
    site.start()
    browser = TimedBrowser()
    directory = tempfile.TemporaryDirectory()
    node = start_node(browser, Path(directory.name))
    try:
        meter = Meter(node, browser, open_user_tab(node, site.url(page)), step)
        meter.batches(3)  # the warm-up
        results = {part: paired(meter, part, args.rounds) for part in args.part or PARTS}
    finally:
        node.stop()
        site.stop()
        directory.cleanup()
    print(f"a {args.step} step's parts switched off in turn: {STEPS}-step batches, {args.rounds} paired rounds a part, "
          f"{os.cpu_count()} CPUs")
    print(load_line(load_before, os.getloadavg()))
    print("  part       | " + " | ".join(f"{name:>18s}" for name in FIGURES))
    print("             | " + " | ".join(f"{'on -> off: diff':>18s}" for _ in FIGURES))
    for part, figures in results.items():
        print(f"  {part:10s} | " + " | ".join(f"{a:5.0f}->{b:5.0f}: {d:+5.0f}" for a, b, d in figures.values()))
    print("microseconds a step; diff: the median of the paired differences (off - on)")


if __name__ == "__main__":
    main()
