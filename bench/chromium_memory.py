"""Benchmark: Chromium's memory per agent session, with the node's flags before and after issue 35's trim.

Each round launches the same Debian Chromium twice through Playwright, headless as the node runs
it: with the flags the node had before (``before``: Playwright's own ``--disable-features`` list)
and with ``CHROMIUM_FLAGS`` (``after``: that list and ``AGENT_DISABLED_FEATURES``, and no on-device
model benchmark); which goes first alternates. Each browser gets the node's user context, then,
measured idle (``--settle`` seconds after the launch), ``--sessions`` sessions as the node makes
them (a context with the node's options, and a page of the test site's /text in it), measured
again ``--settle`` seconds after the last one loaded. Memory is the PSS of every process of the
browser's tree (``/proc/PID/smaps_rollup``: a page shared by N processes counts 1/N in each), by
process type (``--type=``, a utility's ``--utility-sub-type=``, a renderer of the browser's own UI
``--top-chrome-webui``); per session is (with sessions - idle) / sessions. The figure is the ratio
of the medians over rounds, after / before, of one run.

Chromium starts the ``OnDeviceModelService`` utility (its on-device model performance benchmark)
about three minutes after its launch: ``--settle 200`` shows it (before) and its absence (after).

    .venv/bin/python bench/chromium_memory.py [--rounds 3] [--sessions 5] [--settle 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
from collections import Counter
from pathlib import Path

from playwright.async_api import Browser, Playwright, async_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root

from bench.sessions import children, comm, descendants, resident_kb
from driver import find_chromium
from driver.process import CHROMIUM_FLAGS
from tests.site import TestSite

TRIMMED = ("--disable-features=", "--optimization-guide-performance-class=")
FLAGS = {"before": [flag for flag in CHROMIUM_FLAGS if not flag.startswith(TRIMMED)], "after": list(CHROMIUM_FLAGS)}
"""The node's flags before the trim, and now."""

Tally = dict[str, tuple[int, int]]
"""(processes, PSS kB) by process type."""


def process_type(pid: int) -> str:
    """What a Chromium process is: browser, renderer (webui: the browser's own UI), gpu-process, zygote, or
    utility and its service."""
    try:
        words = Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ").split()
    except OSError:
        return "gone"
    flags = dict(word.partition("=")[::2] for word in words if word.startswith("--"))
    kind = flags.get("--type", "browser")
    if kind == "utility":
        return f"utility {flags.get('--utility-sub-type', '?').split('.')[0]}"
    return f"{kind} (webui)" if "--top-chrome-webui" in flags else kind


def tally() -> Tally:
    """The PSS of every Chromium process under this process's Playwright driver, by type."""
    tree = children()
    drivers = [pid for pid in tree.get(os.getpid(), []) if comm(pid).startswith("node")]
    counts: Counter[str] = Counter()
    kb: Counter[str] = Counter()
    for pid in (pid for driver in drivers for pid in descendants(driver, tree)):
        kind = process_type(pid)
        counts[kind] += 1
        kb[kind] += resident_kb([pid])[1]
    return {kind: (counts[kind], kb[kind]) for kind in counts}


def total(measured: Tally) -> int:
    return sum(kb for _, kb in measured.values())


async def launched(playwright: Playwright, flags: list[str]) -> Browser:
    return await playwright.chromium.launch(executable_path=str(find_chromium()), headless=True,
                                            args=[*flags, *(["--no-sandbox"] if os.geteuid() == 0 else [])])


async def measure(playwright: Playwright, flags: list[str], sessions: int, settle: float,
                  url: str) -> tuple[Tally, Tally]:
    """The browser's tally idle (its user context open) and with ``sessions`` sessions, each on ``url``."""
    browser = await launched(playwright, flags)
    try:
        await browser.new_context()  # the user context
        await asyncio.sleep(settle)
        idle = tally()
        for _ in range(sessions):
            context = await browser.new_context(permissions=["clipboard-read", "clipboard-write"],
                                                accept_downloads=True, service_workers="block")
            page = await context.new_page()
            await page.goto(url)
        await asyncio.sleep(settle)
        return idle, tally()
    finally:
        await browser.close()


def report(runs: dict[str, list[tuple[Tally, Tally]]], sessions: int) -> None:
    med = statistics.median
    per_session = {side: med((total(busy) - total(idle)) / sessions / 1024 for idle, busy in runs[side])
                   for side in runs}
    print(f"\nload average (1, 5, 15 min): {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"PSS in MB, medians of {len(runs['before'])} rounds, {sessions} sessions")
    print(f"{'':8} {'idle':>8} {'busy':>8} {'per session':>12}   processes with {sessions} sessions (PSS MB)")
    for side, measured in runs.items():
        idle = med(total(i) / 1024 for i, _ in measured)
        busy = med(total(b) / 1024 for _, b in measured)
        last = measured[-1][1]
        kinds = ", ".join(f"{kind} {n}x {kb / 1024:.0f}" for kind, (n, kb) in sorted(last.items()))
        print(f"{side:8} {idle:8.1f} {busy:8.1f} {per_session[side]:12.1f}   {kinds}")
    print(f"per session, after / before: {per_session['after'] / per_session['before']:.2f}")


async def run(rounds: int, sessions: int, settle: float, url: str) -> None:
    runs: dict[str, list[tuple[Tally, Tally]]] = {"before": [], "after": []}
    async with async_playwright() as playwright:
        for n in range(rounds):
            for side in (("before", "after") if n % 2 == 0 else ("after", "before")):
                runs[side].append(await measure(playwright, FLAGS[side], sessions, settle, url))
                idle, busy = runs[side][-1]
                print(f"round {n + 1} {side}: idle {total(idle) / 1024:.1f} MB, with {sessions} sessions "
                      f"{total(busy) / 1024:.1f} MB", flush=True)
    report(runs, sessions)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=5)
    parser.add_argument("--settle", type=float, default=3.0, help="seconds before each measure")
    args = parser.parse_args()
    with TestSite() as site:
        asyncio.run(run(args.rounds, args.sessions, args.settle, site.url("/text")))


if __name__ == "__main__":
    main()
