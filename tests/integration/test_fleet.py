"""Nodes of one fleet sharing one NATS server: every tab id is unique in the fleet, and a call
reaches a tab of another node over NATS, where exactly one node runs it."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator

import pytest

from actors.buckets import FLEET_BUCKET
from actors.tab_ids import BLOCK, kv_reserve
from bridge.node import Node
from tests.integration.calls import batch, two_nodes
from tests.nats_access import NatsAccess
from tests.nodes import open_user_tab
from tests.site import TestSite


@pytest.fixture(scope="module")
def fleet(nats_access: NatsAccess) -> Iterator[tuple[Node, Node]]:
    yield from two_nodes(nats_access, "fleet")


def test_tabs_opened_on_two_nodes_of_a_fleet_never_share_an_id(fleet: tuple[Node, Node], site: TestSite) -> None:
    first, second = fleet
    opened = [open_user_tab(first if i % 2 == 0 else second, site.url("/clicks")) for i in range(6)]
    assert len(set(opened)) == len(opened)
    assert set(first.tabs.ids()).isdisjoint(second.tabs.ids())


def test_a_write_on_another_nodes_tab_goes_over_nats_and_is_done_once(
        fleet: tuple[Node, Node], site: TestSite) -> None:
    first, second = fleet
    tab = open_user_tab(second, site.url("/clicks"))
    open_user_tab(first, site.url("/clicks"))  # the caller has tabs of its own too
    assert tab not in first.tabs.ids()  # so the request crosses NATS to the other node
    body = batch(first, [{"action": "click", "selector": "#hit"}, {"action": "title"}], tabId=tab)
    assert body["status"] == "ok", body["summary"]
    assert site.wait_for_count("POST /clicks/hit") == 1
    assert site.count("POST /clicks/hit") == 1


def test_nodes_reserving_at_once_get_disjoint_blocks_and_a_lost_counter_restarts_past_them(
        nats_access: NatsAccess) -> None:
    async def scenario() -> None:
        name = "blocks-" + secrets.token_hex(4)
        clients = [await nats_access.client() for _ in range(4)]
        try:
            reserves = [kv_reserve(client, name) for client in clients]
            firsts = await asyncio.gather(*(reserve(BLOCK) for reserve in reserves for _ in range(5)))
            assert sorted(firsts) == [1 + i * BLOCK for i in range(20)]  # no block given twice, none skipped

            bucket = await clients[0].jetstream().key_value(FLEET_BUCKET)
            await bucket.delete(f"{name}.tab-ids")  # as if the server lost it
            highest = max(first for first, reserve in zip(firsts, [r for r in reserves for _ in range(5)],
                                                                 strict=True) if reserve is reserves[0])
            assert await reserves[0](BLOCK) == highest + BLOCK  # past every id this node reserved
        finally:
            for client in clients:
                await client.close()
    asyncio.run(scenario())
