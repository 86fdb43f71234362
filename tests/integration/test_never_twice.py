"""A write is sent once, whatever waits on its tab: the attack of issue 11 and its neighbours, against
live nodes, real Chromium and the test site, which counts every write it receives."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge.node import Node
from messages.events import Event, StepStarted
from tests.integration.calls import batch, two_nodes
from tests.integration.serving import Served, open_tab, serve
from tests.nats_access import NatsAccess
from tests.nodes import open_user_tab
from tests.site import TestSite

HIT = "POST /clicks/hit"
CLICK = {"action": "click", "selector": "#hit"}
BUSY = "POST /busy"
SLOW_JS = "await fetch('/busy', {method: 'POST'}); await new Promise(r => setTimeout(r, 3000)); return 1"
"""A write that tells the site it runs (``BUSY`` counted), then keeps its tab busy for 3 s."""


@pytest.fixture
def served(plain: Served) -> Served:
    """The session's plain node (tests/conftest.py)."""
    return plain


def _in_background(work: Any) -> tuple[threading.Thread, list[Any]]:
    answers: list[Any] = []
    thread = threading.Thread(target=lambda: answers.append(work()), daemon=True)
    thread.start()
    return thread, answers


def _wait_for_calls_running(client: httpx.Client, count: int) -> None:
    """Wait until the served node runs ``count`` calls (its kitsune_calls_in_progress gauge)."""
    deadline = time.monotonic() + 30
    while f"kitsune_calls_in_progress {count:.1f}" not in client.get("/metrics").text.splitlines():
        assert time.monotonic() < deadline, f"the node never ran {count} calls at once"
        time.sleep(0.02)


def _started_listener(node: Node, path: str) -> threading.Event:
    """An event set when ``node`` starts a step at ``path``; it stops listening once set."""
    started = threading.Event()

    def listen(event: Event) -> None:
        if type(event) is StepStarted and event.path == path and not started.is_set():
            started.set()
            node.event_listeners.remove(listen)

    node.event_listeners.append(listen)
    return started


def test_another_agents_long_read_does_not_hold_up_the_owners_click_which_is_sent_once(
        served: Served, site: TestSite) -> None:
    with served.client("alice") as alice, served.client("bob") as bob:
        tab = open_tab(alice, site.url("/clicks"))
        reader, read = _in_background(lambda: bob.post("/api/batch", json={
            "commands": [{"action": "waitFor", "selector": "#never", "timeout": 8}], "tabId": tab}).json())
        _wait_for_calls_running(alice, 1)  # bob's read runs (a wait on the tab, 8 s long)
        # Within its own 3 s deadline, far below the read's 8 s: had it waited for the read, it would time out.
        body = alice.post("/api/batch", json={"commands": [CLICK], "tabId": tab, "timeout": 3}).json()
        assert body["status"] == "ok", body
        assert site.wait_for_count(HIT) == 1
        reader.join(timeout=20)
        assert read and read[0]["status"] == "failed" and read[0]["results"][0]["code"] == "timeout"
        time.sleep(0.5)  # not a wait for something to happen: a window in which nothing MORE may be sent
        assert site.count(HIT) == 1


def test_a_write_that_cannot_start_before_its_deadline_is_failed_not_sent_and_never_runs_later(
        served: Served, site: TestSite) -> None:
    with served.client("alice") as alice:
        tab = open_tab(alice, site.url("/clicks"))
        writer, wrote = _in_background(lambda: alice.post("/api/act", json={
            "command": {"action": "js", "tabId": tab, "code": SLOW_JS, "timeout": 20}}).json())
        assert site.wait_for_count(BUSY, timeout=30) == 1  # the tab is busy with a write of alice's own
        body = alice.post("/api/batch", json={"commands": [CLICK], "tabId": tab, "timeout": 1}).json()
        assert body["status"] == "failed", body  # not unknown: the click was never sent
        assert body["progress"][0]["status"] == "failed"
        writer.join(timeout=20)
        assert wrote and wrote[0]["status"] == "ok"
        assert site.count(HIT) == 0
        resumed = alice.post("/api/resume", json={"call": body["call"], "resume_token": body["resume_token"]}).json()
        assert resumed["status"] == "ok", resumed  # a failed step is sent again on resume: once
        assert site.wait_for_count(HIT) == 1
        # Not a wait for something to happen: a window in which nothing MORE may be sent (had the refused
        # click run once the tab was free, it would count here too).
        time.sleep(0.3)
        assert site.count(HIT) == 1


def test_a_write_to_a_tab_closed_earlier_in_the_batch_is_tab_closed(served: Served, site: TestSite) -> None:
    with served.client("alice") as alice:
        tab = open_tab(alice, site.url("/clicks"))
        body = alice.post("/api/batch", json={"commands": [{"action": "closeTab", "tabId": tab},
                                                           {**CLICK, "tabId": tab}]}).json()
        assert body["status"] == "failed"
        assert body["results"][1]["code"] == "tab_closed", body["results"][1]
        direct = alice.post("/api/act", json={"command": {**CLICK, "tabId": tab}})
        assert direct.json()["code"] in ("unknown_tab", "tab_closed")
        assert site.count(HIT) == 0


# --- over NATS: the tab is another node's ---------------------------------------------------------------

@pytest.fixture(scope="module")
def fleet(nats_access: NatsAccess) -> Iterator[tuple[Node, Node]]:
    yield from two_nodes(nats_access, "twice", step_timeout=10.0)


def _over_nats(here: int, tab: int, *commands: dict[str, Any]) -> list[dict[str, Any]]:
    """``commands`` on ``tab``, another node's, after a read of ``here``, a tab of the calling node: a call on
    tabs of two nodes runs where it came in, each step on the other node's tab sent over NATS (a call on one
    other node's tabs alone would be sent there whole)."""
    return [{"action": "title", "tabId": here}, *({**command, "tabId": tab} for command in commands)]


def test_a_read_over_nats_runs_beside_a_write_over_nats(fleet: tuple[Node, Node], site: TestSite) -> None:
    first, second = fleet
    tab, here = open_user_tab(second, site.url("/clicks")), open_user_tab(first, site.url("/text"))
    reading = _started_listener(first, "1")
    reader, read = _in_background(lambda: batch(
        first, _over_nats(here, tab, {"action": "waitFor", "selector": "#never", "timeout": 6})))
    assert reading.wait(30)  # the read is on its way to the tab, where it waits 6 s
    body = batch(first, _over_nats(here, tab, CLICK), timeout=3)
    assert body["status"] == "ok", body
    assert site.wait_for_count(HIT) == 1
    reader.join(timeout=20)
    assert read and read[0]["status"] == "failed"
    assert site.count(HIT) == 1


def test_a_write_over_nats_past_its_deadline_is_not_sent_and_never_runs_later(
        fleet: tuple[Node, Node], site: TestSite) -> None:
    first, second = fleet
    tab, here = open_user_tab(second, site.url("/clicks")), open_user_tab(first, site.url("/text"))
    writer, wrote = _in_background(lambda: batch(second, [{"action": "js", "code": SLOW_JS}], tabId=tab))
    assert site.wait_for_count(BUSY, timeout=30) == 1  # the tab is busy with a write from its own node
    body = batch(first, _over_nats(here, tab, CLICK), timeout=1)
    assert body["status"] == "failed", body
    assert body["progress"][1]["status"] == "failed"  # not unknown: it never reached the page
    writer.join(timeout=20)
    assert wrote and wrote[0]["status"] == "ok"
    # The tab's writes run in order: had the refused click run once the tab was free, it would come first.
    assert batch(second, [CLICK], tabId=tab)["status"] == "ok"
    assert site.wait_for_count(HIT) == 1
    time.sleep(0.3)  # not a wait for something to happen: a window in which nothing MORE may be sent
    assert site.count(HIT) == 1


def test_sigterm_stops_a_node_within_ten_seconds_and_audits_the_write_in_flight_unknown(
        tmp_path: Path, nats_access: NatsAccess, site: TestSite) -> None:
    # SIGTERM drains (bridge.drain): with no time for the calls in flight, they end as interrupted calls end
    running = serve(tmp_path, nats_access, {"caps": ["core", "automation"], "drain_deadline": 0})
    with running.client("alice") as alice:
        tab = open_tab(alice, site.url("/clicks"))
        forever = "await fetch('/busy', {method: 'POST'}); await new Promise(r => setTimeout(r, 600000)); return 1"
        writer, wrote = _in_background(lambda: alice.post("/api/act", json={
            "command": {"action": "js", "tabId": tab, "code": forever, "timeout": 300}}).json())
        reader, _ = _in_background(lambda: alice.post("/api/batch", json={
            "commands": [{"action": "waitFor", "selector": "#never", "timeout": 300}], "tabId": tab,
            "timeout": 600}))
        assert site.wait_for_count(BUSY, timeout=30) == 1  # the write runs
        _wait_for_calls_running(alice, 1)  # and so does the read, behind it
        started = time.monotonic()
        running.process.terminate()
        status = running.process.wait(timeout=30)
        took = time.monotonic() - started
    assert status == 0
    assert took < 10, f"the node took {took:.1f} s to stop"
    writer.join(timeout=5)
    reader.join(timeout=5)
    if wrote and isinstance(wrote[0], dict):  # the answer may have gone out before the connection closed
        assert wrote[0]["status"] == "unknown" and wrote[0]["code"] == "node_stopped", wrote[0]
    direct = next(e for e in running.audit() if e["kind"] == "direct" and e["action"] == "js")
    interrupted = [e for e in running.audit() if e["kind"] == "interrupted"]
    assert [(e["action"], e["tabId"], e["outcome"], e["parent"]["call"]) for e in interrupted] == [
        ("js", tab, "unknown", direct["call"])]
    assert "600000" not in running.audit_file.read_text()  # the JavaScript body is never audited
