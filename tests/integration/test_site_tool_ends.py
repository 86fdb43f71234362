"""How a site tool's call ends when it does not complete: the tool throws, the step times out, the tab
closes, a token is asked for too late, the URL lists come to refuse the site. Each is told truthfully
(unknown once the tool ran), and every outstanding token is revoked with the reason; the token issued with
an invocation that never asks for it is dropped unseen.

The tools are declared on the shop's /shop page by the test itself (a ``js`` step: the page's own API),
so each case is a few lines of page script beside its assertions.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from bridge.node import Node
from core.url_policy import UrlPolicy
from messages.events import (
    ContinuationRequested,
    ContinuationRevoked,
    Event,
    SiteToolCalled,
    SiteToolChainCompleted,
    SiteToolEvent,
)
from tests.integration.calls import batch
from tests.integration.fleet_nodes import until
from tests.nodes import open_user_tab
from tests.site import TestSite


@pytest.fixture
def site_events(node: Node) -> Iterator[list[SiteToolEvent]]:
    """The site-tool events the session's node records while a test runs."""
    seen: list[SiteToolEvent] = []

    def listen(event: Event) -> None:
        if isinstance(event, SiteToolEvent):
            seen.append(event)
    node.event_listeners.append(listen)
    try:
        yield seen
    finally:
        node.event_listeners.remove(listen)


def declared(node: Node, site: TestSite, name: str, execute: str) -> int:
    """A tab on the shop's front page whose page also declares tool ``name`` with the JavaScript ``execute``."""
    tab = open_user_tab(node, site.url("/shop"))
    register = (f"navigator.modelContext.registerTool({{name: {name!r}, description: 'a test tool', "
                f"inputSchema: {{type: 'object'}}, execute: {execute}}}); return true")
    body = batch(node, [{"action": "js", "code": register}], tabId=tab)
    assert body["status"] == "ok", body
    return tab


def called(node: Node, tab: int, name: str, **fields: Any) -> dict[str, Any]:
    """The result of a batch that calls tool ``name`` alone, with its step's status."""
    body = batch(node, [{"action": "callSiteTool", "name": name, **fields}], tabId=tab)
    result: dict[str, Any] = {**body["results"][0], "status": body["progress"][0]["status"]}
    return result


def page_title(node: Node, tab: int) -> str:
    title: str = node.io.run(node.browser.page(tab).title(), timeout=30)
    return title


def test_a_tool_that_throws_is_unknown_with_the_site_s_message_kept_out_of_the_error(
        node: Node, site: TestSite, site_events: list[SiteToolEvent]) -> None:
    tab = declared(node, site, "boom", "async () => { throw new RangeError('out of stock: canary-7') }")
    result = called(node, tab, "boom")
    assert (result["status"], result["code"]) == ("unknown", "site_tool_error")
    assert result["state"]["toolError"] == "out of stock: canary-7" and "canary" not in result["error"]
    assert "RangeError" in result["error"]
    assert not any(isinstance(e, SiteToolChainCompleted) for e in site_events)


def test_a_step_that_times_out_revokes_its_tokens_and_aborts_the_tool_s_signal(
        node: Node, site: TestSite, site_events: list[SiteToolEvent]) -> None:
    execute = ("async (input, options) => { const first = await options.invocation.requestToken(); "
               "window.pair = [first, await options.invocation.requestToken()]; "  # the one issued with it, a new one
               "options.signal.addEventListener('abort', () => { document.title = 'aborted' }); "
               "await new Promise(() => {}) }")
    tab = declared(node, site, "forever", execute)
    result = called(node, tab, "forever", timeout=1.0)
    assert (result["status"], result["code"]) == ("unknown", "timeout")
    until(lambda: page_title(node, tab) == "aborted", 5, "the tool's signal aborted")
    first, second = node.io.run(node.browser.page(tab).evaluate("window.pair"), timeout=30)
    assert first != second and min(len(first), len(second)) >= 32
    assert [type(e) for e in site_events if isinstance(e, ContinuationRequested)] == [ContinuationRequested] * 2
    revoked = [e for e in site_events if isinstance(e, ContinuationRevoked)]
    assert [(e.tool, e.reason) for e in revoked] == [("forever", "timeout")] * 2


def test_a_tab_that_closes_mid_chain_ends_it_tab_closed_and_revokes_its_token(
        node: Node, site: TestSite, site_events: list[SiteToolEvent]) -> None:
    execute = "async (input, options) => { await options.invocation.requestToken(); return 'handed on' }"
    tab = declared(node, site, "stay", execute)
    closer = threading.Timer(1.0, lambda: node.io.run(node.browser.page(tab).close(), timeout=30))
    closer.start()
    try:
        result = called(node, tab, "stay", timeout=20.0)
    finally:
        closer.join()
    assert (result["status"], result["code"]) == ("unknown", "tab_closed")
    assert [e.reason for e in site_events if isinstance(e, ContinuationRevoked)] == ["tab_closed"]


def test_a_token_issued_with_the_call_and_never_asked_for_is_dropped_unseen(
        node: Node, site: TestSite, site_events: list[SiteToolEvent]) -> None:
    held = node.browser.site_tools.tokens  # what other tests' calls may hold still
    tab = declared(node, site, "quiet", "async (input) => ({echo: input.n})")
    assert called(node, tab, "quiet", input={"n": 1})["output"] == {"echo": 1}
    assert [type(e) for e in site_events] == [SiteToolCalled, SiteToolChainCompleted]  # no token requested or revoked
    assert node.browser.site_tools.tokens == held


def test_a_token_asked_for_after_the_tool_settled_is_refused_and_the_call_ends_with_its_output(
        node: Node, site: TestSite) -> None:
    execute = ("async (input, options) => { setTimeout(() => options.invocation.requestToken().then("
               "() => { document.title = 'late token given' }, (e) => { document.title = 'late: ' + e.name }), 50);"
               " return {done: input.n} }")
    tab = declared(node, site, "late", execute)
    result = called(node, tab, "late", input={"n": 3})
    assert (result["status"], result["output"]) == ("ok", {"done": 3})
    until(lambda: page_title(node, tab).startswith("late"), 5, "the late token's answer")
    assert page_title(node, tab) == "late: InvalidStateError"


def test_a_token_of_a_site_the_url_lists_came_to_refuse_is_revoked_as_it_is_redeemed(
        node: Node, site: TestSite, site_events: list[SiteToolEvent]) -> None:
    execute = ("async (input, options) => { window.held = await options.invocation.requestToken(); "
               "return {step: 'hold'} }")
    tab = declared(node, site, "hold_here", execute)
    page = node.browser.page(tab)
    policy = node.policy
    with concurrent.futures.ThreadPoolExecutor(1) as apart:
        held = apart.submit(called, node, tab, "hold_here", timeout=20.0)
        until(lambda: node.io.run(page.evaluate("!!window.held"), timeout=30), 10, "the tool's token")
        node.policy = dataclasses.replace(policy, urls=UrlPolicy.from_config(deny=["127.0.0.1"]))
        try:
            redeemed = node.io.run(page.evaluate(
                "navigator.modelContext.resumeTool(window.held, async () => 'again').then(() => 'resumed', "
                "(e) => e.name)"), timeout=30)
            result = held.result(timeout=30)
        finally:
            node.policy = policy
    assert redeemed == "NotAllowedError"
    assert (result["status"], result["code"]) == ("unknown", "url_denied"), result
    assert [e.reason for e in site_events if isinstance(e, ContinuationRevoked)] == ["url_denied"]
