"""Benchmark: sessions at scale on one node, against raw Playwright measured in the same run.

A ``kitsune serve`` (embedded NATS, its own Chromium) is configured with ``--agents`` agents. Each
agent's first ``POST /api/tabs {"op": "open"}`` opens its ``default`` session (a browser context of
its own, whose connections go through a forward proxy of the agent's, with the node's hooks) and its
first tab, on about:blank, in a window of its own (CDP ``Target.createTarget`` with ``newWindow``).
Raw Playwright, in this process, on the same Debian Chromium launched with the node's flags (no
proxy), makes what a Playwright user makes for one isolated agent: ``browser.new_context()`` +
``context.new_page()`` (its page is on about:blank already).

Agents are added in steps (N = 1, 10, 25, 50, 100, 150, 200, ...): each new agent's session is
opened next to a raw context + page (which goes first alternates), so both browsers hold as many
contexts whenever they are timed. After a warm-up (one session and one context, opened, read and
closed again):
- (a) session + first tab: the wall time of each open; the ratio is the median of the paired
  ratios (Kitsune / raw of the same pair). Goal: Kitsune's cost per session within 1.2x raw's.
- (b) memory, at N=0 and N=50: the resident set (RSS, and PSS, which counts a shared page once)
  of every process of each side's Chromium tree (everything under its Playwright driver), of
  each driver, and of the node's process and its nats-server; per session is (N=50 - N=0) / 50.
- (c) at each N, a cheap step: ``--reads`` times a one-step ``POST /api/batch`` (``title``) on an
  agent's tab (the N agents in turn), each paired with raw ``page.title()`` on the raw page of the
  same index. The added cost is the median of the paired differences; the run stops at the N
  where it has doubled against N=1, at the cap, or when the machine's free memory runs low.

    .venv/bin/python bench/sessions.py [--agents 200] [--reads 100]

A persistent session's save and restore against Playwright's own: ``bench/sessions_persist.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import yaml
from playwright.async_api import Browser, BrowserContext, Page, async_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root

from driver import find_chromium
from driver.process import CHROMIUM_FLAGS

ROOT = Path(__file__).resolve().parents[1]
AGENTS = 200
STEPS = (1, 10, 25, 50, 100, 150, 200, 300, 400)
MEMORY_AT = 50
READS = 100
GOAL = 1.20
LOW_MEMORY_KB = 3 * 1024 * 1024


def token(agent: int) -> str:
    return f"bench-sessions-token-{agent:04d}-0123456789"


# -- processes and their memory (/proc) -------------------------------------------------------------

def children() -> dict[int, list[int]]:
    """Every process's children, by parent pid."""
    tree: dict[int, list[int]] = defaultdict(list)
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            tree[int(stat.rsplit(")", 1)[1].split()[1])].append(int(entry.name))
    return tree


def descendants(pid: int, tree: dict[int, list[int]]) -> list[int]:
    found, todo = [], list(tree.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(tree.get(child, []))
    return found


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def resident_kb(pids: list[int]) -> tuple[int, int]:
    """RSS and PSS of the processes, summed, in kB."""
    rss = pss = 0
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            key, _, rest = line.partition(":")
            if key in ("Rss", "Pss"):
                kb = int(rest.split()[0])
                rss, pss = (rss + kb, pss) if key == "Rss" else (rss, pss + kb)
    return rss, pss


def available_kb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1])
    return 0


def memory(serve_pid: int) -> dict[str, tuple[int, int, int]]:
    """(processes, RSS kB, PSS kB) of each part: each side's Chromium tree and driver, the node, its NATS."""
    tree = children()
    parts: dict[str, list[int]] = {"node (python)": [serve_pid]}
    for side, root in (("kitsune", serve_pid), ("raw", os.getpid())):
        drivers = [p for p in tree.get(root, []) if comm(p).startswith("node")]  # Playwright's node.js driver
        parts[f"{side} chromium"] = [p for d in drivers for p in descendants(d, tree)]
        parts[f"{side} playwright driver"] = drivers
    parts["node's nats-server"] = [p for p in tree.get(serve_pid, []) if comm(p) == "nats-server"]
    return {name: (len(pids), *resident_kb(pids)) for name, pids in parts.items()}


# -- the two sides ------------------------------------------------------------------------------------

class Serve:
    """A ``kitsune serve`` with ``agents`` agents (a0, a1, ...), sessions never swept during the run."""

    def __init__(self, directory: Path, agents: int) -> None:
        config = directory / "kitsune.yaml"
        config.write_text(yaml.safe_dump({
            "agents": [{"name": f"a{i}", "token": token(i)} for i in range(agents)],
            "caps": ["core", "automation"], "audit_file": str(directory / "audit.jsonl"),
            "sessions": {"max_idle": 86400, "sweep_interval": 3600}}))
        self._log = directory / "serve.log"
        self.process = subprocess.Popen(  # this checkout's code, also from a worktree of another commit
            [sys.executable, "-m", "kitsune.cli", "serve", "--port", "0", "--config", str(config),
             "--state-dir", str(directory / "state")], stdout=subprocess.PIPE, stderr=self._log.open("w"), text=True,
            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])})
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("kitsune serving "):
                self.base = line.split()[2]
                return
        raise SystemExit(f"kitsune serve did not start: {self._log.read_text()}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=60)


@dataclass
class Sides:
    http: httpx.AsyncClient
    browser: Browser
    tabs: list[int] = field(default_factory=list)
    """Each measured agent's tab (agent i + 1: a0 is the warm-up's)."""
    raw: list[tuple[BrowserContext, Page]] = field(default_factory=list)

    async def kitsune_open(self, agent: int) -> tuple[float, int]:
        started = time.perf_counter()
        answer = await self.http.post("/api/tabs", json={"op": "open"}, headers=auth(agent))
        took = time.perf_counter() - started
        body = answer.json()
        assert answer.status_code == 200 and isinstance(body.get("tabId"), int), body
        return took, body["tabId"]

    async def raw_open(self) -> tuple[float, BrowserContext, Page]:
        started = time.perf_counter()
        context = await self.browser.new_context()
        page = await context.new_page()
        return time.perf_counter() - started, context, page

    async def kitsune_title(self, agent: int, tab: int) -> float:
        started = time.perf_counter()
        answer = await self.http.post("/api/batch", json={"commands": [{"action": "title", "tabId": tab}]},
                                      headers=auth(agent))
        took = time.perf_counter() - started
        assert answer.status_code == 200 and answer.json().get("status") == "ok", answer.text
        return took

    async def listing(self, agent: int) -> float:
        """The median of a few ``GET /api/tabs`` (the fleet's tabs, each with its title), in ms."""
        took = []
        for _ in range(5):
            started = time.perf_counter()
            answer = await self.http.get("/api/tabs", headers=auth(agent))
            took.append(time.perf_counter() - started)
            assert answer.status_code == 200, answer.text
        return statistics.median(took) * 1000

    async def raw_title(self, page: Page) -> float:
        started = time.perf_counter()
        await page.title()
        return time.perf_counter() - started


def auth(agent: int) -> dict[str, str]:
    return {"Authorization": f"Bearer {token(agent)}"}


# -- the run --------------------------------------------------------------------------------------------

@dataclass
class Results:
    opens: list[tuple[int, float, float]] = field(default_factory=list)
    """(contexts already open on each side, Kitsune seconds, raw seconds) of each paired open."""
    steps: list[tuple[int, float, float, float, float]] = field(default_factory=list)
    """(N, Kitsune median ms, raw median ms, median paired added ms, ``GET /api/tabs`` median ms) at each N."""
    doubled_at: int | None = None
    memory: dict[int, dict[str, tuple[int, int, int]]] = field(default_factory=dict)
    stopped: str = ""


async def open_pair(sides: Sides, results: Results) -> None:
    """One more measured agent's session and tab, beside one more raw context and page."""
    n = len(sides.tabs)
    agent = n + 1
    if n % 2 == 0:
        k, tab = await sides.kitsune_open(agent)
        r, context, page = await sides.raw_open()
    else:
        r, context, page = await sides.raw_open()
        k, tab = await sides.kitsune_open(agent)
    sides.tabs.append(tab)
    sides.raw.append((context, page))
    results.opens.append((n, k, r))


async def reads(sides: Sides, count: int) -> tuple[float, float, float]:
    """Kitsune's and raw's median ``title`` (ms) over ``count`` pairs, and the median added cost."""
    mine, theirs = [], []
    n = len(sides.tabs)
    for i in range(count):
        j = i % n
        if i % 2 == 0:
            mine.append(await sides.kitsune_title(j + 1, sides.tabs[j]))
            theirs.append(await sides.raw_title(sides.raw[j][1]))
        else:
            theirs.append(await sides.raw_title(sides.raw[j][1]))
            mine.append(await sides.kitsune_title(j + 1, sides.tabs[j]))
    med = statistics.median
    return med(mine) * 1000, med(theirs) * 1000, med([a - b for a, b in zip(mine, theirs, strict=True)]) * 1000


async def warm_up(sides: Sides, serve: Serve, results: Results) -> None:
    """Open, read and close one session (agent a0) and one raw context, then take the memory at N=0."""
    _, tab = await sides.kitsune_open(0)
    _, context, page = await sides.raw_open()
    for _ in range(20):
        await sides.kitsune_title(0, tab)
        await sides.raw_title(page)
    closed = await sides.http.delete("/api/sessions/default", headers=auth(0))
    assert closed.status_code == 200, closed.text
    await context.close()
    results.memory[0] = memory(serve.process.pid)


async def grow(sides: Sides, serve: Serve, results: Results, cap: int, count: int) -> None:
    """Add agents step by step, reading at each step, until the added cost doubles or a limit stops it."""
    for n in (s for s in STEPS if s <= cap):
        while len(sides.tabs) < n:
            if available_kb() < LOW_MEMORY_KB:
                results.stopped = f"free memory below {LOW_MEMORY_KB // 1024} MB at {len(sides.tabs)} agents"
                return
            await open_pair(sides, results)
        if n == MEMORY_AT:
            results.memory[n] = memory(serve.process.pid)
        step = (n, *await reads(sides, count), await sides.listing(n))
        results.steps.append(step)
        print(f"  N={n}: title kitsune {step[1]:.2f} ms, raw {step[2]:.2f} ms, added {step[3]:+.2f} ms, "
              f"GET /api/tabs {step[4]:.2f} ms (load {os.getloadavg()[0]:.2f})", flush=True)
        if step[3] >= 2 * results.steps[0][3]:
            results.doubled_at = results.doubled_at or n
            if n >= MEMORY_AT:  # the memory of 50 agents is taken whatever the steps cost
                results.stopped = f"the added cost had doubled (first at {results.doubled_at} agents)"
                return
    results.stopped = f"the cap of {cap} agents was reached" + (
        f" (the added cost doubled first at {results.doubled_at} agents)" if results.doubled_at else
        " without the added cost doubling")


async def run(cap: int, count: int) -> Results:
    directory = Path(tempfile.mkdtemp(prefix="kitsune-bench-sessions-"))
    serve = Serve(directory, cap + 1)
    results = Results()
    try:
        async with async_playwright() as playwright, httpx.AsyncClient(base_url=serve.base, timeout=120) as http:
            browser = await playwright.chromium.launch(
                executable_path=str(find_chromium()), headless=True,
                args=[*CHROMIUM_FLAGS, *(["--no-sandbox"] if os.geteuid() == 0 else [])])
            sides = Sides(http, browser)
            await warm_up(sides, serve, results)
            await grow(sides, serve, results, cap, count)
            await browser.close()
    finally:
        serve.stop()
    return results


# -- the report -----------------------------------------------------------------------------------------

def report(results: Results, load_before: tuple[float, ...]) -> None:
    med = statistics.median
    print(f"sessions at scale: one node, {os.cpu_count()} CPUs; load average before {load_before[0]:.2f}, "
          f"after {os.getloadavg()[0]:.2f}")
    opens = results.opens
    ratios = [k / r for _, k, r in opens]
    ratio = med(ratios)
    print(f"(a) session + first tab, {len(opens)} paired opens (0..{len(opens) - 1} contexts already open):")
    print(f"    kitsune POST /api/tabs open: median {med([k for _, k, _ in opens]) * 1000:.1f} ms; raw new_context + "
          f"new_page: {med([r for _, _, r in opens]) * 1000:.1f} ms; median of paired ratios {ratio:.2f}x")
    for low, high in ((0, 49), (50, 99), (100, 199), (200, 399)):
        band = [(k, r) for n, k, r in opens if low <= n <= high]
        if band:
            print(f"    {low:3d}-{high:3d} open: kitsune {med([k for k, _ in band]) * 1000:6.1f} ms, raw "
                  f"{med([r for _, r in band]) * 1000:6.1f} ms, ratio {med([k / r for k, r in band]):.2f}x")
    print(f"    goal: Kitsune's cost per session within {GOAL}x raw Playwright's: "
          f"{'met' if ratio <= GOAL else 'NOT met'}")
    if MEMORY_AT in results.memory:
        report_memory(results.memory[0], results.memory[MEMORY_AT])
    print("(c) a title read, one-step POST /api/batch vs raw page.title(), with N idle agents each holding "
          "a session and a tab:")
    print("       N | kitsune ms | raw ms | added ms (median of paired) | GET /api/tabs ms")
    for n, k, r, added, listing in results.steps:
        print(f"    {n:4d} | {k:10.2f} | {r:6.2f} | {added:+8.2f}                    | {listing:8.2f}")
    print(f"    stopped: {results.stopped}")


def report_memory(before: dict[str, tuple[int, int, int]], after: dict[str, tuple[int, int, int]]) -> None:
    print(f"(b) memory with {MEMORY_AT} idle agents (a session and a tab each) / raw {MEMORY_AT} contexts + pages, "
          "MB (processes):")
    print("    part                     |  N=0 RSS    PSS | N=50 RSS    PSS | per session RSS  PSS")
    for name, (count, rss, pss) in after.items():
        _, rss0, pss0 = before[name]
        print(f"    {name:24s} | {rss0 / 1024:8.0f} {pss0 / 1024:6.0f} | {rss / 1024:8.0f} {pss / 1024:6.0f} "
              f"({count:3d}) | {(rss - rss0) / 1024 / MEMORY_AT:8.1f} {(pss - pss0) / 1024 / MEMORY_AT:5.1f}")

    def per_session(side: str, column: int) -> float:
        parts = [n for n in after if n.startswith(side) or (side == "kitsune" and n.startswith("node"))]
        return sum(after[n][column] - before[n][column] for n in parts) / MEMORY_AT

    for column, what in ((1, "RSS"), (2, "PSS")):
        k, r = per_session("kitsune", column), per_session("raw", column)
        print(f"    per session, every part of each side, {what}: kitsune {k / 1024:.1f} MB, raw {r / 1024:.1f} MB, "
              f"ratio {k / r:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--agents", type=int, default=AGENTS, help="the most agents to add")
    parser.add_argument("--reads", type=int, default=READS, help="paired title reads at each number of agents")
    args = parser.parse_args()
    load_before = os.getloadavg()
    report(asyncio.run(run(args.agents, args.reads)), load_before)


if __name__ == "__main__":
    main()
