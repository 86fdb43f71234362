"""Browser sessions through the MCP gateway, with the SDK's own client over stdio (``kitsune mcp
--bridge``) and streamable HTTP (``/mcp``): a tab opened in a named session, the session listed
with it, closed, its tombstone listed, and the closed session's tab answering ``session_expired``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import ClientSession

from tests.e2e.clients import call, over_http, over_stdio
from tests.integration.serving import Served
from tests.site import TestSite

pytestmark = pytest.mark.anyio


def _named(entries: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [entry for entry in entries if entry["name"] == name]


@pytest.fixture(params=["stdio", "http"])
async def connected(request: pytest.FixtureRequest, plain: Served) -> AsyncIterator[tuple[ClientSession, str]]:
    """An MCP session over each transport: stdio as alice, HTTP as bob (each agent has its own "shop")."""
    agent = "alice" if request.param == "stdio" else "bob"
    connect = over_stdio(plain, agent=agent) if request.param == "stdio" else over_http(plain, agent)
    async with connect as session:
        yield session, agent


async def test_a_session_opened_listed_and_closed_leaves_a_tombstone_and_its_tab_answers_session_expired(
        connected: tuple[ClientSession, str], plain: Served, site: TestSite) -> None:
    session, agent = connected
    opened = await call(session, "browser_tabs", {"op": "new", "url": site.url("/text"), "session": "shop"})
    assert opened["status"] == "ok", opened
    tab = opened["tabId"]
    one_shot = await call(session, "browser_tabs", {"op": "new", "session": "call"})
    assert one_shot["code"] == "invalid_parameter", one_shot  # a direct call has no call to end it with

    tabs = await call(session, "browser_tabs", {})
    assert [t["session"] for t in tabs["tabs"] if t["tabId"] == tab] == ["shop"]
    listed = await call(session, "browser_sessions", {})
    assert [(s["mode"], s["tabs"]) for s in _named(listed["sessions"], "shop")] == [("reuse", [tab])], listed
    assert not _named(listed["tombstones"], "shop")
    other = "bob" if agent == "alice" else "alice"
    with plain.client(other) as client:
        assert not _named(client.get("/api/sessions").json()["sessions"], "shop")  # the other agent's own

    closed = await call(session, "browser_sessions", {"op": "close", "name": "shop"})
    assert closed == {"ok": True, "closed": "shop", "mode": "reuse", "tabs": [tab]}
    listed = await call(session, "browser_sessions", {"op": "list"})
    assert not _named(listed["sessions"], "shop")
    assert [t["reason"] for t in _named(listed["tombstones"], "shop")] == ["closed"], listed
    tabs = await call(session, "browser_tabs", {})
    assert tab not in [t["tabId"] for t in tabs["tabs"]]
    assert [t["reason"] for t in _named(tabs["closed_sessions"], "shop")] == ["closed"], tabs

    cookie = site.url("/cookies/set?name=flavour&value=ginger")  # a counted GET
    navigated = await call(session, "browser_navigate", {"tabId": tab, "url": cookie})
    assert navigated["code"] == "session_expired", navigated
    selected = await call(session, "browser_tabs", {"op": "select", "tabId": tab})
    assert selected["code"] == "session_expired", selected
    reopened = await call(session, "browser_tabs", {"op": "new", "session": "shop"})
    assert reopened["code"] == "session_expired", reopened  # never a silent fresh browser

    forgotten = await call(session, "browser_sessions", {"op": "close", "name": "shop"})
    assert forgotten == {"ok": True, "closed": "shop", "was": "tombstone"}
    assert not _named((await call(session, "browser_sessions", {}))["tombstones"], "shop")
    missing = await call(session, "browser_sessions", {"op": "close", "name": "shop"})
    assert missing["code"] == "session_not_found", missing
    assert site.count("GET /cookies/set") == 0
