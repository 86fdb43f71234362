"""The app factory on top of the layers: the bridge's HTTP API with the MCP gateway mounted at ``/mcp``."""

from __future__ import annotations

import asyncio
import importlib

from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from bridge.node import Node
from bridge.routes import app as bridge_app
from core.policy import CAPABILITY_GROUPS
from core.settings import Settings

__all__ = ["create_app"]


class _McpOnFirstUse:
    """``/mcp``: the gateway's endpoint (``mcp_gateway.http``), loaded at its first request. The MCP SDK
    takes a second and more of CPU to import, which the node's start (and ``kitsune mcp``'s embedded
    bridge, which never serves ``/mcp``) need not wait for."""

    def __init__(self, caps: frozenset[str]) -> None:
        self._caps = caps
        self._endpoint: ASGIApp | None = None
        self._loading = asyncio.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        endpoint = self._endpoint or await self._load()
        await endpoint(scope, receive, send)

    async def _load(self) -> ASGIApp:
        async with self._loading:
            if self._endpoint is None:
                # imported off the loop: the node's steps run on meanwhile
                http = await asyncio.to_thread(importlib.import_module, "mcp_gateway.http")
                self._endpoint = http.McpEndpoint(self._caps)
        return self._endpoint


def create_app(node: Node, config: Settings) -> Starlette:
    """One node's ASGI app: the bridge's routes, and MCP over streamable HTTP at ``/mcp``.

    The gateway there may offer every group: it lists and allows each caller's tools by the groups
    the bridge's ``GET /api/caps`` gives the caller's agent.
    """
    return bridge_app.create_app(node, config, mounts=[Route("/mcp", _McpOnFirstUse(CAPABILITY_GROUPS))])
