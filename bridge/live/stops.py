"""A Live View link in the answer of a container call that stopped where a person can help.

A call that stops (status not ok, a checkpoint kept) on a step held for approval, or on a tab
whose page shows a needs-user hint (a sign-in form, a human check), answers with
``"live_view": {"tabId", "url", "expires_in", "control", "reason"}`` when the agent's policy allows
Live View: the agent shows the link, the person acts in the tab and hands it back, and the agent
resumes. Under ``ask_before_act`` or ``read_only`` the link is view-only (``bridge.live.grants``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bridge.services import LiveLinkService
from messages.errors import KitsuneError

__all__ = ["with_live_view"]

_STOPPED = frozenset({"failed", "held", "unknown"})


def _stops(progress: Any) -> Iterator[tuple[int, str]]:
    """(tab, status) of each step that stopped, in order, sequences of a parallel included."""
    for record in progress if isinstance(progress, list) else ():
        if not isinstance(record, dict):
            continue
        if record.get("status") in _STOPPED and isinstance(record.get("tabId"), int):
            yield record["tabId"], record["status"]
        for sequence in record.get("sequences") or ():
            yield from _stops(sequence)
        yield from _stops(record.get("steps"))


async def with_live_view(body: dict[str, Any], agent: str, base_url: str, views: LiveLinkService) -> dict[str, Any]:
    """``body`` with a Live View link of the tab it stopped on, when a person can act there."""
    if body.get("status") in (None, "ok") or "resume_token" not in body or not views.allowed(agent):
        return body
    for tab, status in _stops(body.get("progress")):
        try:
            reason = "approval" if status == "held" else (await views.page_hint(tab)).get("reason")
            if reason is None:
                continue
            return {**body, "live_view": {**await views.issue(tab, agent, base_url), "reason": reason}}
        except KitsuneError:  # the tab closed meanwhile, or it is another agent's: no link
            continue
    return body
