"""Snapshots and refs through a live ``kitsune serve`` (issue 30): a ref of a gone document is ``stale_ref``
(409, retryable) with nothing sent, in a direct call, a batch and a resume; a read-only agent may snapshot.
On the session's ``tenants`` node: erin writes, alice is read-only."""

from __future__ import annotations

from typing import Any

import httpx

from tests.integration.serving import Served, open_tab
from tests.site import ANY, TestSite

POST_FORM = "POST /form"


def act(agent: httpx.Client, command: dict[str, Any], status: int = 200) -> dict[str, Any]:
    answer = agent.post("/api/act", json={"command": command})
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    return body


def submit_index(shot: dict[str, Any]) -> int:
    return next(i for i, e in enumerate(shot["elements"]) if e.get("name") == "Submit")


def test_a_ref_of_a_gone_document_is_stale_in_a_direct_call_a_batch_and_a_resume(tenants: Served,
                                                                                  site: TestSite) -> None:
    with tenants.client("erin") as erin:
        tab = open_tab(erin, site.url("/form"))
        shot = act(erin, {"action": "snapshot", "tabId": tab})
        submit = shot["elements"][submit_index(shot)]["ref"]
        act(erin, {"action": "navigate", "tabId": tab, "url": site.url("/form")})
        site.reset()
        stale = act(erin, {"action": "click", "tabId": tab, "ref": submit}, 409)
        assert (stale["code"], stale["retryable"]) == ("stale_ref", True)
        assert site.count(ANY) == 0

        pick = f"${{$0.elements.{submit_index(shot)}.ref}}"
        batch = erin.post("/api/batch", json={"tabId": tab, "commands": [
            {"action": "snapshot"}, {"action": "navigate", "url": site.url("/form")},
            {"action": "click", "ref": pick}]}).json()
        assert [p["status"] for p in batch["progress"]] == ["ok", "ok", "failed"]
        assert batch["results"][2]["code"] == "stale_ref"

        stopped = erin.post("/api/batch", json={"tabId": tab, "commands": [
            {"action": "snapshot"}, {"action": "waitFor", "selector": "#never", "timeout": 0.3},
            {"action": "click", "ref": pick}]}).json()
        assert [p["status"] for p in stopped["progress"]] == ["ok", "failed", "skipped"]
        act(erin, {"action": "navigate", "tabId": tab, "url": site.url("/form")})  # the document is gone
        resumed = erin.post("/api/resume", json={"call": stopped["call"], "resume_token": stopped["resume_token"],
                                                 "observed": {"1": "applied"}}).json()
        assert resumed["results"][2]["code"] == "stale_ref", resumed
        assert site.count(POST_FORM) == 0

        fresh = act(erin, {"action": "snapshot", "tabId": tab})  # a new snapshot's ref clicks, once
        act(erin, {"action": "click", "tabId": tab, "ref": fresh["elements"][submit_index(fresh)]["ref"]})
        assert site.wait_for_count(POST_FORM) == 1


def test_a_read_only_agent_may_snapshot_but_not_click_by_ref(tenants: Served, site: TestSite) -> None:
    with tenants.client("erin") as erin, tenants.client("alice") as alice:
        tab = open_tab(erin, site.url("/form"))
        shot = act(alice, {"action": "snapshot", "tabId": tab, "interactive": True})
        assert 'button "Submit"' in shot["snapshot"]
        refused = act(alice, {"action": "click", "tabId": tab, "ref": shot["elements"][submit_index(shot)]["ref"]},
                      403)
        assert refused["code"] == "read_only"
        assert site.count(POST_FORM) == 0
