"""CDP behind the policy, on the session's node with a real Chromium: ``cdp`` reads and writes under each policy,
a resume that never sends an ``ok`` write again (counted at the test site), JavaScript refused without its group,
a CDP navigation to a denied host that reaches nothing, ``cdpEvents`` in order and bounded, ``cdpSpec``."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest

from bridge.node import Node
from core.policy import Policy
from core.url_policy import UrlPolicy
from driver import ChromiumBrowser
from driver.cdp_tabs import MAX_EVENTS
from messages.commands import Command, parse_body, parse_command
from messages.results import Done, Failed, HeldForApproval, Outcome
from tests.nodes import open_user_tab, resume_call, run_call
from tests.site import TestSite
from tests.site.forbidden import Forbidden
from tests.site.pages import TEXT_HEADING

AGENT = "cdp-agent"
HIT = "POST /clicks/hit"
POST_HIT = "fetch('/clicks/hit', {method: 'POST'}).then(r => r.status)"
WIDE = {"width": 500, "height": 400, "deviceScaleFactor": 1, "mobile": False}


def _sent(node: Node) -> int:
    """The CDP methods the node's Chromium has sent so far."""
    assert isinstance(node.browser, ChromiumBrowser)
    return sum(node.browser.cdp.sent.values())


@pytest.fixture
def tab(node: Node, site: TestSite) -> Iterator[int]:
    """A tab of :data:`AGENT` at the site's /clicks, under the node's default policy again afterwards."""
    opened = open_user_tab(node, site.url("/clicks"))
    node.owners.give(opened, AGENT)
    yield opened
    node.policy = Policy()
    assert isinstance(node.browser, ChromiumBrowser)
    node.io.run(node.browser.close_tab(opened))


def _act(node: Node, command: dict[str, Any], tab: int, confirm_token: str | None = None, *,
         agent: str = AGENT) -> Outcome:
    parsed: Command = parse_command({**command, "tabId": tab})
    outcome, _ = node.io.run(node.act(agent, parsed, tab, confirm_token))
    return outcome


def _cdp(node: Node, tab: int, method: str, **params: Any) -> Outcome:
    return _act(node, {"action": "cdp", "method": method, "params": params}, tab)


def _value(outcome: Outcome) -> Any:
    assert isinstance(outcome, Done), outcome
    return outcome.value


def _width(node: Node, tab: int) -> int:
    return int(_value(_cdp(node, tab, "Page.getLayoutMetrics"))["result"]["cssLayoutViewport"]["clientWidth"])


def test_cdp_reads_the_dom_a_screenshot_and_a_response_body_even_in_read_only_mode(
        node: Node, site: TestSite, tab: int) -> None:
    assert _value(_act(node, {"action": "cdpEvents", "enable": ["Network"]}, tab)) == {"enabled": ["Network"]}
    assert _value(_act(node, {"action": "navigate", "url": site.url("/text")}, tab))["url"] == site.url("/text")
    node.policy = Policy(read_only=True)
    root = _value(_cdp(node, tab, "DOM.getDocument"))["result"]["root"]["nodeId"]
    html = _value(_cdp(node, tab, "DOM.getOuterHTML", nodeId=root))["result"]["outerHTML"]
    assert TEXT_HEADING in html
    image = base64.b64decode(_value(_cdp(node, tab, "Page.captureScreenshot", format="png"))["result"]["data"])
    assert image.startswith(b"\x89PNG")
    events = _value(_act(node, {"action": "cdpEvents"}, tab))["events"]
    document = next(e["params"]["requestId"] for e in events if e["method"] == "Network.responseReceived"
                    and e["params"]["response"]["url"] == site.url("/text"))
    body = _value(_cdp(node, tab, "Network.getResponseBody", requestId=document))["result"]["body"]
    assert TEXT_HEADING in body


def test_a_cdp_write_is_refused_in_read_only_mode_held_by_ask_before_act_and_sent_once_approved(
        node: Node, tab: int) -> None:
    before = _width(node, tab)
    assert before != WIDE["width"]
    node.policy = Policy(read_only=True)
    refused = _cdp(node, tab, "Emulation.setDeviceMetricsOverride", **WIDE)
    assert isinstance(refused, Failed) and refused.failure.code == "read_only", refused
    node.policy = Policy(ask_before_act=True)
    held = _cdp(node, tab, "Emulation.setDeviceMetricsOverride", **WIDE)
    assert isinstance(held, HeldForApproval) and held.failure.code == "needs_user", held
    assert _width(node, tab) == before  # a read passes ask-before-act; the held write was not sent
    token = held.failure.state["confirm_token"] if held.failure.state else None
    other = _act(node, {"action": "cdp", "method": "Emulation.setDeviceMetricsOverride",
                        "params": {**WIDE, "width": 600}}, tab, token)
    assert isinstance(other, HeldForApproval) and other.failure.code == "confirm_token_invalid"  # bound to params
    token = other.failure.state["confirm_token"] if other.failure.state else None
    approved = _act(node, {"action": "cdp", "method": "Emulation.setDeviceMetricsOverride",
                           "params": {**WIDE, "width": 600}}, tab, token)
    assert isinstance(approved, Done), approved
    assert _width(node, tab) == 600
    node.policy = Policy()
    assert isinstance(_cdp(node, tab, "Emulation.clearDeviceMetricsOverride"), Done)


def test_a_resume_never_sends_an_ok_cdp_write_again(node: Node, site: TestSite, tab: int) -> None:
    batch = parse_body("batch", {"tabId": tab, "commands": [
        {"action": "cdp", "method": "Runtime.evaluate", "params": {"expression": POST_HIT, "awaitPromise": True}},
        {"action": "waitFor", "selector": "#never", "timeout": 0.3}]})
    stopped = run_call(node, batch, agent=AGENT).body
    assert [p["status"] for p in stopped["progress"]] == ["ok", "failed"], stopped
    assert stopped["results"][0]["result"]["result"]["value"] == 200
    assert site.wait_for_count(HIT) == 1
    resumed = resume_call(node, stopped["call"], stopped["resume_token"], agent=AGENT).body
    assert resumed["progress"][0]["resumed"] == "kept" and resumed["progress"][1]["status"] == "failed"
    time.sleep(0.3)
    assert site.count(HIT) == 1


def test_javascript_through_cdp_is_refused_without_the_automation_group(
        node: Node, site: TestSite, tab: int) -> None:
    node.policy = Policy(caps=frozenset({"core"}))
    sent = _sent(node)
    for method, params in (("Runtime.evaluate", {"expression": POST_HIT}),
                           ("Page.addScriptToEvaluateOnNewDocument", {"source": POST_HIT})):
        refused = _cdp(node, tab, method, **params)
        assert isinstance(refused, Failed) and refused.failure.code == "cdp_method_refused", refused
        assert POST_HIT not in refused.failure.error
    assert _sent(node) == sent
    time.sleep(0.3)
    assert site.count(HIT) == 0
    assert isinstance(_cdp(node, tab, "DOM.getDocument"), Done)  # the group gates script, not CDP


def test_a_cdp_navigation_to_a_denied_host_reaches_nothing(node: Node, site: TestSite, tab: int) -> None:
    with Forbidden("127.0.0.4") as forbidden:
        node.policy = Policy(urls=UrlPolicy.from_config(deny=["127.0.0.4"]))
        sent = _sent(node)
        refused = _cdp(node, tab, "Page.navigate", url=forbidden.url("/x"))
        assert isinstance(refused, Failed) and refused.failure.code == "url_denied", refused
        assert _sent(node) == sent  # refused before it was sent
        redirected = _cdp(node, tab, "Page.navigate", url=site.url(f"/redirect?to={quote(forbidden.url('/x'))}"))
        assert isinstance(redirected, Done), redirected  # allowed: the proxy stops its redirect's hop
        time.sleep(1.0)
        assert forbidden.contacts == (0, 0)
        assert _value(_act(node, {"action": "title"}, tab))["title"] != "Forbidden"


def test_cdp_events_answer_a_page_s_requests_and_console_lines_in_order_bounded_with_drops_counted(
        node: Node, site: TestSite, tab: int) -> None:
    enabled = _value(_act(node, {"action": "cdpEvents", "enable": ["Network", "Runtime", "Log"]}, tab))
    assert enabled == {"enabled": ["Network", "Runtime", "Log"]}
    _value(_act(node, {"action": "cdpEvents"}, tab))  # what came before
    _value(_act(node, {"action": "navigate", "url": site.url("/text")}, tab))
    _value(_cdp(node, tab, "Runtime.evaluate", expression="console.log('one'); console.log('two')"))
    read = _value(_act(node, {"action": "cdpEvents"}, tab))
    methods = [e["method"] for e in read["events"]]
    sent = methods.index("Network.requestWillBeSent")
    assert read["events"][sent]["params"]["request"]["url"] == site.url("/text")
    assert methods.index("Network.responseReceived") > sent
    lines = [e["params"]["args"][0]["value"] for e in read["events"] if e["method"] == "Runtime.consoleAPICalled"]
    assert lines == ["one", "two"] and read["dropped"] == 0
    assert _value(_act(node, {"action": "cdpEvents"}, tab))["events"] == []  # since the last read

    _value(_cdp(node, tab, "Runtime.evaluate", expression=f"for (let i = 0; i < {MAX_EVENTS + 50}; i++) "
                                                          "console.log('line ' + i)"))
    time.sleep(0.5)
    flood = _value(_act(node, {"action": "cdpEvents"}, tab))
    console = [e["params"]["args"][0]["value"] for e in flood["events"] if e["method"] == "Runtime.consoleAPICalled"]
    assert len(flood["events"]) <= MAX_EVENTS and flood["dropped"] >= 50
    assert console[-1] == f"line {MAX_EVENTS + 49}" and console == sorted(console, key=lambda s: int(s.split()[1]))


def test_cdp_events_belong_to_the_tab_s_owner_another_agent_reads_none_and_drains_none(
        node: Node, site: TestSite, tab: int) -> None:
    _value(_act(node, {"action": "cdpEvents", "enable": ["Network"]}, tab))
    _value(_act(node, {"action": "navigate", "url": site.url("/text")}, tab))
    for command in ({"action": "cdpEvents"}, {"action": "cdpEvents", "enable": ["Log"]}):
        refused = _act(node, command, tab, agent="cdp-other")
        assert isinstance(refused, Failed) and refused.failure.code == "tab_owned", refused
    read = _value(_act(node, {"action": "cdpEvents"}, tab))
    assert site.url("/text") in [e["params"]["request"]["url"] for e in read["events"]
                                 if e["method"] == "Network.requestWillBeSent"]  # nothing drained
    assert read["enabled"] == ["Network"]

    _value(_act(node, {"action": "navigate", "url": site.url("/clicks")}, tab))  # collected for the owner
    node.io.run(node.member.take_over(tab, "cdp-other"))
    after = _value(_act(node, {"action": "cdpEvents"}, tab, agent="cdp-other"))
    assert after["events"] == [] and after["dropped"] == 0  # the previous owner's events went, unread
    refused = _act(node, {"action": "cdpEvents"}, tab)
    assert isinstance(refused, Failed) and refused.failure.code == "tab_owned"


def test_cdp_spec_lists_the_domains_then_describes_one(node: Node, tab: int) -> None:
    listed = _value(_act(node, {"action": "cdpSpec"}, tab))
    assert {"DOM", "Network", "Page", "Runtime"} <= set(listed["domains"]) and listed["browser"]
    log = _value(_act(node, {"action": "cdpSpec", "domain": "Log"}, tab))["domain"]
    assert log["name"] == "Log" and all("name" in item for key in ("types", "commands", "events")
                                        for item in log[key])
    classes = {command["name"]: command["class"] for command in log["commands"]}
    assert classes["enable"] == "read" and classes["clear"] == "write"
    assert "entryAdded" in [event["name"] for event in log["events"]]
    unknown = _act(node, {"action": "cdpSpec", "domain": "Nope"}, tab)
    assert isinstance(unknown, Failed) and unknown.failure.code == "invalid_parameter"
