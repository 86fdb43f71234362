"""The checkpoint store (spec: Checkpoints): bridge memory only, at most 20, 30 minutes each.

A checkpoint holds what a resume needs (commands with typed values, results, step records,
default tab, workflow hash) and only the SHA-256 of its resume token. Tokens are 24 random
bytes from ``secrets``, compared with ``hmac.compare_digest``, replaced on every resume that
does not finish ok. A checkpoint being resumed is out of the store, so a second resume of the
same call answers ``checkpoint_not_found``.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from actors.engine import Clock
from messages.commands import CallSpec
from messages.errors import KitsuneError
from messages.results import Result
from messages.steplog import StepRecord

__all__ = ["Checkpoint", "CheckpointStore", "Checkpoints", "DropReason", "WorkflowSource", "new_token", "token_hash"]

DropReason = Literal["expired", "pushed_out", "resumed_ok", "internal_error", "shutdown"]


@dataclass(frozen=True, slots=True)
class WorkflowSource:
    """The workflow file a call ran."""

    name: str
    """The workflow's name, as the call gave it."""
    sha256: str
    """SHA-256 (hex) of the file's bytes when the call ran."""


@dataclass(frozen=True, slots=True)
class Checkpoint:
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
    token_sha256: bytes = b""
    """SHA-256 of the latest resume token; never the token."""
    expires_at: float = 0.0
    """Clock time when it is dropped."""
    kept_order: int = 0
    """When the store kept it, relative to the others (the oldest is pushed out first)."""


def new_token() -> str:
    """A resume token: 24 random bytes, URL-safe."""
    return secrets.token_urlsafe(24)


def token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


class Checkpoints(Protocol):
    """What the call service needs of a checkpoint store (the store itself, or its actor)."""

    def keep(self, checkpoint: Checkpoint) -> str: ...

    def take(self, call: int, token: str) -> Checkpoint: ...

    def put_back(self, call: int) -> None: ...

    def drop(self, call: int, reason: DropReason) -> None: ...


class CheckpointStore:
    """At most ``capacity`` checkpoints, oldest pushed out first, each ``ttl`` seconds after its call."""

    def __init__(self, clock: Clock, *, capacity: int = 20, ttl: float = 1800.0,
                 on_drop: Callable[[int, DropReason], None] = lambda call, reason: None) -> None:
        self._clock = clock
        self._capacity = capacity
        self._ttl = ttl
        self._on_drop = on_drop
        self._held: OrderedDict[int, Checkpoint] = OrderedDict()
        self._resuming: dict[int, Checkpoint] = {}
        self._order = itertools.count()
        self._lock = threading.Lock()

    @property
    def ttl(self) -> float:
        return self._ttl

    def keep(self, checkpoint: Checkpoint) -> str:
        """Store (or replace) a checkpoint as the newest; answer its new resume token."""
        self.sweep()
        token = new_token()
        stored = replace(checkpoint, token_sha256=token_hash(token), expires_at=self._clock.now() + self._ttl,
                         kept_order=next(self._order))
        dropped: list[int] = []
        with self._lock:
            self._resuming.pop(checkpoint.call, None)
            self._held.pop(checkpoint.call, None)
            self._held[checkpoint.call] = stored
            while self._held and len(self._held) + len(self._resuming) > self._capacity:  # resumed ones count
                dropped.append(self._held.popitem(last=False)[0])
        for call in dropped:
            self._on_drop(call, "pushed_out")
        return token

    def take(self, call: int, token: str) -> Checkpoint:
        """Take a checkpoint out to resume it: ``checkpoint_not_found`` or ``resume_token_invalid``.

        It stays out (a concurrent resume answers ``checkpoint_not_found``) until :meth:`put_back`,
        :meth:`keep` or :meth:`drop`.
        """
        self.sweep()
        with self._lock:
            checkpoint = self._held.get(call)
            if checkpoint is None:
                raise KitsuneError("checkpoint_not_found", f"No checkpoint for call {call}: it finished ok, "
                                   "expired, was pushed out, is being resumed, or the bridge restarted")
            if not isinstance(token, str) or not hmac.compare_digest(token_hash(token), checkpoint.token_sha256):
                raise KitsuneError("resume_token_invalid", f"The resume token does not match call {call}'s latest")
            self._resuming[call] = self._held.pop(call)
        return checkpoint

    def put_back(self, call: int) -> None:
        """Return a taken checkpoint unchanged: same token, same place, same expiry."""
        with self._lock:
            checkpoint = self._resuming.pop(call, None)
            if checkpoint is None:
                return
            self._held[call] = checkpoint
            self._held = OrderedDict(sorted(self._held.items(), key=lambda item: item[1].kept_order))

    def drop(self, call: int, reason: DropReason) -> None:
        """Forget a checkpoint (held or being resumed)."""
        with self._lock:
            found = self._held.pop(call, None) or self._resuming.pop(call, None)
        if found is not None:
            self._on_drop(call, reason)

    def sweep(self) -> None:
        """Drop every expired checkpoint."""
        now = self._clock.now()
        with self._lock:
            expired = [call for call, c in self._held.items() if c.expires_at <= now]
            for call in expired:
                del self._held[call]
        for call in expired:
            self._on_drop(call, "expired")

    def close(self) -> None:
        """Drop everything (bridge shutdown)."""
        with self._lock:
            calls = [*self._held, *self._resuming]
            self._held.clear()
            self._resuming.clear()
        for call in calls:
            self._on_drop(call, "shutdown")

    def __len__(self) -> int:
        """Checkpoints held, those being resumed included (no sweep: a count never drops one)."""
        with self._lock:
            return len(self._held) + len(self._resuming)

    def calls(self) -> list[int]:
        """Calls with a checkpoint held (not being resumed), oldest first."""
        self.sweep()
        with self._lock:
            return list(self._held)
