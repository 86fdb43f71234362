"""``browser_tabs``: list, select and take over tabs, open them (at a URL: answering the page) and close them;
``browser_live_view``: a tab's Live View link. Their holds (ask-before-act: opening or closing a tab, a link that
controls) keep no checkpoint: a held request is asked about in the client's prompt, or answered with its confirm
token (``DirectCalls.settle``)."""

from __future__ import annotations

from typing import Any

from mcp_gateway._caller import Caller
from mcp_gateway._direct import DirectCalls, act_timeout, unkept_stop, with_page
from mcp_gateway._live import LINK_TIMEOUT
from mcp_gateway._pages import current_tab
from mcp_gateway._results import error
from mcp_gateway._tools import TOOLS

__all__ = ["live_view", "tabs"]


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
        opened = {k: args[k] for k in ("url", "session", "persist") if args.get(k) is not None}
        command: dict[str, Any] = {"action": "newTab", **opened}
        first = {"op": "open", **{k: v for k, v in opened.items() if k != "persist"}}
        if "persist" in opened:  # the HTTP API's session object
            first["session"] = {"name": opened.get("session", "default"), "persist": opened["persist"]}
    else:
        forget = {"forget": args["forget"]} if args.get("forget") is not None else {}
        command = {"action": "closeTab", "tabId": tab, **forget}
        first = {"op": "close", "tabId": tab, **forget}

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
    return await _with_page(caller, args, outcome.result)


async def _with_page(caller: Caller, args: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    """A tab opened at a URL answers the page it arrived on, as a navigation does (``snapshot: "none"``: not)."""
    tab = result.get("tabId")
    if args.get("op") != "new" or not args.get("url") or args.get("snapshot", "diff") != "diff" or "error" in result \
            or not isinstance(tab, int):
        return result
    return await with_page(caller, tab, result)


async def live_view(direct: DirectCalls, caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    """``browser_live_view``: the bridge's link to the tab (the current one when absent), or its refusal. A link
    that controls, asked for under ask-before-act, is held: asked about in the client's prompt (approved, it is
    asked again with the confirm token and answers the link), or answered with its confirm token."""
    tab = args.get("tabId")
    if tab is None:
        tab = await current_tab(caller)
    if tab is None:
        return error("no_tab", "There is no current tab; open one with browser_tabs or name tabId")
    body: dict[str, Any] = {"op": "live_view", "tabId": tab}
    for name in ("control", "mode"):
        if args.get(name) is not None:
            body[name] = args[name]
    command = {"action": "liveViewDevtools" if args.get("mode") == "devtools" else "liveViewControl",
               "tabId": tab}  # what an approval prompt names

    async def resend(confirm: str) -> dict[str, Any]:
        return await caller.bridge.post("/api/tabs", {**body, "confirm_token": confirm}, timeout=LINK_TIMEOUT)

    token = args.get("confirm_token")
    answer = await (resend(token) if isinstance(token, str) else
                    caller.bridge.post("/api/tabs", body, timeout=LINK_TIMEOUT))
    outcome = await direct.settle(caller, TOOLS["browser_live_view"], command, answer, direct.approval_wait,
                                  resend=resend)
    if outcome.kind == "stop":
        return unkept_stop(caller, outcome, "A Live View link that controls", "browser_live_view")
    return outcome.result
