"""``browser_cdp`` with the SDK's own client against live nodes: a method read, the events a page sent and one
domain of the protocol (``read``), a write held for approval as any direct write (its params never in the prompt),
a refused method with nothing sent, and the audit naming the method only; a tab's stable handle ``target:<id>``
across the gateway's reconnects, then ``tab_closed`` once its tab closed, never a newer tab."""

from __future__ import annotations

import pytest

from tests.e2e.clients import Asker, act, api, audit_of, call, open_tab, over_http
from tests.integration.serving import Served
from tests.site import TestSite
from tests.site.pages import TEXT_HEADING

pytestmark = pytest.mark.anyio

WIDE = {"width": 517, "height": 400, "deviceScaleFactor": 1, "mobile": False}


async def test_browser_cdp_reads_a_method_the_events_and_the_protocol(plain: Served, site: TestSite) -> None:
    tab = open_tab(plain, site.url("/clicks"))
    async with over_http(plain) as session:
        enabled = await call(session, "browser_cdp", {"tabId": tab, "read": "events", "enable": ["Network"]})
        assert enabled["enabled"] == ["Network"], enabled
        await call(session, "browser_navigate", {"tabId": tab, "url": site.url("/text"), "snapshot": "none"})
        root = (await call(session, "browser_cdp", {"tabId": tab, "method": "DOM.getDocument"}))["result"]["root"]
        html = await call(session, "browser_cdp", {"tabId": tab, "method": "DOM.getOuterHTML",
                                                   "params": {"nodeId": root["nodeId"]}})
        assert TEXT_HEADING in html["result"]["outerHTML"], html
        events = await call(session, "browser_cdp", {"tabId": tab, "read": "events"})
        assert site.url("/text") in [e["params"]["request"]["url"] for e in events["events"]
                                     if e["method"] == "Network.requestWillBeSent"], events
        log = await call(session, "browser_cdp", {"tabId": tab, "read": "spec", "domain": "Log"})
        assert log["domain"]["name"] == "Log" and log["browser"], log
        neither = await call(session, "browser_cdp", {"tabId": tab})
        assert neither["code"] == "invalid_parameter" and "method, or read" in neither["error"], neither
        refused = await call(session, "browser_cdp", {"tabId": tab, "method": "Browser.close"})
        assert refused["code"] == "cdp_method_refused", refused
    assert audit_of(plain, "cdp", method="DOM.getOuterHTML")  # the method, never its params
    assert all("params" not in e["params"] for e in audit_of(plain, "cdp"))


async def test_a_cdp_write_is_held_for_approval_as_any_direct_write(asking: Served, site: TestSite) -> None:
    tab = open_tab(asking, site.url("/clicks"))
    write = {"tabId": tab, "method": "Emulation.setDeviceMetricsOverride", "params": WIDE}
    width = {"tabId": tab, "method": "Runtime.evaluate", "params": {"expression": "innerWidth"}}
    async with over_http(asking) as session:  # no prompt: the hold's confirm token
        held = await call(session, "browser_cdp", write)
        assert (held["code"], held["status"]) == ("needs_user", "held") and held["resume_token"], held
        done = await call(session, "browser_cdp", {**write, "confirm_token": held["state"]["confirm_token"]})
        assert done["status"] == "ok", done
    asker = Asker("accept")
    async with over_http(asking, asker=asker) as session:  # script runs as a write: held, approved in the prompt
        read = await call(session, "browser_cdp", width)
    assert read["result"]["result"]["value"] == WIDE["width"], read
    (message,) = asker.messages
    assert "cdp (method 'Runtime.evaluate')" in message and "innerWidth" not in message


async def test_a_target_handle_names_its_tab_across_reconnects_then_tab_closed_never_a_newer_tab(
        plain: Served, site: TestSite) -> None:
    tab = open_tab(plain, site.url("/clicks"))
    with api(plain) as client:
        listed = {t["tabId"]: t for t in client.get("/api/tabs").json()["tabs"]}
        handle = listed[tab]["target"]
        assert handle.startswith("target:") and len(handle) > len("target:"), listed[tab]
    for _ in range(2):  # each a new connection of the gateway: the handle still names the tab
        async with over_http(plain) as session:
            batch = await call(session, "browser_batch", {"tabId": handle, "commands": [
                {"action": "title"}, {"action": "url", "tabId": handle}]})
            assert batch["status"] == "ok" and batch["results"][1]["url"] == site.url("/clicks"), batch
            assert [p["tabId"] for p in batch["progress"]] == [tab, tab], batch
    with api(plain) as client:
        assert act(plain, {"action": "title", "tabId": handle})["title"] == "Clicks"
        assert client.post("/api/tabs", json={"op": "close", "tabId": handle}).json()["ok"]
        newer = open_tab(plain, site.url("/clicks"))
        for body in ({"command": {"action": "title", "tabId": handle}},
                     {"command": {"action": "title", "tabId": "target:0123456789ABCDEF"}}):
            closed = client.post("/api/act", json=body)
            assert (closed.status_code, closed.json()["code"]) == (400, "tab_closed"), closed.text
        both = client.post("/api/batch", json={"commands": [{"action": "broadcast", "tabIds": [newer, handle],
                                                              "command": {"action": "title"}}]})
        assert (both.status_code, both.json()["code"]) == (400, "tab_closed")  # refused whole, nothing ran
        fresh = {t["tabId"]: t["target"] for t in client.get("/api/tabs").json()["tabs"]}
        assert fresh[newer] != handle and handle not in fresh.values()
