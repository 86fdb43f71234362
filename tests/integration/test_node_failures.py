"""A node's parts failing for real: NATS lost mid-write, Chromium killed, and a clean stop.

Each test runs its own node (and, where it kills it, its own nats-server) so the session's
shared node is never disturbed.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Any, cast

import pykka
import pytest

from actors.nats_server import EmbeddedNats, free_port
from bridge.wiring import run_node
from core.settings import NatsConfig, NodeConfig
from driver import ChromiumBrowser
from messages.commands import parse_body
from messages.errors import KitsuneError
from tests.e2e.clients import process_tree, processes
from tests.integration.calls import batch
from tests.nats_access import NatsAccess
from tests.nodes import chromium_pid, open_user_tab, run_call
from tests.site import TestSite


def _eventually(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def _or(attempt: Callable[[], bool], refused: Callable[[KitsuneError], bool]) -> bool:
    """``attempt()``, or what ``refused`` says of the call's refusal."""
    try:
        return attempt()
    except KitsuneError as e:
        return refused(e)


def _in_background(fn: Callable[[], dict[str, Any]]) -> tuple[threading.Thread, dict[str, Any]]:
    result: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: result.update(fn()))
    thread.start()
    return thread, result


def _alive(pid: int) -> bool:
    try:
        stat = open(f"/proc/{pid}/stat").read()  # noqa: SIM115
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def test_a_write_in_flight_over_nats_when_it_is_lost_ends_unknown_and_the_nodes_reconnect(site: TestSite) -> None:
    server = EmbeddedNats(fleet="lost-nats")  # the node's own permissions, as ``kitsune serve`` embeds it
    config = NodeConfig(nats=NatsConfig(server.start(), server.auth), step_timeout=10.0, fleet="lost-nats")
    tabs = run_node(ChromiumBrowser(), config)  # the tab's node
    caller = run_node(ChromiumBrowser(), config)  # a node without tabs: its calls reach the tab over NATS
    revived: EmbeddedNats | None = None
    try:
        tab = open_user_tab(tabs, site.url("/slow"))
        thread, body = _in_background(lambda: batch(caller, [
            {"action": "fill", "selector": "#item", "value": "x"},
            {"action": "submitForm", "selector": "#slow-form", "timeout": 8},
            {"action": "title"},
        ], tabId=tab))
        site.wait_for_count("POST /slow")
        server.stop()  # the connection is lost while the submit waits for its answer
        thread.join(timeout=60)

        assert [p["status"] for p in body["progress"]] == ["ok", "unknown", "skipped"]
        assert body["results"][1]["code"] == "bus_disconnected"
        assert isinstance(body["resume_token"], str)  # a checkpoint, to resume once observed
        assert site.count("POST /slow") == 1

        # A new server: the streams are gone with the old one.
        revived = EmbeddedNats(port=server.port, fleet="lost-nats", auth=server.auth)
        revived.start()
        buses: list[Any] = [tabs.bus, caller.bus]
        _eventually(lambda: all(bus.connected and bus.reconnects >= 1 for bus in buses))
        site.slow_seconds = 0

        def refused(error: KitsuneError) -> bool:  # the nodes are still making their streams again
            assert error.code in ("audit_unavailable", "events_unavailable"), error.code
            return False

        _eventually(lambda: _or(lambda: batch(caller, [{"action": "navigate", "url": site.url("/slow")},
                                            {"action": "submitForm", "selector": "#slow-form"}],
                                   tabId=tab)["status"] == "ok", refused))  # the nodes made their streams again
        assert site.count("POST /slow") == 2
    finally:
        caller.stop()
        tabs.stop()
        if revived is not None:
            revived.stop()


def test_a_call_on_a_tab_of_the_same_node_is_refused_while_nats_is_down(site: TestSite) -> None:
    server = EmbeddedNats(fleet="nats-down")
    node = run_node(ChromiumBrowser(), NodeConfig(nats=NatsConfig(server.start(), server.auth), step_timeout=10.0,
                                                  fleet="nats-down"))
    try:
        tab = open_user_tab(node, site.url("/slow"))
        server.stop()
        bus: Any = node.bus
        _eventually(lambda: not bus.connected)

        # The tab would answer without NATS, but the call cannot be audited: nothing is sent.
        with pytest.raises(KitsuneError) as refused:
            batch(node, [{"action": "submitForm", "selector": "#slow-form"}], tabId=tab)
        assert refused.value.code == "audit_unavailable"
        assert site.count("POST /slow") == 0
    finally:
        node.stop()


def test_a_browser_that_dies_is_restarted_its_tabs_closed_and_writes_in_flight_unknown(
        nats_access: NatsAccess, site: TestSite) -> None:
    node = run_node(ChromiumBrowser(), nats_access.node_config(step_timeout=10.0, fleet="browser-dies"))
    try:
        browser: Any = node.browser
        tab, other = open_user_tab(node, site.url("/slow")), open_user_tab(node, site.url("/clicks"))
        thread, body = _in_background(lambda: batch(node, [
            {"action": "submitForm", "selector": "#slow-form", "timeout": 8}], tabId=tab))
        site.wait_for_count("POST /slow")
        os.kill(node.io.run(chromium_pid(browser, tab)), signal.SIGKILL)
        thread.join(timeout=60)

        assert body["progress"][0]["status"] == "unknown", body["results"]
        _eventually(lambda: browser.restarts == 1)
        closed = batch(node, [{"action": "click", "selector": "#local"}], tabId=other)
        assert closed["progress"][0]["status"] == "failed"
        assert closed["results"][0]["code"] == "tab_closed"
        assert node.tabs.ids() == []

        fresh = open_user_tab(node, site.url("/clicks"))
        assert batch(node, [{"action": "click", "selector": "#hit"}], tabId=fresh)["status"] == "ok"
        assert site.wait_for_count("POST /clicks/hit") == 1
    finally:
        node.stop()


def test_a_stopped_node_leaves_no_actor_thread_page_or_browser(nats_access: NatsAccess, site: TestSite) -> None:
    threads_before = set(threading.enumerate())
    node = run_node(ChromiumBrowser(), nats_access.node_config(fleet="clean-stop"))
    tab = open_user_tab(node, site.url("/clicks"))
    body = run_call(node, parse_body("parallel", {"sequences": [
        [{"action": "click", "tabId": tab, "selector": "#local"}],
        [{"action": "newTab", "url": site.url("/text")}, {"action": "title", "tabId": "${$0.tabId}"}],
    ]})).body
    assert body["status"] == "ok"
    actors = [*node._actors, *node.tabs.refs()]
    assert len(actors) >= 5  # checkpoints, barriers, audit, and a tab actor for each of the two tabs
    browser_pid = node.io.run(chromium_pid(cast(ChromiumBrowser, node.browser), tab))

    node.stop()

    assert [actor for actor in actors if actor.is_alive()] == []
    try:
        _eventually(lambda: set(threading.enumerate()) <= threads_before, timeout=10)
    except AssertionError:
        left = set(threading.enumerate()) - threads_before
        raise AssertionError(f"threads left: {[(t.name, getattr(t, '_target', None)) for t in left]}") from None
    _eventually(lambda: not _alive(browser_pid), timeout=10)
    assert node.checkpoints is not None
    with pytest.raises(pykka.ActorDeadError):  # the checkpoints went with the actor that owned them
        node.checkpoints.calls()


def test_a_node_that_cannot_reach_nats_stops_the_chromium_launched_beside_it() -> None:
    def chromiums() -> set[int]:
        running = processes()
        return {pid for pid in process_tree(os.getpid(), running) if "chromium" in running[pid][1].split(" ")[0]}
    before = chromiums()
    unreachable = NodeConfig(nats=NatsConfig(f"nats://127.0.0.1:{free_port()}"))
    with pytest.raises(KitsuneError) as refused:
        run_node(ChromiumBrowser(), unreachable)
    assert refused.value.code == "bus_disconnected"
    _eventually(lambda: chromiums() <= before, timeout=10)
