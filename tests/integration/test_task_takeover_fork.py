"""A force takeover held for a person where the agent's policy says so (``tasks.takeover: ask``), and forks
(issue 33), on the two-node fleet of ``task_fleet`` (real Chromium, real nats-server)."""

from __future__ import annotations

from tests.integration.task_fleet import (
    Fleet,
    answer,
    api,
    create,
    expire,
    fleet,
    open_tab,
    refused,
    sessions,
    state,
)
from tests.site import TestSite

__all__ = ["fleet"]  # the module's fixture


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
