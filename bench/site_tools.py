"""Benchmark: what site tools cost over raw Playwright doing the same work, on the test site's shop.

Three ways run the shop's tools (tests/site/shop.py), interleaved in one run:

- **raw**: raw Playwright in a plain browser context of a Chromium launched as Kitsune launches one
  (``Browser.new_context`` with the node's context options and its service-worker init script, but none of
  the site tools' own: no binding, no injected ``navigator.modelContext``). A stand-in
  ``navigator.modelContext`` (a page init script, :data:`STAND_IN`) records the tools a page registers and
  runs a ``resumeTool`` callback at once, with the input the call started with (kept in sessionStorage).
  ``search`` is one ``page.evaluate`` of the page's own ``execute(input, options)``, awaited; ``checkout``
  starts the billing page's ``execute``, waits for the confirmation page to commit and awaits its callback's
  result there. The pages make the very same requests and navigations on every side.
- **driver**: ``callSiteTool`` through ``ChromiumBrowser.execute`` on a tab of that same Chromium (a browser
  without a node, so no URL lists and no request hook): the input checked against the page's schema, the
  binding's round trips (invoke, took, settled; resume and begin across documents), the
  chain's bookkeeping. The difference from raw is the node's part of a site tool's call.
- **node**: the same command as a one-step batch of a whole node (``Node.run``: embedded NATS with
  JetStream, the call and tab actors, the step's events and audit entry, a Chromium of its own whose user
  tabs also pass the node's URL hook, ``context.route``), timed from the calling thread as the node's
  client sees it.

**Round trips**: the binding messages the Kitsune sides' documents send are counted by kind; those a page waits
on (``requestToken``, ``resume``, ``begin``; a ``resume`` told from an armed hand-off is counted apart, as no page
waits on it) are round trips in a row, reported per call (the invoke's
``evaluate`` and the last invocation's ``settled`` come on top, on raw's side too as its ``evaluate`` calls), and so
are all the messages the pages sent (each is a binding call Playwright answers in the page, whether it waits or not).

The raw and driver sides are timed on their loop (``time.perf_counter()`` around the awaited call).
Before each call (untimed) the tab is at the tool's page and, on Kitsune's sides, the node has heard the
page declare the tool (a call right after a load may wait for the declaration too); then each side makes one round
trip to its page (raw's looks for the tool there): on Kitsune's sides the node's answer to the page's
``registerTool`` is in by then, as it is when an agent's call comes, a model's turn after the page loaded. A search
must answer what the site's search answers and post nothing; each checkout starts from zeroed site counters and must
answer the order with exactly one POST on each of its three pages, checked again before the next reset
(nothing more came later).

**Page loads**: ``page.goto`` of the test site's plain /text page (no tool; a new query each time) on the
raw context's page, on the driver's tab (the site tools' binding and init script) and on the node's tab
(those and the node's URL hook): Playwright's own call on each, so the difference is what each tab carries.

**CPU**: each call's CPU time of the benchmark's process (every thread: the node or the driver, Playwright's client,
the test site and the proxy) and its context switches, which a loaded machine disturbs less than the wall clock.

Every side is warmed up once, then rounds are interleaved (raw driver node, node driver raw, ...).
The ratios are a Kitsune side's median (and p95) over raw's; "extra" is the difference in milliseconds.

    .venv/bin/python bench/site_tools.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import json
import os
import re
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, Protocol, TypeVar

from playwright.async_api import Page

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests and bench

from actors.loop import IoLoop
from bench.shared import load_line, p95, start_node
from bridge.node import Node
from driver import ChromiumBrowser
from driver.page_js import NO_SERVICE_WORKERS
from messages.commands import parse_body, parse_command
from messages.results import Done
from tests.nodes import open_user_tab, run_call
from tests.site import TestSite

ROUNDS = 5
WARMUP = 1
SEARCHES = 20
CHECKOUTS = 5
LOADS = 20
"""Calls (or loads) per round and side."""
TIMEOUT = 30.0
SEARCH = {"query": "dress"}
CHECKOUT = {"shipping_address": "1 Ship St", "billing_address": "2 Bill Rd"}
ORDER = {"order": "SHOP-0001", **CHECKOUT}
"""The checkout's answer: the site's counters and carts are zeroed before each one."""
CHECKOUT_POSTS = {"POST /shop/billing": 1, "POST /shop/shipping": 1, "POST /shop/confirmation": 1}
CONFIRMATION = re.compile(r"/shop/confirmation\?")
SIDES = ("raw", "driver", "node")
WAITED = ("requestToken", "resume", "begin")
"""The binding messages a page waits for the node's answer to."""
WORKS = ("search", "checkout", "load")
CONTEXT_OPTIONS: dict[str, Any] = {"permissions": ["clipboard-read", "clipboard-write"], "accept_downloads": True,
                                   "service_workers": "block"}
"""The options a Kitsune browser context is made with (driver/launch.py), for the raw one."""

STAND_IN = """(() => {
  const INPUT = "bench.input";
  const options = () => ({invocation: {requestToken: async () => "stand-in"}, signal: new AbortController().signal});
  let settle = null;
  const bench = {tools: {}, done: new Promise((resolve) => { settle = resolve; })};
  bench.run = (name, input) => {
    sessionStorage.setItem(INPUT, JSON.stringify(input));
    return bench.tools[name].execute(input, options());
  };
  Object.defineProperty(navigator, "modelContext", {value: {
    registerTool: (tool) => { bench.tools[tool.name] = tool; },
    resumeTool: async (token, callback) => {
      const input = JSON.parse(sessionStorage.getItem(INPUT));
      Promise.resolve().then(() => callback(input, options())).then(settle, (e) => settle({error: String(e)}));
    },
  }});
  window.__bench = bench;
})();"""
"""The raw side's navigator.modelContext: ``__bench.run(name, input)`` calls a registered tool's execute;
a ``resumeTool`` callback runs at once with that input, and ``__bench.done`` is its result."""

T = TypeVar("T")
Figures = dict[tuple[str, str], list[float]]
"""Milliseconds of each (work, side); under (work, side + " waits") the round trips a page waited on, per call, and
under (work, side + " sent") the binding messages its pages sent."""

_loads = itertools.count(1)


async def clocked(work: Awaitable[T]) -> tuple[float, T]:
    """Milliseconds ``work`` took on the loop that awaits it, and its value."""
    started = time.perf_counter()
    value = await work
    return (time.perf_counter() - started) * 1000, value


def load_time(io: IoLoop, page: Page, url: str) -> float:
    """Milliseconds ``page.goto(url)`` took on ``io``'s loop (the page must answer 200)."""
    ms, response = io.run(clocked(page.goto(url)), timeout=TIMEOUT)
    assert response is not None and response.status == 200, url
    return ms


class Side(Protocol):
    """One way of doing the work, driven from the benchmark's thread."""

    def go(self, path: str, tool: str | None) -> None:
        """Open ``path`` in the side's tab, ready for a call of ``tool`` (untimed)."""

    def call(self, tool: str, value: dict[str, Any]) -> tuple[float, Any]:
        """Milliseconds a call of ``tool`` took, and its output."""

    def load(self, path: str) -> float:
        """Milliseconds a page load of ``path`` took."""

    def waits(self) -> int:
        """Binding round trips the side's pages waited on so far."""

    def sent(self) -> int:
        """Binding messages the side's pages sent so far."""


def counting(browser: ChromiumBrowser) -> collections.Counter[str]:
    """The binding messages of ``browser``'s documents, by kind (counted from its start: call it before)."""
    counts: collections.Counter[str] = collections.Counter()
    tools = browser.site_tools
    message = tools._message

    async def counted(channel: Any, frame: str, context: int, sent: Any) -> Any:
        op = str(sent.get("op")) if isinstance(sent, dict) else "?"
        counts[op + " (hand-off)" if op == "resume" and "invocation" in sent else op] += 1
        return await message(channel, frame, context, sent)
    tools._message = counted  # type: ignore[method-assign]  # every message the channels hear goes through it
    return counts


class KitsuneTab:
    """A tab of a Kitsune browser, driven on that browser's loop."""

    def __init__(self, io: IoLoop, browser: ChromiumBrowser, tab: int, site: TestSite) -> None:
        self.io, self.browser, self.tab, self.site = io, browser, tab, site
        self.page = browser.page(tab)
        self.messages: collections.Counter[str] = collections.Counter()
        """The browser's binding messages (:func:`counting`), when counted."""

    def waits(self) -> int:
        return sum(self.messages[op] for op in WAITED)

    def sent(self) -> int:
        return sum(self.messages.values())

    async def _go(self, path: str, tool: str | None) -> None:
        await self.page.goto(self.site.url(path))
        deadline = time.perf_counter() + TIMEOUT
        while tool is not None and self.browser.site_tools.declaring(self.page, tool) is None:
            assert time.perf_counter() < deadline, f"{path}: the node never heard {tool} declared"
            await asyncio.sleep(0.002)
        if tool is not None:  # one round trip to the page, as raw's look at its tool: the node's answer to the page's
            await self.page.evaluate("1")  # registerTool is in (an agent's call comes a model's turn later)

    def go(self, path: str, tool: str | None) -> None:
        self.io.run(self._go(path, tool), timeout=2 * TIMEOUT)

    def load(self, path: str) -> float:
        return load_time(self.io, self.page, self.site.url(path))


class DriverSide(KitsuneTab):
    """``callSiteTool`` through ``ChromiumBrowser.execute`` (the driver alone)."""

    def call(self, tool: str, value: dict[str, Any]) -> tuple[float, Any]:
        command = parse_command({"action": "callSiteTool", "name": tool, "input": value})
        ms, outcome = self.io.run(clocked(self.browser.execute(command, self.tab, TIMEOUT)), timeout=2 * TIMEOUT)
        assert isinstance(outcome, Done), outcome
        return ms, outcome.value["output"]


class NodeSide(KitsuneTab):
    """``callSiteTool`` as a one-step batch of a whole node, on a tab of its own."""

    def __init__(self, node: Node, browser: ChromiumBrowser, site: TestSite) -> None:
        super().__init__(node.io, browser, open_user_tab(node, site.url("/shop")), site)
        self.node = node

    def call(self, tool: str, value: dict[str, Any]) -> tuple[float, Any]:
        spec = parse_body("batch", {"commands": [{"action": "callSiteTool", "name": tool, "input": value}],
                                    "tabId": self.tab})
        started = time.perf_counter()
        body = run_call(self.node, spec).body
        ms = (time.perf_counter() - started) * 1000
        assert body.get("status") == "ok", body.get("summary")
        return ms, body["results"][0]["output"]


class RawSide:
    """Raw Playwright: a plain context of ``browser``'s Chromium, a page with the stand-in for the tools and a
    page without it for the loads."""

    def __init__(self, io: IoLoop, browser: ChromiumBrowser, site: TestSite) -> None:
        self.io, self.site = io, site
        self.tools_page, self.loads_page = io.run(self._open(browser), timeout=60)

    @staticmethod
    async def _open(browser: ChromiumBrowser) -> tuple[Page, Page]:
        chromium = browser.page(await browser.new_tab()).context.browser
        assert chromium is not None
        context = await chromium.new_context(**CONTEXT_OPTIONS)
        await context.add_init_script(NO_SERVICE_WORKERS)
        tools_page = await context.new_page()
        await tools_page.add_init_script(STAND_IN)
        return tools_page, await context.new_page()

    async def _go(self, path: str, tool: str | None) -> None:
        await self.tools_page.goto(self.site.url(path))
        if tool is not None:
            assert await self.tools_page.evaluate("name => name in window.__bench.tools", tool), path

    def go(self, path: str, tool: str | None) -> None:
        self.io.run(self._go(path, tool), timeout=TIMEOUT)

    async def _search(self, value: dict[str, Any]) -> Any:
        return await self.tools_page.evaluate("input => window.__bench.run('search', input)", value)

    async def _checkout(self, value: dict[str, Any]) -> Any:
        page = self.tools_page
        await page.evaluate("input => { window.__bench.run('checkout', input); }", value)
        await page.wait_for_url(CONFIRMATION, wait_until="commit")
        return await page.evaluate("() => window.__bench.done")

    def call(self, tool: str, value: dict[str, Any]) -> tuple[float, Any]:
        work = self._search(value) if tool == "search" else self._checkout(value)
        return self.io.run(clocked(work), timeout=TIMEOUT)

    def load(self, path: str) -> float:
        return load_time(self.io, self.loads_page, self.site.url(path))

    def waits(self) -> int:
        return 0

    def sent(self) -> int:
        return 0


KINDS = ("", " waits", " sent", " cpu", " switches")
"""What each call counts, under (work, side + kind): its milliseconds, the binding round trips its pages waited on,
the binding messages they sent, the CPU milliseconds this process spent and its context switches (all its threads:
the node or the driver, Playwright's client, the test site and the browser's proxy; not Chromium, Playwright's driver
or nats-server)."""
Counts = tuple[list[float], ...]
"""Each call's figures, one list per kind of :data:`KINDS`."""


def _usage() -> tuple[float, float]:
    """This process's CPU milliseconds (every thread) and context switches so far."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return (used.ru_utime + used.ru_stime) * 1000, float(used.ru_nvcsw + used.ru_nivcsw)


def _call(side: Side, tool: str, value: dict[str, Any], counts: Counts) -> Any:
    """One call of ``tool``, its figures added to ``counts``; its output."""
    before = (side.waits(), side.sent(), *_usage())
    ms, output = side.call(tool, value)
    after = (side.waits(), side.sent(), *_usage())
    for figures, figure in zip(counts, (ms, *(a - b for a, b in zip(after, before, strict=True))), strict=True):
        figures.append(float(figure))
    return output


def searches(site: TestSite, side: Side, count: int) -> Counts:
    """``count`` searches: each answers what the site's search answers, and none posts anything."""
    status, body, _ = site.shop.get("/shop/api/search", {"q": [SEARCH["query"]]})
    assert status == 200
    expected, posted = json.loads(body), site.counts()
    side.go("/shop", "search")
    counts: Counts = tuple([] for _ in KINDS)
    for _ in range(count):
        output = _call(side, "search", SEARCH, counts)
        assert output == expected, output
    assert site.counts() == posted, "a search posted"
    return counts


def checkouts(site: TestSite, side: Side, count: int) -> Counts:
    """``count`` checkouts from zeroed counters: each answers the order with one POST per page."""
    counts: Counts = tuple([] for _ in KINDS)
    for _ in range(count):
        side.go("/shop/billing", "checkout")
        assert site.counts() in ({}, CHECKOUT_POSTS), f"more was posted after a checkout: {site.counts()}"
        site.reset()
        output = _call(side, "checkout", CHECKOUT, counts)
        assert output == ORDER, output
        assert site.counts() == CHECKOUT_POSTS, site.counts()
    return counts


def loads(side: Side, count: int) -> list[float]:
    """``count`` loads of the plain /text page, each with a query of its own."""
    side.go("/text", None)
    return [side.load(f"/text?load={next(_loads)}") for _ in range(count)]


def one_round(site: TestSite, sides: dict[str, Side], order: tuple[str, ...]) -> Figures:
    figures: Figures = {}
    for work, calls, count in (("search", searches, SEARCHES), ("checkout", checkouts, CHECKOUTS)):
        for name in order:
            for kind, counted in zip(KINDS, calls(site, sides[name], count), strict=True):
                figures[work, name + kind] = counted
    for name in order:
        figures["load", name] = loads(sides[name], LOADS)
    return figures


def run(site: TestSite, rounds: int) -> list[Figures]:
    """The sides started, warmed up, then ``rounds`` interleaved rounds; everything stopped."""
    io = IoLoop()
    browser = ChromiumBrowser()
    messages = counting(browser)
    io.run(browser.start(), timeout=60)
    with tempfile.TemporaryDirectory(prefix="kitsune-bench-") as audit:
        node_browser = ChromiumBrowser()
        node_messages = counting(node_browser)
        node = start_node(node_browser, Path(audit))
        try:
            driver = DriverSide(io, browser, io.run(browser.new_tab(site.url("/shop")), timeout=60), site)
            on_node = NodeSide(node, node_browser, site)
            driver.messages, on_node.messages = messages, node_messages
            sides: dict[str, Side] = {"raw": RawSide(io, browser, site), "driver": driver, "node": on_node}
            measured = []
            for r in range(-WARMUP, rounds):
                figures = one_round(site, sides, SIDES if r % 2 == 0 else tuple(reversed(SIDES)))
                if r >= 0:
                    measured.append(figures)
            return measured
        finally:
            node.stop()
            io.run(browser.stop(), timeout=60)
            io.close()


def report(rounds: list[Figures], load_before: tuple[float, ...], load_after: tuple[float, ...]) -> None:
    med = statistics.median

    def pooled(work: str, side: str) -> list[float]:
        return [ms for figures in rounds for ms in figures[work, side]]

    print(f"site tools on the test site's shop: {len(rounds)} interleaved rounds per side after {WARMUP} warm-up "
          f"({SEARCHES} searches, {CHECKOUTS} checkouts, {LOADS} page loads per round and side), "
          f"{os.cpu_count()} CPUs")
    print(load_line(load_before, load_after))
    print("  round | medians, ms (raw/driver/node): search | checkout            | /text load")
    for i, figures in enumerate(rounds, 1):
        cells = ["/".join(f"{med(figures[work, side]):.1f}" for side in SIDES) for work in WORKS]
        print(f"  {i:5d} | {cells[0]:>38s} | {cells[1]:19s} | {cells[2]}")
    print("  work      side       n |  median     p95 | x raw: median    p95 | extra ms: median     p95")
    for work in WORKS:
        raw = pooled(work, "raw")
        for side in SIDES:
            mine = pooled(work, side)
            line = f"  {work:9s} {side:6s} {len(mine):5d} | {med(mine):7.2f} {p95(mine):7.2f} |"
            if side != "raw":
                line += (f" {med(mine) / med(raw):13.3f} {p95(mine) / p95(raw):6.3f} |"
                         f" {med(mine) - med(raw):+16.2f} {p95(mine) - p95(raw):+7.2f}")
            print(line)
    for work in ("search", "checkout"):
        waits, sent = ("/".join(f"{med(pooled(work, side + kind)):g}" for side in SIDES)
                       for kind in (" waits", " sent"))
        print(f"  {work}: binding round trips a page waited on, per call (raw/driver/node): {waits}; "
              f"binding messages its pages sent: {sent}")
        cpu, switches = ("/".join(f"{med(pooled(work, side + kind)):.{digits}f}" for side in SIDES)
                         for kind, digits in ((" cpu", 2), (" switches", 0)))
        print(f"  {work}: this process's CPU ms per call (raw/driver/node, medians): {cpu}; its context switches: "
              f"{switches}")
    print("driver: callSiteTool through ChromiumBrowser.execute (no node); node: a one-step batch of a whole node; "
          "for loads, the driver's tab and the node's tab (its URL hook too)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="measured rounds of each side")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with TestSite() as site:
        rounds = run(site, args.rounds)
    report(rounds, load_before, os.getloadavg())


if __name__ == "__main__":
    main()
