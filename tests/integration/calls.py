"""Helpers the integration tests share: calls run on a live node, and a fleet of two nodes."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

from bridge.node import Node
from bridge.wiring import run_node
from driver import ChromiumBrowser
from messages.commands import parse_body
from tests.nats_access import NatsAccess
from tests.nodes import run_call


def batch(node: Node, commands: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
    """The response body of a batch of ``commands`` run on ``node``."""
    return run_call(node, parse_body("batch", {"commands": commands, **options})).body


def parallel(node: Node, sequences: list[list[dict[str, Any]]], **options: Any) -> dict[str, Any]:
    """The response body of a parallel call of ``sequences`` run on ``node``."""
    return run_call(node, parse_body("parallel", {"sequences": sequences, **options})).body


def two_nodes(nats_access: NatsAccess, prefix: str, **config: Any) -> Iterator[tuple[Node, Node]]:
    """Two started nodes of one new fleet (named ``prefix`` and a random suffix), stopped after."""
    name = f"{prefix}-{secrets.token_hex(4)}"
    first = run_node(ChromiumBrowser(), nats_access.node_config(fleet=name, **config))
    try:
        second = run_node(ChromiumBrowser(), nats_access.node_config(fleet=name, **config))
        try:
            yield first, second
        finally:
            second.stop()
    finally:
        first.stop()
