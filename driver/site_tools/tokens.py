"""The continuation tokens of one browser's site-tool chains, from issue to end (on the node's loop only).

Each invocation of a tool (but a form's) is issued a token as it starts, which the page's script holds: the
tool's first ``requestToken`` answers it without a round trip and tells the node it was taken. It is
outstanding (redeemable within its lifetime, counted as requested) only from then, and dropped unseen when
the invocation settles or its document goes without asking. A further ``requestToken`` is issued as asked.
An outstanding token is redeemed once, expires (its chain ends ``continuation_expired``), or is revoked when
its chain ends another way. The store keeps hashes only (:mod:`~driver.site_tools.continuations`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from driver.errors import Stop
from driver.site_tools.chains import Chain, Document, Invocation
from driver.site_tools.continuations import Continuation, Continuations, Refusal
from messages.events import ContinuationExpired, ContinuationRequested, ContinuationRevoked

__all__ = ["ChainTokens"]

Emit = Callable[..., None]
"""Records an event of a chain: ``emit(chain, kind, **fields)``."""


class ChainTokens:
    """Issues, holds and ends the tokens of the chains; ``ttl`` is their lifetime as it is now, ``emit`` records a
    chain's event and ``ended`` counts how a token ended (``expired``, ``revoked``)."""

    def __init__(self, ttl: Callable[[], float], emit: Emit, ended: Callable[[str], None]) -> None:
        self._ttl, self._emit, self._ended = ttl, emit, ended
        self._store: Continuations[Chain] = Continuations()

    def __len__(self) -> int:
        return len(self._store)

    def reserve(self, chain: Chain, invocation: Invocation) -> str:
        """The token ``invocation`` may ask for, issued as it starts (the page's script holds it)."""
        token, invocation.reserved = self._store.issue(chain, chain.tab, invocation.document.origin,
                                                       asyncio.get_running_loop().time() + self._ttl())
        return token

    def take(self, chain: Chain, invocation: Invocation) -> bool:
        """The tool asked for its reserved token: outstanding from now on; False when there is none to take (taken
        already) or the invocation has settled."""
        continuation = invocation.reserved
        if continuation is None or invocation.settled.is_set():
            self.release(invocation)
            return False
        invocation.reserved = None
        self._outstanding(chain, invocation, continuation)
        return True

    def issue(self, chain: Chain, invocation: Invocation) -> str:
        """A token beyond the reserved one, issued as the tool asks (its invocation has not settled)."""
        token, continuation = self._store.issue(chain, chain.tab, invocation.document.origin, 0.0)
        self._outstanding(chain, invocation, continuation)
        return token

    def _outstanding(self, chain: Chain, invocation: Invocation, continuation: Continuation[Chain]) -> None:
        loop = asyncio.get_running_loop()
        continuation.expires_at = loop.time() + self._ttl()
        chain.outstanding[continuation] = loop.call_later(self._ttl(), self._expire, continuation)
        invocation.tokens += 1
        self._emit(chain, ContinuationRequested, origin=invocation.document.origin)

    def release(self, invocation: Invocation) -> None:
        """Drop the invocation's reserved token if the tool never asked for it."""
        if invocation.reserved is not None:
            self._store.drop(invocation.reserved)
            invocation.reserved = None

    def redeem(self, token: str, document: Document) -> Continuation[Chain] | Refusal:
        """Redeem ``token`` for ``document`` (of a chain that has not ended): its record, still outstanding until
        :meth:`redeemed`, or why not. A reserved token the node has not heard taken yet (the page's script gave it)
        is taken first."""
        found = self._store.redeem(token, document.tab, document.origin, asyncio.get_running_loop().time())
        if isinstance(found, Refusal) or found.chain.ended:
            return found if isinstance(found, Refusal) else Refusal.UNKNOWN
        for earlier in found.chain.invocations:
            if earlier.reserved is found and not self.take(found.chain, earlier):
                return Refusal.UNKNOWN
        return found

    def redeemed(self, continuation: Continuation[Chain]) -> None:
        """The redemption stands: the token is no longer outstanding."""
        continuation.chain.outstanding.pop(continuation).cancel()
        continuation.chain.redeemed.append(continuation)

    def revoke(self, chain: Chain, reason: str) -> None:
        """Revoke the chain's outstanding tokens (``reason``: how its call ended)."""
        for continuation, timer in list(chain.outstanding.items()):
            timer.cancel()
            self._store.drop(continuation)
            self._emit(chain, ContinuationRevoked, reason=reason)
            self._ended("revoked")
        chain.outstanding.clear()

    def end(self, chain: Chain, reason: str) -> None:
        """The chain's step is over: its tokens revoked, redeemed and reserved ones forgotten."""
        self.revoke(chain, reason)
        for continuation in chain.redeemed:
            self._store.drop(continuation)
        for invocation in chain.invocations:
            self.release(invocation)

    def _expire(self, continuation: Continuation[Chain]) -> None:
        chain = continuation.chain
        if chain.outstanding.pop(continuation, None) is None:
            return
        self._store.drop(continuation)
        self._emit(chain, ContinuationExpired)
        self._ended("expired")
        ttl = self._ttl()
        chain.fail(Stop("continuation_expired", f"callSiteTool {chain.tool}: a continuation token expired unredeemed "
                        f"after {ttl:g}s", state={"tabId": chain.tab, "tool": chain.tool,
                                                  "reason": "continuation_expired"}))


