"""The CDP table and actions without a browser: classes, parse-time refusals, writes, the audit, the policy's
JavaScript and URL checks, the events' bounds, the protocol's normal form and the metric's bounded label."""

from __future__ import annotations

import re
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from bridge.cdp_metrics import CdpMethods
from core.policy import Policy, _cdp_refusal, _url_of
from driver.cdp_protocol import normalized
from driver.cdp_tabs import MAX_EVENT_BYTES, MAX_EVENTS, _Events
from messages.audit import redacted_params
from messages.cdp_methods import devtools_refusal, domain_label, method_class, refused_pattern
from messages.commands import Cdp, is_write, parse_command, secret_values
from messages.errors import ERROR_CODES, KitsuneError


@pytest.mark.parametrize(("method", "kind"), [
    ("DOM.getOuterHTML", "read"), ("DOM.querySelectorAll", "read"), ("DOM.describeNode", "read"),
    ("Page.captureScreenshot", "read"), ("Network.getResponseBody", "read"), ("Runtime.getProperties", "read"),
    ("Accessibility.getFullAXTree", "read"), ("CSS.getComputedStyleForNode", "read"), ("Network.enable", "read"),
    ("Performance.getMetrics", "read"), ("Emulation.setDeviceMetricsOverride", "write"), ("Page.navigate", "write"),
    ("Network.getCookies", "write"), ("Input.dispatchKeyEvent", "write"), ("Runtime.evaluate", "javascript"),
    ("Runtime.callFunctionOn", "javascript"), ("Debugger.enable", "javascript"), ("Target.createTarget", "refused"),
    ("Browser.close", "refused"), ("SystemInfo.getInfo", "refused"), ("Storage.clearDataForOrigin", "refused"),
    ("Fetch.enable", "refused"), ("Network.setRequestInterception", "refused"),
    ("Network.setExtraHTTPHeaders", "refused"), ("Page.setDownloadBehavior", "refused"), ("IO.read", "refused"),
    ("Tethering.bind", "refused"), ("Security.setIgnoreCertificateErrors", "refused"),
])
def test_each_method_has_its_class_from_the_one_table(method: str, kind: str) -> None:
    assert method_class(method) == kind
    assert (re.fullmatch(refused_pattern(), method) is not None) == (kind == "refused")


def test_a_refused_method_is_refused_at_parse_time_with_its_own_code_and_a_malformed_one_names_method() -> None:
    with pytest.raises(KitsuneError) as refused:
        parse_command({"action": "cdp", "method": "Target.createTarget", "params": {"url": "about:blank"}})
    assert refused.value.code == "cdp_method_refused" and refused.value.http_status == 403
    assert refused.value.state == {"path": "0", "param": "method", "method": "Target.createTarget"}
    for malformed in ("getDocument", "DOM.", "dom.getDocument", "DOM.get-Document", "A.b.c"):
        with pytest.raises(KitsuneError) as bad:
            parse_command({"action": "cdp", "method": malformed})
        assert bad.value.code == "invalid_parameter" and bad.value.state == {"path": "0", "param": "method"}
    assert ERROR_CODES["cdp_error"].http_status == 400


def test_a_cdp_step_writes_by_its_method_and_its_audit_entry_names_the_method_only() -> None:
    read = Cdp(method="DOM.getOuterHTML", params={"nodeId": 4})
    write = Cdp(method="Input.insertText", params={"text": "hunter2-canary"})
    assert (is_write(read), is_write(write)) == (False, True)
    assert redacted_params(write) == {"method": "Input.insertText"}
    assert "hunter2-canary" in secret_values(write)  # cut from its failures' messages


def test_javascript_needs_the_automation_group_and_a_cdp_navigation_passes_the_url_lists() -> None:
    evaluate = Cdp(method="Runtime.evaluate", params={"expression": "1"})
    refused = _cdp_refusal(evaluate, Policy(caps=frozenset({"core"})))
    assert refused is not None and refused.code == "cdp_method_refused" and "automation" in refused.error
    assert _cdp_refusal(evaluate, Policy(caps=frozenset({"core", "automation"}))) is None
    assert _cdp_refusal(Cdp(method="Emulation.setTouchEmulationEnabled"), Policy(caps=frozenset({"core"}))) is None
    assert _url_of(Cdp(method="Page.navigate", params={"url": "http://a.test/"})) == "http://a.test/"
    assert _url_of(Cdp(method="Page.navigate", params={"url": 7})) == ""  # denied as unparseable
    assert _url_of(Cdp(method="Page.reload")) is None


def test_a_tab_s_events_are_bounded_in_count_and_bytes_the_oldest_dropped_and_counted() -> None:
    events = _Events()
    for i in range(MAX_EVENTS + 10):
        events.add("Log.entryAdded", {"n": i})
    kept, dropped = events.take()
    assert len(kept) == MAX_EVENTS and dropped == 10 and kept[0]["params"] == {"n": 10}
    assert events.take() == ([], 0)
    events.add("Network.requestWillBeSent", {"big": "x" * MAX_EVENT_BYTES})
    big = "y" * (MAX_EVENT_BYTES // 3)
    for _ in range(4):
        events.add("Log.entryAdded", {"text": big})
    kept, dropped = events.take()
    assert len(kept) == 2 and dropped == 3


def test_the_protocol_is_normalized_every_item_named_and_every_list_there() -> None:
    raw: dict[str, Any] = {"version": {"major": "1", "minor": "3"}, "domains": [
        {"domain": "Log", "types": [{"id": "LogEntry", "type": "object"}],
         "commands": [{"name": "enable"}, {"name": "clear"}]},
        {"domain": "Target", "commands": [{"name": "createTarget"}], "events": [{"name": "targetCreated"}]}]}
    log, target = normalized(raw)
    assert log == {"name": "Log", "types": [{"name": "LogEntry", "type": "object"}],
                   "commands": [{"name": "enable", "class": "read"}, {"name": "clear", "class": "write"}], "events": []}
    assert target["commands"] == [{"name": "createTarget", "class": "refused"}] and target["types"] == []


def test_cdp_methods_are_counted_by_a_bounded_domain_label() -> None:
    class Browser:
        cdp = type("Tabs", (), {"sent": {"DOM": 3, "other": 1}})()

    class NodeWithBrowser:
        browser = Browser()

    assert (domain_label("DOM.getDocument"), domain_label("Secret12345.method")) == ("DOM", "other")
    registry = CollectorRegistry()
    registry.register(CdpMethods(NodeWithBrowser()))
    text = generate_latest(registry).decode()
    assert 'kitsune_cdp_methods_total{domain="DOM"} 3.0' in text
    assert 'kitsune_cdp_methods_total{domain="other"} 1.0' in text


@pytest.mark.parametrize(("method", "refused"), [
    ("DOM.getDocument", False), ("Runtime.evaluate", False), ("Debugger.enable", False), ("Page.navigate", False),
    ("Input.dispatchMouseEvent", False), ("Network.getCookies", False), ("Overlay.highlightNode", False),
    ("Inspector.enable", False), ("Page.startScreencast", False), ("Target.setAutoAttach", True),
    ("Target.getTargets", True), ("Browser.getVersion", True), ("Storage.getStorageKey", True),
    ("Fetch.enable", True), ("IO.read", True), ("Tracing.start", True), ("Network.clearBrowserCache", True),
    ("Network.clearBrowserCookies", True), ("Page.close", True), ("Page.crash", True), ("ServiceWorker.enable", True),
    ("nonsense", True), ("DOM.", True), (None, True), (7, True),
])
def test_a_persons_devtools_sends_what_stays_in_the_tab_a_person_holds_and_nothing_that_leaves_it(
        method: object, refused: bool) -> None:
    assert (devtools_refusal(method) is not None) == refused
