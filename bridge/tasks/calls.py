"""The calls each task follows: those of its owner's session, recorded in the task only where they touch its tabs.

A call of a session that owns tasks is in flight in each of them from its first event; when it ends, a
task keeps its steps on the task's own tabs (each ``(call, path)`` once: a resume or an approved step
lists its steps again, and they replace the ones listed before) and two events, ``call_started`` (or
``resumed``, for a call the task had seen) and ``call_ended``. A call that touched none of the task's tabs
is no part of it: it leaves the task's ``in_flight`` and nothing of it is recorded. Values typed in the
calls are kept in memory (never written) to scrub what the agent records.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator
from typing import Any

from actors.call_actor import ResumeCall, RunCall
from actors.loop import IoLoop
from actors.task_scopes import ScopedTaskStore
from actors.task_store import Transition
from core import tasks as records
from core.task_checkpoint import build_checkpoint
from core.tasks import Task
from messages.commands import secret_values
from messages.events import CallStarted, Event
from messages.results import worst
from messages.steplog import StepLog

__all__ = ["Forward", "TaskCalls", "rebuilt"]

log = logging.getLogger(__name__)

_SECRETS_KEPT = 64
"""Typed values remembered per task (the newest), to scrub what its agent records."""

Forward = Callable[[str, Task, str, dict[str, Any]], Awaitable[None]]
"""Send a change of a ``tab`` task (its last record known) to the node that keeps it: ``call_started``
(``{"call"}``) or ``call_ended`` (``{"call", "began", "steps", "secrets"}``); that node applies it
(:meth:`TaskCalls.apply`)."""


def rebuilt(task: Task, secrets: Iterable[str], *, page: dict[str, Any] | None = None,
            steps: list[dict[str, Any]] | None = None, events: Iterable[dict[str, Any]] = (),
            summary: Any = None, messages: Iterable[dict[str, Any]] = ()) -> dict[str, Any]:
    """``task``'s checkpoint built again: what is given replaces (``page``, ``steps``, a non-empty ``summary``)
    or follows (``events``, ``messages``) what it holds."""
    previous = task.checkpoint or {}
    seen = page if page is not None else previous.get("page")
    return build_checkpoint(task.goal, previous.get("began") or seen, seen,
                            steps if steps is not None else previous.get("steps", []),
                            [*previous.get("events", []), *events], summary or previous.get("summary", ""),
                            task.status, secrets, [*previous.get("messages", []), *messages])


class TaskCalls:
    """The calls of one node that the tasks of their sessions follow."""

    def __init__(self, store: ScopedTaskStore, io: IoLoop, replay: Callable[[int], StepLog]) -> None:
        self._store = store
        self.forward: Forward | None = None
        """How a ``tab`` task another node keeps is told of this node's calls (set with the fleet's tasks)."""
        self._io = io
        self._replay = replay
        self._secrets: dict[str, collections.deque[str]] = {}
        self._began: dict[int, float] = {}
        """Each call followed and not ended: when it began."""

    def secrets(self, task_id: str) -> Iterable[str]:
        """The values typed in ``task_id``'s calls through this node (the newest)."""
        return self._secrets.get(task_id, ())

    def forget(self, task_id: str) -> None:
        self._secrets.pop(task_id, None)

    def remember(self, task_id: str, secrets: Iterable[str]) -> None:
        """Values that scrub ``task_id``'s records from now on (a fork's, from the task it forks)."""
        if secrets:
            self._secrets.setdefault(task_id, collections.deque(maxlen=_SECRETS_KEPT)).extend(secrets)

    @contextlib.contextmanager
    def following(self, message: RunCall | ResumeCall) -> Iterator[RunCall | ResumeCall]:
        """``message`` as it is, or, for a session that owns tasks, one whose call each of them follows."""
        owned = self._owned(message.agent or "", message.session)
        if not owned:
            yield message
            return
        if isinstance(message, RunCall):
            for task in owned:
                self.remember(task.id, [v for c in message.spec.commands for v in secret_values(c)])
        calls: list[int] = [message.request.call] if isinstance(message, ResumeCall) else []
        for call in calls:
            self._started(owned, call)
        heard = message.listener

        def listen(event: Event) -> None:
            if isinstance(event, CallStarted) and not calls:
                calls.append(event.call)
                self._started(owned, event.call)
            if heard is not None:
                heard(event)
        try:
            yield dataclasses.replace(message, listener=listen)
        finally:
            for call in calls:
                self._end(owned, call, None)

    def direct(self, agent: str, session: str | None, call: int, secrets: list[str],
               step: dict[str, Any] | None = None) -> None:
        """A direct call of ``session`` started (``step`` None) or ended with its one step's record: the tasks
        it owns follow it as any call."""
        owned = self._owned(agent, session)
        if step is not None:
            self._end(owned, call, [step])
            return
        for task in owned:
            self.remember(task.id, secrets)
        self._started(owned, call)

    def _owned(self, agent: str, session: str | None) -> list[Task]:
        """The tasks ``session`` owns: this node's, and the ``tab`` tasks of other nodes it knows of (as last read,
        its lease perhaps renewed there since: their node decides again)."""
        if not session:
            return []
        now = time.time()
        here = [t for t in self._store.of_agent(agent) if t.owner == session and t.state_for(session, now) == "owner"]
        return here + [t for t in self._store.elsewhere_of(agent) if t.owner == session and t.status == "active"]

    async def apply(self, task_id: str, session: str | None, op: str, body: dict[str, Any]) -> None:
        """Another node's call of ``session``, told to the ``tab`` task ``task_id`` this node keeps (:data:`Forward`):
        applied when ``session`` still owns it."""
        def owned(change: Transition) -> Transition:
            return lambda t: change(t) if t.state_for(session, time.time()) == "owner" else None
        call = int(body["call"])
        if op == "call_started":
            await self._store.change(task_id, owned(lambda t: records.call_started(t, call)))
            return
        self.remember(task_id, [str(v) for v in body["secrets"]])
        steps = list(body["steps"])
        await self._store.change(task_id, owned(lambda t: self._recorded(t, call, float(body["began"]), steps)))

    async def _change(self, task: Task, transition: Transition, op: str, body: dict[str, Any]) -> None:
        """``transition`` of ``task`` in this node's stores, or sent to the node that keeps it."""
        node = self._store.kept_by(task.id)
        if node is None or self.forward is None:
            await self._store.change(task.id, transition)
        else:
            await self.forward(node, task, op, body)

    def _started(self, owned: list[Task], call: int) -> None:
        if not owned:
            return
        self._began.setdefault(call, time.time())

        def started(task: Task) -> Task | None:
            return records.call_started(task, call)
        for task in owned:
            self._soon(self._change(task, started, "call_started", {"call": call}))

    def _end(self, owned: list[Task], call: int, steps: list[dict[str, Any]] | None) -> None:
        began = self._began.pop(call, time.time())
        if owned:
            self._soon(self._ended(owned, call, began, steps))

    async def _ended(self, owned: list[Task], call: int, began: float, steps: list[dict[str, Any]] | None) -> None:
        """``call`` ended: in each task, its steps on the task's tabs and its events, or nothing when it touched
        none of them; it stays in flight until its session is heard."""
        if steps is None:
            replayed = await asyncio.to_thread(self._replay, call)
            steps = [{"call": call, "path": r.path, "action": r.action, "tabId": r.tab_id, "status": r.status,
                      "code": r.code} for r in replayed.records() if not r.steps and not r.sequences]
        told = {"call": call, "began": began, "steps": steps}
        for task in owned:
            try:
                await self._change(task, lambda t: self._recorded(t, call, began, steps), "call_ended",
                                   {**told, "secrets": list(self.secrets(task.id))})
            except Exception as e:  # the other tasks are still told
                log.warning("a task's record was not updated (%s)", type(e).__name__)

    def _recorded(self, task: Task, call: int, began: float, steps: list[dict[str, Any]]) -> Task | None:
        mine = [s for s in steps if s.get("tabId") in task.tabs]
        if not mine:
            return records.call_elsewhere(task, call)
        previous = task.checkpoint or {}
        paths = {(s["call"], s["path"]) for s in mine}
        kept = [s for s in previous.get("steps", []) if (s.get("call"), s.get("path")) not in paths]
        again = any(e.get("call") == call for e in previous.get("events", []))
        now = time.time()
        events: list[dict[str, Any]] = [{"time": began, "kind": "resumed" if again else "call_started", "call": call},
                  {"time": now, "kind": "call_ended", "call": call, "status": worst([s["status"] for s in mine])}]
        checkpoint = rebuilt(task, self.secrets(task.id), steps=[*kept, *mine], events=events)
        return records.with_checkpoint(records.call_ended(task, call) or task, checkpoint, now)

    def _soon(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` on the loop without waiting for it (from any thread); its failure is logged."""
        future = asyncio.run_coroutine_threadsafe(work, self._io.loop)
        future.add_done_callback(_logged)


def _logged(future: concurrent.futures.Future[Any]) -> None:
    if not future.cancelled() and (error := future.exception()) is not None:
        log.warning("a task's record was not updated (%s)", type(error).__name__)
