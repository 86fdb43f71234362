"""A route group over the one service it uses, no node: the sessions' routes over a real ``SessionKeeper`` of a
real Chromium's sessions, behind the real gate, in an app of their own (httpx's ASGI transport)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware

from actors.audit_actor import AuditActor, Auditor, AuditTrail, LocalAuditLog
from actors.loop import IoLoop
from bridge.routes.console_limits import LoginLimiter
from bridge.routes.edges import error_handlers
from bridge.routes.gate import Gate
from bridge.routes.sessions import session_routes
from bridge.session_keeper import SessionKeeper
from core.policy import Policy
from core.settings import Agent, SessionTimes, Settings
from driver import ChromiumBrowser
from driver.debug_log import MAX_LOG_ENTRIES
from driver.sessions import SessionChange
from messages.audit import SessionEntry
from messages.commands import Cdp, NewTab
from messages.errors import ERROR_CODES
from messages.results import Done
from messages.tokens import token_hash

pytestmark = pytest.mark.anyio

ALICE = "alice-token-0123456789"
SCRAPER = "scraper-token-0123456789"
POLICIES = {"alice": Policy(caps=frozenset({"core"})), "scraper": Policy(caps=frozenset({"automation"}))}
"""Alice may use the sessions' routes (group ``core``); the scraper may not."""


def policy_of(agent: str | None) -> Policy:
    return POLICIES[agent] if agent is not None else Policy()


def app_of(keeper: SessionKeeper) -> httpx.AsyncClient:
    """A client of an app that has the sessions' routes only, over ``keeper``, behind the gate."""
    config = Settings(agents=(Agent("alice", token_hash(ALICE)), Agent("scraper", token_hash(SCRAPER))))
    app = Starlette(routes=session_routes(keeper), exception_handlers=dict(error_handlers()),
                    middleware=[Middleware(Gate, config=config, policy_of=policy_of, limiter=LoginLimiter())])
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://kitsune",
                             headers={"Authorization": f"Bearer {ALICE}"})


@contextlib.asynccontextmanager
async def keeper_of(browser: ChromiumBrowser, changes: list[SessionChange],
                    audit: LocalAuditLog | None = None) -> AsyncIterator[SessionKeeper]:
    """The node's keeper of ``browser``'s sessions, its audit in ``audit`` (an audit trail of its own)."""
    io, actor = IoLoop(asyncio.get_running_loop()), AuditActor.start(None)
    trail = AuditTrail(audit or LocalAuditLog(), io, actor)
    await trail.start()
    try:
        yield SessionKeeper(browser.sessions, io, SessionTimes(), emit=lambda event: None,
                            auditor=lambda agent: Auditor(trail, agent), on_change=changes.append)
    finally:
        await trail.stop()
        actor.stop()


def error_of(answer: httpx.Response) -> tuple[int, str]:
    """The status and code of an error answer, after checking the status is its code's."""
    code = answer.json()["code"]
    assert answer.status_code == ERROR_CODES[code].http_status
    return answer.status_code, code


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[ChromiumBrowser]:
    """A real Chromium, started on the test's loop."""
    started = ChromiumBrowser(downloads_dir=tmp_path)
    await started.start()
    try:
        yield started
    finally:
        await started.stop()


async def test_a_session_is_listed_closed_with_its_tab_then_forgotten_then_not_found(
        browser: ChromiumBrowser) -> None:
    changes: list[SessionChange] = []
    audit = LocalAuditLog()
    opened = await browser.execute(NewTab(session="work"), None, 30.0, agent="alice")
    assert isinstance(opened, Done)
    tab = opened.value["tabId"]
    async with keeper_of(browser, changes, audit) as keeper, app_of(keeper) as client:
        listed = await client.get("/api/sessions")
        assert listed.status_code == 200
        assert [(s["name"], s["mode"], s["tabs"]) for s in listed.json()["sessions"]] == [("work", "reuse", [tab])]
        assert listed.json()["tombstones"] == []

        closed = await client.delete("/api/sessions/work")
        assert (closed.status_code, closed.json()) == (200, {"closed": "work", "mode": "reuse", "tabs": [tab]})
        assert tab not in browser.tab_ids()  # its tab closed with it
        assert [(c.op, c.agent, c.session) for c in changes][-1] == ("closed", "alice", "work")
        after = (await client.get("/api/sessions")).json()
        assert after["sessions"] == [] and [(t["name"], t["reason"]) for t in after["tombstones"]] == [
            ("work", "closed")]

        forgotten = await client.delete("/api/sessions/work")
        assert (forgotten.status_code, forgotten.json()) == (200, {"closed": "work", "was": "tombstone"})
        assert error_of(await client.delete("/api/sessions/work")) == (404, "session_not_found")
    closes = [entry for entry in audit.entries if isinstance(entry, SessionEntry) and entry.op == "closed"]
    assert [(entry.agent, entry.session) for entry in closes] == [("alice", "work")]  # audited as the node audits


CANARY = "canary-typed-7f3a"
"""A typed value a ``cdp`` step sends, which no debug log may hold."""


async def test_a_session_s_debug_log_holds_its_cdp_methods_never_their_params_and_only_for_its_agent(
        browser: ChromiumBrowser) -> None:
    opened = await browser.execute(NewTab(session="work", url="data:text/html,<input autofocus>"), None, 30.0,
                                   agent="alice")
    theirs = await browser.execute(NewTab(session="theirs"), None, 30.0, agent="bob")
    assert isinstance(opened, Done) and isinstance(theirs, Done)
    tab = opened.value["tabId"]
    sent = [Cdp(method="Input.insertText", params={"text": CANARY}, tab_id=tab),
            Cdp(method="DOM.getDocument", tab_id=tab), Cdp(method="DOM.nope", tab_id=tab)]
    for command in sent:
        await browser.execute(command, tab, 30.0, agent="alice")
    await browser.execute(Cdp(method="DOM.getDocument", tab_id=theirs.value["tabId"]), theirs.value["tabId"],
                          30.0, agent="bob")
    async with keeper_of(browser, []) as keeper, app_of(keeper) as client:
        answer = await client.get("/api/sessions/work/debug-log")
        assert answer.status_code == 200 and CANARY not in answer.text
        entries = answer.json()["entries"]
        assert [(e["method"], e["tabId"], e["outcome"]) for e in entries] == [
            ("Input.insertText", tab, "ok"), ("DOM.getDocument", tab, "ok"), ("DOM.nope", tab, "invalid_parameter")]
        assert all(e["ms"] >= 0 and e["time"] > 0 and "params" not in e for e in entries)
        assert error_of(await client.get("/api/sessions/theirs/debug-log")) == (404, "session_not_found")  # bob's
        assert error_of(await client.delete("/api/sessions/theirs/debug-log")) == (404, "session_not_found")
        cleared = await client.delete("/api/sessions/work/debug-log")
        assert cleared.json() == {"session": "work", "cleared": 3}
        assert (await client.get("/api/sessions/work/debug-log")).json() == {"session": "work", "entries": [],
                                                                             "dropped": 0}
        for _ in range(MAX_LOG_ENTRIES + 5):
            await browser.execute(Cdp(method="Page.getLayoutMetrics", tab_id=tab), tab, 30.0, agent="alice")
        bounded = (await client.get("/api/sessions/work/debug-log")).json()
        assert len(bounded["entries"]) == MAX_LOG_ENTRIES and bounded["dropped"] == 5
        await client.delete("/api/sessions/work")
        assert error_of(await client.get("/api/sessions/work/debug-log")) == (410, "session_expired")


async def test_the_gate_keeps_the_sessions_routes_to_their_group_and_to_agents(tmp_path: Path) -> None:
    """No browser is started: an agent with no session lists none, and what the gate refuses reaches no route."""
    async with keeper_of(ChromiumBrowser(downloads_dir=tmp_path), []) as keeper, app_of(keeper) as client:
        empty = await client.get("/api/sessions")
        assert (empty.status_code, empty.json()) == (200, {"sessions": [], "tombstones": []})
        scraper = {"Authorization": f"Bearer {SCRAPER}"}
        assert error_of(await client.get("/api/sessions", headers=scraper)) == (404, "capability_disabled")
        assert error_of(await client.delete("/api/sessions/work", headers={"Authorization": "Bearer nope"})) == (
            401, "unauthorized")
