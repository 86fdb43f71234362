"""Benchmark: how soon an MCP client gets its first ``tools/list``, Kitsune against Playwright MCP.

A client configured with several servers waits for each one's first answer. Each round starts a
server over stdio with the ``mcp`` SDK's own client and times, from the spawn, the answers to
``initialize`` and the first ``tools/list``; then it closes the client. The servers:

- ``kitsune mcp`` with its embedded bridge (its own nats-server and Chromium, started in the
  background while the gateway answers);
- Playwright MCP (``npx @playwright/mcp``, the npm package, installed into a temporary folder from
  the npm registry when it is not found) on the same Debian Chromium (``--executable-path
  /usr/bin/chromium --headless``);
- ``python -c 'import mcp'``: the time this interpreter takes to load the SDK, under which no
  Python MCP server can answer; the ratio is taken against it when Playwright MCP cannot be
  installed (the benchmark says so).

Rounds alternate (K P, P K, ...) so that noise from other work on the machine hits both; the
figure is the ratio of the medians, Kitsune over the other, measured in this one run.

    .venv/bin/python bench/first_answer.py [--rounds N] [--playwright-mcp PATH]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

KITSUNE = Path(sys.executable).parent / "kitsune"
CHROMIUM = "/usr/bin/chromium"


def playwright_mcp(given: str | None, folder: Path, version: str | None = None) -> Path | None:
    """Playwright MCP's launcher: ``given``, or the npm package (its ``version``, else the latest) installed into
    ``folder`` (None if it cannot be)."""
    if given:
        return Path(given)
    npm = shutil.which("npm")
    if npm is None:
        return None
    package = "@playwright/mcp" + (f"@{version}" if version else "")
    installed = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(folder), package],
                               capture_output=True, text=True, timeout=600, check=False)
    launcher = folder / "node_modules" / ".bin" / "playwright-mcp"
    if installed.returncode != 0 or not launcher.exists():
        print(f"Playwright MCP could not be installed: {installed.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return launcher


async def first_answer(parameters: StdioServerParameters) -> tuple[float, float]:
    """Seconds from the spawn to the answers to initialize and to the first tools/list."""
    started = time.perf_counter()
    with open("/dev/null", "w") as quiet:
        async with stdio_client(parameters, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            initialized = time.perf_counter() - started
            tools = await session.list_tools()
            listed = time.perf_counter() - started
    assert tools.tools, "no tools listed"
    return initialized, listed


def import_mcp() -> float:
    """Seconds for this interpreter to start and load the ``mcp`` SDK."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import mcp"], check=True)
    return time.perf_counter() - started


async def rounds(count: int, playwright: Path | None) -> None:
    kitsune = StdioServerParameters(command=str(KITSUNE), args=["mcp"], env={"KITSUNE_CAPS": "core,automation"})
    other = None if playwright is None else StdioServerParameters(
        command=str(playwright), args=["--executable-path", CHROMIUM, "--headless", "--isolated"])
    floor = "python -c 'import mcp'"
    name = "Playwright MCP" if other is not None else floor
    times: dict[str, list[float]] = {"kitsune": [], "Playwright MCP": [], floor: []}
    await first_answer(kitsune)  # warm-up: caches, compiled bytecode
    servers = {"kitsune": kitsune, **({"Playwright MCP": other} if other is not None else {})}
    sides = [*servers, floor]
    for n in range(count):
        for side in (sides if n % 2 == 0 else sides[::-1]):
            if side == floor:
                initialized = listed = await anyio.to_thread.run_sync(import_mcp)
            else:
                initialized, listed = await first_answer(servers[side])
            times[side].append(listed)
            print(f"round {n + 1} {side}: initialize {initialized:.3f} s, tools/list {listed:.3f} s", flush=True)
    medians = {side: statistics.median(times[side]) for side in sides}
    print("\nload average (1, 5, 15 min): " + ", ".join(f"{load:.2f}" for load in os.getloadavg()))
    print(f"first tools/list, median of {count}: " + ", ".join(f"{side} {medians[side]:.3f} s" for side in sides))
    print(f"ratio kitsune / {name}: {medians['kitsune'] / medians[name]:.2f}"
          + (f"; kitsune / {floor}: {medians['kitsune'] / medians[floor]:.2f}" if name != floor else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--playwright-mcp", help="Playwright MCP's launcher (default: npm install into a temp folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kitsune-bench-") as folder:
        launcher = playwright_mcp(args.playwright_mcp, Path(folder))
        if launcher is None:
            print("Playwright MCP is not available here: measuring against python -c 'import mcp' instead")
        anyio.run(rounds, args.rounds, launcher)


if __name__ == "__main__":
    main()
