"""Direct-call checkpoints (spec: Direct calls): kept by the MCP server that made the call.

In memory only, at most 20 per agent (the oldest is pushed out first; of all agents together at most
500, the oldest of the agent holding the most pushed out then), each expiring 30 minutes after its
call or its last resume. A checkpoint holds the tool, its arguments without ``confirm_token``, the
held result without its confirm token, the tab the call ran on, and where in the tool's requests it
stopped; of the resume token only its SHA-256 is kept, compared with ``hmac.compare_digest`` and
replaced on every resume that stops again. Checkpoints are scoped to the agent that made the call
(over HTTP, the agent's MCP session): another agent's resume does not find them, nor can another
agent's calls push them out. A checkpoint being resumed is out of the store, so a
concurrent resume of the same call does not find it either.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from core.checkpoints import DropReason, ExpiringStore, Kept
from messages.contract import CHECKPOINT_CAPACITY, CHECKPOINT_TOTAL_CAPACITY, CHECKPOINT_TTL, CONFIRM_TTL
from messages.tokens import token_hash

__all__ = ["Continuation", "Continuations", "DirectCheckpoint", "DirectCheckpoints", "StopKind"]

StopKind = Literal["approval", "page", "ask_prompt", "ask_page"]
"""What a direct call stopped on: an ask-before-act hold, a page only a person can get past
(a ``PAGE_STATE_CHECKS`` reason), a ``browser_ask_user`` prompt that got no answer, or a
``browser_ask_user`` question the page itself answers (its needs-user hint going away)."""


@dataclass(frozen=True, slots=True)
class DirectCheckpoint(Kept):
    """What a direct call that stopped on ``needs_user`` leaves for ``browser_resume``."""

    agent: str
    """The agent that made the call; only it can resume."""
    call: int
    """The audit call id the bridge gave the held request (kept across resumes)."""
    tool: str
    """The tool that was called."""
    arguments: Mapping[str, Any]
    """Its arguments, without ``confirm_token``."""
    held: Mapping[str, Any]
    """The result it stopped with, without its confirm token."""
    tab: int | None
    """The tab the call ran on (its ``tabId``, or the agent's current tab then)."""
    kind: StopKind
    """What it stopped on."""
    step: int = 0
    """Index of the held request among the tool's requests: a resume restarts there."""
    done: tuple[Mapping[str, Any], ...] = ()
    """Results of the tool's requests before the held one (they ran ok and are never sent again)."""

    @property
    def on_current_tab(self) -> bool:
        """Whether the call acts on the agent's current tab (it named no ``tabId``)."""
        return self.tab is not None and self.arguments.get("tabId") is None


class DirectCheckpoints:
    """The gateway's direct-call checkpoints, by agent and call: an :class:`ExpiringStore` whose owners are
    the agents (``capacity`` each, ``total_capacity`` of all)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, capacity: int = CHECKPOINT_CAPACITY,
                 total_capacity: int = CHECKPOINT_TOTAL_CAPACITY, ttl: float = CHECKPOINT_TTL) -> None:
        self._store: ExpiringStore[str, tuple[str, int], DirectCheckpoint] = ExpiringStore(
            clock, capacity_of=lambda agent: capacity, total_capacity=total_capacity, ttl=ttl)

    def keep(self, checkpoint: DirectCheckpoint) -> str:
        """Store (or replace) a checkpoint as the newest, expiring ``ttl`` from now; its new resume token."""
        return self._store.keep(checkpoint.agent, (checkpoint.agent, checkpoint.call), checkpoint)

    def find(self, agent: str, call: int) -> DirectCheckpoint | None:
        """The held checkpoint of ``agent``'s ``call``, if any (expired ones are dropped first)."""
        return self._store.find(agent, (agent, call))

    @staticmethod
    def token_matches(checkpoint: DirectCheckpoint, token: Any) -> bool:
        """Whether ``token`` is the checkpoint's latest resume token (compared in constant time)."""
        return checkpoint.token_matches(token)

    def take(self, checkpoint: DirectCheckpoint, token: str) -> bool:
        """Take a held checkpoint out while it is resumed; it stays out until kept, put back or dropped.
        False when it is no longer held (another resume took it first, or it expired)."""
        return self._store.take(checkpoint.agent, (checkpoint.agent, checkpoint.call), token) is not None

    def put_back(self, checkpoint: DirectCheckpoint) -> None:
        """Return a taken checkpoint unchanged: same token, same place, same expiry."""
        self._store.put_back((checkpoint.agent, checkpoint.call))

    def drop(self, agent: str, call: int, reason: DropReason = "resumed_ok") -> None:
        """Forget a checkpoint (held or being resumed): by default, its hold was answered."""
        self._store.drop((agent, call), reason)

    def __len__(self) -> int:
        """Checkpoints held, those being resumed included."""
        return len(self._store)


@dataclass(frozen=True, slots=True)
class Continuation:
    """Where a confirm token handed to the agent picks a multi-request tool up again.

    ``browser_type(submit=true)`` held at its Enter hands the agent the Enter's confirm token; the
    same call made again with that token must press Enter, not type the text again. Keyed by the
    token's SHA-256; never the token.
    """

    agent: str
    tool: str
    arguments: Mapping[str, Any]
    """The tool's arguments without ``confirm_token``: the call made again must match them."""
    step: int
    """The held request the token was issued for."""
    done: tuple[Mapping[str, Any], ...]
    """Results of the requests before it."""
    call: int | None
    """The checkpoint the hold also left (dropped once the held request runs), if any."""
    expires_at: float


class Continuations:
    """Confirm tokens of held requests inside multi-request tools, by SHA-256, until they expire."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, ttl: float = CONFIRM_TTL,
                 capacity: int = 256) -> None:
        self._clock = clock
        self._ttl = ttl
        self._capacity = capacity
        self._by_hash: OrderedDict[bytes, Continuation] = OrderedDict()

    def remember(self, confirm_token: str, agent: str, tool: str, arguments: Mapping[str, Any], step: int,
                 done: tuple[Mapping[str, Any], ...], call: int | None) -> None:
        now = self._clock()
        for key in [k for k, c in self._by_hash.items() if c.expires_at <= now]:
            del self._by_hash[key]
        self._by_hash[token_hash(confirm_token)] = Continuation(agent, tool, dict(arguments), step, done, call,
                                                                now + self._ttl)
        while len(self._by_hash) > self._capacity:
            self._by_hash.popitem(last=False)

    def claim(self, confirm_token: str, agent: str, tool: str, arguments: Mapping[str, Any]) -> Continuation | None:
        """The continuation ``confirm_token`` was issued with, if this agent makes the same call again."""
        found = self._by_hash.get(token_hash(confirm_token))
        if found is None or found.expires_at <= self._clock():
            return None
        if found.agent != agent or found.tool != tool or dict(found.arguments) != dict(arguments):
            return None
        del self._by_hash[token_hash(confirm_token)]
        return found
