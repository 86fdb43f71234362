"""A draining node's ``node_draining`` says where the call's session lives now (issue 34): two in-process nodes
of one fleet on the shared nats-server. Alice's persistent session, signed in and stored on A, is restored on B
while A drains (a call held in flight keeps A draining): a call through A's API on that session (its tab, or a new
tab in it) is refused ``node_draining`` with ``home`` B; a call whose session lives nowhere else says no home."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from bridge.node import Node
from bridge.wiring import run_node
from core.settings import SessionTimes
from driver import ChromiumBrowser
from messages.fleet import DrainState
from tests.integration.fleet_nodes import apps_over, sees, until
from tests.integration.persist_sessions import KEY, close_tab, open_persistent, seen_by_site, sign_in
from tests.nats_access import NatsAccess
from tests.site import TestSite

FLEET = "drainhome"
NAMES = ("home-a", "home-b")
TOKENS = {"alice": "alice-token-0123456789abcdef", "bob": "bob-token-0123456789abcdef"}


@pytest.fixture
def nodes(nats_access: NatsAccess) -> Iterator[tuple[Node, Node]]:
    started: list[Node] = []
    try:
        for name in NAMES:
            started.append(run_node(ChromiumBrowser(), nats_access.node_config(
                name=name, fleet=FLEET, step_timeout=10.0, sessions=SessionTimes(persist_key=KEY))))
        until(lambda: all(sees(node, *NAMES) for node in started), 10, "the nodes seeing each other")
        yield started[0], started[1]
    finally:
        for node in started:
            node.stop()


def _client(base: str, agent: str) -> httpx.Client:
    return httpx.Client(base_url=base, timeout=90, headers={"Authorization": f"Bearer {TOKENS[agent]}"})


def _refused(answer: httpx.Response) -> tuple[int, str, dict[str, Any]]:
    body = answer.json()
    return answer.status_code, body["code"], body["state"]


def _held_on(a: Node, base: str, site: TestSite) -> tuple[threading.Thread, list[httpx.Response]]:
    """Bob's call on a tab of A whose write the site holds: in flight, it keeps A draining."""
    with _client(base, "bob") as bob:
        opened = bob.post("/api/tabs", json={"op": "open", "url": site.url("/slow"), "node": a.config.name})
    tab = opened.json()["tabId"]
    answered: list[httpx.Response] = []

    def call() -> None:
        with _client(base, "bob") as bob:
            answered.append(bob.post("/api/batch", json={"tabId": tab, "commands": [
                {"action": "submitForm", "selector": "#slow-form", "timeout": 300}]}))

    thread = threading.Thread(target=call)
    thread.start()
    return thread, answered


def test_a_draining_node_answers_the_home_a_persistent_session_was_restored_on(
        nodes: tuple[Node, Node], site: TestSite) -> None:
    a, b = nodes
    with apps_over(nodes, TOKENS) as (base_a, base_b), _client(base_a, "alice") as on_a, \
            _client(base_b, "alice") as on_b:
        signed = on_a.post("/api/tabs", json={"op": "open", "url": site.url("/session/start"), "node": NAMES[0],
                                              "session": {"name": "shop", "persist": True}}).json()
        assert signed["status"] == "ok" and seen_by_site(on_a, signed["tabId"]) == "signed in"
        close_tab(on_a, signed["tabId"])  # its last tab: saved, freed, placed nowhere
        until(lambda: "shop" not in {s["name"] for s in on_a.get("/api/sessions").json()["sessions"]}, 30,
              "the session stored")
        slow = site.count("POST /slow")
        site.hold_slow()
        try:
            held, answered = _held_on(a, base_a, site)
            assert site.wait_for_count("POST /slow", slow + 1, timeout=30) == slow + 1
            assert a.io.run(_drain(a), timeout=10).state == "draining"
            until(lambda: b.member.registry.alive()[NAMES[0]].draining, 10, "B seeing A drain")

            restored = open_persistent(on_b, site.url("/session"))  # placed on B, restored there
            assert restored["restored"] is True and seen_by_site(on_b, restored["tabId"]) == "signed in"
            until(lambda: a.member.registry.session_node("alice", "shop") == NAMES[1], 10, "A seeing it on B")
            tab = restored["tabId"]
            gone = {"node": NAMES[0], "tabId": tab, "home": NAMES[1]}
            assert _refused(on_a.post("/api/act", json={"command": {"action": "url", "tabId": tab}})) == (
                503, "node_draining", gone)
            assert _refused(on_a.post("/api/batch", json={"tabId": tab, "commands": [{"action": "url"}]})) == (
                503, "node_draining", gone)
            assert _refused(on_a.post("/api/tabs", json={"op": "open", "session": {"name": "shop"}})) == (
                503, "node_draining", {**gone, "tabId": None})
            assert _refused(on_a.post("/api/tabs", json={"op": "open", "session": {"name": "elsewhere"}})) == (
                503, "node_draining", {**gone, "tabId": None, "home": None})  # a session no other node holds
            assert sign_in(on_b, site, "after")["tabId"]  # B serves on
        finally:
            site.release_slow()
        held.join(timeout=60)
    assert answered and answered[0].json()["status"] == "ok", answered
    until(a.drain.left.is_set, 60, "A leaving the fleet")


async def _drain(node: Node) -> DrainState:
    return node.drain.start(60)
