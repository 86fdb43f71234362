"""A node's tenant quotas: checked before a ``newTab`` opens anything, and on every popup of an agent's page.

The counts follow the browser (:class:`~core.quotas.Held`): the tab registry counts each tab as it
appears and goes (a tab counts against the agent whose session it lives in), the session table each
session. A ``newTab`` reserves its tab (and its new session) before it opens them; on a refusal
nothing is opened. A popup an agent's page opens past a quota is closed at once and recorded: the
page opened it, not the agent, so no call fails for it. The rule is :mod:`core.quotas`'.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator

from core.quotas import Held, Quota, Scope, fair_share_refusal, quota_exceeded
from messages.contract import MAX_SESSIONS, MAX_TABS, QUOTA_SESSIONS, QUOTA_TABS
from messages.errors import KitsuneError

__all__ = ["Quotas"]

log = logging.getLogger(__name__)


class Quotas:
    """The quotas of one node's browser (on the loop); the node sets the limits."""

    def __init__(self, tabs: Held, sessions: Held) -> None:
        self.tabs = tabs
        self.sessions = sessions
        self.max_tabs = MAX_TABS
        self.max_sessions = MAX_SESSIONS
        self.limit_of: Callable[[str, Quota], int] = lambda agent, quota: QUOTA_TABS if quota == "tabs" \
            else QUOTA_SESSIONS
        """An agent's own quota of tabs or sessions (its entry's, else the node's)."""
        self.agents: int | None = None
        """How many agents are configured (None: any may come): while one holds nothing here, room is kept for it."""
        self.on_refused: Callable[[Quota, Scope, str], None] = lambda quota, scope, opener: None
        """Told of every refusal: which quota, its scope, and what opened (``newTab``, ``popup``)."""

    def refusal(self, agent: str | None, quota: Quota, *, movable: bool) -> KitsuneError | None:
        """Why ``agent`` may not have one more tab or session here now (None: it may). Past the node's cap
        a ``movable`` open (a new session placed by the fleet) is ``fleet_full``: another node may have room."""
        held, cap = (self.tabs, self.max_tabs) if quota == "tabs" else (self.sessions, self.max_sessions)
        tally = held.tally
        if tally.total >= cap:
            if movable:
                return KitsuneError("fleet_full", f"No node of the fleet has room for another of your {quota} "
                                    f"(this node holds {cap}, its most)", retryable=True)
            return quota_exceeded(quota, cap, "node", f"This node holds {cap} {quota}, its most (max_{quota}); "
                                  "close some, or open a new session on another node")
        if agent is None:
            return None
        limit = self.limit_of(agent, quota)
        if tally.of(agent) >= limit:
            return quota_exceeded(quota, limit, "agent", f"You hold {tally.of(agent)} {quota} on this node, your "
                                  f"quota ({limit}); close some first")
        holders = tally.holders()
        newcomer = self.agents is None or self.agents > len(holders.keys() | {agent})
        share = fair_share_refusal(cap, tally.total, holders, agent, newcomer)
        if share is not None:
            return quota_exceeded(quota, share, "node", f"You hold {tally.of(agent)} {quota} on this node, past "
                                  f"your fair share ({share} of {cap}), and the rest is kept for other agents")
        return None

    @contextlib.contextmanager
    def reserving(self, agent: str | None, *, new_session: bool, movable: bool) -> Iterator[None]:
        """Count a ``newTab``'s tab (and new session) while it opens them; raises the refusal, counting
        nothing, when a quota does not allow them."""
        for quota in ("sessions", "tabs") if new_session else ("tabs",):
            refused = self.refusal(agent, quota, movable=movable)
            if refused is not None:
                self._refused(refused, quota, "newTab")
                raise refused
        tab = self.tabs.reserve(agent)
        session = self.sessions.reserve(agent) if new_session else None
        try:
            yield
        finally:
            self.tabs.unreserve(agent, tab)
            if session is not None:
                self.sessions.unreserve(agent, session)

    def admits_page(self, agent: str | None) -> bool:
        """Whether a page that appeared in ``agent``'s session may stay: a ``newTab``'s awaited one, or a
        popup within the quotas. A refused popup is recorded here; its page is to be closed at once."""
        if agent is None or self.tabs.awaited(agent):
            return True
        refused = self.refusal(agent, "tabs", movable=False)
        if refused is None:
            return True
        self._refused(refused, "tabs", "popup")
        log.warning("a popup of agent %s's page was closed: %s", agent, refused.message)
        return False

    def _refused(self, error: KitsuneError, quota: Quota, opener: str) -> None:
        if error.code != "quota_exceeded":
            return  # fleet_full: the fleet's room, not a quota
        scope = (error.state or {}).get("scope")
        self.on_refused(quota, "agent" if scope == "agent" else "node", opener)
