"""Tasks kept where their scope says, behind the one :class:`~actors.task_store.TaskStore` port: ``tab`` in the
memory of the node of its tab (a :class:`~actors.task_store.LocalTaskStore`), ``browser`` in the fleet's store,
``remote`` by the host's authority (:mod:`actors.task_authority`).

A task is found in the store whose mirror has it, else in the fleet's store, then the authority, then (a ``tab``
task another node keeps) by asking the fleet's nodes (:class:`TabNodes`): the node found is remembered, and the
task's last record with it, so that a node lost ends it ``expired`` here. Its changes are that node's to make
(:meth:`ScopedTaskStore.holder` names it: the node's routes send them there). The quick reads
(:meth:`ScopedTaskStore.tasks_of_tab`, ``of_agent``, ``listed``) join this node's mirrors. A tab is in one task at a
time across stores: a new task is refused ``task_conflict`` when another store's mirror has a task holding one of
its tabs (each store decides alone among its own tasks).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, Protocol

from actors.task_store import ATTEMPTS, TaskStore, Transition
from core import tasks as records
from core.tasks import Task
from messages.errors import KitsuneError

__all__ = ["ScopedTaskStore", "TabNodes"]

POINTERS = 4096
"""The ``tab`` tasks of other nodes a node remembers at most (the oldest forgotten first)."""


class TabNodes(Protocol):
    """The fleet's nodes, as a ``tab`` task's store needs them."""

    here: str
    """This node's name."""

    def node_of(self, tab: int) -> str | None:
        """The node of ``tab`` (None: not open in the fleet)."""
        ...

    def alive(self, node: str) -> bool: ...

    async def create(self, node: str, task: Task) -> None:
        """Have ``node`` keep the new ``task`` (its errors raised)."""
        ...

    async def find(self, task_id: str, node: str | None = None) -> tuple[str, Task] | None:
        """The node keeping ``tab`` task ``task_id`` and its record: asked of ``node``, else of every other node."""
        ...

    async def tabs_free(self, node: str, task: Task, tabs: list[int]) -> None:
        """``task_conflict`` when ``node`` keeps a ``tab`` task on one of ``tabs`` (of the new ``task``)."""
        ...


class ScopedTaskStore:
    """The node's tasks: its ``tab`` tasks, the fleet's store, and the authority's for ``remote`` ones when one is
    configured."""

    def __init__(self, fleet: TaskStore, remote: TaskStore | None = None, tab: TaskStore | None = None,
                 nodes: TabNodes | None = None) -> None:
        self._fleet = fleet
        self._remote = remote
        self._tab = tab
        self._nodes = nodes
        self._stores = [*([tab] if tab is not None else []), fleet, *([remote] if remote is not None else [])]
        self._elsewhere: dict[str, tuple[str, Task]] = {}
        """Task id -> the node keeping that ``tab`` task and the record last read from it."""
        self._listener: Callable[[Task, Task], None] = lambda before, after: None

    @property
    def on_change(self) -> Callable[[Task, Task], None]:
        return self._fleet.on_change

    @on_change.setter
    def on_change(self, listener: Callable[[Task, Task], None]) -> None:
        for store in self._stores:
            store.on_change = listener
        self._listener = listener

    async def start(self) -> None:
        for store in self._stores:
            await store.start()

    async def stop(self) -> None:
        for store in reversed(self._stores):
            await store.stop()

    async def resync(self) -> None:
        for store in self._stores:
            await store.resync()

    async def sweep(self) -> None:
        for store in self._stores:
            await store.sweep()

    async def create(self, task: Task) -> None:
        node = self._node_of(task)
        if node is not None and self._nodes is not None:
            await self._nodes.create(node, task)
            self._remember(task.id, node, task)
            return
        store = self._store_of(task)
        if self._nodes is not None and task.scope != "tab":  # the other nodes' tab tasks on its tabs
            nodes = {tab: self._nodes.node_of(tab) for tab in task.tabs}
            for node in sorted({n for n in nodes.values() if n is not None and n != self._nodes.here}):
                await self._nodes.tabs_free(node, task, [tab for tab, n in nodes.items() if n == node])
        for other in self._stores:
            held = [t for tab in task.tabs for t in other.tasks_of_tab(tab) if other is not store
                    and t.status != "revoked"]
            if held:
                raise _conflict(held[0], task)
        await store.create(task)

    async def get(self, task_id: str) -> Task | None:
        if task_id not in self._elsewhere or self.knows(task_id):
            for store in self._known(task_id):
                found = await store.get(task_id)
                if found is not None:
                    return found
        return await self._get_elsewhere(task_id)

    async def holder(self, task_id: str) -> str | None:
        """The node that keeps ``tab`` task ``task_id`` when it is another node (its changes are made there), else
        None (a task of this node's stores, or none)."""
        if not records.TASK_ID.fullmatch(task_id):
            return None
        if not self.knows(task_id) and task_id not in self._elsewhere:
            await self.get(task_id)
        return self.kept_by(task_id)

    def kept_by(self, task_id: str) -> str | None:
        """The other node known to keep ``tab`` task ``task_id`` (no request made), or None."""
        known = self._elsewhere.get(task_id)
        return known[0] if known is not None and not self.knows(task_id) else None

    def elsewhere_of(self, agent: str) -> list[Task]:
        """``agent``'s ``tab`` tasks that other nodes keep, as this node last read them."""
        return [task for _, task in list(self._elsewhere.values()) if task.agent == agent]

    def keeps(self, task_id: str) -> bool:
        """Whether this node keeps ``tab`` task ``task_id`` (another node's requests about it are answered here)."""
        return self._tab is not None and self._tab.knows(task_id)

    async def _get_elsewhere(self, task_id: str) -> Task | None:
        """A ``tab`` task another node keeps: asked of the node remembered, else of each; the last record read,
        ``expired``, when its node has left the fleet (its memory went with it)."""
        if self._nodes is None:
            return None
        known = self._elsewhere.get(task_id)
        if known is not None and not self._nodes.alive(known[0]):
            return _ended(known[1])
        found = await self._nodes.find(task_id, known[0] if known is not None else None)
        if found is None and known is not None:
            found = await self._nodes.find(task_id)
        if found is None:
            self._elsewhere.pop(task_id, None)
            return None
        self._remember(task_id, *found)
        return found[1]

    def noted(self, node: str, task: Task) -> None:
        """``task``'s record as ``node``, which keeps it, answered it (a change since the last one read is told)."""
        known = self._elsewhere.get(task.id)
        self._remember(task.id, node, task)
        if known is not None and known[1].updated < task.updated:
            self._listener(known[1], task)

    def _remember(self, task_id: str, node: str, task: Task) -> None:
        self._elsewhere.pop(task_id, None)
        self._elsewhere[task_id] = (node, task)
        while len(self._elsewhere) > POINTERS:
            del self._elsewhere[next(iter(self._elsewhere))]

    async def change(self, task_id: str, transition: Transition, *, attempts: int = ATTEMPTS) -> Task:
        for store in self._known(task_id):
            if store.knows(task_id) or await store.get(task_id) is not None:
                return await store.change(task_id, transition, attempts=attempts)
        raise KitsuneError("task_not_found", f"No task {task_id}", state={"taskId": task_id})

    async def remove(self, task: Task) -> None:
        await self._store_of(task).remove(task)

    def tasks_of_tab(self, tab: int) -> list[Task]:
        return _newest([store.tasks_of_tab(tab) for store in self._stores])

    def of_agent(self, agent: str) -> list[Task]:
        return _newest([store.of_agent(agent) for store in self._stores])

    def listed(self) -> list[Task]:
        return _newest([store.listed() for store in self._stores])

    def knows(self, task_id: str) -> bool:
        return any(store.knows(task_id) for store in self._stores)

    def tab_conflict(self, task: Task, tabs: list[int]) -> None:
        """``task_conflict`` when one of ``tabs`` (of the new ``task``) is in a ``tab`` task this node keeps."""
        held = [t for tab in tabs for t in (self._tab.tasks_of_tab(tab) if self._tab is not None else [])
                if t.status != "revoked"]
        if held:
            raise _conflict(held[0], task)

    def _node_of(self, task: Task) -> str | None:
        """The other node that keeps the new ``tab`` task ``task`` (that of its tab), or None: this one."""
        if task.scope != "tab" or self._nodes is None or not task.tabs:
            return None
        node = self._nodes.node_of(task.tabs[0])
        return node if node is not None and node != self._nodes.here else None

    def _store_of(self, task: Task) -> TaskStore:
        """Where a task of its scope is kept; ``task_authority_not_configured`` for a ``remote`` one without one."""
        if task.scope == "tab" and task.tabs and self._tab is not None:
            return self._tab  # (a task with no tab yet has no tab to live with: the fleet's store keeps it)
        if task.scope != "remote":
            return self._fleet
        if self._remote is None:
            raise records.no_authority()
        return self._remote

    def _known(self, task_id: str) -> list[TaskStore]:
        """The stores to look for a task in: the one whose mirror has it, else each in turn."""
        return [store for store in self._stores if store.knows(task_id)] or self._stores


def _conflict(held: Task, task: Task) -> KitsuneError:
    """``task_conflict``: a tab of ``task`` is in ``held`` (named only to its own agent)."""
    state: dict[str, Any] = {"tabId": held.tabs[0], **({"taskId": held.id} if held.agent == task.agent else {})}
    return KitsuneError("task_conflict", "a tab of the task is already in another task", state=state)


def _ended(task: Task) -> Task:
    """``task`` as it is once the node that kept it left the fleet: ``expired`` (unless it was over already)."""
    if task.status != "active":
        return task
    now = time.time()
    return dataclasses.replace(task, status="expired", lease_expires=min(task.lease_expires, now))


def _newest(found: list[list[Task]]) -> list[Task]:
    """Tasks of several stores, newest first."""
    return sorted((task for tasks in found for task in tasks), key=lambda t: t.created, reverse=True)
