"""Kitsune's MCP gateway: the tools MCP clients use, over stdio (``kitsune mcp``) and streamable
HTTP (``/mcp`` on ``kitsune serve``), with direct-call checkpoints and elicitation."""

from mcp_gateway._caller import Caller
from mcp_gateway._pages import PAGE_STATE_CHECKS
from mcp_gateway.server import Gateway

__all__ = ["PAGE_STATE_CHECKS", "Caller", "Gateway"]
