"""The routes of tasks: ``/api/tasks`` and ``/api/tasks/{id}`` with its ``checkpoint``, ``complete``,
``heartbeat``, ``takeover`` and ``fork`` (group ``core``). The agent's session is the request's ``X-Kitsune-Session``.
``DELETE /api/tasks/{id}`` also takes an operator's token (the console's ``operators``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from bridge.routes.groups import CORE, GroupedRoute
from bridge.routes.requests import agent_of, json_body, session_of
from bridge.routes.responses import json_response, outcome_response
from bridge.services import PolicyOf, TaskService
from bridge.tasks.held import HeldTakeovers
from core.policy import ConfirmTokens
from messages.errors import KitsuneError
from messages.results import HeldForApproval

__all__ = ["task_routes"]

_TAKES = {"takeover": frozenset({"force", "confirm_token"}), "checkpoint": frozenset({"summary", "messages"}),
          "complete": frozenset({"summary", "messages"}), "fork": frozenset({"goal"})}
"""The body's parameters each operation takes (a heartbeat none)."""


def task_routes(tasks: TaskService, confirms: ConfirmTokens, held: HeldTakeovers, policy_of: PolicyOf,
                body_limit: int) -> list[BaseRoute]:
    """The task routes over ``tasks``, and the confirm tokens, held takeovers and policies a takeover's approval
    needs; bodies up to ``body_limit`` bytes."""
    routes = _TaskRoutes(tasks, confirms, held, policy_of, body_limit)
    return [
        GroupedRoute("/api/tasks", routes.collection, methods=["GET", "POST"], groups=CORE),
        GroupedRoute("/api/tasks/{task}", routes.one, methods=["GET", "DELETE"], groups=CORE),
        GroupedRoute("/api/tasks/{task}/{op}", routes.op, methods=["POST"], groups=CORE),
    ]


class _TaskRoutes:
    def __init__(self, tasks: TaskService, confirms: ConfirmTokens, held: HeldTakeovers, policy_of: PolicyOf,
                 body_limit: int) -> None:
        self._tasks = tasks
        self._confirms = confirms
        self._held = held
        self._policy_of = policy_of
        self._limit = body_limit

    async def collection(self, request: Request) -> Response:
        agent, session = agent_of(request), session_of(request)
        if request.method == "GET":
            return json_response({"tasks": self._tasks.listing(agent, session)})
        body = await json_body(request, self._limit)
        return json_response({"ok": True, "task": await self._tasks.create(agent, session, body)}, 201)

    async def one(self, request: Request) -> Response:
        task_id = request.path_params["task"]
        if request.method == "DELETE":  # the task's agent, or an operator (no agent)
            expire = request.query_params.get("expire", "").lower() in ("1", "true", "yes")
            agent = getattr(request.state, "agent", None)
            by = agent or f"operator:{request.state.operator}"  # as the audit names a console operator
            return json_response({"ok": True, "task": await self._tasks.delete(agent, task_id, expire=expire,
                                                                                     by=by)})
        task = await self._tasks.get(agent_of(request), session_of(request), task_id)
        return json_response({"ok": True, "task": task})

    async def op(self, request: Request) -> Response:
        task_id, name = request.path_params["task"], request.path_params["op"]
        agent, session, tasks = agent_of(request), session_of(request), self._tasks
        body = await json_body(request, self._limit) if request.headers.get("content-length", "0") != "0" else {}
        unknown = sorted(set(body) - _TAKES.get(name, frozenset()))
        if unknown:
            raise KitsuneError("unknown_parameter", f"{name} takes no {unknown[0]!r}", state={"param": unknown[0]})
        summary, messages = body.get("summary"), body.get("messages")
        if name == "heartbeat":
            return json_response({"ok": True, "task": await tasks.heartbeat(agent, session, task_id)})
        if name == "checkpoint":
            return json_response({"ok": True, "task": await tasks.checkpoint(agent, session, task_id, summary,
                                                                             messages)})
        if name == "complete":
            return json_response({"ok": True, "task": await tasks.complete(agent, session, task_id, summary,
                                                                           messages)})
        if name == "takeover":
            return await self._take_over(request, task_id, body)
        if name == "fork":
            return json_response(await tasks.fork(agent, session, task_id, body.get("goal")), 201)
        raise KitsuneError("task_not_found", f"No task operation {name!r}", state={"op": name})

    async def _take_over(self, request: Request, task_id: str, body: dict[str, Any]) -> Response:
        force, token = body.get("force", False), body.get("confirm_token", "")
        if not isinstance(force, bool):
            raise KitsuneError("invalid_parameter", "force must be a boolean", state={"param": "force"})
        if not isinstance(token, str):
            raise KitsuneError("invalid_parameter", "confirm_token must be a string", state={"param": "confirm_token"})
        agent, session = agent_of(request), session_of(request)
        policy = self._policy_of(agent)
        # a write as any under ask-before-act, and a force takeover under tasks.takeover ask: approved first, with a
        # token bound to the session, the task and force
        # an operator's decision in the console answers the token of the hold it decided
        if policy.ask_before_act or (force and policy.task_takeover == "ask"):
            if token and (decided := self._held.decided(token, agent, session, task_id, force)) is not None:
                return json_response(decided)
            await self._tasks.may_take_over(agent, session, task_id, force)  # never an approval in vain
            hold = self._confirms.hold(token, agent, session, "takeover", None, orjson.dumps([task_id, force]),
                                       taskId=task_id, force=force)
            if hold is not None:  # its status: 403 needs_user; an operator may decide it in the console
                state = dict(hold.failure.state or {})
                state["hold"] = self._held.hold(state["confirm_token"], agent, session, task_id, force)
                return outcome_response(HeldForApproval(dataclasses.replace(hold.failure, state=state)))
            self._held.released(token)  # approved through the agent's client
        return json_response(await self._tasks.take_over(agent, session, task_id, force))
