"""``browser_tabs``: list, select and take over tabs, open and close them (tab handoff requests
keep no checkpoint: a held one is asked about, or answered with its confirm token)."""

from __future__ import annotations

from typing import Any

from mcp_gateway._caller import Caller
from mcp_gateway._direct import DirectCalls, act_timeout, unkept_stop
from mcp_gateway._tools import TOOLS

__all__ = ["tabs"]


async def tabs(direct: DirectCalls, caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    """One ``browser_tabs`` operation."""
    op = args.get("op", "list")
    if op == "list":
        listed = await caller.bridge.get("/api/tabs", timeout=15.0)
        return listed if "error" in listed else {"ok": True, **listed}
    tab = args.get("tabId")
    token = args.get("confirm_token")
    if op in ("select", "takeover"):
        body = {"op": op, "tabId": tab}
        caller.sent = True
        return await caller.bridge.post("/api/tabs", body, timeout=15.0)
    if op == "new":
        opened = {k: args[k] for k in ("url", "session") if args.get(k) is not None}
        command: dict[str, Any] = {"action": "newTab", **opened}
        first = {"op": "open", **opened}
    else:
        command = {"action": "closeTab", "tabId": tab}
        first = {"op": "close", "tabId": tab}

    async def resend(confirm: str) -> dict[str, Any]:
        return await direct.act(caller, command, confirm)

    if isinstance(token, str):
        answer = await resend(token)
    else:
        caller.sent = True
        answer = await caller.bridge.post("/api/tabs", first, timeout=act_timeout(command))
    outcome = await direct.settle(caller, TOOLS["browser_tabs"], command, answer, direct.approval_wait,
                                  resend=resend)
    if outcome.kind == "stop":
        return unkept_stop(caller, outcome, "A tab handoff request", "browser_tabs")
    return outcome.result
