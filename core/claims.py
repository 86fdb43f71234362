"""Tab claims of parallel sequences (spec: Parallel), as one table with a lock.

A sequence claims the tabs it writes for its call. Another sequence of the same call that
writes a claimed tab gets ``tab_owned``; another call gets ``tab_claimed`` while the claiming
call is in progress. Claims are released when their call ends.

The lock is the one place this module touches threads, and why: a parallel's sequences run on
threads of their own (sequence actors on a node, ``ThreadedSequences`` in tests) and all claim
through this one table, which checks every write of every call. A lock makes each claim atomic
at the cost of an uncontended acquire; an actor in front of the table gave the same order at the
cost of a mailbox round trip per write, and held no state of its own.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from typing import Protocol

from messages.results import Failure

__all__ = ["Claim", "ClaimTable", "TabClaims"]


@dataclass(frozen=True, slots=True)
class Claim:
    """Who holds a tab."""

    call: int
    """The call whose parallel claimed it."""
    owner: str
    """The claiming sequence's path (``"0.1"``)."""


class TabClaims(Protocol):
    """The port the engine claims tabs through."""

    def claim(self, call: int, owner: str, tab: int) -> Failure | None:
        """Claim ``tab`` for sequence ``owner`` of ``call``; the conflict, if any."""

    def check_write(self, call: int, tab: int) -> Failure | None:
        """A write outside a parallel: ``tab_claimed`` when another call holds the tab."""

    def release(self, call: int, owner: str | None = None) -> None:
        """Drop the claims of one sequence, or of the whole call."""


class ClaimTable:
    """In-memory claims of one node, safe to call from any thread; a KV bucket extends it to a fleet."""

    def __init__(self) -> None:
        self._claims: dict[int, Claim] = {}
        self._conflicts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def claim(self, call: int, owner: str, tab: int) -> Failure | None:
        with self._lock:
            holder = self._claims.get(tab)
            if holder is None or holder == Claim(call, owner):
                self._claims[tab] = Claim(call, owner)
                return None
        return self._conflict(holder, call, tab)

    def check_write(self, call: int, tab: int) -> Failure | None:
        with self._lock:
            holder = self._claims.get(tab)
        return None if holder is None or holder.call == call else self._conflict(holder, call, tab)

    def _conflict(self, holder: Claim, call: int, tab: int) -> Failure:
        failure = _conflict(holder, call, tab)
        with self._lock:
            self._conflicts[failure.code] += 1
        return failure

    def conflicts(self) -> dict[str, int]:
        """Conflicts answered so far, by code (``tab_owned``, ``tab_claimed``)."""
        with self._lock:
            return dict(self._conflicts)

    def release(self, call: int, owner: str | None = None) -> None:
        with self._lock:
            for tab in [t for t, c in self._claims.items() if c.call == call and owner in (None, c.owner)]:
                del self._claims[tab]

    def unclaim(self, tab: int, claim: Claim) -> None:
        """Drop ``claim`` of ``tab``, if it still holds it (a claim that could not be recorded)."""
        with self._lock:
            if self._claims.get(tab) == claim:
                del self._claims[tab]

    def held(self) -> dict[int, Claim]:
        """Every claim, by tab."""
        with self._lock:
            return dict(self._claims)


def _conflict(holder: Claim, call: int, tab: int) -> Failure:
    if holder.call == call:
        return Failure(f"Tab {tab} is claimed by sequence {holder.owner} of this parallel", "tab_owned",
                       False, {"tabId": tab, "sequence": holder.owner})
    return Failure(f"Tab {tab} is written by call {holder.call}, a parallel in progress", "tab_claimed",
                   True, {"tabId": tab, "call": holder.call})
