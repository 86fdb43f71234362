"""A hostile page's site tools on a real node (issue 29, section 1): a page must not make the node act.

The page here is the test itself, evaluating ``navigator.modelContext`` calls in a tab of the test site: a
schema whose ``$ref`` names a forbidden listener (that counts every connection), a local file or a server
that accepts and never answers is ``invalid_schema``, listed as such, never fetched and never called; a
pattern that backtracks catastrophically is stopped within its bound while the node's loop stays free for
everyone else; each per-document limit is refused by name; the ``siteTools`` answer is bounded; a tool the page
declares ``readOnlyHint`` is a read for a read-only or asking agent, and no other tool is (issue 32); a page that
floods its console reaches the node's loop with a bounded part of it, and its tools work after.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge.node import Node
from driver.site_tools import channel, declarations
from tests.integration.calls import batch
from tests.integration.fleet_nodes import until
from tests.integration.serving import Served, open_tab
from tests.nodes import open_user_tab
from tests.site import TestSite
from tests.site.forbidden import Forbidden

PAGE = "/clicks"
CALLED = "window.__called || 0"
"""How many times the test page's tools ran."""


def on_page(node: Node, tab: int, script: str) -> Any:
    """``script`` evaluated in the tab's page, as the page's own script."""
    return node.io.run(node.browser.page(tab).evaluate(script), timeout=60)


def register(node: Node, tab: int, tools: str) -> list[str]:
    """Register the tools of the JS array expression ``tools`` (each ``execute`` counts its runs); how each
    registration went: ``ok`` or the rejection's message."""
    script = f"""async () => {{
      const tools = {tools};
      return Promise.all(tools.map((tool) => navigator.modelContext.registerTool({{
          ...tool, execute: async () => {{ window.__called = (window.__called || 0) + 1; return "ran"; }}}})
        .then(() => "ok", (e) => e.message)));
    }}"""
    answered: list[str] = on_page(node, tab, script)
    return answered


def one(node: Node, tab: int, command: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    body = batch(node, [command], tabId=tab)
    return body, body["results"][0]


def listing(node: Node, tab: int) -> dict[str, Any]:
    return one(node, tab, {"action": "siteTools"})[1]


@pytest.fixture
def silent() -> Iterator[str]:
    """The URL of a server that accepts connections (the kernel's backlog) and never answers."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/s.json"


def test_a_schema_that_refers_to_another_resource_is_invalid_never_fetched_never_called(
        node: Node, site: TestSite, silent: str, tmp_path: Path) -> None:
    secret = tmp_path / "schema.json"
    secret.write_text(json.dumps({"type": "integer"}))
    with Forbidden() as forbidden:
        refs = {"remote": forbidden.url("/s.json"), "inner": forbidden.url("/defs.json#/x"),
                "file": secret.as_uri(), "silent": silent}
        tab = open_user_tab(node, site.url(PAGE))
        tools = [{"name": name, "inputSchema": {"type": "object", "properties": {"q": {"$ref": ref}}}}
                 for name, ref in refs.items()]
        assert register(node, tab, json.dumps(tools)) == ["ok"] * 4  # kept, to be listed as invalid
        listed = {t["name"]: t for t in listing(node, tab)["tools"]}
        for name, ref in refs.items():
            assert ref in listed[name]["invalid"], listed[name]
            started = time.monotonic()
            body, result = one(node, tab, {"action": "callSiteTool", "name": name, "input": {"q": "x"}})
            assert time.monotonic() - started < 5  # the silent server holds nothing
            assert (body["status"], result["code"], result["state"]["tool"]) == ("failed", "invalid_schema", name)
            assert "nothing was sent" in result["error"]
        time.sleep(0.3)  # not a wait for something to happen: a window in which nothing may arrive
        assert forbidden.contacts == (0, 0)
    assert on_page(node, tab, CALLED) == 0


def _lag_while(node: Node, work: Any) -> tuple[list[float], Any]:
    """How late each 10 ms sleep on the node's loop woke while ``work()`` ran (from another thread), and what
    ``work`` returned."""
    done = False

    async def measure() -> list[float]:
        loop, lags = asyncio.get_running_loop(), list[float]()
        while not done:
            before = loop.time()
            await asyncio.sleep(0.01)
            lags.append(loop.time() - before - 0.01)
        return lags

    lag = asyncio.run_coroutine_threadsafe(measure(), node.io.loop)
    try:
        result = work()
    finally:
        done = True
    return lag.result(timeout=30), result


FLOOD = """async () => {{
  const declare = (schema) => Array.from({{length: {tools}}}, (_, i) => ({{name: "t" + i, description: "d".repeat(4000),
    inputSchema: schema, execute: async () => "ran"}}));
  const top = declare({top}), theirs = declare({schema});
  const frames = await Promise.all(Array.from({{length: {frames}}}, () => new Promise((loaded) => {{
    const frame = document.createElement("iframe");
    frame.src = "/text";
    frame.onload = () => loaded(frame.contentWindow);
    document.body.append(frame);
  }})));
  const answers = {{}};
  const end = Date.now() + {seconds} * 1000;
  await Promise.all([window, ...frames].map(async (w) => {{
    const tools = w === window ? top : theirs;
    while (Date.now() < end) {{  // every tool again, as fast as the node answers
      w.navigator.modelContext.clearContext();
      const given = await Promise.all(tools.map((t) => w.navigator.modelContext.registerTool(t).then(() => "ok",
        (e) => e.message.split(": ")[1])));
      given.forEach((name) => {{ answers[name] = (answers[name] || 0) + 1; }});
    }}
  }}));
  return answers;
}}"""
"""A hostile page: its top document declares ``tools`` tools of ``top``, and each of its ``frames`` frames ``tools``
of ``schema``, again and again for ``seconds``; how many declarations the node took (``ok``) and refused, by the
limit's name."""


def test_a_backtracking_pattern_and_a_flood_of_declarations_leave_the_loop_free(node: Node, site: TestSite) -> None:
    """The loop's lateness for everyone else while a hostile page floods declarations and a pattern backtracks.

    The page's top document declares 60 kB schemas of 20,000 empty arrays (which the node used to parse and walk on
    its loop, 50 ms each) and three frames 60 kB ones, again and again for 4 s. Measured as a 10 ms sleep on the
    node's loop, woken again and again meanwhile (some 300 samples): the 95th percentile is under 100 ms (the
    issue's bound) and the worst under 2.5 s. The percentile is the statistic because the work the page makes the
    node do shows in every sample it delays (before the fix: 150 ms), while a lone late sample is as likely to be
    the machine's: on 2 shared cores beside two CPU hogs (``stress-ng --cpu 2``), Chromium running the flood and
    Playwright's driver take turns with the loop's thread, and the scheduler may hold any thread for a time slice
    or several (an idle loop there was late by up to 165 ms; once, in session 24's run beside it, a sample was held
    1.51 s). The worst is bounded too, below the hostile delays the issue measured (4-9 s for a pattern, a 25 s hold
    for a ``$ref``; this test's sentence backtracks for minutes), so that one long hold cannot hide behind the
    percentile.
    """
    tab, flood = open_user_tab(node, site.url(PAGE)), open_user_tab(node, site.url(PAGE))
    pattern = {"type": "object", "properties": {"q": {"type": "string", "pattern": r"^(\w+\s?)*$"}}}
    assert register(node, tab, json.dumps([{"name": "hostile", "inputSchema": pattern}])) == ["ok"]
    assert one(node, tab, {"action": "callSiteTool", "name": "hostile", "input": {"q": "warm"}})[0]["status"] == "ok"
    sentence = "an ordinary sentence of the kind an agent types and long enough to backtrack for minutes!"
    big = {"type": "object", "description": "x" * 60_000}
    dense = {"type": "object", "examples": [[]] * 20_000}  # 60 kB of empty arrays: a parse that costs

    def hostile() -> tuple[dict[str, Any], dict[str, int]]:
        with concurrent.futures.ThreadPoolExecutor(1) as apart:
            declared = apart.submit(on_page, node, flood, FLOOD.format(
                top=json.dumps(dense), schema=json.dumps(big), tools=300, frames=3, seconds=4))
            result = one(node, tab, {"action": "callSiteTool", "name": "hostile", "input": {"q": sentence}})[1]
            return result, declared.result(timeout=60)

    started = time.monotonic()
    lags, (result, answers) = _lag_while(node, hostile)
    assert (result["code"], result["state"]["rule"]) == ("invalid_input", "timeout"), result
    assert time.monotonic() - started < 30
    lags.sort()
    p95, worst = lags[int(len(lags) * 0.95)], lags[-1]
    print(f"loop lateness over {len(lags)} samples: median {lags[len(lags) // 2] * 1000:.1f} ms, p95 {p95 * 1000:.1f} "
          f"ms, worst {worst * 1000:.1f} ms; declarations {answers}")
    assert all(answers.get(name, 0) > 0 for name in ("tool_count", "declaration_rate", "schema_nodes")), answers
    assert p95 < 0.1, f"the node's loop was late by {p95:.3f}s or more in 5% of {len(lags)} samples"
    assert worst < 2.5, f"the node's loop was held {worst:.3f}s"
    assert on_page(node, tab, CALLED) == 1  # the warm-up call only


def test_each_per_document_limit_is_refused_by_name_and_the_site_tools_answer_is_bounded(
        node: Node, site: TestSite) -> None:
    tab = open_user_tab(node, site.url(PAGE))
    deep = "{\"a\":" * 40 + "{}" + "}" * 40
    refused = register(node, tab, f"""[
        {{name: "long", description: "d".repeat({declarations.MAX_DESCRIPTION + 1})}},
        {{name: "big", inputSchema: {{description: "x".repeat({declarations.MAX_SCHEMA_BYTES})}}}},
        {{name: "deep", inputSchema: {deep}}}]""")
    assert [answer.split(": ")[1] for answer in refused] == ["description_length", "schema_size", "schema_depth"]
    big = {"type": "object", "description": "x" * 60_000}
    answers = register(node, tab, f"""Array.from({{length: {declarations.MAX_TOOLS + 2}}}, (_, i) => (
        {{name: "t" + i, inputSchema: {json.dumps(big)}}}))""")
    assert answers[:declarations.MAX_TOOLS] == ["ok"] * declarations.MAX_TOOLS
    assert all("tool_count" in answer for answer in answers[declarations.MAX_TOOLS:]), answers[-2:]
    answer = listing(node, tab)
    assert len(json.dumps(answer)) < declarations.MAX_LISTED + 16 * 1024
    kept = len(answer["tools"])
    assert answer["truncated"]["tools"] == declarations.MAX_TOOLS - kept > 0
    assert answer["truncated"]["names"] == [f"t{i}" for i in range(kept, declarations.MAX_TOOLS)]
    body, result = one(node, tab, {"action": "callSiteTool", "name": f"t{declarations.MAX_TOOLS - 1}", "input": {}})
    assert (body["status"], result["output"]) == ("ok", "ran"), body  # left out of the answer, callable all the same
    assert one(node, tab, {"action": "callSiteTool", "name": "deep", "input": {}})[1]["code"] == "site_tool_not_found"


# --- what a tab's documents hold together -------------------------------------------------------------------------

FRAMES = """async () => {{
  const frames = await Promise.all(Array.from({{length: {count}}}, () => new Promise((loaded) => {{
    const frame = document.createElement("iframe");
    frame.src = "/text";
    frame.onload = () => loaded(frame);
    document.body.append(frame);
  }})));
  const answers = [];
  for (const frame of frames) {{  // one frame after the other: which one is refused first is known
    answers.push(await Promise.all(Array.from({{length: {tools}}}, (_, i) => frame.contentWindow.navigator.modelContext
      .registerTool({{name: "t" + i, description: "d".repeat(4000), inputSchema: {schema}, execute: async () => "ran"}})
      .then(() => "ok", (e) => e.message.split(": ")[1]))));
  }}
  return answers;
}}"""
"""Add ``count`` iframes of the test site to the page, each declaring ``tools`` tools of ``schema`` (a JS
expression); each registration's answer: ``ok`` or the name of the limit that refused it."""


def held(node: Node, tab: int) -> dict[str, int]:
    """What the node holds of the tab's documents, counted on its loop."""
    async def counted() -> dict[str, int]:
        return node.browser.site_tools.held(tab)
    return node.io.run(counted(), timeout=10)


def test_a_tab_s_frames_hold_a_bounded_total_of_tools_and_schema_bytes_each_refusal_named(
        node: Node, site: TestSite) -> None:
    big = {"type": "object", "description": "x" * 60_000}
    size = len(json.dumps(big, separators=(",", ":")))
    tab = open_user_tab(node, site.url(PAGE))
    assert register(node, tab, f"""Array.from({{length: {declarations.MAX_TOOLS}}}, (_, i) => (
        {{name: "top" + i, inputSchema: {json.dumps(big)}}}))""") == ["ok"] * declarations.MAX_TOOLS
    frames = 6  # each declaring the most one document may: 6 x 64 x 60 kB, where the frames' 4 MiB fit 69
    answers = [a for frame in on_page(node, tab, FRAMES.format(count=frames, tools=declarations.MAX_TOOLS,
                                                                 schema=json.dumps(big))) for a in frame]
    fits = declarations.MAX_FRAME_SCHEMA_BYTES // size
    assert answers[:fits] == ["ok"] * fits and answers[fits] == "tab_schema_size", answers[fits]
    assert set(answers[fits:]) <= {"tab_schema_size", "declaration_rate"}  # 23 MB at once: past the rate too
    tools = declarations.MAX_TOOLS + fits  # the top document's own, and what the frames hold together
    assert held(node, tab) == {"documents": 1 + frames, "tools": tools, "schema_bytes": tools * size}

    small = open_user_tab(node, site.url(PAGE))  # the count of tools, with schemas that fit
    answers = [a for frame in on_page(node, small, FRAMES.format(count=frames, tools=declarations.MAX_TOOLS,
                                                                   schema="{}")) for a in frame]
    assert answers == ["ok"] * declarations.MAX_FRAME_TOOLS + ["tab_tool_count"] * (
        frames * declarations.MAX_TOOLS - declarations.MAX_FRAME_TOOLS)
    assert held(node, small)["tools"] == declarations.MAX_FRAME_TOOLS


def test_a_tab_s_documents_are_bounded_and_those_of_removed_frames_dropped(node: Node, site: TestSite) -> None:
    tab = open_user_tab(node, site.url(PAGE))
    assert held(node, tab)["documents"] == 0  # a document the node holds is one that spoke to it: none has yet
    assert register(node, tab, '[{"name": "top"}]') == ["ok"]
    over = declarations.MAX_TAB_DOCUMENTS + 8
    answers = on_page(node, tab, FRAMES.format(count=over, tools=1, schema="{}"))
    assert sum(answer == ["ok"] for answer in answers) == declarations.MAX_TAB_DOCUMENTS - 1  # with the top one
    assert {a for answer in answers for a in answer} == {"ok", "tab_documents"}
    assert held(node, tab)["documents"] == declarations.MAX_TAB_DOCUMENTS
    churn = """async () => {
      document.querySelectorAll("iframe").forEach((frame) => frame.remove());
      for (let round = 0; round < 6; round++) {  // 300 frames made and removed, 50 at a time
        const frames = await Promise.all(Array.from({length: 50}, () => new Promise((loaded) => {
          const frame = document.createElement("iframe");
          frame.src = "/text";
          frame.onload = () => loaded(frame);
          document.body.append(frame);
        })));
        frames.forEach((frame) => frame.remove());
      }
    }"""
    on_page(node, tab, churn)
    deadline = time.monotonic() + 10
    while (documents := held(node, tab)["documents"]) > 1 and time.monotonic() < deadline:
        time.sleep(0.1)  # a frame's removal reaches the node as an event of its own, after the page's script
    assert documents == 1  # the top document only: nothing of the 300 frames is left on the node
    answers = on_page(node, tab, FRAMES.format(count=2, tools=1, schema="{}"))
    assert answers == [["ok"], ["ok"]]  # the removed frames' places are free again


def test_a_site_tool_call_whose_step_time_runs_out_in_the_check_is_counted_failed(node: Node, site: TestSite) -> None:
    tab = open_user_tab(node, site.url(PAGE))
    pattern = {"type": "object", "properties": {"q": {"type": "string", "pattern": r"^(\w+\s?)*$"}}}
    assert register(node, tab, json.dumps([{"name": "slow", "inputSchema": pattern}])) == ["ok"]

    def failed() -> float:
        return node.metrics.registry.get_sample_value("kitsune_site_tool_calls_total", {"outcome": "failed"}) or 0.0
    before = failed()
    sentence = "an ordinary sentence that goes on long enough to backtrack for ever!"
    body, result = one(node, tab, {"action": "callSiteTool", "name": "slow", "input": {"q": sentence}, "timeout": 0.5})
    assert (body["status"], result["code"]) == ("failed", "timeout"), body
    assert failed() == before + 1
    assert on_page(node, tab, CALLED) == 0


# --- readOnlyHint -----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def agents(tenants: Served) -> Iterator[dict[str, httpx.Client]]:
    """bob writes, alice is read-only, carol asks before acting: agents of the session's ``tenants`` node."""
    clients = {name: tenants.client(name) for name in ("bob", "alice", "carol")}
    yield clients
    for client in clients.values():
        client.close()


def _act(client: httpx.Client, command: dict[str, Any], **confirm: str) -> dict[str, Any]:
    answer: dict[str, Any] = client.post("/api/act", json={"command": command, **confirm}).json()
    return answer


def _search(client: httpx.Client, tab: int, **confirm: str) -> dict[str, Any]:
    return _act(client, {"action": "callSiteTool", "tabId": tab, "name": "search", "input": {"query": "coat"}},
                **confirm)


def test_a_tool_its_page_declares_read_only_is_a_read_for_read_only_and_asking_agents_and_no_other_tool_is(
        site: TestSite, agents: dict[str, httpx.Client]) -> None:
    tab, wishlist = open_tab(agents["bob"], site.url("/shop")), open_tab(agents["bob"], site.url("/shop/wishlist"))
    listed = _act(agents["bob"], {"action": "siteTools", "tabId": tab})
    assert listed["tools"][0]["annotations"] == {"readOnlyHint": True}
    found = _search(agents["alice"], tab)  # read-only, on bob's tab: a read, as pageText would be
    assert found["status"] == "ok" and found["output"]["results"][0]["id"] == "coat-wool", found
    refused = _act(agents["alice"], {"action": "callSiteTool", "tabId": wishlist, "name": "wish",
                                     "input": {"item_id": "coat-wool"}})
    assert (refused["status"], refused.get("code")) == ("failed", "read_only"), refused

    opened = agents["carol"].post("/api/tabs", json={"op": "open", "url": site.url("/shop/wishlist")}).json()
    carols = _act(agents["carol"], {"action": "newTab", "url": site.url("/shop/wishlist")},
                  confirm_token=opened["state"]["confirm_token"])["tabId"]
    stock = _act(agents["carol"], {"action": "callSiteTool", "tabId": carols, "name": "stock",
                                   "input": {"item_id": "coat-wool"}})
    assert stock["status"] == "ok" and stock["output"] == {"item_id": "coat-wool", "in_stock": True}, stock
    wish = {"action": "callSiteTool", "tabId": carols, "name": "wish", "input": {"item_id": "coat-wool"}}
    held = _act(agents["carol"], wish)
    assert (held["status"], held.get("code")) == ("held", "needs_user"), held
    time.sleep(0.3)  # not a wait for something to happen: a window in which nothing may be sent
    assert site.count("POST /shop/wish") == 0
    confirmed = _act(agents["carol"], wish, confirm_token=held["state"]["confirm_token"])
    assert confirmed["status"] == "ok" and confirmed["output"] == {"wished": "coat-wool"}, confirmed
    assert site.count("POST /shop/wish") == 1


# --- what a page's noise costs the node -----------------------------------------------------------------------

CONSOLE_FLOOD = """() => new Promise((flooded) => {
  window.logged = 0;
  const flood = setInterval(() => {
    for (let i = 0; i < 200; i++) console.log("noise", window.logged++, {i});
    if (window.logged >= 30000) {
      clearInterval(flood);
      flooded(window.logged);
    }
  }, 1);
})"""
"""Logs console messages (with an object each) as fast as the page can, 30,000 of them; how many."""


def test_a_page_that_floods_its_console_goes_unheard_awhile_and_its_tools_work_after(
        node: Node, site: TestSite, monkeypatch: pytest.MonkeyPatch) -> None:
    heard: list[str] = []
    noisy = channel.Channel._noisy

    def counted(self: channel.Channel, event: Any) -> None:
        heard.append(event.get("type", "?"))
        noisy(self, event)
    monkeypatch.setattr(channel.Channel, "_noisy", counted)  # as the page's channel opens
    monkeypatch.setattr(channel, "QUIET", 5.0)
    tab = open_user_tab(node, site.url("/shop"))
    logged = on_page(node, tab, CONSOLE_FLOOD)
    assert len(heard) < logged / 4, (len(heard), logged)  # what reached the node's loop: a part, bounded
    body, result = one(node, tab, {"action": "callSiteTool", "name": "search", "input": {"query": "coat"}})
    assert body["status"] == "ok" and result["output"]["results"][0]["id"] == "coat-wool", body
    node.io.run(node.browser.page(tab).goto(site.url("/shop/wishlist")), timeout=30)  # a document after the noise
    tools = until(lambda: listing(node, tab)["tools"], 60, "the next document's tools")  # once the flood drained
    assert [t["name"] for t in tools] == ["stock", "wish"]
