"""The continuation tokens of one browser's site-tool chains, from issue to end (on the node's loop only).

Each invocation of a tool (but a form's) is issued a token as it starts, which the page's script holds: the
tool's first ``requestToken`` answers it without a round trip and tells the node it was taken. It is
outstanding (redeemable within its lifetime, counted as requested) only from then, and dropped unseen when
the invocation settles or its document goes without asking. A further ``requestToken`` is issued as asked.
An outstanding token is redeemed once, expires (its chain ends ``continuation_expired``), or is revoked when
its chain ends another way. The store keeps hashes only (:mod:`~driver.site_tools.continuations`).

A chain's reserved tokens are armed ahead (:mod:`~driver.site_tools.armed`): one script hands the top documents
they lead to what redeeming each gives, :data:`ARMED_AHEAD` documents at a time; the invocation each redemption
starts is made ahead (:class:`Ahead`: its id and its own reserved token, held in clear only until a hand-off is
sealed under it). A token made ahead goes with the token it was made for; the scripts leave the tab as the chain
ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from driver.errors import Stop
from driver.site_tools.armed import armed_script
from driver.site_tools.chains import Chain, Document, Invocation, new_invocation_id
from driver.site_tools.continuations import Continuation, Continuations, Refusal
from messages.events import ContinuationExpired, ContinuationRequested, ContinuationRevoked

__all__ = ["ARMED_AHEAD", "MAX_CHAIN_SCRIPTS", "Ahead", "ChainTokens", "Install"]

Emit = Callable[..., None]
"""Records an event of a chain: ``emit(chain, kind, **fields)``."""
Install = Callable[[Chain, str], "Callable[[], None] | None"]
"""Adds an init script to the tab of a chain: the call that takes it out again (None: the tab has no channel)."""
ARMED_AHEAD = 3
"""Documents one script of a chain hands off to: the token an invocation holds, the one the invocation its
redemption starts will hold, and the one after."""
MAX_CHAIN_SCRIPTS = 4
"""Scripts one chain adds to its tab at most: its documents past them ask the node."""


@dataclass(slots=True, eq=False)
class Ahead:
    """The invocation a redemption of an armed token starts, made before its document exists."""

    id: str
    reserved: Continuation[Chain]
    """The token it may ask for."""
    token: str = field(repr=False)
    """That token in clear while no hand-off is sealed under it ('' after: the page has it from the hand-off)."""


class ChainTokens:
    """Issues, holds and ends the tokens of the chains; ``ttl`` is their lifetime as it is now, ``emit`` records a
    chain's event and ``ended`` counts how a token ended (``expired``, ``revoked``)."""

    def __init__(self, ttl: Callable[[], float], emit: Emit, ended: Callable[[str], None],
                 install: Install | None = None) -> None:
        self._ttl, self._emit, self._ended, self._install = ttl, emit, ended, install
        self._store: Continuations[Chain] = Continuations()
        self._aheads: dict[Continuation[Chain], Ahead] = {}
        """The invocation each armed token's hand-off starts (``install`` given: the node's)."""
        self._scripts: dict[Chain, list[Callable[[], None]]] = {}
        """What takes each chain's scripts out of its tab."""

    def __len__(self) -> int:
        return len(self._store)

    def reserve(self, chain: Chain, invocation: Invocation, ahead: Ahead | None = None) -> str:
        """The token ``invocation`` may ask for, issued as it starts (the page's script holds it), or made ahead with
        it (``ahead``: it started from an armed token's hand-off, which gave the page the token; '' is returned).
        Armed for the top documents it leads to, if it is not yet."""
        deadline = asyncio.get_running_loop().time() + self._ttl()
        if ahead is None:
            token, invocation.reserved = self._store.issue(chain, chain.tab, invocation.document.origin, deadline)
        else:
            token, invocation.reserved, ahead.token = ahead.token, ahead.reserved, ""
            invocation.reserved.expires_at = deadline
        if invocation.reserved not in self._aheads:
            self._arm(chain, invocation.reserved, token)
        return "" if ahead is not None else token

    def _arm(self, chain: Chain, continuation: Continuation[Chain], token: str) -> None:
        """Arm ``continuation`` (``token``: it in clear) and the tokens its redemption leads to, in one script."""
        if not token or self._install is None or len(self._scripts.get(chain, ())) >= MAX_CHAIN_SCRIPTS:
            return
        made: list[tuple[Continuation[Chain], Ahead]] = []
        hand_offs: list[tuple[str, dict[str, Any]]] = []
        for _ in range(ARMED_AHEAD):
            next_token, reserved = self._store.issue(chain, chain.tab, continuation.origin, continuation.expires_at)
            ahead = Ahead(new_invocation_id(), reserved, next_token)
            hand_offs.append((token, {"invocation": ahead.id, "token": next_token, "input": chain.input}))
            made.append((continuation, ahead))
            continuation, token = reserved, next_token
        script = armed_script(made[0][0].origin, self._ttl(), hand_offs)
        remove = None if script is None else self._install(chain, script)
        if remove is None:
            for _, ahead in made:
                self._store.drop(ahead.reserved)
            return
        self._scripts.setdefault(chain, []).append(remove)
        for armed, ahead in made:
            self._aheads[armed] = ahead
            if ahead is not made[-1][1]:
                ahead.token = ""  # a hand-off is sealed under it: only the last one's is needed, for the next script

    def _drop(self, continuation: Continuation[Chain]) -> None:
        """Forget a token, and those made ahead of it (no one holds them: their hand-offs open with it)."""
        dropping: Continuation[Chain] | None = continuation
        while dropping is not None:
            self._store.drop(dropping)
            ahead = self._aheads.pop(dropping, None)
            dropping = None if ahead is None else ahead.reserved

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
            self._drop(invocation.reserved)
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

    def armed(self, continuation: Continuation[Chain]) -> str | None:
        """The id of the invocation the hand-off of ``continuation`` starts (None: it is not armed)."""
        ahead = self._aheads.get(continuation)
        return None if ahead is None else ahead.id

    def redeemed(self, continuation: Continuation[Chain], *, from_hand_off: bool = False) -> Ahead | None:
        """The redemption stands: the token is no longer outstanding; the invocation its hand-off starts when the
        document redeemed it from there (``from_hand_off``), else the tokens made ahead of it are dropped."""
        continuation.chain.outstanding.pop(continuation).cancel()
        continuation.chain.redeemed.append(continuation)
        ahead = self._aheads.pop(continuation, None)
        if ahead is not None and not from_hand_off:
            self._drop(ahead.reserved)
            return None
        return ahead

    def revoke(self, chain: Chain, reason: str) -> None:
        """Revoke the chain's outstanding tokens (``reason``: how its call ended)."""
        for continuation, timer in list(chain.outstanding.items()):
            timer.cancel()
            self._drop(continuation)
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
        for remove in self._scripts.pop(chain, ()):
            remove()

    def _expire(self, continuation: Continuation[Chain]) -> None:
        chain = continuation.chain
        if chain.outstanding.pop(continuation, None) is None:
            return
        self._drop(continuation)
        self._emit(chain, ContinuationExpired)
        self._ended("expired")
        ttl = self._ttl()
        chain.fail(Stop("continuation_expired", f"callSiteTool {chain.tool}: a continuation token expired unredeemed "
                        f"after {ttl:g}s", state={"tabId": chain.tab, "tool": chain.tool,
                                                  "reason": "continuation_expired"}))


