"""Live View on a real node: a person, in a browser of their own, sees an agent's tab and acts in it.

The must-shows of issue 15: a batch stopped on a sign-in page is finished by a person through the
Live View page, then resumed (the site counts one sign-in and one order); the agent's writes are
refused while the person holds control; bad links and a second controller are refused.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page

from bridge.config import load_config
from bridge.node import Node
from tests.integration.person import person, wait_for_frames
from tests.integration.serving import app_over
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


def element_box(node: Node, tab: int, selector: str) -> dict[str, float]:
    """Where ``selector`` is in the agent's tab, in CSS pixels (the test looks; the person only sees frames)."""
    async def box() -> dict[str, float] | None:
        found: dict[str, float] | None = await node.browser.page(tab).locator(selector).bounding_box()
        return found
    found = asyncio.run_coroutine_threadsafe(box(), node.io.loop).result(10)
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


def until(condition: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:g} s")
        time.sleep(0.05)
    return value


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
        assert refused.status_code == 200 and refused.json()["code"] == "tab_claimed", refused.text
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
