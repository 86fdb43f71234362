"""Snapshots over MCP with the SDK's own client (issue 30): ``browser_snapshot`` gives refs, a direct write
takes one and answers what changed on the page after it, each write counted once at the site."""

from __future__ import annotations

import re
import time

import pytest

from tests.e2e.clients import call, open_tab, over_http
from tests.integration.serving import Served
from tests.site import TestSite

pytestmark = pytest.mark.anyio


def ref_of(text: str, line: str) -> str:
    row = next(row for row in text.splitlines() if line in row)
    found = re.search(r"\[ref=(t\d+d\d+(?:f\d+)?e\d+)\]", row)
    assert found is not None, row
    return found.group(1)


async def test_browser_snapshot_gives_refs_and_a_click_by_ref_answers_the_diff(plain: Served, site: TestSite) -> None:
    tab = open_tab(plain, site.url("/clicks"))
    async with over_http(plain) as session:
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        annotations = listed["browser_snapshot"].annotations
        assert annotations is not None and annotations.read_only_hint
        assert "ref" in listed["browser_click"].input_schema["properties"]
        result = await session.call_tool("browser_snapshot", {"tabId": tab})
        text = result.content[0].text  # type: ignore[union-attr]
        assert "\nsnapshot:\n" in text and "[ref=" in text  # the tree as text, not a JSON string
        shot = await call(session, "browser_snapshot", {"tabId": tab, "interactive": True})
        hit = ref_of(shot["snapshot"], "Hit the server")
        clicked = await call(session, "browser_click", {"tabId": tab, "ref": hit})
        assert clicked["status"] == "ok" and clicked["page"]["document"] == shot["document"]
        assert "diff" in clicked["page"] and len(clicked["page"]["diff"]) < len(shot["snapshot"])
        assert site.wait_for_count("POST /clicks/hit") == 1
        quiet = await call(session, "browser_click", {"tabId": tab, "ref": hit, "snapshot": "none"})
        assert quiet["status"] == "ok" and "page" not in quiet
        assert site.wait_for_count("POST /clicks/hit", 2) == 2
    time.sleep(0.3)
    assert site.count("POST /clicks/hit") == 2


async def test_a_navigation_answers_the_page_it_arrives_on_whose_refs_act(plain: Served, site: TestSite) -> None:
    tab = open_tab(plain, site.url("/form"))
    async with over_http(plain) as session:
        result = await session.call_tool("browser_navigate", {"tabId": tab, "url": site.url("/clicks")})
        assert "\nsnapshot:\n" in result.content[0].text  # type: ignore[union-attr]
        went = await call(session, "browser_navigate", {"tabId": tab, "url": site.url("/clicks")})
        assert went["page"]["documentChanged"] is True and "truncated" not in went["page"]
        hit = ref_of(went["page"]["snapshot"], "Hit the server")
        assert (await call(session, "browser_click", {"tabId": tab, "ref": hit}))["status"] == "ok"
        assert site.wait_for_count("POST /clicks/hit") == 1
        quiet = await call(session, "browser_navigate", {"tabId": tab, "url": site.url("/clicks"), "snapshot": "none"})
        assert quiet["status"] == "ok" and "page" not in quiet
        stale = await call(session, "browser_click", {"tabId": tab, "ref": hit})  # a ref of the left document
        assert stale["code"] == "stale_ref"
    time.sleep(0.3)
    assert site.count("POST /clicks/hit") == 1
