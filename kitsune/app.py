"""The app factory on top of the layers: the bridge's HTTP API with the MCP gateway mounted at ``/mcp``."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import Route

from bridge.node import Node
from bridge.routes import app as bridge_app
from core.policy import CAPABILITY_GROUPS
from core.settings import Settings

__all__ = ["create_app"]


def create_app(node: Node, config: Settings, *, mcp: bool = True) -> Starlette:
    """One node's ASGI app: the bridge's routes, and MCP over streamable HTTP at ``/mcp`` (unless ``mcp`` is
    false: ``kitsune mcp``'s embedded bridge, whose gateway speaks stdio, never loads the MCP SDK).

    The gateway there may offer every group: it lists and allows each caller's tools by the groups
    the bridge's ``GET /api/caps`` gives the caller's agent.
    """
    if not mcp:
        return bridge_app.create_app(node, config)
    from mcp_gateway.http import McpEndpoint  # noqa: PLC0415 (the MCP SDK: a second of CPU, only where it serves)
    return bridge_app.create_app(node, config, mounts=[Route("/mcp", McpEndpoint(CAPABILITY_GROUPS))])
