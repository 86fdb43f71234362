"""Two nodes on a real 3-server NATS cluster act as one fleet (issue 14, points 2, 3, 5 and 6).

Every node lists every tab of the fleet, every time; a call on one node runs on a tab of the
other; ownership, takeovers and parallel claims hold through every node, decided by the tab's
node; claims raced from both nodes have one holder at a time; a node that stops hands its tabs
back at once; a newTab goes to its session's node, a named node, or the least loaded one.
Writes are counted by the test site, server side.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge.node import Node
from kitsune.fleet import FLEET
from tests.integration.calls import batch, parallel
from tests.integration.fleet_nodes import apps_over, sees, start_node, two_nodes, until
from tests.integration.serving import serve
from tests.nats_cluster import ClusterAccess
from tests.nodes import open_user_tab
from tests.site import TestSite

TOKENS = {"alice": "alice-fleet-token-0123456789", "bob": "bob-fleet-token-0123456789ab"}
HIT = "POST /clicks/hit"
CLICK = {"action": "click", "selector": "#hit"}


@pytest.fixture(scope="module")
def fleet(nats_cluster: ClusterAccess) -> Iterator[tuple[Node, Node]]:
    yield from two_nodes(nats_cluster, ("node-a", "node-b"), max_tabs=64)


@pytest.fixture(scope="module")
def apis(fleet: tuple[Node, Node]) -> Iterator[tuple[str, str]]:
    with apps_over(fleet, TOKENS) as bases:
        yield bases


def client(base: str, agent: str) -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKENS[agent]}"}, timeout=60)


def open_tab(api: httpx.Client, url: str, **extra: Any) -> int:
    answer = api.post("/api/tabs", json={"op": "open", "url": url, **extra})
    assert answer.status_code == 200 and answer.json()["status"] == "ok", answer.text
    tab: int = answer.json()["tabId"]
    return tab


def test_every_node_lists_every_tab_of_the_fleet_every_time(fleet: tuple[Node, Node], site: TestSite) -> None:
    first, second = fleet
    opened = {open_user_tab(first, site.url("/clicks")): "node-a", open_user_tab(second, site.url("/clicks")): "node-b",
              open_user_tab(second, site.url("/clicks")): "node-b"}
    for node in [first, second] * 5:
        listed = {tab["tabId"]: tab["node"] for tab in node.io.run(node.describe_tabs(), timeout=30)}
        assert {tab: listed.get(tab) for tab in opened} == opened


def test_a_call_on_one_node_runs_on_the_tab_another_node_just_opened(
        apis: tuple[str, str], site: TestSite) -> None:
    with client(apis[0], "alice") as on_a, client(apis[1], "alice") as on_b:
        for _ in range(6):
            tab = open_tab(on_b, site.url("/clicks"), node="node-b")
            answer = on_a.post("/api/batch", json={"tabId": tab, "commands": [CLICK]})
            assert answer.status_code == 200 and answer.json()["status"] == "ok", answer.text
    assert site.wait_for_count(HIT, 6) == 6


def test_an_agents_current_tab_is_the_same_on_every_node(
        apis: tuple[str, str], fleet: tuple[Node, Node], site: TestSite) -> None:
    with client(apis[0], "bob") as bob_a, client(apis[1], "bob") as bob_b:
        tab = open_tab(bob_a, site.url("/clicks?mark=current"))  # opening makes it bob's current tab
        until(lambda: fleet[1].member.current("bob") == tab, 5, "node-b learning it")  # a KV watch away
        assert bob_b.get("/api/tabs").json()["current"] == tab
        answer = bob_b.post("/api/batch", json={"commands": [{"action": "url"}]}).json()
        assert answer["status"] == "ok" and "mark=current" in answer["results"][0]["url"], answer
        assert bob_b.post("/api/tabs", json={"op": "close", "tabId": tab}).json()["status"] == "ok"
        until(lambda: fleet[0].member.current("bob") is None, 5, "node-a learning it closed")


def test_ownership_and_takeover_hold_through_every_node(apis: tuple[str, str], site: TestSite) -> None:
    with client(apis[0], "alice") as alice_a, client(apis[1], "alice") as alice_b, \
            client(apis[0], "bob") as bob_a:
        tab = open_tab(alice_b, site.url("/clicks"), node="node-b")
        listed = {t["tabId"]: t for t in bob_a.get("/api/tabs").json()["tabs"]}
        assert listed[tab]["owner"] == "agent" and listed[tab]["node"] == "node-b"
        refused = bob_a.post("/api/batch", json={"tabId": tab, "commands": [CLICK]}).json()
        assert refused["results"][0]["code"] == "tab_owned", refused
        assert alice_a.post("/api/batch", json={"tabId": tab, "commands": [CLICK]}).json()["status"] == "ok"
        taken = bob_a.post("/api/tabs", json={"op": "takeover", "tabId": tab})
        assert taken.status_code == 200 and taken.json()["previous"] == "agent", taken.text
        again = alice_b.post("/api/batch", json={"tabId": tab, "commands": [CLICK]}).json()
        assert again["results"][0]["code"] == "tab_owned", again  # refused by the tab's own node now
        assert bob_a.post("/api/batch", json={"tabId": tab, "commands": [CLICK]}).json()["status"] == "ok"
        # opened through node-a, placed with her default session on node-b: node-a keeps no owner of its own
        placed = open_tab(alice_a, site.url("/clicks"))
        assert alice_a.post("/api/batch", json={"tabId": placed, "commands": [CLICK]}).json()["status"] == "ok"
        with client(apis[1], "bob") as bob_b:
            assert bob_b.post("/api/tabs", json={"op": "takeover", "tabId": placed}).status_code == 200
        assert bob_a.post("/api/batch", json={"tabId": placed, "commands": [CLICK]}).json()["status"] == "ok"
    assert site.wait_for_count(HIT, 4) == 4
    assert site.count(HIT) == 4


def test_a_parallels_claim_on_another_nodes_tab_refuses_writes_from_every_node(
        fleet: tuple[Node, Node], site: TestSite) -> None:
    first, second = fleet
    tab = open_user_tab(second, site.url("/clicks"))
    holding = {"action": "js", "code": "await new Promise(r => setTimeout(r, 4000)); return 1"}
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        running = pool.submit(parallel, first, [[{**CLICK, "tabId": tab}, {**holding, "tabId": tab}]])
        registry = second.member.registry
        assert registry is not None
        until(lambda: (entry := registry.tabs.get(tab)) is not None and entry.claim is not None, 10,
              "the claim on record")
        for node in (first, second):
            refused = batch(node, [CLICK], tabId=tab)
            assert refused["results"][0]["code"] == "tab_claimed", refused
        assert running.result(timeout=60)["status"] == "ok"
    assert site.count(HIT) == 1  # the parallel's click alone
    until(lambda: (entry := registry.tabs.get(tab)) is not None and entry.claim is None, 10, "the claim released")
    assert batch(second, [CLICK], tabId=tab)["status"] == "ok"


def test_claims_raced_from_both_nodes_have_one_holder_at_a_time(fleet: tuple[Node, Node], site: TestSite) -> None:
    first, second = fleet
    tabs = [open_user_tab(second, site.url("/clicks")), open_user_tab(first, site.url("/clicks"))]
    calls = itertools.count(10_000_000)
    for round_ in range(15):
        tab = tabs[round_ % 2]
        contenders = [(node, next(calls)) for node in (first, second, first, second, first, second)]
        start = threading.Barrier(len(contenders))

        def contend(node: Node, call: int, tab: int = tab, start: threading.Barrier = start) -> bool:
            start.wait()
            return node.claims.claim(call, "0.0", tab) is None

        with concurrent.futures.ThreadPoolExecutor(len(contenders)) as pool:
            won = list(pool.map(lambda c: contend(*c), contenders))
        assert won.count(True) == 1, won
        winner, call = contenders[won.index(True)]
        holder = (second if tab == tabs[0] else first).member.table.held()[tab]
        assert holder.call == call
        winner.claims.release(call)
        assert tab not in (second if tab == tabs[0] else first).member.table.held()


def test_a_node_that_stops_hands_its_tabs_back_at_once(
        nats_cluster: ClusterAccess, fleet: tuple[Node, Node], site: TestSite) -> None:
    first, _ = fleet
    leaving = start_node(nats_cluster, "node-c")
    try:
        until(lambda: sees(first, "node-c"), 10, "node-c joining")
        tab = open_user_tab(leaving, site.url("/clicks"))
        assert tab in first.io.run(first.open_tab_ids(frozenset({tab})), timeout=30)
    finally:
        leaving.stop()
    # well before a heartbeat could be missed (8 s): its stop deleted its heartbeat and its tabs
    until(lambda: tab not in first.io.run(first.open_tab_ids(), timeout=30), 3, "its tab leaving the list")
    refused = batch(first, [CLICK], tabId=tab)
    assert refused["results"][0]["code"] == "tab_closed", refused
    assert site.count(HIT) == 0


def test_new_tabs_go_to_the_named_node_their_sessions_node_or_the_least_loaded(
        apis: tuple[str, str], fleet: tuple[Node, Node], site: TestSite) -> None:
    first, second = fleet
    with client(apis[0], "alice") as alice_a, client(apis[1], "bob") as bob_b:
        listed = alice_a.get("/api/fleet").json()
        assert listed["node"] == "node-a" and {"node-a", "node-b"} <= {n["name"] for n in listed["nodes"]}
        named = open_tab(alice_a, site.url("/clicks"), node="node-b")
        assert named in second.tabs.ids()
        unknown = alice_a.post("/api/tabs", json={"op": "open", "url": site.url("/clicks"), "node": "node-z"})
        assert unknown.json()["code"] == "unknown_node", unknown.text
        elsewhere = alice_a.post("/api/tabs", json={"op": "open", "url": site.url("/clicks"), "node": "node-a"})
        assert elsewhere.json()["code"] == "invalid_parameter", elsewhere.text  # her default session is on node-b
        shop = open_tab(bob_b, site.url("/clicks"), session="shop", node="node-a")
        assert shop in first.tabs.ids()
        for _ in range(2):  # from either node, the session's tabs stay with its browser context
            assert open_tab(bob_b, site.url("/clicks"), session="shop") in first.tabs.ids()
        counts = {node.config.name: len(node.tabs.ids()) for node in fleet}
        fresh = open_tab(alice_a, site.url("/clicks"), session="fresh")
        emptier = min(counts, key=lambda name: (counts[name], name != "node-a"))
        assert fresh in (first if emptier == "node-a" else second).tabs.ids()



def test_a_killed_node_leaves_the_fleet_its_tabs_close_and_its_claims_end(
        nats_cluster: ClusterAccess, fleet: tuple[Node, Node], apis: tuple[str, str], site: TestSite,
        tmp_path: Path) -> None:
    first, second = fleet
    doomed = serve(tmp_path, nats_cluster, {"fleet": FLEET, "node_name": "node-k", "caps": ["core", "automation"]})
    try:
        until(lambda: sees(first, "node-k"), 10, "node-k joining")
        with doomed.client("alice") as alice_k:
            its_tab = open_tab(alice_k, site.url("/clicks"), session="on-k", node="node-k")
            mine = open_tab(alice_k, site.url("/clicks"), session="on-a", node="node-a")  # alice's, on node-a
            holding = {"action": "js", "tabId": mine, "code": "await new Promise(r => setTimeout(r, 60000))"}
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                pool.submit(alice_k.post, "/api/parallel", json={"sequences": [[{**CLICK, "tabId": mine}, holding]]})
                until(lambda: mine in first.member.table.held(), 20, "node-k's parallel claiming node-a's tab")
                assert site.wait_for_count(HIT, 1) == 1  # its click went; its script holds the claim
                doomed.process.kill()  # SIGKILL: no clean stop, no hand-back
                doomed.process.wait(timeout=30)
                started = time.monotonic()
                until(lambda: its_tab not in first.io.run(first.open_tab_ids(), timeout=30), 15, "node-k's tab leaving")
                until(lambda: mine not in first.member.table.held(), 15, "node-k's claim ending")
                assert time.monotonic() - started < 15
    finally:
        if doomed.process.poll() is None:
            doomed.process.kill()
    for node in (first, second):
        refused = batch(node, [CLICK], tabId=its_tab)
        assert refused["status"] == "failed" and refused["results"][0]["code"] == "tab_closed", refused
    with client(apis[0], "alice") as alice_a:
        answer = alice_a.post("/api/batch", json={"tabId": its_tab, "commands": [CLICK]})
        assert answer.json()["code"] == "tab_closed", answer.text  # refused whole, nothing sent
    assert batch(first, [CLICK], tabId=mine)["status"] == "ok"  # the claim ended with its node
    assert site.wait_for_count(HIT, 2) == 2  # the parallel's click, then this one: none to the dead node's tab


def test_a_node_whose_loop_stalls_past_the_loss_threshold_stays_in_the_fleet_and_serves(
        fleet: tuple[Node, Node], site: TestSite) -> None:
    """Node A's event loop held for 12 s (more than the 8 s after which a silent node is lost): its
    heartbeat, sent by a thread of its own, goes on, so node B never judges A lost and closes none of
    its tabs; once the loop is free A's tab works through B; A's watchdog logged and measured the stall."""
    first, second = fleet
    assert second.member.registry is not None
    tab = open_user_tab(first, site.url("/clicks"))
    until(lambda: second.member.node_of(tab) == "node-a", 10, "node-b learning node-a's tab")
    stalls = first.loop_watch.stalls
    first.io.loop.call_soon_threadsafe(time.sleep, 12.0)  # a page (or anything) holding node-a's loop
    absent = []
    ends = time.monotonic() + 12.5
    while time.monotonic() < ends:
        if "node-a" not in second.member.registry.alive() or second.member.node_of(tab) != "node-a":
            absent.append(round(ends - time.monotonic(), 1))
        time.sleep(0.1)
    assert absent == [], "node-b judged node-a lost while its loop stalled"
    until(lambda: first.loop_watch.stalls > stalls, 5, "node-a's watchdog seeing the stall")
    buckets = {sample.labels["le"]: sample.value for family in first.metrics.registry.collect()
               for sample in family.samples if sample.name == "kitsune_event_loop_lag_seconds_bucket"}
    assert buckets["+Inf"] - buckets["10.0"] >= 1  # the stall, measured (12 s); one collect: lags go on landing
    answer = batch(second, [CLICK], tabId=tab)
    assert answer["status"] == "ok", answer  # not tab_closed: the fleet still agrees where it is
    assert site.wait_for_count(HIT, 1) == 1
