"""Benchmark: what a page snapshot costs a model, Kitsune's ``browser_snapshot`` against Playwright MCP's.

Four pages of realistic size, generated here and served on loopback: an article of 5,000 words, a
product list of 300 items (each a link and an "Add to cart" button), a sign-up form of 60 fields and a
table of 1,000 rows (each row's id a link). Both servers read the same page in the same run, over
stdio with the ``mcp`` SDK's own client:

- Kitsune: ``kitsune mcp --bridge`` to a ``kitsune serve`` (its own NATS and Chromium), and the node's
  HTTP API (``POST /api/act {"command": {"action": "snapshot"}}``) for the time without the gateway.
  Three snapshots: ``default`` (the tool's defaults: maxChars 20,000, then cut with a line saying how
  to read on), ``full`` (maxChars 200,000, the most it gives at once) and ``interactive`` (only what one
  acts on with its headings and landmarks, maxChars 200,000).
- Playwright MCP 0.0.86 on the same Debian Chromium, headless (``browser_snapshot``).
- Playwright's own ``aria_snapshot(mode="ai")`` from this process (Python, as the node calls it), on a
  Chromium of its own: the floor under a Python tool, which Playwright MCP (Node.js, in-process) is not.

Bytes are what a model reads: the text of the tool result's content (Kitsune also sends its fields as
structured content, the snapshot's text included, ``elements`` not; the whole result's JSON is given
too). Time is the tool call's wall time at the client, median of interleaved rounds (each in an order of
its own, drawn); its ratio is the median of the paired ratios (Kitsune / Playwright MCP in the same
round). Addressable: refs of interactive roles (links, buttons, fields...) in the text, against the
page's count. A diff: on the form, after one field was filled, Kitsune's ``snapshot {since: "last"}``
and a direct write's own answer (its ``page`` diff), as a fraction of the full snapshot's bytes;
Playwright MCP's ``browser_type`` answer the same way.

Goals (issue 30): bytes <= 0.6x Playwright MCP's with every interactive element still addressable,
time <= 1.1x, a diff after one field changed <= 5% of the full snapshot's bytes.

    PYTHONPATH=. .venv/bin/python bench/snapshot.py [--rounds N] [--playwright-mcp PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from playwright.async_api import Page, async_playwright

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for bench and tests.site

from bench.first_answer import CHROMIUM, KITSUNE, playwright_mcp
from bench.form20 import TOKEN
from bench.shared import ServedNode, load_line

VERSION = "0.0.86"
INSTALLED = Path("/tmp/pwmcp/node_modules/.bin/playwright-mcp")
ROUNDS = 5
BIG = 200_000
"""Kitsune's largest maxChars."""
INTERACTIVE = frozenset({"button", "link", "textbox", "searchbox", "checkbox", "radio", "combobox", "listbox",
                         "menuitem", "tab", "switch", "slider", "spinbutton"})
_REF_LINE = re.compile(r"^\s*(?:[+~-] )?- (?P<role>[a-z]+)\b[^\n]*\[ref=(?P<ref>[a-z0-9]+)\]", re.MULTILINE)
GOALS = {"bytes": 0.6, "time": 1.1, "diff": 0.05}

# -- the pages -------------------------------------------------------------------------------------------------

_VOCABULARY = ("browser agent page model element snapshot table order field value price ship cart account "
         "search result reader window button signal river mountain harbour letter garden winter silver "
         "engine market travel station country history season science library morning evening")
WORDS = tuple(_VOCABULARY.split())


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _html(title: str, body: str) -> str:
    nav = "".join(f'<a href="/{p}">{p.title()}</a> ' for p in ("home", "products", "blog", "help", "account"))
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
            f'<link rel="icon" href="data:,"></head><body><header><nav>{nav}</nav></header><main>{body}</main>'
            '<footer><a href="/privacy">Privacy</a> <a href="/terms">Terms</a></footer></body></html>')


def article() -> tuple[str, int]:
    rng = random.Random(1)
    sections = []
    for s in range(25):  # 25 sections of 4 paragraphs of 50 words: 5,000 words
        paragraphs = "".join(f"<p>{_words(rng, 50)}</p>" for _ in range(4))
        sections.append(f'<h2>Section {s + 1}: {_words(rng, 3)}</h2>{paragraphs}'
                        f'<p>See also <a href="/notes/{s}">note {s + 1}</a>.</p>')
    return _html("Article", f"<article><h1>A long article</h1>{''.join(sections)}</article>"), 5 + 2 + 25


def products() -> tuple[str, int]:
    rng = random.Random(2)
    items = "".join(f'<li><a href="/item/{i}">{_words(rng, 3).title()} {i}</a> <span>${rng.randint(5, 500)}.99'
                    f'</span> <button type="button">Add to cart</button></li>' for i in range(300))
    return _html("Products", f"<h1>300 products</h1><ul>{items}</ul>"), 5 + 2 + 600


FORM_FIELDS = 60


def form() -> tuple[str, int]:
    rows = []
    for i in range(FORM_FIELDS):
        if i % 12 == 10:
            rows.append(f'<p><label for="f{i}">Choice {i}</label> <select id="f{i}" name="f{i}">'
                        + "".join(f"<option>Option {k}</option>" for k in range(5)) + "</select></p>")
        elif i % 12 == 11:
            rows.append(f'<p><input type="checkbox" id="f{i}" name="f{i}"> <label for="f{i}">Agree {i}</label></p>')
        else:
            rows.append(f'<p><label for="f{i}">Field {i}</label> <input id="f{i}" name="f{i}"></p>')
    body = f'<h1>Sign up</h1><form method="POST" action="/done">{"".join(rows)}<button>Send</button></form>'
    return _html("Form", body), 5 + 2 + FORM_FIELDS + 1


def table() -> tuple[str, int]:
    rng = random.Random(3)
    head = "<tr><th>Id</th><th>Name</th><th>City</th><th>Amount</th><th>Status</th></tr>"
    rows = "".join(f'<tr><td><a href="/row/{i}">{i}</a></td><td>{_words(rng, 2)}</td><td>{rng.choice(WORDS)}</td>'
                   f'<td>{rng.randint(1, 9999)}.00</td><td>{rng.choice(("open", "paid", "late"))}</td></tr>'
                   for i in range(1000))
    return _html("Table", f"<h1>1,000 rows</h1><table><thead>{head}</thead><tbody>{rows}</tbody></table>"), 5 + 2 + 1000


PAGES: dict[str, Callable[[], tuple[str, int]]] = {"article": article, "products": products, "form": form,
                                                   "table": table}


class Site:
    """The pages on loopback; each page's HTML and its count of interactive elements."""

    def __init__(self) -> None:
        built = {name: make() for name, make in PAGES.items()}
        self.interactive = {name: count for name, (_, count) in built.items()}
        html = {f"/{name}": page.encode() for name, (page, _) in built.items()}

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                data = html.get(self.path, b"<!doctype html><title>none</title>")
                self.send_response(HTTPStatus.OK if self.path in html else HTTPStatus.NOT_FOUND)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self._server.shutdown()


# -- measuring -------------------------------------------------------------------------------------------------


def text_of(result: types.CallToolResult) -> str:
    """What a model reads of a tool result: the text of its content."""
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def whole(result: types.CallToolResult) -> int:
    return len(result.model_dump_json(by_alias=True, exclude_none=True).encode())


def addressable(text: str) -> int:
    """Distinct refs of interactive roles in a snapshot's text."""
    return len({m["ref"] for m in _REF_LINE.finditer(text) if m["role"] in INTERACTIVE})


def first_ref(text: str, role: str) -> str:
    found = next(m["ref"] for m in _REF_LINE.finditer(text) if m["role"] == role)
    return found


class Sample:
    """One side's figures on one page: times, and the bytes and refs of its last read."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.bytes = self.whole = self.refs = 0
        self.truncated = False

    def add(self, took: float, result: types.CallToolResult | None, text: str) -> None:
        self.times.append(took)
        self.bytes = len(text.encode())
        self.whole = whole(result) if result is not None else self.bytes
        http = result is None and text.startswith("{")  # the HTTP API's JSON, else Playwright's own text
        shown = str(json.loads(text)["snapshot"]) if http else text
        self.refs, self.truncated = addressable(shown), "# cut at line" in shown


async def call(session: ClientSession, tool: str, arguments: dict[str, Any]) -> tuple[float, types.CallToolResult]:
    started = time.perf_counter()
    result = await session.call_tool(tool, arguments)
    took = time.perf_counter() - started
    if result.is_error:
        raise SystemExit(f"{tool} {arguments}: {text_of(result)[:500]}")
    return took, result


KITSUNE_SHOTS: dict[str, dict[str, Any]] = {"default": {}, "full": {"maxChars": BIG},
                                            "interactive": {"interactive": True, "maxChars": BIG}}
SIDES = [*(f"kitsune {shot}" for shot in KITSUNE_SHOTS), "kitsune http full", "playwright python", "playwright"]
"""``playwright python``: Playwright's own ``aria_snapshot(mode="ai")`` from this process (Python, as the node
reads it) on a Chromium of its own: the floor under any Python tool, beside Playwright MCP (Node.js)."""


class Bench:
    """Both servers' sessions, the node's HTTP API and the tab Kitsune reads."""

    def __init__(self, kitsune: ClientSession, playwright: ClientSession, http: httpx.AsyncClient, tab: int,
                 raw: Page) -> None:
        self.kitsune, self.playwright, self.http, self.tab, self.raw = kitsune, playwright, http, tab, raw
        self.samples: dict[tuple[str, str], Sample] = {}
        self.diffs: dict[str, list[float]] = {}
        self.texts: dict[tuple[str, str], str] = {}

    async def shoot(self, side: str) -> tuple[float, types.CallToolResult | None, str]:
        if side == "playwright":
            took, result = await call(self.playwright, "browser_snapshot", {})
            return took, result, text_of(result)
        if side == "playwright python":
            started = time.perf_counter()
            text = await self.raw.aria_snapshot(mode="ai")
            return time.perf_counter() - started, None, text
        if side == "kitsune http full":
            started = time.perf_counter()
            answer = await self.http.post("/api/act", json={"command": {"action": "snapshot", "tabId": self.tab,
                                                                        "maxChars": BIG}})
            took = time.perf_counter() - started
            if answer.status_code != HTTPStatus.OK or "snapshot" not in answer.json():
                raise SystemExit(f"snapshot over HTTP: {answer.text[:500]}")
            return took, None, answer.text
        took, result = await call(self.kitsune, "browser_snapshot",
                                  {"tabId": self.tab, **KITSUNE_SHOTS[side.removeprefix("kitsune ")]})
        return took, result, text_of(result)

    async def page(self, url: str, name: str, rounds: int) -> None:
        await call(self.kitsune, "browser_navigate", {"tabId": self.tab, "url": url, "snapshot": "none"})
        await call(self.playwright, "browser_navigate", {"url": url})
        await self.raw.goto(url)
        order = random.Random(name)  # each round in an order of its own: no side always follows another
        for r in range(rounds + 1):  # the first round warms up, unmeasured
            for side in order.sample(SIDES, len(SIDES)):
                took, result, text = await self.shoot(side)
                if r > 0:
                    self.samples.setdefault((name, side), Sample()).add(took, result, text)
                    self.texts[(name, side)] = text

    def _diff(self, name: str, result: types.CallToolResult, full: int) -> None:
        self.texts[("one field", name)] = text_of(result)
        self.diffs.setdefault(name, []).append(len(text_of(result).encode()) / full)

    async def one_field(self, url: str, rounds: int) -> None:
        """On the form: a full snapshot, one field filled, then what each side shows of the change."""
        await call(self.kitsune, "browser_navigate", {"tabId": self.tab, "url": url, "snapshot": "none"})
        await call(self.playwright, "browser_navigate", {"url": url})
        for r in range(rounds):
            value = f"changed in round {r}"
            _, shot = await call(self.kitsune, "browser_snapshot", {"tabId": self.tab, "maxChars": BIG})
            full = len(text_of(shot).encode())
            ref = first_ref(text_of(shot), "textbox")
            await call(self.kitsune, "browser_fill_form", {"tabId": self.tab, "snapshot": "none",
                                                           "fields": [{"ref": ref, "value": value}]})
            _, since = await call(self.kitsune, "browser_snapshot", {"tabId": self.tab, "since": "last"})
            if value not in text_of(since):
                raise SystemExit(f"the diff does not show the change: {text_of(since)[:500]}")
            self._diff("kitsune snapshot since=last", since, full)
            _, written = await call(self.kitsune, "browser_fill_form", {"tabId": self.tab, "fields": [
                {"ref": ref, "value": value + " again"}]})
            self._diff("kitsune fill's answer (its page diff)", written, full)
            _, theirs = await call(self.playwright, "browser_snapshot", {})
            their_ref = first_ref(text_of(theirs), "textbox")
            _, typed = await call(self.playwright, "browser_type", {"element": "Field 0", "target": their_ref,
                                                                    "text": value})
            self._diff("playwright browser_type's answer", typed, len(text_of(theirs).encode()))


async def _session(stack: AsyncExitStack, parameters: StdioServerParameters) -> ClientSession:
    quiet = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115 (the stack closes it)
    read, write = await stack.enter_async_context(stdio_client(parameters, errlog=quiet))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


async def run(rounds: int, launcher: Path, show: bool, folder: Path) -> tuple[Bench, Site]:
    site = Site()
    directory = Path(tempfile.mkdtemp(prefix="kitsune-bench-snapshot-"))
    node = ServedNode(directory, TOKEN)
    inherited = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    kitsune = StdioServerParameters(command=str(KITSUNE), env={**inherited, "KITSUNE_CAPS": "core"},
                                    args=["mcp", "--bridge", node.base, "--token-file", str(node.token_file)])
    root = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium's sandbox refuses root; Kitsune does the same
    playwright = StdioServerParameters(command=str(launcher), cwd=folder,  # it writes snapshots to files there
                                       args=["--executable-path", CHROMIUM, "--headless", "--isolated", *root])
    try:
        async with AsyncExitStack() as stack:
            http = await stack.enter_async_context(httpx.AsyncClient(
                base_url=node.base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=300))
            k_session, p_session = await _session(stack, kitsune), await _session(stack, playwright)
            raw = await stack.enter_async_context(async_playwright())
            browser = await raw.chromium.launch(executable_path=CHROMIUM, args=root)
            stack.push_async_callback(browser.close)
            _, opened = await call(k_session, "browser_tabs", {"op": "new", "url": "about:blank"})
            assert isinstance(opened.structured_content, dict)
            bench = Bench(k_session, p_session, http, int(opened.structured_content["tabId"]), await browser.new_page())
            for name in PAGES:
                await bench.page(f"{site.base}/{name}", name, rounds)
                print(f"measured {name}", flush=True)
            await bench.one_field(f"{site.base}/form", rounds)
            if show:
                for (name, side), text in bench.texts.items():
                    print(f"--- {name} / {side}: first 1,500 characters\n{text[:1500]}")
            return bench, site
    finally:
        node.stop()
        site.stop()


def report(bench: Bench, site: Site, rounds: int, load_before: tuple[float, ...]) -> None:
    med = statistics.median
    print(f"\nsnapshot bench: {rounds} interleaved rounds after 1 warm-up, {os.cpu_count()} CPUs; "
          f"{load_line(load_before, os.getloadavg())}")
    print("bytes: the content's text a model reads (whole: the result's JSON, structured content included)")
    met = {side: {"bytes": 0, "time": 0} for side in SIDES[:3]}
    for name in PAGES:
        theirs = bench.samples[(name, "playwright")]
        print(f"\n{name} ({site.interactive[name]} interactive elements on the page)")
        print("  side                  |   bytes |   whole | x PW bytes | median ms | x PW time | refs | cut")
        for side in SIDES:
            s = bench.samples[(name, side)]
            ratio = s.bytes / theirs.bytes
            slower = med([t / p for t, p in zip(s.times, theirs.times, strict=True)])  # paired by round
            print(f"  {side:21s} | {s.bytes:7d} | {s.whole:7d} | {ratio:10.2f} | {med(s.times) * 1000:9.1f} | "
                  f"{slower:9.2f} | {s.refs:4d} | {'yes' if s.truncated else 'no'}")
            if side in met:
                met[side]["bytes"] += ratio <= GOALS["bytes"] and s.refs >= theirs.refs and not s.truncated
                met[side]["time"] += slower <= GOALS["time"]
    print("\none field filled on the form, as a fraction of that side's full snapshot's bytes (median):")
    for what, fractions in bench.diffs.items():
        print(f"  {what:38s} {med(fractions) * 100:6.2f}%")
    diff_met = med(bench.diffs["kitsune snapshot since=last"]) <= GOALS["diff"]
    print(f"\ngoals against Playwright MCP's browser_snapshot, pages of {len(PAGES)} that meet them:")
    for side, pages in met.items():
        print(f"  {side:21s} bytes <= {GOALS['bytes']}x with every interactive element addressable: "
              f"{pages['bytes']}; time <= {GOALS['time']}x: {pages['time']}")
    print(f"  diff after one field <= {GOALS['diff']:.0%} of the full snapshot: {'met' if diff_met else 'NOT met'}")

def pinned_playwright_mcp(given: str | None, folder: Path) -> Path:
    """Playwright MCP ``VERSION``'s launcher: ``given``, the one at ``INSTALLED``, else npm's into ``folder``."""
    launcher = playwright_mcp(given or (str(INSTALLED) if INSTALLED.exists() else None), folder, VERSION)
    if launcher is None:
        raise SystemExit("Playwright MCP is not available here: nothing to compare with")
    return launcher


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="measured rounds of each side on each page")
    parser.add_argument("--playwright-mcp", help="Playwright MCP's launcher (default: the one installed at "
                                                 f"{INSTALLED}, else npm install into a temp folder)")
    parser.add_argument("--show", action="store_true", help="print the start of each side's last text")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="kitsune-bench-") as folder:
        launcher = pinned_playwright_mcp(args.playwright_mcp, Path(folder))
        bench, site = anyio.run(run, args.rounds, launcher, args.show, Path(folder))
    report(bench, site, args.rounds, load_before)


if __name__ == "__main__":
    main()
