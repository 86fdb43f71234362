"""Site tools as the WebMCP draft reads today (issue 32), on a real node with a real Chromium.

``document.modelContext.registerTool(tool, {signal})``: an aborted signal unregisters the tool and a ``toolchange``
fires; annotations are listed; ``navigator.modelContext`` keeps the older form's methods; a declarative
``<form toolname>`` is a tool whose call fills the form and submits it once (counted at the site), answered with
the JSON-LD of the page the submission loads; no ``modelContext`` at all on a plain ``http:`` page off loopback.
(A ``readOnlyHint`` tool called by read-only and asking agents: ``test_site_tool_limits``.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.async_api import Route

from bridge.node import Node
from tests.integration.calls import batch
from tests.integration.fleet_nodes import until
from tests.nodes import open_user_tab
from tests.site import TestSite, shop

INSECURE = "http://shop.test"
"""A name off loopback, served by the test itself (a route of the tab's page): a plain ``http:`` origin that is no
secure context."""
PROBE = "[typeof document.modelContext, typeof navigator.modelContext, isSecureContext]"


def one(node: Node, tab: int, command: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The body of a batch of ``command`` alone on ``tab``, and its one result."""
    body = batch(node, [command], tabId=tab)
    return body, body["results"][0]


def on_page(node: Node, tab: int, script: str) -> Any:
    """``script`` evaluated in the tab's page, as the page's own script."""
    return node.io.run(node.browser.page(tab).evaluate(script), timeout=30)


def listed(node: Node, tab: int) -> dict[str, dict[str, Any]]:
    """The tools ``siteTools`` lists on ``tab``, by name."""
    return {tool["name"]: tool for tool in one(node, tab, {"action": "siteTools"})[1]["tools"]}


def test_a_tool_registered_with_a_signal_goes_when_it_aborts_with_a_toolchange_and_annotations_are_listed(
        node: Node, site: TestSite) -> None:
    tab = open_user_tab(node, site.url("/shop/wishlist"))
    tools = until(lambda: len(found := listed(node, tab)) == 2 and found, 10, "the wishlist's two tools")
    assert tools["stock"]["annotations"] == {"readOnlyHint": True, "untrustedContentHint": True}
    assert "annotations" not in tools["wish"]
    changes = until(lambda: on_page(node, tab, "window.toolchanges") == 2 and 2, 10, "a toolchange per registration")
    assert on_page(node, tab, "window.wishEnded") == "registered"

    on_page(node, tab, "window.dropWish()")
    until(lambda: list(listed(node, tab)) == ["stock"], 10, "wish unregistered")
    until(lambda: on_page(node, tab, "window.toolchanges") == changes + 1, 10, "the abort's toolchange")
    assert on_page(node, tab, "window.wishEnded") == "registered"  # its promise had resolved: the abort changes nothing
    assert on_page(node, tab, """document.modelContext.registerTool(
        {name: "late", description: "registered with a signal aborted already", execute: () => null},
        {signal: AbortSignal.abort(new DOMException("gone", "AbortError"))}).then(() => "registered", (e) => e.name)
        """) == "AbortError"
    body, result = one(node, tab, {"action": "callSiteTool", "name": "wish", "input": {"item_id": "coat-wool"}})
    assert (body["status"], result["code"]) == ("failed", "site_tool_not_found"), body
    assert site.counts() == {}


def test_navigator_model_context_keeps_the_older_forms_methods_over_the_same_tools(node: Node, site: TestSite) -> None:
    tab = open_user_tab(node, site.url("/shop/wishlist"))
    until(lambda: len(listed(node, tab)) == 2, 10, "the wishlist's two tools")
    assert on_page(node, tab, """[typeof document.modelContext.unregisterTool,
        typeof document.modelContext.provideContext, typeof document.modelContext.clearContext,
        ...["registerTool", "unregisterTool", "provideContext", "clearContext", "resumeTool"].map(
          (name) => typeof navigator.modelContext[name])]""") == ["undefined"] * 3 + ["function"] * 5
    before = on_page(node, tab, "window.toolchanges")
    on_page(node, tab, """navigator.modelContext.provideContext({tools: [
        {name: "older", description: "the older form", execute: () => "older ran"}]})""")
    assert list(until(lambda: list(found := listed(node, tab)) == ["older"] and found, 10, "the provided context"))
    assert one(node, tab, {"action": "callSiteTool", "name": "older"})[1]["output"] == "older ran"
    on_page(node, tab, "navigator.modelContext.unregisterTool('older')")
    until(lambda: listed(node, tab) == {}, 10, "older unregistered")
    assert until(lambda: on_page(node, tab, "window.toolchanges") >= before + 2, 10, "toolchanges of the older form")


def test_a_declarative_form_is_a_tool_whose_call_submits_it_once_and_answers_with_the_json_ld_it_loads(
        node: Node, site: TestSite) -> None:
    tab = open_user_tab(node, site.url("/shop/order"))
    order = until(lambda: listed(node, tab).get("order"), 10, "the order form's tool")
    assert (order["description"], order["form"]) == ("Order an item of the shop.", {"autosubmit": True})
    assert order["inputSchema"] == {"type": "object", "additionalProperties": False, "required": ["item_id"],
                                    "properties": {
                                        "item_id": {"type": "string", "description": "The item's id"},
                                        "quantity": {"type": "number", "minimum": 1, "maximum": 9},
                                        "gift": {"type": "boolean"},
                                        "size": {"type": "string", "enum": ["s", "m", "l"]}}}
    too_many = {"item_id": "x", "quantity": 12}
    bad, refused = one(node, tab, {"action": "callSiteTool", "name": "order", "input": too_many})
    assert (refused["code"], refused["state"]["path"]) == ("invalid_input", "/quantity"), bad

    value = {"item_id": "coat-wool", "quantity": 2, "gift": True, "size": "m"}
    body, result = one(node, tab, {"action": "callSiteTool", "name": "order", "input": value})
    assert body["status"] == "ok", body
    assert result["output"] == {"order": "ORDER-0001", "channel": "agent", "gift": "on", "item_id": "coat-wool",
                                "quantity": "2", "size": "m"}
    assert result["documents"] == [{"url": site.url("/shop/order"), "frame": "main"}] * 2  # the form's, the answer's
    time.sleep(0.3)  # not a wait for something to happen: a window in which nothing MORE may be sent
    assert site.counts() == {"POST /shop/order": 1}


def test_a_declarative_form_without_toolautosubmit_is_filled_for_a_person_to_submit(node: Node, site: TestSite) -> None:
    tab = open_user_tab(node, site.url("/shop/note"))
    note = until(lambda: listed(node, tab).get("note"), 10, "the note form's tool")
    assert note["form"] == {"autosubmit": False}
    body, result = one(node, tab, {"action": "callSiteTool", "name": "note", "input": {"text": "call me"}})
    assert body["status"] == "ok" and result["output"] == {"submitted": False, "filled": ["text"]}, body
    assert on_page(node, tab, "[document.querySelector('textarea').value, document.activeElement.id]") == [
        "call me", "send"]
    time.sleep(0.3)  # not a wait for something to happen: a window in which nothing may be sent
    assert site.counts() == {}


@pytest.fixture
def insecure_tab(node: Node, site: TestSite) -> Iterator[int]:
    """A tab whose page answers ``INSECURE``'s requests with the shop's pages (in the browser, before any network)."""
    tab = open_user_tab(node, "about:blank")
    page = node.browser.page(tab)

    async def serve(route: Route) -> None:
        html = shop.DRAFT_PAGES.get(route.request.url.removeprefix(INSECURE).split("?")[0], "<title>none</title>")
        await route.fulfill(status=200, content_type="text/html", body=html)

    node.io.run(page.route(f"{INSECURE}/**", serve), timeout=30)
    yield tab
    node.io.run(page.unroute(f"{INSECURE}/**"), timeout=30)


@pytest.mark.parametrize("path", ["/shop/wishlist", "/shop/order"])
def test_a_plain_http_page_off_loopback_has_no_model_context_and_declares_nothing(
        node: Node, site: TestSite, insecure_tab: int, path: str) -> None:
    body, _ = one(node, insecure_tab, {"action": "navigate", "url": INSECURE + path})
    assert body["status"] == "ok", body
    assert on_page(node, insecure_tab, "location.origin") == INSECURE
    assert on_page(node, insecure_tab, PROBE) == ["undefined", "undefined", False]
    time.sleep(0.5)  # not a wait for something to happen: a window in which the page could declare a tool
    assert listed(node, insecure_tab) == {}
    loopback = open_user_tab(node, site.url(path))  # the same page on loopback: potentially trustworthy
    assert on_page(node, loopback, PROBE) == ["object", "object", True]
    assert until(lambda: listed(node, loopback), 10, "the loopback page's tools")
