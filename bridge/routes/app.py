"""The bridge's HTTP API (Starlette): container calls, resume, tabs, direct actions, schema, health.

Every route but ``/healthz`` needs ``Authorization: Bearer <token>``; the token names the agent.
Routes belong to capability groups (``KITSUNE_CAPS``, or the agent's own ``caps``): a route outside
the calling agent's groups answers 404 ``capability_disabled`` (``bridge.routes.gate`` checks both). Bad
input answers 400 (413 for a body over the limit) with a code and the path of what was wrong, and
nothing is sent to any page.

The routes are in groups (``bridge.routes``), each over the services it uses (``bridge.services``);
:func:`create_app` is the one place that takes the node apart into those services.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from actors.call_actor import ResumeCall, RunCall
from bridge.fleet.asking import ask_node
from bridge.metrics import HttpMetrics, scrape_tokens
from bridge.node import Node
from bridge.routes.about import about_routes
from bridge.routes.actions import action_routes
from bridge.routes.calls import call_routes
from bridge.routes.console import console_routes
from bridge.routes.console_limits import LoginLimiter
from bridge.routes.drain import drain_routes
from bridge.routes.edges import BearerChallenge, error_handlers
from bridge.routes.gate import Gate
from bridge.routes.live import live_routes
from bridge.routes.sessions import session_routes
from bridge.routes.tabs import tab_routes
from bridge.routes.tasks import task_routes
from bridge.workflows import WorkflowLibrary
from core.calls import CallResponse
from core.settings import Settings
from messages.commands import Command
from messages.errors import KitsuneError
from messages.fleet import DrainNode, DrainState
from messages.results import Outcome

__all__ = ["create_app"]

_ASK = 10.0
"""Seconds another node has to answer a drain."""


def create_app(node: Node, config: Settings, mounts: Sequence[BaseRoute] = ()) -> Starlette:
    """The bridge's ASGI app over a started node; ``mounts`` are routes of the layers above it (MCP)."""
    tabs, calls, limit = _NodeTabs(node), _NodeCalls(node), config.http.max_body_bytes
    limiter = LoginLimiter()
    routes: list[BaseRoute] = [
        *call_routes(calls, tabs, node.live, limit),
        *tab_routes(tabs, sessions=node.sessions, calls=calls, live=node.live, approving=node,
                    confirms=node.confirms, policy_of=node.policy_of, body_limit=limit),
        *session_routes(node.sessions),
        *action_routes(calls, tabs, node, limit),
        *about_routes(node.policy_of, _NodeFleet(node), node.healthy),
        *drain_routes(_NodeDrains(node)),
        *task_routes(node.task_service, node.confirms, node.held_takeovers, node.policy_of, limit),
        *live_routes(node.live),
        *console_routes(node, config, limiter=limiter),
        *mounts,
    ]
    return Starlette(routes=routes, exception_handlers=dict(error_handlers()), middleware=[
        Middleware(BearerChallenge),  # every 401, /metrics' too
        Middleware(HttpMetrics, metrics=node.metrics, allowed=scrape_tokens(config)),  # and GET /metrics
        Middleware(Gate, config=config, policy_of=node.policy_of, limiter=limiter)])


class _NodeTabs:
    """The node's tabs as a ``TabService``: its fleet member's current tabs, its tab owners' closed tabs."""

    def __init__(self, node: Node) -> None:
        self._node = node

    def current(self, agent: str) -> int | None:
        return self._node.member.current(agent)

    async def set_current(self, agent: str, tab: int | None) -> None:
        await self._node.member.set_current(agent, tab)

    async def describe(self) -> list[dict[str, Any]]:
        return await self._node.describe_tabs()

    async def open_ids(self, wanted: frozenset[int] = frozenset()) -> frozenset[int]:
        return await self._node.open_tab_ids(wanted)

    async def take_over(self, tab: int, agent: str) -> tuple[str, int]:
        call = await asyncio.to_thread(self._node.auditor(agent).takeover, tab)  # audited first, as every action
        return await self._node.take_over(tab, agent), call

    async def needs_user(self, tab: int) -> dict[str, Any]:
        return await self._node.needs_user(tab)

    def closed_error(self, tab: int) -> KitsuneError | None:
        return self._node.owners.closed_error(tab)

    def resolve(self, handle: str) -> int:
        return self._node.member.resolve(handle)


class _NodeCalls:
    """The node's calls as a ``CallService``."""

    def __init__(self, node: Node) -> None:
        self._node = node

    @property
    def workflows(self) -> WorkflowLibrary | None:
        return self._node.workflows

    async def run(self, message: RunCall | ResumeCall) -> CallResponse:
        return await self._node.run_async(message)

    async def act(self, agent: str, command: Command, tab: int | None,
                  confirm_token: str | None = None) -> tuple[Outcome, int]:
        return await self._node.act(agent, command, tab, confirm_token)


class _NodeFleet:
    """The node's fleet as a ``FleetService``."""

    def __init__(self, node: Node) -> None:
        self._node = node

    @property
    def name(self) -> str:
        return self._node.config.name

    def nodes(self) -> list[dict[str, Any]]:
        return self._node.member.nodes()

    def draining(self) -> bool:
        return self._node.drain.draining


class _NodeDrains:
    """The fleet's drains as a ``DrainService``: this node's own, another's asked over NATS."""

    def __init__(self, node: Node) -> None:
        self._node = node

    async def drain(self, node: str, deadline: float | None) -> DrainState:
        own = self._node
        if node == own.config.name:
            return own.drain.start(deadline)
        if node not in own.member.registry.alive():
            raise KitsuneError("unknown_node", f"No node {node!r} in the fleet", state={"node": node})
        return await ask_node(own.bus, own.subjects.node(node, "drain"), node, DrainNode(deadline), _ASK, DrainState)

    async def drain_state(self, node: str) -> DrainState:
        own = self._node
        if node == own.config.name:
            return own.drain.describe()
        entry = own.member.registry.alive().get(node)
        return DrainState(node, "left" if entry is None else "draining" if entry.draining else "serving")
