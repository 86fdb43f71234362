"""Benchmark: rebuild the step log of a 10,000-step call from its events.

Runs a 10,000-step batch through the engine (scripted driver, no browser), keeps its events in
their wire form, then times the replay a node does (``messages.codec.replay``: each record folded as
it is read, those the call's layout foretells byte for byte without being parsed, ``messages.replay``), and,
for comparison, decoding every record into a typed event first and folding those. Baseline in
the same run: parsing the same bytes with orjson alone. The three are timed in turn, round by
round, so load falls on each alike. Target: 25 ms.

    .venv/bin/python bench/replay.py
"""

from __future__ import annotations

import itertools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests.unit.fakes

from actors.threads import ThreadedSequences
from core.claims import ClaimTable
from core.engine import Ports, run_call
from messages.codec import decode_events, encode, replay
from messages.commands import Limits, parse_call
from messages.events import Event
from messages.steplog import fold
from tests.unit.fakes import FakeClock, ScriptedDriver

STEPS = 10_000
ROUNDS = 15
TARGET_MS = 25


def main() -> None:
    clock = FakeClock()
    driver = ScriptedDriver(clock)
    spec = parse_call("batch", [{"action": "click" if i % 2 else "pageText", "selector": f"#s{i}"}
                                for i in range(STEPS)], default_tab=1, limits=Limits(max_commands=STEPS))
    events: list[Event] = []
    report = run_call(next(itertools.count(1)), spec, Ports(driver, clock, ClaimTable(), ThreadedSequences()),
                      events.append)
    wire = [encode(event) for event in events]

    typed = fold(decode_events(wire))
    assert replay(wire) == typed
    assert (typed.progress, typed.summary) == (report.log.progress, report.log.summary)

    def orjson_only() -> None:
        for data in wire:
            orjson.loads(data)

    figures = _medians_ms({"replay (parse and fold)": lambda: replay(wire),
                           "decode to events, then fold": lambda: fold(decode_events(wire)),
                           "baseline: orjson.loads alone": orjson_only})
    print(f"replay of a {STEPS}-step call ({len(wire)} events), median of {ROUNDS} rounds, wall / CPU (this thread):")
    for name, (wall, cpu) in figures.items():
        print(f"  {name:32s} {wall:8.1f} ms  {cpu:8.1f} ms")
    (replay_ms, replay_cpu), (baseline, baseline_cpu) = figures["replay (parse and fold)"], \
        figures["baseline: orjson.loads alone"]
    print(f"  ratio replay / orjson baseline: {replay_ms / baseline:.2f}x wall, {replay_cpu / baseline_cpu:.2f}x CPU")
    print(f"  target <= {TARGET_MS} ms: {'met' if replay_ms <= TARGET_MS else 'NOT met'}")


def _medians_ms(runs: dict[str, Callable[[], object]]) -> dict[str, tuple[float, float]]:
    """The median wall and CPU time of each run, the runs timed in turn within each round (CPU time counts what
    the run itself did, less moved by the other processes of a loaded machine)."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in runs}
    for round_ in range(ROUNDS + 1):
        for name, fn in runs.items():
            start, cpu = time.perf_counter(), time.thread_time()
            fn()
            if round_:  # the first round warms up
                times[name].append(((time.perf_counter() - start) * 1000, (time.thread_time() - cpu) * 1000))
    return {name: (statistics.median(t[0] for t in ms), statistics.median(t[1] for t in ms))
            for name, ms in times.items()}


if __name__ == "__main__":
    main()
