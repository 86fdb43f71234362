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
from driver.sessions import SessionChange
from messages.audit import SessionEntry
from messages.commands import NewTab
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


async def test_the_gate_keeps_the_sessions_routes_to_their_group_and_to_agents(tmp_path: Path) -> None:
    """No browser is started: an agent with no session lists none, and what the gate refuses reaches no route."""
    async with keeper_of(ChromiumBrowser(downloads_dir=tmp_path), []) as keeper, app_of(keeper) as client:
        empty = await client.get("/api/sessions")
        assert (empty.status_code, empty.json()) == (200, {"sessions": [], "tombstones": []})
        scraper = {"Authorization": f"Bearer {SCRAPER}"}
        assert error_of(await client.get("/api/sessions", headers=scraper)) == (404, "capability_disabled")
        assert error_of(await client.delete("/api/sessions/work", headers={"Authorization": "Bearer nope"})) == (
            401, "unauthorized")
