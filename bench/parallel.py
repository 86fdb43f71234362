"""Benchmark: clicks per second of a parallel call on 8 tabs against a batch on one tab, through Kitsune.

One Kitsune node (embedded nats-server with JetStream, Chromium, the actors) with 8 tabs on the
test site's /clicks page. A parallel call of 8 sequences, each 30 clicks (#b0..#b9) on its own
tab, runs against a batch of the same 240 clicks on one tab (the baseline, in the same run).
Each is warmed up once, then their rounds are interleaved (B P, P B, B P, ...) so that noise from
other work on the machine hits both. Throughput is 240 clicks over the wall time of the call
(``node.run``, call start and end included); the figures are medians over the rounds.

Every tab has a window of its own, so every tab renders and clicks on all of them progress at
once; what limits the speed-up is the CPU (Chromium's renderers, the Playwright driver, NATS
and the node share it). Target on this 2-core machine: parallel >= 3.5x the single-tab batch.

    .venv/bin/python bench/parallel.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bridge.wiring import run_node

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests.site

from core.settings import NodeConfig
from driver import ChromiumBrowser
from messages.commands import parse_body
from tests.nodes import open_user_tab, run_call
from tests.site import TestSite

TABS = 8
CLICKS_PER_TAB = 30
CLICKS = TABS * CLICKS_PER_TAB
ROUNDS = 5
TARGET = 3.5


def clicks(tab: int, n: int) -> list[dict[str, Any]]:
    return [{"action": "click", "tabId": tab, "selector": f"#b{i % 10}"} for i in range(n)]


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="measured rounds of each call")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with TestSite() as site:
        node = run_node(ChromiumBrowser(), NodeConfig())
        try:
            tabs = [open_user_tab(node, site.url("/clicks")) for _ in range(TABS)]
            batch = parse_body("batch", {"commands": clicks(tabs[0], CLICKS)})
            parallel = parse_body("parallel", {"sequences": [clicks(tab, CLICKS_PER_TAB) for tab in tabs]})

            def timed(spec: Any) -> Callable[[], float]:
                def run() -> float:
                    started = time.perf_counter()
                    body = run_call(node, spec).body
                    elapsed = time.perf_counter() - started
                    assert body.get("status") == "ok", body.get("summary")
                    return CLICKS / elapsed
                return run

            calls = {"batch": timed(batch), "parallel": timed(parallel)}
            for run in calls.values():
                run()
            rates: dict[str, list[float]] = {name: [] for name in calls}
            for r in range(args.rounds):
                for name in (("batch", "parallel") if r % 2 == 0 else ("parallel", "batch")):
                    rates[name].append(calls[name]())
        finally:
            node.stop()
    load_after = os.getloadavg()
    print(f"{CLICKS} clicks: one batch on 1 tab vs one parallel call of {TABS} sequences x {CLICKS_PER_TAB} on "
          f"{TABS} tabs, {args.rounds} interleaved rounds each after a warm-up, {os.cpu_count()} CPUs")
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    for name, values in rates.items():
        print(f"  {name:8s} median {statistics.median(values):6.1f} clicks/s  "
              f"(rounds {' '.join(f'{v:.1f}' for v in values)})")
    ratio = statistics.median(rates["parallel"]) / statistics.median(rates["batch"])
    per_round = [p / b for p, b in zip(rates["parallel"], rates["batch"], strict=True)]
    print(f"speed-up parallel / batch: {ratio:.2f}x (rounds {min(per_round):.2f}..{max(per_round):.2f}; "
          f"target >= {TARGET}x: {'met' if ratio >= TARGET else 'NOT met'})")


if __name__ == "__main__":
    main()
