"""``tab`` tasks across the fleet: each is kept in memory by the node of its tab (:mod:`actors.task_scopes`), and a
request about one that arrives at another node is sent there whole, as a typed fleet message
(:class:`~messages.fleet.TaskOp` on ``<fleet>.node.<name>.tasks``), and answered as that node answered it: its
lease, heartbeat and checkpoint are decided in that node's memory, never in the fleet's store. A task whose node
left the fleet ended with it: ``task_expired``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from actors.bus import Bus, Handler
from actors.serving import ask, typed
from bridge.tasks.service import Tasks
from core.tasks import Task
from messages.errors import KitsuneError
from messages.fleet import TaskAnswered, TaskOp, TaskOpName
from messages.requests import Subjects
from messages.wire import LARGE

__all__ = ["FleetTasks", "TabNodes"]

_TIMEOUT = 10.0
"""Seconds a node waits for the node of a ``tab`` task."""


class TabNodes:
    """The fleet's nodes as a ``tab`` task's store asks them (:class:`actors.task_scopes.TabNodes`)."""

    def __init__(self, here: str, bus: Bus, subjects: Subjects, *, node_of: Callable[[int], str | None],
                 alive: Callable[[], frozenset[str]]) -> None:
        self.here = here
        self.subject = subjects.node(here, "tasks")
        """Where this node answers requests about the ``tab`` tasks it keeps."""
        self._bus = bus
        self._subjects = subjects
        self._node_of = node_of
        self._alive = alive

    def node_of(self, tab: int) -> str | None:
        return self._node_of(tab)

    def alive(self, node: str) -> bool:
        return node == self.here or node in self._alive()

    async def create(self, node: str, task: Task) -> None:
        await self.ask(node, TaskOp("create", task.id, task.agent, task.owner, {"task": task.to_dict()}))

    async def find(self, task_id: str, node: str | None = None) -> tuple[str, Task] | None:
        nodes = [node] if node is not None else sorted(self._alive() - {self.here})
        found = await asyncio.gather(*(self._find_on(n, task_id) for n in nodes))
        return next((hit for hit in found if hit is not None), None)

    async def tabs_free(self, node: str, task: Task, tabs: list[int]) -> None:
        await self.ask(node, TaskOp("tabs_free", task.id, task.agent, None, {"tabs": tabs, "task": task.to_dict()}))

    async def _find_on(self, node: str, task_id: str) -> tuple[str, Task] | None:
        with contextlib.suppress(KitsuneError):  # a node that does not answer keeps none we can use
            record = (await self.ask(node, TaskOp("find", task_id, None, None, {}))).answer
            if record is not None:
                return node, Task.from_dict(record)
        return None

    async def ask(self, node: str, op: TaskOp) -> TaskAnswered:
        """Node ``node``'s answer to ``op``; its errors raised as they were."""
        try:
            answered = await ask(self._bus, self._subjects.node(node, "tasks"), op, _TIMEOUT, TaskAnswered)
        except KitsuneError as e:
            if e.code.startswith("bus_") or e.code == "no_responders":
                raise KitsuneError("fleet_unavailable", f"Node {node}, which keeps the task, did not answer",
                                   retryable=True, state={"taskId": op.task}) from e
            raise
        return answered


class FleetTasks:
    """The routes' tasks (``bridge.services.TaskService``): this node's, and each ``tab`` task another node keeps,
    its request sent there."""

    def __init__(self, tasks: Tasks, nodes: TabNodes) -> None:
        self._tasks = tasks
        self._nodes = nodes
        tasks.calls.forward = self._call_told

    def listing(self, agent: str, session: str | None) -> list[dict[str, Any]]:
        return self._tasks.listing(agent, session)

    async def create(self, agent: str, session: str | None, body: dict[str, Any]) -> dict[str, Any]:
        return await self._tasks.create(agent, session, body)

    async def fork(self, agent: str, session: str | None, task_id: str, goal: Any = None) -> dict[str, Any]:
        return await self._tasks.fork(agent, session, task_id, goal)

    async def get(self, agent: str, session: str | None, task_id: str) -> dict[str, Any]:
        return await self._there("get", agent, session, task_id) or await self._tasks.get(agent, session, task_id)

    async def delete(self, agent: str | None, task_id: str, *, expire: bool, by: str) -> dict[str, Any]:
        return await self._there("delete", agent, None, task_id, expire=expire, by=by) or await self._tasks.delete(
            agent, task_id, expire=expire, by=by)

    async def heartbeat(self, agent: str, session: str | None, task_id: str) -> dict[str, Any]:
        return await self._there("heartbeat", agent, session, task_id) or await self._tasks.heartbeat(
            agent, session, task_id)

    async def checkpoint(self, agent: str, session: str | None, task_id: str, summary: Any,
                         messages: Any = None) -> dict[str, Any]:
        return await self._there("checkpoint", agent, session, task_id, summary=summary, messages=messages) \
            or await self._tasks.checkpoint(agent, session, task_id, summary, messages)

    async def complete(self, agent: str, session: str | None, task_id: str, summary: Any,
                       messages: Any = None) -> dict[str, Any]:
        return await self._there("complete", agent, session, task_id, summary=summary, messages=messages) \
            or await self._tasks.complete(agent, session, task_id, summary, messages)

    async def may_take_over(self, agent: str, session: str | None, task_id: str, force: bool) -> None:
        if await self._there("may_take_over", agent, session, task_id, force=force) is None:
            await self._tasks.may_take_over(agent, session, task_id, force)

    async def take_over(self, agent: str, session: str | None, task_id: str, force: bool) -> dict[str, Any]:
        return await self._there("take_over", agent, session, task_id, force=force) or await self._tasks.take_over(
            agent, session, task_id, force)

    async def _there(self, op: TaskOpName, agent: str | None, session: str | None, task_id: str,
                     **body: Any) -> dict[str, Any] | None:
        """The answer of the node that keeps ``tab`` task ``task_id`` to ``op``, when it is another node; None when
        the task is this node's to answer for (or no node's)."""
        node = await self._tasks.store.holder(task_id)
        if node is None:
            return None
        if not self._nodes.alive(node):
            ended = await self._tasks.store.get(task_id) if op == "get" else None
            if ended is not None and ended.agent == agent:  # as it was last read, expired
                return ended.view(session, time.time())
            raise KitsuneError("task_expired", f"task {task_id} ended with its tab's node, which left the fleet",
                               state={"taskId": task_id})
        answered = await self._nodes.ask(node, TaskOp(op, task_id, agent, session, body))
        if answered.record is not None:
            self._tasks.store.noted(node, Task.from_dict(answered.record))
        if answered.answer is None:
            raise KitsuneError("task_not_found", f"No task {task_id} of yours", state={"taskId": task_id})
        return answered.answer

    async def _call_told(self, node: str, task: Task, op: str, body: dict[str, Any]) -> None:
        """A call of ``task``'s owner through this node, told to the node that keeps the task."""
        kind: TaskOpName = "call_started" if op == "call_started" else "call_ended"
        answered = await self._nodes.ask(node, TaskOp(kind, task.id, task.agent, task.owner, body))
        if answered.record is not None:
            self._tasks.store.noted(node, Task.from_dict(answered.record))

    # -- another node's requests about a tab task this node keeps --------------------------------

    def serving(self) -> dict[str, Handler]:
        """The subject this node answers requests about its ``tab`` tasks on."""
        subject = self._nodes.subject
        return {subject: typed(subject, {TaskOp: self._serve}, limit=LARGE)}

    async def _serve(self, op: TaskOp) -> TaskAnswered:
        if op.op in ("create", "tabs_free"):
            task = Task.from_dict(op.body["task"])
            if op.op == "create":
                await self._tasks.store.create(task)
            else:
                self._tasks.store.tab_conflict(task, [int(tab) for tab in op.body["tabs"]])
            return TaskAnswered({})
        if not self._tasks.store.keeps(op.task):
            return TaskAnswered(None)
        answer = await self._answer(op)
        found = await self._tasks.store.get(op.task)
        return TaskAnswered(answer, found.to_dict() if found is not None else None)

    async def _answer(self, op: TaskOp) -> dict[str, Any] | None:
        """What this node answers ``op`` about a ``tab`` task it keeps."""
        tasks, body = self._tasks, op.body
        if op.op == "find":
            found = await tasks.store.get(op.task)
            return found.to_dict() if found is not None else None
        if op.op in ("call_started", "call_ended"):
            await tasks.calls.apply(op.task, op.session, op.op, body)
            return {}
        if op.op == "delete":
            return await tasks.delete(op.agent, op.task, expire=bool(body.get("expire")), by=str(body.get("by")))
        agent = _agent(op)
        if op.op == "may_take_over":
            await tasks.may_take_over(agent, op.session, op.task, bool(body.get("force")))
            return {}
        if op.op == "take_over":
            return await tasks.take_over(agent, op.session, op.task, bool(body.get("force")))
        if op.op in ("checkpoint", "complete"):
            write = tasks.checkpoint if op.op == "checkpoint" else tasks.complete
            return await write(agent, op.session, op.task, body.get("summary"), body.get("messages"))
        read = tasks.get if op.op == "get" else tasks.heartbeat
        return await read(agent, op.session, op.task)


def _agent(op: TaskOp) -> str:
    if op.agent is None:
        raise KitsuneError("task_not_found", f"No task {op.task} of yours", state={"taskId": op.task})
    return op.agent
