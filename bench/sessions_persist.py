"""Benchmark: a persistent session's save and restore, against Playwright's own in the same run (issue 34).

One in-process node (embedded NATS, its own Chromium) with a persistence key, and raw Playwright in this
process on the same Chromium launched with the node's flags. Each side signs in at the test site
(``/session/start`` sets a session cookie; the page also writes local storage), then, ``--rounds``
times, in pairs whose order alternates:

- save: Kitsune's :meth:`driver.persistence.Persistence.save` (``storage_state(indexed_db=True)``,
  sealed with AES-GCM, put in the ``KITSUNE_SESSIONS`` bucket) against raw
  ``context.storage_state(indexed_db=True)``;
- restore: Kitsune's ``newTab``-side open of the freed session (the bucket's get, unsealed, the context made
  ahead for the agent, with the node's options, proxy and hooks, loaded with the state) against raw
  ``browser.new_context(storage_state=...)``; each side waits first for the other's background work (the
  node's next context made ahead) to be done.

Ratios are medians of the paired ratios; the goal is <= 1.3x. Also: a cold restore (an agent new to the node:
no context made ahead; its context made, and its proxy started, while the state is fetched, as on the node a
dead node's sessions move to), paired with a raw restore of the same state made just before or after it (the
order alternates); a fresh context either side (a Kitsune session's own
cost, with no state); and the bytes stored per session.

    .venv/bin/python bench/sessions_persist.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from playwright.async_api import async_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root

from bridge.wiring import run_node
from core.session_state import SavedState
from core.settings import NodeConfig, SessionTimes
from driver import ChromiumBrowser, find_chromium
from driver.process import CHROMIUM_FLAGS
from driver.sessions import Sessions
from tests.site import TestSite

GOAL = 1.3
ROUNDS = 30
AGENT = "bench"


async def _run(browser_node: ChromiumBrowser, site: TestSite, rounds: int) -> dict[str, list[float]]:
    sessions = browser_node.sessions
    figures: dict[str, list[float]] = {"k_save": [], "r_save": [], "k_restore": [], "r_restore": [], "k_cold": [],
                                       "r_cold": [], "k_fresh": [],
                                       "r_fresh": [], "bytes": []}
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(find_chromium()), headless=True,
            args=[*CHROMIUM_FLAGS, *(["--no-sandbox"] if os.geteuid() == 0 else [])])
        raw = await browser.new_context()
        await (await raw.new_page()).goto(site.url("/session/start"))
        session, _ = await sessions.open_for(AGENT, "shop", None, 30.0, True)
        await (await session.context.new_page()).goto(site.url("/session/start"))
        for round_ in range(rounds):
            async def kitsune_save() -> None:
                started = time.perf_counter()
                size = await sessions.persistence.save(session)
                figures["k_save"].append(time.perf_counter() - started)
                assert size is not None
                figures["bytes"].append(size)

            async def raw_save() -> None:
                started = time.perf_counter()
                await raw.storage_state(indexed_db=True)
                figures["r_save"].append(time.perf_counter() - started)
            for part in ((kitsune_save, raw_save) if round_ % 2 == 0 else (raw_save, kitsune_save)):
                await part()
            state = await raw.storage_state(indexed_db=True)
            await sessions.release(session, "idle")
            await browser_node.ahead_made(AGENT)

            async def kitsune_restore() -> None:
                nonlocal session
                started = time.perf_counter()
                session, said = await sessions.open_for(AGENT, "shop", None, 30.0, True)
                figures["k_restore"].append(time.perf_counter() - started)
                assert said["restored"] is True

            async def raw_restore(state: Any = state) -> None:
                nonlocal raw
                started = time.perf_counter()
                made = await browser.new_context(storage_state=state)
                figures["r_restore"].append(time.perf_counter() - started)
                await raw.close()
                raw = made
                await (await raw.new_page()).goto(site.url("/session"))
            for part in ((kitsune_restore, raw_restore) if round_ % 2 == 0 else (raw_restore, kitsune_restore)):
                await part()
            await (await session.context.new_page()).goto(site.url("/session"))
            await browser_node.ahead_made(AGENT)
            for kind in ("k_cold", "r_cold") if round_ % 2 == 0 else ("r_cold", "k_cold"):
                figures[kind].append(await (_cold_restore(sessions, f"cold-{round_}", dict(state)) if kind == "k_cold"
                                            else _raw_cold(browser, state)))
            await browser_node.ahead_made(AGENT)
            started = time.perf_counter()  # what a context costs either side, state or none
            fresh, _ = await sessions.open_for(AGENT, f"fresh-{round_}", None, 30.0, False)
            figures["k_fresh"].append(time.perf_counter() - started)
            await sessions.close(fresh, "closed")
            await browser_node.ahead_made(AGENT)
            started = time.perf_counter()
            bare = await browser.new_context()
            figures["r_fresh"].append(time.perf_counter() - started)
            await bare.close()
        await browser.close()
    return figures


async def _cold_restore(sessions: Sessions, agent: str, state: dict[str, Any]) -> float:
    """The restore of ``state`` stored for an agent new to the node (nothing made ahead): its seconds."""
    assert sessions.persistence.store is not None
    await sessions.persistence.store.save(agent, "shop", SavedState(state, (), time.time()))
    started = time.perf_counter()
    _, said = await sessions.open_for(agent, "shop", None, 30.0, True)
    took = time.perf_counter() - started
    assert said["restored"] is True
    await sessions.close_named(agent, "shop")
    return took


async def _raw_cold(browser: Any, state: Any) -> float:
    """Raw Playwright's restore of ``state`` beside a cold restore (the browser as busy): its seconds."""
    started = time.perf_counter()
    made = await browser.new_context(storage_state=state)
    took = time.perf_counter() - started
    await made.close()
    return took


def _paired(kitsune: list[float], raw: list[float]) -> tuple[float, float, float]:
    med = statistics.median
    return med(kitsune) * 1000, med(raw) * 1000, med([k / r for k, r in zip(kitsune, raw, strict=True)])


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="paired saves and restores")
    args = parser.parse_args()
    load_before = os.getloadavg()
    browser = ChromiumBrowser()
    node = run_node(browser, NodeConfig(sessions=SessionTimes(persist_key="bench-persist-key-0123456789",
                                                                        max_idle=86400, sweep_interval=3600)))
    try:
        with TestSite() as site:
            figures = node.io.run(_run(browser, site, args.rounds), timeout=600)
    finally:
        node.stop()
    print(f"persistent sessions: {args.rounds} paired rounds, {os.cpu_count()} CPUs; load average before "
          f"{load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}")
    for what, k, r in (("save", "k_save", "r_save"), ("restore", "k_restore", "r_restore")):
        kms, rms, ratio = _paired(figures[k], figures[r])
        print(f"    {what}: kitsune median {kms:.1f} ms, raw {rms:.1f} ms; median of paired ratios {ratio:.2f}x "
              f"(goal <= {GOAL}x: {'met' if ratio <= GOAL else 'NOT met'})")
    kms, rms, ratio = _paired(figures["k_cold"], figures["r_cold"])
    print(f"    cold restore (an agent new to the node, nothing made ahead): kitsune {kms:.1f} ms, raw {rms:.1f} ms; "
          f"{ratio:.2f}x")
    both = [a + b for a, b in zip(figures["k_save"], figures["k_restore"], strict=True)]
    raw_both = [a + b for a, b in zip(figures["r_save"], figures["r_restore"], strict=True)]
    kms, rms, ratio = _paired(both, raw_both)
    print(f"    save + restore: kitsune {kms:.1f} ms, raw {rms:.1f} ms; {ratio:.2f}x")
    kms, rms, ratio = _paired(figures["k_fresh"], figures["r_fresh"])
    print(f"    a fresh context, no state: kitsune session (made ahead) {kms:.1f} ms, raw new_context {rms:.1f} ms; "
          f"{ratio:.2f}x")
    added = statistics.median([r - f for r, f in zip(figures["k_restore"], figures["k_fresh"], strict=True)])
    print(f"    a restore over a fresh Kitsune session (the state's get, unsealing, loading): {added * 1000:+.1f} ms")
    print(f"    stored per session: {statistics.median(figures['bytes']):.0f} bytes (sealed)")


if __name__ == "__main__":
    main()
