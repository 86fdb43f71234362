"""Live View with ``mode=devtools`` on a real node (issue 32): DevTools' front end for one tab, opened by a person.

The front end is the node's own Chromium's (``devtools://devtools/bundled/``, served under the link's path), and
its CDP socket (``/live/<tab>/cdp``) reaches that one tab through a CDP session of its own: no debugging port.
A person in a real browser opens the link and the Elements panel shows the tab's DOM; the agents' writes wait
while they hold it and go on after "Done". Without the link, with another tab's, with a tab-mode link, or after it
expired, nothing opens; a method that would leave the tab (``Target.*``, ``Browser.*``) is answered with a CDP
error and nothing is sent, and the connection goes on. A DevTools link is a link that controls: an agent under
``ask_before_act`` has it held for approval, under ``read_only`` refused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from bridge.node import Node
from bridge.routes.live import COOKIE
from tests.integration.fleet_nodes import until
from tests.integration.person import person
from tests.integration.serving import audited_node, served_to
from tests.nats_access import NatsAccess
from tests.site import TestSite

__all__ = ["person"]

CANARY = "devtools-canary-8c2a"
TOKENS = {"alice": "devtools-alice-token-0123456789", "bob": "devtools-bob-token-0123456789ab"}


@pytest.fixture(scope="module")
def node(nats_access: NatsAccess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """A node of its own fleet with an audit file (a DevTools connection's opening and end are read there)."""
    with audited_node(nats_access, tmp_path_factory.mktemp("devtools"), "devtools") as started:
        yield started


@pytest.fixture(scope="module")
def base(node: Node) -> Iterator[str]:
    with served_to(node, TOKENS) as served:
        yield served


@pytest.fixture
def alice(base: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKENS['alice']}"}, timeout=60) as c:
        yield c


def open_tab(alice: httpx.Client, url: str) -> int:
    answer = alice.post("/api/tabs", json={"op": "open", "url": url}).json()
    assert answer["status"] == "ok", answer
    tab: int = answer["tabId"]
    return tab


def devtools_link(alice: httpx.Client, tab: int, **asked: Any) -> dict[str, Any]:
    answer = alice.post("/api/tabs", json={"op": "live_view", "tabId": tab, "mode": "devtools", **asked})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def token_of(link: dict[str, Any]) -> str:
    url: str = link["url"]
    assert "#t=" in url and "?" not in url  # in the fragment: never sent to a server
    return url.split("#t=", 1)[1]


def trade(base: str, tab: int, token: str, what: str = "session") -> httpx.Response:
    """What DevTools' page does with the link's token: trade it for the socket's cookie (or hand back)."""
    return httpx.post(f"{base}/live/{tab}/devtools/{what}", json={"token": token}, timeout=30)


@contextlib.contextmanager
def cdp(base: str, tab: int, token: str | None) -> Iterator[ClientConnection]:
    """DevTools' connection to ``tab`` with ``token`` in its cookie (as the front end's browser sends it)."""
    headers = {"Cookie": f"{COOKIE}={token}"} if token is not None else {}
    with connect(base.replace("http://", "ws://") + f"/live/{tab}/cdp", open_timeout=10,
                 additional_headers=headers, max_size=None) as ws:
        yield ws


def answer_to(ws: ClientConnection, ident: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """Send one CDP command and read until its answer (events passed over)."""
    ws.send(json.dumps({"id": ident, "method": method, "params": params or {}}))
    while True:
        message: dict[str, Any] = json.loads(ws.recv(timeout=30))
        if message.get("id") == ident:
            return message


def closed_with(ws: ClientConnection) -> int:
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            ws.recv(timeout=15)
    assert closed.value.rcvd is not None
    return closed.value.rcvd.code


def refused_socket(base: str, tab: int, token: str | None) -> int:
    with cdp(base, tab, token) as ws:
        return closed_with(ws)


def test_a_person_opens_devtools_for_the_tab_sees_its_dom_holds_it_and_hands_it_back(
        alice: httpx.Client, base: str, site: TestSite, person: Browser) -> None:
    tab = open_tab(alice, site.url("/form"))
    link = devtools_link(alice, tab)
    assert (link["mode"], link["control"], link["expires_in"]) == ("devtools", True, 300.0)
    assert f"/live/{tab}/devtools#t=" in link["url"]
    page = person.new_page()
    try:
        page.goto(link["url"])
        page.locator("#status", has_text="You control tab").wait_for(timeout=15_000)
        assert "#t=" not in page.url  # the token left the address bar
        devtools = page.frame_locator("#devtools")
        # the Elements panel shows the tab's DOM: <form id="form" ...> of the test site's page
        devtools.locator(".webkit-html-attribute-value", has_text=re.compile(r"^form$")).wait_for(timeout=30_000)
        refused = alice.post("/api/act", json={"command": {"action": "click", "selector": "#submit", "tabId": tab}})
        assert refused.status_code == 409 and refused.json()["code"] == "tab_claimed", refused.text
        assert refused.json()["state"] == {"tabId": tab, "by": "user", "reason": "live_view"}
        read = alice.post("/api/act", json={"command": {"action": "title", "tabId": tab}}).json()
        assert read["status"] == "ok"  # reads go on
        page.get_by_role("button", name="Done — hand back").click()
        page.locator("#ended", has_text="handed the tab back").wait_for(timeout=10_000)
    finally:
        page.close()
    handbacks = alice.get("/api/live/handbacks", params={"tabId": tab}).json()
    assert handbacks == {"tabId": tab, "handbacks": 1, "held": False}
    typed = alice.post("/api/act", json={"command": {"action": "fill", "selector": "#name", "value": "x",
                                                     "tabId": tab}}).json()
    assert typed["status"] == "ok", typed
    assert site.count("POST /form") == 0


def test_the_cdp_socket_reaches_the_one_tab_and_answers_what_would_leave_it_with_a_cdp_error(
        alice: httpx.Client, base: str, site: TestSite) -> None:
    tab = open_tab(alice, site.url("/form"))
    token = token_of(devtools_link(alice, tab))
    traded = trade(base, tab, token)
    assert traded.status_code == 200, traded.text
    cookie = traded.headers["set-cookie"]
    assert token in cookie and f"Path=/live/{tab}/cdp" in cookie and "HttpOnly" in cookie
    assert "samesite=strict" in cookie.lower()
    tabs = len(alice.get("/api/tabs").json()["tabs"])
    with cdp(base, tab, token) as ws:
        document = answer_to(ws, 1, "DOM.getDocument", {"depth": 0})
        assert document["result"]["root"]["documentURL"] == site.url("/form")
        title = answer_to(ws, 2, "Runtime.evaluate", {"expression": "document.title", "returnByValue": True})
        assert title["result"]["result"]["value"] == "Form"
        for ident, method in enumerate(("Target.getTargets", "Target.createTarget", "Browser.getVersion",
                                        "Target.setAutoAttach", "Storage.clearDataForOrigin",
                                        "Network.clearBrowserCookies", "Fetch.enable", "Page.close"), start=3):
            refused = answer_to(ws, ident, method, {"url": "about:blank"})
            assert "result" not in refused and "Kitsune refused" in refused["error"]["message"], refused
        ws.send(json.dumps({"id": 21, "method": "DOM.getDocument", "params": {}, "sessionId": "another"}))
        other = json.loads(ws.recv(timeout=15))
        while other.get("id") != 21:
            other = json.loads(ws.recv(timeout=15))
        assert "error" in other and other["sessionId"] == "another"
        again = answer_to(ws, 22, "Runtime.evaluate", {"expression": "1 + 1", "returnByValue": True})
        assert again["result"]["result"]["value"] == 2  # the connection goes on after refusals
        where = answer_to(ws, 23, "Runtime.evaluate", {"expression": "location.href", "returnByValue": True})
        assert where["result"]["result"]["value"] == site.url("/form")
    assert len(alice.get("/api/tabs").json()["tabs"]) == tabs  # Target.createTarget sent nothing


def test_without_the_link_with_another_tabs_a_tab_links_or_an_expired_one_devtools_does_not_open(
        alice: httpx.Client, base: str, site: TestSite, node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    tab, other = open_tab(alice, site.url("/form")), open_tab(alice, site.url("/text"))
    token = token_of(devtools_link(alice, tab))
    # no link at all, or a wrong one
    assert refused_socket(base, tab, None) == 4401
    assert refused_socket(base, tab, "x" * 32) == 4401
    bad = trade(base, tab, "x" * 32)
    assert (bad.status_code, bad.json()["code"]) == (403, "live_view_token_invalid")
    assert "set-cookie" not in bad.headers
    # tab A's link does not open tab B's DevTools
    wrong = trade(base, other, token)
    assert (wrong.status_code, wrong.json()["code"]) == (403, "live_view_wrong_tab")
    assert refused_socket(base, other, token) == 4403
    # a link of the screencast opens no DevTools, and a DevTools link no screencast
    screencast = alice.post("/api/tabs", json={"op": "live_view", "tabId": tab}).json()
    assert screencast["mode"] == "tab"
    mode = trade(base, tab, token_of(screencast))
    assert (mode.status_code, mode.json()["code"]) == (403, "live_view_wrong_mode")
    assert refused_socket(base, tab, token_of(screencast)) == 4403
    with connect(base.replace("http://", "ws://") + f"/live/{tab}/ws", open_timeout=10) as ws:
        ws.send(json.dumps({"type": "hello", "token": token}))
        assert json.loads(ws.recv(timeout=15))["code"] == "live_view_wrong_mode"
    # another site's page may not use a person's cookie
    with connect(base.replace("http://", "ws://") + f"/live/{tab}/cdp", open_timeout=10,
                 additional_headers={"Cookie": f"{COOKIE}={token}", "Origin": "http://evil.example"}) as ws:
        assert closed_with(ws) == 4401
    # a second person while one holds the tab
    with cdp(base, tab, token) as holder:
        assert "result" in answer_to(holder, 1, "DOM.getDocument", {"depth": 0})
        assert refused_socket(base, tab, token) == 4409
    # after it expired
    monkeypatch.setattr(node.live.links, "ttl", 0.2)
    expiring = token_of(devtools_link(alice, tab))
    time.sleep(0.4)
    expired = trade(base, tab, expiring)
    assert (expired.status_code, expired.json()["code"]) == (403, "live_view_expired")
    assert refused_socket(base, tab, expiring) == 4401
    page = httpx.get(f"{base}/live/{tab}/devtools")
    assert page.status_code == 200 and "no-referrer" in page.headers["referrer-policy"]


def test_a_devtools_link_is_one_that_controls_held_under_ask_before_act_and_refused_read_only(
        alice: httpx.Client, base: str, site: TestSite, node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    tab = open_tab(alice, site.url("/form"))
    view_only = alice.post("/api/tabs", json={"op": "live_view", "tabId": tab, "mode": "devtools", "control": False})
    assert (view_only.status_code, view_only.json()["code"]) == (400, "invalid_parameter")
    unknown = alice.post("/api/tabs", json={"op": "live_view", "tabId": tab, "mode": "inspector"})
    assert (unknown.status_code, unknown.json()["code"]) == (400, "invalid_parameter")
    free = devtools_link(alice, tab)  # made while alice's policy let her write freely
    monkeypatch.setitem(node.agent_policies, "alice", dataclasses.replace(node.policy, ask_before_act=True))
    held = alice.post("/api/tabs", json={"op": "live_view", "tabId": tab, "mode": "devtools"}).json()
    assert (held["status"], held["code"]) == ("held", "needs_user"), held
    # an approval of the screencast's control approves no DevTools
    screencast = alice.post("/api/tabs", json={"op": "live_view", "tabId": tab, "control": True}).json()
    crossed = alice.post("/api/tabs", json={"op": "live_view", "tabId": tab, "mode": "devtools",
                                            "confirm_token": screencast["state"]["confirm_token"]}).json()
    assert crossed["code"] == "confirm_token_invalid", crossed
    approved = alice.post("/api/tabs", json={"op": "live_view", "tabId": tab, "mode": "devtools",
                                             "confirm_token": held["state"]["confirm_token"]}).json()
    assert (approved["ok"], approved["mode"], approved["control"]) == (True, "devtools", True), approved
    # the older link's control came from a policy that gives it no more: it opens nothing
    stale = trade(base, tab, token_of(free))
    assert stale.status_code == 200  # the link is valid; its socket decides whether it controls
    assert refused_socket(base, tab, token_of(free)) == 4403
    with cdp(base, tab, token_of(approved)) as ws:  # a person approved this one
        assert "result" in answer_to(ws, 1, "DOM.getDocument", {"depth": 0})
    monkeypatch.setitem(node.agent_policies, "alice", dataclasses.replace(node.policy, read_only=True))
    refused = alice.post("/api/tabs", json={"op": "live_view", "tabId": tab, "mode": "devtools"})
    assert (refused.status_code, refused.json()["code"]) == (403, "read_only")


def test_an_agents_write_waits_while_a_person_holds_the_tab_in_devtools_and_goes_on_once_they_close_it(
        alice: httpx.Client, base: str, site: TestSite, node: Node) -> None:
    tab = open_tab(alice, site.url("/form"))
    token = token_of(devtools_link(alice, tab))
    with cdp(base, tab, token) as ws:
        assert "result" in answer_to(ws, 1, "DOM.getDocument", {"depth": 0})
        held = alice.get("/api/live/handbacks", params={"tabId": tab}).json()
        assert held["held"] is True
        refused = alice.post("/api/act", json={"command": {"action": "fill", "selector": "#name", "value": "x",
                                                           "tabId": tab}})
        assert refused.status_code == 409 and refused.json()["code"] == "tab_claimed", refused.text
        # the person's own writes go through DevTools (their params never reach the audit)
        typed = answer_to(ws, 2, "Runtime.evaluate", {"expression": f"document.title = '{CANARY}'"})
        assert "result" in typed
        assert "error" in answer_to(ws, 3, "Target.getTargets")
    deadline = time.monotonic() + 10
    while alice.get("/api/live/handbacks", params={"tabId": tab}).json()["held"]:
        assert time.monotonic() < deadline, "closing DevTools did not give the tab back"
        time.sleep(0.05)
    filled = alice.post("/api/act", json={"command": {"action": "fill", "selector": "#name", "value": "agent",
                                                      "tabId": tab}}).json()
    assert filled["status"] == "ok", filled
    done = trade(base, tab, token, "done")  # "Done" after the page closed: the link ends all the same
    assert done.status_code == 200
    assert refused_socket(base, tab, token) == 4411
    entries = until(lambda: len(found := live_entries(node, tab)) == 3 and found, 10, "the connection audited")
    assert [(e["op"], e.get("mode")) for e in entries] == [("link", "devtools"), ("opened", "devtools"),
                                                          ("closed", "devtools")]
    assert {k: entries[2][k] for k in ("reason", "sent", "refused")} == {"reason": "viewer_gone", "sent": 2,
                                                                       "refused": 1}
    assert node.config.audit_file is not None
    audit = node.config.audit_file.read_text()
    assert CANARY not in audit and token not in audit


def live_entries(node: Node, tab: int) -> list[dict[str, Any]]:
    path = node.config.audit_file
    assert path is not None
    entries = [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []
    return [e for e in entries if e.get("kind") == "live_view" and e.get("tabId") == tab]
