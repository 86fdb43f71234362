"""The routes of tasks: ``/api/tasks`` and ``/api/tasks/{id}`` with its ``checkpoint``, ``complete``,
``heartbeat`` and ``takeover`` (group ``core``). The agent's session is the request's ``X-Kitsune-Session``.
``DELETE /api/tasks/{id}`` also takes an operator's token (the console's ``operators``)."""

from __future__ import annotations

from typing import Any, Protocol

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from bridge.responses import json_response, outcome_response
from bridge.route_groups import CORE, GroupedRoute
from bridge.tasks.service import Tasks
from core.policy import ConfirmTokens, Policy
from messages.errors import KitsuneError

__all__ = ["task_routes"]

_TAKEOVER = frozenset({"force", "confirm_token"})


class _Api(Protocol):
    """What the routes use of the bridge's API: its bodies, its caller."""

    async def body(self, request: Request) -> dict[str, Any]: ...

    def agent(self, request: Request) -> str: ...

    def session(self, request: Request) -> str | None: ...


class _Node(Protocol):
    """What the routes use of the node: its tasks, and what a takeover's approval needs."""

    tasks: Tasks
    confirms: ConfirmTokens

    def policy_of(self, agent: str | None) -> Policy: ...


def task_routes(api: _Api, node: _Node) -> list[BaseRoute]:
    """The task routes over ``api`` and the node's tasks."""
    routes = _TaskRoutes(api, node)
    return [
        GroupedRoute("/api/tasks", routes.collection, methods=["GET", "POST"], groups=CORE),
        GroupedRoute("/api/tasks/{task}", routes.one, methods=["GET", "DELETE"], groups=CORE),
        GroupedRoute("/api/tasks/{task}/{op}", routes.op, methods=["POST"], groups=CORE),
    ]


class _TaskRoutes:
    """The handlers, over the API's caller and bodies and the node's tasks."""

    def __init__(self, api: _Api, node: _Node) -> None:
        self._api = api
        self._node = node

    async def collection(self, request: Request) -> Response:
        agent, session = self._api.agent(request), self._api.session(request)
        if request.method == "GET":
            return json_response({"tasks": self._node.tasks.listing(agent, session)})
        body = await self._api.body(request)
        return json_response({"ok": True, "task": await self._node.tasks.create(agent, session, body)}, 201)

    async def one(self, request: Request) -> Response:
        task_id = request.path_params["task"]
        if request.method == "DELETE":  # the task's agent, or an operator (no agent)
            expire = request.query_params.get("expire", "").lower() in ("1", "true", "yes")
            agent = getattr(request.state, "agent", None)
            by = agent or f"operator:{request.state.operator}"  # as the audit names a console operator
            return json_response({"ok": True, "task": await self._node.tasks.delete(agent, task_id, expire=expire,
                                                                                     by=by)})
        task = await self._node.tasks.get(self._api.agent(request), self._api.session(request), task_id)
        return json_response({"ok": True, "task": task})

    async def op(self, request: Request) -> Response:
        task_id, name = request.path_params["task"], request.path_params["op"]
        agent, session, tasks = self._api.agent(request), self._api.session(request), self._node.tasks
        body = await self._api.body(request) if request.headers.get("content-length", "0") != "0" else {}
        unknown = sorted(set(body) - (_TAKEOVER if name == "takeover" else frozenset({"summary"})))
        if unknown:
            raise KitsuneError("unknown_parameter", f"{name} takes no {unknown[0]!r}", state={"param": unknown[0]})
        summary = body.get("summary")
        if name == "heartbeat":
            return json_response({"ok": True, "task": await tasks.heartbeat(agent, session, task_id)})
        if name == "checkpoint":
            return json_response({"ok": True, "task": await tasks.checkpoint(agent, session, task_id, summary)})
        if name == "complete":
            return json_response({"ok": True, "task": await tasks.complete(agent, session, task_id, summary)})
        if name == "takeover":
            return await self._take_over(request, task_id, body)
        raise KitsuneError("task_not_found", f"No task operation {name!r}", state={"op": name})

    async def _take_over(self, request: Request, task_id: str, body: dict[str, Any]) -> Response:
        force, token = body.get("force", False), body.get("confirm_token", "")
        if not isinstance(force, bool):
            raise KitsuneError("invalid_parameter", "force must be a boolean", state={"param": "force"})
        if not isinstance(token, str):
            raise KitsuneError("invalid_parameter", "confirm_token must be a string", state={"param": "confirm_token"})
        agent, session = self._api.agent(request), self._api.session(request)
        if self._node.policy_of(agent).ask_before_act:  # a write as any: approved first, with a session-bound token
            await self._node.tasks.may_take_over(agent, session, task_id, force)  # never an approval in vain
            hold = self._node.confirms.hold(token, agent, session, "takeover", None, orjson.dumps([task_id, force]),
                                            taskId=task_id, force=force)
            if hold is not None:
                return outcome_response(hold)  # its status: 403 needs_user
        return json_response(await self._node.tasks.take_over(agent, session, task_id, force))
