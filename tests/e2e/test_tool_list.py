"""What a model carries and what a habit from other tools meets (issue 30), with the SDK's own client on a
live node: a tool list smaller than Playwright MCP's with the whole grammar a resource, container bodies
still checked whole by the bridge, refused keys named with the right one, and a batch's new tab current."""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types
import pytest
from mcp import ClientSession

from tests.e2e.clients import call, open_tab, over_http, over_stdio
from tests.integration.serving import Served
from tests.site import TestSite

pytestmark = pytest.mark.anyio

BUDGET = 12_400
"""Bytes the whole ``tools/list`` may take with every group on, as the SDK's client holds it in JSON:
Playwright MCP 0.0.86 lists 21,266 (``bench/tool_list.py``); Kitsune's is about 12,200 (0.57 of it, 27
tools: the CDP and DevTools tools and task forks made it grow from 12,035)."""


async def _listed_bytes_and_schema(session: ClientSession) -> tuple[int, Any]:
    listed = await session.list_tools()
    resources = await session.list_resources()
    assert [str(r.uri) for r in resources.resources] == ["kitsune://schema"]
    read = await session.read_resource("kitsune://schema")
    (contents,) = read.contents
    assert isinstance(contents, types.TextResourceContents) and contents.mime_type == "application/json"
    return len(listed.model_dump_json(by_alias=True, exclude_none=True).encode()), json.loads(contents.text)


async def test_the_tool_list_costs_less_than_playwright_mcp_s_and_the_whole_grammar_is_a_resource(
        plain: Served) -> None:
    with plain.client("alice") as client:
        published = client.get("/api/schema").json()
    async with over_http(plain) as session:
        size, schema = await _listed_bytes_and_schema(session)
        assert size <= BUDGET, size
        assert schema == published
    async with over_stdio(plain) as session:  # the front answers tools/list, the SDK the resource
        size, schema = await _listed_bytes_and_schema(session)
        assert size <= BUDGET, size
        assert schema == published


async def test_a_container_command_the_short_schema_does_not_describe_is_still_refused_whole_by_the_bridge(
        plain: Served, site: TestSite) -> None:
    tab = open_tab(plain, site.url("/clicks"))
    async with over_http(plain) as session:
        listed = {tool.name: tool.input_schema for tool in (await session.list_tools()).tools}
        assert listed["browser_batch"]["properties"]["commands"]["items"] == {"type": "object"}  # only the grammar's
        assert listed["browser_parallel"]["properties"]["sequences"]["items"]["items"] == {"type": "object"}  # words
        nested = await call(session, "browser_batch", {"tabId": tab, "commands": [
            {"action": "click", "selector": "#hit"},
            {"action": "sequence", "steps": [{"action": "click", "selector": "#hit"},
                                             {"action": "click", "selector": "#hit", "clickCount": 9}]}]})
        assert nested["code"] == "invalid_parameter" and nested["state"]["path"] == "1.1", nested
        unknown = await call(session, "browser_parallel", {"sequences": [[
            {"action": "click", "selector": "#hit", "tabId": tab, "button": "left", "wiat": 1}]]})
        assert unknown["code"] == "unknown_parameter" and unknown["state"]["path"] == "0.0.0", unknown
        reference = await call(session, "browser_batch", {"tabId": tab, "commands": [
            {"action": "find", "text": "${$1.url}"}, {"action": "url"}]})
        assert reference["code"] == "bad_reference" and reference["state"]["path"] == "0", reference
    assert site.count("POST /clicks/hit") == 0  # nothing of a refused call was sent


async def test_a_refused_argument_names_the_key_and_the_one_the_tool_takes(plain: Served) -> None:
    async with over_http(plain) as session:
        refused = await call(session, "browser_tabs", {"action": "list"})
        assert refused["code"] == "unknown_parameter" and refused["state"]["param"] == "action", refused
        assert refused["error"] == "unknown parameter 'action'; browser_tabs takes 'op'"
        assert (await call(session, "browser_tabs", {"op": "list"}))["tabs"] is not None


async def test_after_a_batch_opened_a_tab_a_direct_tool_with_no_tab_id_acts_on_it(
        plain: Served, site: TestSite) -> None:
    first = open_tab(plain, site.url("/clicks"))  # current until the batch opens another
    async with over_http(plain) as session:
        batch = await call(session, "browser_batch", {"tabId": first, "commands": [
            {"action": "title"}, {"action": "sequence", "steps": [{"action": "newTab", "url": site.url("/form")}]}]})
        assert batch["status"] == "ok", batch
        opened = batch["results"][1]["results"][0]["tabId"]
        assert opened != first
        text = await call(session, "browser_page_text", {})
        assert "Form" in text["text"], text
        shot = await session.call_tool("browser_screenshot", {})
        assert not shot.is_error and any(isinstance(c, types.ImageContent) for c in shot.content), shot
        assert (await call(session, "browser_tabs", {}))["current"] == opened
    with plain.client("alice") as client:  # the HTTP API: the same current tab after a batch
        answer = client.post("/api/batch", json={"commands": [{"action": "newTab", "url": site.url("/links")}]}).json()
        assert answer["status"] == "ok", answer
        title = client.post("/api/act", json={"command": {"action": "title"}}).json()
        assert title["status"] == "ok" and title["title"] == "Links", title
        assert client.get("/api/tabs").json()["current"] == answer["results"][0]["tabId"]
