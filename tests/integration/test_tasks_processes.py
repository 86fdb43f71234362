"""A task's lease outlives no owner (issue 17): the owner is a client process of its own, killed with SIGKILL.

Node A is a ``kitsune serve`` with ``tasks: {lease_ttl: 3}``; node B an in-process node of the same fleet on
the same nats-server, served over HTTP. The owner process creates a task on A, writes once and heartbeats;
while it lives its lease holds, and once it is killed a takeover without force is refused until the lease
runs out, then succeeds through B, and the new owner's write goes through once (counted by the site).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from bridge.wiring import run_node
from driver import ChromiumBrowser
from kitsune.config import load_config
from tests.integration.fleet_nodes import until
from tests.integration.serving import TOKENS, Served, app_over, serve
from tests.nats_access import NatsAccess
from tests.site import TestSite

LEASE = 3
HIT = "POST /clicks/hit"
OWNER = """
import sys, time, httpx
base, token, session, tab = sys.argv[1:]
with httpx.Client(base_url=base, timeout=30, headers={"Authorization": "Bearer " + token,
                                                      "X-Kitsune-Session": session}) as client:
    created = client.post("/api/tasks", json={"goal": "Hit the button once", "tabs": [int(tab)]})
    task = created.json()["task"]["id"]
    print(task, flush=True)
    hit = client.post("/api/act", json={"command": {"action": "click", "tabId": int(tab), "selector": "#hit"}})
    print(hit.json()["status"], flush=True)
    while not client.get(f"/api/tasks/{task}").json()["task"]["checkpoint"]["steps"]:  # heard from, after its end
        time.sleep(0.05)
    while True:
        client.post(f"/api/tasks/{task}/heartbeat").raise_for_status()
        time.sleep(0.2)
"""
"""The owner: creates the task, writes once, reads the task until it shows the write's end (which acknowledges
the answer), then heartbeats until it is killed."""


@dataclass(frozen=True)
class Pair:
    """Node A (a process) and node B (in this one), of one fleet."""

    a: Served
    b: str


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess) -> Iterator[Pair]:
    directory = tmp_path_factory.mktemp("leases")
    a = serve(directory, nats_access, {"caps": ["core", "automation"], "tasks": {"lease_ttl": LEASE}})
    try:
        b = run_node(ChromiumBrowser(), nats_access.node_config(fleet=directory.name, step_timeout=10.0))
        try:
            config = load_config(None, {"KITSUNE_AGENTS": ",".join(f"{n}={t}" for n, t in TOKENS.items()),
                                        "KITSUNE_CAPS": "core,automation"})
            with app_over(b, config) as base:
                until(lambda: len(b.member.registry.alive()) == 2, 10, "node B seeing node A")
                yield Pair(a, base)
        finally:
            b.stop()
    finally:
        assert a.stop() == 0


def _session(base: str, name: str) -> httpx.Client:
    return httpx.Client(base_url=base, timeout=60, headers={"Authorization": f"Bearer {TOKENS['alice']}",
                                                            "X-Kitsune-Session": name})


def _owner(pair: Pair, tab: int) -> tuple[subprocess.Popen[str], str]:
    """The owner process, once it created its task and wrote; the task's id."""
    process = subprocess.Popen([sys.executable, "-c", OWNER, pair.a.base, TOKENS["alice"], "owner-proc", str(tab)],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    task, wrote = process.stdout.readline().strip(), process.stdout.readline().strip()
    assert task.startswith("t-") and wrote == "ok", (task, wrote)
    return process, task


def test_a_lease_expires_when_its_owner_s_process_is_killed_and_an_explicit_takeover_then_succeeds(
        pair: Pair, site: TestSite) -> None:
    with pair.a.client() as alice:
        opened = alice.post("/api/tabs", json={"op": "open", "url": site.url("/clicks"),
                                               "node": alice.get("/api/fleet").json()["node"]}).json()
        tab = opened["tabId"]
    process, task = _owner(pair, tab)
    try:
        assert site.wait_for_count(HIT, 1) == 1
        with _session(pair.b, "heir") as heir:
            watched = time.monotonic()
            while time.monotonic() - watched < LEASE * 1.5:  # past a lease: the heartbeats keep it
                view = heir.get(f"/api/tasks/{task}").json()["task"]
                assert (view["state"], view["lease_ttl"]) == ("follower", LEASE), view
            os.kill(process.pid, signal.SIGKILL)
            assert process.wait(10) == -signal.SIGKILL
            lease_ends = heir.get(f"/api/tasks/{task}").json()["task"]["lease_expires"]
            asked = time.time()
            early = heir.post(f"/api/tasks/{task}/takeover", json={})
            assert asked < lease_ends, "the takeover was not asked before the lease ended"
            assert (early.status_code, early.json()["code"]) == (409, "task_leased"), early.text
            until(lambda: heir.get(f"/api/tasks/{task}").json()["task"]["state"] == "expired", LEASE * 3,
                  "the dead owner's lease expiring")
            taken = heir.post(f"/api/tasks/{task}/takeover", json={})
            assert taken.status_code == 200 and taken.json()["task"]["state"] == "owner", taken.text
            assert taken.json()["in_flight"] == [], taken.text  # its write was answered: the owner read the task after
            with _session(pair.a.base, "owner-proc") as ghost:  # the dead owner's session, were it to come back
                late = ghost.post("/api/act", json={"command": {"action": "click", "tabId": tab, "selector": "#hit"}})
                assert late.json()["code"] == "task_leased", late.text
            wrote = heir.post("/api/act", json={"command": {"action": "click", "tabId": tab, "selector": "#hit"}})
            assert wrote.status_code == 200 and wrote.json()["status"] == "ok", wrote.text
            assert site.wait_for_count(HIT, 2) == 2
    finally:
        process.kill()
        process.wait(10)
    assert site.counts() == {HIT: 2}
    audited = [(e["agent"], e["op"], e["taskId"]) for e in pair.a.audit() if e["kind"] == "task"]
    assert ("alice", "created", task) in audited
