"""The fleet's metrics of a node: who it is, the fleet as it sees it, and its requests to other nodes.

They live in the node's own registry (``NodeMetrics.registry``) and ``GET /metrics`` serves them
with the rest. Every scrape carries the node's identity in ``kitsune_node_info{fleet, node}``, so
a query joins a node's name onto its scrape's ``instance``. The fleet's gauges are read from the
registry's mirror at each scrape; cross-node requests are counted from the bus's request hook.

A ``node`` label holds the name of a node alive in the fleet: bounded by the fleet's size (each
node named once; a node that comes back under a new name adds one series), never a tab id, call
id or URL. The other labels come from fixed sets.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from importlib.metadata import version
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from actors.fleet_registry import NodeEntry, TabEntry
from bridge.metrics import BUS_BUCKETS, BUS_OUTCOMES, bounded
from messages.requests import NODE_OPS

__all__ = ["CROSS_NODE_SUBJECTS", "FleetMetrics"]

CROSS_NODE_SUBJECTS = ("tab", *NODE_OPS, "resume")
"""A step on another node's tab (or its withdrawal), a newTab placed there, its tab list, a claim,
release or takeover it decides, a call on its tabs sent there (and the looks at it), a resume of a
checkpoint it holds."""


class _Registry(Protocol):
    @property
    def tabs(self) -> Mapping[int, TabEntry]: ...

    def alive(self) -> dict[str, NodeEntry]: ...


class _Member(Protocol):
    """What these metrics read of the node's ``FleetMember``."""

    @property
    def name(self) -> str: ...

    @property
    def registry(self) -> _Registry: ...

    def heartbeat(self) -> NodeEntry: ...


class FleetMetrics(Collector):
    """The fleet's metrics of one node, in that node's registry; the node calls ``bus_request``."""

    def __init__(self, member: _Member, fleet: str, registry: CollectorRegistry) -> None:
        self._member = member
        self._fleet = fleet
        self.requests = Counter("kitsune_cross_node_requests", "Requests to another node of the fleet, by subject "
                                "(tab, open, tabs, claims, resume) and outcome", ["subject", "outcome"],
                                registry=registry)
        self.seconds = Histogram("kitsune_cross_node_request_duration_seconds", "Latency of requests to another "
                                 "node, by subject (a step's: its run on that node included)", ["subject"],
                                 buckets=BUS_BUCKETS, registry=registry)
        for subject in CROSS_NODE_SUBJECTS:  # present from the start: rates see the first request
            self.requests.labels(subject, "ok")
            self.seconds.labels(subject)
        registry.register(self)

    def bus_request(self, subject: str, seconds: float, outcome: str) -> None:
        """A NATS request took ``seconds``: counted when it went to another node."""
        kind = self._cross_node(subject)
        if kind is not None:
            self.requests.labels(kind, bounded(outcome, BUS_OUTCOMES, "bus_error")).inc()
            self.seconds.labels(kind).observe(seconds)

    def _cross_node(self, subject: str) -> str | None:
        """What a request to another node asks of it; None for a request that goes to no other node (the
        fleet-wide tab list, this node's own subjects). A tab's subject is asked only for another node's
        tabs (a tab of this node is asked through its mailbox), a checkpoint's only for one this node does
        not hold."""
        tokens = subject.split(".")
        if tokens[0] != self._fleet:
            return None
        if len(tokens) == 3 and tokens[1] == "ckpt":
            return "resume"
        if len(tokens) != 4:
            return None
        if tokens[1] == "tab" and tokens[3] == "do":
            return "tab"
        if tokens[1] == "node" and tokens[2] != self._member.name and tokens[3] in NODE_OPS:
            return tokens[3]
        return None

    def describe(self) -> list[Metric]:
        return []  # nothing read at registration: the node is not started yet

    def collect(self) -> Iterator[Metric]:
        member = self._member
        info = GaugeMetricFamily("kitsune_node_info", "The node: its fleet, its name in it and its version",
                                 labels=["fleet", "node", "version"])
        info.add_metric([self._fleet, member.name, version("kitsune")], 1)
        yield info
        registry = member.registry
        tabs = dict.fromkeys(registry.alive(), 0)
        for entry in list(registry.tabs.values()):
            if entry.node in tabs:
                tabs[entry.node] += 1
        yield GaugeMetricFamily("kitsune_fleet_nodes", "Nodes alive in the fleet as this node sees them (itself "
                                "included)", value=len(tabs))
        per_node = GaugeMetricFamily("kitsune_fleet_tabs", "Open tabs of each node alive, as this node sees the "
                                     "fleet's registry", labels=["node"])
        for node, count in sorted(tabs.items()):
            per_node.add_metric([node], count)
        yield per_node
