"""The app factory on top of the layers: the bridge's HTTP API with the MCP gateway mounted at ``/mcp``."""

from __future__ import annotations

import asyncio
import importlib
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from bridge.node import Node
from bridge.routes import app as bridge_app
from core.policy import CAPABILITY_GROUPS
from core.settings import Settings

if TYPE_CHECKING:
    from mcp_gateway.http import McpEndpoint

__all__ = ["create_app"]


def create_app(node: Node, config: Settings, *, mcp: bool = True) -> Starlette:
    """One node's ASGI app: the bridge's routes, and MCP over streamable HTTP at ``/mcp`` (unless ``mcp`` is
    false: ``kitsune mcp``'s embedded bridge, whose gateway speaks stdio, never loads the MCP SDK).

    The gateway there may offer every group: it lists and allows each caller's tools by the groups
    the bridge's ``GET /api/caps`` gives the caller's agent.
    """
    if not mcp:
        return bridge_app.create_app(node, config)
    return bridge_app.create_app(node, config, mounts=[Route("/mcp", _McpOnFirstRequest(CAPABILITY_GROUPS))])


class _McpOnFirstRequest:
    """``/mcp``: the MCP SDK and the gateway (``mcp_gateway.http``: half a second to a second of CPU) load with the
    first request to it, in a worker thread while the node serves, not with every node's start; the requests that
    come meanwhile wait for it. An SDK that cannot load fails each request to ``/mcp`` with its error."""

    def __init__(self, caps: frozenset[str]) -> None:
        self._caps = caps
        self._endpoint: asyncio.Future[McpEndpoint] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._endpoint is None:
            self._endpoint = asyncio.ensure_future(self._loaded())
        endpoint = await asyncio.shield(self._endpoint)  # a request cancelled while it loads leaves the load going
        await endpoint(scope, receive, send)

    async def _loaded(self) -> McpEndpoint:
        module = await asyncio.to_thread(importlib.import_module, "mcp_gateway.http")
        endpoint: McpEndpoint = module.McpEndpoint(self._caps)
        return endpoint
