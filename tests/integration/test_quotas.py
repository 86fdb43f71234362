"""Tenant quotas on live ``kitsune serve`` nodes (issue 29, section 5): each agent's tabs and sessions,
the node's caps (``max_tabs`` in a session already open), and the fair share under a flood.

Two nodes: one with alice alone and ``max_tabs: 6`` (the issue's repro), one with alice and bob,
``max_tabs: 8``, where bob's entry sets quotas of 2 tabs and 1 session.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.integration.serving import TOKENS, Served, serve
from tests.nats_access import NatsAccess
from tests.site import TestSite


@pytest.fixture(scope="module")
def alone(tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess) -> Iterator[Served]:
    running = serve(tmp_path_factory.mktemp("quota-alone"), nats_access, {
        "max_tabs": 6, "caps": ["core", "automation"], "agents": [{"name": "alice", "token": TOKENS["alice"]}]})
    yield running
    assert running.stop() == 0


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess) -> Iterator[Served]:
    agents = [{"name": "alice", "token": TOKENS["alice"]},
              {"name": "bob", "token": TOKENS["bob"], "quotas": {"tabs": 2, "sessions": 1}}]
    running = serve(tmp_path_factory.mktemp("quota-shared"), nats_access, {
        "max_tabs": 8, "caps": ["core", "automation"], "quotas": {"tabs": 32, "sessions": 8}, "agents": agents})
    yield running
    assert running.stop() == 0


def _batch(client: httpx.Client, commands: list[dict[str, Any]]) -> dict[str, Any]:
    answer = client.post("/api/batch", json={"commands": commands})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _tabs(client: httpx.Client) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = client.get("/api/tabs").json()["tabs"]
    return listed


def _mine(client: httpx.Client) -> int:
    return sum(tab["owner"] == "you" for tab in _tabs(client))


def _open(client: httpx.Client, **body: Any) -> httpx.Response:
    return client.post("/api/tabs", json={"op": "open", **body})


def _refusal(answer: httpx.Response) -> tuple[int, str, dict[str, Any]]:
    body = answer.json()
    return answer.status_code, body.get("code"), body.get("state")


def _close_all(client: httpx.Client) -> None:
    for session in client.get("/api/sessions").json()["sessions"]:
        assert client.delete(f"/api/sessions/{session['name']}").status_code == 200


def _refusals(served: Served) -> str:
    metrics = httpx.get(served.base + "/metrics", headers={"Authorization": f"Bearer {TOKENS['alice']}"}).text
    return "\n".join(line for line in metrics.splitlines() if line.startswith("kitsune_tab_quota_refusals_total"))


def test_max_tabs_holds_for_new_tabs_in_a_session_already_open(alone: Served, site: TestSite) -> None:
    with alone.client("alice") as alice:
        before = len(_tabs(alice))
        body = _batch(alice, [{"action": "newTab", "url": site.url("/")} for _ in range(9)])
        assert body["status"] == "failed", body
        failed = body["results"][6]
        assert failed["code"] == "quota_exceeded", body
        assert failed["state"] == {"quota": "tabs", "limit": 6, "scope": "node"}
        assert len(_tabs(alice)) == before + 6 == 6  # the 7th opened nothing, and no later one was tried
        assert _refusal(_open(alice, url=site.url("/"))) == (429, "quota_exceeded",
                                                            {"quota": "tabs", "limit": 6, "scope": "node"})
        assert len(_tabs(alice)) == 6
        assert 'quota="tabs",scope="node"' in _refusals(alone)
        _close_all(alice)


def test_an_agents_own_quotas_of_tabs_and_sessions_hold_on_every_opening_path(shared: Served, site: TestSite) -> None:
    with shared.client("bob") as bob:
        try:
            assert _open(bob, url=site.url("/")).status_code == 200
            body = _batch(bob, [{"action": "newTab", "url": site.url("/")}, {"action": "newTab"}])
            assert "tabId" in body["results"][0], body
            assert body["status"] == "failed" and body["results"][1]["code"] == "quota_exceeded", body
            assert body["results"][1]["state"] == {"quota": "tabs", "limit": 2, "scope": "agent"}
            assert _refusal(_open(bob)) == (429, "quota_exceeded", {"quota": "tabs", "limit": 2, "scope": "agent"})
            assert _mine(bob) == 2
            act = bob.post("/api/act", json={"command": {"action": "newTab"}})
            assert _refusal(act)[:2] == (429, "quota_exceeded")
            assert _mine(bob) == 2
            bob.post("/api/tabs", json={"op": "close", "tabId": max(t["tabId"] for t in _tabs(bob)
                                                                    if t["owner"] == "you")})
            over = _open(bob, session="second")  # a tab free, but a second session past his quota of one
            assert _refusal(over) == (429, "quota_exceeded", {"quota": "sessions", "limit": 1, "scope": "agent"})
            call = _batch(bob, [{"action": "newTab", "session": "call"}])
            assert call["results"][0]["code"] == "quota_exceeded"
            assert [s["name"] for s in bob.get("/api/sessions").json()["sessions"]] == ["default"]
            assert _mine(bob) == 1
            assert 'quota="sessions",scope="agent"' in _refusals(shared)
        finally:
            _close_all(bob)


def test_under_one_agents_flood_another_agents_new_session_opens_a_tab_and_works(shared: Served,
                                                                                site: TestSite) -> None:
    with shared.client("alice") as alice, shared.client("bob") as bob:
        try:
            opened = 0
            while (answer := _open(alice)).status_code == 200:
                opened += 1
                assert opened <= 8, "the flood was never refused"
            assert _refusal(answer) == (429, "quota_exceeded", {"quota": "tabs", "limit": 4, "scope": "node"})
            assert opened == 7  # one of the node's 8 tabs is kept for bob, who holds none
            body = _batch(bob, [{"action": "newTab", "url": site.url("/")},
                                {"action": "url", "tabId": "${$0.tabId}"}])
            assert body["status"] == "ok", body
            assert body["results"][1]["url"] == site.url("/")
            assert _refusal(_open(alice)) == (429, "quota_exceeded", {"quota": "tabs", "limit": 8, "scope": "node"})
            tab = body["results"][0]["tabId"]
            again = _batch(bob, [{"action": "navigate", "tabId": tab, "url": site.url("/cookies")}])
            assert again["status"] == "ok", again
        finally:
            _close_all(alice)
            _close_all(bob)


def test_a_popup_past_its_agents_quota_is_closed_at_once_and_recorded(shared: Served, site: TestSite) -> None:
    with shared.client("bob") as bob:
        try:
            body = _batch(bob, [{"action": "newTab", "url": site.url("/popups")},
                                {"action": "click", "tabId": "${$0.tabId}", "selector": "#open-popup"}])
            assert body["status"] == "ok", body
            deadline = time.monotonic() + 10
            while _mine(bob) < 2:  # the first popup: within his quota of 2
                assert time.monotonic() < deadline, "the popup never appeared"
                time.sleep(0.1)
            again = _batch(bob, [{"action": "click", "tabId": body["results"][0]["tabId"], "selector": "#open-popup"}])
            assert again["status"] == "ok", again  # the page opened it, not bob: his call does not fail
            deadline = time.monotonic() + 10
            while 'opener="popup"' not in _refusals(shared):
                assert time.monotonic() < deadline, "the popup past the quota was not recorded"
                time.sleep(0.1)
            time.sleep(0.5)
            assert _mine(bob) == 2
        finally:
            _close_all(bob)
