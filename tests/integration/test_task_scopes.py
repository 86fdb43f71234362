"""Scopes (issue 33) and the spec's three tests: a navigation without continuity, with it, and with an expired
checkpoint (the resume fails closed and leaves a clean state), on the two-node fleet of ``task_fleet``."""

from __future__ import annotations

import httpx

from tests.integration.fleet_nodes import until
from tests.integration.task_fleet import Fleet, answer, api, create, open_tab, refused, sessions
from tests.site import TestSite


def _go(client: httpx.Client, tab: int, url: str) -> None:
    went = answer(client.post("/api/act", json={"command": {"action": "navigate", "tabId": tab, "url": url}}))
    assert went["status"] == "ok", went


def test_a_navigation_without_continuity_carries_nothing(fleet: Fleet, site: TestSite) -> None:
    (s1,) = sessions(1)
    with api(fleet.bases[0], session=s1) as agent:
        tab = open_tab(agent, site.url("/text"), fleet.nodes[0])
        _go(agent, tab, site.url("/clicks"))
        assert not [t for t in answer(agent.get("/api/tasks"))["tasks"] if tab in t["tabs"]]


def test_a_navigation_with_continuity_carries_the_checkpoint_to_the_next_document(
        fleet: Fleet, site: TestSite) -> None:
    (s1,) = sessions(1)
    with api(fleet.bases[0], session=s1) as owner:
        tab = open_tab(owner, site.url("/text"), fleet.nodes[0])
        task = create(owner, [tab], "Read, then hit")
        assert task["scope"] == "tab"  # the default, as the spec says
        said = [{"role": "user", "content": "read, then hit"}]
        answer(owner.post(f"/api/tasks/{task['id']}/checkpoint", json={"summary": "read", "messages": said}))
        _go(owner, tab, site.url("/clicks"))
        carried = answer(owner.post(f"/api/tasks/{task['id']}/checkpoint", json={}))["task"]
        checkpoint = carried["checkpoint"]
        assert carried["state"] == "owner" and checkpoint["page"]["url"] == site.url("/clicks")
        assert (checkpoint["goal"], checkpoint["summary"], checkpoint["messages"]) == ("Read, then hit", "read", said)
        assert checkpoint["began"]["url"] == site.url("/text")


def test_a_navigation_to_another_origin_expires_the_task_and_its_resume_fails_closed(
        fleet: Fleet, site: TestSite, other_site: TestSite) -> None:
    s1, s2 = sessions(2)
    with api(fleet.bases[0], session=s1) as owner, api(fleet.bases[1], session=s2) as heir:
        tab = open_tab(owner, site.url("/text"), fleet.nodes[0])
        task = create(owner, [tab], "Stay on the site")["id"]
        _go(owner, tab, other_site.url("/clicks"))
        until(lambda: answer(heir.get(f"/api/tasks/{task}"))["task"]["status"] == "expired", 5,
              "the navigation ending the task at once, with no write or request on it")
        refused(owner.post(f"/api/tasks/{task}/checkpoint", json={"summary": "elsewhere"}), "task_expired")
        before = answer(heir.get(f"/api/tasks/{task}"))["task"]
        assert (before["status"], before["state"]) == ("expired", "expired") and before["checkpoint"][
            "summary"] == ""  # nothing of the refused write was kept
        assert before["checkpoint"]["events"][-1]["kind"] == "expired"
        refused(heir.post(f"/api/tasks/{task}/takeover", json={}), "task_origin_changed")
        after = answer(heir.get(f"/api/tasks/{task}"))["task"]
        assert {**after, "updated": 0} == {**before, "updated": 0}  # the resume failed closed: nothing taken


def test_a_browser_task_s_tabs_share_one_origin(fleet: Fleet, site: TestSite, other_site: TestSite) -> None:
    (s1,) = sessions(1)
    with api(fleet.bases[0], session=s1) as owner:
        here, there = open_tab(owner, site.url("/text"), fleet.nodes[0]), open_tab(owner, other_site.url("/text"),
                                                                                    fleet.nodes[0])
        refused(owner.post("/api/tasks", json={"goal": "Two sites", "tabs": [here, there], "scope": "browser"}),
                "task_origin_changed")
        refused(owner.post("/api/tasks", json={"goal": "Two tabs", "tabs": [here, there]}), "invalid_parameter")
