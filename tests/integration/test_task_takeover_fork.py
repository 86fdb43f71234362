"""A force takeover held for a person where the agent's policy says so (``tasks.takeover: ask``), and forks
(issue 33), on the two-node fleet of ``task_fleet`` (real Chromium, real nats-server)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from actors.audit_actor import Auditor
from tests.integration.task_fleet import (
    OPERATOR,
    Fleet,
    answer,
    api,
    approved_tab,
    create,
    expire,
    open_tab,
    refused,
    sessions,
    state,
)
from tests.site import TestSite


def test_a_force_takeover_waits_for_an_approval_bound_to_session_task_and_force(fleet: Fleet, site: TestSite) -> None:
    s1, s2, s3 = sessions(3)
    with api(fleet.bases[0], "erin", s1) as owner, api(fleet.bases[1], "erin", s2) as heir, \
            api(fleet.bases[1], "erin", s3) as other:
        tab = open_tab(owner, site.url("/clicks"), fleet.nodes[0])  # erin's writes are not held: only takeovers
        task, second = create(owner, [tab])["id"], create(owner, [], "Another")["id"]
        held = answer(heir.post(f"/api/tasks/{task}/takeover", json={"force": True}), 403)
        assert (held["status"], held["code"]) == ("held", "needs_user"), held
        assert (held["state"]["taskId"], held["state"]["force"], held["state"]["action"]) == (task, True, "takeover")
        token = held["state"]["confirm_token"]
        refused(heir.post(f"/api/tasks/{task}/takeover", json={}), "task_leased")  # no force: refused, not held
        for wrong in ((other, task), (heir, second)):  # another session, another task
            client, name = wrong
            again = answer(client.post(f"/api/tasks/{name}/takeover", json={"force": True, "confirm_token": token}),
                           403)
            assert again["code"] == "confirm_token_invalid", again
        held = answer(heir.post(f"/api/tasks/{task}/takeover", json={"force": True}), 403)  # the first was used up
        assert state(owner, task) == "owner"  # nothing taken while no one approved
        approved = {"force": True, "confirm_token": held["state"]["confirm_token"]}
        taken = answer(heir.post(f"/api/tasks/{task}/takeover", json=approved))
        assert taken["task"]["state"] == "owner" and state(owner, task) == "follower", taken
        expire(owner, second)
        assert answer(other.post(f"/api/tasks/{second}/takeover", json={}))["task"]["state"] == "owner"  # no force


def _decide(base: str, hold: str, approve: bool, status: int = 200) -> dict[str, Any]:
    """An operator's decision on a held takeover, as the console's page sends it."""
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {OPERATOR}"}) as console:
        return answer(console.post(f"/console/takeovers/{hold}", json={"approve": approve}), status)


def _waiting(base: str) -> list[dict[str, Any]]:
    """The takeovers the console of the node at ``base`` lists as waiting for a decision."""
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {OPERATOR}"}) as console:
        rows: list[dict[str, Any]] = answer(console.get("/console/state"))["takeovers"]
        return rows


def test_an_operator_approves_or_denies_a_held_takeover_in_the_console(
        fleet: Fleet, site: TestSite, monkeypatch: pytest.MonkeyPatch) -> None:
    audited = _audited(monkeypatch)
    s1, s2, s3 = sessions(3)
    with api(fleet.bases[0], "erin", s1) as owner, api(fleet.bases[1], "erin", s2) as heir, \
            api(fleet.bases[1], "erin", s3) as other:
        tab = open_tab(owner, site.url("/clicks"), fleet.nodes[0])
        task = create(owner, [tab])["id"]
        held = answer(heir.post(f"/api/tasks/{task}/takeover", json={"force": True}), 403)
        hold, token = held["state"]["hold"], held["state"]["confirm_token"]
        [row] = [r for r in _waiting(fleet.bases[1]) if r["id"] == hold]
        assert (row["agent"], row["session"], row["task"], row["force"]) == ("erin", s2, task, True)
        assert token not in str(_waiting(fleet.bases[1]))  # the console never shows the token
        assert _decide(fleet.bases[1], hold, False)["takeover"]["decision"] == "denied"
        assert not [r for r in _waiting(fleet.bases[1]) if r["id"] == hold]
        refused(other.post(f"/api/tasks/{task}/takeover", json={"force": True, "confirm_token": token}),
                "confirm_token_invalid")  # another session: not its decision
        refused(heir.post(f"/api/tasks/{task}/takeover", json={"force": True, "confirm_token": token}),
                "takeover_denied")
        assert state(owner, task) == "owner"  # refused: nothing taken
        refused(heir.post(f"/api/tasks/{task}/takeover", json={"force": True, "confirm_token": token}),
                "confirm_token_invalid")  # the denial is told once
        held = answer(heir.post(f"/api/tasks/{task}/takeover", json={"force": True}), 403)
        hold, token = held["state"]["hold"], held["state"]["confirm_token"]
        approved = _decide(fleet.bases[1], hold, True)["takeover"]
        assert (approved["decision"], approved["task"]) == ("approved", task) and "code" not in approved, approved
        assert state(heir, task) == "owner" and state(owner, task) == "follower"  # released by the approval
        refused(other.post(f"/api/tasks/{task}/takeover", json={"force": True, "confirm_token": token}),
                "confirm_token_invalid")  # another session: the approval is not its
        taken = answer(heir.post(f"/api/tasks/{task}/takeover", json={"force": True, "confirm_token": token}))
        assert taken["task"]["state"] == "owner" and taken["in_flight"] == [], taken  # the approved takeover's answer
        refused(owner.post(f"/api/tasks/{task}/takeover", json={}), "task_leased")
        assert _decide(fleet.bases[1], hold, True, 404)["code"] == "hold_not_found"  # decided once
    assert [(op, t) for op, t, _ in audited if op.startswith("takeover")] == [
        ("takeover_denied", task), ("takeover_approved", task), ("takeover", task)]


def test_an_operator_s_approval_is_bound_to_the_held_takeover_s_force(fleet: Fleet, site: TestSite) -> None:
    s1, s2 = sessions(2)
    with api(fleet.bases[0], "carol", s1) as owner, api(fleet.bases[0], "carol", s2) as heir:  # asks before acting
        tab = approved_tab(owner, site.url("/clicks"), fleet.nodes[0])
        task = create(owner, [tab])["id"]
        held = answer(heir.post(f"/api/tasks/{task}/takeover", json={"force": True}), 403)
        assert _decide(fleet.bases[0], held["state"]["hold"], True)["takeover"]["decision"] == "approved"
        token = held["state"]["confirm_token"]
        refused(heir.post(f"/api/tasks/{task}/takeover", json={"force": False, "confirm_token": token}),
                "confirm_token_invalid")  # not the takeover approved
        taken = answer(heir.post(f"/api/tasks/{task}/takeover", json={"force": True, "confirm_token": token}))
        assert taken["task"]["state"] == "owner", taken


def _audited(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, str | None]]:
    """The task entries every node audits from now on: op, task, source."""
    audited: list[tuple[str, str, str | None]] = []
    recorded = Auditor.task

    def spied(self: Auditor, op: str, task_id: str, source: str | None = None) -> int:
        audited.append((op, task_id, source))
        return recorded(self, op, task_id, source)
    monkeypatch.setattr(Auditor, "task", spied)
    return audited


def test_a_fork_is_a_new_task_of_the_caller_on_new_tabs_and_the_original_is_untouched(
        fleet: Fleet, site: TestSite, monkeypatch: pytest.MonkeyPatch) -> None:
    audited = _audited(monkeypatch)
    s1, s2 = sessions(2)
    with api(fleet.bases[0], session=s1) as owner, api(fleet.bases[1], session=s2) as forker, \
            api(fleet.bases[0], "bob", s2) as bob:
        tabs = [open_tab(owner, site.url("/text"), fleet.nodes[0]),
                open_tab(owner, site.url("/clicks"), fleet.nodes[1], session=f"far-{s1}")]
        task = create(owner, tabs, "Read, then hit", scope="browser")["id"]
        said = [{"role": "user", "content": "read it first"}]
        answer(owner.post(f"/api/tasks/{task}/checkpoint", json={"summary": "read the text", "messages": said}))
        before = answer(owner.get(f"/api/tasks/{task}"))["task"]
        refused(bob.post(f"/api/tasks/{task}/fork", json={}), "task_not_found")
        refused(forker.post(f"/api/tasks/{task}/fork", json={"goal": ""}), "invalid_parameter")
        forked = answer(forker.post(f"/api/tasks/{task}/fork", json={"goal": "Hit it again"}), 201)
        copy = forked["task"]
        assert forked["forked_from"] == task and (copy["state"], copy["goal"]) == ("owner", "Hit it again"), forked
        assert len(copy["tabs"]) == 2 and not set(copy["tabs"]) & set(tabs), copy  # never the same tabs
        listed = {t["tabId"]: t for t in answer(forker.get("/api/tabs"))["tabs"]}
        assert [listed[t]["url"] for t in copy["tabs"]] == [site.url("/text"), site.url("/clicks")]
        carried = copy["checkpoint"]
        assert (carried["summary"], carried["messages"]) == ("read the text", said)
        assert carried["page"]["url"] == site.url("/text") and carried["events"][-1]["kind"] == "forked"
        after = answer(owner.get(f"/api/tasks/{task}"))["task"]
        assert {**after, "lease_expires": 0, "updated": 0} == {**before, "lease_expires": 0, "updated": 0}
        assert state(forker, task) == "follower"  # the original's owner is still its owner
    assert ("forked", copy["id"], task) in audited
