"""Benchmark: what a model carries for a task, Kitsune against Playwright MCP (issue 30, Must show #5).

A model reads its whole context on every turn: the tool list, then every call it made and every result
it got so far. A task of N tool calls takes N + 1 model turns (the last one reads the last result), so it
carries (N + 1) x the tool list's bytes, plus each call's arguments and result once for every turn after
it: ``sum over calls k of (N + 1 - k) x (arguments_k + result_k)``. Bytes are the tool list's whole
``tools/list`` result as JSON (as ``bench/tool_list.py``), each call's arguments as JSON and the text of
each result's content (what a model reads). Prompts and the model's own words are left out: they are the
same on both sides.

The tasks, each done by a scripted agent on each server in the same run (every write checked at the site):

- ``form20``: bench/form20.py's 20-field form. Kitsune: one ``browser_batch`` (the steps known, by
  selector) and, by ref, ``browser_tabs new`` (its answer holds the page's snapshot), ``browser_fill_form``,
  ``browser_click``. Playwright MCP: ``browser_navigate``, ``browser_fill_form``, ``browser_click`` (and a
  ``browser_snapshot`` after each of its answers that only links the snapshot to a file).
- ``sign-up``: the test site's /form20 (18 text fields, a select, a checkbox), as
  tests/e2e/test_scripted_agent.py's agent does it by ref: open, one ``browser_fill_form`` of all 20 (text
  ``value``, the select's ``values``, the checkbox ``checked``), click. Playwright MCP the same way.
- ``checkout``: the test site's three pages (shipping, billing, confirmation) by ref: open, fill the
  address, click, fill the card, click.

Servers: ``kitsune mcp --bridge`` to a ``kitsune serve`` with every group on (``core,automation``), and
Playwright MCP 0.0.86 on the same Debian Chromium, headless, both over stdio with the SDK's own client.
Goal: Kitsune at most 0.4x Playwright MCP's bytes.

    PYTHONPATH=. .venv/bin/python bench/context.py [--playwright-mcp PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for bench and tests.site

from bench.first_answer import CHROMIUM, KITSUNE
from bench.form20 import FIELDS, TOKEN, FormSite, batch, value
from bench.shared import ServedNode, load_line
from bench.snapshot import INSTALLED, VERSION, pinned_playwright_mcp
from tests.site import TestSite
from tests.site.pages import LONG_FORM_FIELDS

GOAL = 0.4
_ELEMENT = re.compile(r'^\s*(?:[+~-] )?(?:- )?(?P<role>[a-z]+) "(?P<name>(?:[^"\\]|\\.)*)"'
                      r"[^\n]*?\[ref=(?P<ref>[a-z0-9]+)\]", re.MULTILINE)
SIGN_UP = {label: f"{label.split()[0].lower()}-value" for _, label in LONG_FORM_FIELDS} | {
    "Email": "ada@example.test", "Website": "https://ada.example.test", "Phone": "+33 1 23 45 67 89"}


def pick(text: str, role: str, name: str) -> str:
    """The ref of the one element of ``role`` named ``name`` in a snapshot's text (either server's)."""
    hits = [m["ref"] for m in _ELEMENT.finditer(text) if (m["role"], json.loads(f'"{m["name"]}"')) == (role, name)]
    if len(hits) != 1:
        raise SystemExit(f'{len(hits)} elements are {role} "{name}" in:\n{text[:3000]}')
    return hits[0]


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


@dataclass
class Conversation:
    """One task's calls on one server, and what the model carried for them."""

    session: ClientSession
    listing: int
    """The tool list's bytes."""
    calls: list[tuple[str, int, int]] = field(default_factory=list)
    """(tool, bytes of its arguments, bytes of its result's text) in order."""
    page: str = ""
    """The last snapshot the model read (a result holding one, or the last snapshot's text)."""

    async def use(self, tool: str, arguments: dict[str, Any]) -> str:
        result = await self.session.call_tool(tool, arguments)
        text = text_of(result)
        if result.is_error or '"error"' in text[:400]:
            raise SystemExit(f"{tool}: {text[:1000]}")
        self.calls.append((tool, len(json.dumps(arguments).encode()), len(text.encode())))
        if "\nsnapshot:\n" in text or "```yaml" in text:  # a whole snapshot (Kitsune's, Playwright MCP's)
            self.page = text
        return text

    def carried(self) -> dict[str, int]:
        turns = len(self.calls) + 1
        later = [turns - k for k in range(1, turns)]  # turns that read call k again (k from 1)
        return {"calls": len(self.calls), "list": turns * self.listing,
                "arguments": sum(n * a for n, (_, a, _) in zip(later, self.calls, strict=True)),
                "results": sum(n * r for n, (_, _, r) in zip(later, self.calls, strict=True))}


Task = Callable[[Conversation], Awaitable[None]]


async def kitsune_open(c: Conversation, url: str) -> int:
    """A new tab at ``url``, whose answer is the page's snapshot."""
    opened = await c.use("browser_tabs", {"op": "new", "url": url})
    assert c.page == opened, opened
    return int(json.JSONDecoder().raw_decode(opened[opened.index("\n{") + 1:])[0]["tabId"])


async def their_look(c: Conversation, answer: str) -> str:
    """Playwright MCP's answer to a navigation or a click, or, when it only links the page's snapshot to a file
    (``- [Snapshot](.playwright-mcp/page-....yml)``, which the model cannot read with these tools), a
    ``browser_snapshot``."""
    return answer if "```yaml" in answer else await c.use("browser_snapshot", {})


def _fields(labels: dict[str, str], page: str, role: str = "textbox") -> list[dict[str, str]]:
    return [{"ref": pick(page, role, label), "value": v} for label, v in labels.items()]


def _their_fields(labels: dict[str, str], page: str) -> list[dict[str, str]]:
    return [{"target": pick(page, "textbox", label), "name": label, "type": "textbox", "value": v}
            for label, v in labels.items()]


def form20_values(round_: int) -> dict[str, str]:
    return {f"Field {i}": value(round_, i) for i in range(FIELDS)}


async def _close(c: Conversation, tab: int) -> None:
    await c.session.call_tool("browser_tabs", {"op": "close", "tabId": tab})  # after the task: not counted


def tasks(form: FormSite, site: TestSite) -> dict[str, dict[str, Task]]:
    """Each task's way on each side: ``kitsune ...`` or ``playwright``."""

    async def batch_form(c: Conversation) -> None:
        form.expect(0)
        answer = await c.use("browser_batch", batch(form.url, 0))
        form.verify("kitsune batch", answer)

    async def ref_form(c: Conversation) -> None:
        form.expect(1)
        tab = await kitsune_open(c, form.url)
        await c.use("browser_fill_form", {"tabId": tab, "fields": _fields(form20_values(1), c.page)})
        form.verify("kitsune by ref", await c.use("browser_click", {"tabId": tab, "ref": pick(c.page, "button",
                                                                                               "Send")}))
        await _close(c, tab)

    async def their_form(c: Conversation) -> None:
        form.expect(2)
        await their_look(c, await c.use("browser_navigate", {"url": form.url}))
        await c.use("browser_fill_form", {"fields": _their_fields(form20_values(2), c.page)})
        sent = await c.use("browser_click", {"element": "Send", "target": pick(c.page, "button", "Send")})
        form.verify("playwright", await their_look(c, sent))

    async def ref_sign_up(c: Conversation) -> None:
        tab = await kitsune_open(c, site.url("/form20"))
        fields = [*_fields(SIGN_UP, c.page), {"ref": pick(c.page, "combobox", "Country"), "values": ["Japan"]},
                  {"ref": pick(c.page, "checkbox", "I accept the terms"), "checked": True}]
        await c.use("browser_fill_form", {"tabId": tab, "fields": fields})
        done = await c.use("browser_click", {"tabId": tab, "ref": pick(c.page, "button", "Create account")})
        assert "20 of 20 fields received" in done, done
        await _close(c, tab)

    async def their_sign_up(c: Conversation) -> None:
        await their_look(c, await c.use("browser_navigate", {"url": site.url("/form20")}))
        fields = [*_their_fields(SIGN_UP, c.page),
                  {"target": pick(c.page, "combobox", "Country"), "name": "Country", "type": "combobox",
                   "value": "Japan"},
                  {"target": pick(c.page, "checkbox", "I accept the terms"), "name": "I accept the terms",
                   "type": "checkbox", "value": "true"}]
        await c.use("browser_fill_form", {"fields": fields})
        done = await their_look(c, await c.use("browser_click", {"element": "Create account",
                                                                 "target": pick(c.page, "button", "Create account")}))
        assert "20 of 20 fields received" in done, done

    async def ref_checkout(c: Conversation) -> None:
        tab = await kitsune_open(c, site.url("/checkout/shipping"))
        await c.use("browser_fill_form", {"tabId": tab, "fields": _fields({"Address": "1 Fox Lane"}, c.page)})
        await c.use("browser_click", {"tabId": tab, "ref": pick(c.page, "button", "Continue to billing")})
        await c.use("browser_fill_form", {"tabId": tab, "fields": _fields({"Card": "4242424242424242"}, c.page)})
        done = await c.use("browser_click", {"tabId": tab, "ref": pick(c.page, "button", "Place order")})
        assert "ORDER-" in done, done
        await _close(c, tab)

    async def their_checkout(c: Conversation) -> None:
        await their_look(c, await c.use("browser_navigate", {"url": site.url("/checkout/shipping")}))
        await c.use("browser_fill_form", {"fields": _their_fields({"Address": "1 Fox Lane"}, c.page)})
        await their_look(c, await c.use("browser_click", {"element": "Continue",
                                                          "target": pick(c.page, "button", "Continue to billing")}))
        await c.use("browser_fill_form", {"fields": _their_fields({"Card": "4242424242424242"}, c.page)})
        done = await their_look(c, await c.use("browser_click", {"element": "Place order",
                                                                 "target": pick(c.page, "button", "Place order")}))
        assert "ORDER-" in done, done

    return {"form20": {"kitsune batch": batch_form, "kitsune by ref": ref_form, "playwright": their_form},
            "sign-up": {"kitsune by ref": ref_sign_up, "playwright": their_sign_up},
            "checkout": {"kitsune by ref": ref_checkout, "playwright": their_checkout}}


EXPECTED = {"sign-up": {"POST /form20": 1}, "checkout": {"POST /checkout/shipping": 1, "POST /checkout/billing": 1}}
"""Each task's writes at the test site, counted once each (form20's site checks its own)."""


async def _session(stack: AsyncExitStack, parameters: StdioServerParameters) -> tuple[ClientSession, int]:
    quiet = stack.enter_context(open(os.devnull, "w"))  # noqa: SIM115 (the stack closes it)
    read, write = await stack.enter_async_context(stdio_client(parameters, errlog=quiet))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    listed = await session.list_tools()
    return session, len(listed.model_dump_json(by_alias=True, exclude_none=True).encode())


async def run(launcher: Path, folder: Path) -> dict[str, dict[str, Conversation]]:
    form, site = FormSite(), TestSite()
    site.start()
    node = ServedNode(Path(tempfile.mkdtemp(prefix="kitsune-bench-context-")), TOKEN)
    inherited = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    kitsune = StdioServerParameters(command=str(KITSUNE), env={**inherited, "KITSUNE_CAPS": "core,automation"},
                                    args=["mcp", "--bridge", node.base, "--token-file", str(node.token_file)])
    root = ["--no-sandbox"] if os.geteuid() == 0 else []
    playwright = StdioServerParameters(command=str(launcher), cwd=folder,  # it writes snapshots to files there
                                       args=["--executable-path", CHROMIUM, "--headless", "--isolated", *root])
    done: dict[str, dict[str, Conversation]] = {}
    try:
        async with AsyncExitStack() as stack:
            sessions = {"kitsune": await _session(stack, kitsune), "playwright": await _session(stack, playwright)}
            for task, ways in tasks(form, site).items():
                for way, script in ways.items():
                    site.reset()
                    conversation = Conversation(*sessions[way.split()[0]])
                    await script(conversation)
                    await anyio.sleep(0.3)
                    if task in EXPECTED and site.counts() != EXPECTED[task]:
                        raise SystemExit(f"{task} / {way}: the site counted {site.counts()}")
                    done.setdefault(task, {})[way] = conversation
        return done
    finally:
        node.stop()
        site.stop()
        form.stop()


def report(done: dict[str, dict[str, Conversation]], load_before: tuple[float, ...]) -> None:
    print(f"what a model carries: {load_line(load_before, os.getloadavg())}")
    listing = {way.split()[0]: c.listing for ways in done.values() for way, c in ways.items()}
    print(f"tool lists: kitsune (core,automation) {listing['kitsune']} bytes, Playwright MCP {VERSION} "
          f"{listing['playwright']} bytes")
    print("  task     | way            | calls |   list x turns | arguments | results |   total | x PW")
    for task, ways in done.items():
        theirs = sum(ways["playwright"].carried().values()) - ways["playwright"].carried()["calls"]
        for way, conversation in ways.items():
            carried = conversation.carried()
            total = carried["list"] + carried["arguments"] + carried["results"]
            print(f"  {task:8s} | {way:14s} | {carried['calls']:5d} | {carried['list']:14d} | "
                  f"{carried['arguments']:9d} | {carried['results']:7d} | {total:7d} | {total / theirs:.2f}")
        for way, conversation in ways.items():
            print(f"    {way}: " + ", ".join(f"{tool} {a}+{r}" for tool, a, r in conversation.calls))
    print(f"goal: kitsune <= {GOAL}x Playwright MCP's bytes (x PW above)")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--playwright-mcp", help="Playwright MCP's launcher (default: the one installed at "
                                                 f"{INSTALLED}, else npm install into a temp folder)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="kitsune-bench-") as folder:
        launcher = pinned_playwright_mcp(args.playwright_mcp, Path(folder))
        done = anyio.run(run, launcher, Path(folder))
    report(done, load_before)


if __name__ == "__main__":
    main()
