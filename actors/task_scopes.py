"""Tasks kept where their scope says: ``tab`` and ``browser`` in the fleet's store, ``remote`` by the host's
authority (:mod:`actors.task_authority`), behind the one :class:`~actors.task_store.TaskStore` port.

A task is found in the store whose mirror has it, else in the fleet's store, then the authority (a task this node
never saw). The quick reads (:meth:`ScopedTaskStore.tasks_of_tab`, ``of_agent``, ``listed``) join the mirrors.
A tab is in one task at a time across stores: a new task is refused ``task_conflict`` when another store's
mirror has a task holding one of its tabs (each store decides alone among its own tasks).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors.task_store import ATTEMPTS, TaskStore, Transition
from core import tasks as records
from core.tasks import Task
from messages.errors import KitsuneError

__all__ = ["ScopedTaskStore"]


class ScopedTaskStore:
    """The node's tasks: the fleet's store, and the authority's for ``remote`` ones when one is configured."""

    def __init__(self, fleet: TaskStore, remote: TaskStore | None = None) -> None:
        self._fleet = fleet
        self._remote = remote
        self._stores = [fleet, *([remote] if remote is not None else [])]

    @property
    def on_change(self) -> Callable[[Task, Task], None]:
        return self._fleet.on_change

    @on_change.setter
    def on_change(self, listener: Callable[[Task, Task], None]) -> None:
        for store in self._stores:
            store.on_change = listener

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
        store = self._store_of(task)
        for other in self._stores:
            held = [t for tab in task.tabs for t in other.tasks_of_tab(tab) if other is not store
                    and t.status != "revoked"]
            if held:
                state: dict[str, Any] = {"tabId": held[0].tabs[0], **(
                    {"taskId": held[0].id} if held[0].agent == task.agent else {})}
                raise KitsuneError("task_conflict", "a tab of the task is already in another task", state=state)
        await store.create(task)

    async def get(self, task_id: str) -> Task | None:
        for store in self._known(task_id):
            found = await store.get(task_id)
            if found is not None:
                return found
        return None

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

    def _store_of(self, task: Task) -> TaskStore:
        """Where a task of its scope is kept; ``task_authority_not_configured`` for a ``remote`` one without one."""
        if task.scope != "remote":
            return self._fleet
        if self._remote is None:
            raise records.no_authority()
        return self._remote

    def _known(self, task_id: str) -> list[TaskStore]:
        """The stores to look for a task in: the one whose mirror has it, else each in turn."""
        return [store for store in self._stores if store.knows(task_id)] or self._stores


def _newest(found: list[list[Task]]) -> list[Task]:
    """Tasks of several stores, newest first."""
    return sorted((task for tasks in found for task in tasks), key=lambda t: t.created, reverse=True)
