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

from bridge.config import load_config
from bridge.node import Node
from bridge.routes.live import COOKIE
from tests.integration.person import person
from tests.integration.serving import app_over
from tests.site import TestSite

__all__ = ["person"]

TOKENS = {"alice": "devtools-alice-token-0123456789", "bob": "devtools-bob-token-0123456789ab"}


@pytest.fixture(scope="module")
def base(node: Node) -> Iterator[str]:
    config = load_config(None, {"KITSUNE_AGENTS": ",".join(f"{a}={t}" for a, t in TOKENS.items()),
                                "KITSUNE_CAPS": "core,automation"})
    with app_over(node, config) as base:
        yield base


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
