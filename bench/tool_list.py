"""Benchmark: what the tool list costs a model, Kitsune against Playwright MCP.

A model gets the whole tool list with every request, so its size is paid on every turn. Each
server is started over stdio and listed with the ``mcp`` SDK's own client; the figure is the bytes
of the whole ``tools/list`` result as the client holds it, in JSON (``model_dump_json`` by alias,
without nulls), and tokens estimated at 4 bytes each. The servers:

- ``kitsune mcp`` with every group on (``KITSUNE_CAPS=core,automation``), its embedded bridge;
- Playwright MCP 0.0.86 (``npx @playwright/mcp@0.0.86``, installed into a temporary folder from the
  npm registry when not given) on the Debian Chromium (``--executable-path /usr/bin/chromium``).

Goal (issue 30): Kitsune's list at most Playwright MCP's (ratio <= 1.0).

    PYTHONPATH=. .venv/bin/python bench/tool_list.py [--playwright-mcp PATH]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for bench and tests.site

from bench.first_answer import CHROMIUM, KITSUNE, playwright_mcp

VERSION = "0.0.86"
"""The Playwright MCP release the issue measured."""


async def listed(parameters: StdioServerParameters) -> tuple[int, int]:
    """(tools, bytes of the whole tools/list result as JSON) as the SDK's client holds it."""
    with open("/dev/null", "w") as quiet:
        async with stdio_client(parameters, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            result = await session.list_tools()
    return len(result.tools), len(result.model_dump_json(by_alias=True, exclude_none=True).encode())


async def measure(playwright: Path | None) -> None:
    inherited = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}  # a worktree's code
    kitsune = StdioServerParameters(command=str(KITSUNE), args=["mcp"],
                                    env={**inherited, "KITSUNE_CAPS": "core,automation"})
    tools, size = await listed(kitsune)
    print(f"kitsune (core,automation): {tools} tools, {size} bytes ({size / 1024:.1f} KiB, ~{size // 4} tokens)")
    if playwright is None:
        print("Playwright MCP is not available here: no ratio")
        return
    other = StdioServerParameters(command=str(playwright),
                                  args=["--executable-path", CHROMIUM, "--headless", "--isolated"])
    their_tools, theirs = await listed(other)
    print(f"Playwright MCP {VERSION}: {their_tools} tools, {theirs} bytes ({theirs / 1024:.1f} KiB, "
          f"~{theirs // 4} tokens)")
    print(f"ratio kitsune / Playwright MCP: {size / theirs:.2f} (goal <= 1.0)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--playwright-mcp", help="Playwright MCP's launcher (default: npm install into a temp folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kitsune-bench-") as folder:
        launcher = playwright_mcp(args.playwright_mcp, Path(folder), VERSION)
        anyio.run(measure, launcher)


if __name__ == "__main__":
    main()
