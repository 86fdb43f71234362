"""Live View on a real node: a person, in a browser of their own, sees an agent's tab and acts in it.

The must-shows of issue 15: a batch stopped on a sign-in page is finished by a person through the
Live View page, then resumed (the site counts one sign-in and one order); the agent's writes are
refused while the person holds control; bad links and a second controller are refused.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, FloatRect, Page
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from bridge.node import Node
from kitsune.config import load_config
from tests.integration.fleet_nodes import until
from tests.integration.person import person, wait_for_frames
from tests.integration.serving import app_over, serve
from tests.integration.test_http import _events_of
from tests.nats_access import NatsAccess
from tests.site import TestSite

__all__ = ["person"]

TOKENS = {"alice": "live-alice-token-0123456789", "bob": "live-bob-token-0123456789ab"}


@pytest.fixture(scope="module")
def base(node: Node) -> Iterator[str]:
    config = load_config(None, {"KITSUNE_AGENTS": ",".join(f"{a}={t}" for a, t in TOKENS.items()),
                                "KITSUNE_CAPS": "core,automation"})
    with app_over(node, config) as base:
        yield base


def client(base: str, agent: str = "alice") -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKENS[agent]}"}, timeout=60)


@pytest.fixture
def alice(base: str) -> Iterator[httpx.Client]:
    with client(base) as c:
        yield c


def open_tab(alice: httpx.Client, url: str) -> int:
    answer = alice.post("/api/tabs", json={"op": "open", "url": url}).json()
    assert answer["status"] == "ok", answer
    tab: int = answer["tabId"]
    return tab


def live_link(alice: httpx.Client, tab: int) -> dict[str, Any]:
    answer = alice.post("/api/tabs", json={"op": "live_view", "tabId": tab})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def element_box(node: Node, tab: int, selector: str) -> FloatRect:
    """Where ``selector`` is in the agent's tab, in CSS pixels (the test looks; the person only sees frames)."""
    found = asyncio.run_coroutine_threadsafe(node.browser.page(tab).locator(selector).bounding_box(),
                                             node.io.loop).result(10)
    assert found is not None, f"{selector} is not in tab {tab}"
    return found


def click_through(page: Page, node: Node, tab: int, selector: str) -> None:
    """Click, on the Live View page, where ``selector`` shows in the frame."""
    target = element_box(node, tab, selector)
    screen = page.locator("#screen")
    shown = screen.bounding_box()
    assert shown is not None
    width, height = float(screen.get_attribute("data-width") or 0), float(screen.get_attribute("data-height") or 0)
    x = shown["x"] + (target["x"] + target["width"] / 2) * shown["width"] / width
    y = shown["y"] + (target["y"] + target["height"] / 2) * shown["height"] / height
    page.mouse.click(x, y)


def test_a_person_signs_in_through_live_view_hands_back_and_the_agents_resume_finishes(
        alice: httpx.Client, node: Node, site: TestSite, person: Browser) -> None:
    tab = open_tab(alice, site.url("/account"))
    stopped = alice.post("/api/batch", json={"tabId": tab, "commands": [
        {"action": "click", "selector": "#order", "timeout": 1}]}).json()
    assert stopped["status"] == "failed" and stopped["resume_token"], stopped
    link = stopped["live_view"]
    assert (link["tabId"], link["reason"], link["expires_in"]) == (tab, "sign_in", 300.0)
    page = person.new_page()
    try:
        page.goto(link["url"])
        page.locator("#status", has_text="You control this tab").wait_for(timeout=15_000)
        first = wait_for_frames(page, 0)
        click_through(page, node, tab, "#username")
        page.keyboard.type("alice")
        shown = wait_for_frames(page, first)  # the page changed under the person's typing, and they saw it
        click_through(page, node, tab, "#password")
        page.keyboard.type("s3cret-pass")
        page.keyboard.press("Enter")
        until(lambda: node.io.run(node.needs_user(tab), timeout=10)["needs_user"] is False, 15, "signed in")
        wait_for_frames(page, shown)

        refused = alice.post("/api/act", json={"command": {"action": "click", "selector": "#order", "tabId": tab}})
        assert refused.status_code == 409 and refused.json()["code"] == "tab_claimed", refused.text
        assert refused.json()["state"] == {"tabId": tab, "by": "user", "reason": "live_view"}
        read = alice.post("/api/act", json={"command": {"action": "title", "tabId": tab}}).json()
        assert (read["status"], read["title"]) == ("ok", "Account")  # reads go on
        assert site.count("POST /account/order") == 0

        page.get_by_role("button", name="Done — hand back").click()
        page.locator("#ended", has_text="handed the tab back").wait_for(timeout=10_000)
    finally:
        page.close()
    resumed = alice.post("/api/resume", json={"call": stopped["call"], "resume_token": stopped["resume_token"]})
    assert resumed.json()["status"] == "ok", resumed.text
    assert site.count("POST /sign-in") == 1 and site.count("POST /account/order") == 1


def token_of(link: dict[str, Any]) -> str:
    url: str = link["url"]
    assert "#t=" in url and "?" not in url  # in the fragment: never sent to a server, so in no access log
    return url.split("#t=", 1)[1]


@contextlib.contextmanager
def viewer(base: str, tab: int, token: str) -> Iterator[ClientConnection]:
    """A Live View connection that presented ``token`` (a person's page, without the page)."""
    with connect(base.replace("http://", "ws://") + f"/live/{tab}/ws", open_timeout=10) as ws:
        ws.send(json.dumps({"type": "hello", "token": token}))
        yield ws


def next_message(ws: ClientConnection) -> dict[str, Any]:
    message: dict[str, Any] = json.loads(ws.recv(timeout=15))
    return message


def refusal(base: str, tab: int, token: str) -> tuple[str, int]:
    """The code and the close code a connection with ``token`` is refused with."""
    with viewer(base, tab, token) as ws:
        ended = next_message(ws)
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert ended["type"] == "ended" and ended["message"]
    assert closed.value.rcvd is not None
    return ended["code"], closed.value.rcvd.code


def test_wrong_expired_and_other_tabs_tokens_and_a_second_controller_are_refused(
        alice: httpx.Client, base: str, site: TestSite, monkeypatch: pytest.MonkeyPatch, node: Node) -> None:
    tab, other = open_tab(alice, site.url("/form")), open_tab(alice, site.url("/text"))
    token = token_of(live_link(alice, tab))
    assert refusal(base, tab, "x" * 32) == ("live_view_token_invalid", 4401)
    assert refusal(base, other, token) == ("live_view_wrong_tab", 4403)
    with viewer(base, tab, token) as holder:
        assert next_message(holder)["type"] == "ready"
        assert refusal(base, tab, token) == ("live_view_controlled", 4409)  # the same link, a second person
        assert refusal(base, tab, token_of(live_link(alice, tab))) == ("live_view_controlled", 4409)
    monkeypatch.setattr(node.live.links, "ttl", 0.2)
    expiring = token_of(live_link(alice, tab))
    time.sleep(0.4)
    assert refusal(base, tab, expiring) == ("live_view_expired", 4401)
    page = httpx.get(f"{base}/live/{tab}")
    assert page.status_code == 200 and "no-referrer" in page.headers["referrer-policy"]


def test_only_the_tabs_agent_may_show_it_and_a_policy_may_forbid_live_view(
        alice: httpx.Client, base: str, site: TestSite, node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    tab = open_tab(alice, site.url("/form"))
    with client(base, "bob") as bob:
        owned = bob.post("/api/tabs", json={"op": "live_view", "tabId": tab})
        assert (owned.status_code, owned.json()["code"]) == (409, "tab_owned")
        unknown = bob.post("/api/tabs", json={"op": "live_view", "tabId": 999_999})
        assert (unknown.status_code, unknown.json()["code"]) == (400, "unknown_tab")
    monkeypatch.setitem(node.agent_policies, "alice", dataclasses.replace(node.policy, live_view=False))
    disabled = alice.post("/api/tabs", json={"op": "live_view", "tabId": tab})
    assert (disabled.status_code, disabled.json()["code"]) == (403, "live_view_disabled")
    stopped = alice.post("/api/batch", json={"tabId": tab, "commands": [
        {"action": "click", "selector": "#nothing", "timeout": 0.3}]}).json()
    assert stopped["status"] == "failed" and "live_view" not in stopped


def test_a_tab_that_closes_ends_its_live_view_with_a_message_and_a_hand_back_is_counted(
        alice: httpx.Client, base: str, site: TestSite, node: Node, person: Browser) -> None:
    tab = open_tab(alice, site.url("/form"))
    page = person.new_page()
    try:
        page.goto(live_link(alice, tab)["url"])
        wait_for_frames(page, 0)
        refused = alice.post("/api/tabs", json={"op": "close", "tabId": tab}).json()
        assert refused["code"] == "tab_claimed"  # closing is a write: the person holds the tab
        node.io.run(node.browser.page(tab).close(), timeout=10)  # the tab closes anyway (the page, a crash)
        page.locator("#ended", has_text=f"Tab {tab} was closed").wait_for(timeout=10_000)
    finally:
        page.close()
    again = open_tab(alice, site.url("/form"))
    with viewer(base, again, token_of(live_link(alice, again))) as ws:
        assert next_message(ws)["type"] == "ready"
        ws.send(json.dumps({"type": "done"}))
        while (message := next_message(ws))["type"] != "ended":
            pass
        assert message["code"] == "handed_back"
    handbacks = alice.get("/api/live/handbacks", params={"tabId": again}).json()
    assert handbacks == {"tabId": again, "handbacks": 1, "held": False}


def test_a_wait_on_a_tabs_hand_back_ends_at_the_hand_back(alice: httpx.Client, base: str, site: TestSite) -> None:
    tab = open_tab(alice, site.url("/form"))
    token = token_of(live_link(alice, tab))
    answers: list[tuple[float, dict[str, Any]]] = []

    def wait() -> None:
        answer = alice.get("/api/live/handbacks", params={"tabId": tab, "since": 0, "wait": 20}).json()
        answers.append((time.monotonic(), answer))

    waiting = threading.Thread(target=wait)
    waiting.start()
    with viewer(base, tab, token) as ws:
        assert next_message(ws)["type"] == "ready"
        time.sleep(0.5)
        assert not answers  # still waiting while the person holds the tab
        handed = time.monotonic()
        ws.send(json.dumps({"type": "done"}))
        waiting.join(15)
    assert answers and answers[0][1]["handbacks"] == 1 and answers[0][0] - handed < 5  # not its 20 s
    bad = alice.get("/api/live/handbacks", params={"tabId": tab, "wait": 99})
    assert (bad.status_code, bad.json()["code"]) == (400, "invalid_parameter")


def test_each_frame_is_acknowledged_once_sent_so_a_viewer_that_never_acks_sees_every_repaint(
        alice: httpx.Client, base: str, site: TestSite) -> None:
    tab = open_tab(alice, site.url("/form"))
    link = alice.post("/api/tabs", json={"op": "live_view", "tabId": tab, "control": False}).json()
    with viewer(base, tab, token_of(link)) as ws:  # view-only: the agent goes on writing the tab
        assert next_message(ws)["type"] == "ready"
        assert next_message(ws)["type"] == "frame"
        for n in range(3):  # each change repaints; a frame waiting for a person's ack would stop at the first
            changed = alice.post("/api/batch", json={"tabId": tab, "commands": [
                {"action": "js", "code": f"document.body.style.background = '#{n + 1}0{n + 1}0{n + 1}0'"}]})
            assert changed.json()["status"] == "ok"
            while (message := next_message(ws))["type"] != "frame":
                assert message["type"] not in ("ended", "error"), message


def test_no_live_view_token_reaches_the_audit_log_the_server_log_the_events_or_metrics_and_a_stop_ends_it(
        tmp_path: Path, nats_access: NatsAccess, site: TestSite) -> None:
    served = serve(tmp_path, nats_access, {"caps": ["core", "automation"]})
    try:
        with served.client() as alice_served:
            tab = open_tab(alice_served, site.url("/account"))
            stopped = alice_served.post("/api/batch", json={"tabId": tab, "commands": [
                {"action": "click", "selector": "#order", "timeout": 0.5}]}).json()
            tokens = [token_of(stopped["live_view"]), token_of(live_link(alice_served, tab))]
            with viewer(served.base, tab, tokens[1]) as ws:
                assert next_message(ws)["type"] == "ready"
                ws.send(json.dumps({"type": "text", "text": "canary-typed-live-7f3e"}))
                ws.send(json.dumps({"type": "done"}))
                while next_message(ws)["type"] != "ended":
                    pass
            metrics = alice_served.get("/metrics").text
            with concurrent.futures.ThreadPoolExecutor(1) as apart:  # this thread runs the person's Playwright loop
                events = apart.submit(asyncio.run, _events_of(nats_access, stopped["call"])).result(60)
            with viewer(served.base, tab, tokens[0]) as ws:
                assert next_message(ws)["type"] == "ready"
                os.kill(served.process.pid, signal.SIGTERM)  # the node stops: the page says so
                while (message := next_message(ws))["type"] != "ended":
                    pass
                assert message["code"] == "node_stopping", message
        assert served.process.wait(timeout=60) == 0
        audit = served.audit_file.read_text()
        ops = [e["op"] for e in served.audit() if e.get("kind") == "live_view" and e.get("tabId") == tab]
        assert ops == ["link", "link", "opened", "input", "handed_back", "opened"]  # the typed text: one redacted entry
        assert b'"type":"StepStarted"' in events
        for where, text in {"audit log": audit, "server log": served.log_file.read_text(), "/metrics": metrics,
                            "event stream": events.decode()}.items():
            for canary in (*tokens, "canary-typed-live-7f3e"):
                assert canary not in text, f"a Live View secret in the {where}"
    finally:
        if served.process.poll() is None:
            served.stop()
