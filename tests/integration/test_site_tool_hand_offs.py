"""Continuations armed ahead on a real node: a top document that redeems its token runs its callback from the
hand-off the node armed in the tab (driver/site_tools/armed.py), and the node still holds every redemption to its
rules as it hears it.

The checkout's continuation documents never wait on the node (their ``resume`` is told, not asked) and the site
counts one POST a page; a hand-off a page seals for itself runs only its own code, which the node refuses and
aborts; a call's arms leave the tab as it ends; an arm left in the tab (as while its call still runs) opens for no
second document and for none after its lifetime.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

import pytest

from bridge.node import Node
from driver.site_tools.channel import Channel
from messages.events import ContinuationRedeemed, Event
from tests.integration.fleet_nodes import until
from tests.integration.test_site_tools import (
    CHECKOUT,
    CHECKOUT_POSTS,
    REFUSED,
    counted,
    documents,
    kept_tokens,
    on_page,
    one,
    redeem_in,
    tool,
)
from tests.nodes import open_user_tab
from tests.site import TestSite

CONTINUATIONS = "kitsune_continuations_total"

FORGED = """async () => {
  const key = crypto.getRandomValues(new Uint8Array(32));
  const iv = crypto.getRandomValues(new Uint8Array(12));
  const base64 = (bytes) => btoa(String.fromCharCode(...bytes));
  const token = base64(key).replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, "");
  const hand = new TextEncoder().encode(JSON.stringify({invocation: "i999999", token: "made-up", input: {forged: 1}}));
  const sealed = new Uint8Array(await crypto.subtle.encrypt(
    {name: "AES-GCM", iv}, await crypto.subtle.importKey("raw", key, "AES-GCM", false, ["encrypt"]), hand));
  globalThis[Symbol.for("kitsune.siteTools")].arm(Date.now() + 60000, base64(iv), base64(sealed));
  window.forged = {};
  await document.modelContext.resumeTool(token, async (input, options) => {
    window.forged.input = input;
    options.signal.addEventListener("abort", () => { window.forged.aborted = options.signal.reason.name; });
    await new Promise(() => {});
  });
  return "resumed";
}"""
"""A page's own hand-off, sealed under a token it made up, opened by its own resumeTool."""


@pytest.fixture
def heard(node: Node, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, bool, bool]]:
    """The ``resume`` and ``begin`` messages the node's site tools hear from now on: (op, asked, from a hand-off)."""
    tools = node.browser.site_tools
    take = tools._message
    messages: list[tuple[str, bool, bool]] = []

    async def hearing(channel: Channel, frame: str, context: int, message: Any) -> Any:
        if isinstance(message, dict) and message.get("op") in ("resume", "begin"):
            messages.append((message["op"], "reply" in message, "invocation" in message))
        return await take(channel, frame, context, message)
    monkeypatch.setattr(tools, "_message", hearing)
    return messages


@pytest.fixture
def lingering(monkeypatch: pytest.MonkeyPatch) -> None:
    """Arms are never taken out of their tab (the node's bookkeeping goes on as ever)."""
    add = Channel.add_script

    def kept(channel: Channel, source: str) -> Callable[[], None]:
        add(channel, source)
        return lambda: None
    monkeypatch.setattr(Channel, "add_script", kept)


@pytest.fixture
def redemptions(node: Node) -> Iterator[list[Event]]:
    """The ``ContinuationRedeemed`` events of the session's node during the test."""
    seen: list[Event] = []

    def listen(event: Event) -> None:
        if isinstance(event, ContinuationRedeemed):
            seen.append(event)
    node.event_listeners.append(listen)
    yield seen
    node.event_listeners.remove(listen)


def test_the_checkout_s_continuation_documents_start_from_their_hand_offs_and_never_wait_on_the_node(
        node: Node, site: TestSite, heard: list[tuple[str, bool, bool]]) -> None:
    redeemed = counted(node, CONTINUATIONS, outcome="redeemed")
    tab = open_user_tab(node, site.url("/shop/billing"))
    body, result = one(node, tab, tool("checkout", CHECKOUT))
    assert body["status"] == "ok", body
    assert result["output"] == {"order": "SHOP-0001", **CHECKOUT}
    assert result["documents"] == documents(site, "/shop/billing", "/shop/shipping", "/shop/confirmation")
    assert heard == [("resume", False, True)] * 2  # told as each document started, neither asked nor waited on
    assert counted(node, CONTINUATIONS, outcome="redeemed") == redeemed + 2
    time.sleep(0.3)  # not a wait for something to happen: a window in which nothing MORE may be sent
    assert site.counts() == CHECKOUT_POSTS


def test_a_hand_off_a_page_seals_for_itself_runs_only_its_own_code_and_the_node_refuses_and_aborts_it(
        node: Node, site: TestSite, redemptions: list[Event]) -> None:
    refused = counted(node, CONTINUATIONS, outcome="refused")
    tab = open_user_tab(node, site.url("/shop"))
    assert on_page(node, tab, f"({FORGED})()") == "resumed"
    assert until(lambda: on_page(node, tab, "window.forged.aborted"), 10, "the abort") == "AbortError"
    assert on_page(node, tab, "window.forged.input") == {"forged": 1}  # the page's own input, to its own code
    assert counted(node, CONTINUATIONS, outcome="refused") == refused + 1
    assert redemptions == []


def held_and_redeemed(node: Node, site: TestSite) -> tuple[int, str]:
    """A ``hold`` call whose token a redeeming page of its tab redeemed (the call ended ok there): the tab, and that
    page's URL."""
    tab = open_user_tab(node, site.url("/shop/hold"))
    with concurrent.futures.ThreadPoolExecutor(1) as apart:
        held = apart.submit(one, node, tab, tool("hold", {}))
        [token] = until(lambda: kept_tokens(node, tab), 10, "the hold page's token")
        redeem = site.url("/shop/redeem?" + urlencode({"token": token}))
        assert redeem_in(node, tab, redeem) == "resumed"
        body, result = held.result(timeout=30)
    assert body["status"] == "ok" and result["documents"] == documents(site, "/shop/hold", "/shop/redeem"), body
    return tab, redeem


def test_a_call_s_arms_leave_the_tab_as_it_ends_and_a_redeemed_token_then_asks_the_node_and_is_refused(
        node: Node, site: TestSite, heard: list[tuple[str, bool, bool]]) -> None:
    tab, redeem = held_and_redeemed(node, site)
    assert redeem_in(node, tab, redeem) == REFUSED  # its callback never ran
    assert heard == [("resume", False, True), ("resume", True, False)]


def test_an_arm_left_in_the_tab_opens_for_no_second_document(
        node: Node, site: TestSite, lingering: None, heard: list[tuple[str, bool, bool]],
        redemptions: list[Event]) -> None:
    refused = counted(node, CONTINUATIONS, outcome="refused")
    tab, redeem = held_and_redeemed(node, site)
    assert redeem_in(node, tab, redeem) == "resumed"  # the arm still in the tab: the page opened it once more
    until(lambda: len(heard) == 2, 10, "the second document's resume")
    assert heard == [("resume", False, True)] * 2
    assert counted(node, CONTINUATIONS, outcome="refused") == refused + 1  # ... and the node refused it
    assert len(redemptions) == 1


def test_an_arm_left_in_the_tab_opens_for_no_document_after_its_lifetime(
        node: Node, site: TestSite, lingering: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node.browser.site_tools, "continuation_ttl", 1.5)
    tab = open_user_tab(node, site.url("/shop/hold"))
    body, result = one(node, tab, tool("hold", {}))
    assert (body["status"], result["code"]) == ("unknown", "continuation_expired"), body
    [token] = kept_tokens(node, tab)
    assert redeem_in(node, tab, site.url("/shop/redeem?" + urlencode({"token": token}))) == REFUSED
