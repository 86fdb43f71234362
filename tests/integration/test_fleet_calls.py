"""A call on another node's tabs runs on that node, whole (issue 14: a remote step costs what a local one does).

Two nodes on a real 3-server NATS cluster (and, where a node dies, a third as a ``kitsune serve``
process): a call through node-f1 on node-f2's tabs is sent to node-f2 once and runs there, its steps
reaching the tab through its actor's mailbox (node-f1 sends no tab request); its checkpoint is
node-f2's, resumed through either node; its events are relayed to a streamed caller. A node with
other rules for the agent declines it and the call runs where it came in. When the tab's node dies
mid-call the answer is ``fleet_unavailable`` with the steps as their events recorded them; when the
node that sent it dies, the call sends no more steps and its claims end. Writes are counted by the
test site, server side.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from bridge.node import Node
from kitsune.fleet import FLEET
from tests.integration.fleet_nodes import apps_over, sees, two_nodes, until
from tests.integration.serving import Served, serve
from tests.nats_cluster import ClusterAccess
from tests.site import TestSite

TOKENS = {"alice": "alice-token-0123456789abcdef", "bob": "bob-token-0123456789abcdef0"}
"""The agents of ``tests.integration.serving``: a ``kitsune serve`` node has the same."""
HIT = "POST /clicks/hit"
CLICK = {"action": "click", "selector": "#hit"}
TITLE = {"action": "title"}
ADD_LATE = "document.body.append(Object.assign(document.createElement('p'), {id: 'late', textContent: 'late'}))"


@pytest.fixture(scope="module")
def nodes(nats_cluster: ClusterAccess) -> Iterator[tuple[Node, Node]]:
    yield from two_nodes(nats_cluster, ("node-f1", "node-f2"))


@pytest.fixture(scope="module")
def apis(nodes: tuple[Node, Node]) -> Iterator[tuple[str, str]]:
    with apps_over(nodes, TOKENS) as bases:
        yield bases


def _client(base: str, agent: str = "alice") -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKENS[agent]}"}, timeout=90)


def _open(api: httpx.Client, site: TestSite, node: str, **extra: Any) -> int:
    answer = api.post("/api/tabs", json={"op": "open", "url": site.url("/clicks"), "node": node, **extra})
    assert answer.status_code == 200 and answer.json()["status"] == "ok", answer.text
    tab: int = answer.json()["tabId"]
    return tab


def _asked(node: Node, subject: str) -> float:
    """Requests ``node`` sent to other nodes on ``subject`` (``tab``: a step; ``call``: a call sent whole)."""
    total = 0.0
    for outcome in ("ok", "no_responders", "bus_timeout", "bus_disconnected", "bus_error"):
        total += node.metrics.registry.get_sample_value(
            "kitsune_cross_node_requests_total", {"subject": subject, "outcome": outcome}) or 0.0
    return total


def _calls_run(node: Node) -> float:
    return sum(node.metrics.registry.get_sample_value("kitsune_calls_total", {"kind": kind, "status": status}) or 0.0
               for kind in ("batch", "parallel") for status in ("ok", "failed", "unknown", "held", "skipped"))


def test_a_batch_on_another_nodes_tab_runs_there_whole_no_step_crossing_nats(
        nodes: tuple[Node, Node], apis: tuple[str, str], site: TestSite) -> None:
    first, second = nodes
    with _client(apis[0]) as on_f1, _client(apis[1]) as on_f2:
        tab = _open(on_f2, site, "node-f2")
        steps, sent, ran = _asked(first, "tab"), _asked(first, "call"), _calls_run(second)
        answer = on_f1.post("/api/batch", json={"tabId": tab, "commands": [CLICK] * 5 + [TITLE]})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["status"] == "ok" and [p["tabId"] for p in body["progress"]] == [tab] * 6, body
        assert body["results"][5]["title"] == "Clicks"
    assert site.wait_for_count(HIT, 5) == 5
    assert _asked(first, "tab") == steps  # not one step went over NATS
    assert _asked(first, "call") > sent  # the call did, once (and its ping)
    assert _calls_run(second) == ran + 1  # it ran on the tab's node


def test_a_parallel_on_another_nodes_tabs_runs_there_and_claims_them_there(
        nodes: tuple[Node, Node], apis: tuple[str, str], site: TestSite) -> None:
    first, second = nodes
    with _client(apis[0]) as on_f1, _client(apis[1]) as on_f2:
        tabs = [_open(on_f2, site, "node-f2") for _ in range(2)]
        steps = _asked(first, "tab")
        answer = on_f1.post("/api/parallel", json={"sequences": [[{**CLICK, "tabId": t}] * 3 for t in tabs]})
        assert answer.status_code == 200 and answer.json()["status"] == "ok", answer.text
    assert site.wait_for_count(HIT, 6) == 6
    assert _asked(first, "tab") == steps
    assert not any(tab in second.member.table.held() for tab in tabs)  # released at its end


def test_a_stopped_call_keeps_its_checkpoint_on_the_tabs_node_and_resumes_through_either_node(
        nodes: tuple[Node, Node], apis: tuple[str, str], site: TestSite) -> None:
    first, second = nodes
    with _client(apis[0]) as on_f1, _client(apis[1]) as on_f2:
        tab = _open(on_f2, site, "node-f2")
        stopped = on_f1.post("/api/batch", json={"tabId": tab, "commands": [
            CLICK, {"action": "waitFor", "selector": "#late", "timeout": 1}]}).json()
        assert [p["status"] for p in stopped["progress"]] == ["ok", "failed"], stopped
        call, token = stopped["call"], stopped["resume_token"]
        assert second.resumes.holds(call) and not first.resumes.holds(call)

        again = on_f1.post("/api/resume", json={"call": call, "resume_token": token})  # fails again: a new token
        assert again.status_code == 200 and again.json()["resume_token"] != token, again.text
        for api in (on_f1, on_f2):
            refused = api.post("/api/resume", json={"call": call, "resume_token": token})
            assert (refused.status_code, refused.json()["code"]) == (403, "resume_token_invalid"), refused.text
        added = on_f1.post("/api/act", json={"command": {"action": "js", "tabId": tab, "code": ADD_LATE}}).json()
        assert added["status"] == "ok", added
        done = on_f2.post("/api/resume", json={"call": call, "resume_token": again.json()["resume_token"]})
        assert done.status_code == 200 and done.json()["status"] == "ok", done.text
        assert [(p["status"], p.get("resumed")) for p in done.json()["progress"]] == [("ok", "kept"), ("ok", None)]
    assert site.count(HIT) == 1  # the click ran once, in the first run


def test_a_streamed_call_hears_the_steps_the_tabs_node_runs_as_they_end(
        nodes: tuple[Node, Node], apis: tuple[str, str], site: TestSite) -> None:
    first = nodes[0]
    with _client(apis[0]) as on_f1, _client(apis[1]) as on_f2:
        tab = _open(on_f2, site, "node-f2")
        steps = _asked(first, "tab")
        streamed = on_f1.post("/api/batch", json={"tabId": tab, "commands": [CLICK, TITLE, CLICK]},
                              headers={"Accept": "application/x-ndjson"})
    lines = [orjson.loads(line) for line in streamed.text.splitlines()]
    progress = [line["progress"] for line in lines if "progress" in line]
    assert progress[0]["steps"] == 3 and isinstance(progress[0]["call"], int), lines
    assert progress[1:] == [{"path": str(i), "status": "ok"} for i in range(3)], lines
    assert lines[-1]["httpStatus"] == 200 and lines[-1]["result"]["status"] == "ok", lines
    assert _asked(first, "tab") == steps
    assert site.wait_for_count(HIT, 2) == 2


@contextmanager
def _alices_rules(*on: Node, **changed: Any) -> Iterator[None]:
    """Alice's policy on the nodes ``on`` is the node's with ``changed``, until the block ends."""
    for node in on:
        node.agent_policies["alice"] = dataclasses.replace(node.policy_of("alice"), **changed)
    try:
        yield
    finally:
        for node in on:
            del node.agent_policies["alice"]


def test_a_node_with_other_rules_for_the_agent_declines_and_the_call_runs_where_it_came_in(
        nodes: tuple[Node, Node], apis: tuple[str, str], site: TestSite) -> None:
    first, second = nodes
    with _client(apis[0]) as on_f1, _client(apis[1]) as on_f2:
        tab = _open(on_f2, site, "node-f2")
        with _alices_rules(second, max_checkpoints=7):
            steps, ran = _asked(first, "tab"), _calls_run(second)
            answer = on_f1.post("/api/batch", json={"tabId": tab, "commands": [CLICK, CLICK]})
            assert answer.status_code == 200 and answer.json()["status"] == "ok", answer.text
    assert _asked(first, "tab") == steps + 2  # each step sent to the tab's node, under node-f1's rules
    assert _calls_run(second) == ran
    assert site.wait_for_count(HIT, 2) == 2


def test_an_agent_whose_writes_wait_for_approval_runs_its_calls_where_it_came_in_and_confirms_there(
        nodes: tuple[Node, Node], apis: tuple[str, str], site: TestSite) -> None:
    first, second = nodes
    with _client(apis[0]) as on_f1, _client(apis[1]) as on_f2:
        tab = _open(on_f2, site, "node-f2")
        with _alices_rules(first, second, ask_before_act=True):  # the same rules on both
            ran = _calls_run(second)
            held = on_f1.post("/api/batch", json={"tabId": tab, "commands": [CLICK]}).json()
            assert [p["status"] for p in held["progress"]] == ["held"], held
            confirmed = on_f1.post("/api/act", json={"command": {**CLICK, "tabId": tab},  # the hold is node-f1's
                                                     "confirm_token": held["results"][0]["state"]["confirm_token"]})
            assert confirmed.status_code == 200 and confirmed.json()["status"] == "ok", confirmed.text
            applied = on_f1.post("/api/resume", json={"call": held["call"], "resume_token": held["resume_token"],
                                                      "observed": {"0": "applied"}})
            assert applied.status_code == 200 and applied.json()["status"] == "ok", applied.text
    assert _calls_run(second) == ran
    assert site.wait_for_count(HIT, 1) == 1


def test_a_call_on_tabs_of_two_nodes_runs_where_it_came_in_each_step_to_its_tab(
        nodes: tuple[Node, Node], apis: tuple[str, str], site: TestSite) -> None:
    first = nodes[0]
    with _client(apis[0]) as on_f1, _client(apis[1]) as on_f2:
        theirs, mine = _open(on_f2, site, "node-f2"), _open(on_f1, site, "node-f1", session="on-f1")
        steps = _asked(first, "tab")
        answer = on_f1.post("/api/batch", json={"commands": [{**CLICK, "tabId": theirs}, {**CLICK, "tabId": mine}]})
        assert answer.status_code == 200 and answer.json()["status"] == "ok", answer.text
    assert _asked(first, "tab") == steps + 1
    assert site.wait_for_count(HIT, 2) == 2


HOLD = {"action": "js", "code": "await new Promise(r => setTimeout(r, 60000))"}


@contextmanager
def _doomed(directory: Path, cluster: ClusterAccess, seen_by: Node, name: str) -> Iterator[Served]:
    """A ``kitsune serve`` node ``name`` of the fleet, once ``seen_by`` sees it; killed after, if it lives."""
    doomed = serve(directory, cluster, {"fleet": FLEET, "node_name": name, "caps": ["core", "automation"]})
    try:
        until(lambda: sees(seen_by, name), 10, f"{name} joining")
        yield doomed
    finally:
        if doomed.process.poll() is None:
            doomed.process.kill()


def test_the_tabs_node_dying_mid_call_answers_fleet_unavailable_with_the_steps_its_events_recorded(
        nats_cluster: ClusterAccess, nodes: tuple[Node, Node], apis: tuple[str, str], site: TestSite,
        tmp_path: Path) -> None:
    first = nodes[0]
    with _doomed(tmp_path, nats_cluster, first, "node-f3") as doomed:
        with doomed.client() as on_f3:
            tab = _open(on_f3, site, "node-f3", session="on-f3")
        with _client(apis[0]) as on_f1, concurrent.futures.ThreadPoolExecutor(1) as pool:
            steps = _asked(first, "tab")
            answering = pool.submit(on_f1.post, "/api/batch", json={"tabId": tab, "commands": [CLICK, HOLD]})
            assert site.wait_for_count(HIT, 1) == 1
            time.sleep(0.5)  # the script is sent: its dispatch is on record
            doomed.process.kill()  # SIGKILL: its Chromium, its memory and the call in it are gone
            killed = time.monotonic()
            answer = answering.result(timeout=60)
            assert time.monotonic() - killed < 30
    assert answer.status_code == 503, answer.text
    body = answer.json()
    assert (body["code"], body["retryable"]) == ("fleet_unavailable", False), body
    assert isinstance(body["call"], int) and "resume_token" not in body
    assert [p["status"] for p in body["progress"]] == ["ok", "unknown"], body  # never ok for the lost write
    assert _asked(first, "tab") == steps  # it had gone whole to node-f3
    assert site.count(HIT) == 1


def test_a_call_whose_sending_node_died_sends_no_more_steps_and_its_claims_end(
        nats_cluster: ClusterAccess, nodes: tuple[Node, Node], apis: tuple[str, str], site: TestSite,
        tmp_path: Path) -> None:
    first = nodes[0]
    with _doomed(tmp_path, nats_cluster, first, "node-f4") as doomed:
        with _client(apis[0]) as on_f1:
            tab = _open(on_f1, site, "node-f1", session="on-f1")
        held = {"action": "js", "code": "await new Promise(r => setTimeout(r, 20000))"}
        with doomed.client() as on_f4, concurrent.futures.ThreadPoolExecutor(1) as pool:
            steps = [{**step, "tabId": tab} for step in (CLICK, held, CLICK)]
            pool.submit(on_f4.post, "/api/parallel", json={"sequences": [steps]})
            claim = until(lambda: first.member.table.held().get(tab), 20, "node-f4's call claiming node-f1's tab")
            assert first.forwarding.origin_of(claim.call) == "node-f4"  # it runs on node-f1, sent by node-f4
            assert site.wait_for_count(HIT, 1) == 1
            doomed.process.kill()
            doomed.process.wait(timeout=30)
            killed = time.monotonic()
            until(lambda: tab not in first.member.table.held(), 15, "the claim of node-f4's call ending")
            assert time.monotonic() - killed < 15
            until(lambda: first.forwarding.origin_of(claim.call) is None, 40, "the call ending on node-f1")
    assert site.count(HIT) == 1  # its last click was never sent: nobody was there to hear of it
