"""Helpers of the fleet tests: nodes on the real 3-server NATS cluster, the app over each, polling."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from bridge.node import Node
from bridge.wiring import run_node
from driver import ChromiumBrowser
from kitsune.config import load_config
from tests.integration.serving import app_over
from tests.nats_cluster import ClusterAccess


def until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``condition`` until it is truthy; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:g} s")
        time.sleep(0.05)
    return value


def start_node(cluster: ClusterAccess, name: str, **config: Any) -> Node:
    """A started node named ``name`` of fleet ``kitsune`` on the cluster."""
    return run_node(ChromiumBrowser(), cluster.node_config(name=name, **config))


def sees(node: Node, *names: str) -> bool:
    """Whether ``node`` has the nodes ``names`` alive in its registry."""
    assert node.member.registry is not None
    return set(names) <= set(node.member.registry.alive())


def two_nodes(cluster: ClusterAccess, names: tuple[str, str], **second: Any) -> Iterator[tuple[Node, Node]]:
    """Two started nodes that see each other (the second with ``second``'s configuration), stopped after."""
    first = start_node(cluster, names[0])
    try:
        other = start_node(cluster, names[1], **second)
        try:
            until(lambda: sees(first, *names) and sees(other, *names), 10, "the nodes seeing each other")
            yield first, other
        finally:
            other.stop()
    finally:
        first.stop()


@contextlib.contextmanager
def apps_over(nodes: tuple[Node, Node], tokens: Mapping[str, str]) -> Iterator[tuple[str, str]]:
    """The real app over each node, with the same agents (``tokens``) and both capability groups."""
    config = load_config(None, {"KITSUNE_AGENTS": ",".join(f"{a}={t}" for a, t in tokens.items()),
                                "KITSUNE_CAPS": "core,automation"})
    with app_over(nodes[0], config) as first, app_over(nodes[1], config) as second:
        yield first, second
