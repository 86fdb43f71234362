"""Where tasks live: the fleet's JetStream KV bucket ``KITSUNE_TASKS``, or this process's memory.

The bucket holds ``<fleet>.task.<id>``, one :class:`~core.tasks.Task` each (history 1,
replicas as :func:`actors.jetstream.ensure_bucket` makes them), and ``<fleet>.tasktab.<tab>``: the
id of the task that claimed the tab, made only if absent, so that two tasks created on one tab at
the same instant, through two nodes, cannot both succeed. A new task is written first, then claims
its tabs; a claim whose task is gone or over is stale and taken over by compare-and-set, so a node
that dies half-way leaves nothing that blocks a tab. Every change is a compare-and-set
on the key's revision: :meth:`TaskStore.change` reads the task, applies a pure transition of
:mod:`core.tasks` and writes the result with the revision it read; when another writer
came first it reads again and retries, up to ``attempts`` times. Reads that decide (``get``,
``change``) go to the bucket; the quick ones (:meth:`TaskStore.tasks_of_tab`,
:meth:`TaskStore.of_agent`) read a mirror a KV watch keeps, as
:class:`actors.fleet_registry.FleetRegistry` does.

A sweeper on each node writes ``expired`` for active tasks whose lease passed (nodes race: one
write wins, the others find it made) and deletes completed and revoked tasks
:data:`TOMBSTONE_TTL` seconds after their last change.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js.kv import KeyValue

from actors.buckets import tasks_bucket
from actors.jetstream import ensure_bucket, patiently
from core.tasks import TASK_ID, LostRace, Task, lapsed
from messages.errors import KitsuneError

__all__ = ["ATTEMPTS", "SWEEP_EVERY", "TOMBSTONE_TTL", "JetStreamTaskStore", "LocalTaskStore",
           "TaskStore", "Transition", "WriteConflict"]

log = logging.getLogger(__name__)

ATTEMPTS = 5
"""Reads and writes a change makes at most while other writers come first."""
SWEEP_EVERY = 2.0
"""Seconds between two sweeps."""
TOMBSTONE_TTL = 3600.0
"""Seconds a completed or revoked task stays after its last change."""
_DELETED = ("DEL", "PURGE")

Transition = Callable[[Task], Task | None]
"""A task's next record, or ``None`` when nothing needs writing (raises to refuse the change, and
:class:`~core.tasks.LostRace` when another writer's change came first that it is not to follow)."""


class TaskStore(Protocol):
    """The port the node keeps tasks through (one suite tests both implementations)."""

    async def start(self) -> None:
        """Open the store, mirror it and start sweeping."""
        ...

    async def stop(self) -> None: ...

    async def resync(self) -> None:
        """After a reconnect: the bucket made again if the server lost it, and the mirror refreshed."""
        ...

    async def create(self, task: Task) -> None:
        """Store a new task; ``task_conflict`` when one of its tabs is in another active or expired task."""
        ...

    async def get(self, task_id: str) -> Task | None:
        """The task as stored now (never the mirror's), or ``None``."""
        ...

    async def change(self, task_id: str, transition: Transition, *, attempts: int = ATTEMPTS) -> Task:
        """The task after ``transition`` (compare-and-set): ``task_not_found`` when there is none,
        ``task_takeover_conflict`` when other writers came first ``attempts`` times."""
        ...

    async def remove(self, task: Task) -> None:
        """Delete ``task`` now if the mirror has it completed or revoked (as the sweeper does once its
        tombstone is old); nothing when it changed since."""
        ...

    def tasks_of_tab(self, tab: int) -> list[Task]:
        """The tasks naming ``tab`` that are not completed, newest first (the mirror: a decision reads each again)."""
        ...

    def of_agent(self, agent: str) -> list[Task]:
        """Every task of ``agent``, newest first (the mirror)."""
        ...

    def listed(self) -> list[Task]:
        """Every task of the fleet, newest first (the mirror: the operator console's)."""
        ...

    def knows(self, task_id: str) -> bool:
        """Whether the mirror has the task (a store that routes tasks asks without a read)."""
        ...

    on_change: Callable[[Task, Task], None]
    """Told (on the loop) of every change the mirror sees, wherever it was made: the task before and after."""

    async def sweep(self) -> None:
        """One sweep (the sweeper's, every :data:`SWEEP_EVERY` seconds)."""
        ...


class WriteConflict(Exception):
    """Another writer changed the key since the revision given."""


class _Store:
    """What both stores share: the mirror, changes by compare-and-set, the sweeper."""

    def __init__(self, *, clock: Callable[[], float], sweep_every: float, tombstone_ttl: float) -> None:
        self._clock = clock
        self._sweep_every = sweep_every
        self._tombstone_ttl = tombstone_ttl
        self._mirror: dict[str, tuple[Task, int]] = {}
        """Task id -> the task and its revision, as last read, written or watched."""
        self.on_change: Callable[[Task, Task], None] = lambda before, after: None
        self._tasks: list[asyncio.Task[None]] = []

    # the storage (each implementation's)

    async def _read(self, task_id: str) -> tuple[Task, int] | None:
        raise NotImplementedError

    async def _write(self, task: Task, revision: int | None) -> int:
        """Write ``task`` over ``revision`` (``None``: a new key); its new revision; :class:`WriteConflict`."""
        raise NotImplementedError

    async def _remove(self, task_id: str, revision: int) -> None:
        """Delete the task if it is still at ``revision`` (:class:`WriteConflict` otherwise)."""
        raise NotImplementedError

    async def _read_claim(self, tab: int) -> tuple[str, int] | None:
        """The id of the task holding ``tab``'s claim and the claim's revision, or ``None``."""
        raise NotImplementedError

    async def _delete_claim(self, tab: int, revision: int) -> None:
        """Delete ``tab``'s claim if it is still at ``revision`` (:class:`WriteConflict` otherwise)."""
        raise NotImplementedError

    async def _write_claim(self, tab: int, task_id: str, revision: int | None) -> None:
        """Give ``tab``'s claim to ``task_id`` over ``revision`` (``None``: if none); :class:`WriteConflict`."""
        raise NotImplementedError

    # the port

    async def create(self, task: Task) -> None:
        try:
            revision = await self._write(task, None)
        except WriteConflict:
            raise KitsuneError("task_conflict", f"task {task.id} exists", state={"taskId": task.id}) from None
        self._remember(task, revision)
        try:
            for tab in sorted(task.tabs):
                await self._claim_tab(tab, task)
        except BaseException:
            with contextlib.suppress(Exception):  # its claims made so far are stale now
                await self._remove(task.id, revision)
                self._forget(task.id, revision + 1)
            raise

    async def _drop_claims(self, task: Task) -> None:
        """Delete the claims ``task`` still holds (once it is deleted: they would only be stale)."""
        for tab in task.tabs:
            claim = await self._read_claim(tab)
            if claim is not None and claim[0] == task.id:
                with contextlib.suppress(WriteConflict):  # another task took it over meanwhile
                    await self._delete_claim(tab, claim[1])

    async def _claim_tab(self, tab: int, task: Task) -> None:
        """Make ``task`` the holder of ``tab``'s claim; ``task_conflict`` when a task that is not over holds it."""
        for _ in range(ATTEMPTS):
            try:
                await self._write_claim(tab, task.id, None)
                return
            except WriteConflict:
                pass
            claim = await self._read_claim(tab)
            if claim is None:  # released meanwhile
                continue
            holder_id, revision = claim
            holder = await self._read(holder_id)
            if holder is not None and _holds(holder[0]) and tab in holder[0].tabs:
                raise _tab_conflict(tab, holder[0], task)
            with contextlib.suppress(WriteConflict):  # stale: its task is gone or over
                await self._write_claim(tab, task.id, revision)
                return
        raise KitsuneError("task_conflict", f"tab {tab} is being claimed by other tasks at the same time; try again",
                           state={"tabId": tab}, retryable=True)

    async def get(self, task_id: str) -> Task | None:
        found = await self._read(task_id) if TASK_ID.fullmatch(task_id) else None
        if found is None:
            return None
        self._remember(*found)
        return found[0]

    async def change(self, task_id: str, transition: Transition, *, attempts: int = ATTEMPTS) -> Task:
        for _ in range(attempts):
            found = await self._read(task_id) if TASK_ID.fullmatch(task_id) else None
            if found is None:
                raise KitsuneError("task_not_found", f"No task {task_id}", state={"taskId": task_id})
            self._remember(*found)
            task, revision = found
            try:
                changed = transition(task)
            except LostRace:
                break
            if changed is None:
                return task
            try:
                self._remember(changed, await self._write(changed, revision))
            except WriteConflict:
                continue
            return changed
        raise self._lost_race(task_id)

    def _lost_race(self, task_id: str) -> KitsuneError:
        """What a change answers when other writers came first each time (or first, for one that loses to them)."""
        return KitsuneError("task_takeover_conflict", f"task {task_id} was changed by another request at the same "
                            "time; read it again", state={"taskId": task_id})

    async def remove(self, task: Task) -> None:
        known = self._mirror.get(task.id)
        if known is not None and known[0].status in ("completed", "revoked"):
            await self._removed(*known)

    async def _removed(self, task: Task, revision: int) -> None:
        """Delete ``task`` if it is still at ``revision``, then the claims it still holds."""
        with contextlib.suppress(WriteConflict):  # changed since, or gone: another node's sweep
            await self._remove(task.id, revision)
            self._forget(task.id, revision + 1)
        await self._drop_claims(task)

    def tasks_of_tab(self, tab: int) -> list[Task]:
        return list(self._tasks_of(lambda t: tab in t.tabs and t.status != "completed"))

    def of_agent(self, agent: str) -> list[Task]:
        return list(self._tasks_of(lambda t: t.agent == agent))

    def listed(self) -> list[Task]:
        return list(self._tasks_of(lambda t: True))

    def knows(self, task_id: str) -> bool:
        return task_id in self._mirror

    async def sweep(self) -> None:
        now = self._clock()
        for task, revision in list(self._mirror.values()):
            try:
                if task.status == "active" and task.lease_expires <= now:
                    await self.change(task.id, lambda t: lapsed(t, now))
                elif task.status in ("completed", "revoked") and now - task.updated >= self._tombstone_ttl:
                    await self._removed(task, revision)
            except Exception as e:  # the next sweep tries again
                log.warning("task %s not swept (%s)", task.id, type(e).__name__)

    # the mirror

    def _tasks_of(self, keep: Callable[[Task], bool]) -> Iterator[Task]:
        """The mirror's tasks that ``keep`` keeps, newest first (from a copy taken at once: the policy reads the
        mirror from call threads while the loop changes it)."""
        snapshot = list(self._mirror.values())
        yield from sorted((t for t, _ in snapshot if keep(t)), key=lambda t: t.created, reverse=True)

    def _remember(self, task: Task, revision: int) -> None:
        known = self._mirror.get(task.id)
        if revision > (known[1] if known is not None else 0):
            self._mirror[task.id] = (task, revision)
            if known is not None:
                try:
                    self.on_change(known[0], task)
                except Exception as e:  # the mirror is kept whatever a listener does
                    log.error("a task's change was not followed (%s)", type(e).__name__)

    def _forget(self, task_id: str, revision: int) -> None:
        """The task deleted at ``revision`` (kept when the mirror knows a later one)."""
        known = self._mirror.get(task_id)
        if known is not None and known[1] < revision:
            del self._mirror[task_id]

    # the sweeper

    def _start_sweeping(self) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(self._sweeping()))

    async def _sweeping(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_every)
            await self.sweep()

    async def _stop_tasks(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()


class LocalTaskStore(_Store):
    """Tasks in this process's memory, for a node without NATS. Each read and write yields to the
    loop as the bucket's do, so concurrent changes race as they would there."""

    def __init__(self, *, clock: Callable[[], float] = time.time, sweep_every: float = SWEEP_EVERY,
                 tombstone_ttl: float = TOMBSTONE_TTL) -> None:
        super().__init__(clock=clock, sweep_every=sweep_every, tombstone_ttl=tombstone_ttl)
        self._revision = 0
        self._records: dict[str, tuple[Task, int]] = {}
        """The tasks as stored (the mirror is what was read of them: its changes are told)."""
        self._claims: dict[int, tuple[str, int]] = {}

    async def start(self) -> None:
        self._start_sweeping()

    async def stop(self) -> None:
        await self._stop_tasks()

    async def resync(self) -> None:
        return None

    async def _read(self, task_id: str) -> tuple[Task, int] | None:
        await asyncio.sleep(0)
        return self._records.get(task_id)

    async def _write(self, task: Task, revision: int | None) -> int:
        return await self._put(self._records, task.id, task, revision)

    async def _remove(self, task_id: str, revision: int) -> None:
        await self._delete(self._records, task_id, revision)

    async def _read_claim(self, tab: int) -> tuple[str, int] | None:
        await asyncio.sleep(0)
        return self._claims.get(tab)

    async def _write_claim(self, tab: int, task_id: str, revision: int | None) -> None:
        await self._put(self._claims, tab, task_id, revision)

    async def _delete_claim(self, tab: int, revision: int) -> None:
        await self._delete(self._claims, tab, revision)

    async def _put(self, table: dict[Any, tuple[Any, int]], key: Any, value: Any, revision: int | None) -> int:
        """Compare-and-set ``key`` of ``table`` (``revision`` ``None``: only if absent); its new revision."""
        await asyncio.sleep(0)
        known = table.get(key)
        if (known[1] if known is not None else None) != revision:
            raise WriteConflict
        self._revision += 1
        table[key] = (value, self._revision)
        return self._revision

    async def _delete(self, table: dict[Any, tuple[Any, int]], key: Any, revision: int) -> None:
        await asyncio.sleep(0)
        known = table.get(key)
        if known is None or known[1] != revision:
            raise WriteConflict
        self._revision += 1
        del table[key]



class JetStreamTaskStore(_Store):
    """Tasks in the fleet's KV bucket, mirrored from a watch (on the node's loop)."""

    def __init__(self, client: Client, fleet: str, *, clock: Callable[[], float] = time.time,
                 sweep_every: float = SWEEP_EVERY, tombstone_ttl: float = TOMBSTONE_TTL) -> None:
        super().__init__(clock=clock, sweep_every=sweep_every, tombstone_ttl=tombstone_ttl)
        self._client = client
        self._prefix = f"{fleet}.task."
        self._claim_prefix = f"{fleet}.tasktab."
        self._kv: KeyValue | None = None
        self._watcher: Any = None
        self._following: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.resync()
        self._start_sweeping()

    async def resync(self) -> None:
        with _answering():
            self._kv = await ensure_bucket(self._client, tasks_bucket())
            await self._watch()

    async def stop(self) -> None:
        await self._stop_tasks()
        await self._unwatch()

    async def _watch(self) -> None:
        """(Re)start the watch, and wait for the current values."""
        await self._unwatch()
        kv = self._kv
        assert kv is not None
        self._watcher = await patiently(lambda: kv.watch(f"{self._prefix}>"))
        while (entry := await self._watcher.updates(timeout=10.0)) is not None:  # the current values first
            self._apply(entry)
        self._following = asyncio.get_running_loop().create_task(self._follow(self._watcher))

    async def _unwatch(self) -> None:
        if self._following is not None:
            self._following.cancel()
            self._following = None
        if self._watcher is not None:
            with contextlib.suppress(Exception):
                await self._watcher.stop()
            self._watcher = None

    async def _follow(self, watcher: Any) -> None:
        async for entry in watcher:
            if entry is not None:
                try:
                    self._apply(entry)
                except Exception as e:  # one bad entry must not stop the mirror
                    log.error("task entry %s not understood (%s)", entry.key, type(e).__name__)

    def _apply(self, entry: KeyValue.Entry) -> None:
        task_id, revision = entry.key[len(self._prefix):], entry.revision or 0
        if entry.operation in _DELETED or not entry.value:
            self._forget(task_id, revision)
        else:
            self._remember(Task.from_json(entry.value), revision)

    async def _read(self, task_id: str) -> tuple[Task, int] | None:
        found = await self._get(self._prefix + task_id)
        return (Task.from_json(found[0]), found[1]) if found is not None else None

    async def _write(self, task: Task, revision: int | None) -> int:
        return await self._put(self._prefix + task.id, task.to_json(), revision)

    async def _remove(self, task_id: str, revision: int) -> None:
        await self._delete(self._prefix + task_id, revision)

    async def _read_claim(self, tab: int) -> tuple[str, int] | None:
        found = await self._get(f"{self._claim_prefix}{tab}")
        return (found[0].decode(), found[1]) if found is not None else None

    async def _write_claim(self, tab: int, task_id: str, revision: int | None) -> None:
        await self._put(f"{self._claim_prefix}{tab}", task_id.encode(), revision)

    async def _delete_claim(self, tab: int, revision: int) -> None:
        await self._delete(f"{self._claim_prefix}{tab}", revision)

    async def _get(self, key: str) -> tuple[bytes, int] | None:
        """A key's value and revision, or ``None`` (never made, or deleted)."""
        assert self._kv is not None
        with _answering():
            try:
                entry = await self._kv.get(key)
            except nats.js.errors.KeyNotFoundError:
                return None
        if not entry.value or entry.revision is None:
            return None
        return entry.value, entry.revision

    async def _put(self, key: str, value: bytes, revision: int | None) -> int:
        """Compare-and-set ``key`` (``revision`` ``None``: only if absent); its new revision."""
        assert self._kv is not None
        with _answering():
            try:
                return await (self._kv.create(key, value) if revision is None
                              else self._kv.update(key, value, last=revision))
            except nats.js.errors.KeyWrongLastSequenceError:
                raise WriteConflict from None

    async def _delete(self, key: str, revision: int) -> None:
        assert self._kv is not None
        with _answering():
            try:
                await self._kv.delete(key, last=revision)
            except nats.js.errors.KeyWrongLastSequenceError:
                raise WriteConflict from None


def _holds(task: Task) -> bool:
    """Whether a task holds its tabs: until it is completed or revoked (an expired one, until taken over or deleted)."""
    return task.status in ("active", "expired")


def _tab_conflict(tab: int, holder: Task, task: Task) -> KitsuneError:
    """``task_conflict`` for ``tab``, naming the holder only to its own agent."""
    state: dict[str, Any] = {"tabId": tab, **({"taskId": holder.id} if holder.agent == task.agent else {})}
    return KitsuneError("task_conflict", f"tab {tab} is already in another task", state=state)


@contextlib.contextmanager
def _answering() -> Iterator[None]:
    """NATS's failures as the contract's: the bucket did not answer."""
    try:
        yield
    except (nats.errors.Error, TimeoutError) as e:
        raise KitsuneError("fleet_unavailable", f"the fleet's tasks did not answer ({type(e).__name__})",
                           retryable=True) from e
