"""The container calls' routes: ``POST /api/batch``, ``/api/parallel``, ``/api/workflow`` (group ``automation``)
and ``POST /api/resume`` (``core`` and ``automation``).

Every tab a call names is found open before anything is sent; a call that stopped where a person can help
answers with a Live View link (``bridge.live.stops``); asked with ``Accept: application/x-ndjson``, a
line per finished step comes first (``bridge.routes.progress``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute

from actors.call_actor import ResumeCall, RunCall
from bridge.live.stops import with_live_view
from bridge.routes.groups import AUTOMATION, CORE, GroupedRoute
from bridge.routes.progress import NDJSON, progress_lines
from bridge.routes.requests import agent_of, json_body, not_open, session_of, with_handles_resolved
from bridge.routes.responses import json_response
from bridge.services import CallService, LiveLinkService, TabService
from core.calls import CallResponse, last_opened_tab
from messages.commands import CallSpec, parse_body, tabs_named
from messages.contract import CALL_TIMEOUT
from messages.errors import KitsuneError, invalid_call
from messages.fleet import ResumeRequest
from messages.paths import ROOT

__all__ = ["call_routes"]

_WORKFLOW = frozenset({"workflow", "variables", "tabId", "stopOnWarning", "timeout"})


def call_routes(calls: CallService, tabs: TabService, live: LiveLinkService, body_limit: int) -> list[BaseRoute]:
    """The container calls' routes over ``calls``, the tabs they name and the Live View links of their stops;
    bodies up to ``body_limit`` bytes."""
    routes = _CallRoutes(calls, tabs, live, body_limit)
    return [
        GroupedRoute("/api/batch", routes.batch, methods=["POST"], groups=AUTOMATION),
        GroupedRoute("/api/parallel", routes.parallel, methods=["POST"], groups=AUTOMATION),
        GroupedRoute("/api/workflow", routes.workflow, methods=["POST"], groups=AUTOMATION),
        GroupedRoute("/api/resume", routes.resume, methods=["POST"], groups=CORE | AUTOMATION),
    ]


class _CallRoutes:
    def __init__(self, calls: CallService, tabs: TabService, live: LiveLinkService, body_limit: int) -> None:
        self._calls = calls
        self._tabs = tabs
        self._live = live
        self._limit = body_limit

    async def batch(self, request: Request) -> Response:
        return await self._container(request, "batch")

    async def parallel(self, request: Request) -> Response:
        return await self._container(request, "parallel")

    async def _container(self, request: Request, kind: str) -> Response:
        agent = agent_of(request)
        body = with_handles_resolved(await json_body(request, self._limit), self._tabs)
        spec = await self._checked(parse_body(kind, body), agent)  # type: ignore[arg-type]
        return await self._run(request, RunCall(spec, None, agent, session=session_of(request)))

    async def workflow(self, request: Request) -> Response:
        agent = agent_of(request)
        body = with_handles_resolved(await json_body(request, self._limit), self._tabs)
        unknown = sorted(set(body) - _WORKFLOW)
        if unknown:
            raise invalid_call("unknown_parameter", "", f"a workflow body takes no {unknown[0]!r}", param=unknown[0])
        if self._calls.workflows is None:
            raise KitsuneError("workflow_not_found", "This node has no workflow directory")
        workflow = self._calls.workflows.load(body.get("workflow"))
        spec, source = workflow.call_spec(body.get("variables"), default_tab=body.get("tabId"),
                                          stop_on_warning=body.get("stopOnWarning", False),
                                          timeout=body.get("timeout", CALL_TIMEOUT))
        return await self._run(request, RunCall(await self._checked(spec, agent), source, agent,
                                                session=session_of(request)))

    async def resume(self, request: Request) -> Response:
        resume = ResumeRequest.from_body(await json_body(request, self._limit), agent_of(request),
                                         session_of(request))
        return await self._run(request, ResumeCall(resume))

    async def _checked(self, spec: CallSpec, agent: str) -> CallSpec:
        """The call with its default tab filled in, after every tab it names was found open (a call
        that names no tab, of an agent with no current tab, has nothing to look up)."""
        default = spec.default_tab if spec.default_tab is not None else self._tabs.current(agent)
        named = [(path, tab) for i, command in enumerate(spec.commands)
                 for path, tab in tabs_named(command, ROOT.child(i)) if isinstance(tab, int)]  # not a reference
        if default is None and not named:
            return spec
        wanted = frozenset(tab for _, tab in named) | (frozenset({default}) if default is not None else frozenset())
        open_tabs = await self._tabs.open_ids(wanted)
        if spec.default_tab is not None and spec.default_tab not in open_tabs:
            raise not_open(self._tabs, spec.default_tab, "")
        for path, tab in named:
            if tab not in open_tabs:
                raise not_open(self._tabs, tab, path)
        return CallSpec(spec.kind, spec.commands, default if default in open_tabs else None,
                        spec.stop_on_warning, spec.timeout)

    async def _run(self, request: Request, message: RunCall | ResumeCall) -> Response:
        """The call's answer; asked with ``Accept: application/x-ndjson``, a line per finished step first."""
        agent, base = agent_of(request), str(request.base_url)

        async def answer(message: RunCall | ResumeCall) -> CallResponse:
            response = await self._calls.run(message)
            await self._follow_opened(agent, response.body)
            return replace(response, body=await with_live_view(response.body, agent, base, self._live))

        if NDJSON not in request.headers.get("accept", ""):
            response = await answer(message)
            return json_response(response.body, response.http_status)
        return StreamingResponse(progress_lines(lambda heard: answer(replace(message, listener=heard))),
                                 media_type=NDJSON)

    async def _follow_opened(self, agent: str, body: dict[str, Any]) -> None:
        """Make the last tab a call opened or switched to (and that is still open) the agent's current tab, so
        that a direct tool after the call acts there, as after a direct newTab."""
        opened = last_opened_tab(body)
        if opened is not None and opened in await self._tabs.open_ids(frozenset({opened})):
            await self._tabs.set_current(agent, opened)
