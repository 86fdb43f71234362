"""A hostile page's own binding messages on a real node: a document's start is one message (its hello comes with its
first message, a ``resume`` here), and the node takes it once, in order, and for that document alone.

The page is the test itself, speaking to the node as any script of a page can: through Playwright's binding
controller, which the page's global scope holds (``navigator.modelContext`` takes only the binding's own name out of
its reach). The tool is the shop's ``hold``: it asks for a token and settles; the test then redeems the token in a
document of its own making (same tab, same origin) and answers for it.
"""

from __future__ import annotations

import concurrent.futures
from typing import Any

from bridge.node import Node
from tests.integration.calls import batch
from tests.integration.fleet_nodes import until
from tests.nodes import open_user_tab
from tests.site import TestSite
from tests.site.shop import TOKENS_KEY

SEND = """async (messages) => {
  const controller = globalThis.__playwright__binding__controller__;
  const answers = [];
  for (const message of messages) {  // one after the other, as a page's script may send them
    const answer = controller.callBinding("__kitsuneSiteTools", message);
    answers.push(await answer.then((value) => ({value}), () => "refused"));
  }
  return answers;
}"""
"""The answers to the binding messages a page sends itself: ``{"value": ...}``, or ``"refused"``."""
DOC, OTHER, FRAME_DOC = "a" * 32, "b" * 32, "c" * 32
"""Documents' names (nonces) of the page's choosing."""
FRAME = """() => new Promise((loaded) => {
  const frame = document.createElement("iframe");
  frame.src = "/text";
  frame.onload = () => loaded(true);
  document.body.append(frame);
})"""


def sent(node: Node, tab: int, messages: list[dict[str, Any]], frame: int = 0) -> list[Any]:
    """The node's answers to ``messages``, sent by the tab's document in its ``frame`` (in frame order)."""
    answers: list[Any] = node.io.run(node.browser.page(tab).frames[frame].evaluate(SEND, messages), timeout=30)
    return answers


def held(node: Node, tab: int) -> int:
    """How many of the tab's documents the node holds."""
    async def counted() -> int:
        return node.browser.site_tools.held(tab)["documents"]
    return node.io.run(counted(), timeout=10)


def test_a_document_s_start_is_taken_once_in_order_and_only_its_own_document_acts_on_its_invocation(
        node: Node, site: TestSite) -> None:
    tab = open_user_tab(node, site.url("/shop/hold"))
    page = node.browser.page(tab)
    with concurrent.futures.ThreadPoolExecutor(1) as apart:
        call = apart.submit(batch, node, [{"action": "callSiteTool", "name": "hold", "input": {"note": "n"}}],
                            tabId=tab)
        [token] = until(lambda: node.io.run(page.evaluate(f"JSON.parse(sessionStorage.getItem('{TOKENS_KEY}') "
                                                           "|| '[]')"), timeout=30), 10, "the hold page's token")
        node.io.run(page.goto(site.url("/text")), timeout=30)  # a document of the test's own: it redeems
        resume = {"op": "resume", "doc": DOC, "token": token}
        out_of_order = [{"op": "settled", "doc": DOC, "invocation": "i1", "ok": True, "value": "early"}, resume,
                        {"op": "begin", "doc": DOC, "invocation": "i1"}, {"op": "took", "doc": DOC, "invocation": "i1"}]
        assert sent(node, tab, out_of_order) == ["refused"] * 4  # no hello came first: nothing is taken
        assert held(node, tab) == 0 and not call.done()

        start, *again = sent(node, tab, [{**resume, "hello": True}, {**resume, "hello": True}, resume])
        assert again == ["refused", "refused"]  # a second hello of the document, then the token once redeemed
        assert set(start["value"]) == {"invocation", "token", "input"} and start["value"]["input"] == {"note": "n"}
        settled = {"op": "settled", "doc": DOC, "invocation": start["value"]["invocation"], "ok": True,
                   "value": {"step": "mine"}}

        assert sent(node, tab, [{**settled, "doc": OTHER}]) == ["refused"]  # not this frame's document
        assert node.io.run(page.evaluate(FRAME), timeout=30)
        from_frame = sent(node, tab, [{**settled, "doc": FRAME_DOC, "hello": True}], frame=1)
        assert from_frame == ["refused"] and held(node, tab) == 2  # another document of the tab: not its invocation
        assert not call.done()

        assert sent(node, tab, [settled, {**settled, "value": {"step": "again"}}]) == [{"value": None}, "refused"]
        body = call.result(timeout=30)
    assert body["status"] == "ok", body
    assert body["results"][0]["output"] == {"step": "mine"}
    assert body["results"][0]["documents"] == [{"url": site.url("/shop/hold"), "frame": "main"},
                                               {"url": site.url("/text"), "frame": "main"}]
