"""The MCP gateway serves each agent by its own policy, with the SDK's own client: over streamable
HTTP at ``/mcp`` and through ``kitsune mcp --bridge``, the tool list and the tools allowed follow
the calling agent's capability groups, and its writes its read-only mode. alice is read-only with
both groups; bob writes with the node's groups, ``core`` only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.clients import call, open_tab, over_http, over_stdio
from tests.integration.serving import TOKENS, Served, serve
from tests.nats_access import NatsAccess
from tests.site import TestSite

pytestmark = pytest.mark.anyio

AUTOMATION_ONLY = {"browser_batch", "browser_parallel", "browser_workflow"}


@pytest.fixture(scope="module")
def tenants(tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess) -> Iterator[Served]:
    running = serve(tmp_path_factory.mktemp("tenants"), nats_access, {"caps": ["core"], "agents": [
        {"name": "alice", "token": TOKENS["alice"], "read_only": True, "caps": ["core", "automation"]},
        {"name": "bob", "token": TOKENS["bob"]}]})
    yield running
    assert running.stop() == 0


async def test_mcp_over_http_lists_and_allows_the_tools_of_the_calling_agents_groups(tenants: Served) -> None:
    async with over_http(tenants, "alice") as alice, over_http(tenants, "bob") as bob:
        alices = {tool.name for tool in (await alice.list_tools()).tools}
        bobs = {tool.name for tool in (await bob.list_tools()).tools}
        assert alices >= AUTOMATION_ONLY and not AUTOMATION_ONLY & bobs
        assert alices - AUTOMATION_ONLY == bobs
        assert (await call(alice, "browser_batch", {"commands": [{"action": "getTabs"}]}))["status"] == "ok"
        assert (await call(bob, "browser_batch", {"commands": [{"action": "title"}]}))["code"] == (
            "capability_disabled")


async def test_kitsune_mcp_with_a_bridge_lists_the_tools_of_its_tokens_agent(tenants: Served) -> None:
    async with over_stdio(tenants, agent="alice") as alice, over_stdio(tenants, agent="bob") as bob:
        alices = {tool.name for tool in (await alice.list_tools()).tools}
        bobs = {tool.name for tool in (await bob.list_tools()).tools}
        assert alices >= AUTOMATION_ONLY and not AUTOMATION_ONLY & bobs
        assert (await call(bob, "browser_parallel", {"sequences": []}))["code"] == "capability_disabled"


async def test_a_read_only_agents_write_through_mcp_is_refused_and_a_writers_is_sent(
        tenants: Served, site: TestSite) -> None:
    tab = open_tab(tenants, site.url("/clicks"), agent="bob")
    async with over_http(tenants, "alice") as alice, over_http(tenants, "bob") as bob:
        refused = await call(alice, "browser_click", {"tabId": tab, "selector": "#hit"})
        assert refused["code"] == "read_only"
        assert (await call(bob, "browser_click", {"tabId": tab, "selector": "#hit"}))["status"] == "ok"
    assert site.wait_for_count("POST /clicks/hit") == 1
    assert site.counts() == {"POST /clicks/hit": 1}
