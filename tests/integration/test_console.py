"""The operator console on real nodes, read by a person's real Chromium (issue 15, Operator console).

Operators sign in with a token or a password from the environment; everyone else is refused. The
page shows each tab's URL, title and thumbnail (a real JPEG), refreshes itself, escapes a hostile
title; checkpoints and tasks show as metadata, never a token or a session; a two-node fleet's console lists the tabs
of both nodes, and its Live View links work for a tab on either node.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import re
import secrets
from collections.abc import Iterator
from html import escape
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from playwright.sync_api import Browser, Page

from bridge.node import Node
from bridge.routes.console_auth import COOKIE, SESSION_SECONDS
from core.settings import Settings
from kitsune.config import load_config
from tests.integration.calls import two_nodes
from tests.integration.fleet_nodes import sees, until
from tests.integration.person import person
from tests.integration.serving import app_over
from tests.nats_access import NatsAccess
from tests.site import TestSite

__all__ = ["person"]

ALICE = "console-alice-token-0123456789"
BOB = "console-bob-token-0123456789ab"
OPERATOR_TOKEN = "console-sre-token-0123456789ab"
PASSWORD, PASSWORD_ENV = "night-shift-pass", "KITSUNE_TEST_CONSOLE_PASSWORD"
OPERATORS = [{"name": "sre", "token": OPERATOR_TOKEN}, {"name": "night", "password_env": PASSWORD_ENV}]
HOSTILE = '<img src=x onerror="window.owned=1"><script>window.owned=2</script>'


def console_config(directory: Path, operators: list[dict[str, str]]) -> Settings:
    """Agents alice and bob (both groups) and ``operators``, the password read from the environment given."""
    path = directory / "kitsune.yaml"
    path.write_text(yaml.safe_dump({"agents": [{"name": "alice", "token": ALICE}, {"name": "bob", "token": BOB}],
                                    "caps": ["core", "automation"], "operators": operators}))
    return load_config(path, {PASSWORD_ENV: PASSWORD})


@contextlib.contextmanager
def console_over(node: Node, config: Settings) -> Iterator[str]:
    """The bridge's app with the console mounted, served over ``node``; its base URL."""
    with app_over(node, config) as base:
        yield base


@pytest.fixture(scope="module")
def base(node: Node, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with console_over(node, console_config(tmp_path_factory.mktemp("console"), OPERATORS)) as base:
        yield base


def alice(base: str, token: str = ALICE, **headers: str) -> httpx.Client:
    """A client of agent alice (or of ``token``), with ``headers`` on every request."""
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}", **headers}, timeout=60)


def sre(base: str) -> httpx.Client:
    """A script of operator sre: its bearer token on every request."""
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"}, timeout=60)


def open_tab(client: httpx.Client, url: str, **extra: Any) -> int:
    answer = client.post("/api/tabs", json={"op": "open", "url": url, **extra})
    assert answer.status_code == 200 and answer.json()["status"] == "ok", answer.text
    tab: int = answer.json()["tabId"]
    return tab


def tab_row(client: httpx.Client, tab: int, title: str) -> dict[str, Any]:
    """The console's row of ``tab`` once it shows ``title``."""
    def shown() -> dict[str, Any] | None:
        return next((t for t in client.get("/console/state").json()["tabs"] if t["tabId"] == tab
                     and t["title"] == title), None)
    row: dict[str, Any] = until(shown, 15, f"tab {tab} titled {title!r} in the console")
    return row


def is_jpeg(body: bytes) -> bool:
    return body[:3] == b"\xff\xd8\xff" and body[-2:] == b"\xff\xd9"


def signed_in(person: Browser, base: str) -> Page:
    """A person's page of the console, signed in as sre through the form."""
    page = person.new_page()
    page.goto(f"{base}/console")
    page.fill("input[name=secret]", OPERATOR_TOKEN)
    page.click("button[type=submit]")
    page.locator("#operator", has_text="sre").wait_for(timeout=15_000)
    return page


def refreshed(page: Page, times: int = 1) -> None:
    """Wait until the page refreshed itself ``times`` more times from /console/state."""
    start = int(page.evaluate("Number(document.body.dataset.refreshes || 0)"))
    page.wait_for_function("least => Number(document.body.dataset.refreshes || 0) >= least", arg=start + times,
                           timeout=15_000)


def test_an_operator_signs_in_with_a_token_or_a_password_from_the_environment(
        base: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    for secret, name in ((OPERATOR_TOKEN, "sre"), (PASSWORD, "night")):
        with httpx.Client(base_url=base, timeout=60) as browser:
            form = browser.get("/console")
            assert form.status_code == 200 and 'action="/console/login"' in form.text and "<table" not in form.text
            signed = browser.post("/console/login", data={"secret": secret})
            assert (signed.status_code, signed.headers["location"]) == (303, "/console"), signed.text
            cookie = signed.headers["set-cookie"]
            assert cookie.startswith(f"{COOKIE}=") and secret not in cookie
            assert {"httponly", "samesite=strict", "path=/console", f"max-age={int(SESSION_SECONDS)}"} <= {
                part.strip().lower() for part in cookie.split(";")}
            page = browser.get("/console")
            assert page.status_code == 200 and f'<b id="operator">{name}</b>' in page.text
            assert 'data-section="tabs"' in page.text and 'data-section="checkpoints"' in page.text
            assert browser.get("/console/state").json()["operator"] == name
            session = browser.cookies[COOKIE]
            assert browser.post("/console/logout").status_code == 303
            assert 'action="/console/login"' in browser.get("/console").text
        with httpx.Client(base_url=base, cookies={COOKIE: session}) as replayed:  # ended on the node, not only here
            assert replayed.get("/console/state").status_code == 401
    with sre(base) as script:
        assert script.get("/console/state").json()["operator"] == "sre"
    assert OPERATOR_TOKEN not in caplog.text and PASSWORD not in caplog.text


def test_no_operator_wrong_secret_agent_token_or_no_session_is_refused(
        node: Node, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "not-the-secret-0123456789"
    with (console_over(node, console_config(tmp_path, OPERATORS)) as base,  # its own count of failed sign-ins
          httpx.Client(base_url=base, timeout=60) as anyone):
        for body in ({"secret": wrong}, {"secret": ""}, {}):
            refused = anyone.post("/console/login", data=body)
            assert refused.status_code == 403 and "set-cookie" not in refused.headers
            assert "not valid" in refused.text and "sre" not in refused.text and "night" not in refused.text
        with httpx.Client(base_url=base, cookies={COOKIE: "forged"}) as forged:
            assert 'action="/console/login"' in forged.get("/console").text
        assert [anyone.get(path).status_code for path in ("/console/state", "/console/thumb/1")] == [401, 401]
        live = anyone.get("/console/live/1")
        assert (live.status_code, live.headers["location"]) == (303, "/console")
        for token in (wrong, ALICE):  # an agent is no operator
            assert anyone.get("/console/state", headers={"Authorization": f"Bearer {token}"}).status_code == 403
        limited = anyone.post("/console/login", data={"secret": OPERATOR_TOKEN})  # five failed: the right one waits
        assert limited.status_code == 429 and 290 <= int(limited.headers["retry-after"]) <= 300, limited.text
    assert wrong not in caplog.text and wrong.encode() not in node.metrics.exposition()
    with console_over(node, console_config(tmp_path, [])) as bare, httpx.Client(base_url=bare) as anyone:
        answers = [anyone.get("/console"), anyone.get("/console/state"), anyone.post("/console/login", data={})]
        assert [a.status_code for a in answers] == [404, 404, 404]
        assert all("no operators are configured" in a.text for a in answers)


def test_the_page_shows_a_tabs_url_title_and_thumbnail_and_refreshes_itself(
        base: str, node: Node, site: TestSite, person: Browser) -> None:
    url = site.url(f"/clicks?console={secrets.token_hex(4)}")
    with alice(base) as agent:
        tab = open_tab(agent, url)
        page = signed_in(person, base)
        try:
            row = page.locator("table[data-section=tabs] tr", has=page.get_by_text(url, exact=True))
            assert "Clicks" in row.inner_text() and "alice" in row.inner_text()
            thumb = row.locator("img.thumb")
            thumb.wait_for()
            page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=thumb.element_handle())
            width = node.io.run(node.browser.page(tab).evaluate("innerWidth"), timeout=10)
            assert abs(thumb.evaluate("img => img.naturalWidth") - width / 4) <= 1
            shot = page.request.get(f"{base}/console/thumb/{tab}")
            assert shot.status == 200 and shot.headers["content-type"] == "image/jpeg" and is_jpeg(shot.body())

            moved = site.url(f"/text?console={secrets.token_hex(4)}")
            answer = agent.post("/api/act", json={"command": {"action": "navigate", "url": moved, "tabId": tab}})
            assert answer.json()["status"] == "ok", answer.text
            moved_row = page.locator("table[data-section=tabs] tr", has=page.get_by_text(moved, exact=True))
            moved_row.wait_for(timeout=15_000)  # no reload: the page asked /console/state again
            assert "Text" in moved_row.inner_text() and page.get_by_text(url, exact=True).count() == 0
        finally:
            page.close()


def test_a_hostile_title_is_shown_as_text_on_the_server_and_in_the_script(
        base: str, site: TestSite, person: Browser) -> None:
    with alice(base) as agent, sre(base) as script:
        tab = open_tab(agent, site.url("/text"))
        ran = agent.post("/api/batch", json={"tabId": tab, "commands": [
            {"action": "js", "code": f"document.title = {json.dumps(HOSTILE)}"}]})
        assert ran.json()["status"] == "ok", ran.text
        assert tab_row(script, tab, HOSTILE)["title"] == HOSTILE  # JSON carries it as data
        html = script.get("/console").text
        assert HOSTILE not in html and escape(HOSTILE) in html
    page = signed_in(person, base)
    try:
        for _ in range(2):  # as the server rendered it, then as the script did
            assert page.get_by_text(HOSTILE, exact=True).count() == 1
            assert page.locator("img[src=x], script:not([src])").count() == 0
            assert page.evaluate("window.owned") is None
            refreshed(page)
    finally:
        page.close()


def test_calls_checkpoints_and_sessions_show_as_metadata_never_a_token(
        base: str, node: Node, site: TestSite) -> None:
    with alice(base) as agent, sre(base) as script, concurrent.futures.ThreadPoolExecutor(1) as pool:
        tab = open_tab(agent, site.url("/clicks"))
        running = pool.submit(agent.post, "/api/batch", json={"tabId": tab, "commands": [
            {"action": "click", "selector": "#hit"}, {"action": "waitFor", "selector": "#never", "timeout": 3}]})
        calls = until(lambda: [c for c in script.get("/console/state").json()["calls"]
                               if c["agent"] == "alice" and c["running"] == ["waitFor"]], 15, "the call in flight")
        stopped = running.result(timeout=60).json()
        assert stopped["status"] == "failed" and stopped["resume_token"], stopped
        assert [(c["node"], c["call"], c["kind"], c["steps"], c["resumed"]) for c in calls] == [
            (node.config.name, stopped["call"], "batch", 2, False)]

        shop = f"shop-{secrets.token_hex(3)}"
        open_tab(agent, site.url("/text"), session=shop)
        assert agent.delete(f"/api/sessions/{shop}").status_code == 200
        state = script.get("/console/state")
        held = [c for c in state.json()["checkpoints"] if c["call"] == stopped["call"]]
        assert [(c["node"], c["agent"], c["status"], c["code"], c["attempts"], c["resuming"]) for c in held] == [
            (node.config.name, "alice", "failed", stopped["results"][1]["code"], 0, False)]
        assert 0 <= held[0]["age"] < 60 and held[0]["expires_in"] > 60
        sessions = state.json()["sessions"]
        assert any(s["agent"] == "alice" and s["name"] == "default" and tab in s["tabs"] for s in sessions)
        assert [(t["agent"], t["reason"]) for t in state.json()["tombstones"] if t["name"] == shop] == [
            ("alice", "closed")]
        token = stopped["resume_token"]
        assert token not in state.text and token not in script.get("/console").text


def test_every_agents_tasks_show_as_metadata_never_a_session_a_summary_or_a_token(
        base: str, node: Node, site: TestSite) -> None:
    session, summary = f"console-task-{secrets.token_hex(4)}", f"summary-canary-{secrets.token_hex(4)}"
    goal = "Compare the prices of the three shops and report the cheapest one. " * 4
    with (alice(base, ALICE, **{"X-Kitsune-Session": session}) as owner, alice(base, BOB, **{
            "X-Kitsune-Session": f"{session}-bob"}) as bob, sre(base) as script):
        tasks = []
        for agent in (owner, bob):
            created = agent.post("/api/tasks", json={"goal": goal, "tabs": [open_tab(agent, site.url("/text"))]})
            assert created.status_code == 201, created.text
            tasks.append(created.json()["task"])
        state = script.get("/console/state")
        rows = {t["id"]: t for t in state.json()["tasks"]}
        for task, name in zip(tasks, ("alice", "bob"), strict=True):
            row = rows[task["id"]]
            assert set(row) == {"id", "agent", "goal", "status", "lease_live", "lease_expires_in", "tabs", "age"}
            assert (row["agent"], row["status"], row["lease_live"], row["tabs"]) == (name, "active", True, task["tabs"])
            assert row["goal"] == goal[:119] + "…" and 0 < row["lease_expires_in"] <= node.config.tasks.lease_ttl
            assert 0 <= row["age"] < 60
        page = script.get("/console").text
        assert 'data-section="tasks"' in page and all(task["id"] in page for task in tasks)
        completed = owner.post(f"/api/tasks/{tasks[0]['id']}/complete", json={"summary": summary})
        assert completed.status_code == 200, completed.text
        ended = script.get("/console/state")
        row = next(t for t in ended.json()["tasks"] if t["id"] == tasks[0]["id"])
        assert (row["status"], row["lease_live"], row["lease_expires_in"]) == ("completed", False, None)
        assert bob.post(f"/api/tasks/{tasks[1]['id']}/complete", json={}).status_code == 200
        for text in (state.text, ended.text, page, script.get("/console").text):
            assert all(secret not in text for secret in (session, summary, ALICE, BOB, OPERATOR_TOKEN))


@pytest.fixture
def fleet(nats_access: NatsAccess) -> Iterator[tuple[Node, Node]]:
    with contextlib.contextmanager(two_nodes)(nats_access, "console") as (first, second):
        names = (first.config.name, second.config.name)
        until(lambda: sees(first, *names) and sees(second, *names), 15, "the nodes seeing each other")
        yield first, second


def test_a_fleets_console_lists_both_nodes_tabs_and_its_live_view_links_work_on_either(
        fleet: tuple[Node, Node], site: TestSite, person: Browser, tmp_path: Path) -> None:
    first, second = fleet
    config = console_config(tmp_path, OPERATORS)
    with console_over(first, config) as base, alice(base) as agent, sre(base) as script:
        here = open_tab(agent, site.url("/clicks"), node=first.config.name)
        there = open_tab(agent, site.url("/text"), node=second.config.name, session="far")
        assert tab_row(script, here, "Clicks")["node"] == first.config.name
        assert tab_row(script, there, "Text")["node"] == second.config.name
        state = script.get("/console/state").json()
        assert {n["name"] for n in state["nodes"]} == {first.config.name, second.config.name}
        assert state["missing"] == []
        assert {(s["node"], s["name"]) for s in state["sessions"]} == {
            (first.config.name, "default"), (second.config.name, "far")}
        shot = script.get(f"/console/thumb/{there}")  # taken by the other node, over NATS
        assert shot.status_code == 200 and is_jpeg(shot.content)
        for tab, title in ((here, "Clicks"), (there, "Text")):
            live_view_through_console(person, script, base, tab, title)
        devtools_through_console(person, script, base, there)  # its CDP relayed to the other node over NATS


def devtools_through_console(person: Browser, script: httpx.Client, base: str, tab: int) -> None:
    """The operator opens DevTools for ``tab`` from the console: its Elements panel shows the tab's DOM (the test
    site's text page), the operator holds the tab, and hands it back."""
    link = script.get(f"/console/live/{tab}", params={"mode": "devtools"})
    assert link.status_code == 303 and link.headers["location"].startswith(f"{base}/live/{tab}/devtools#t=")
    page = person.new_page()
    try:
        page.goto(link.headers["location"])
        page.frame_locator("#devtools").locator(".webkit-html-attribute-value",
                                                has_text=re.compile("^heading$")).wait_for(timeout=30_000)
        assert tab_row(script, tab, "Text")["held_by"] == "operator:sre"
        page.click("#done")
        page.locator("#ended-message", has_text="handed the tab back").wait_for(timeout=15_000)
    finally:
        page.close()
    assert tab_row(script, tab, "Text")["held_by"] is None


def live_view_through_console(person: Browser, script: httpx.Client, base: str, tab: int, title: str) -> None:
    """The operator follows the console's Live View link of ``tab``, holds it, and hands it back."""
    link = script.get(f"/console/live/{tab}")
    assert link.status_code == 303 and link.headers["location"].startswith(f"{base}/live/{tab}#t="), link.text
    page = person.new_page()
    try:
        page.goto(link.headers["location"])
        page.locator("#status", has_text="You control this tab").wait_for(timeout=15_000)
        assert tab_row(script, tab, title)["held_by"] == "operator:sre"
        page.click("#done")
        page.locator("#ended-message", has_text="handed the tab back").wait_for(timeout=15_000)
    finally:
        page.close()
