"""A fork's new tabs: one opened from each of the original task's pages that is open, never the same tab.

Each opens as a direct ``newTab`` of the forking agent, in its calls' session (the request's), so it
passes the agent's policy and URL lists and is audited like any; in the browser session of the tab it
copies (a reuse session: a one-shot session is its own call's), on that tab's node. A tab that does not
open closes the ones opened before it: a fork fails with nothing left.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

from core.session_names import ONE_SHOT
from messages.commands import CloseTab, Command, NewTab
from messages.errors import KitsuneError
from messages.results import Done, Outcome

__all__ = ["close_copies", "open_copies"]


class _Acting(Protocol):
    async def act(self, agent: str, command: Command, tab: int | None) -> tuple[Outcome, int]: ...


async def open_copies(node: _Acting, agent: str, pages: list[dict[str, Any]]) -> list[int]:
    """New tabs of ``agent`` at the URLs of ``pages`` (the original's tabs as the fleet describes them, in the
    task's order); the first failure raised, the tabs opened before it closed."""
    opened: list[int] = []
    try:
        for page in pages:
            held = page.get("session")
            session = held.get("name") if isinstance(held, dict) and held.get("agent") == agent else None
            reused = isinstance(session, str) and session != ONE_SHOT and not session.startswith(f"{ONE_SHOT}:")
            command = NewTab(url=page.get("url") or None, node=page.get("node"), session=session if reused else None)
            outcome, _ = await node.act(agent, command, None)
            if not isinstance(outcome, Done):  # a hold's confirm token stays out: it approved no fork
                failure = outcome.failure
                raise KitsuneError(failure.code, f"fork: tab {page['tabId']}'s copy did not open: {failure.error}",
                                   state={"tabId": page["tabId"]}, retryable=failure.retryable)
            opened.append(int(outcome.value["tabId"]))
    except BaseException:
        await close_copies(node, agent, opened)
        raise
    return opened


async def close_copies(node: _Acting, agent: str, tabs: list[int]) -> None:
    """Close the tabs a fork opened (it failed after): each as far as it can be."""
    for tab in tabs:
        with contextlib.suppress(Exception):
            await node.act(agent, CloseTab(tab_id=tab), tab)
