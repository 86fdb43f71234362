"""The tab-claim actor: the claim table of the core behind one actor (spec: Parallel)."""

from __future__ import annotations

from typing import Any

import pykka

from core.claims import Claim, ClaimTable
from messages.results import Failure

__all__ = ["ClaimsPort", "TabClaimActor"]


class TabClaimActor(pykka.ThreadingActor):
    """Owns the node's tab claims; every claim and release goes through its mailbox."""

    def __init__(self, table: ClaimTable | None = None) -> None:
        super().__init__()
        self._table = table or ClaimTable()

    def claim(self, call: int, owner: str, tab: int) -> Failure | None:
        return self._table.claim(call, owner, tab)

    def release(self, call: int, owner: str | None = None) -> None:
        self._table.release(call, owner)

    def held(self) -> dict[int, Claim]:
        return self._table.held()

    def conflicts(self) -> dict[str, int]:
        return self._table.conflicts()


class ClaimsPort:
    """The engine's view of the claims (``core.claims.TabClaims``).

    Claims and releases go through the claim actor's mailbox. The check before each write of a
    batch reads the actor's table directly (it is thread-safe): it sees every claim the actor
    has made, as a message answered at that moment would, without a round trip per write.
    """

    def __init__(self, actor: pykka.ActorRef[TabClaimActor], table: ClaimTable) -> None:
        self._proxy: Any = actor.proxy()
        self._table = table

    def claim(self, call: int, owner: str, tab: int) -> Failure | None:
        return self._proxy.claim(call, owner, tab).get()  # type: ignore[no-any-return]

    def check_write(self, call: int, tab: int) -> Failure | None:
        return self._table.check_write(call, tab)

    def release(self, call: int, owner: str | None = None) -> None:
        self._proxy.release(call, owner).get()
