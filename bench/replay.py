"""Benchmark: rebuild the step log of a 10,000-step call from its events.

Runs a 10,000-step batch through the engine (scripted driver, no browser), keeps its events in
their wire form, then times decoding them into typed events (the boundary, as a replay of the
stream decodes them) and folding those back into progress, status and summary. Baseline in the
same run: parsing the same bytes with orjson alone. Target: under 50 ms.

    .venv/bin/python bench/replay.py
"""

from __future__ import annotations

import itertools
import statistics
import sys
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests.unit.fakes

from actors.threads import ThreadedSequences
from core.claims import ClaimTable
from core.engine import Ports, run_call
from messages.codec import decode_events, encode
from messages.commands import Limits, parse_call
from messages.events import Event
from messages.steplog import StepLog, fold
from tests.unit.fakes import FakeClock, ScriptedDriver

STEPS = 10_000
ROUNDS = 15


def main() -> None:
    clock = FakeClock()
    driver = ScriptedDriver(clock)
    spec = parse_call("batch", [{"action": "click" if i % 2 else "pageText", "selector": f"#s{i}"}
                                for i in range(STEPS)], default_tab=1, limits=Limits(max_commands=STEPS))
    events: list[Event] = []
    report = run_call(next(itertools.count(1)), spec, Ports(driver, clock, ClaimTable(), ThreadedSequences()),
                      events.append)
    wire = [encode(event) for event in events]

    def rebuild() -> StepLog:
        return fold(decode_events(wire))

    rebuilt = rebuild()
    assert (rebuilt.progress, rebuilt.summary) == (report.log.progress, report.log.summary)

    def orjson_only() -> None:
        for data in wire:
            orjson.loads(data)

    figures = {name: _median_ms(fn) for name, fn in
               (("decode and fold", rebuild), ("baseline: orjson.loads alone", orjson_only))}
    print(f"replay of a {STEPS}-step call ({len(wire)} events), median of {ROUNDS} rounds:")
    for name, ms in figures.items():
        print(f"  {name:32s} {ms:8.1f} ms")
    rebuild_ms = figures["decode and fold"]
    print(f"  ratio rebuild / orjson baseline: {rebuild_ms / figures['baseline: orjson.loads alone']:.1f}x")
    print(f"  target < 50 ms: {'met' if rebuild_ms < 50 else 'NOT met'}")


def _median_ms(fn: object) -> float:
    assert callable(fn)
    fn()
    times = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


if __name__ == "__main__":
    main()
