"""``browser_sessions``: the agent's browser sessions and tombstones, and closing one (``/api/sessions``)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from mcp_gateway._caller import Caller

__all__ = ["sessions"]


async def sessions(caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    """One ``browser_sessions`` operation: list (the default) or close."""
    if args.get("op", "list") == "list":
        answer = await caller.bridge.get("/api/sessions", timeout=15.0)
    else:
        caller.sent = True  # the session's tabs close
        answer = await caller.bridge.delete(f"/api/sessions/{quote(args['name'], safe='')}", timeout=30.0)
    return answer if "error" in answer else {"ok": True, **answer}
