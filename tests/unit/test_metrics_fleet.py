"""The fleet's metrics of a node (``bridge.fleet.metrics``): its identity, the fleet as its registry
mirror shows it, and which of its NATS requests went to another node.

The member and its registry mirror are stand-ins with the few public attributes the metrics read;
the real ones are scraped by tests/integration/test_dashboards.py (two nodes of one fleet).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from actors.fleet_registry import NodeEntry, TabEntry
from bridge.fleet.metrics import CROSS_NODE_SUBJECTS, FleetMetrics
from tests.metric_labels import unbounded_labels


@dataclass
class StandInRegistry:
    nodes: dict[str, NodeEntry]
    tabs: dict[int, TabEntry] = field(default_factory=dict)

    def alive(self) -> dict[str, NodeEntry]:
        return dict(self.nodes)


@dataclass
class StandInMember:
    registry: StandInRegistry
    name: str = "node-a"
    own_tabs: int = 0

    def heartbeat(self) -> NodeEntry:
        return NodeEntry(self.name, self.own_tabs, 10)


def _alone(own_tabs: int = 0) -> StandInMember:
    """A node alone: a registry of one node, its own tabs in it."""
    return StandInMember(StandInRegistry({"node-a": NodeEntry("node-a", own_tabs, 10)},
                                         {tab: TabEntry(tab, "node-a") for tab in range(1, own_tabs + 1)}),
                         own_tabs=own_tabs)


def _samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return _samples(registry).get((name, tuple(sorted(labels.items()))))


def test_a_node_alone_is_a_fleet_of_one_named_in_its_info() -> None:
    registry = CollectorRegistry()
    FleetMetrics(_alone(3), "unit", registry)
    assert _value(registry, "kitsune_node_info", fleet="unit", node="node-a", version="0.1.0") == 1
    assert _value(registry, "kitsune_fleet_nodes") == 1
    assert _value(registry, "kitsune_fleet_tabs", node="node-a") == 3


def test_nodes_alive_and_their_tabs_come_from_the_registry_mirror() -> None:
    beats = {name: NodeEntry(name, 0, 10) for name in ("node-a", "node-b", "node-c")}
    mirror = StandInRegistry(beats, {1: TabEntry(1, "node-a"), 2: TabEntry(2, "node-a", "alice", "default"),
                                     3: TabEntry(3, "node-b", claim=(7, "0.1", "node-a")),
                                     4: TabEntry(4, "node-gone")})  # a lost node's tab, not yet deleted
    member = StandInMember(mirror)
    registry = CollectorRegistry()
    FleetMetrics(member, "unit", registry)
    assert _value(registry, "kitsune_fleet_nodes") == 3
    assert [_value(registry, "kitsune_fleet_tabs", node=n) for n in ("node-a", "node-b", "node-c")] == [2, 1, 0]
    assert _value(registry, "kitsune_fleet_tabs", node="node-gone") is None
    del mirror.nodes["node-b"]  # node-b left: its series goes at the next scrape
    assert _value(registry, "kitsune_fleet_nodes") == 2
    assert _value(registry, "kitsune_fleet_tabs", node="node-b") is None


def test_only_requests_to_another_node_are_cross_node() -> None:
    registry = CollectorRegistry()
    metrics = FleetMetrics(_alone(), "unit", registry)
    for subject in CROSS_NODE_SUBJECTS:  # present before the first request
        assert _value(registry, "kitsune_cross_node_requests_total", subject=subject, outcome="ok") == 0
    metrics.bus_request("unit.tab.12.do", 0.002, "ok")  # another node's tab (this node's go through mailboxes)
    metrics.bus_request("unit.tab.13.do", 0.003, "bus_timeout")
    metrics.bus_request("unit.node.node-b.claims", 0.001, "ok")
    metrics.bus_request("unit.node.node-b.open", 0.2, "made-up outcome")
    metrics.bus_request("unit.node.node-b.tabs", 0.001, "no_responders")
    metrics.bus_request("unit.ckpt.12", 0.01, "ok")  # a resume forwarded to the node holding the checkpoint
    metrics.bus_request("unit.node.node-b.call", 0.02, "ok")  # a call sent whole to the node of its tabs
    for not_cross in ("unit.node.node-a.open", "unit.node.node-a.call", "unit.tabs.list", "other.tab.12.do",
                      "unit.node.node-b.made-up", "unit.tab.12.do.more", "unit.ckpt"):
        metrics.bus_request(not_cross, 0.001, "ok")
    assert _value(registry, "kitsune_cross_node_requests_total", subject="tab", outcome="ok") == 1
    assert _value(registry, "kitsune_cross_node_requests_total", subject="tab", outcome="bus_timeout") == 1
    assert _value(registry, "kitsune_cross_node_requests_total", subject="claims", outcome="ok") == 1
    assert _value(registry, "kitsune_cross_node_requests_total", subject="open", outcome="bus_error") == 1
    assert _value(registry, "kitsune_cross_node_requests_total", subject="open", outcome="ok") == 0
    assert _value(registry, "kitsune_cross_node_requests_total", subject="tabs", outcome="no_responders") == 1
    assert _value(registry, "kitsune_cross_node_requests_total", subject="resume", outcome="ok") == 1
    assert _value(registry, "kitsune_cross_node_requests_total", subject="call", outcome="ok") == 1
    assert _value(registry, "kitsune_cross_node_request_duration_seconds_count", subject="tab") == 2
    assert _value(registry, "kitsune_cross_node_request_duration_seconds_sum", subject="tab") == pytest.approx(0.005)
    assert _value(registry, "kitsune_cross_node_request_duration_seconds_bucket", subject="open", le="0.25") == 1


def test_labels_stay_bounded_by_the_fleets_nodes_whatever_the_tabs_and_calls() -> None:
    nodes = ["node-a", "node-b"]
    mirror = StandInRegistry({name: NodeEntry(name, 0, 500) for name in nodes})
    registry = CollectorRegistry()
    metrics = FleetMetrics(StandInMember(mirror), "unit", registry)
    made_up = []

    def series() -> int:
        return sum(1 for f in text_string_to_metric_families(generate_latest(registry).decode()) for _ in f.samples)
    metrics.bus_request("unit.tab.1.do", 0.001, "made-up")  # an outcome of no fixed value: counted bus_error
    before = series()
    for tab in range(1, 400):
        agent = f"agent-{secrets.token_hex(6)}"
        made_up.append(agent)
        mirror.tabs[tab] = TabEntry(tab, nodes[tab % 2], agent, "default", (tab * 1000, f"0.{tab}", "node-a"))
        metrics.bus_request(f"unit.tab.{tab}.do", 0.001, f"outcome-{secrets.token_hex(4)}")
    exposition = generate_latest(registry).decode()
    assert unbounded_labels(exposition, ["unit"], made_up, nodes=nodes) == []
    assert unbounded_labels(exposition, ["unit"], made_up) != []  # a node name is no fixed value: it is configured
    assert series() == before  # 400 tabs and agents, each request's outcome made up: not one series more
