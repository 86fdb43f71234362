"""Site tools on a real node: the test site's shop declares WebMCP tools, and the agent calls them.

The must-shows of issue 16, counted at the site: the checkout crosses three documents with two tokens
and one POST each, in a batch and as a direct call; try_on finishes in the frame it creates; a popup's first
document (loaded before the node's channel reached its page) declares its tools; a
replayed, a cross-origin, another tab's and an expired token are refused; a tool that navigates
without a token is unknown and resumes only as observed; input that breaks the schema sends nothing;
no token or input reaches the audit file, the logs, the events or /metrics.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import secrets
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from bridge.node import Node
from bridge.wiring import run_node
from core.settings import SiteToolConfig
from driver import ChromiumBrowser
from kitsune.config import load_config
from messages.commands import parse_command
from messages.errors import KitsuneError
from messages.events import Event
from messages.results import Done
from tests.integration.calls import batch
from tests.integration.fleet_nodes import until
from tests.integration.serving import app_over, open_tab
from tests.nats_access import NatsAccess
from tests.nodes import open_user_tab, resume_call
from tests.site import TestSite
from tests.site.shop import REJECTED, TOKENS_KEY

TTL = 1.5
"""The continuation lifetime of the module's short-lived node, in seconds."""
TOKEN = "tools-alice-token-0123456789"
CHECKOUT = {"shipping_address": "1 Ship St", "billing_address": "2 Bill Rd"}
CHECKOUT_POSTS = {"POST /shop/billing": 1, "POST /shop/shipping": 1, "POST /shop/confirmation": 1}
REFUSED = REJECTED + "NotAllowedError"


@pytest.fixture
def other(other_site: TestSite) -> TestSite:
    """The session's second site (another origin) with its counters at zero."""
    other_site.reset()
    return other_site


@pytest.fixture(scope="module")
def short(nats_access: NatsAccess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """A node of its own fleet whose continuation tokens live TTL seconds, with an audit file."""
    config = nats_access.node_config(step_timeout=10.0, site_tools=SiteToolConfig(TTL),
                                     fleet=f"tools-{secrets.token_hex(4)}",
                                     audit_file=tmp_path_factory.mktemp("tools") / "audit.jsonl")
    started = run_node(ChromiumBrowser(), config)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def alice(node: Node) -> Iterator[httpx.Client]:
    """An agent of the session's node over HTTP (direct calls: POST /api/act)."""
    config = load_config(None, {"KITSUNE_AGENTS": f"alice={TOKEN}", "KITSUNE_CAPS": "core,automation"})
    with app_over(node, config) as base, httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as client:
        yield client


def tool(name: str, value: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    """A callSiteTool command."""
    return {"action": "callSiteTool", "name": name, **({} if value is None else {"input": value}), **fields}


def one(node: Node, tab: int, command: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The body of a batch of ``command`` alone on ``tab``, and its one result."""
    body = batch(node, [command], tabId=tab)
    return body, body["results"][0]


def direct(alice: httpx.Client, tab: int, command: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """The HTTP status and body of ``command`` sent as a direct call."""
    answer = alice.post("/api/act", json={"command": {**command, "tabId": tab}})
    body: dict[str, Any] = answer.json()
    return answer.status_code, body


def on_page(node: Node, tab: int, script: str) -> Any:
    """``script`` evaluated in the tab's page by the test itself (past the tab's actor, which may be busy)."""
    return node.io.run(node.browser.page(tab).evaluate(script), timeout=30)


def kept_tokens(node: Node, tab: int) -> list[str]:
    """The tokens the shop's pages of the tab's current origin were given (its sessionStorage)."""
    kept: list[str] = on_page(node, tab, f"JSON.parse(sessionStorage.getItem('{TOKENS_KEY}') || '[]')")
    return kept


def redeem_in(node: Node, tab: int, url: str) -> str:
    """Go to a redeeming shop page in ``tab`` (as the test, not the agent); how its redemption went: ``resumed``
    or the title ``rejected: <name>``."""
    page = node.browser.page(tab)
    node.io.run(page.goto(url), timeout=30)
    done = "document.title.startsWith('rejected: ') || document.body.dataset.resumed === 'yes'"
    node.io.run(page.wait_for_function(done, timeout=10_000), timeout=30)
    title: str = node.io.run(page.title(), timeout=30)
    return title if title.startswith(REJECTED) else "resumed"


def counted(node: Node, name: str, **labels: str) -> float:
    """The value of one sample of the node's metrics (0 when it has none yet)."""
    families = text_string_to_metric_families(node.metrics.exposition().decode())
    return sum(s.value for f in families for s in f.samples if s.name == name and s.labels == labels)


def audit_of(node: Node) -> list[dict[str, Any]]:
    """The entries of the node's audit file so far."""
    path = node.config.audit_file
    assert path is not None
    return [json.loads(line) for line in path.read_text().splitlines() if line] if path.exists() else []


def site_tool_entries(node: Node, *tabs: int) -> list[dict[str, Any]]:
    """The node's ``site_tool`` audit entries of ``tabs``."""
    return [e for e in audit_of(node) if e.get("kind") == "site_tool" and e.get("tabId") in tabs]


def documents(site: TestSite, *paths: str) -> list[dict[str, str]]:
    """The ``documents`` of a chain that crossed the top documents at ``paths``."""
    return [{"url": site.url(path), "frame": "main"} for path in paths]


# --- chains that complete ---------------------------------------------------------------------------------

@pytest.mark.parametrize("how", ["batch", "direct"])
def test_checkout_returns_the_confirmation_with_its_documents_and_one_post_per_page(
        how: str, node: Node, alice: httpx.Client, site: TestSite) -> None:
    if how == "batch":
        tab = open_user_tab(node, site.url("/shop/billing"))
        body, result = one(node, tab, tool("checkout", CHECKOUT))
        assert body["status"] == "ok", body
    else:
        tab = open_tab(alice, site.url("/shop/billing"))  # alice's tab: she may write to it
        status, result = direct(alice, tab, tool("checkout", CHECKOUT))
        assert (status, result["status"]) == (200, "ok"), result
    assert result["tool"] == "checkout"
    assert result["output"] == {"order": "SHOP-0001", **CHECKOUT}  # the last page's, not "step": ... of the others
    assert result["documents"] == documents(site, "/shop/billing", "/shop/shipping", "/shop/confirmation")
    assert len(set(kept_tokens(node, tab))) == 2
    time.sleep(0.3)  # not a wait for something to happen: a window in which nothing MORE may be sent
    assert site.counts() == CHECKOUT_POSTS


def test_try_on_completes_in_the_frame_it_creates_and_search_needs_no_continuation(
        node: Node, site: TestSite) -> None:
    item, shop = open_user_tab(node, site.url("/shop/item")), open_user_tab(node, site.url("/shop"))
    listed = one(node, item, {"action": "siteTools"})[1]
    assert [(t["name"], t["origin"], t["frame"]) for t in listed["tools"]] == [("try_on", site.base, "main")]
    assert listed["url"] == site.url("/shop/item")
    assert listed["tools"][0]["inputSchema"]["required"] == ["item_id"]
    body, result = one(node, item, tool("try_on", {"item_id": "dress-blue"}))
    assert body["status"] == "ok", body
    assert result["output"] == {"item_id": "dress-blue", "fit": "runs small"}
    assert result["documents"] == [{"url": site.url("/shop/item"), "frame": "main"},
                                   {"url": site.url("/shop/tryon-frame"), "frame": "iframe"}]
    assert site.counts() == {"POST /shop/tryon": 1}

    body, result = one(node, shop, tool("search", {"query": "coat"}))
    assert body["status"] == "ok", body
    assert result["output"] == {"query": "coat", "results": [{"id": "coat-wool", "name": "Wool coat",
                                                              "price": "129.00"}]}
    assert result["documents"] == documents(site, "/shop")
    assert site.counts() == {"POST /shop/tryon": 1}


def test_a_popup_s_first_document_declares_its_tools_and_runs_them(node: Node, site: TestSite) -> None:
    opener = open_user_tab(node, site.url("/text"))
    before = node.browser.tab_ids()
    on_page(node, opener, f"!!window.open({json.dumps(site.url('/shop'))})")  # the page's own popup, a tab too

    def driven(tab: int, command: dict[str, Any]) -> Mapping[str, Any]:  # the node's driver, no tab actor on the way
        outcome = node.io.run(node.browser.execute(parse_command(command), tab, 10), timeout=30)
        assert isinstance(outcome, Done), outcome
        return outcome.value
    [popup] = until(lambda: list(node.browser.tab_ids() - before), 10, "the popup's tab")
    listed = until(lambda: driven(popup, {"action": "siteTools"})["tools"], 10, "the popup's tools")
    assert [(t["name"], t["origin"], t["frame"]) for t in listed] == [("search", site.base, "main")]
    result = driven(popup, tool("search", {"query": "coat"}))
    assert result["output"]["results"][0]["id"] == "coat-wool" and result["documents"] == documents(site, "/shop")
    body, result = one(node, popup, tool("search", {"query": "coat"}))  # a batch: the popup's actor made as it comes
    assert body["status"] == "ok", body
    assert result["output"]["results"][0]["id"] == "coat-wool"


def test_a_callback_redeemed_while_its_tool_runs_runs_once_the_tool_settled(node: Node, site: TestSite) -> None:
    tab = open_user_tab(node, site.url("/shop/waits"))  # the tool settles only once the frame's resumeTool resolved
    body, result = one(node, tab, tool("wait_for_frame", {}))
    assert body["status"] == "ok", body
    assert result["output"] == {"redeemed": "/shop/redeem", "again": None}
    assert result["documents"] == [{"url": site.url("/shop/waits"), "frame": "main"},
                                   {"url": site.url("/shop/redeem"), "frame": "iframe"}]


# --- tokens that are refused --------------------------------------------------------------------------------

def test_a_replayed_token_is_refused(node: Node, site: TestSite) -> None:
    refused = counted(node, "kitsune_continuations_total", outcome="refused")
    tab = open_user_tab(node, site.url("/shop/handoff?" + urlencode({"to": "/shop/redeem?twice=1"})))
    body, result = one(node, tab, tool("hand_off", {}))
    assert body["status"] == "ok", body
    assert result["output"] == {"redeemed": "/shop/redeem", "again": "NotAllowedError"}
    assert result["documents"] == documents(site, "/shop/handoff", "/shop/redeem")
    assert counted(node, "kitsune_continuations_total", outcome="refused") == refused + 1


def test_a_cross_origin_redemption_is_refused_and_the_token_expires(
        short: Node, site: TestSite, other: TestSite) -> None:
    refused = counted(short, "kitsune_continuations_total", outcome="refused")
    expired = counted(short, "kitsune_continuations_total", outcome="expired")
    tab = open_user_tab(short, site.url("/shop/handoff?" + urlencode({"to": other.url("/shop/redeem")})))
    started = time.monotonic()
    body, result = one(short, tab, tool("hand_off", {}))
    assert (body["status"], result["code"], result["state"]["reason"]) == (
        "unknown", "continuation_expired", "continuation_expired"), body
    assert TTL <= time.monotonic() - started < TTL + 5
    assert one(short, tab, {"action": "url"})[1]["url"].startswith(other.url("/shop/redeem?token="))
    assert one(short, tab, {"action": "title"})[1]["title"] == REFUSED  # the other origin's page was refused
    assert counted(short, "kitsune_continuations_total", outcome="refused") == refused + 1
    assert counted(short, "kitsune_continuations_total", outcome="expired") == expired + 1


def test_a_token_redeemed_after_it_expired_is_refused(short: Node, site: TestSite) -> None:
    tab = open_user_tab(short, site.url("/shop/hold"))
    body, result = one(short, tab, tool("hold", {}))
    assert (body["status"], result["code"]) == ("unknown", "continuation_expired"), body
    assert body["progress"][0]["status"] == "unknown" and body["resume_token"]
    [token] = kept_tokens(short, tab)
    assert redeem_in(short, tab, site.url("/shop/redeem?" + urlencode({"token": token}))) == REFUSED


def test_a_tab_lists_only_its_tools_and_a_token_of_another_tab_is_refused(node: Node, site: TestSite) -> None:
    holding, other = open_user_tab(node, site.url("/shop/hold")), open_user_tab(node, site.url("/shop"))
    assert [t["name"] for t in one(node, holding, {"action": "siteTools"})[1]["tools"]] == ["hold"]
    assert [t["name"] for t in one(node, other, {"action": "siteTools"})[1]["tools"]] == ["search"]
    with concurrent.futures.ThreadPoolExecutor(1) as apart:
        held = apart.submit(one, node, holding, tool("hold", {}))
        [token] = until(lambda: kept_tokens(node, holding), 10, "the hold page's token")
        redeem = site.url("/shop/redeem?" + urlencode({"token": token}))
        assert redeem_in(node, other, redeem) == REFUSED  # same origin, another tab
        assert not held.done()
        assert redeem_in(node, holding, redeem) == "resumed"  # its own tab may: the call ends there
        body, result = held.result(timeout=30)
    assert body["status"] == "ok", body
    assert result["output"] == {"redeemed": "/shop/redeem", "again": None}
    assert result["documents"] == documents(site, "/shop/hold", "/shop/redeem")


# --- the unknown write and resume ---------------------------------------------------------------------------

def test_a_tool_that_navigates_without_a_token_is_unknown_and_resumes_only_as_observed(
        node: Node, site: TestSite) -> None:
    tab = open_user_tab(node, site.url("/shop/leave"))
    body, result = one(node, tab, tool("leave", {"note": "first"}))
    assert (body["status"], result["code"], result["state"]["reason"]) == (
        "unknown", "navigated", "navigated_mid_execution"), body
    assert site.count("POST /shop/leave") == 1
    with pytest.raises(KitsuneError) as caught:
        resume_call(node, body["call"], body["resume_token"])
    assert (caught.value.code, caught.value.state) == ("observed_required", {
        "steps": [{"step": "0", "action": "callSiteTool", "tabId": tab, "status": "unknown",
                   "accepts": ["applied", "not_applied"]}]})
    assert site.count("POST /shop/leave") == 1
    resumed = resume_call(node, body["call"], body["resume_token"], {"0": "not_applied"}).body
    assert resumed["status"] == "ok", resumed  # called again on the page it left for, which answers there
    assert resumed["results"][0]["output"] == {"left": True, "count": 2}
    assert site.count("POST /shop/leave") == 2

    again = open_user_tab(node, site.url("/shop/leave"))
    body, result = one(node, again, tool("leave", {"note": "second"}))
    assert (body["status"], result["code"]) == ("unknown", "navigated"), body
    resumed = resume_call(node, body["call"], body["resume_token"], {"0": "applied"}).body
    assert resumed["status"] == "ok" and resumed["progress"][0]["observed"] == "applied", resumed
    time.sleep(0.3)  # not a wait for something to happen: a window in which nothing MORE may be sent
    assert site.count("POST /shop/leave") == 3


# --- what is refused before anything runs ---------------------------------------------------------------------

def test_input_that_breaks_the_schema_is_refused_with_its_path_and_nothing_is_sent(
        node: Node, alice: httpx.Client, site: TestSite) -> None:
    tab = open_tab(alice, site.url("/shop/billing"))
    body, result = one(node, tab, tool("checkout", {"shipping_address": "canary-path-3d9f", "billing_address": 5}))
    assert (body["status"], result["code"], result["state"]["path"]) == ("failed", "invalid_input",
                                                                          "/billing_address"), body
    assert "/billing_address" in result["error"] and "canary-path-3d9f" not in str(body)
    status, answer = direct(alice, tab, tool("checkout", {"shipping_address": "1 Ship St"}))
    missing = (status, answer["code"], answer["state"]["path"])
    status, answer = direct(alice, tab, tool("nothing", {}, timeout=1))
    absent = (status, answer["code"])
    time.sleep(0.3)  # not a wait for something to happen: a window in which nothing may be sent
    assert site.counts() == {}
    assert (missing, absent) == ((400, "invalid_input", "/billing_address"), (404, "site_tool_not_found"))


# --- the canary ------------------------------------------------------------------------------------------------

def test_no_token_or_input_reaches_the_audit_file_the_logs_the_events_or_metrics(
        short: Node, site: TestSite, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    canaries = {"shipping_address": "canary-ship-5b1d", "billing_address": "canary-bill-8e2c"}
    seen: list[Event] = []
    short.event_listeners.append(seen.append)
    try:
        tab, left = open_user_tab(short, site.url("/shop/billing")), open_user_tab(short, site.url("/shop/leave"))
        body, result = one(short, tab, tool("checkout", canaries))
        unknown, _ = one(short, left, tool("leave", {"note": "canary-note-71aa"}))
    finally:
        short.event_listeners.remove(seen.append)
    assert body["status"] == "ok" and result["output"]["shipping_address"] == canaries["shipping_address"], body
    assert unknown["status"] == "unknown", unknown
    tokens = kept_tokens(short, tab)
    assert len(tokens) == 2 and all(len(token) >= 43 for token in tokens)  # 32 random bytes
    stored = [e for call in sorted({e.call for e in seen}) for e in short.io.run(short.events.read(call), timeout=30)]
    kinds = [type(event).__name__ for event in stored]
    assert kinds.count("ContinuationRedeemed") == 2 and "SiteToolChainCompleted" in kinds, kinds

    entries = until(lambda: len(found := site_tool_entries(short, tab, left)) == 2 and found, 10, "audit entries")
    step = next(e for e in audit_of(short) if e.get("kind") == "step" and e["params"].get("name") == "checkout")
    assert step["params"]["input"] == dict.fromkeys(canaries, "[redacted]")
    assert [{key: e.get(key) for key in ("op", "tool", "origin", "tabId", "parent")} for e in entries] == [
        {"op": "called", "tool": name, "origin": site.base, "tabId": on, "parent": {"call": call, "path": "0"}}
        for name, on, call in (("checkout", tab, step["parent"]["call"]), ("leave", left, unknown["call"]))]
    audit = Path(str(short.config.audit_file)).read_text()
    for where, text in {"audit file": audit, "log": caplog.text, "events": repr(seen) + repr(stored),
                        "/metrics": short.metrics.exposition().decode()}.items():
        for canary in (*tokens, *canaries.values(), "canary-note-71aa"):
            assert canary not in text, f"a token or an input value in the {where}"
