"""A task: one agent's goal on some of its tabs, leased to one of its sessions (issue 17).

Pure: the record, how a caller sees it, and its transitions, each a function from one record to
the next (``None`` when nothing needs writing) that raises the contract's error when the change is
refused. :mod:`actors.task_store` writes what they return, each write a compare-and-set.

A caller's ``state``: ``owner`` (the task is active, its lease live, and the caller's session holds
it), ``follower`` (active, another session holds it), ``expired`` (stored so, or active with its
lease passed: readers derive it before the sweeper writes it), ``completed``, ``revoked``.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

import orjson

from messages.commands import MAX_TAB_ID
from messages.contract import TASK_LEASE_TTL
from messages.errors import KitsuneError

__all__ = ["MAX_GOAL", "MAX_PER_AGENT", "MAX_TABS", "RESUMES", "SCOPES", "SESSION", "STATUSES", "TASK_ID", "InFlight",
           "Resume", "Scope", "State", "Status", "Task", "TaskLimits", "acknowledged", "call_elsewhere", "call_ended",
           "call_started", "check_owner", "check_write", "completed", "expired_now", "lapsed", "new_task",
           "no_authority", "renewed", "revoked", "origin_of", "scope_refusal", "session_of", "taken_over",
           "with_checkpoint"]

Resume = Literal["ask", "auto", "off"]
Scope = Literal["tab", "browser", "remote"]
Status = Literal["active", "expired", "completed", "revoked"]
State = Literal["owner", "follower", "expired", "completed", "revoked"]
RESUMES: tuple[Resume, ...] = get_args(Resume)
SCOPES: tuple[Scope, ...] = get_args(Scope)
STATUSES: tuple[Status, ...] = get_args(Status)

TASK_ID = re.compile(r"t-[0-9a-f]{16}")
"""A task's id: ``t-`` and 16 hex digits (also a safe KV key token)."""
SESSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
"""A session's name, as ``X-Kitsune-Session`` gives it."""
MAX_GOAL = 500
"""Characters of a task's goal, at most (by default: what a checkpoint carries whole)."""
MAX_TABS = 32
"""Tabs a task names, at most (by default)."""
MAX_PER_AGENT = 100
"""An agent's tasks that hold their tabs (active or expired), at most (by default)."""


@dataclass(frozen=True, slots=True)
class TaskLimits:
    """The bounds of one agent's tasks (the ``tasks`` section of the configuration)."""

    per_agent: int = MAX_PER_AGENT
    """Active and expired tasks of one agent, at most (completed and revoked ones do not count)."""
    goal: int = MAX_GOAL
    """Characters of a goal, at most."""
    tabs: int = MAX_TABS
    """Tabs of a task, at most."""


@dataclass(frozen=True, slots=True)
class InFlight:
    """A call of the owner's session on the task's tabs that its session may not have heard the end of."""

    call: int
    ended: bool = False
    """The call ended, and its session has not been heard from since (it may not have got the answer)."""


@dataclass(frozen=True, slots=True)
class Task:
    """A task as the bucket stores it (the contract's record, field for field)."""

    id: str
    agent: str
    goal: str
    tabs: tuple[int, ...]
    resume: Resume
    scope: Scope
    owner: str
    """The session holding the lease (or that held it last)."""
    lease_expires: float
    """Unix seconds the lease ends at, unless renewed."""
    lease_ttl: float
    status: Status
    """As stored: an active task whose lease passed is expired all the same (:meth:`state_for`)."""
    created: float
    updated: float
    in_flight: tuple[InFlight, ...] = ()
    checkpoint: dict[str, Any] | None = field(default=None, hash=False)
    """What :func:`core.task_checkpoint.build_checkpoint` made last; ``None`` before the first."""

    def live(self, now: float) -> bool:
        """Active, with a lease that has not passed."""
        return self.status == "active" and now < self.lease_expires

    def state_for(self, session: str | None, now: float) -> State:
        """How the caller of ``session`` sees the task."""
        if self.status in ("completed", "revoked"):
            return self.status
        if not self.live(now):
            return "expired"
        return "owner" if session == self.owner else "follower"

    def to_dict(self) -> dict[str, Any]:
        """The record's JSON form."""
        return {"id": self.id, "agent": self.agent, "goal": self.goal, "tabs": list(self.tabs),
                "resume": self.resume, "scope": self.scope, "owner": self.owner,
                "lease_expires": self.lease_expires, "lease_ttl": self.lease_ttl, "status": self.status,
                "created": self.created, "updated": self.updated,
                "in_flight": [{"call": f.call, "ended": f.ended} for f in self.in_flight],
                "checkpoint": self.checkpoint}

    def view(self, session: str | None, now: float) -> dict[str, Any]:
        """The task as answers show it: the record without ``in_flight``, with the caller's ``state``, and
        its owner as ``you`` or ``another session`` (a session's name is never shown to another: sent as
        ``X-Kitsune-Session``, it would act as that session)."""
        body = self.to_dict()
        del body["in_flight"]
        body["owner"] = "you" if session == self.owner else "another session"
        body["state"] = self.state_for(session, now)
        return body

    def to_json(self) -> bytes:
        return orjson.dumps(self.to_dict())

    @classmethod
    def from_json(cls, data: bytes) -> Task:
        return cls.from_dict(orjson.loads(data))

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> Task:
        """The record of its JSON form (:meth:`to_dict`)."""
        return cls(id=str(body["id"]), agent=str(body["agent"]), goal=str(body["goal"]),
                   tabs=tuple(int(t) for t in body["tabs"]), resume=body["resume"], scope=body["scope"],
                   owner=str(body["owner"]), lease_expires=float(body["lease_expires"]),
                   lease_ttl=float(body["lease_ttl"]), status=body["status"], created=float(body["created"]),
                   updated=float(body["updated"]),
                   in_flight=tuple(InFlight(int(f["call"]), bool(f["ended"])) for f in body.get("in_flight") or ()),
                   checkpoint=body.get("checkpoint"))


def session_of(header: str | None) -> str:
    """The session a request names (``X-Kitsune-Session``): ``session_required`` when it names none."""
    if not header:
        raise KitsuneError("session_required", "this request needs a session (the X-Kitsune-Session header)")
    if SESSION.fullmatch(header) is None:
        raise KitsuneError("invalid_parameter", "X-Kitsune-Session must match [A-Za-z0-9][A-Za-z0-9_.:-]{0,127}",
                           state={"param": "X-Kitsune-Session"})
    return header


def new_task(agent: str, session: str, goal: str, tabs: Iterable[int], *, now: float, scope: str, resume: str = "ask",
             lease_ttl: float = TASK_LEASE_TTL, task_id: str | None = None, limits: TaskLimits | None = None) -> Task:
    """A task just created: active, owned by ``session`` for ``lease_ttl`` seconds from ``now``; its goal and
    tabs within ``limits`` (the defaults when None; ``invalid_parameter`` naming the limit: ``state.max``). The
    ``scope`` is always the caller's to state (the API's default, ``tab``, is the API's)."""
    limits = limits or TaskLimits()
    if not isinstance(goal, str) or not goal.strip() or len(goal) > limits.goal:
        raise _invalid("goal", f"goal must be a non-empty string of at most {limits.goal} characters",
                       max=limits.goal)
    if resume not in RESUMES:
        raise _invalid("resume", "resume must be one of ask, auto, off")
    if scope not in SCOPES:
        raise _invalid("scope", "scope must be one of tab, browser, remote")
    tab_list = list(tabs)
    if len(tab_list) > limits.tabs:
        raise _invalid("tabs", f"a task names at most {limits.tabs} tabs", max=limits.tabs)
    if scope == "tab" and len(set(tab_list)) > 1:
        raise _invalid("tabs", 'a task of scope "tab" lives with one tab: name one, or use scope "browser"', max=1)
    if any(not isinstance(t, int) or isinstance(t, bool) or not 0 <= t <= MAX_TAB_ID for t in tab_list):
        raise _invalid("tabs", "tabs must be a list of tab ids")
    if not lease_ttl > 0:
        raise _invalid("lease_ttl", "a lease lasts a positive number of seconds")
    return Task(id=task_id or f"t-{secrets.token_hex(8)}", agent=agent, goal=goal, tabs=tuple(dict.fromkeys(tab_list)),
                resume=resume, scope=scope, owner=session_of(session),
                lease_expires=now + lease_ttl, lease_ttl=lease_ttl, status="active", created=now, updated=now)


def no_authority() -> KitsuneError:
    """A ``remote`` task on a node that has no authority to keep it."""
    return KitsuneError("task_authority_not_configured", 'this node has no task authority (tasks.authority): it '
                        'keeps no task of scope "remote"', state={"param": "scope"})


def origin_of(url: object) -> str | None:
    """``scheme://host[:port]`` of an http(s) URL, else None (no origin a task can be bound to)."""
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return f"{parts.scheme}://{parts.hostname}{f':{port}' if port is not None else ''}"


def scope_refusal(task: Task, urls: Mapping[int, object]) -> KitsuneError | None:
    """Why ``task``'s tabs, at ``urls`` now (by tab; a tab not given is closed), break its scope: every tab of
    a ``tab`` or ``browser`` task on the origin the task began on (``task_origin_changed``), or None."""
    began = (task.checkpoint or {}).get("began", {}).get("url") if task.scope != "remote" else None
    origin = origin_of(began)
    if origin is None:
        return None
    moved = [tab for tab in task.tabs if tab in urls and origin_of(urls[tab]) != origin]
    if not moved:
        return None
    return KitsuneError("task_origin_changed", f"tab {moved[0]} of task {task.id} left the origin the task began "
                        "on: the task ended expired", state={"taskId": task.id, "tabId": moved[0]})


def check_owner(task: Task, session: str | None, now: float) -> None:
    """Refuse a change only the lease holder may make (checkpoint, complete, heartbeat)."""
    refusal = _refusal(task, session, now, {"taskId": task.id})
    if refusal is not None:
        raise refusal


def check_write(task: Task, agent: str, session: str | None, now: float, tab: int) -> None:
    """Refuse a write on ``tab``, one of ``task``'s, by ``session`` of ``agent``: only the owner (the task's
    agent, in the session holding the lease) writes on an active task's tabs; an expired one's are nobody's
    until taken over; a revoked one's are closed to its last owner. A completed task restricts nothing.
    Another agent (a tab taken over) is refused whatever session it names, told of no task: a task is
    its agent's alone."""
    if agent != task.agent:
        refusal = _foreign(task, now, tab)
        if refusal is not None:
            raise refusal
        return
    if task.status == "completed" or (task.status == "revoked" and session != task.owner):
        return
    refusal = _refusal(task, session, now, {"taskId": task.id, "tabId": tab})
    if refusal is not None:
        raise refusal


def renewed(task: Task, session: str | None, now: float) -> Task | None:
    """The owner's activity: the lease from ``now`` again, written only when less than half of it is left."""
    check_owner(task, session, now)
    if task.lease_expires - now > task.lease_ttl / 2:
        return None
    return dataclasses.replace(task, lease_expires=now + task.lease_ttl, updated=now)


def taken_over(task: Task, session: str, now: float, force: bool = False) -> Task:
    """``session`` holds the lease from ``now``: a live lease of another session only with ``force``.
    The old owner's ``in_flight`` calls stay in the record (the takeover reports them; the new
    session's next request acknowledges those that ended)."""
    if task.status in ("completed", "revoked"):
        raise KitsuneError("task_closed", f"task {task.id} is {task.status}", state={"taskId": task.id})
    if task.live(now) and session != task.owner and not force:
        raise KitsuneError("task_leased", f"task {task.id} is leased to another session, alive: take it over "
                           "with force, or wait for its lease to end", state={"taskId": task.id})
    return dataclasses.replace(task, owner=session_of(session), status="active", lease_expires=now + task.lease_ttl,
                               updated=now)


class LostRace(Exception):
    """A change that another writer's came before, and that is not to be tried on the record as it is now."""


def takeover(session: str, now: float, force: bool = False) -> Callable[[Task], Task]:
    """``session``'s takeover (:func:`taken_over`) as a store's compare-and-set change that loses a race only to a
    change of who holds the task or of its status (another takeover, its end; :class:`LostRace`): after a write of
    anything else (the records of the holder's calls) it is tried on the task as it is then."""
    held: tuple[str, str] | None = None  # who held it, and its status, at the first read

    def take(task: Task) -> Task:
        nonlocal held
        if held is not None and held != (task.owner, task.status):
            raise LostRace
        held = (task.owner, task.status)
        return taken_over(task, session, now, force)
    return take


def completed(task: Task, session: str | None, now: float) -> Task:
    """The owner ends its task; nothing in flight is tracked any more."""
    check_owner(task, session, now)
    return dataclasses.replace(task, status="completed", updated=now, in_flight=())


def revoked(task: Task, now: float) -> Task | None:
    """The task revoked (by its agent or an operator): a tombstone its last owner's writes meet."""
    if task.status == "revoked":
        return None
    return dataclasses.replace(task, status="revoked", updated=now)


def expired_now(task: Task, now: float) -> Task | None:
    """The lease ended now (an operator's ``?expire=true``): a takeover may claim the task."""
    if task.status in ("completed", "revoked"):
        raise KitsuneError("task_closed", f"task {task.id} is {task.status}", state={"taskId": task.id})
    if task.status == "expired":
        return None
    return dataclasses.replace(task, status="expired", lease_expires=min(task.lease_expires, now), updated=now)


def lapsed(task: Task, now: float) -> Task | None:
    """The sweeper's write: an active task whose lease passed, stored as expired (else nothing)."""
    if task.status != "active" or task.lease_expires > now:
        return None
    return expired_now(task, now)


def call_started(task: Task, call: int) -> Task | None:
    """The owner's session started ``call`` on the task's tabs; as a later call of that session, it
    acknowledges the answers of those that ended."""
    running = tuple(f for f in task.in_flight if not f.ended)
    if any(f.call == call for f in running):
        return None if len(running) == len(task.in_flight) else dataclasses.replace(task, in_flight=running)
    return dataclasses.replace(task, in_flight=(*running, InFlight(call)))


def call_ended(task: Task, call: int) -> Task | None:
    """``call`` ended; it stays in flight until its session is heard from again."""
    if not any(f.call == call and not f.ended for f in task.in_flight):
        return None
    return dataclasses.replace(task, in_flight=tuple(InFlight(f.call, True) if f.call == call else f
                                                     for f in task.in_flight))


def call_elsewhere(task: Task, call: int) -> Task | None:
    """``call`` ended having touched none of the task's tabs: it was never the task's, and leaves its ``in_flight``."""
    if not any(f.call == call for f in task.in_flight):
        return None
    return dataclasses.replace(task, in_flight=tuple(f for f in task.in_flight if f.call != call))


def acknowledged(task: Task) -> Task | None:
    """The owner's session was heard from (a task request): the calls that ended are answered."""
    running = tuple(f for f in task.in_flight if not f.ended)
    return None if len(running) == len(task.in_flight) else dataclasses.replace(task, in_flight=running)


def with_checkpoint(task: Task, checkpoint: Mapping[str, Any], now: float) -> Task:
    """The task with a checkpoint the node built (never the agent: see :mod:`core.task_checkpoint`)."""
    return dataclasses.replace(task, checkpoint=dict(checkpoint), updated=now)


def _refusal(task: Task, session: str | None, now: float, state: dict[str, Any]) -> KitsuneError | None:
    """Why ``session`` may not act as ``task``'s owner now, or ``None`` when it is the owner."""
    match task.state_for(session, now):
        case "owner":
            return None
        case "follower":
            return KitsuneError("task_leased", f"task {task.id} is leased to another session: it observes only",
                                state=state)
        case "expired":
            return KitsuneError("task_expired", f"task {task.id}'s lease ended: take it over first", state=state)
        case "revoked" if session == task.owner:
            return KitsuneError("task_revoked", f"task {task.id} was revoked", state=state)
        case _:
            return KitsuneError("task_closed", f"task {task.id} is {task.status}", state=state)


def _foreign(task: Task, now: float, tab: int) -> KitsuneError | None:
    """Why another agent than ``task``'s may not write ``tab`` now, naming no task (its id, goal and sessions
    are its agent's), or ``None`` once the task is completed or revoked."""
    state = {"tabId": tab, "owner": "another agent"}
    if task.status in ("completed", "revoked"):
        return None
    if task.live(now):
        return KitsuneError("task_leased", f"tab {tab} is in a task of another agent: only that task's owner "
                            "writes it", state=state)
    return KitsuneError("task_expired", f"tab {tab} is in a task of another agent whose lease ended: only that "
                        "agent may take it over or end it", state=state)


def _invalid(parameter: str, message: str, **state: Any) -> KitsuneError:
    return KitsuneError("invalid_parameter", message, state={"param": parameter, **state})
