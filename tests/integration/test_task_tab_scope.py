"""``tab`` tasks (issue 33) on the two-node fleet of ``task_fleet`` (real Chromium, real nats-server): a task on a
tab of node A, created and driven through node B, is kept in A's memory alone (nothing in the fleet's KV tasks
bucket); B's requests are sent to A; A decides its lease, heartbeat and checkpoint with no read of the fleet's
store; another session or task cannot lease it; a navigation to another origin, its tab closing, or its node
leaving the fleet ends it ``expired``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import nats.js.errors
import pytest

from actors.buckets import TASKS_BUCKET
from bridge.wiring import run_node
from core.settings import TaskConfig
from driver import ChromiumBrowser
from tests.integration.fleet_nodes import sees, until
from tests.integration.task_fleet import HIT, LEASE, Fleet, answer, api, create, hit, open_tab, refused, sessions
from tests.nats_access import NatsAccess
from tests.site import TestSite


def _in_the_bucket(nats_access: NatsAccess, fleet: str, keys: list[str]) -> list[str]:
    """Those of ``keys`` the fleet's KV tasks bucket holds, as a plain NATS client reads it."""
    async def read() -> list[str]:
        client = await nats_access.client()
        try:
            kv = await client.jetstream().key_value(TASKS_BUCKET)
            held = []
            for key in keys:
                try:
                    await kv.get(f"{fleet}.{key}")
                except nats.js.errors.KeyNotFoundError:
                    continue
                held.append(key)
            return held
        finally:
            await client.close()
    return asyncio.run(read())


@pytest.fixture
def fleet_reads(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The reads node A makes of the fleet's tasks bucket while the test runs."""
    reads: list[str] = []
    store: Any = fleet.nodes[0].tasks.store._fleet  # the fleet's store behind the scopes
    read = store._read

    async def counted(task_id: str) -> object:
        reads.append(task_id)
        return await read(task_id)
    monkeypatch.setattr(store, "_read", counted)
    yield reads


def test_a_tab_task_is_kept_by_its_tab_s_node_and_driven_through_another(
        fleet: Fleet, site: TestSite, nats_access: NatsAccess, fleet_reads: list[str]) -> None:
    s1, s2 = sessions(2)
    here, there = fleet.nodes
    with api(fleet.bases[1], session=s1) as owner, api(fleet.bases[1], session=s2) as other, \
            api(fleet.bases[0], session=s1) as owner_on_a:
        tab = open_tab(owner, site.url("/clicks"), here)
        task = create(owner, [tab], "Hit it")  # through B, on A's tab
        assert task["scope"] == "tab"
        assert here.tasks.store.keeps(task["id"]) and not there.tasks.store.keeps(task["id"])
        assert _in_the_bucket(nats_access, fleet.name, [f"task.{task['id']}", f"tasktab.{tab}"]) == []
        beat = answer(owner.post(f"/api/tasks/{task['id']}/heartbeat"))["task"]
        assert beat["state"] == "owner"
        said = answer(owner.post(f"/api/tasks/{task['id']}/checkpoint", json={"summary": "about to hit"}))["task"]
        assert said["checkpoint"]["summary"] == "about to hit"
        kept = here.io.run(here.tasks.store.get(task["id"]), timeout=5)
        assert kept is not None and kept.checkpoint is not None and kept.checkpoint["summary"] == "about to hit"
        assert (hit(other, tab, 409)["code"], site.count(HIT)) == ("task_leased", 0)  # the lease A holds
        assert hit(owner, tab)["status"] == "ok" and site.wait_for_count(HIT, 1) == 1
        until(lambda: [s["action"] for s in answer(owner.get(f"/api/tasks/{task['id']}"))["task"]["checkpoint"][
            "steps"]] == ["click"], 10, "the call through B in the checkpoint A keeps")
        assert hit(owner_on_a, tab)["status"] == "ok" and site.wait_for_count(HIT, 2) == 2
        answer(owner_on_a.post(f"/api/tasks/{task['id']}/heartbeat"))
        answer(owner_on_a.post(f"/api/tasks/{task['id']}/checkpoint", json={"summary": "hit twice"}))
        assert answer(owner.get(f"/api/tasks/{task['id']}"))["task"]["checkpoint"]["summary"] == "hit twice"
        assert [t for t in fleet_reads if t == task["id"]] == []  # its hot path on A: A's memory alone
        assert _in_the_bucket(nats_access, fleet.name, [f"task.{task['id']}", f"tasktab.{tab}"]) == []


def test_another_session_or_task_cannot_lease_a_tab_task(fleet: Fleet, site: TestSite) -> None:
    s1, s2 = sessions(2)
    with api(fleet.bases[1], session=s1) as owner, api(fleet.bases[1], session=s2) as other:
        tab, second = (open_tab(owner, site.url("/clicks"), fleet.nodes[0]) for _ in range(2))
        task = create(owner, [tab], "Mine")["id"]
        for body in ({"goal": "Same tab", "tabs": [tab]}, {"goal": "Same tab", "tabs": [tab], "scope": "browser"}):
            refused(other.post("/api/tasks", json=body), "task_conflict")
        refused(owner.post("/api/tasks", json={"goal": "Two tabs", "tabs": [tab, second]}), "invalid_parameter")
        refused(other.post(f"/api/tasks/{task}/takeover", json={}), "task_leased")
        refused(other.post(f"/api/tasks/{task}/checkpoint", json={"summary": "not mine"}), "task_leased")
        assert answer(other.get(f"/api/tasks/{task}"))["task"]["state"] == "follower"


def test_a_navigation_to_another_origin_through_another_node_ends_the_tab_task_expired(
        fleet: Fleet, site: TestSite, other_site: TestSite) -> None:
    (s1,) = sessions(1)
    with api(fleet.bases[1], session=s1) as owner:
        tab = open_tab(owner, site.url("/text"), fleet.nodes[0])
        task = create(owner, [tab], "Stay")["id"]
        went = answer(owner.post("/api/act", json={"command": {"action": "navigate", "tabId": tab,
                                                               "url": other_site.url("/clicks")}}))
        assert went["status"] == "ok", went
        until(lambda: answer(owner.get(f"/api/tasks/{task}"))["task"]["status"] == "expired", 5,
              "the navigation ending the task on its node")
        refused(owner.post(f"/api/tasks/{task}/checkpoint", json={"summary": "elsewhere"}), "task_expired")
        assert answer(owner.get(f"/api/tasks/{task}"))["task"]["checkpoint"]["summary"] == ""


def test_a_tab_task_ends_expired_when_its_tab_closes(fleet: Fleet, site: TestSite) -> None:
    (s1,) = sessions(1)
    with api(fleet.bases[1], session=s1) as owner:
        tab = open_tab(owner, site.url("/clicks"), fleet.nodes[0])
        task = create(owner, [tab], "Until it closes")["id"]
        assert answer(owner.post("/api/tabs", json={"op": "close", "tabId": tab}))["status"] == "ok"
        until(lambda: answer(owner.get(f"/api/tasks/{task}"))["task"]["status"] == "expired", 5,
              "the tab's closing ending its task")
        assert answer(owner.get(f"/api/tasks/{task}"))["task"]["checkpoint"]["events"][-1]["kind"] == "expired"


def test_a_tab_task_ends_expired_with_its_node(fleet: Fleet, site: TestSite, nats_access: NatsAccess) -> None:
    (s1,) = sessions(1)
    third = run_node(ChromiumBrowser(), nats_access.node_config(fleet=fleet.name, tasks=TaskConfig(LEASE),
                                                                step_timeout=10.0),
                     agent_policies=dict(fleet.nodes[0].agent_policies))
    stopped = False
    try:
        until(lambda: sees(fleet.nodes[1], third.config.name), 10, "the third node in the fleet")
        with api(fleet.bases[1], session=s1) as owner:
            tab = open_tab(owner, site.url("/clicks"), third, session=f"third-{s1}")
            task = create(owner, [tab], "On a node that leaves")["id"]
            assert third.tasks.store.keeps(task)
            third.stop()
            stopped = True
            until(lambda: _expired(owner, task), 15, "the task ending with its node")
            refused(owner.post(f"/api/tasks/{task}/heartbeat"), "task_expired")
    finally:
        if not stopped:
            third.stop()


def _expired(owner: httpx.Client, task: str) -> bool:
    seen = answer(owner.get(f"/api/tasks/{task}"))["task"]
    return bool(seen["status"] == "expired" and seen["state"] == "expired")
