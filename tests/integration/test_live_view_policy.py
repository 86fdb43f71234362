"""Live View under the agents' policy, on a real node (issue 29, items 2, 3 and 5).

An agent holds the links it asks for, so its own link must not carry its writes around its policy:
under ``ask_before_act`` or ``read_only`` the link is view-only (the agent opening it itself and
clicking "Submit" sends nothing, the site counts nothing, the audit says so); control is granted by
an approval (or an operator), and then each click and key of the person is audited, typed text
never. A link ends with its agent's ownership of the tab and with its hand-back; an agent holds a
bounded number of links. A link's control that only the policy gave follows the policy as it is when a
connection opens and at each input; an approval's does not.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from bridge.live.links import REVOKED_CLOSE
from bridge.node import Node
from tests.integration.fleet_nodes import until
from tests.integration.serving import audited_node, served_to
from tests.nats_access import NatsAccess
from tests.site import TestSite

TOKENS = {"alice": "policy-alice-token-0123456789", "bob": "policy-bob-token-0123456789ab"}
CANARY = "typed-canary-5d1f"


@pytest.fixture(scope="module")
def node(nats_access: NatsAccess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """A node of its own fleet with an audit file (the person's inputs are read there)."""
    with audited_node(nats_access, tmp_path_factory.mktemp("livepolicy"), "livepolicy") as started:
        yield started


@pytest.fixture(scope="module")
def base(node: Node) -> Iterator[str]:
    with served_to(node, TOKENS) as served:
        yield served


@pytest.fixture
def alice(base: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKENS['alice']}"}, timeout=60) as c:
        yield c


def policy(node: Node, monkeypatch: pytest.MonkeyPatch, **rules: Any) -> None:
    """Alice's policy becomes the node's with ``rules``."""
    monkeypatch.setitem(node.agent_policies, "alice", dataclasses.replace(node.policy, **rules))


def open_form(client: httpx.Client, site: TestSite) -> int:
    answer = client.post("/api/tabs", json={"op": "open", "url": site.url("/form")}).json()
    assert answer["status"] == "ok", answer
    tab: int = answer["tabId"]
    return tab


def link_of(client: httpx.Client, tab: int, **asked: Any) -> dict[str, Any]:
    answer = client.post("/api/tabs", json={"op": "live_view", "tabId": tab, **asked})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def token_of(link: dict[str, Any]) -> str:
    return str(link["url"]).split("#t=", 1)[1]


@contextlib.contextmanager
def viewer(base: str, tab: int, token: str) -> Iterator[ClientConnection]:
    with connect(base.replace("http://", "ws://") + f"/live/{tab}/ws", open_timeout=10) as ws:
        ws.send(json.dumps({"type": "hello", "token": token}))
        yield ws


def next_of(ws: ClientConnection, kind: str) -> dict[str, Any]:
    """The next message of type ``kind`` (frames and the like passed over)."""
    while True:
        message: dict[str, Any] = json.loads(ws.recv(timeout=15))
        if message["type"] == kind:
            return message


def ended(ws: ClientConnection) -> tuple[str, int]:
    """The code the connection ended with, and its close code."""
    message = next_of(ws, "ended")
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            ws.recv(timeout=10)
    assert closed.value.rcvd is not None
    return message["code"], closed.value.rcvd.code


def refusal(base: str, tab: int, token: str) -> tuple[str, int]:
    with viewer(base, tab, token) as ws:
        return ended(ws)


def click(node: Node, ws: ClientConnection, tab: int, selector: str) -> None:
    """What a viewer sends for a click on ``selector`` (where the element is in the tab's viewport)."""
    box = asyncio.run_coroutine_threadsafe(node.browser.page(tab).locator(selector).bounding_box(),
                                           node.io.loop).result(10)
    assert box is not None
    at = {"x": box["x"] + box["width"] / 2, "y": box["y"] + box["height"] / 2}
    ws.send(json.dumps({"type": "mouse", "event": "mousePressed", "button": "left", "buttons": 1, "clickCount": 1,
                        **at}))
    ws.send(json.dumps({"type": "mouse", "event": "mouseReleased", "button": "left", "buttons": 0, "clickCount": 1,
                        **at}))


def live_entries(node: Node, tab: int, ops: tuple[str, ...] = ("input", "input_refused")) -> list[dict[str, Any]]:
    path = node.config.audit_file
    assert path is not None
    entries = [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []
    return [e for e in entries if e.get("kind") == "live_view" and e.get("tabId") == tab and e["op"] in ops]


@pytest.mark.parametrize("rule", ["ask_before_act", "read_only"])
def test_an_agents_own_link_under_ask_before_act_or_read_only_is_view_only_and_its_click_sends_nothing(
        rule: str, alice: httpx.Client, base: str, node: Node, site: TestSite,
        monkeypatch: pytest.MonkeyPatch) -> None:
    tab = open_form(alice, site)
    policy(node, monkeypatch, **{rule: True})
    link = link_of(alice, tab)
    with viewer(base, tab, token_of(link)) as ws:
        ready = next_of(ws, "ready")
        next_of(ws, "frame")  # the agent sees its tab
        click(node, ws, tab, "#submit")
        refused = next_of(ws, "error")  # the click handled: refused, before anything could be sent
        assert refused["code"] == "live_view_read_only" and "view-only" in refused["message"], refused
        assert site.count("POST /form") == 0  # the agent's own link carried no write around its policy
        assert link.get("control") is False and ready.get("control") is False
        ws.send(json.dumps({"type": "text", "text": CANARY}))
        assert next_of(ws, "error")["code"] == "live_view_read_only"
        assert not node.live.links.controlled(tab)  # no control taken: it blocks no write either
        time.sleep(0.5)
    assert site.count("POST /form") == 0
    entries = until(lambda: len(found := live_entries(node, tab)) == 2 and found, 10, "the refusals audited")
    assert [(e["op"], e["input"], e["agent"]) for e in entries] == [
        ("input_refused", "mousePressed", "alice"), ("input_refused", "text", "alice")]
    assert CANARY not in json.dumps(entries)
    if rule == "read_only":
        granted = alice.post("/api/tabs", json={"op": "live_view", "tabId": tab, "control": True})
        assert (granted.status_code, granted.json()["code"]) == (403, "read_only")


def test_a_control_granted_by_approval_acts_and_each_click_and_key_is_audited_without_typed_text(
        alice: httpx.Client, base: str, node: Node, site: TestSite, monkeypatch: pytest.MonkeyPatch) -> None:
    tab = open_form(alice, site)
    policy(node, monkeypatch, ask_before_act=True)
    held = alice.post("/api/tabs", json={"op": "live_view", "tabId": tab, "control": True}).json()
    assert (held["status"], held["code"], held["state"]["action"]) == ("held", "needs_user", "live_view"), held
    link = link_of(alice, tab, control=True, confirm_token=held["state"]["confirm_token"])  # a person approved
    assert link["control"] is True
    with viewer(base, tab, token_of(link)) as ws:
        assert next_of(ws, "ready")["control"] is True
        next_of(ws, "frame")
        click(node, ws, tab, "#name")
        for character in CANARY:
            ws.send(json.dumps({"type": "key", "event": "keyDown", "key": character, "text": character}))
            ws.send(json.dumps({"type": "key", "event": "keyUp", "key": character}))
        ws.send(json.dumps({"type": "key", "event": "keyDown", "key": "Tab", "code": "Tab", "keyCode": 9}))
        ws.send(json.dumps({"type": "key", "event": "keyUp", "key": "Tab", "code": "Tab", "keyCode": 9}))
        click(node, ws, tab, "#submit")
        until(lambda: site.count("POST /form") == 1, 15, "the person's submit reached the site")
    entries = until(lambda: len(found := live_entries(node, tab)) == 4 and found, 10, "the person's inputs audited")
    assert [(e["op"], e["input"], e.get("key")) for e in entries] == [
        ("input", "mousePressed", None), ("input", "text", None), ("input", "keyDown", "Tab"),
        ("input", "mousePressed", None)]
    assert entries[1]["text"] == "[redacted]" and {e["agent"] for e in entries} == {"alice"}
    assert node.config.audit_file is not None and CANARY not in node.config.audit_file.read_text()


def test_a_link_ends_with_its_agents_ownership_and_with_its_hand_back(
        alice: httpx.Client, base: str, node: Node, site: TestSite) -> None:
    tab = open_form(alice, site)
    token = token_of(link_of(alice, tab))
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKENS['bob']}"}, timeout=60) as bob, \
            viewer(base, tab, token) as ws:
        next_of(ws, "ready")
        taken = bob.post("/api/tabs", json={"op": "takeover", "tabId": tab}).json()
        assert taken["ok"] and taken["previous"] == "agent", taken
        assert ended(ws) == ("live_view_revoked", REVOKED_CLOSE)  # the open connection ends at the takeover
        assert refusal(base, tab, token) == ("live_view_revoked", REVOKED_CLOSE)
        written = bob.post("/api/act", json={"command": {"action": "fill", "selector": "#name", "value": "bob",
                                                         "tabId": tab}}).json()
        assert written["status"] == "ok", written  # the old owner's person blocks nothing any more
        assert bob.post("/api/tabs", json={"op": "live_view", "tabId": tab}).status_code == 200
    again = open_form(alice, site)
    token = token_of(link_of(alice, again))
    with viewer(base, again, token) as ws:
        next_of(ws, "ready")
        ws.send(json.dumps({"type": "done"}))
        assert ended(ws) == ("handed_back", 1000)
    assert refusal(base, again, token) == ("live_view_revoked", REVOKED_CLOSE)  # Done ends the link
    with viewer(base, again, token_of(link_of(alice, again))) as ws:
        assert next_of(ws, "ready")["control"] is True  # a new link takes control again


def test_an_agent_holds_a_bounded_number_of_links(
        alice: httpx.Client, base: str, node: Node, site: TestSite, monkeypatch: pytest.MonkeyPatch) -> None:
    tab = open_form(alice, site)
    monkeypatch.setattr(node.live.links, "max_per_agent", 2)
    first, second, third = (token_of(link_of(alice, tab)) for _ in range(3))
    assert refusal(base, tab, first) == ("live_view_revoked", REVOKED_CLOSE)  # the oldest one went
    monkeypatch.setattr(node.live.links, "max_per_agent", 1)
    with viewer(base, tab, third) as ws:
        next_of(ws, "ready")
        refused = alice.post("/api/tabs", json={"op": "live_view", "tabId": tab})
        assert (refused.status_code, refused.json()["code"]) == (429, "live_view_quota"), refused.text
        assert refused.json()["state"] == {"scope": "agent", "limit": 1}
    assert refusal(base, tab, second) == ("live_view_revoked", REVOKED_CLOSE)  # pushed out by the limit of 1


def test_a_link_made_before_its_agent_became_ask_before_act_keeps_no_control_unless_a_person_granted_it(
        alice: httpx.Client, base: str, node: Node, site: TestSite, monkeypatch: pytest.MonkeyPatch) -> None:
    tab = open_form(alice, site)
    opened_before, opened_after = (token_of(link_of(alice, tab)) for _ in range(2))  # she writes freely: they act
    with viewer(base, tab, opened_before) as ws:
        assert next_of(ws, "ready")["control"] is True and node.live.links.controlled(tab)
        next_of(ws, "frame")
        policy(node, monkeypatch, ask_before_act=True)
        click(node, ws, tab, "#submit")
        assert next_of(ws, "ready")["control"] is False  # at its next input: view-only from now on
        assert next_of(ws, "error")["code"] == "live_view_read_only"
        assert not node.live.links.controlled(tab)  # it blocks none of the agents' writes any more
    with viewer(base, tab, opened_after) as ws:  # a connection opened after the change
        assert next_of(ws, "ready")["control"] is False
        next_of(ws, "frame")
        click(node, ws, tab, "#submit")
        assert next_of(ws, "error")["code"] == "live_view_read_only"
    time.sleep(0.5)
    assert site.count("POST /form") == 0
    held = alice.post("/api/tabs", json={"op": "live_view", "tabId": tab, "control": True}).json()
    approved = link_of(alice, tab, control=True, confirm_token=held["state"]["confirm_token"])
    policy(node, monkeypatch, read_only=True)  # a person's grant outlasts the change
    with viewer(base, tab, token_of(approved)) as ws:
        assert next_of(ws, "ready")["control"] is True
        next_of(ws, "frame")
        click(node, ws, tab, "#submit")
        until(lambda: site.count("POST /form") == 1, 15, "the approved link's submit reached the site")
    entries = until(lambda: len(found := live_entries(node, tab)) == 3 and found, 10, "the inputs audited")
    assert [(e["op"], e["input"]) for e in entries] == [
        ("input_refused", "mousePressed"), ("input_refused", "mousePressed"), ("input", "mousePressed")]
