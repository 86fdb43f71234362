"""The shop of the test site: its server side over plain HTTP (what it counts and answers), and its pages'
scripts in a real Chromium against a stand-in ``navigator.modelContext`` that the test drives by hand.

The stand-in is no implementation of the API: it records what a page declares and redeems, and lets the
test call a tool's ``execute`` or a redeemed callback with made-up tokens. The node's own injected API is
tested against the same pages in tests/integration/test_site_tools.py.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from playwright.sync_api import Browser, Page

from tests.integration.person import person
from tests.site import TestSite
from tests.site.shop import PAGES, TOKENS_KEY

__all__ = ["person"]

STAND_IN = """(() => {
  let tokens = 0, callback = null;
  const options = () => ({invocation: {requestToken: async () => "tok-" + (++tokens)},
                          signal: new AbortController().signal});
  const shop = {tools: {}, redeemed: []};
  shop.run = (name, input) => shop.tools[name].execute(input, options());
  shop.resume = (input) => callback(input, options());
  Object.defineProperty(navigator, "modelContext", {value: {
    registerTool: (tool) => { shop.tools[tool.name] = tool; },
    resumeTool: async (token, cb) => { shop.redeemed.push(token); callback = cb; },
  }});
  window.__shop = shop;
})();"""
CHECKOUT = {"shipping_address": "1 Ship St", "billing_address": "2 Bill Rd"}


@pytest.fixture(scope="module")
def site() -> Iterator[TestSite]:
    with TestSite() as running:
        yield running


@pytest.fixture
def page(site: TestSite, person: Browser) -> Iterator[Page]:
    site.reset()
    context = person.new_context()
    context.set_default_timeout(10_000)
    context.add_init_script(STAND_IN)
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert not errors, errors  # every script of every page the test opened ran without an error


def _post(site: TestSite, path: str, **fields: str) -> tuple[int, Any]:
    request = urllib.request.Request(site.url(path), data=urlencode(fields).encode(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _get(site: TestSite, path: str) -> Any:
    with urllib.request.urlopen(site.url(path), timeout=10) as answer:
        return json.loads(answer.read())


# -- the server side ---------------------------------------------------------------------------------

def test_a_checkout_is_one_counted_post_per_step_and_the_order_comes_from_the_server(site: TestSite) -> None:
    site.reset()
    status, billed = _post(site, "/shop/billing", billing_address="2 Bill Rd")
    assert (status, billed) == (200, {"cart": "CART-0001"})
    assert _post(site, "/shop/confirmation", cart="CART-0001")[0] == 409  # not shipped yet
    assert _post(site, "/shop/shipping", cart="CART-0001", shipping_address="1 Ship St") == (200, {"cart": "CART-0001"})
    assert _post(site, "/shop/confirmation", cart="CART-0001") == (200, {
        "order": "SHOP-0001", "shipping_address": "1 Ship St", "billing_address": "2 Bill Rd"})
    assert _post(site, "/shop/confirmation", cart="CART-0001")[0] == 409  # ordered once
    assert _post(site, "/shop/shipping", cart="CART-9999", shipping_address="x")[0] == 400
    assert site.counts() == {"POST /shop/billing": 1, "POST /shop/shipping": 2, "POST /shop/confirmation": 3}
    site.reset()
    assert _post(site, "/shop/shipping", cart="CART-0001", shipping_address="x")[0] == 400  # reset forgot it
    assert _post(site, "/shop/billing", billing_address="b")[1] == {"cart": "CART-0001"}


def test_search_is_a_read_and_try_on_and_leave_are_counted(site: TestSite) -> None:
    site.reset()
    assert _get(site, "/shop/api/search?q=DRESS") == {"query": "DRESS", "results": [
        {"id": "dress-red", "name": "Red summer dress", "price": "49.00"},
        {"id": "dress-blue", "name": "Blue evening dress", "price": "89.00"}]}
    assert _get(site, "/shop/api/search?q=hat")["results"] == []
    assert _post(site, "/shop/tryon", item_id="coat-wool") == (200, {"item_id": "coat-wool", "fit": "runs large"})
    assert _post(site, "/shop/tryon", item_id="nothing")[0] == 404
    assert [_post(site, "/shop/leave", note="n")[1] for _ in range(2)] == [{"count": 1}, {"count": 2}]
    assert _post(site, "/shop/nowhere")[0] == 404
    assert site.counts() == {"POST /shop/tryon": 2, "POST /shop/leave": 2, "POST /shop/nowhere": 1}
    for path in PAGES:
        with urllib.request.urlopen(site.url(path), timeout=10) as answer:
            assert answer.status == 200 and b"navigator.modelContext" in answer.read()
    assert site.counts()["POST /shop/leave"] == 2  # pages are reads


# -- the pages' scripts --------------------------------------------------------------------------------

def _shop(page: Page, expression: str) -> Any:
    return page.evaluate(f"async () => {expression}")


def _start(page: Page, expression: str) -> None:
    """Start ``expression`` without waiting for it (its page navigates away as it runs)."""
    page.evaluate(f"() => {{ {expression}; }}")


def _declared(page: Page) -> dict[str, Any]:
    declared: dict[str, Any] = _shop(page, "Object.fromEntries(Object.entries(window.__shop.tools).map("
                                           "([name, tool]) => [name, tool.inputSchema]))")
    return declared


def test_each_page_declares_its_tool_with_a_closed_schema_or_redeems_its_token(site: TestSite, page: Page) -> None:
    tools = {"/shop": "search", "/shop/billing": "checkout", "/shop/item": "try_on", "/shop/leave": "leave",
             "/shop/handoff": "hand_off", "/shop/hold": "hold", "/shop/waits": "wait_for_frame"}
    for path in PAGES:
        page.goto(site.url(path) + "?token=given")
        declared = _declared(page)
        assert list(declared) == ([tools[path]] if path in tools else []), path
        assert all(schema["type"] == "object" and schema["additionalProperties"] is False
                   for schema in declared.values())
        assert _shop(page, "window.__shop.redeemed") == ([] if path in tools else ["given"]), path
    assert site.counts() == {}


def test_the_checkout_crosses_three_pages_with_two_tokens_and_one_post_each(site: TestSite, page: Page) -> None:
    page.goto(site.url("/shop/billing"))
    _start(page, f"window.__shop.run('checkout', {json.dumps(CHECKOUT)})")
    page.wait_for_url(site.url("/shop/shipping?token=tok-1&cart=CART-0001"))
    _start(page, f"window.__shop.resume({json.dumps(CHECKOUT)})")
    # The stand-in's tokens count per document: the shipping page's is tok-1 too.
    page.wait_for_url(site.url("/shop/confirmation?token=tok-1&cart=CART-0001"))
    assert _shop(page, "window.__shop.redeemed") == ["tok-1"]
    assert _shop(page, "window.__shop.resume({})") == {"order": "SHOP-0001", **CHECKOUT}
    assert json.loads(page.evaluate(f"sessionStorage.getItem('{TOKENS_KEY}')")) == ["tok-1", "tok-1"]
    assert site.counts() == {"POST /shop/billing": 1, "POST /shop/shipping": 1, "POST /shop/confirmation": 1}


def test_try_on_makes_its_frame_on_demand_and_the_frame_answers(site: TestSite, page: Page) -> None:
    page.goto(site.url("/shop/item"))
    assert page.locator("iframe").count() == 0
    assert _shop(page, "window.__shop.run('try_on', {item_id: 'dress-blue'})") == {"step": "frame"}
    frame = page.frame_locator("#tryon")
    frame.locator("body[data-resumed=yes]").wait_for()
    inner = page.frames[1]
    assert inner.url == site.url("/shop/tryon-frame?token=tok-1")
    assert inner.evaluate("window.__shop.redeemed") == ["tok-1"]
    assert inner.evaluate("window.__shop.resume({item_id: 'dress-blue'})") == {"item_id": "dress-blue",
                                                                                "fit": "runs small"}
    assert site.counts() == {"POST /shop/tryon": 1}


def test_leave_navigates_while_it_runs_and_answers_on_the_page_it_left_for(site: TestSite, page: Page) -> None:
    page.goto(site.url("/shop/leave"))
    _start(page, "window.__shop.run('leave', {note: 'n'})")  # it never settles: the page goes
    page.wait_for_url(site.url("/shop/leave?left=1"))
    assert _shop(page, "window.__shop.run('leave', {note: 'n'})") == {"left": True, "count": 2}
    assert site.counts() == {"POST /shop/leave": 2}


def test_hand_off_carries_the_token_to_the_other_page_and_redeem_tries_twice(site: TestSite, page: Page) -> None:
    page.goto(site.url("/shop/handoff?" + urlencode({"to": "/shop/redeem?twice=1"})))
    _start(page, "window.__shop.run('hand_off', {})")
    page.wait_for_url(site.url("/shop/redeem?twice=1&token=tok-1"))
    assert _shop(page, "window.__shop.resume({})") == {"redeemed": "/shop/redeem", "again": "accepted"}
    assert _shop(page, "window.__shop.redeemed") == ["tok-1", "tok-1"]  # the stand-in refuses nothing
    page.goto(site.url("/shop/handoff"))
    assert "no ?to=" in _shop(page, "window.__shop.run('hand_off', {}).catch(e => e.message)")
    assert site.counts() == {}
