"""Benchmark: where a site-tool checkout's time goes, document by document, from the browser's protocol traffic.

Runs the shop's checkout (three documents, ``bench/site_tools.py``'s raw and driver sides, interleaved) with
Playwright's protocol log on (``DEBUG=pw:protocol``: every CDP message Playwright's driver sends or receives, with
the time it did), and puts each checkout's messages together (the same event heard on two sessions counts once):

- the phases of the checkout: its first POST (the billing page's); from each page's POST to the commit of the next
  document (``Page.frameNavigated``); from the commit to the new document's main world
  (``Runtime.executionContextCreated``); from that to the new document's POST (on Kitsune's side, the continuation's
  start: the page's ``resume``, the node's answer, the callback); from the last POST to the call's answer;
- per checkout: the CDP commands sent (``Runtime.callFunctionOn``, ``Runtime.evaluate``, ... and how many were
  Playwright's 13.6 KB utility script), and the binding calls the pages made (``Runtime.bindingCalled``).

Milliseconds are medians over the checkouts; the log's clock has millisecond steps.

    .venv/bin/python bench/site_tools_timeline.py [--checkouts N]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests and bench

os.environ["DEBUG"], os.environ["DEBUG_COLORS"] = "pw:protocol", "0"  # before Playwright's driver starts

from actors.loop import IoLoop  # noqa: E402 (after the log is on)
from bench.site_tools import CHECKOUT, ORDER, DriverSide, RawSide, Side  # noqa: E402
from driver import ChromiumBrowser  # noqa: E402
from tests.site import TestSite  # noqa: E402

CHECKOUTS = 12
"""Checkouts per side (after one each to warm up)."""
_LINE = re.compile(r"^(\S+Z) pw:protocol (SEND ►|◀ RECV) (.*)$")
UTILITY_BYTES = 10_000
"""A ``Runtime.evaluate`` at least this long is Playwright's utility script."""
PHASES = ("POST 1", "POST 1 -> commit 2", "commit 2 -> world 2", "world 2 -> POST 2", "POST 2 -> commit 3",
          "commit 3 -> world 3", "world 3 -> POST 3", "POST 3 -> answer", "checkout")
COUNTS = ("CDP commands", "utility scripts", "binding calls")


def _ms(stamp: str) -> float:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000


def mark(text: str) -> None:
    """A line of the benchmark's own in the log, at the time it is written."""
    stamp = datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    os.write(2, f"{stamp} bench {text}\n".encode())


def checkout(site: TestSite, side: Side, name: str) -> None:
    """One checkout from the billing page, between its marks in the log."""
    side.go("/shop/billing", "checkout")
    site.reset()
    mark(f"start {name}")
    _, output = side.call("checkout", CHECKOUT)
    mark(f"end {name}")
    assert output == ORDER, output


def _events(lines: list[str]) -> list[tuple[float, str, dict[str, Any]]]:
    """Each message of one checkout (the time, whether it was sent, the message), an event heard twice once."""
    seen: set[bytes] = set()
    events = []
    for line in lines:
        found = _LINE.match(line)
        if found is None:
            continue
        message = orjson.loads(found.group(3))
        if "method" in message and "id" not in message:
            key = orjson.dumps([message["method"], message.get("params")], option=orjson.OPT_SORT_KEYS)
            if key in seen:
                continue
            seen.add(key)
        events.append((_ms(found.group(1)), "SEND" if found.group(2).startswith("SEND") else "RECV", message))
    return events


def timeline(lines: list[str], started: float, ended: float) -> dict[str, float] | None:
    """The phases and counts of one checkout (None when its log is not whole)."""
    events = _events(lines)
    posts = [t for t, _, m in events if m.get("method") == "Network.requestWillBeSent"
             and m["params"]["request"]["method"] == "POST"]
    commits = [t for t, _, m in events if m.get("method") == "Page.frameNavigated"]
    worlds = [t for t, _, m in events if m.get("method") == "Runtime.executionContextCreated"
              and (m["params"]["context"].get("auxData") or {}).get("isDefault")]
    if len(posts) != 3 or len(commits) != 2:
        return None
    figures = {"POST 1": posts[0] - started, "POST 3 -> answer": ended - posts[2], "checkout": ended - started}
    for i, commit in enumerate(commits, 2):
        world = min((t for t in worlds if t >= commit), default=commit)
        figures[f"POST {i - 1} -> commit {i}"] = commit - posts[i - 2]
        figures[f"commit {i} -> world {i}"] = world - commit
        figures[f"world {i} -> POST {i}"] = posts[i - 1] - world
    sent = [m for _, kind, m in events if kind == "SEND"]
    figures["CDP commands"] = len(sent)
    figures["utility scripts"] = sum(1 for m in sent if len(orjson.dumps(m)) >= UTILITY_BYTES)
    figures["binding calls"] = sum(1 for _, _, m in events if m.get("method") == "Runtime.bindingCalled")
    return figures


def read(log: str) -> dict[str, list[dict[str, float]]]:
    """Each side's checkouts' figures (the first of each side is the warm-up)."""
    sides: dict[str, list[dict[str, float]]] = collections.defaultdict(list)
    lines: list[str] | None = None
    side, started = "", 0.0
    for line in Path(log).read_text(errors="replace").splitlines():
        if " bench start " in line:
            lines, side, started = [], line.split()[3], _ms(line.split()[0])
        elif " bench end " in line and lines is not None:
            figures = timeline(lines, started, _ms(line.split()[0]))
            if figures is not None:
                sides[side].append(figures)
            lines = None
        elif lines is not None:
            lines.append(line)
    return {side: found[1:] for side, found in sides.items()}


def run(count: int, log: Path) -> None:
    with log.open("wb") as out:
        saved = os.dup(2)
        os.dup2(out.fileno(), 2)  # Playwright's driver inherits it as it starts
    try:
        with TestSite() as site:
            io = IoLoop()
            browser = ChromiumBrowser()
            io.run(browser.start(), timeout=60)
            try:
                sides: dict[str, Side] = {
                    "raw": RawSide(io, browser, site),
                    "driver": DriverSide(io, browser, io.run(browser.new_tab(site.url("/shop")), timeout=60), site)}
                for i in range(count + 1):
                    for name in sides if i % 2 == 0 else reversed(list(sides)):
                        checkout(site, sides[name], name)
            finally:
                io.run(browser.stop(), timeout=60)
                io.close()
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def report(found: dict[str, list[dict[str, float]]], load: tuple[float, ...]) -> None:
    names = [side for side in ("raw", "driver") if found.get(side)]
    print(f"a checkout's timeline from Playwright's protocol log: {len(found.get('raw', []))} checkouts per side "
          f"(interleaved, after one each), {os.cpu_count()} CPUs, load average before {load[0]:.2f}, "
          f"after {os.getloadavg()[0]:.2f}")
    print(f"  {'medians, ms':24s}" + "".join(f"{side:>10s}" for side in names))
    for key in (*PHASES, *COUNTS):
        print(f"  {key:24s}" + "".join(f"{statistics.median(f[key] for f in found[side]):10.1f}" for side in names))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--checkouts", type=int, default=CHECKOUTS, help="checkouts per side")
    args = parser.parse_args()
    load = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="kitsune-bench-") as scratch:
        log = Path(scratch) / "protocol.log"
        run(args.checkouts, log)
        report(read(str(log)), load)


if __name__ == "__main__":
    main()
