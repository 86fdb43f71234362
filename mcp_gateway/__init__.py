"""Kitsune's MCP gateway: the tools MCP clients use, over stdio (``kitsune mcp``) and streamable
HTTP (``/mcp`` on ``kitsune serve``), with direct-call checkpoints and elicitation.

The public names load on first use, so that importing a submodule (``kitsune mcp``'s light front,
``mcp_gateway._handshake``) does not load the MCP SDK.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp_gateway._caller import Caller
    from mcp_gateway._pages import PAGE_STATE_CHECKS
    from mcp_gateway.server import Gateway

__all__ = ["PAGE_STATE_CHECKS", "Caller", "Gateway"]

_HOMES = {"PAGE_STATE_CHECKS": "mcp_gateway._pages", "Caller": "mcp_gateway._caller", "Gateway": "mcp_gateway.server"}
"""The module of each public name."""


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
