"""Tasks with leases on a real fleet (issue 17): two in-process nodes of one fleet on the real nats-server,
each with a real Chromium and the real app over HTTP; the test site counts every write, server side.

The must-shows: the owner session writes and a follower (another session, or none) only observes, its
writes refused before anything is sent; two sessions racing a takeover through the two nodes, one wins;
a call in flight when its session is lost comes back unknown, never ok, its checkpoint's token reissued
(the old one refused); the canaries (typed values, resume and confirm tokens) in no task record, view or
raw KV value; an approval of one session authorizes no call of another; an operator revokes or expires a
task and its owner's next write is refused. Beside them, the contract's refusals (another agent's task, a
tab in two tasks, a request without a session) and a task on the agent's tab on the other node. Leases
last 30 s, longer than any test: one whose owner's session goes silent runs its lease out (``lapse``), then
polls until the heir sees it expired; none sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any

import httpx
import orjson
import pytest

from actors.buckets import TASKS_BUCKET
from core.tasks import TaskLimits
from messages.errors import ERROR_CODES
from tests.integration.fleet_nodes import until
from tests.integration.task_fleet import (
    HIT,
    LEASE,
    LOST,
    OPERATOR,
    SLOW,
    SLOW_WRITE,
    Fleet,
    answer,
    api,
    approved_tab,
    create,
    expire,
    hit,
    lapse,
    open_tab,
    refused,
    sessions,
    state,
)
from tests.nats_access import NatsAccess
from tests.site import TestSite
from tests.site.pages import TEXT_HEADING


def test_the_owner_writes_and_a_follower_observes_its_writes_refused_with_nothing_sent(
        fleet: Fleet, site: TestSite) -> None:
    s1, s2 = sessions(2)
    base = fleet.bases[0]
    with api(base, session=s1) as owner, api(base, session=s2) as follower, api(base) as sessionless:
        tab = open_tab(owner, site.url("/clicks"), fleet.nodes[0])
        task = create(owner, [tab])
        assert (task["owner"], task["status"], task["lease_ttl"], task["resume"]) == ("you", "active", LEASE, "ask")
        assert hit(owner, tab)["status"] == "ok"
        assert site.wait_for_count(HIT, 1) == 1
        for other in (follower, sessionless):
            direct = hit(other, tab, 409)
            assert (direct["status"], direct["code"]) == ("failed", "task_leased"), direct
            assert direct["state"] == {"taskId": task["id"], "tabId": tab}
            batch = answer(other.post("/api/batch", json={"tabId": tab, "commands": [
                {"action": "title"}, {"action": "click", "selector": "#hit"}]}))
            assert [p["status"] for p in batch["progress"]] == ["ok", "failed"], batch
            assert batch["results"][1]["code"] == "task_leased"
            text = answer(other.post("/api/act", json={"command": {"action": "pageText", "tabId": tab}}))
            assert text["status"] == "ok" and "Clicks" in text["text"], text
            seen = answer(other.get(f"/api/tasks/{task['id']}"))["task"]
            assert (seen["state"], seen["owner"], seen["id"]) == ("follower", "another session", task["id"]), seen
        assert state(owner, task["id"]) == "owner"
        assert hit(owner, tab)["status"] == "ok"  # the owner's second write: the site saw all before it
        assert site.wait_for_count(HIT, 2) == 2
    assert site.counts() == {HIT: 2}


def test_a_task_is_its_agent_s_alone_one_per_tab(fleet: Fleet, site: TestSite) -> None:
    (s1,) = sessions(1)
    base = fleet.bases[0]
    with api(base, session=s1) as alice, api(base, "bob", s1) as bob, api(base) as sessionless:
        tab = open_tab(alice, site.url("/clicks"), fleet.nodes[0])
        refused(sessionless.post("/api/tasks", json={"goal": "No session", "tabs": [tab]}), "session_required")
        task = create(alice, [tab])["id"]
        refused(bob.post("/api/tasks", json={"goal": "Not my tab", "tabs": [tab]}), "tab_owned")
        conflict = refused(alice.post("/api/tasks", json={"goal": "Again", "tabs": [tab]}), "task_conflict")
        assert conflict["state"]["taskId"] == task
        assert task not in [t["id"] for t in answer(bob.get("/api/tasks"))["tasks"]]
        assert task in [t["id"] for t in answer(alice.get("/api/tasks"))["tasks"]]
        refused(bob.get(f"/api/tasks/{task}"), "task_not_found")
        refused(bob.post(f"/api/tasks/{task}/takeover", json={"force": True}), "task_not_found")
        refused(bob.delete(f"/api/tasks/{task}"), "task_not_found")
        refused(sessionless.post(f"/api/tasks/{task}/takeover", json={}), "session_required")
        assert state(alice, task) == "owner"


def test_heartbeat_checkpoint_and_complete_need_a_session(fleet: Fleet, site: TestSite) -> None:
    (s1,) = sessions(1)
    with api(fleet.bases[0], session=s1) as alice, api(fleet.bases[0]) as sessionless:
        task = create(alice, [open_tab(alice, site.url("/clicks"), fleet.nodes[0])])["id"]
        ops = ("heartbeat", "checkpoint", "complete")
        answered = {op: (r.status_code, r.json()["code"]) for op in ops
                    if (r := sessionless.post(f"/api/tasks/{task}/{op}"))}
        assert answered == dict.fromkeys(ops, (400, "session_required"))  # the contract's
        assert state(alice, task) == "owner"


def test_a_task_may_hold_the_agent_s_tab_on_another_node_of_the_fleet(fleet: Fleet, site: TestSite) -> None:
    s1, s2 = sessions(2)
    with api(fleet.bases[0], session=s1) as owner, api(fleet.bases[1], session=s2) as follower:
        tab = open_tab(owner, site.url("/clicks"), fleet.nodes[1], session=f"far-{s1}")  # through node 0, on node 1
        task = create(owner, [tab], "Hit it on the other node")["id"]
        assert hit(follower, tab, 409)["code"] == "task_leased"
        assert hit(owner, tab)["status"] == "ok"
        assert site.wait_for_count(HIT, 1) == 1
        assert state(follower, task) == "follower"
    assert site.counts() == {HIT: 1}


def test_a_task_on_a_tab_that_is_not_open_is_unknown_tab(fleet: Fleet) -> None:
    (s1,) = sessions(1)
    with api(fleet.bases[0], session=s1) as owner:
        refused(owner.post("/api/tasks", json={"goal": "Nowhere", "tabs": [10**9]}), "unknown_tab")


def test_the_checkpoint_describes_the_task_s_page_with_its_headings(fleet: Fleet, site: TestSite) -> None:
    (s1,) = sessions(1)
    with api(fleet.bases[0], session=s1) as owner:
        task = create(owner, [open_tab(owner, site.url("/text"), fleet.nodes[0])], "Read the text")
        page = answer(owner.post(f"/api/tasks/{task['id']}/checkpoint", json={}))["task"]["checkpoint"]["page"]
        assert (page["url"], page["title"]) == (site.url("/text"), "Text"), page
        assert TEXT_HEADING in page["headings"], page  # the contract: "the first tab's URL, title and headings"
        assert any(f'heading "{TEXT_HEADING}"' in line for line in page["outline"]), page  # and its snapshot's
        assert not any("[ref=" in line for line in page["outline"]), page  # without refs: they are no one else's


def _race(bases: tuple[str, str], task: str, names: list[str]) -> list[httpx.Response]:
    """Two takeovers of ``task`` at the same moment, session ``names[i]`` through node ``i``."""
    barrier, answers = threading.Barrier(2), [httpx.Response(0), httpx.Response(0)]
    with contextlib.ExitStack() as stack:
        clients = [stack.enter_context(api(base, session=name)) for base, name in zip(bases, names, strict=True)]

        def take(i: int) -> None:
            barrier.wait()
            answers[i] = clients[i].post(f"/api/tasks/{task}/takeover", json={})
        threads = [threading.Thread(target=take, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    return answers


def test_a_takeover_re_observes_the_tabs_and_says_when_a_page_could_not_be_read(
        fleet: Fleet, site: TestSite) -> None:
    s1, s2 = sessions(2)
    with api(fleet.bases[0], session=s1) as first:
        signing = open_tab(first, site.url("/needs-user/sign-in"), fleet.nodes[0])
        loading = open_tab(first, site.url("/text"), fleet.nodes[0])
        task = create(first, [signing, loading], "Sign in", scope="browser")["id"]
        went = answer(first.post("/api/act", json={"command": {  # its password field comes after 8 s
            "action": "navigate", "url": site.url("/trickle?ms=8000"), "waitUntil": "commit", "tabId": loading}}))
        assert went["status"] == "ok", went
        expire(first, task)
    with api(fleet.bases[1], session=s2) as heir:
        taken = answer(heir.post(f"/api/tasks/{task}/takeover", json={}))
    tabs = {tab["tabId"]: tab for tab in taken["tabs"]}
    assert (tabs[signing]["needs_user"], tabs[signing]["reason"]) == (True, "sign_in"), tabs
    assert (tabs[loading]["url"], tabs[loading]["needs_user"]) == (site.url("/trickle?ms=8000"), None), tabs


def test_two_sessions_racing_a_takeover_through_two_nodes_exactly_one_wins(fleet: Fleet, site: TestSite) -> None:
    (s0,) = sessions(1)
    with api(fleet.bases[0], session=s0) as first:
        tab = open_tab(first, site.url("/clicks"), fleet.nodes[0])
        task = create(first, [tab], "Race for it")["id"]
        names: list[str] = []
        for _ in range(4):
            expire(first, task)
            names = sessions(2)
            answers = _race(fleet.bases, task, names)
            statuses = sorted(a.status_code for a in answers)
            assert statuses == [200, 409], [a.text for a in answers]
            won = next(i for i, a in enumerate(answers) if a.status_code == 200)
            assert answers[won].json()["task"]["state"] == "owner"
            assert answers[1 - won].json()["code"] in ("task_takeover_conflict", "task_leased"), answers[1 - won].text
    winner, loser = names[won], names[1 - won]
    with api(fleet.bases[won], session=winner) as ours, api(fleet.bases[1 - won], session=loser) as theirs:
        assert state(ours, task) == "owner" and state(theirs, task) == "follower"
        assert hit(theirs, tab, 409)["code"] == "task_leased"
        assert hit(ours, tab)["status"] == "ok"
        assert site.wait_for_count(HIT, 1) == 1
        assert hit(theirs, tab, 409)["code"] == "task_leased"
        assert hit(ours, tab)["status"] == "ok"
        assert site.wait_for_count(HIT, 2) == 2
    assert site.counts() == {HIT: 2}


def _slow_batch(client: httpx.Client, tab: int, timeout: float) -> dict[str, Any]:
    """A batch writing the slow form: a fill, then the held POST /slow waited for at most ``timeout`` s."""
    return answer(client.post("/api/batch", json={"tabId": tab, "commands": [
        {"action": "fill", "selector": "#item", "value": "slow item"},
        {"action": "waitForResult", "code": SLOW_WRITE, "timeout": timeout}]}))


def _lapsed(fleet: Fleet, client: httpx.Client, task: str) -> None:
    """The owner's session says nothing more: its lease runs out, and ``client`` sees the task expired."""
    lapse(fleet.nodes[0], task)
    until(lambda: state(client, task) == "expired", 10, "the owner's lease lapsing")


def test_a_call_running_when_its_session_is_lost_comes_back_unknown(fleet: Fleet, site: TestSite) -> None:
    s1, s2 = sessions(2)
    base = fleet.bases[0]
    with api(base, session=s1) as lost, api(base, session=s2) as heir:
        tab = open_tab(lost, site.url("/slow"), fleet.nodes[0])
        task = create(lost, [tab], "Submit the slow form once")["id"]
        site.hold_slow()
        running: dict[str, Any] = {}
        call = threading.Thread(target=lambda: running.update(_slow_batch(lost, tab, 60)))
        call.start()
        try:
            assert site.wait_for_count(SLOW, 1, timeout=30) == 1  # the write is out, its answer held
            _lapsed(fleet, heir, task)  # the owner's session says nothing more
            taken = answer(heir.post(f"/api/tasks/{task}/takeover", json={}))
        finally:
            site.release_slow()
            call.join(60)
        assert taken["task"]["state"] == "owner" and taken["tabs"][0]["tabId"] == tab, taken
        assert running["status"] == "ok"  # it ended ok, but the session that asked never heard it
        (unknown,) = taken["in_flight"]
        assert (unknown["status"], unknown["reason"]) == ("unknown", LOST), taken
        steps = until(lambda: [s for s in answer(heir.get(f"/api/tasks/{task}"))["task"]["checkpoint"]["steps"]
                               if s["action"] == "waitForResult"], 10, "the call's steps in the checkpoint")
        assert [s["call"] for s in steps] == [unknown["call"]], steps
    assert site.count(SLOW) == 1


def test_a_call_whose_end_its_session_never_heard_comes_back_unknown_with_a_new_token(
        fleet: Fleet, site: TestSite) -> None:
    s1, s2 = sessions(2)
    base = fleet.bases[0]
    with api(base, session=s1) as lost, api(base, session=s2) as heir:
        tab = open_tab(lost, site.url("/slow"), fleet.nodes[0])
        task = create(lost, [tab], "Submit the slow form once")["id"]
        site.hold_slow()
        try:
            stopped = _slow_batch(lost, tab, 1)  # the write went out; its end is not known
        finally:
            site.release_slow()
        assert stopped["status"] != "ok" and stopped["resume_token"], stopped
        _lapsed(fleet, heir, task)  # the answer came back, and its session was never heard from again
        taken = answer(heir.post(f"/api/tasks/{task}/takeover", json={}))
        (unknown,) = taken["in_flight"]
        assert (unknown["call"], unknown["status"], unknown["reason"]) == (stopped["call"], "unknown", LOST), taken
        assert unknown["resume_token"] and unknown["resume_token"] != stopped["resume_token"]
        resume = {"call": stopped["call"], "observed": {"1": "applied"}}
        old = heir.post("/api/resume", json={**resume, "resume_token": stopped["resume_token"]})
        refused(old, "resume_token_invalid")
        resumed = answer(heir.post("/api/resume", json={**resume, "resume_token": unknown["resume_token"]}))
        assert resumed["status"] == "ok", resumed
    assert site.count(SLOW) == 1  # observed applied: never sent again


def _raw_record(nats_access: NatsAccess, fleet: str, task: str) -> bytes:
    """The task's value in the KV bucket, as a plain NATS client reads it."""
    async def read() -> bytes:
        client = await nats_access.client()
        try:
            entry = await (await client.jetstream().key_value(TASKS_BUCKET)).get(f"{fleet}.task.{task}")
            assert entry.value is not None
            return entry.value
        finally:
            await client.close()
    return asyncio.run(read())


def test_the_canaries_are_in_no_task_record(fleet: Fleet, site: TestSite, nats_access: NatsAccess) -> None:
    s1, s2 = sessions(2)
    typed, shaped = "hush canary 7f3a", "CanaryTokenShaped_0123456789abcdef"
    with api(fleet.bases[0], "carol", s1) as owner, api(fleet.bases[0], "carol", s2) as other:
        tab = approved_tab(owner, site.url("/form"), fleet.nodes[0])
        task = create(owner, [tab], "Fill the form", scope="browser")["id"]  # its record in the fleet's KV
        fill = {"action": "fill", "tabId": tab, "selector": "#name", "value": typed}
        held = answer(owner.post("/api/act", json={"command": fill}), 403)
        assert (held["status"], held["code"]) == ("held", "needs_user"), held
        confirm = held["state"]["confirm_token"]
        assert answer(owner.post("/api/act", json={"command": fill, "confirm_token": confirm}))["status"] == "ok"
        batch = answer(owner.post("/api/batch", json={"tabId": tab, "commands": [
            {"action": "type", "selector": "#email", "text": typed + " again"}]}))
        assert batch["status"] == "held" and batch["resume_token"], batch
        until(lambda: {"fill", "type"} <= {s["action"] for s in answer(owner.get(f"/api/tasks/{task}"))["task"][
            "checkpoint"]["steps"]}, 10, "the calls' steps in the checkpoint")
        canaries = [typed, typed + " again", confirm, batch["results"][0]["state"]["confirm_token"],
                    batch["resume_token"], batch["live_view"]["url"].partition("#t=")[2], shaped]
        summary = "Typed " + ", then ".join(canaries) + "; next: submit"
        checkpointed = answer(owner.post(f"/api/tasks/{task}/checkpoint", json={"summary": summary}))["task"]
        assert "[redacted]" in checkpointed["checkpoint"]["summary"] and "next: submit" in checkpointed["checkpoint"][
            "summary"], checkpointed
        records = [orjson.dumps(checkpointed), owner.get(f"/api/tasks/{task}").content,
                   other.get(f"/api/tasks/{task}").content, owner.get("/api/tasks").content,
                   _raw_record(nats_access, fleet.name, task)]
        for record in records:
            assert not [c for c in canaries if c.encode() in record], record
    assert site.counts() == {}


def test_an_approval_given_to_one_session_never_authorizes_a_call_of_another(fleet: Fleet, site: TestSite) -> None:
    s1, s2 = sessions(2)
    with api(fleet.bases[0], "carol", s1) as asker, api(fleet.bases[0], "carol", s2) as other:
        tab = approved_tab(asker, site.url("/clicks"), fleet.nodes[0])
        held = hit(asker, tab, 403)
        assert (held["status"], held["code"]) == ("held", "needs_user"), held
        token = held["state"]["confirm_token"]
        again = hit(other, tab, 403, confirm_token=token)
        assert (again["status"], again["code"]) == ("held", "confirm_token_invalid"), again
        assert hit(other, tab, 403, confirm_token=token)["code"] == "confirm_token_invalid"
        assert site.count(HIT) == 0
        assert hit(asker, tab, confirm_token=token)["status"] == "ok"
        assert site.wait_for_count(HIT, 1) == 1
        assert hit(asker, tab, 403, confirm_token=token)["code"] == "confirm_token_invalid"  # once
    assert site.counts() == {HIT: 1}


def test_a_takeover_approved_for_one_session_is_not_another_s(fleet: Fleet, site: TestSite) -> None:
    s1, s2, s3 = sessions(3)
    with api(fleet.bases[0], "carol", s1) as owner, api(fleet.bases[1], "carol", s2) as heir, \
            api(fleet.bases[1], "carol", s3) as other:
        task = create(owner, [approved_tab(owner, site.url("/clicks"), fleet.nodes[0])], "Ask to take it")["id"]
        held = answer(heir.post(f"/api/tasks/{task}/takeover", json={"force": True}), 403)
        assert (held["status"], held["code"]) == ("held", "needs_user"), held
        token = held["state"]["confirm_token"]
        again = answer(other.post(f"/api/tasks/{task}/takeover", json={"force": True, "confirm_token": token}), 403)
        assert (again["status"], again["code"]) == ("held", "confirm_token_invalid"), again
        assert state(owner, task) == "owner"  # nothing taken
        taken = answer(heir.post(f"/api/tasks/{task}/takeover", json={"force": True, "confirm_token": token}))
        assert taken["task"]["state"] == "owner" and state(owner, task) == "follower", taken


def test_an_operator_revokes_a_task_and_its_owner_s_next_write_is_refused(fleet: Fleet, site: TestSite) -> None:
    s1, s2 = sessions(2)
    base = fleet.bases[0]
    with api(base, session=s1) as owner, api(base, session=s2) as heir, api(base, "bob") as bob, \
            api(fleet.bases[1], token=OPERATOR) as operator:
        tab, other_tab = (open_tab(owner, site.url("/clicks"), fleet.nodes[0]) for _ in range(2))
        task, other_task = create(owner, [tab])["id"], create(owner, [other_tab])["id"]
        assert hit(owner, tab)["status"] == "ok"
        assert site.wait_for_count(HIT, 1) == 1
        refused(bob.delete(f"/api/tasks/{task}"), "task_not_found")
        refused(operator.get(f"/api/tasks/{task}"), "unauthorized")  # an operator's token deletes, nothing else
        revoked = answer(operator.delete(f"/api/tasks/{task}"))["task"]
        assert (revoked["status"], revoked["state"]) == ("revoked", "revoked"), revoked
        write = hit(owner, tab, 410)
        assert (write["status"], write["code"], write["state"]) == ("failed", "task_revoked",
                                                                    {"taskId": task, "tabId": tab}), write
        assert task not in [t["id"] for t in answer(owner.get("/api/tasks"))["tasks"]]
        assert answer(owner.post("/api/act", json={"command": {"action": "title", "tabId": tab}}))["status"] == "ok"

        expire(operator, other_task)
        assert state(heir, other_task) == "expired"
        assert state(owner, other_task) == "expired"  # its owner still reads it: an expired lease is no refusal
        assert hit(owner, other_tab, 409)["code"] == "task_expired"
        assert answer(heir.post(f"/api/tasks/{other_task}/takeover", json={}))["task"]["state"] == "owner"
        assert hit(heir, other_tab)["status"] == "ok"
        assert site.wait_for_count(HIT, 2) == 2
    assert site.counts() == {HIT: 2}


def test_another_agent_that_took_the_tab_over_writes_through_no_lease_and_is_told_of_no_task(
        fleet: Fleet, site: TestSite) -> None:
    (s1,) = sessions(1)
    goal = "Buy the blue kettle for Alice"
    base = fleet.bases[0]
    with api(base, session=s1) as alice, api(base, "bob", s1) as posing, api(fleet.bases[1], "bob") as bob:
        tab = open_tab(alice, site.url("/clicks"), fleet.nodes[0])
        task = create(alice, [tab], goal)["id"]
        assert answer(bob.post("/api/tabs", json={"op": "takeover", "tabId": tab}))["ok"] is True
        told: list[bytes] = []
        for expired_code in ("task_leased", "task_expired"):
            for other in (posing, bob):  # alice's session name, or none: bob's all the same
                direct = other.post("/api/act", json={"command": {"action": "click", "tabId": tab, "selector": "#hit"}})
                body = answer(direct, 409)  # a direct route: the code's status
                assert (body["status"], body["code"], body["state"]) == (
                    "failed", expired_code, {"tabId": tab, "owner": "another agent"}), body
                batch = answer(other.post("/api/batch", json={"tabId": tab, "commands": [
                    {"action": "click", "selector": "#hit"}]}))
                assert batch["results"][0]["code"] == expired_code, batch
                told += [direct.content, orjson.dumps(batch), other.get(f"/api/tasks/{task}").content,
                         other.get("/api/tasks").content,
                         other.post(f"/api/tasks/{task}/takeover", json={"force": True}).content]
            expire(alice, task)
        refused(posing.get(f"/api/tasks/{task}"), "task_not_found")
        assert [t for t in answer(bob.get("/api/tasks"))["tasks"] if t["id"] == task] == []
        leaks = [(word, told_one) for told_one in told for word in (task, goal, s1) if word.encode() in told_one
                 and b"task_not_found" not in told_one]  # a task_not_found repeats the id it was asked
        assert leaks == []
        assert state(alice, task) == "expired"
    assert site.counts() == {}


def test_an_auto_takeover_answers_its_report_when_a_lost_call_needs_an_observation(
        fleet: Fleet, site: TestSite) -> None:
    s1, s2 = sessions(2)
    with api(fleet.bases[0], session=s1) as lost, api(fleet.bases[1], session=s2) as heir:
        tab = open_tab(lost, site.url("/slow"), fleet.nodes[0])
        task = create(lost, [tab], "Submit the slow form once", resume="auto")["id"]
        site.hold_slow()
        try:
            stopped = _slow_batch(lost, tab, 1)  # its write went out; how it ended is not known
        finally:
            site.release_slow()
        assert stopped["progress"][1]["status"] == "unknown" and stopped["resume_token"], stopped
        _lapsed(fleet, heir, task)
        taken = answer(heir.post(f"/api/tasks/{task}/takeover", json={}))
        assert taken["task"]["state"] == "owner", taken
        (report,) = taken["in_flight"]
        assert (report["call"], report["status"], report["reason"]) == (stopped["call"], "unknown", LOST), report
        why = report["not_resumed"]
        assert why["code"] == "observed_required" and "resumed" not in report, report
        assert [(s["step"], s["status"]) for s in why["state"]["steps"]] == [("1", "unknown")], why
        resume = {"call": stopped["call"], "observed": {"1": "applied"}}
        refused(heir.post("/api/resume", json={**resume, "resume_token": stopped["resume_token"]}),
                "resume_token_invalid")
        resumed = answer(heir.post("/api/resume", json={**resume, "resume_token": report["resume_token"]}))
        assert resumed["status"] == "ok", resumed
    assert site.count(SLOW) == 1  # observed applied: never sent again


def test_tasks_are_bounded_per_agent_in_goal_and_in_tabs_each_refusal_naming_its_limit(
        fleet: Fleet, site: TestSite, monkeypatch: pytest.MonkeyPatch) -> None:
    for node in fleet.nodes:
        monkeypatch.setattr(node.tasks, "limits", TaskLimits(per_agent=3, goal=20, tabs=4))
    s1, s2 = sessions(2)
    with api(fleet.bases[0], "dave", s1) as dave, api(fleet.bases[1], "dave", s2) as other, \
            api(fleet.bases[0], "bob", s1) as bob:
        tab = open_tab(dave, site.url("/clicks"), fleet.nodes[0])
        for goal, tabs, parameter, most in [("g" * 21, [tab], "goal", 20), ("g", [tab] * 5, "tabs", 4)]:
            bad = refused(dave.post("/api/tasks", json={"goal": goal, "tabs": tabs}), "invalid_parameter")
            assert bad["state"] == {"param": parameter, "max": most} and str(most) in bad["error"], bad
        started = time.monotonic()
        many = refused(dave.post("/api/tasks", json={"goal": "g", "tabs": list(range(30_000))}), "invalid_parameter")
        assert many["state"] == {"param": "tabs", "max": 4} and time.monotonic() - started < 10, many  # refused unread
        made = [create(dave, [tab], scope="browser")["id"], create(dave, [])["id"], create(other, [])["id"]]
        until(lambda: all(len(n.tasks.store.of_agent("dave")) == 3 for n in fleet.nodes), 10, "both nodes' mirrors")
        over = refused(other.post("/api/tasks", json={"goal": "One more", "tabs": []}), "quota_exceeded")
        assert over["state"] == {"limit": "tasks", "max": 3} and over["retryable"] is False, over
        assert ERROR_CODES["quota_exceeded"].http_status == 429
        create(bob, [])  # another agent's count
        answer(dave.post(f"/api/tasks/{made[0]}/complete", json={}))
        answer(dave.delete(f"/api/tasks/{made[1]}"))  # completed and revoked ones do not count
        made += [create(dave, [])["id"], create(dave, [])["id"]]
        refused(dave.post("/api/tasks", json={"goal": "One more", "tabs": []}), "quota_exceeded")
        for task in made[2:]:
            answer((other if task == made[2] else dave).post(f"/api/tasks/{task}/complete", json={}))
        create(dave, [])  # five closed: the two oldest go, three are kept
        kept = [t["id"] for t in answer(dave.get("/api/tasks"))["tasks"] if t["status"] == "completed"]
        assert sorted(kept) == sorted(made[2:]), kept
        refused(dave.get(f"/api/tasks/{made[0]}"), "task_not_found")
        assert len(fleet.nodes[0].tasks.store.of_agent("dave")) == 4


def test_a_new_task_s_tabs_are_found_open_in_one_read_never_a_bucket_read_per_tab(
        fleet: Fleet, site: TestSite, monkeypatch: pytest.MonkeyPatch) -> None:
    looked_up: list[int] = []

    async def lookup(tab: int) -> None:
        looked_up.append(tab)
    for node in fleet.nodes:
        monkeypatch.setattr(node.member.registry, "lookup", lookup)
    (s1,) = sessions(1)
    with api(fleet.bases[1], session=s1) as owner:
        tab = open_tab(owner, site.url("/clicks"), fleet.nodes[0])  # through node 1, on node 0
        wide = {"goal": "g", "scope": "browser", "tabs": [tab, *range(10**9, 10**9 + 30)]}
        unknown = refused(owner.post("/api/tasks", json=wide), "unknown_tab")
        assert unknown["state"] == {"tabId": 10**9, "param": "tabs"}, unknown
        assert create(owner, [tab])["tabs"] == [tab]
    assert looked_up == []
