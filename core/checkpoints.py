"""The checkpoint store (spec: Checkpoints): bridge memory only, at most 20 per agent, 30 minutes each.

A checkpoint belongs to the agent whose call made it: for any other agent it does not exist.
Each agent holds at most its own capacity (20 unless configured), its oldest pushed out first;
a node-wide cap (500) pushes out the oldest of the agent holding the most. A checkpoint holds
what a resume needs (commands with typed values, results, step records, default tab, workflow
hash) and only the SHA-256 of its resume token. Tokens are 24 random bytes from ``secrets``,
compared with ``hmac.compare_digest``, replaced on every resume that does not finish ok. A
checkpoint being resumed is out of the store, so a second resume of the same call answers
``checkpoint_not_found``.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field, replace
from typing import Generic, Literal, Protocol, TypeVar

from core.engine import Clock
from messages.commands import CallSpec
from messages.contract import CHECKPOINT_CAPACITY, CHECKPOINT_TOTAL_CAPACITY, CHECKPOINT_TTL
from messages.errors import KitsuneError
from messages.paths import ROOT, StepPath
from messages.results import Result, worst
from messages.steplog import StepRecord
from messages.tokens import new_token, token_hash, token_matches

__all__ = ["Checkpoint", "CheckpointStore", "Checkpoints", "DropReason", "ExpiringStore",
           "Kept", "WorkflowSource"]

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


Owner = TypeVar("Owner", bound=Hashable)
K = TypeVar("K", bound=Hashable)
V = TypeVar("V", bound=Kept)


@dataclass(slots=True)
class _Shelf(Generic[K, V]):
    """One owner's checkpoints: those held, oldest first, and those taken out to be resumed."""

    held: OrderedDict[K, V] = field(default_factory=OrderedDict)
    resuming: dict[K, V] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.held) + len(self.resuming)


class ExpiringStore(Generic[Owner, K, V]):
    """Checkpoints by key, each of one owner (an agent), each dropped ``ttl`` seconds after it was kept.

    An owner holds at most ``capacity_of(owner)``, its oldest pushed out first; when the store holds
    ``total_capacity``, the oldest of the owner holding the most is pushed out. So an owner's keep
    never pushes out another's checkpoint unless the total forces it. Only the owner finds, takes
    or resumes its checkpoints: for anyone else they do not exist (the token is not even compared).
    Keys are unique across owners (call ids).

    Keeping one gives it a new resume token, of which only the SHA-256 is stamped on it. One taken out
    to be resumed is not found and still counts, until it is kept again, put back or dropped.

    It takes no lock: one caller alone uses it (the checkpoint actor, from its own thread; the gateway,
    from its one event loop).
    """

    def __init__(self, clock: Callable[[], float], *, capacity_of: Callable[[Owner], int], total_capacity: int,
                 ttl: float, on_drop: Callable[[K, DropReason], None] = lambda key, reason: None,
                 on_keep: Callable[[K], None] = lambda key: None) -> None:
        self._clock = clock
        self._capacity_of = capacity_of
        self._total_capacity = total_capacity
        self._ttl = ttl
        self._on_drop = on_drop
        self._on_keep = on_keep
        """Told of each key kept, before any checkpoint its keep pushes out is dropped (so a listener told
        of both, in order, knows what the store holds)."""
        self._shelves: dict[Owner, _Shelf[K, V]] = {}
        self._owners: dict[K, Owner] = {}
        """The owner of every checkpoint held or being resumed."""
        self._order = itertools.count()

    @property
    def ttl(self) -> float:
        return self._ttl

    def keep(self, owner: Owner, key: K, value: V) -> str:
        """Store (or replace) ``owner``'s checkpoint as its newest; answer its new resume token."""
        self.sweep()
        token = new_token()
        stored = replace(value, token_sha256=token_hash(token), expires_at=self._clock() + self._ttl,
                         kept_order=next(self._order))
        self._remove(key)
        shelf = self._shelves.setdefault(owner, _Shelf())
        shelf.held[key] = stored
        self._owners[key] = owner
        self._on_keep(key)
        while shelf.held and len(shelf) > self._capacity_of(owner):  # resumed ones count
            self._push_out(owner)
        while len(self._owners) > self._total_capacity and (most := self._holding_most()) is not None:
            self._push_out(most)
        return token

    def find(self, owner: Owner, key: K) -> V | None:
        """``owner``'s held checkpoint at ``key``, if any (expired ones are dropped first)."""
        self.sweep()
        shelf = self._shelves.get(owner)
        return None if shelf is None else shelf.held.get(key)

    def take(self, owner: Owner, key: K, token: object) -> V | None:
        """Take ``owner``'s checkpoint at ``key`` out to resume it, if it is held and ``token`` is its latest."""
        found = self.find(owner, key)
        if found is None or not found.token_matches(token):
            return None
        shelf = self._shelves[owner]
        shelf.resuming[key] = shelf.held.pop(key)
        return found

    def put_back(self, key: K) -> None:
        """Return a taken checkpoint unchanged: same token, same place, same expiry."""
        if key not in self._owners:
            return
        shelf = self._shelves[self._owners[key]]
        found = shelf.resuming.pop(key, None)
        if found is None:
            return
        shelf.held[key] = found
        shelf.held = OrderedDict(sorted(shelf.held.items(), key=lambda item: item[1].kept_order))

    def drop(self, key: K, reason: DropReason) -> None:
        """Forget a checkpoint (held or being resumed)."""
        if self._remove(key):
            self._on_drop(key, reason)

    def sweep(self) -> None:
        """Drop every expired checkpoint, oldest first."""
        now = self._clock()
        expired: list[tuple[int, K]] = []
        for shelf in self._shelves.values():
            for key, c in shelf.held.items():  # kept in order, so expiring in order: the clock never goes back
                if c.expires_at > now:
                    break
                expired.append((c.kept_order, key))
        for _, key in sorted(expired):
            self.drop(key, "expired")

    def close(self) -> None:
        """Drop everything (shutdown)."""
        keys = [*self._held_keys(), *(key for shelf in self._shelves.values() for key in shelf.resuming)]
        self._shelves.clear()
        self._owners.clear()
        for key in keys:
            self._on_drop(key, "shutdown")

    def __len__(self) -> int:
        """Checkpoints held, those being resumed included (no sweep: a count never drops one)."""
        return len(self._owners)

    def count(self, owner: Owner) -> int:
        """``owner``'s checkpoints, those being resumed included (no sweep)."""
        shelf = self._shelves.get(owner)
        return 0 if shelf is None else len(shelf)

    def keys(self) -> list[K]:
        """Keys of the checkpoints held (not being resumed), oldest first."""
        self.sweep()
        return self._held_keys()

    def entries(self) -> list[tuple[V, bool]]:
        """Every checkpoint, oldest first, each with whether it is being resumed (expired ones dropped first)."""
        self.sweep()
        found = [(c, resuming) for shelf in self._shelves.values()
                 for resuming, part in ((False, shelf.held), (True, shelf.resuming)) for c in part.values()]
        return sorted(found, key=lambda entry: entry[0].kept_order)

    def _held_keys(self) -> list[K]:
        held = [(c.kept_order, key) for shelf in self._shelves.values() for key, c in shelf.held.items()]
        return [key for _, key in sorted(held)]

    def _holding_most(self) -> Owner | None:
        """The owner with the most checkpoints among those holding one (not all being resumed); of
        equals, the one whose oldest is oldest."""
        holding = [(owner, shelf) for owner, shelf in self._shelves.items() if shelf.held]
        if not holding:
            return None
        return min(holding, key=lambda item: (-len(item[1]), next(iter(item[1].held.values())).kept_order))[0]

    def _push_out(self, owner: Owner) -> None:
        """Drop ``owner``'s oldest held checkpoint."""
        key = next(iter(self._shelves[owner].held))
        self.drop(key, "pushed_out")

    def _remove(self, key: K) -> bool:
        """Take ``key`` out of the store, held or being resumed; whether it was there."""
        if key not in self._owners:
            return False
        owner = self._owners.pop(key)
        shelf = self._shelves[owner]
        if shelf.held.pop(key, None) is None:
            del shelf.resuming[key]
        if not shelf:
            del self._shelves[owner]
        return True


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
    agent: str | None
    """The agent whose call made it: only that agent's resume finds it."""


class Checkpoints(Protocol):
    """What the call service needs of a checkpoint store (the store itself, or its actor)."""

    def keep(self, checkpoint: Checkpoint) -> str: ...

    def take(self, call: int, token: str, agent: str | None) -> Checkpoint: ...

    def put_back(self, call: int) -> None: ...

    def drop(self, call: int, reason: DropReason) -> None: ...


class CheckpointStore:
    """The bridge's container-call checkpoints, by agent and call: an :class:`ExpiringStore` that answers
    error codes. ``capacity_of`` tells how many an agent may hold (it is asked at each keep).

    Like it, it takes no lock: on a node the checkpoint actor owns it, and every access is a message.
    """

    def __init__(self, clock: Clock, *,
                 capacity_of: Callable[[str | None], int] = lambda agent: CHECKPOINT_CAPACITY,
                 total_capacity: int = CHECKPOINT_TOTAL_CAPACITY, ttl: float = CHECKPOINT_TTL,
                 on_drop: Callable[[int, DropReason], None] = lambda call, reason: None,
                 on_keep: Callable[[int], None] = lambda call: None) -> None:
        self._now = clock.now
        self._store: ExpiringStore[str | None, int, Checkpoint] = ExpiringStore(
            clock.now, capacity_of=capacity_of, total_capacity=total_capacity, ttl=ttl, on_drop=on_drop,
            on_keep=on_keep)

    @property
    def ttl(self) -> float:
        return self._store.ttl

    def keep(self, checkpoint: Checkpoint) -> str:
        """Store (or replace) a checkpoint as its agent's newest; answer its new resume token."""
        return self._store.keep(checkpoint.agent, checkpoint.call, checkpoint)

    def take(self, call: int, token: str, agent: str | None) -> Checkpoint:
        """Take ``agent``'s checkpoint out to resume it: ``checkpoint_not_found`` or ``resume_token_invalid``.

        Another agent's checkpoint answers ``checkpoint_not_found`` as a call with none does (its token
        is not compared, and it is left as it was). A taken one stays out (a concurrent resume answers
        ``checkpoint_not_found``) until :meth:`put_back`, :meth:`keep` or :meth:`drop`.
        """
        taken = self._store.take(agent, call, token)
        if taken is not None:
            return taken
        if self._store.find(agent, call) is None:
            raise KitsuneError("checkpoint_not_found", f"No checkpoint for call {call}: it finished ok, "
                               "expired, was pushed out, is being resumed, or the bridge restarted")
        raise KitsuneError("resume_token_invalid", f"The resume token does not match call {call}'s latest")

    def put_back(self, call: int) -> None:
        """Return a taken checkpoint unchanged: same token, same place, same expiry."""
        self._store.put_back(call)

    def reissue(self, call: int, agent: str | None) -> str | None:
        """A new resume token for ``agent``'s held checkpoint of ``call`` (the old one stops working, its
        expiry starts over), for a session of the agent that took over the call's task; None when none is held."""
        held = self._store.find(agent, call)
        return None if held is None else self._store.keep(agent, call, held)

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

    def count(self, agent: str | None) -> int:
        """``agent``'s checkpoints, those being resumed included (no sweep)."""
        return self._store.count(agent)

    def calls(self) -> list[int]:
        """Calls with a checkpoint held (not being resumed), of every agent, oldest first."""
        return self._store.keys()

    def describe(self) -> list[dict[str, object]]:
        """Every checkpoint as metadata only, oldest first (the operator console): call, agent, the status and
        error code of its last run, resumes so far, seconds since it was kept and until it expires, whether it
        is being resumed. Never its token, commands, typed values or results."""
        now = self._now()
        described: list[dict[str, object]] = []
        for c, resuming in self._store.entries():
            top = [r for path, r in c.records.items() if StepPath(path).parent == ROOT]
            described.append({"call": c.call, "agent": c.agent, "status": worst([r.status for r in top]),
                              "code": next((r.code for r in top if r.code), None), "attempts": c.attempts,
                              "age": round(now - (c.expires_at - self.ttl), 1),
                              "expires_in": round(c.expires_at - now, 1), "resuming": resuming})
        return described
