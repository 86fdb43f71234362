"""Connect first, then construct: how a node comes to be.

``start_node`` connects (``bridge.connection``: NATS, the bus, the streams, the first tab ids),
then ``Node`` builds every part with what it needs in its constructor, then ``Node.open`` starts
them. No part is half-built: the bus, the stores and the fleet's registry exist before any part
that uses them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

from actors.loop import IoLoop
from actors.nats_server import EmbeddedNats
from bridge.browser import Browser
from bridge.connection import connect
from bridge.node import Node
from bridge.workflows import WorkflowLibrary
from core.policy import Policy
from core.settings import NodeConfig

__all__ = ["run_node", "start_node"]


async def start_node(browser: Browser, config: NodeConfig = NodeConfig(), *, policy: Policy = Policy(),
                     agent_policies: Mapping[str, Policy] | None = None, workflows: WorkflowLibrary | None = None,
                     io: IoLoop | None = None, nats: EmbeddedNats | None = None) -> Node:
    """A started node on the running loop (``io``: the node's view of it): connected, built, opened.
    The browser launches while NATS starts (its user context is made once the node gave it its URL
    lists; ``nats``: the embedded server, its start begun, see ``connect``). What started is stopped
    again when a step fails."""
    browser.launch_early()
    try:
        connection = await connect(config, nats)
    except BaseException:
        await browser.stop()
        raise
    try:
        node = Node(browser, config, connection, io or IoLoop(asyncio.get_running_loop()), policy=policy,
                    agent_policies=agent_policies, workflows=workflows)
    except BaseException:
        await connection.close()
        await browser.stop()
        raise
    try:
        await node.open()
    except BaseException:
        await node.astop()
        raise
    return node


def run_node(browser: Browser, config: NodeConfig = NodeConfig(), *, policy: Policy = Policy(),
             agent_policies: Mapping[str, Policy] | None = None, workflows: WorkflowLibrary | None = None) -> Node:
    """``start_node`` on an event loop thread of the node's own, for a caller that is not asynchronous
    (a benchmark, a test); ``Node.stop`` ends it and its thread."""
    io = IoLoop()
    try:
        return io.run(start_node(browser, config, policy=policy, agent_policies=agent_policies, workflows=workflows,
                                 io=io), timeout=120)
    except BaseException:
        io.close()
        raise
