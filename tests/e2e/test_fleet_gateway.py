"""An MCP client of one node runs a batch on another node's tab (issue 14): sent there whole, progress and all.

Two ``kitsune serve`` nodes of one fleet on the session's nats-server; the SDK's client over
streamable HTTP at gw-a's ``/mcp`` calls ``browser_batch`` on a tab of gw-b. The call goes to gw-b
once (gw-a sends no step over NATS), the client hears a progress notification per finished step
(gw-b's events relayed), and the test site counts each click once.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from tests.e2e.clients import call, over_http
from tests.integration.serving import Served, serve
from tests.nats_access import NatsAccess
from tests.site import TestSite

pytestmark = pytest.mark.anyio

HIT = "POST /clicks/hit"
CLICK = {"action": "click", "selector": "#hit"}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess) -> Iterator[tuple[Served, Served]]:
    nodes = [serve(tmp_path_factory.mktemp(name), nats_access, {"fleet": "gateway", "node_name": name,
                                                                  "caps": ["core", "automation"]})
             for name in ("gw-a", "gw-b")]
    yield nodes[0], nodes[1]
    for node in nodes:
        assert node.stop() == 0


def _cross_node(served: Served, subject: str) -> float:
    """Requests ``served`` sent to other nodes on ``subject``, from its /metrics."""
    with served.client() as client:
        text = client.get("/metrics").text
    return sum(float(value) for value in re.findall(
        rf'^kitsune_cross_node_requests_total\{{[^}}]*subject="{subject}"[^}}]*\}} (\S+)$', text, re.M))


async def test_browser_batch_on_another_nodes_tab_runs_there_with_a_progress_notification_per_step(
        pair: tuple[Served, Served], site: TestSite) -> None:
    here, there = pair
    with there.client() as client:
        opened = client.post("/api/tabs", json={"op": "open", "url": site.url("/clicks"), "node": "gw-b"}).json()
    assert opened["status"] == "ok", opened
    with here.client() as client:  # gw-a has heard of the tab (its registry mirror, milliseconds)
        deadline = time.monotonic() + 10
        while opened["tabId"] not in [t["tabId"] for t in client.get("/api/tabs").json()["tabs"]]:
            assert time.monotonic() < deadline, "gw-a never listed gw-b's tab"
            time.sleep(0.05)
    steps, sent = _cross_node(here, "tab"), _cross_node(here, "call")
    heard: list[tuple[float, float | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        heard.append((done, total))

    async with over_http(here) as session:
        result = await call(session, "browser_batch", {"tabId": opened["tabId"], "commands": [CLICK] * 3},
                            progress_callback=on_progress)
    assert result["status"] == "ok" and [p["status"] for p in result["progress"]] == ["ok"] * 3, result
    assert [done for done, _ in heard][-3:] == [1, 2, 3] and heard[-1][1] == 3, heard
    assert site.wait_for_count(HIT, 3) == 3
    assert _cross_node(here, "tab") == steps  # no step crossed NATS
    assert _cross_node(here, "call") > sent
