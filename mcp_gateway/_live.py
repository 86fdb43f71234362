"""Live View through the gateway: links a person opens to see and act in a tab, and their hand-backs.
(``browser_live_view`` itself, whose grant of control may be held for approval, is in ``_tabs``.)

The bridge makes the links (``POST /api/tabs {"op": "live_view"}``) and counts the times a person
pressed "Done — hand back" on a tab (``GET /api/live/handbacks``). A ``needs_user`` answer carries
the link of its tab when the agent's policy allows Live View, and a wait on a tab's stop listens
for a hand-back, so it goes on at once instead of at its next poll.
"""

from __future__ import annotations

from typing import Any

import anyio

from mcp_gateway._bridge import Bridge
from mcp_gateway._caller import Caller

__all__ = ["HANDBACK_WAIT_MAX", "LINK_TIMEOUT", "handback_or_sleep", "handbacks", "handed_back", "live_view_link",
           "with_link"]

HANDBACK_WAIT_MAX = 30.0
"""Seconds the bridge holds one ``GET /api/live/handbacks`` at most."""

LINK_TIMEOUT = 15.0
"""Seconds the bridge gets to make a link (the tab may be on another node)."""


async def live_view_link(caller: Caller, tab: Any, reason: Any = None) -> dict[str, Any] | None:
    """A ``needs_user`` answer's ``live_view``: ``{url, expires_in, tabId, control, reason}`` (``control``: whether
    it acts, as the agent's policy gives: view-only under ask_before_act or read_only); None without a tab, or
    when the bridge makes none (the agent's policy allows no Live View, the tab closed)."""
    if not isinstance(tab, int) or isinstance(tab, bool):
        return None
    answer = await caller.bridge.post("/api/tabs", {"op": "live_view", "tabId": tab}, timeout=LINK_TIMEOUT)
    if "error" in answer or not isinstance(answer.get("url"), str):
        return None
    link: dict[str, Any] = {"url": answer["url"], "expires_in": answer.get("expires_in"), "tabId": tab}
    if isinstance(answer.get("control"), bool):
        link["control"] = answer["control"]
    if isinstance(reason, str):
        link["reason"] = reason
    return link


def with_link(result: dict[str, Any], link: dict[str, Any] | None) -> dict[str, Any]:
    """``result`` with its Live View link, its ``hint`` saying what the link is for."""
    if link is None:
        return result
    expires = link.get("expires_in")
    lasts = f", valid {expires:g} s" if isinstance(expires, int | float) else ""
    if link.get("control") is False:
        told = (f"Show the user live_view.url: open this link to see tab {link['tabId']} live (view only{lasts}). "
                "If they must act in it themselves, call browser_live_view with control: true (the user approves "
                "that link first).")
    else:
        told = (f"Show the user live_view.url: open this link to act in tab {link['tabId']} (one person at a time"
                f"{lasts}); their \"Done — hand back\" there ends their turn.")
    hint = result.get("hint")
    return {**result, "live_view": link, "hint": f"{hint} {told}" if isinstance(hint, str) else told}


async def handbacks(bridge: Bridge, tab: int, since: int | None = None, wait: float = 0.0) -> int | None:
    """How many times a person handed ``tab`` back; with ``since``, once past it or after ``wait`` seconds
    (at most 30). None when the bridge does not say (an older bridge, a tab not open)."""
    params: dict[str, Any] = {"tabId": tab}
    if since is not None:
        wait = min(max(wait, 0.0), HANDBACK_WAIT_MAX)
        params.update(since=since, wait=round(wait, 3))
    answer = await bridge.get("/api/live/handbacks", params=params, timeout=wait + 10.0)
    count = answer.get("handbacks")
    return count if "error" not in answer and isinstance(count, int) else None


async def handback_or_sleep(bridge: Bridge, tab: int, since: int | None, seconds: float) -> int | None:
    """Wait ``seconds``, or less when ``tab`` is handed back past ``since``: the count then (None when the
    bridge counts no hand-backs: ``since`` None, or its answer an error; that wait sleeps)."""
    started = anyio.current_time()
    count = None if since is None else await handbacks(bridge, tab, since, seconds)
    if since is None or count is None or count <= since:  # no hand-back: the wait lasts its seconds
        await anyio.sleep(max(0.0, seconds - (anyio.current_time() - started)))
    return count


async def handed_back(bridge: Bridge, tab: int, seconds: float) -> bool:
    """Whether a person hands ``tab`` back within ``seconds`` (False at once when the bridge counts none)."""
    since = await handbacks(bridge, tab)
    deadline = anyio.current_time() + seconds
    while since is not None and (left := deadline - anyio.current_time()) > 0:
        count = await handback_or_sleep(bridge, tab, since, min(left, HANDBACK_WAIT_MAX))
        if count is None:
            return False
        if count > since:
            return True
    return False
