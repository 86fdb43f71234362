"""The MCP server: Kitsune's tools over the bridge's HTTP API, and direct-call checkpoints.

One :class:`Gateway` serves every MCP connection of one transport (stdio, or ``/mcp`` on a node).
It is built on the SDK's low-level ``Server``, so tool input schemas are the command language's
own JSON Schema. Each tool call runs as one agent: the agent whose bearer token the transport
carries, and the bridge checks that token on every request the gateway makes for it.

The tool calls themselves are :class:`~mcp_gateway._tool_calls.ToolCalls`' (which ``kitsune mcp``'s front
also runs before the SDK has loaded).

Approval prompts are elicitation requests the server sends during the tool call, which the
handshake protocol (2025-11-25 and earlier) carries. A client on the 2026-07-28 per-request
protocol cannot take a server request during a call; it is served as a client without
elicitation: a hold answers ``needs_user`` with the confirm token, never a prompt.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib.metadata import version
from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from mcp_gateway._caller import Caller
from mcp_gateway._handshake import instructions, resources_result, tools_result
from mcp_gateway._listing import SCHEMA_URI
from mcp_gateway._results import call_result
from mcp_gateway._tool_calls import ToolCalls, approval_wait_from_env
from messages.schema import published_schema

__all__ = ["Gateway", "Identify", "approval_wait_from_env", "mcp_server", "to_call_tool_result"]

Identify = Callable[[ServerRequestContext[Any, Any]], Caller]
"""Who a request runs as: its agent and bridge."""


class Gateway(ToolCalls):
    """Kitsune's MCP tools for every connection of one transport, served by the SDK; direct-call checkpoints in
    memory."""

    def server(self, identify: Identify, name: str = "kitsune") -> Server[Any]:
        """An MCP server over this gateway; ``identify`` says who each request runs as."""
        return mcp_server(self, identify, name)


def to_call_tool_result(result: dict[str, Any]) -> types.CallToolResult:
    """A result as the SDK carries it (:func:`~mcp_gateway._results.call_result`, validated)."""
    return types.CallToolResult.model_validate(call_result(result))


def mcp_server(calls: ToolCalls, identify: Identify, name: str = "kitsune") -> Server[Any]:
    """An MCP server over ``calls`` (a :class:`Gateway`'s, or those a front served first); ``identify`` says who each
    request runs as."""
    async def list_tools(ctx: ServerRequestContext[Any, Any],
                         params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        caps = await calls.enabled_caps(identify(ctx))
        return types.ListToolsResult.model_validate(tools_result(caps))  # as the handshake lists them

    async def call_tool(ctx: ServerRequestContext[Any, Any],
                        params: types.CallToolRequestParams) -> types.CallToolResult:
        answer = await calls.answer(identify(ctx), params.name, dict(params.arguments or {}))
        return types.CallToolResult.model_validate(answer)  # as the front writes it

    async def list_resources(ctx: ServerRequestContext[Any, Any],
                             params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
        return types.ListResourcesResult.model_validate(resources_result())

    async def read_resource(ctx: ServerRequestContext[Any, Any],
                            params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        if params.uri != SCHEMA_URI:
            raise MCPError(INVALID_PARAMS, f"No resource {params.uri!r} (there is {SCHEMA_URI})")
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=SCHEMA_URI, mime_type="application/json", text=json.dumps(published_schema()))])

    return Server(name, version=version("kitsune"), title="Kitsune", instructions=instructions(None),
                  on_list_tools=list_tools, on_call_tool=call_tool, on_list_resources=list_resources,
                  on_read_resource=read_resource)
