"""Benchmark: how soon a container call's progress notification reaches the MCP client after its step
ends, over streamable HTTP (``/mcp`` of ``kitsune serve``) and over stdio (``kitsune mcp --bridge``).

One ``kitsune serve`` (embedded NATS, its own Chromium) holds a tab of the test site. Each round sends
one ``browser_batch`` of ``--steps`` steps with a progressToken, over each transport in turn (the order
alternates, so that the machine's noise hits both), with the ``mcp`` SDK's own client. Each step is a
``js`` that waits 100 ms and answers ``Date.now()``: when it ended in the page, on the wall clock this
process reads too (``time.time()``). A step's latency is its notification's arrival at the client less
that time, so it counts the page's answer to the node (the CDP hop, about a millisecond) on top of the
step's event to the client. Figures: the median, 95th percentile and most over every step of every
round. Goal (issue 30): a median within 50 ms over both.

    .venv/bin/python bench/progress.py [--rounds N] [--steps N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx
import httpx2
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests and bench

from bench.shared import KITSUNE, ServedNode, load_line, p95
from tests.site import TestSite

TOKEN = "bench-progress-token-0123456789abcdef"
STEP = "await new Promise(r => setTimeout(r, 100)); return Date.now()"
GOAL_MS = 50.0


@asynccontextmanager
async def over_http(node: ServedNode) -> AsyncIterator[ClientSession]:
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120) as http, \
            streamable_http_client(node.base + "/mcp", http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def over_stdio(node: ServedNode) -> AsyncIterator[ClientSession]:
    parameters = StdioServerParameters(
        command=str(KITSUNE), args=["mcp", "--bridge", node.base, "--token-file", str(node.token_file)],
        env={**os.environ, "KITSUNE_CAPS": "core,automation"})
    with open(os.devnull, "w") as quiet:
        async with stdio_client(parameters, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def latencies(session: ClientSession, tab: int, steps: int) -> list[float]:
    """Milliseconds from each step's end in the page to its notification at this client, for one call."""
    arrived: dict[int, float] = {}

    async def heard(progress: float, total: float | None, message: str | None) -> None:
        if progress == int(progress):
            arrived[int(progress)] = time.time()

    commands = [{"action": "js", "code": STEP} for _ in range(steps)]
    result = await session.call_tool("browser_batch", {"tabId": tab, "commands": commands}, progress_callback=heard)
    body = result.structured_content
    assert isinstance(body, dict) and body.get("status") == "ok", body
    assert sorted(arrived) == list(range(1, steps + 1)), arrived
    return [(arrived[n + 1] - r["value"] / 1000) * 1000 for n, r in enumerate(body["results"])]


async def run(rounds: int, steps: int) -> dict[str, list[float]]:
    directory = Path(tempfile.mkdtemp(prefix="kitsune-bench-progress-"))
    node = ServedNode(directory, TOKEN)
    found: dict[str, list[float]] = {"http": [], "stdio": []}
    try:
        with TestSite() as site:
            answer = httpx.post(node.base + "/api/tabs", json={"op": "open", "url": site.url("/text")},
                                headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60).json()
            tab = answer["tabId"]
            async with over_http(node) as http, over_stdio(node) as stdio:
                ways = [("http", http), ("stdio", stdio)]
                for _, session in ways:  # warm-up, untimed
                    await latencies(session, tab, 2)
                for round_ in range(rounds):
                    for way, session in ways if round_ % 2 == 0 else ways[::-1]:
                        found[way] += await latencies(session, tab, steps)
    finally:
        node.stop()
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    before = os.getloadavg()
    found = anyio.run(run, args.rounds, args.steps)
    print(f"{args.rounds} rounds of a {args.steps}-step browser_batch; {load_line(before, os.getloadavg())}")
    print("step's end in the page -> its progress notification at the client (ms)")
    for way, values in found.items():
        median = statistics.median(values)
        print(f"  {way:5}  median {median:6.1f}  p95 {p95(values):6.1f}  max {max(values):6.1f}  "
              f"({len(values)} steps)  {'ok' if median <= GOAL_MS else 'OVER'} (goal <= {GOAL_MS:g})")


if __name__ == "__main__":
    main()
