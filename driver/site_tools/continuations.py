"""Continuation tokens: one-time, bound to a tab and an origin, short-lived, kept only as hashes.

A token is :data:`TOKEN_BYTES` random bytes; the store keeps its SHA-256 and
what it was issued for. It is redeemable once, by a document of the same origin in the same tab
(another frame of the tab may redeem it, another tab never), until it expires. Redeeming, expiring
and revoking are decided here and nowhere else. Time is the caller's clock (the loop's).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, TypeVar

from messages.tokens import new_token, token_hash

__all__ = ["TOKEN_BYTES", "Continuation", "Continuations", "Refusal"]

ChainT = TypeVar("ChainT")
TOKEN_BYTES = 32
"""Random bytes of a continuation token: the AES-256 key of its armed hand-off (:mod:`~driver.site_tools.armed`)."""


class Refusal(Enum):
    """Why a redemption was refused (a metric's outcome, never shown to the page)."""

    UNKNOWN = "unknown"
    """No such token: never issued, or its chain ended."""
    REPLAYED = "replayed"
    EXPIRED = "expired"
    OTHER_TAB = "other_tab"
    OTHER_ORIGIN = "other_origin"


@dataclass(slots=True, eq=False)
class Continuation(Generic[ChainT]):
    """What one token was issued for."""

    chain: ChainT
    tab: int
    origin: str
    expires_at: float
    digest: bytes = field(repr=False)
    redeemed: bool = False


class Continuations(Generic[ChainT]):
    """The node's outstanding tokens, by hash (one owner: the node's loop)."""

    def __init__(self) -> None:
        self._by_digest: dict[bytes, Continuation[ChainT]] = {}

    def __len__(self) -> int:
        return len(self._by_digest)

    def issue(self, chain: ChainT, tab: int, origin: str, expires_at: float) -> tuple[str, Continuation[ChainT]]:
        """A new token for ``chain`` (given to the page, never kept) and its record."""
        token = new_token(TOKEN_BYTES)
        continuation = Continuation(chain, tab, origin, expires_at, token_hash(token))
        self._by_digest[continuation.digest] = continuation
        return token, continuation

    def redeem(self, token: str, tab: int, origin: str, now: float) -> Continuation[ChainT] | Refusal:
        """Redeem ``token`` for a document of ``origin`` in ``tab``: its record, or why not."""
        continuation = self._by_digest.get(token_hash(token))
        if continuation is None:
            return Refusal.UNKNOWN
        if continuation.redeemed:
            return Refusal.REPLAYED
        if now >= continuation.expires_at:
            return Refusal.EXPIRED
        if tab != continuation.tab:
            return Refusal.OTHER_TAB
        if origin != continuation.origin:
            return Refusal.OTHER_ORIGIN
        continuation.redeemed = True
        return continuation

    def drop(self, continuation: Continuation[ChainT]) -> None:
        """Forget a token: its chain ended (a later redemption is refused as unknown)."""
        self._by_digest.pop(continuation.digest, None)
