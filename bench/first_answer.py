"""Benchmark: how soon an MCP client gets its first answers, Kitsune against Playwright MCP.

A client configured with several servers waits for each one's first answer, and an agent's first
step is to open a page. Each round starts a server over stdio with the ``mcp`` SDK's own client and
times, from the spawn, the answers to ``initialize``, the first ``tools/list`` and the first tool
call, a page of a local HTTP server opened (Kitsune: ``browser_tabs`` ``op: new``; Playwright MCP:
``browser_navigate``); then it closes the client. The servers:

- ``kitsune mcp`` with its embedded bridge (its own nats-server and Chromium, started in the
  background while the gateway answers);
- Playwright MCP (``npx @playwright/mcp``, the npm package, installed into a temporary folder from
  the npm registry when it is not found) on the same Debian Chromium (``--executable-path
  /usr/bin/chromium --headless``);
- ``python -c 'import mcp'``: the time this interpreter takes to load the SDK, under which no
  Python MCP server can answer; the ratio is taken against it when Playwright MCP cannot be
  installed (the benchmark says so);
- with ``--baseline TREE``, ``kitsune mcp`` again from another checkout of Kitsune (its code on
  ``PYTHONPATH``, the same interpreter and packages): the tree before a change, in the same run.

Rounds alternate (K P, P K, ...) so that noise from other work on the machine hits both; the
figures are the medians, and their ratios measured in this one run. Beside the wall times, a count
that load disturbs less: the CPU seconds the server's process used up to the first call's answer,
and those of its whole tree (its processes then alive, Chromium's included, and those they reaped),
read from ``/proc``.

    .venv/bin/python bench/first_answer.py [--rounds N] [--playwright-mcp PATH] [--baseline TREE]

With ``--serve-starts N`` it times instead N starts of ``kitsune serve`` (with ``/mcp`` and two agents, as the
tests' nodes, and ``--no-mcp`` with one, as ``kitsune mcp``'s embedded bridge), each to its "kitsune serving" line:
the CPU of its process and of its tree by then (Playwright's driver, Chromium, nats-server), interleaved with
``--baseline``'s.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for bench and tests.site

from tests.site import TestSite

KITSUNE = Path(sys.executable).parent / "kitsune"
TREE = Path(__file__).resolve().parents[1]
"""The checkout this benchmark is in: the code ``kitsune mcp`` runs."""
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


Call = tuple[str, dict[str, str]]
"""The first tool call: its name and arguments."""
Answers = tuple[float, float, float, float, float]
"""Seconds from the spawn to the answers to initialize, to the first tools/list and to the first call; CPU
seconds of the server's process and of its tree up to the first call's answer."""
TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/PID/stat`` after the command's name (the state first)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def server_cpu(server: int | None = None) -> tuple[float, float]:
    """CPU seconds of the server this process runs (``server``, else its one child): its own, and its tree's (every
    process of it alive now, with the children each reaped)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                parents[int(entry.name)] = int(_stat(int(entry.name))[1])
    if server is None:
        (server,) = [pid for pid, parent in parents.items() if parent == os.getpid()]
    tree, grown = {server}, True
    while grown:
        grown = bool(found := {pid for pid, parent in parents.items() if parent in tree} - tree)
        tree |= found
    own = total = 0.0
    for pid in tree:
        with contextlib.suppress(OSError):  # it ended meanwhile
            fields = _stat(pid)
            spent = (int(fields[11]) + int(fields[12])) / TICK
            own = spent if pid == server else own
            total += spent + (int(fields[13]) + int(fields[14])) / TICK
    return own, total


async def first_answer(parameters: StdioServerParameters, first_call: Call) -> Answers:
    """Seconds from the spawn to the answers to initialize, to the first tools/list and to the first call, and
    the CPU the server used to its first call's answer (:func:`server_cpu`)."""
    started = time.perf_counter()
    with open("/dev/null", "w") as quiet:
        async with stdio_client(parameters, errlog=quiet) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            initialized = time.perf_counter() - started
            tools = await session.list_tools()
            listed = time.perf_counter() - started
            answer = await session.call_tool(*first_call)
            called = time.perf_counter() - started
            own, tree = server_cpu()
    assert tools.tools, "no tools listed"
    assert not answer.is_error, f"the first call failed: {answer.content}"
    return initialized, listed, called, own, tree


def import_mcp() -> tuple[float, float]:
    """Seconds for this interpreter to start and load the ``mcp`` SDK, and the CPU seconds it took."""
    started = time.perf_counter()
    loading = subprocess.Popen([sys.executable, "-c", "import mcp"])
    _, status, usage = os.wait4(loading.pid, 0)
    loading.returncode = os.waitstatus_to_exitcode(status)
    assert loading.returncode == 0, "python -c 'import mcp' failed"
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime


def kitsune(tree: Path | str = TREE) -> StdioServerParameters:
    """``kitsune mcp`` with its embedded bridge, its code from ``tree`` (the SDK passes the server no
    ``PYTHONPATH`` of its own: the interpreter's would load the tree it was installed from), and run in ``tree``:
    the bridge, ``python -m kitsune.cli``, finds its code in its working directory first."""
    return StdioServerParameters(command=str(KITSUNE), args=["mcp"], cwd=str(tree),
                                 env={"KITSUNE_CAPS": "core,automation", "PYTHONPATH": str(tree)})


async def rounds(count: int, playwright: Path | None, folder: str, baseline: str | None, url: str) -> None:
    servers: dict[str, tuple[StdioServerParameters, Call]] = {
        "kitsune": (kitsune(), ("browser_tabs", {"op": "new", "url": url}))}
    if baseline:
        servers["kitsune (baseline)"] = (kitsune(baseline), servers["kitsune"][1])
    if playwright is not None:
        root = ["--no-sandbox"] if os.geteuid() == 0 else []
        servers["Playwright MCP"] = (StdioServerParameters(command=str(playwright), cwd=folder, args=[
            "--executable-path", CHROMIUM, "--headless", "--isolated", *root]), ("browser_navigate", {"url": url}))
    floor = "python -c 'import mcp'"
    sides = [*servers, floor]
    times: dict[str, list[Answers]] = {side: [] for side in sides}
    for server in servers.values():  # warm-up: caches, compiled bytecode
        await first_answer(*server)
    for n in range(count):
        for side in (sides if n % 2 == 0 else sides[::-1]):
            if side == floor:
                loaded, spent = await anyio.to_thread.run_sync(import_mcp)
                times[side].append((loaded, loaded, loaded, spent, spent))
                continue
            times[side].append(answered := await first_answer(*servers[side]))
            print(f"round {n + 1} {side}: initialize {answered[0]:.3f} s, tools/list {answered[1]:.3f} s, "
                  f"first call {answered[2]:.3f} s; CPU {answered[3]:.2f} s, its tree {answered[4]:.2f} s", flush=True)
    medians = {side: [statistics.median(t[i] for t in times[side]) for i in range(5)] for side in sides}
    print("\nload average (1, 5, 15 min): " + ", ".join(f"{load:.2f}" for load in os.getloadavg()))
    print(f"medians of {count}: tools/list, first call; CPU of the server's process, of its tree")
    for side in sides:
        print(f"  {side}: {medians[side][1]:.3f} s, {medians[side][2]:.3f} s; {medians[side][3]:.2f} s, "
              f"{medians[side][4]:.2f} s")
    other = "Playwright MCP" if playwright is not None else floor
    print(f"ratio kitsune / {other}: tools/list {medians['kitsune'][1] / medians[other][1]:.2f}"
          + ("" if other == floor else f", first call {medians['kitsune'][2] / medians[other][2]:.2f}"))
    if baseline:
        print(f"ratio kitsune / kitsune (baseline): first call "
              f"{medians['kitsune'][2] / medians['kitsune (baseline)'][2]:.2f}, CPU of the process "
              f"{medians['kitsune'][3] / medians['kitsune (baseline)'][3]:.2f}, of its tree "
              f"{medians['kitsune'][4] / medians['kitsune (baseline)'][4]:.2f}")


def serve_start(tree: Path | str, *, mcp: bool) -> Answers:
    """One ``kitsune serve`` (its code from ``tree``) started: with ``/mcp`` and two agents, as the tests' nodes
    (``mcp``), else with ``--no-mcp`` and one agent, as ``kitsune mcp``'s embedded bridge (whose agent's first session
    is made as Chromium starts); seconds from the spawn to its "kitsune serving" line, and the CPU of its process and
    of its tree (Playwright's driver, Chromium, nats-server) by then, in the last two of the five."""
    agents = ["alice", "bob"] if mcp else ["mcp"]
    with tempfile.TemporaryDirectory(prefix="kitsune-bench-") as folder:
        env = {**os.environ, "PYTHONPATH": str(tree), "KITSUNE_AGENTS": ",".join(f"{a}={a * 32}" for a in agents),
               "KITSUNE_AUDIT_FILE": f"{folder}/audit.jsonl"}
        started = time.perf_counter()
        server = subprocess.Popen(
            [sys.executable, "-m", "kitsune.cli", "serve", "--port", "0", "--state-dir", f"{folder}/state",
             *([] if mcp else ["--no-mcp"])], env=env, cwd=tree, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True)
        try:
            assert server.stdout is not None
            assert any(line.startswith("kitsune serving ") for line in server.stdout), "kitsune serve did not start"
            serving = time.perf_counter() - started
            own, total = server_cpu(server.pid)
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=60)
    return serving, serving, serving, own, total


def serve_starts(count: int, baseline: str | None) -> None:
    """``count`` starts of ``kitsune serve`` and of ``kitsune serve --no-mcp`` from this tree (and ``baseline``),
    interleaved; the medians of each."""
    trees: list[tuple[str, Path | str]] = [("kitsune serve", TREE), *([("kitsune serve (baseline)", baseline)]
                                                                      if baseline else [])]
    sides = [(f"{name}{'' if mcp else ' --no-mcp'}", tree, mcp) for name, tree in trees for mcp in (True, False)]
    times: dict[str, list[Answers]] = {side: [] for side, _, _ in sides}
    for _, tree, mcp in sides:  # warm-up: caches, compiled bytecode
        serve_start(tree, mcp=mcp)
    for n in range(count):
        for side, tree, mcp in (sides if n % 2 == 0 else sides[::-1]):
            times[side].append(started := serve_start(tree, mcp=mcp))
            print(f"start {n + 1} {side}: serving at {started[0]:.3f} s; CPU {started[3]:.2f} s, its tree "
                  f"{started[4]:.2f} s", flush=True)
    print("\nload average (1, 5, 15 min): " + ", ".join(f"{load:.2f}" for load in os.getloadavg()))
    print(f"medians of {count} (range of the tree's CPU): serving; CPU of the process, of its tree")
    for side, _, _ in sides:
        spent = [t[4] for t in times[side]]
        print(f"  {side}: {statistics.median(t[0] for t in times[side]):.3f} s; "
              f"{statistics.median(t[3] for t in times[side]):.2f} s, {statistics.median(spent):.2f} s "
              f"({min(spent):.2f}-{max(spent):.2f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--playwright-mcp", help="Playwright MCP's launcher (default: npm install into a temp folder)")
    parser.add_argument("--baseline", help="another checkout of Kitsune, measured beside this one")
    parser.add_argument("--serve-starts", type=int, metavar="N",
                        help="instead: N starts of kitsune serve (with /mcp, and --no-mcp), the CPU of each to serving")
    args = parser.parse_args()
    if args.serve_starts:
        serve_starts(args.serve_starts, args.baseline)
        return
    with tempfile.TemporaryDirectory(prefix="kitsune-bench-") as folder, TestSite() as site:
        launcher = playwright_mcp(args.playwright_mcp, Path(folder))
        if launcher is None:
            print("Playwright MCP is not available here: measuring against python -c 'import mcp' instead")
        anyio.run(rounds, args.rounds, launcher, folder, args.baseline, site.url("/text"))


if __name__ == "__main__":
    main()
