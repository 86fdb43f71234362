"""Persistent sessions through the MCP gateway (issue 34), with the SDK's own client over stdio and streamable
HTTP: ``browser_tabs new`` with ``persist`` signs in, its last tab closed saves the session and frees it, the
next ``new`` restores it (the site sees the sign-in's cookie), and ``browser_sessions close`` deletes it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest
from mcp import ClientSession

from tests.e2e.clients import call, over_http, over_stdio
from tests.integration.persist_sessions import SIGN_IN, secrets_absent, seen_by_site
from tests.integration.serving import Served
from tests.site import TestSite

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["stdio", "http"])
async def connected(request: pytest.FixtureRequest, persisting: Served) -> AsyncIterator[tuple[ClientSession, str]]:
    agent = "alice" if request.param == "stdio" else "bob"
    connect = over_stdio(persisting, agent=agent) if request.param == "stdio" else over_http(persisting, agent)
    async with connect as session:
        yield session, agent


def _stored(served: Served, agent: str, name: str) -> bool:
    return any(e["kind"] == "session" and e["op"] == "stored" and (e["agent"], e["session"]) == (agent, name)
               for e in served.audit())


async def test_a_persistent_session_is_restored_after_its_last_tab_closed_and_close_forgets_it(
        connected: tuple[ClientSession, str], persisting: Served, site: TestSite) -> None:
    session, agent = connected
    opened = await call(session, "browser_tabs", {"op": "new", "url": site.url("/session/start"), "session": "kept",
                                                  "persist": True, "snapshot": "none"})
    assert opened["status"] == "ok" and (opened["persist"], opened["restored"]) == (True, False), opened
    with persisting.client(agent) as client:
        assert seen_by_site(client, opened["tabId"]) == "signed in"
    closed = await call(session, "browser_tabs", {"op": "close", "tabId": opened["tabId"]})
    assert closed["status"] == "ok", closed
    deadline = time.monotonic() + 20
    while not _stored(persisting, agent, "kept"):
        assert time.monotonic() < deadline, "the session was not stored"
        time.sleep(0.05)

    again = await call(session, "browser_tabs", {"op": "new", "url": site.url("/session"), "session": "kept",
                                                 "persist": True, "snapshot": "none"})
    assert again["status"] == "ok" and again["restored"] is True and again["age"] >= 0, again
    with persisting.client(agent) as client:
        assert seen_by_site(client, again["tabId"]) == "signed in"
    forgot = await call(session, "browser_sessions", {"op": "close", "name": "kept"})
    assert forgot["ok"] is True and forgot["forgot_state"] is True, forgot
    assert site.count(SIGN_IN) == 1
    assert secrets_absent(site, persisting.audit_file.read_text(), persisting.log_file.read_text())


async def test_closing_a_persistent_session_s_last_tab_with_forget_deletes_its_state(
        connected: tuple[ClientSession, str], persisting: Served, site: TestSite) -> None:
    session, agent = connected
    opened = await call(session, "browser_tabs", {"op": "new", "url": site.url("/session/start"), "session": "brief",
                                                  "persist": True, "snapshot": "none"})
    assert opened["status"] == "ok" and opened["restored"] is False, opened
    forgot = await call(session, "browser_tabs", {"op": "close", "tabId": opened["tabId"], "forget": True})
    assert forgot["status"] == "ok" and (forgot["closed"], forgot["tabs"]) == ("brief", [opened["tabId"]]), forgot
    listed = await call(session, "browser_sessions", {})
    assert [t["reason"] for t in listed["tombstones"] if t["name"] == "brief"] == ["closed"], listed  # not stored
    assert (await call(session, "browser_sessions", {"op": "close", "name": "brief"}))["was"] == "tombstone"
    fresh = await call(session, "browser_tabs", {"op": "new", "url": site.url("/session"), "session": "brief",
                                                 "persist": True, "snapshot": "none"})
    assert fresh["status"] == "ok" and fresh["restored"] is False, fresh
    with persisting.client(agent) as client:
        assert seen_by_site(client, fresh["tabId"]) == "signed out"
