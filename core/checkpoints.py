"""The checkpoint store (spec: Checkpoints): bridge memory only, at most 20, 30 minutes each.

A checkpoint holds what a resume needs (commands with typed values, results, step records,
default tab, workflow hash) and only the SHA-256 of its resume token. Tokens are 24 random
bytes from ``secrets``, compared with ``hmac.compare_digest``, replaced on every resume that
does not finish ok. A checkpoint being resumed is out of the store, so a second resume of the
same call answers ``checkpoint_not_found``.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from typing import Generic, Literal, Protocol, TypeVar

from core.engine import Clock
from messages.commands import CallSpec
from messages.contract import CHECKPOINT_CAPACITY, CHECKPOINT_TTL
from messages.errors import KitsuneError
from messages.results import Result
from messages.steplog import StepRecord
from messages.tokens import new_token, token_hash, token_matches

__all__ = ["Checkpoint", "CheckpointStore", "Checkpoints", "DropReason", "ExpiringStore", "Kept", "WorkflowSource"]

DropReason = Literal["expired", "pushed_out", "resumed_ok", "internal_error", "shutdown"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Kept:
    """What a store stamps on a checkpoint it keeps."""

    token_sha256: bytes = field(default=b"", repr=False)
    """SHA-256 of the latest resume token; never the token."""
    expires_at: float = 0.0
    """Clock time when it is dropped."""
    kept_order: int = 0
    """When the store kept it, relative to the others (the oldest is pushed out first)."""

    def token_matches(self, token: object) -> bool:
        """Whether ``token`` is the latest resume token (compared in constant time)."""
        return token_matches(token, self.token_sha256)


K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Kept)


class ExpiringStore(Generic[K, V]):
    """At most ``capacity`` checkpoints by key, oldest pushed out first, each ``ttl`` seconds after it was kept.

    Keeping one gives it a new resume token, of which only the SHA-256 is stamped on it. One taken out to be
    resumed is not found and still counts, until it is kept again, put back or dropped.

    It takes no lock: it has one owner, who alone calls it (the checkpoint actor, from its own thread; the
    gateway, from its one event loop).
    """

    def __init__(self, clock: Callable[[], float], *, capacity: int, ttl: float,
                 on_drop: Callable[[K, DropReason], None] = lambda key, reason: None) -> None:
        self._clock = clock
        self._capacity = capacity
        self._ttl = ttl
        self._on_drop = on_drop
        self._held: OrderedDict[K, V] = OrderedDict()
        self._resuming: dict[K, V] = {}
        self._order = itertools.count()

    @property
    def ttl(self) -> float:
        return self._ttl

    def keep(self, key: K, value: V) -> str:
        """Store (or replace) a checkpoint as the newest; answer its new resume token."""
        self.sweep()
        token = new_token()
        stored = replace(value, token_sha256=token_hash(token), expires_at=self._clock() + self._ttl,
                         kept_order=next(self._order))
        self._resuming.pop(key, None)
        self._held.pop(key, None)
        self._held[key] = stored
        while self._held and len(self._held) + len(self._resuming) > self._capacity:  # resumed ones count
            self._on_drop(self._held.popitem(last=False)[0], "pushed_out")
        return token

    def find(self, key: K) -> V | None:
        """The held checkpoint at ``key``, if any (expired ones are dropped first)."""
        self.sweep()
        return self._held.get(key)

    def take(self, key: K, token: object) -> V | None:
        """Take the checkpoint at ``key`` out to resume it, if it is held and ``token`` is its latest."""
        self.sweep()
        found = self._held.get(key)
        if found is None or not found.token_matches(token):
            return None
        self._resuming[key] = self._held.pop(key)
        return found

    def put_back(self, key: K) -> None:
        """Return a taken checkpoint unchanged: same token, same place, same expiry."""
        found = self._resuming.pop(key, None)
        if found is None:
            return
        self._held[key] = found
        self._held = OrderedDict(sorted(self._held.items(), key=lambda item: item[1].kept_order))

    def drop(self, key: K, reason: DropReason) -> None:
        """Forget a checkpoint (held or being resumed)."""
        found = self._held.pop(key, None) or self._resuming.pop(key, None)
        if found is not None:
            self._on_drop(key, reason)

    def sweep(self) -> None:
        """Drop every expired checkpoint."""
        now = self._clock()
        for key in [key for key, c in self._held.items() if c.expires_at <= now]:
            del self._held[key]
            self._on_drop(key, "expired")

    def close(self) -> None:
        """Drop everything (shutdown)."""
        keys = [*self._held, *self._resuming]
        self._held.clear()
        self._resuming.clear()
        for key in keys:
            self._on_drop(key, "shutdown")

    def __len__(self) -> int:
        """Checkpoints held, those being resumed included (no sweep: a count never drops one)."""
        return len(self._held) + len(self._resuming)

    def keys(self) -> list[K]:
        """Keys of the checkpoints held (not being resumed), oldest first."""
        self.sweep()
        return list(self._held)


@dataclass(frozen=True, slots=True)
class WorkflowSource:
    """The workflow file a call ran."""

    name: str
    """The workflow's name, as the call gave it."""
    sha256: str
    """SHA-256 (hex) of the file's bytes when the call ran."""


@dataclass(frozen=True, slots=True)
class Checkpoint(Kept):
    """What a container call that did not finish ok leaves for ``browser_resume``."""

    call: int
    """The call's audit id."""
    spec: CallSpec
    """The commands (typed values included), default tab and options."""
    records: Mapping[str, StepRecord]
    """The step records of the last run, by path."""
    results: Mapping[str, Result]
    """Every step's result by path."""
    claims: Mapping[str, frozenset[int]]
    """Tabs each parallel sequence claimed, by sequence path."""
    workflow: WorkflowSource | None
    """The workflow file, for a workflow call."""
    attempts: int
    """Resumes so far."""


class Checkpoints(Protocol):
    """What the call service needs of a checkpoint store (the store itself, or its actor)."""

    def keep(self, checkpoint: Checkpoint) -> str: ...

    def take(self, call: int, token: str) -> Checkpoint: ...

    def put_back(self, call: int) -> None: ...

    def drop(self, call: int, reason: DropReason) -> None: ...


class CheckpointStore:
    """The bridge's container-call checkpoints, by call: an :class:`ExpiringStore` that answers error codes.

    Like it, it takes no lock: on a node the checkpoint actor owns it, and every access is a message.
    """

    def __init__(self, clock: Clock, *, capacity: int = CHECKPOINT_CAPACITY, ttl: float = CHECKPOINT_TTL,
                 on_drop: Callable[[int, DropReason], None] = lambda call, reason: None) -> None:
        self._store: ExpiringStore[int, Checkpoint] = ExpiringStore(clock.now, capacity=capacity, ttl=ttl,
                                                                    on_drop=on_drop)

    @property
    def ttl(self) -> float:
        return self._store.ttl

    def keep(self, checkpoint: Checkpoint) -> str:
        """Store (or replace) a checkpoint as the newest; answer its new resume token."""
        return self._store.keep(checkpoint.call, checkpoint)

    def take(self, call: int, token: str) -> Checkpoint:
        """Take a checkpoint out to resume it: ``checkpoint_not_found`` or ``resume_token_invalid``.

        It stays out (a concurrent resume answers ``checkpoint_not_found``) until :meth:`put_back`,
        :meth:`keep` or :meth:`drop`.
        """
        taken = self._store.take(call, token)
        if taken is not None:
            return taken
        if self._store.find(call) is None:
            raise KitsuneError("checkpoint_not_found", f"No checkpoint for call {call}: it finished ok, "
                               "expired, was pushed out, is being resumed, or the bridge restarted")
        raise KitsuneError("resume_token_invalid", f"The resume token does not match call {call}'s latest")

    def put_back(self, call: int) -> None:
        """Return a taken checkpoint unchanged: same token, same place, same expiry."""
        self._store.put_back(call)

    def drop(self, call: int, reason: DropReason) -> None:
        """Forget a checkpoint (held or being resumed)."""
        self._store.drop(call, reason)

    def sweep(self) -> None:
        """Drop every expired checkpoint."""
        self._store.sweep()

    def close(self) -> None:
        """Drop everything (bridge shutdown)."""
        self._store.close()

    def __len__(self) -> int:
        """Checkpoints held, those being resumed included (no sweep: a count never drops one)."""
        return len(self._store)

    def calls(self) -> list[int]:
        """Calls with a checkpoint held (not being resumed), oldest first."""
        return self._store.keys()
