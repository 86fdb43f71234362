"""Page states only a person resolves (sign in, a human check), as the gateway recognises them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from mcp_gateway._bridge import Bridge
from mcp_gateway._caller import Caller

__all__ = ["PAGE_FAILURES", "PAGE_STATE_CHECKS", "POLL_EVERY", "PageCheck", "current_tab"]

PageCheck = Callable[[Bridge, int], Awaitable[bool]]
"""Whether a stop the page resolves is resolved now on a tab (a failed read is not resolved)."""


def _hint_gone(reason: str) -> PageCheck:
    async def check(bridge: Bridge, tab: int) -> bool:
        answer = await bridge.get("/api/needs-user", params={"tabId": tab}, timeout=10.0)
        if "error" in answer:
            return False  # a failed read is not resolved
        return not (answer.get("needs_user") and answer.get("reason") == reason)

    check.__doc__ = f"Resolved once the tab no longer shows a needs-user hint with reason {reason!r}."
    return check


PAGE_STATE_CHECKS: dict[str, PageCheck] = {
    "sign_in": _hint_gone("sign_in"),
    "human_check": _hint_gone("human_check"),
}
"""Stops the page resolves, by ``state.reason`` (the spec's ``kitsune.server.PAGE_STATE_CHECKS``):
``browser_resume`` polls the check every second for up to ``wait`` seconds before it runs the call
again, and returns the stop again (with a new resume token, nothing sent) while it fails."""

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
