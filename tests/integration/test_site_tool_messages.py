"""A hostile page's own binding messages on a real node: a document's start is one message (its hello comes with its
first message, a ``resume`` here), and the node takes it once, in order, for that document alone, from the execution
context the browser says it came from.

The page is the test itself, speaking to the node as a page's script could if it held the binding: the init script
takes the binding out of every document's reach at its start, so the test adds it again to the tab's documents on a
CDP session of its own (``Runtime.addBinding``; the browser tells every session that added the name of each call).
What the node answers to each message is read where the node takes it (``SiteTools._message``, wrapped): the page's
answers go to the init script's own waiting messages, by number, and the test's are none of them. The tool is the
shop's ``hold``: it asks for a token and settles; the test then redeems the token in a document of its own making
(same tab, same origin) and answers for it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
from collections.abc import Iterator
from typing import Any

import pytest

from bridge.node import Node
from driver.site_tools import BINDING
from driver.site_tools.channel import MAX_MESSAGE_CHARS
from tests.integration.calls import batch
from tests.integration.fleet_nodes import until
from tests.nodes import open_user_tab
from tests.site import TestSite
from tests.site.shop import TOKENS_KEY

SEND = f"""(messages) => {{
  for (const message of messages) globalThis[{json.dumps(BINDING)}](typeof message === "string" ? message
    : JSON.stringify(message));  // one after the other, as a page's script may send them
}}"""
"""Sends each message (an object as its JSON, a string as it is) through the binding, from the frame's main world."""
DOC, OTHER, FRAME_DOC = "a" * 32, "b" * 32, "c" * 32
"""Documents' names (nonces) of the page's choosing."""
FRAME = """() => new Promise((loaded) => {
  const frame = document.createElement("iframe");
  frame.src = "/text";
  frame.onload = () => loaded(true);
  document.body.append(frame);
})"""


class Heard:
    """What the node answered to each of the test's messages it took (those naming one of the test's documents), in
    the order they came: ``{"value": ...}`` or ``"refused"``."""

    def __init__(self, node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
        self.answers: list[Any] = []
        tools = node.browser.site_tools
        message = tools._message

        async def heard(*args: Any) -> Any:
            if not isinstance(args[-1], dict) or args[-1].get("doc") not in (DOC, OTHER, FRAME_DOC):
                return await message(*args)  # a message of the shop's page
            at = len(self.answers)
            self.answers.append(None)
            try:
                answer = await message(*args)
            except Exception:
                self.answers[at] = "refused"
                raise
            self.answers[at] = {"value": answer}
            return answer
        monkeypatch.setattr(tools, "_message", heard)

    def after(self, count: int, what: str) -> list[Any]:
        """The answers of the next ``count`` messages the node takes (they are taken off the list)."""
        until(lambda: len(self.answers) >= count and None not in self.answers[:count], 10, what)
        taken, self.answers[:count] = self.answers[:count], []
        return taken


@pytest.fixture
def heard(node: Node, monkeypatch: pytest.MonkeyPatch) -> Iterator[Heard]:
    yield Heard(node, monkeypatch)


def bind(node: Node, tab: int) -> None:
    """Give the tab's documents the binding again, on a CDP session of the test's (kept as long as the page)."""
    async def bound() -> None:
        page = node.browser.page(tab)
        session = await page.context.new_cdp_session(page)
        await session.send("Runtime.addBinding", {"name": BINDING})
    node.io.run(bound(), timeout=30)


def send(node: Node, tab: int, messages: list[Any], frame: int = 0) -> None:
    """Send ``messages`` from the tab's document in its ``frame`` (in frame order)."""
    node.io.run(node.browser.page(tab).frames[frame].evaluate(SEND, messages), timeout=30)


def held(node: Node, tab: int) -> int:
    """How many of the tab's documents the node holds."""
    async def counted() -> int:
        return node.browser.site_tools.held(tab)["documents"]
    return node.io.run(counted(), timeout=10)


def test_a_document_s_start_is_taken_once_in_order_and_only_its_own_document_acts_on_its_invocation(
        node: Node, site: TestSite, heard: Heard) -> None:
    tab = open_user_tab(node, site.url("/shop/hold"))
    page = node.browser.page(tab)
    assert node.io.run(page.evaluate(f"() => [typeof globalThis[{json.dumps(BINDING)}], "
                                     "typeof globalThis.__playwright__binding__controller__]"), timeout=30) == [
        "undefined", "undefined"]  # the init script took the binding; Playwright has none in the page
    with concurrent.futures.ThreadPoolExecutor(1) as apart:
        call = apart.submit(batch, node, [{"action": "callSiteTool", "name": "hold", "input": {"note": "n"}}],
                            tabId=tab)
        [token] = until(lambda: node.io.run(page.evaluate(f"JSON.parse(sessionStorage.getItem('{TOKENS_KEY}') "
                                                           "|| '[]')"), timeout=30), 10, "the hold page's token")
        node.io.run(page.goto(site.url("/text")), timeout=30)  # a document of the test's own: it redeems
        bind(node, tab)
        resume = {"op": "resume", "doc": DOC, "token": token, "reply": 1}
        out_of_order = [{"op": "settled", "doc": DOC, "invocation": "i1", "ok": True, "value": "early"}, resume,
                        {"op": "begin", "doc": DOC, "invocation": "i1"}, {"op": "took", "doc": DOC, "invocation": "i1"}]
        send(node, tab, out_of_order)
        assert heard.after(4, "the messages before a hello") == ["refused"] * 4  # no hello came first: nothing taken
        assert held(node, tab) == 0 and not call.done()

        send(node, tab, [{**resume, "hello": True}, {**resume, "hello": True}, {**resume, "doc": OTHER, "hello": True},
                         resume])
        start, *again = heard.after(4, "a hello, two more and a replay")
        assert again == ["refused"] * 3  # a second hello of the document (by its name or another), the token again
        assert set(start["value"]) == {"invocation", "token", "input"} and start["value"]["input"] == {"note": "n"}
        settled = {"op": "settled", "doc": DOC, "invocation": start["value"]["invocation"], "ok": True,
                   "value": {"step": "mine"}}

        send(node, tab, [{**settled, "doc": OTHER}])
        assert heard.after(1, "a message naming another document") == ["refused"]
        assert node.io.run(page.evaluate(FRAME), timeout=30)
        bind(node, tab)  # the frame's document, whose init script took the binding too
        send(node, tab, [{**settled, "doc": FRAME_DOC, "hello": True}], frame=1)
        assert heard.after(1, "the frame's hello") == ["refused"]  # another document of the tab: not its invocation
        assert held(node, tab) == 2 and not call.done()

        send(node, tab, [settled, {**settled, "value": {"step": "again"}}])
        assert heard.after(2, "the invocation settled twice") == [{"value": None}, "refused"]
        body = call.result(timeout=30)
    assert body["status"] == "ok", body
    assert body["results"][0]["output"] == {"step": "mine"}
    assert body["results"][0]["documents"] == [{"url": site.url("/shop/hold"), "frame": "main"},
                                               {"url": site.url("/text"), "frame": "main"}]


def test_a_message_from_another_world_one_over_the_bound_or_not_json_is_dropped_unread(
        node: Node, site: TestSite, heard: Heard) -> None:
    tab = open_user_tab(node, site.url("/text"))
    bind(node, tab)
    hello = {"op": "clear", "doc": DOC, "seq": 1, "hello": True, "reply": 1}

    async def from_isolated_world() -> None:
        page = node.browser.page(tab)
        session = await page.context.new_cdp_session(page)
        tree = await session.send("Page.getFrameTree")
        world = await session.send("Page.createIsolatedWorld", {"frameId": tree["frameTree"]["frame"]["id"]})
        await session.send("Runtime.addBinding", {"name": BINDING, "executionContextId": world["executionContextId"]})
        await session.send("Runtime.evaluate", {"expression": f"({SEND})({json.dumps([hello])})",
                                                "contextId": world["executionContextId"]})
    node.io.run(from_isolated_world(), timeout=30)  # a world no page script reaches: none of the page's documents
    send(node, tab, [{**hello, "more": "x" * MAX_MESSAGE_CHARS}, "{not json"])
    node.io.run(asyncio.sleep(0.5), timeout=10)  # what the node would take by now, had it taken anything
    assert heard.answers == [] and held(node, tab) == 0

    send(node, tab, [hello])  # the same hello from the page's own world is taken
    assert heard.after(1, "the page's hello") == [{"value": None}] and held(node, tab) == 1
