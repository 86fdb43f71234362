"""Per-agent policy on a live ``kitsune serve``: agents of one node, each with its own policy (the session's
``tenants`` node).

alice is read-only (with both capability groups), bob writes (``core`` only), carol asks before
acting and dave may go to 127.0.0.3 alone; the node's own values are both groups and no lists.
The test site counts every write it receives: none of alice's, none of carol's until confirmed.
"""

from __future__ import annotations

from typing import Any

import httpx

from tests.integration.serving import Served, open_tab
from tests.site import ANY, TestSite

HIT = "POST /clicks/hit"


def _post(client: httpx.Client, path: str, body: dict[str, Any], status: int = 200) -> dict[str, Any]:
    """The JSON answer of a POST, whose HTTP status must be ``status``: a direct route answers an error
    outcome with its code's status (``read_only``, ``url_denied`` and a hold's ``needs_user`` are 403)."""
    answer = client.post(path, json=body)
    assert answer.status_code == status, answer.text
    result: dict[str, Any] = answer.json()
    return result


def _hit(client: httpx.Client, tab: int, status: int = 200) -> dict[str, Any]:
    return _post(client, "/api/act", {"command": {"action": "click", "tabId": tab, "selector": "#hit"}}, status)


def test_a_read_only_agent_sends_no_write_direct_in_a_batch_or_in_a_resume_while_a_writer_beside_it_does(
        tenants: Served, site: TestSite) -> None:
    with tenants.client("alice") as alice, tenants.client("bob") as bob:
        tab = open_tab(bob, site.url("/clicks"))
        assert _hit(bob, tab)["status"] == "ok"
        assert site.wait_for_count(HIT) == 1

        opened = _post(alice, "/api/tabs", {"op": "open", "url": site.url("/clicks")}, 403)
        assert (opened["status"], opened["code"]) == ("failed", "read_only")
        refused = _hit(alice, tab, 403)
        assert (refused["status"], refused["code"]) == ("failed", "read_only")
        fresh = _post(alice, "/api/batch", {"commands": [{"action": "title"},
                                                         {"action": "click", "selector": "#hit"}], "tabId": tab})
        assert [p["status"] for p in fresh["progress"]] == ["ok", "failed"]
        assert fresh["results"][1]["code"] == "read_only"
        stopped = _post(alice, "/api/batch", {"commands": [{"action": "waitFor", "selector": "#never", "timeout": 0.3},
                                                           {"action": "click", "selector": "#hit"}], "tabId": tab})
        assert [p["status"] for p in stopped["progress"]] == ["failed", "skipped"]
        resumed = _post(alice, "/api/resume", {"call": stopped["call"], "resume_token": stopped["resume_token"],
                                               "observed": {"0": "applied"}})
        assert resumed["results"][1]["code"] == "read_only"

        assert _hit(bob, tab)["status"] == "ok"  # the writer's second click: the site has seen all before it
        assert site.wait_for_count(HIT, 2) == 2
    assert site.count(HIT) == 2 and site.counts() == {HIT: 2}


def test_a_read_only_agent_s_batch_calls_a_tool_its_page_declares_read_only_and_no_other(
        tenants: Served, site: TestSite) -> None:
    """A ``callSiteTool`` the policy refuses as a write is tried as a read: the page's declaration decides."""
    with tenants.client("alice") as alice, tenants.client("bob") as bob:
        tab = open_tab(bob, site.url("/shop"))
        found = _post(alice, "/api/batch", {"commands": [{"action": "callSiteTool", "name": "search",
                                                          "input": {"query": "coat"}}], "tabId": tab})
        assert found["status"] == "ok", found
        assert [item["id"] for item in found["results"][0]["output"]["results"]] == ["coat-wool"]
        assert _post(bob, "/api/act", {"command": {"action": "navigate", "tabId": tab,
                                                   "url": site.url("/shop/billing")}})["status"] == "ok"
        site.reset()
        bought = _post(alice, "/api/batch", {"commands": [{"action": "callSiteTool", "name": "checkout", "input": {
            "shipping_address": "1 Ship St", "billing_address": "2 Bill Rd"}}], "tabId": tab})
        assert [p["status"] for p in bought["progress"]] == ["failed"]
        assert bought["results"][0]["code"] == "read_only"
    assert site.counts() == {}


def test_an_agent_that_asks_before_acting_is_held_while_the_one_beside_it_is_not(
        tenants: Served, site: TestSite) -> None:
    with tenants.client("carol") as carol, tenants.client("bob") as bob:
        opened = _post(carol, "/api/tabs", {"op": "open", "url": site.url("/clicks")}, 403)
        assert (opened["status"], opened["code"]) == ("held", "needs_user")
        new_tab = {"action": "newTab", "url": site.url("/clicks")}
        tab = _post(carol, "/api/act", {"command": new_tab, "confirm_token": opened["state"]["confirm_token"]})["tabId"]
        held = _hit(carol, tab, 403)
        assert (held["status"], held["code"]) == ("held", "needs_user")
        batch = _post(carol, "/api/batch", {"commands": [{"action": "click", "selector": "#hit"}], "tabId": tab})
        assert [p["status"] for p in batch["progress"]] == ["held"]

        bobs = open_tab(bob, site.url("/clicks"))
        assert _hit(bob, bobs)["status"] == "ok"  # not held: bob's policy is the node's
        assert site.wait_for_count(HIT) == 1
        assert site.count(HIT) == 1  # carol's clicks were sent nowhere
        confirmed = _post(carol, "/api/act", {"command": {"action": "click", "tabId": tab, "selector": "#hit"},
                                              "confirm_token": held["state"]["confirm_token"]})
        assert confirmed["status"] == "ok"
        assert site.wait_for_count(HIT, 2) == 2


def test_caps_answer_for_the_calling_agent_and_a_route_of_a_group_it_lacks_is_disabled_for_it_alone(
        tenants: Served) -> None:
    with tenants.client("alice") as alice, tenants.client("bob") as bob:
        assert alice.get("/api/caps").json() == {"caps": ["automation", "core"], "routes": [
            "/api/act", "/api/batch", "/api/live/handbacks", "/api/needs-user", "/api/parallel", "/api/resume",
            "/api/sessions", "/api/tabs", "/api/tasks", "/api/workflow"]}
        assert bob.get("/api/caps").json() == {
            "caps": ["core"], "routes": ["/api/act", "/api/live/handbacks", "/api/needs-user", "/api/resume",
                                         "/api/sessions", "/api/tabs", "/api/tasks"]}
        for path in ("/api/batch", "/api/parallel", "/api/workflow"):
            refused = bob.post(path, json={"commands": [{"action": "title"}]})
            assert (refused.status_code, refused.json()) == (404, {
                "error": f"{path} is in the automation capability group, which is not enabled (KITSUNE_CAPS)",
                "code": "capability_disabled", "retryable": False})
        answered = alice.post("/api/batch", json={"commands": [{"action": "getTabs"}]})
        assert answered.status_code == 200 and answered.json()["status"] == "ok"


def test_an_agent_with_an_allow_list_is_refused_other_hosts_and_one_without_is_not(
        tenants: Served, site: TestSite) -> None:
    with tenants.client("dave") as dave, tenants.client("bob") as bob:
        opened = _post(dave, "/api/tabs", {"op": "open", "url": site.url("/clicks")}, 403)
        assert (opened["status"], opened["code"], opened["state"]["reason"]) == ("failed", "url_denied", "not_allowed")
        tab = open_tab(dave, "about:blank")
        gone = _post(dave, "/api/act", {"command": {"action": "navigate", "tabId": tab, "url": site.url("/text")}},
                     403)
        assert (gone["status"], gone["code"], gone["state"]["reason"]) == ("failed", "url_denied", "not_allowed")
        assert site.count(ANY) == 0  # refused before anything was sent
        bobs = open_tab(bob, site.url("/text"))
        went = _post(bob, "/api/act", {"command": {"action": "navigate", "tabId": bobs, "url": site.url("/clicks")}})
        assert went["status"] == "ok"
