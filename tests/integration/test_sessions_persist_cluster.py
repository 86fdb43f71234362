"""A persistent session outlives its node (issue 34): two ``kitsune serve`` processes of one fleet on the
3-server NATS cluster; the session is signed in on node A and saved by the interval; A is killed with SIGKILL;
the agent's next open through node B restores it there, and the test site sees the sign-in's cookie."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from kitsune.fleet import FLEET
from tests.integration.fleet_nodes import until
from tests.integration.persist_sessions import KEY, SIGN_IN, open_persistent, secrets_absent, seen_by_site
from tests.integration.serving import Served, serve
from tests.nats_cluster import ClusterAccess
from tests.site import TestSite

INTERVAL = 1.0
"""``sessions.persist_interval``: a session in use is saved this often."""


@pytest.fixture
def pair(tmp_path_factory: pytest.TempPathFactory, nats_cluster: ClusterAccess) -> Iterator[tuple[Served, Served]]:
    config = {"caps": ["core", "automation"], "fleet": FLEET,  # the only fleet the cluster's node user may serve
              "sessions": {"persist_key": KEY, "persist_interval": INTERVAL}}
    a = serve(tmp_path_factory.mktemp("node-a"), nats_cluster, config)
    try:
        b = serve(tmp_path_factory.mktemp("node-b"), nats_cluster, config)
        try:
            yield a, b
        finally:
            assert b.stop() == 0
    finally:
        if a.process.poll() is None:
            a.process.kill()
            a.process.wait(30)


def _node_name(served: Served) -> str:
    with served.client() as client:
        name: str = client.get("/api/fleet").json()["node"]
    return name


def _fleet_nodes(served: Served) -> set[str]:
    with served.client() as client:
        return {n["name"] for n in client.get("/api/fleet").json()["nodes"]}


def test_a_session_signed_in_on_a_node_killed_with_sigkill_is_restored_through_another(
        pair: tuple[Served, Served], site: TestSite) -> None:
    a, b = pair
    name_a = _node_name(a)
    until(lambda: _fleet_nodes(b) == {name_a, _node_name(b)}, 30, "node B seeing node A")
    with a.client() as alice:
        answer = alice.post("/api/tabs", json={"op": "open", "url": site.url("/session/start"), "node": name_a,
                                               "session": {"name": "shop", "persist": True}})
        assert answer.status_code == 200 and answer.json()["restored"] is False, answer.text
        assert seen_by_site(alice, answer.json()["tabId"]) == "signed in"
    signed_in = time.time()

    def saved_since() -> bool:
        return any(e["kind"] == "session" and e["op"] == "saved" and e["session"] == "shop" and e["time"] > signed_in
                   for e in a.audit())
    until(saved_since, 30, "node A's interval save after the sign-in")
    os.kill(a.process.pid, signal.SIGKILL)
    assert a.process.wait(30) == -signal.SIGKILL
    until(lambda: name_a not in _fleet_nodes(b), 60, "node B seeing node A gone")

    with b.client() as alice:
        restored = open_persistent(alice, site.url("/session"))
        assert restored["status"] == "ok" and restored["restored"] is True, restored
        assert restored["age"] >= 0 and restored["saved_at"] >= signed_in - INTERVAL
        assert seen_by_site(alice, restored["tabId"]) == "signed in"  # the site saw the sign-in's cookie
        tabs = {t["tabId"]: t for t in alice.get("/api/tabs").json()["tabs"]}
        assert tabs[restored["tabId"]]["node"] == _node_name(b)
    assert site.count(SIGN_IN) == 1
    assert secrets_absent(site, b.log_file.read_text(), b.audit_file.read_text(), a.log_file.read_text(),
                          a.audit_file.read_text())


