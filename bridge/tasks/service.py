"""The node's tasks: what the routes do, the lease every write to a task's tab passes, the calls each follows.

- Writes: :meth:`Tasks.refusal` is the policy's ``TaskLeases``. The mirror says whether a tab is a
  task's; the bucket's own record then decides (a decisive read: a takeover or a revocation made
  through another node holds for the next write here). The owner is (agent, session): another agent's
  write is refused whatever session it names, and told of no task. The owner's write renews its lease.
- Bounds (:class:`~core.tasks.TaskLimits`): an agent's active and expired tasks
  (``quota_exceeded``; it keeps as many completed or revoked ones at most, the oldest deleted as it
  creates more), a goal's length, a task's tabs; a new task's tabs are found open in one read of what
  the node knows of the fleet, never one bucket read per tab.
- Calls: :meth:`Tasks.following` wraps a call or resume of a session that owns tasks: the call is
  in flight in each of them from its first event until the session is heard from after its end.
  Values typed in it are kept in memory (never written) to scrub the agent's summaries.
- Takeover: one compare-and-set; its answer re-observes the task's tabs now and reports the calls
  in flight as unknown ("session lost mid-execution"), each with a reissued resume token when its
  checkpoint is held (``ask``, ``auto``), and ``auto`` resumes those that need no observation. Every
  call's entry says what became of it: a resume refused (``observed_required``, ``workflow_changed``, any
  error) is that entry's ``not_resumed``, with the token that still resumes it, never the takeover's answer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import Any, Protocol

from actors.audit_actor import Auditor
from actors.call_actor import ResumeCall, RunCall
from actors.loop import IoLoop
from actors.task_scopes import ScopedTaskStore
from bridge.tasks.calls import TaskCalls, rebuilt
from bridge.tasks.fork import close_copies, open_copies
from core import tasks as records
from core.calls import CallResponse
from core.settings import TaskConfig
from core.task_checkpoint import checked_messages
from core.tasks import Task
from messages.commands import Command
from messages.errors import KitsuneError
from messages.fleet import ResumeRequest
from messages.requests import TabRequest
from messages.results import Failed, Failure, Outcome
from messages.steplog import StepLog

__all__ = ["LOST", "Tasks"]

log = logging.getLogger(__name__)

LOST = "session lost mid-execution"
"""The reason a takeover gives for a call its old session may never have heard the end of."""
_DECISIVE_READ = 5.0
_OPENING = 1.0
"""Seconds a new task waits for the fleet's mirror to show a tab it names that is not there yet."""
_GONE = frozenset({"checkpoint_not_found", "resume_token_invalid"})
"""Resume errors after which the token just issued resumes nothing."""


class _Node(Protocol):
    """What tasks need of their node."""

    def auditor(self, agent: str | None) -> Auditor: ...

    def replay(self, call: int) -> StepLog: ...

    async def describe_tabs(self) -> list[dict[str, Any]]: ...

    async def needs_user(self, tab: int) -> dict[str, Any]: ...

    async def run_async(self, message: RunCall | ResumeCall) -> CallResponse: ...

    async def reissue(self, call: int, agent: str) -> str | None: ...

    async def page_view(self, tab: int) -> dict[str, list[str]]: ...

    async def open_tab_ids(self, wanted: frozenset[int] = frozenset()) -> frozenset[int]: ...

    def revoke_site_calls(self, calls: set[int], tabs: tuple[int, ...], code: str, message: str) -> int: ...

    async def act(self, agent: str, command: Command, tab: int | None) -> tuple[Outcome, int]: ...


class Tasks:
    """The tasks of one node's agents (owned by the node; the store is the fleet's)."""

    def __init__(self, store: ScopedTaskStore, io: IoLoop, node: _Node, config: TaskConfig, *,
                 owner_of: Callable[[int], str | None]) -> None:
        self.store = store
        self.lease_ttl = config.lease_ttl
        self.limits = config.limits
        self._remote = config.authority is not None
        """Whether the node keeps ``remote`` tasks (at the host's authority)."""
        self._io = io
        self._node = node
        self._owner_of = owner_of
        """The agent a tab belongs to (the fleet's registry)."""
        self.calls = TaskCalls(store, io, node.replay)
        """The calls the tasks follow."""
        store.on_change = self._changed

    # -- the routes ------------------------------------------------------------------------

    async def create(self, agent: str, session: str | None, body: dict[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(body) - {"goal", "tabs", "resume", "scope"})
        if unknown:
            raise KitsuneError("unknown_parameter", f"a task takes no {unknown[0]!r}", state={"param": unknown[0]})
        tabs = body.get("tabs", [])
        if not isinstance(tabs, list):
            raise KitsuneError("invalid_parameter", "tabs must be a list of tab ids", state={"param": "tabs"})
        task = records.new_task(agent, records.session_of(session), body.get("goal"),  # type: ignore[arg-type]
                                tabs, now=time.time(), resume=body.get("resume", "ask"),
                                scope=body.get("scope", "tab"), lease_ttl=self.lease_ttl, limits=self.limits)
        self._kept(task)
        self._within_quota(agent)
        closed = await self._unopened(task.tabs)
        if closed:
            raise KitsuneError("unknown_tab", f"No open tab {closed[0]}", state={"tabId": closed[0], "param": "tabs"})
        for tab in task.tabs:  # the store refuses a tab of another task that is not over (task_conflict)
            if self._owner_of(tab) != agent:
                raise KitsuneError("tab_owned", f"tab {tab} is not one of your tabs", state={"tabId": tab})
        checkpoint = await self._checkpoint(task, events=[_event("created")])
        task = records.with_checkpoint(task, checkpoint, task.created)
        await asyncio.to_thread(self._node.auditor(agent).task, "created", task.id)
        await self._pruned(agent)
        await self.store.create(task)
        return task.view(session, time.time())

    async def get(self, agent: str, session: str | None, task_id: str) -> dict[str, Any]:
        task = await self._found(agent, task_id)
        if task.state_for(session, time.time()) == "owner":
            task = await self._heard(task, session)
        return task.view(session, time.time())

    def listing(self, agent: str, session: str | None) -> list[dict[str, Any]]:
        now = time.time()
        return [t.view(session, now) for t in self.store.of_agent(agent) if t.status != "revoked"]

    async def heartbeat(self, agent: str, session: str | None, task_id: str) -> dict[str, Any]:
        records.session_of(session)
        await self._found(agent, task_id)
        task = await self.store.change(task_id, lambda t: records.renewed(t, session, time.time()))
        return task.view(session, time.time())

    async def checkpoint(self, agent: str, session: str | None, task_id: str, summary: Any,
                         messages: Any = None) -> dict[str, Any]:
        records.session_of(session)
        recorded = checked_messages(messages)
        task = await self._found(agent, task_id)
        records.check_owner(task, session, time.time())
        checkpoint = await self._checkpoint(task, summary, recorded)
        task = await self.store.change(task_id, lambda t: _owned(t, session, lambda now: records.with_checkpoint(
            records.acknowledged(t) or t, checkpoint, now)))
        return task.view(session, time.time())

    async def complete(self, agent: str, session: str | None, task_id: str, summary: Any,
                       messages: Any = None) -> dict[str, Any]:
        records.session_of(session)
        recorded = checked_messages(messages)
        task = await self._found(agent, task_id)
        records.check_owner(task, session, time.time())
        checkpoint = await self._checkpoint(dataclasses.replace(task, status="completed"), summary, recorded,
                                            [_event("completed", status="completed")])
        await asyncio.to_thread(self._node.auditor(agent).task, "completed", task_id)
        task = await self.store.change(task_id, lambda t: records.with_checkpoint(
            records.completed(t, session, time.time()), checkpoint, time.time()))
        self.calls.forget(task_id)
        return task.view(session, time.time())

    async def delete(self, agent: str | None, task_id: str, *, expire: bool, by: str) -> dict[str, Any]:
        """Revoke a task (or end its lease, ``expire``): the task's agent, or an operator (``agent`` None); the
        audit names ``by``, who did it."""
        task = await self.store.get(task_id)
        if task is None or (agent is not None and task.agent != agent):
            raise _not_found(task_id)
        await asyncio.to_thread(self._node.auditor(by).task, "expired" if expire else "revoked", task_id)
        change = records.expired_now if expire else records.revoked
        task = await self.store.change(task_id, lambda t: self._noted(change(t, time.time()), "expired" if expire
                                                                           else "revoked"))
        if not expire:  # an expired task goes on after a takeover: its typed values still scrub its summary
            self.calls.forget(task_id)
        return task.view(None, time.time())

    async def fork(self, agent: str, session: str | None, task_id: str, goal: Any = None) -> dict[str, Any]:
        """A new task of ``session`` from the checkpoint of ``agent``'s task ``task_id`` (its goal, or ``goal``), on
        new tabs opened from that task's pages; the original untouched. Audited (``forked``) before a tab opens."""
        mine = records.session_of(session)
        original = await self._found(agent, task_id)
        if original.status == "revoked":
            raise KitsuneError("task_closed", f"task {task_id} was revoked: nothing of it is forked",
                               state={"taskId": task_id})
        draft = records.new_task(agent, mine, original.goal if goal is None else goal, (), now=time.time(),
                                 resume=original.resume, scope=original.scope, lease_ttl=self.lease_ttl,
                                 limits=self.limits)
        self._kept(draft)
        self._within_quota(agent)
        described = {tab["tabId"]: tab for tab in await self._node.describe_tabs()}
        await asyncio.to_thread(self._node.auditor(agent).task, "forked", draft.id, task_id)
        tabs = await open_copies(self._node, agent, [described[t] for t in original.tabs if t in described])
        self.calls.remember(draft.id, self.calls.secrets(task_id))
        try:
            task = dataclasses.replace(draft, tabs=tuple(tabs), checkpoint=original.checkpoint)
            task = records.with_checkpoint(task, await self._checkpoint(task, events=[_event("forked")]),
                                           task.created)
            await self._pruned(agent)
            await self.store.create(task)
        except BaseException:
            await close_copies(self._node, agent, tabs)
            self.calls.forget(draft.id)
            raise
        return {"ok": True, "task": task.view(mine, time.time()), "forked_from": task_id}

    async def may_take_over(self, agent: str, session: str | None, task_id: str, force: bool) -> None:
        """Raise what a takeover would answer now if it may not happen (before anyone is asked to approve it): also
        a task whose tabs left its origin (a resume on a page it cannot validate fails closed)."""
        task = await self._found(agent, task_id)
        records.taken_over(task, records.session_of(session), time.time(), force)
        urls = {tab["tabId"]: tab.get("url") for tab in await self._node.describe_tabs()} if task.tabs else {}
        refusal = records.scope_refusal(task, urls)
        if refusal is not None:
            await self._ended(task)
            raise refusal

    async def take_over(self, agent: str, session: str | None, task_id: str, force: bool) -> dict[str, Any]:
        """Take the task over for ``session`` (one compare-and-set), and what it needs to go on."""
        mine = records.session_of(session)
        await self.may_take_over(agent, mine, task_id, force)  # refused before the audit: nothing taken
        await asyncio.to_thread(self._node.auditor(agent).task, "takeover", task_id)
        take = records.takeover(mine, time.time(), force)
        taken = await self.store.change(task_id, lambda t: self._noted(take(t), "taken_over"))
        in_flight = [f.call for f in taken.in_flight]
        taken = await self.store.change(task_id, lambda t: _lost(t, set(in_flight)))
        answer: dict[str, Any] = {"ok": True, "task": taken.view(mine, time.time()),
                                  "tabs": await self._observed(taken), "in_flight": []}
        for call in in_flight:
            answer["in_flight"].append(await self._lost_call(taken, call, mine))
        return answer

    def navigated(self, tab: int, url: str) -> None:
        """``tab`` of this node navigated to ``url`` (on the loop): a ``tab`` task on it that began on another origin
        ends ``expired`` now, not when the node next observes it."""
        for task in self.store.tasks_of_tab(tab):
            if task.scope == "tab" and task.status == "active" and records.scope_refusal(task, {tab: url}):
                self._soon(self._ended(task))

    async def tabs_closed(self, tabs: frozenset[int]) -> None:
        """Tabs of this node closed: a ``tab`` task on one ends ``expired`` (its checkpoint stays to be read)."""
        for task in [task for tab in tabs for task in self.store.tasks_of_tab(tab)]:
            await self._ended(task)

    def admission(self, tab: int, request: TabRequest) -> Outcome | None:
        """A write on ``tab`` of a ``tab`` task this node keeps, whichever node sent it: the task's lease decides
        (in this node's memory), as :meth:`refusal` does for the calls of this node."""
        if not request.writes or request.agent is None:
            return None
        for task in self.store.tasks_of_tab(tab):
            if task.scope == "tab" and task.status != "completed" and self.store.keeps(task.id):
                refused = self._write_refusal(task, tab, request.agent, request.session)
                return Failed(refused) if refused is not None else None
        return None

    def _changed(self, before: Task, after: Task) -> None:
        """A task changed, through any node: when it was revoked or taken over, its calls' site-tool continuation
        tokens end with the authority they were issued under (those of this node's tabs)."""
        if after.status == "revoked" != before.status:
            code, message = "task_revoked", "its task was revoked"
        elif after.owner != before.owner:
            code, message = "task_leased", "its task was taken over by another session"
        else:
            return
        calls = {f.call for f in before.in_flight}
        if calls and self._node.revoke_site_calls(calls, after.tabs, code, message):
            log.info("task %s %s: its calls' continuation tokens were revoked", after.id, code)

    # -- writes (the policy's TaskLeases; any thread but the loop's) ---------------------------

    def looks_up(self, tab: int) -> bool:
        return bool(self.store.tasks_of_tab(tab))

    def refusal(self, tab: int, agent: str, session: str | None) -> Failure | None:
        for mirrored in self.store.tasks_of_tab(tab):  # usually one; a task gone since is passed over
            try:
                task = self._io.run(self.store.get(mirrored.id), timeout=_DECISIVE_READ)
            except KitsuneError as e:  # its store did not answer: the write fails closed
                return Failure(f"{e.message}; nothing was sent", e.code, e.retryable, e.state)
            if task is not None and task.status != "completed":
                return self._write_refusal(task, tab, agent, session)
        return None

    def _write_refusal(self, task: records.Task, tab: int, agent: str, session: str | None) -> Failure | None:
        """Why ``session`` of ``agent`` may not write ``tab`` of ``task`` as the bucket has it now, or None (its
        lease renewed)."""
        try:
            records.check_write(task, agent, session, time.time(), tab)
        except KitsuneError as e:
            return Failure(f"{e.message}; nothing was sent", e.code, False, e.state)
        if task.agent == agent and task.state_for(session, time.time()) == "owner" \
                and records.renewed(task, session, time.time()):
            self._soon(self._renew(task.id, session))
        return None

    # -- calls -----------------------------------------------------------------------------------

    @contextlib.contextmanager
    def following(self, message: RunCall | ResumeCall) -> Iterator[RunCall | ResumeCall]:
        """``message`` as it is, or, for a session that owns tasks, one whose call each of them follows."""
        with self.calls.following(message) as followed:
            yield followed

    def direct(self, agent: str, session: str | None, call: int, secrets: list[str],
               step: dict[str, Any] | None = None) -> None:
        """A direct call of ``session`` started (``step`` None) or ended with its one step's record."""
        self.calls.direct(agent, session, call, secrets, step)

    def _soon(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` on the loop without waiting for it (from any thread); its failure is logged."""
        future = asyncio.run_coroutine_threadsafe(work, self._io.loop)
        future.add_done_callback(_logged)

    # -- helpers ---------------------------------------------------------------------------------

    def _kept(self, task: Task) -> None:
        """Refuse a ``remote`` task before anything is done when the node has no authority to keep it."""
        if task.scope == "remote" and not self._remote:
            raise records.no_authority()

    def _within_quota(self, agent: str) -> None:
        """``quota_exceeded`` when ``agent`` holds as many active and expired tasks as it may (the mirror's)."""
        most = self.limits.per_agent
        if sum(t.status in ("active", "expired") for t in self.store.of_agent(agent)) >= most:
            raise KitsuneError("quota_exceeded", f"an agent has at most {most} active or expired tasks (tasks."
                               "max_per_agent): complete or revoke one first", state={"limit": "tasks", "max": most})

    async def _pruned(self, agent: str) -> None:
        """Keep ``agent``'s completed and revoked tasks to ``limits.per_agent`` at most: the oldest are deleted
        now, as the sweeper would once their tombstones are old."""
        closed = [t for t in self.store.of_agent(agent) if t.status in ("completed", "revoked")]
        for task in sorted(closed, key=lambda t: t.updated, reverse=True)[self.limits.per_agent:]:
            await self.store.remove(task)

    async def _unopened(self, tabs: tuple[int, ...]) -> list[int]:
        """Those of ``tabs`` that are not open in the fleet, from one read of what the node knows (its own
        tabs, the fleet registry's mirror), read again for a moment while some are missing (a tab opened on
        another node a moment ago): never a bucket read per tab."""
        deadline = time.monotonic() + _OPENING
        while True:
            missing = sorted(set(tabs) - await self._node.open_tab_ids())
            if not missing or time.monotonic() >= deadline:
                return missing
            await asyncio.sleep(0.1)

    async def _found(self, agent: str, task_id: str) -> Task:
        task = await self.store.get(task_id) if records.TASK_ID.fullmatch(task_id) else None
        if task is None or task.agent != agent:
            raise _not_found(task_id)
        return task

    async def _heard(self, task: Task, session: str | None) -> Task:
        """The owner's ``session`` was heard from: its lease renewed, the calls it saw end answered (the task as it
        is when another session took it over meanwhile)."""
        try:
            return await self.store.change(task.id, lambda t: _owned(t, session, lambda now: records.acknowledged(
                records.renewed(t, session, now) or t)))
        except KitsuneError:
            return await self.store.get(task.id) or task

    async def _renew(self, task_id: str, session: str | None) -> None:
        with contextlib.suppress(KitsuneError):
            await self.store.change(task_id, lambda t: records.renewed(t, session, time.time()))

    async def _observed(self, task: Task) -> list[dict[str, Any]]:
        """The task's tabs as they are now: URL, title, and whether they need a person (each unknown when the
        fleet's tabs could not be listed)."""
        described: dict[int, dict[str, Any]] | None = None
        with contextlib.suppress(KitsuneError):
            described = {tab["tabId"]: tab for tab in await self._node.describe_tabs()}
        observed: list[dict[str, Any]] = []
        for tab in task.tabs:
            found = described.get(tab) if described is not None else {}
            if found is None:
                observed.append({"tabId": tab, "closed": True})
                continue
            try:
                hint = await self._node.needs_user(tab)
            except KitsuneError:  # its page could not be read (still loading, or it closed): not known
                hint = {"needs_user": None, "reason": None}
            observed.append({"tabId": tab, "url": found.get("url"), "title": found.get("title"),
                             "needs_user": hint.get("needs_user"), "reason": hint.get("reason")})
        return observed

    async def _lost_call(self, task: Task, call: int, session: str) -> dict[str, Any]:
        """A call the old session may not have heard the end of: unknown, with a way to resume it if it kept one.
        ``auto`` resumes it; a resume refused is this entry's ``not_resumed`` (the error, its ``state.steps``
        for ``observed_required``) with the token that still resumes it: the takeover has happened, and
        its answer is the only one to carry that token."""
        lost: dict[str, Any] = {"call": call, "status": "unknown", "reason": LOST}
        if task.resume == "off":
            return lost
        try:
            token = await self._node.reissue(call, task.agent)
        except KitsuneError as e:  # its checkpoint's node did not answer: nothing reissued
            return {**lost, "not_resumed": e.to_json()}
        if token is None:
            return lost
        if task.resume == "ask":
            return {**lost, "resume_token": token}
        try:
            response = await self._node.run_async(ResumeCall(ResumeRequest(call, token, None, task.agent, session)))
        except KitsuneError as e:  # refused: nothing was sent, the checkpoint is as it was (unless it is gone)
            return {**lost, **({} if e.code in _GONE else {"resume_token": token}), "not_resumed": e.to_json()}
        body = response.body
        resumed = {**lost, "resumed": body}
        if isinstance(body.get("resume_token"), str):  # it did not finish ok: resumed again with this one
            resumed["resume_token"] = body["resume_token"]
        return resumed

    def _noted(self, task: Task | None, kind: str) -> Task | None:
        """``task`` (a transition's result) with the event ``kind`` in its checkpoint; None when nothing changed."""
        if task is None:
            return None
        return records.with_checkpoint(task, rebuilt(task, self.calls.secrets(task.id), events=[
            _event(kind, status=task.status)]), task.updated)

    async def _checkpoint(self, task: Task, summary: Any = None, messages: Sequence[dict[str, str]] = (),
                          events: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
        """The task's checkpoint as the node builds it now (its first open tab observed): context, never authority."""
        described = {tab["tabId"]: tab for tab in await self._node.describe_tabs()} if task.tabs else {}
        first = next((described[tab] for tab in task.tabs if tab in described), None)
        page: dict[str, Any] = {}
        if first is not None:
            page = {"url": first.get("url"), "title": first.get("title"),
                    **await self._node.page_view(first["tabId"])}
        checkpoint = rebuilt(task, self.calls.secrets(task.id), page=page, summary=summary, messages=messages,
                             events=events)
        refusal = records.scope_refusal(records.with_checkpoint(task, checkpoint, task.updated),
                                        {tab: found.get("url") for tab, found in described.items()})
        if refusal is not None:
            await self._ended(task)
            raise refusal
        return checkpoint

    async def _ended(self, task: Task) -> None:
        """A tab of ``task`` left the task's origin, or closed: a ``tab`` task stored ends expired now (a
        ``browser`` task is left as it is: only the write that found it is refused)."""
        if task.scope == "tab" and task.status == "active" and await self.store.get(task.id) is not None:
            with contextlib.suppress(KitsuneError):  # closed or expired meanwhile: nothing to end
                await self.store.change(task.id, lambda t: self._noted(records.expired_now(t, time.time()),
                                                                       "expired"))


def _lost(task: Task, calls: set[int]) -> Task:
    """The task once its new owner was told of ``calls``: none in flight, and their steps ``unknown`` in the
    checkpoint (the old session may never have heard how they went)."""
    checkpoint = dict(task.checkpoint or {})
    checkpoint["steps"] = [{k: v for k, v in step.items() if k != "code"} | {"status": "unknown"}
                           if step.get("call") in calls else step for step in checkpoint.get("steps", [])]
    return dataclasses.replace(task, in_flight=(), checkpoint=checkpoint)


def _event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"time": time.time(), "kind": kind, **fields}


def _owned(task: Task, session: str | None, change: Callable[[float], Task | None]) -> Task | None:
    records.check_owner(task, session, time.time())
    return change(time.time())


def _logged(future: concurrent.futures.Future[Any]) -> None:
    if not future.cancelled() and (error := future.exception()) is not None:
        log.warning("a task's record was not updated (%s)", type(error).__name__)


def _not_found(task_id: str) -> KitsuneError:
    return KitsuneError("task_not_found", f"No task {task_id} of yours", state={"taskId": task_id})
