"""Benchmark: what the fleet adds to a call, two Kitsune nodes on one NATS server, measured in one run.

Its calls run as ``POST /api/batch`` runs them (``Node.run_async``): a call whose tabs are all on one other node is
sent there whole (``bench/fleet_processes.py`` measures that); part 1's calls read a tab of the node asked first,
so that they run there and each step on the other node's tab is a NATS request and reply of its own, the path of a
call on tabs of several nodes.

Node A starts an embedded nats-server with JetStream; node B joins it, in the same fleet (as
``bench/overhead.py`` does). Each has its own Chromium and writes its audit log to a file, as
``kitsune serve`` does. A holds 4 tabs of the test site's /clicks page, B holds 2.

1. **A remote step.** The same 40-step batch (a click on #b0..#b9, then ``title``, in turn) runs on
   one tab of B, through B (local: the tab's actor is reached through its mailbox) and through A
   (remote: every step is a NATS request to B and its reply). A step's duration is the interval
   from the step before's outcome event to its own, timed in the calling node's event
   listener (``bench/shared.py``); the added cost is the median of the differences remote - local
   of the same step (same index) in the two calls of a round. Target: <= 0.5 ms per step. A click
   waits for the renderer's frames, so a step's start relative to the frame clock shifts its
   length (see overhead.py): the same difference of the steps less B's driver time (a subclass
   timing ``ChromiumBrowser.execute``), the infrastructure, is printed too, free of that phase.
2. **Calls per second.** 4 client threads each make 20 short batches (a click, a ``title``), one
   after the other, each thread on a tab of its own: with one node (A's 4 tabs, every call through
   A; B is up, idle), then with two (2 tabs on A and 2 on B; 2 threads enter through A and 2
   through B, so half of the calls run on the other node's tab, as behind a load balancer). The
   rate is 80 calls over the wall time; both rates and their ratio are printed as they are: the
   two nodes, their Chromiums and nats-server share the machine's CPUs.
3. **Claims.** A parallel of one sequence claims the tabs it writes, through the tab's node, which
   records each claim and release in the fleet's KV registry (``bridge/fleet/member.py``); a batch
   takes no claim. A parallel of 1 click and of 50 clicks runs next to a batch of the same clicks,
   on a tab of A and on a tab of B, every call through A (the 1-click calls 10 times a round).
   The claim cost is the median of the paired differences parallel - batch of the wall time per
   call (``node.run``), and of the same less the tab's driver time (50 clicks' frame phases add
   up to more noise than a claim costs); the registry's tab writes (``FleetRegistry.put_tab``, each a KV
   compare-and-set round trip, counted on both nodes) are counted per call. Target: claims cost
   KV round trips per call (claim and release), never per step: the same for 1 and 50 clicks.

Every variant is warmed up once, then the rounds interleave them (local remote, remote local, ...;
one two, two one, ...; the claim variants in reverse order every other round) so that noise from
other work on the machine hits them all.

    .venv/bin/python bench/fleet.py [--rounds N]     (--rounds 1 for a smoke run)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Coroutine
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests.site and bench

from actors.fleet_registry import TabEntry
from bench.shared import Plan, StepClock, TimedBrowser, alternating, commands, kind, load_line, start_node
from bridge.node import Node
from messages.commands import parse_body
from tests.nodes import open_user_tab, run_call
from tests.site import TestSite

STEPS = 40
PLAN = alternating(STEPS, [("title", None)])
ROUNDS = 5
WARMUP = 1
CLIENTS = 4
CALLS_PER_CLIENT = 20
CLAIM_STEPS = (1, 50)
ONE_STEP_CALLS = 10
"""1-click calls of each claim variant per round (a 50-click call runs once)."""
REMOTE_TARGET_MS = 0.5

Container = Literal["batch", "parallel"]
Key = tuple[str, int, Container]
"""A claim variant: (where the tab is: "local" or "remote", clicks, the call's kind)."""
Steps = dict[str, list[float]]
"""Part 1's call: each step's milliseconds ("step"), and that minus the driver's time ("infra")."""


def clicks(n: int, tab: int) -> list[dict[str, Any]]:
    return [{"action": "click", "selector": f"#b{i % 10}", "tabId": tab} for i in range(n)]


def ok(node: Node, container: Container, body: dict[str, Any]) -> None:
    """Run a call through ``node``; it must succeed."""
    answer = run_call(node, parse_body(container, body)).body
    assert answer.get("status") == "ok", answer.get("summary")


class RegistryWrites:
    """The tab entries the nodes write to the fleet's KV registry, counted (each is a round trip)."""

    def __init__(self, *nodes: Node) -> None:
        self._lock = threading.Lock()
        self._count = 0
        for node in nodes:
            registry = node.member.registry
            assert registry is not None
            registry.put_tab = self._counting(registry.put_tab)  # type: ignore[method-assign,assignment]

    def _counting(self, put: Callable[[TabEntry], Coroutine[Any, Any, None]]
                  ) -> Callable[[TabEntry], Coroutine[Any, Any, None]]:
        async def put_tab(entry: TabEntry) -> None:
            with self._lock:
                self._count += 1
            await put(entry)
        return put_tab

    @property
    def count(self) -> int:
        with self._lock:
            return self._count


class Fleet:
    """Nodes A and B with their tabs, and the benchmark's calls on them."""

    def __init__(self, a: Node, b: Node, drivers: tuple[TimedBrowser, TimedBrowser], site: TestSite) -> None:
        self.a, self.b = a, b
        self.a_driver, self.b_driver = drivers
        """Each node's driver: it runs the steps on its node's tabs, whichever node's call sends them."""
        self.clocks = {id(self.a): StepClock(self.a), id(self.b): StepClock(self.b)}
        self.tabs_a = [open_user_tab(self.a, site.url("/clicks")) for _ in range(CLIENTS)]
        self.tabs_b = [open_user_tab(self.b, site.url("/clicks")) for _ in range(CLIENTS // 2)]
        self._seen_by_both()
        self.writes = RegistryWrites(self.a, self.b)

    def _seen_by_both(self) -> None:
        """Wait until each node's registry mirror holds every tab (a claim looks its tab's node up there)."""
        every = set(self.tabs_a + self.tabs_b)
        deadline = time.monotonic() + 15
        for node in (self.a, self.b):
            assert node.member.registry is not None
            while not every <= node.member.registry.tabs.keys():
                assert time.monotonic() < deadline, "the registry never showed every tab"
                time.sleep(0.05)

    def steps(self, through: Node) -> Steps:
        """Part 1: the batch on B's first tab through ``through``, after a read of a tab of ``through`` (a call on
        tabs of two nodes runs where it came in; one whose tabs are all on another node is sent there whole)."""
        clock = self.clocks[id(through)]
        clock.clear()
        self.b_driver.timings.clear()
        anchored: Plan = [("title", None), *PLAN]
        sent = commands(anchored)
        sent[0]["tabId"] = self.tabs_a[0] if through is self.a else self.tabs_b[1]
        ok(through, "batch", {"commands": sent, "tabId": self.tabs_b[0]})
        steps = clock.durations(anchored)[1:]  # the plan's steps, from its second
        timings = self.b_driver.timings[-(STEPS - 1):]  # B's driver ran the plan's steps (and B's first read)
        return {"step": steps, "infra": [s - d for s, d in zip(steps, timings, strict=True)]}

    def rate(self, nodes: int) -> float:
        """Part 2: calls per second of the client threads, with one node or two."""
        if nodes == 1:
            lanes = [(self.a, tab) for tab in self.tabs_a]
        else:
            tabs = [self.tabs_a[0], self.tabs_b[0], self.tabs_a[1], self.tabs_b[1]]
            lanes = list(zip([self.a, self.a, self.b, self.b], tabs, strict=True))
        start = threading.Barrier(len(lanes) + 1)
        failures: list[BaseException] = []

        def client(node: Node, tab: int) -> None:
            start.wait()
            try:
                for i in range(CALLS_PER_CLIENT):
                    ok(node, "batch", {"commands": [{"action": "click", "selector": f"#b{i % 10}"},
                                                    {"action": "title"}], "tabId": tab})
            except BaseException as e:
                failures.append(e)

        threads = [threading.Thread(target=client, args=lane) for lane in lanes]
        for thread in threads:
            thread.start()
        start.wait()
        started = time.perf_counter()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        assert not failures, failures[0]
        return len(lanes) * CALLS_PER_CLIENT / elapsed

    def claim_call(self, key: Key) -> tuple[float, float, int]:
        """Part 3: one call of a claim variant through A; its milliseconds, those outside the tab's driver
        (free of the clicks' frame phase), and the registry's tab writes."""
        where, n, container = key
        tab, driver = (self.tabs_a[0], self.a_driver) if where == "local" else (self.tabs_b[0], self.b_driver)
        body = {"commands": clicks(n, tab)} if container == "batch" else {"sequences": [clicks(n, tab)]}
        writes = self.writes.count
        driver.timings.clear()
        started = time.perf_counter()
        ok(self.a, container, body)
        wall = (time.perf_counter() - started) * 1000
        assert len(driver.timings) == n
        return wall, wall - sum(driver.timings), self.writes.count - writes


class Results:
    """Every round's figures."""

    def __init__(self) -> None:
        self.steps: dict[str, list[Steps]] = {"local": [], "remote": []}
        self.rates: dict[int, list[float]] = {1: [], 2: []}
        self.calls: dict[Key, list[float]] = defaultdict(list)
        self.beyond_driver: dict[Key, list[float]] = defaultdict(list)
        self.writes: dict[Key, set[int]] = defaultdict(set)


def one_round(fleet: Fleet, results: Results, r: int) -> None:
    """Every variant once (the 1-click claim variants ``ONE_STEP_CALLS`` times), in this round's order."""
    flip: Callable[[list[Any]], list[Any]] = (lambda xs: xs) if r % 2 == 0 else (lambda xs: xs[::-1])
    for where in flip(["local", "remote"]):
        results.steps[where].append(fleet.steps(fleet.b if where == "local" else fleet.a))
    for nodes in flip([1, 2]):
        results.rates[nodes].append(fleet.rate(nodes))
    for where in flip(["local", "remote"]):
        for n in flip(list(CLAIM_STEPS)):
            for _ in range(ONE_STEP_CALLS if n == 1 else 1):
                for container in flip(["batch", "parallel"]):
                    key: Key = (where, n, container)
                    wall, beyond_driver, writes = fleet.claim_call(key)
                    results.calls[key].append(wall)
                    results.beyond_driver[key].append(beyond_driver)
                    results.writes[key].add(writes)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="measured rounds (1 for a smoke run)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    results = Results()
    with TestSite() as site, tempfile.TemporaryDirectory(prefix="kitsune-bench-") as audit_dir, ExitStack() as nodes:
        drivers = TimedBrowser(), TimedBrowser()
        a = start_node(drivers[0], Path(audit_dir))
        nodes.callback(a.stop)
        b = start_node(drivers[1], Path(audit_dir), joining=a)
        nodes.callback(b.stop)
        fleet = Fleet(a, b, drivers, site)
        for r in range(WARMUP):
            one_round(fleet, Results(), r)
        for r in range(args.rounds):
            one_round(fleet, results, r)
    print(f"fleet: nodes A and B on one nats-server, {args.rounds} interleaved rounds after {WARMUP} warm-up, "
          f"{os.cpu_count()} CPUs")
    print(load_line(load_before, os.getloadavg()))
    report_steps(results)
    report_rates(results)
    report_claims(results)


def report_steps(results: Results) -> None:
    med = statistics.median
    kinds = [kind(action) for action, _ in PLAN[1:]]

    def pooled(where: str, series: str, k: str) -> list[float]:
        return [d for steps in results.steps[where] for d, dk in zip(steps[series], kinds, strict=True) if dk == k]

    def added(series: str, k: str | None = None) -> float:
        return med([r - lo for local, remote in zip(results.steps["local"], results.steps["remote"], strict=True)
                    for lo, r, dk in zip(local[series], remote[series], kinds, strict=True) if k is None or dk == k])

    print(f"1. a step on B's tab through B (local) and through A (remote), {STEPS}-step batch "
          "(clicks alternating with title), medians (ms):")
    print("        step: local  remote  remote - local | infrastructure: local  remote  remote - local")
    for k in ("click", "read"):
        print(f"  {k:5s} {med(pooled('local', 'step', k)):11.2f} {med(pooled('remote', 'step', k)):7.2f} "
              f"{added('step', k):+15.2f} | {med(pooled('local', 'infra', k)):21.2f} "
              f"{med(pooled('remote', 'infra', k)):7.2f} {added('infra', k):+15.2f}")
    step_added, infra_added = added("step"), added("infra")
    print(f"  added cost of a remote step: {step_added:+.2f} ms (target <= {REMOTE_TARGET_MS} ms: "
          f"{'met' if step_added <= REMOTE_TARGET_MS else 'NOT met'}); infrastructure alone (the step less "
          f"B's driver time, free of the clicks' frame phase) {infra_added:+.2f} ms "
          f"({'met' if infra_added <= REMOTE_TARGET_MS else 'NOT met'})")


def report_rates(results: Results) -> None:
    one, two = (statistics.median(results.rates[n]) for n in (1, 2))
    print(f"2. calls per second, {CLIENTS} client threads x {CALLS_PER_CLIENT} batches (click + title), "
          f"{CLIENTS} tabs:")
    for n, rate in ((1, one), (2, two)):
        print(f"  {n} node{'s' if n > 1 else ' '} median {rate:6.1f} calls/s  "
              f"(rounds {' '.join(f'{v:.1f}' for v in results.rates[n])})")
    print(f"  two nodes / one node: {two / one:.2f}x (as it is: {os.cpu_count()} CPUs for both nodes, "
          "their Chromiums and nats-server)")


def report_claims(results: Results) -> None:
    med = statistics.median

    def cost(series: dict[Key, list[float]], where: str, n: int) -> float:
        """The median of the paired differences parallel - batch."""
        return med([p - b for p, b in zip(series[(where, n, "parallel")], series[(where, n, "batch")], strict=True)])

    print("3. claims: a parallel of 1 sequence against a batch of the same clicks, every call through A, "
          "ms per call (medians):")
    print("  tab       clicks |  batch  parallel  claim cost | outside the driver: claim cost | KV registry writes")
    writes: dict[str, list[set[int]]] = defaultdict(list)
    first, last = CLAIM_STEPS[0], CLAIM_STEPS[-1]
    for where in ("local", "remote"):
        for n in CLAIM_STEPS:
            writes[where].append(results.writes[(where, n, "parallel")])
            print(f"  {where + (' (A)' if where == 'local' else ' (B)'):10s} {n:5d} | "
                  f"{med(results.calls[(where, n, 'batch')]):6.1f} {med(results.calls[(where, n, 'parallel')]):9.1f} "
                  f"{cost(results.calls, where, n):+11.1f} | {cost(results.beyond_driver, where, n):+30.1f} | "
                  f"batch {spread(results.writes[(where, n, 'batch')])}, parallel {spread(writes[where][-1])}")
        per_click = [(cost(series, where, last) - cost(series, where, first)) / (last - first)
                     for series in (results.calls, results.beyond_driver)]
        print(f"  {where}: claim cost per added click ({last} vs {first}): {per_click[0]:+.2f} ms "
              f"(outside the driver {per_click[1]:+.2f} ms)")
    same = all(len({frozenset(w) for w in sets}) == 1 for sets in writes.values())
    print(f"  claims cost KV round trips per call, not per step (the same registry writes for "
          f"{first} and {last} clicks): {'met' if same else 'NOT met'}")


def spread(values: set[int]) -> str:
    return "/".join(str(v) for v in sorted(values))


if __name__ == "__main__":
    main()
