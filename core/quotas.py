"""Tenant quotas, the pure part: what each agent holds of a node, and the fair share when it is full.

An agent may hold at most its quota of tabs and of sessions (``quotas``), and a node at most its cap
(``max_tabs``, ``max_sessions``). Between the two, the node is shared fairly (:func:`fair_share_refusal`):

- the *share* of an agent is ``cap // n`` (at least 1), where ``n`` counts the agents holding some of
  the node (the asker included) and one more when another configured agent holds none (a newcomer);
- an agent below its share may take what is free;
- an agent at or past its share may take one more only while the room left after it covers what every
  other holder still lacks of its share, plus one for a newcomer.

So one agent flooding a node stops one short of the cap (or earlier when others hold less than their
share): another agent's new session always finds a tab, and the room freed as the flooder closes tabs
goes to the others first, until each has its share. Nothing is taken away from an agent that holds
more than its share: it is only refused more. Counts are kept as things open and close (:class:`Tally`);
a check costs one pass over the agents holding some of the node, never over its tabs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from messages.errors import KitsuneError

__all__ = ["Held", "Quota", "Scope", "Tally", "fair_share", "fair_share_refusal", "quota_exceeded"]

Quota = Literal["tabs", "sessions"]
Scope = Literal["agent", "node"]


class Tally:
    """How many of one thing (tabs, sessions) each agent holds on a node, and in all (None: held by nobody's
    agent, a user tab: counted in the total only)."""

    def __init__(self) -> None:
        self._held: dict[str, int] = {}
        self.total = 0

    def add(self, agent: str | None, count: int = 1) -> None:
        self.total += count
        if agent is not None:
            self._held[agent] = self._held.get(agent, 0) + count

    def remove(self, agent: str | None, count: int = 1) -> None:
        self.total = max(0, self.total - count)
        if agent is not None and agent in self._held:
            left = self._held[agent] - count
            if left > 0:
                self._held[agent] = left
            else:
                del self._held[agent]

    def of(self, agent: str) -> int:
        return self._held.get(agent, 0)

    def holders(self) -> Mapping[str, int]:
        """The agents holding at least one, with how many."""
        return self._held


class Held:
    """A :class:`Tally` with reservations: a ``newTab`` counts its tab (and session) before it opens, so that
    two opening at once are both counted; what then appears meets a reservation and is not counted twice."""

    def __init__(self) -> None:
        self.tally = Tally()
        self._awaited: dict[str | None, list[object]] = {}

    def awaited(self, agent: str | None) -> bool:
        """Whether a reservation of ``agent`` waits for its tab (or session)."""
        return bool(self._awaited.get(agent))

    def reserve(self, agent: str | None) -> object:
        """Count one for ``agent`` now; the reservation, to end with :meth:`unreserve`."""
        reservation = object()
        self.tally.add(agent)
        self._awaited.setdefault(agent, []).append(reservation)
        return reservation

    def unreserve(self, agent: str | None, reservation: object) -> None:
        """A reservation ends: uncounted, unless something arrived for it (then that stays counted)."""
        waiting = self._awaited.get(agent, [])
        if any(r is reservation for r in waiting):
            waiting[:] = [r for r in waiting if r is not reservation]
            self.tally.remove(agent)
        if not waiting:
            self._awaited.pop(agent, None)

    def arrived(self, agent: str | None) -> None:
        """A tab (session) of ``agent`` appeared: it meets its oldest reservation, or is counted now."""
        waiting = self._awaited.get(agent)
        if waiting:
            waiting.pop(0)
        else:
            self.tally.add(agent)

    def left(self, agent: str | None) -> None:
        self.tally.remove(agent)


def fair_share(cap: int, holders: Mapping[str, int], agent: str, newcomer: bool) -> int:
    """``agent``'s fair share of a node's ``cap``: split between the agents holding some (``agent``
    included), and a newcomer when one may come; at least 1."""
    n = len(holders.keys() - {agent}) + 1 + (1 if newcomer else 0)
    return max(1, cap // n)


def fair_share_refusal(cap: int, total: int, holders: Mapping[str, int], agent: str, newcomer: bool) -> int | None:
    """The share ``agent`` is held to when it may not take one more of ``cap`` (``total`` held in all, by
    ``holders`` and others), or None when it may. The cap itself is checked apart (node full)."""
    share = fair_share(cap, holders, agent, newcomer)
    if holders.get(agent, 0) < share:
        return None
    owed = sum(max(0, share - held) for other, held in holders.items() if other != agent)
    owed += 1 if newcomer else 0
    return None if cap - total - 1 >= owed else share


def quota_exceeded(quota: Quota, limit: int, scope: Scope, message: str) -> KitsuneError:
    """The refusal of a tab or session past a quota: nothing was opened."""
    return KitsuneError("quota_exceeded", message, retryable=False,
                        state={"quota": quota, "limit": limit, "scope": scope})
