"""The drain's routes and the health split in process (Starlette's test client) over the fake node of test_app:
who may drain, what a drain's body may hold, and what ``/livez`` and ``/readyz`` answer. The drain for real, with
real nodes and processes, is tests/integration/test_fleet_drain.py's."""

from __future__ import annotations

from typing import Any

import pytest
from starlette.testclient import TestClient

from bridge.drain import Drain, DrainParts
from core.settings import NodeConfig, Operator
from messages.tokens import token_hash
from tests.unit.test_app import ALICE, FakeNode, client_of, config, error_of

OPERATOR = "operator-token-0123456789"


async def _nothing() -> None:
    return None


async def _watermark() -> int:
    return 0


async def _nowhere(agent: str | None, tab: int | None, command: object) -> None:
    return None


class DrainingNode(FakeNode):
    """The fake node, with a drain whose steps do nothing (no fleet to leave)."""

    def __init__(self) -> None:
        super().__init__()
        self.config = NodeConfig(name="fake-0")
        self.drain = Drain("fake-0", 30.0, DrainParts(_nothing, _watermark, _nothing, _nothing, _nowhere))


@pytest.fixture
def node() -> DrainingNode:
    return DrainingNode()


def _client(node: DrainingNode, token: str | None) -> TestClient:
    return client_of(node, config(operators=(Operator("sre", token_hash(OPERATOR)),)), token=token)


def test_livez_and_readyz_need_no_token_and_readyz_says_which_part_is_not_ready(node: DrainingNode) -> None:
    anyone = _client(node, None)
    assert (anyone.get("/livez").status_code, anyone.get("/livez").json()) == (200, {"ok": True, "node": "fake-0"})
    ready = anyone.get("/readyz")
    assert (ready.status_code, ready.json()) == (200, {"ok": True, "node": "fake-0", "nats": True, "browser": True,
                                                       "draining": False})
    node.parts["nats"] = False
    ready = anyone.get("/readyz")
    assert (ready.status_code, ready.json()) == (503, {"ok": False, "node": "fake-0", "nats": False,
                                                       "browser": True, "draining": False})
    assert anyone.get("/livez").status_code == 200  # it reads neither NATS nor the browser


@pytest.mark.parametrize("token", [None, ALICE, "not-a-token-0123456789"])
def test_only_an_operator_s_token_drains_a_node(node: DrainingNode, token: str | None) -> None:
    answer = _client(node, token).post("/api/fleet/nodes/fake-0/drain")
    assert error_of(answer) == (401, "unauthorized")
    assert not node.drain.draining


@pytest.mark.parametrize(("body", "code"), [
    ({"deadline": "soon"}, "invalid_parameter"), ({"deadline": True}, "invalid_parameter"),
    ({"deadline": -1}, "invalid_parameter"), ({"deadline": 1e9}, "invalid_parameter"),
    ({"deadline": 5, "force": True}, "unknown_parameter")])
def test_a_drain_with_a_bad_body_is_refused_and_nothing_drains(node: DrainingNode, body: dict[str, Any],
                                                               code: str) -> None:
    answer = _client(node, OPERATOR).post("/api/fleet/nodes/fake-0/drain", json=body)
    assert error_of(answer) == (400, code)
    assert not node.drain.draining


def test_an_operator_drains_the_node_which_is_then_not_ready_and_refuses_new_calls(node: DrainingNode) -> None:
    operator = _client(node, OPERATOR)
    assert operator.get("/api/fleet/nodes/fake-0/drain").json() == {"node": "fake-0", "state": "serving",
                                                                   "deadline": None, "calls": 0}
    started = operator.post("/api/fleet/nodes/fake-0/drain", json={"deadline": 5})
    assert (started.status_code, started.json()) == (202, {"node": "fake-0", "state": "draining", "deadline": 5.0,
                                                           "calls": 0})
    again = operator.post("/api/fleet/nodes/fake-0/drain")  # a drain under way goes on as it began
    assert (again.status_code, again.json()["deadline"]) == (202, 5.0)
    ready = operator.get("/readyz")
    assert (ready.status_code, ready.json()["draining"]) == (503, True)
    refusal = node.drain.refusal(7)
    assert (refusal.code, refusal.http_status, refusal.retryable, refusal.state) == (
        "node_draining", 503, True, {"node": "fake-0", "tabId": 7, "home": None})
