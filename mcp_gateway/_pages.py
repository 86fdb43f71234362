"""Page states only a person resolves (sign in, a human check), as the gateway recognises them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from mcp_gateway._bridge import Bridge
from mcp_gateway._caller import Caller

__all__ = ["PAGE_FAILURES", "PAGE_STATE_CHECKS", "POLL_EVERY", "PageCheck", "claimed_by_a_person", "current_tab",
           "not_held"]

PageCheck = Callable[[Bridge, int], Awaitable[bool]]
"""Whether a stop the page resolves is resolved now on a tab (a failed read is not resolved)."""


def _hint_gone(reason: str) -> PageCheck:
    async def check(bridge: Bridge, tab: int) -> bool:
        answer = await bridge.get("/api/needs-user", params={"tabId": tab}, timeout=10.0)
        if "error" in answer or (answer.get("needs_user") and answer.get("reason") == reason):
            return False  # a failed read is not resolved
        return await not_held(bridge, tab)

    check.__doc__ = (f"Resolved once the tab no longer shows a needs-user hint with reason {reason!r} and no "
                     "person holds it in Live View (they pressed Done).")
    return check


async def not_held(bridge: Bridge, tab: int) -> bool:
    """Whether no person holds ``tab`` in Live View now (``held: false`` of ``/api/live/handbacks``): a person
    who signed in there and has not pressed Done still holds it, and a write sent then is refused
    ``tab_claimed``. A failed read is not resolved."""
    answer = await bridge.get("/api/live/handbacks", params={"tabId": tab}, timeout=10.0)
    return "error" not in answer and answer.get("held") is False


def claimed_by_a_person(result: Mapping[str, Any]) -> bool:
    """Whether ``result`` is the refusal of a write to a tab a person holds in Live View (nothing was sent)."""
    state = result.get("state")
    return (result.get("code") == "tab_claimed" and isinstance(state, dict) and state.get("by") == "user"
            and state.get("reason") == "live_view")


PAGE_STATE_CHECKS: dict[str, PageCheck] = {
    "sign_in": _hint_gone("sign_in"),
    "human_check": _hint_gone("human_check"),
}
"""Stops the page resolves, by ``state.reason`` (the spec's ``kitsune.server.PAGE_STATE_CHECKS``):
``browser_resume`` polls the check every second for up to ``wait`` seconds before it runs the call
again, and returns the stop again (with a new resume token, nothing sent) while it fails. A check passes
only once the tab is handed back too (:func:`not_held`)."""

POLL_EVERY = 1.0
"""Seconds between checks of a page state."""

PAGE_FAILURES = frozenset({"not_found", "not_actionable", "not_editable", "timeout", "wrong_element",
                           "option_not_found"})
"""Failures of a request that sent nothing to the page because its target was not there: on a tab
that shows a needs-user hint they are a stop the page resolves."""


async def current_tab(caller: Caller) -> int | None:
    """The caller's current tab at the bridge (None when it has none, or the tabs cannot be listed)."""
    tabs = await caller.bridge.get("/api/tabs", timeout=15.0)
    current = tabs.get("current")
    return current if isinstance(current, int) and "error" not in tabs else None
