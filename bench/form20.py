"""Benchmark: a 20-field form task, every way, against raw Playwright in one interleaved run.

The task: open the form in a new tab, fill its 20 fields, submit it, read the thank-you text,
close the tab. The site (served here, on loopback) checks every submission server side: each
round must arrive exactly once with all 20 values, or the benchmark stops.

The ways, run in turn each round (the order alternates) so that the machine's noise hits them all:
- ``raw``: raw Playwright (async API) on Debian's Chromium, launched in this process: a new page,
  ``goto``, 20 ``fill``, a click on submit awaited with its navigation, ``inner_text``. The limit.
- ``raw+a``: the same on a page opened ahead, in the gap before it (untimed): what Kitsune's spare
  windows do for a ``newTab`` (``driver/spares.py``), done by hand.
- ``http``: one ``POST /api/batch`` to a ``kitsune serve`` (embedded NATS, its own Chromium).
- ``mcp``: one ``browser_batch`` tool call through ``kitsune mcp --bridge`` to the same node,
  over stdio with the ``mcp`` SDK's own client: what an MCP client does.
- ``mcp+p``: the same call from a client that asks for progress (a progressToken): a
  notification per finished step, which the gateway hears from the bridge as the call runs.
- ``raw+r``, ``http+r`` and ``mcp+r``, the ready tab: a client that reuses its tab has it open before
  the task, so raw Playwright has a page and the node a tab (``browser_tabs`` ``op: new``, shared by
  ``http+r`` and ``mcp+r``) opened before the first round and kept: the timed part navigates it to the
  form, fills, submits and reads, and closes nothing. Against ``raw+r``, ``http+r`` is what the node adds
  to the steps themselves, ``mcp+r`` that and the gateway.
- ``base+r``, with ``--baseline TREE``: ``mcp+r`` through a node and a gateway of another checkout of
  Kitsune (its code on ``PYTHONPATH``, the same interpreter and packages): the tree before a change,
  in the same run.

Each figure is the median wall time of the task; the ratio is the median of the paired ratios
(way / raw of the same round). Goals: ``mcp`` within 1.10x raw, ``mcp+r`` within 1.05x ``raw+r``.
Each way starts ``--gap`` seconds after the one before ended, so that it does not run beside the
previous way's tab still closing (a Chromium tearing a renderer down, the node writing the call's
end): without a gap the way run right after raw Playwright's pays for its close, and the ratios
depend on the order.

    .venv/bin/python bench/form20.py [--rounds N] [--gap SECONDS] [--ways raw+r,mcp+r] [--baseline TREE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
from mcp import ClientSession, StdioServerParameters, stdio_client
from playwright.async_api import Page, async_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root

from bench.shared import KITSUNE, ServedNode
from driver import find_chromium

FIELDS = 20
ROUNDS = 15
WARMUP = 2
GAP = 0.5
GOAL = 1.10
READY_GOAL = 1.05
WAYS = ("raw", "raw+a", "http", "mcp", "mcp+p", "raw+r", "http+r", "mcp+r", "base+r")
TOKEN = "bench-token-0123456789abcdef0123"


def value(round_: int, field: int) -> str:
    return f"r{round_}-value-{field}"


class FormSite:
    """The form and its thank-you page; counts the submissions that carry every expected value."""

    def __init__(self) -> None:
        self.received: list[dict[str, list[str]]] = []
        self.expected: dict[str, str] = {}
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _html(self, body: str) -> None:
                data = f"<!doctype html><html><head><title>Form</title></head><body>{body}</body></html>".encode()
                self.send_response(HTTPStatus.OK)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                inputs = "".join(f'<label>Field {i} <input id="f{i}" name="f{i}"></label>' for i in range(FIELDS))
                self._html(f'<form id="form" method="POST" action="/form">{inputs}'
                           '<button id="submit" type="submit">Send</button></form>')

            def do_POST(self) -> None:
                fields = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
                site.received.append(fields)
                self._html(f'<p id="thanks">Thank you: {len(fields)} fields received.</p>')

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/form"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def expect(self, round_: int) -> None:
        self.received.clear()
        self.expected = {f"f{i}": value(round_, i) for i in range(FIELDS)}

    def verify(self, way: str, text: str) -> None:
        got = [{k: v[0] for k, v in fields.items()} for fields in self.received]
        if got != [self.expected] or f"{FIELDS} fields received" not in text:
            raise SystemExit(f"{way}: the site received {got!r} (text {text!r}), not one full submission")

    def stop(self) -> None:
        self._server.shutdown()


def batch(url: str, round_: int, ready: int | None = None) -> dict[str, Any]:
    """The task as one call: in a new tab it closes, or on the ``ready`` tab (navigated to the form)."""
    tab: int | str = "${$0.tabId}" if ready is None else ready
    fills = [{"action": "fill", "tabId": tab, "selector": f"#f{i}", "value": value(round_, i)} for i in range(FIELDS)]
    first = {"action": "newTab", "url": url} if ready is None else {"action": "navigate", "tabId": tab, "url": url}
    last = [{"action": "closeTab", "tabId": tab}] if ready is None else []
    return {"commands": [first, *fills,
                         {"action": "submitForm", "tabId": tab, "selector": "#form"},
                         {"action": "pageText", "tabId": tab, "selector": "#thanks"}, *last]}


def thanks_of(results: list[dict[str, Any]]) -> str:
    text: str = next(r["text"] for r in reversed(results) if "text" in r)
    return text


def base_of(way: str) -> str:
    """The raw Playwright way a way is paired with: the ready page's for a ready tab's way."""
    return "raw+r" if way.endswith("+r") else "raw"


def gateway(node: ServedNode, tree: Path | None = None) -> StdioServerParameters:
    """``kitsune mcp --bridge`` to ``node`` (its code from ``tree`` when given)."""
    return StdioServerParameters(
        command=str(KITSUNE), args=["mcp", "--bridge", node.base, "--token-file", str(node.token_file)],
        env={**os.environ, "KITSUNE_CAPS": "core,automation", **({"PYTHONPATH": str(tree)} if tree else {})})


async def ready_tab_of(session: ClientSession) -> int:
    """A tab the agent opens (``browser_tabs`` ``op: new``) and keeps: the ready tab."""
    opened = await session.call_tool("browser_tabs", {"op": "new"})
    tab = (opened.structured_content or {}).get("tabId")
    assert isinstance(tab, int), opened
    return tab


async def mcp_call(session: ClientSession, body: dict[str, Any]) -> str:
    """One ``browser_batch`` that must end ok; its thank-you text."""
    result = await session.call_tool("browser_batch", body)
    answer = result.structured_content
    assert isinstance(answer, dict) and answer.get("status") == "ok", result
    return thanks_of(answer["results"])


async def baseline(stack: contextlib.AsyncExitStack, tree: Path, url: str) -> Callable[[int], Awaitable[str]]:
    """``base+r``: ``mcp+r`` through a node and a gateway that run the code of ``tree``."""
    node = ServedNode(Path(tempfile.mkdtemp(prefix="kitsune-bench-form-base-")), TOKEN, tree=tree)
    stack.callback(node.stop)
    read, write = await stack.enter_async_context(stdio_client(gateway(node, tree)))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    tab = await ready_tab_of(session)

    async def way(round_: int) -> str:
        return await mcp_call(session, batch(url, round_, tab))
    return way


async def timed(site: FormSite, ways: dict[str, Callable[[int], Awaitable[str]]],
                before: dict[str, Callable[[], Awaitable[None]]], rounds: int, gap: float) -> dict[str, list[float]]:
    """Each way's times, rounds interleaved (the order alternates); ``before``: what a way does before its gap,
    untimed."""
    times: dict[str, list[float]] = {way: [] for way in ways}
    for r in range(WARMUP + rounds):
        order = list(ways) if r % 2 == 0 else list(reversed(ways))
        for way in order:
            if way in before:
                await before[way]()
            await asyncio.sleep(gap)
            site.expect(r)
            started = time.perf_counter()
            text = await ways[way](r)
            took = time.perf_counter() - started
            site.verify(way, text)
            if r >= WARMUP:
                times[way].append(took)
    return times


async def run(rounds: int, gap: float, chosen: list[str], tree: Path | None = None) -> dict[str, list[float]]:
    site = FormSite()
    directory = Path(tempfile.mkdtemp(prefix="kitsune-bench-form-"))
    node = ServedNode(directory, TOKEN)
    try:
        async with async_playwright() as playwright, \
                httpx.AsyncClient(base_url=node.base, headers={"Authorization": f"Bearer {TOKEN}"},
                                  timeout=120) as http, \
                stdio_client(gateway(node)) as (read, write), ClientSession(read, write) as session, \
                contextlib.AsyncExitStack() as stack:
            await session.initialize()
            browser = await playwright.chromium.launch(
                executable_path=str(find_chromium()), headless=True,
                args=["--no-sandbox"] if os.geteuid() == 0 else [])
            context = await browser.new_context()

            opened_ahead: list[Page] = []

            async def raw(round_: int, page: Page | None = None, *, close: bool = True) -> str:
                page = page or await context.new_page()
                await page.goto(site.url)
                for i in range(FIELDS):
                    await page.fill(f"#f{i}", value(round_, i))
                async with page.expect_navigation():
                    await page.click("#submit")
                text = await page.inner_text("#thanks")
                if close:
                    await page.close()
                return text

            ready_page = await context.new_page()
            ready_tab = await ready_tab_of(session)

            async def raw_ready(round_: int) -> str:
                return await raw(round_, ready_page, close=False)

            async def raw_ahead(round_: int) -> str:
                return await raw(round_, opened_ahead.pop())

            async def open_ahead() -> None:
                opened_ahead.append(await context.new_page())

            async def over_http(round_: int, ready: int | None = None) -> str:
                answer = (await http.post("/api/batch", json=batch(site.url, round_, ready))).json()
                assert answer.get("status") == "ok", answer
                return thanks_of(answer["results"])

            async def over_mcp(round_: int, *, progress: bool = False) -> str:
                told: list[float] = []

                async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                    told.append(progress)

                result = await session.call_tool("browser_batch", batch(site.url, round_),
                                                 progress_callback=on_progress if progress else None)
                answer = result.structured_content
                assert isinstance(answer, dict) and answer.get("status") == "ok", result
                assert len(told) >= len(answer["results"]) if progress else not told, told  # a step each (and ticks)
                return thanks_of(answer["results"])

            async def over_mcp_with_progress(round_: int) -> str:
                return await over_mcp(round_, progress=True)

            async def over_mcp_ready(round_: int) -> str:
                return await mcp_call(session, batch(site.url, round_, ready_tab))

            async def over_http_ready(round_: int) -> str:
                return await over_http(round_, ready_tab)

            every: dict[str, Callable[[int], Awaitable[str]]] = {
                "raw": raw, "raw+a": raw_ahead, "http": over_http, "mcp": over_mcp, "mcp+p": over_mcp_with_progress,
                "raw+r": raw_ready, "http+r": over_http_ready, "mcp+r": over_mcp_ready}
            if tree is not None:
                every["base+r"] = await baseline(stack, tree, site.url)
            ways = {way: every[way] for way in chosen}
            times = await timed(site, ways, {"raw+a": open_ahead}, rounds, gap)
            await browser.close()
            return times
    finally:
        node.stop()
        site.stop()


def report(times: dict[str, list[float]], load_before: tuple[float, ...]) -> None:
    load_after = os.getloadavg()
    med = statistics.median

    def paired(way: str) -> list[float]:
        return [t / r for t, r in zip(times[way], times[base_of(way)], strict=True)]

    print(f"20-field form task: {len(next(iter(times.values())))} interleaved rounds after {WARMUP} warm-up, "
          f"{os.cpu_count()} CPUs; load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    print("  way    | median s | x raw (median of paired ratios; a ready tab's way against raw+r)")
    for way, series in times.items():
        print(f"  {way:6s} | {med(series):8.3f} | {med(paired(way)):.3f}")
    if "mcp" in times:
        ratio = med(paired("mcp"))
        print(f"browser_batch through kitsune mcp: {ratio:.3f}x raw Playwright "
              f"(goal <= {GOAL}: {'met' if ratio <= GOAL else 'NOT met'})")
    if "base+r" in times and "mcp+r" in times:
        print(f"mcp+r / base+r (this tree against --baseline): "
              f"{med([t / b for t, b in zip(times['mcp+r'], times['base+r'], strict=True)]):.3f}")
    if "mcp+r" in times:
        ready = med(paired("mcp+r"))
        extra = med([(t - r) / FIELDS * 1000 for t, r in zip(times["mcp+r"], times["raw+r"], strict=True)])
        print(f"on a ready tab: {ready:.3f}x raw Playwright on its ready page, {extra:+.2f} ms a field (the whole "
              f"difference over {FIELDS} fills; goal <= {READY_GOAL}: {'met' if ready <= READY_GOAL else 'NOT met'})")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="measured rounds of each way")
    parser.add_argument("--gap", type=float, default=GAP, help="seconds between two ways (0: back to back)")
    parser.add_argument("--ways", help=f"the ways to run, comma-separated (default all: {','.join(WAYS)}; "
                                       "base+r with --baseline only); each with the raw way it is paired with")
    parser.add_argument("--baseline", type=Path, help="another checkout of Kitsune, measured beside this one (base+r)")
    args = parser.parse_args()
    known = WAYS if args.baseline else WAYS[:-1]
    wanted = [w.strip() for w in (args.ways or ",".join(known)).split(",") if w.strip()]
    if unknown := [w for w in wanted if w not in known]:
        parser.error(f"--ways: no way named {unknown[0]!r} (there are {', '.join(known)})")
    chosen = [w for w in known if w in wanted or any(base_of(o) == w for o in wanted)]
    load_before = os.getloadavg()
    report(asyncio.run(run(args.rounds, args.gap, chosen, args.baseline)), load_before)


if __name__ == "__main__":
    main()
