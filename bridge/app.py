"""The bridge's HTTP API (Starlette): container calls, resume, tabs, direct actions, schema, health.

Every route but ``/healthz`` needs ``Authorization: Bearer <token>``; the token names the agent.
Routes belong to capability groups (``KITSUNE_CAPS``, or the agent's own ``caps``): a route outside
the calling agent's groups answers 404 ``capability_disabled`` (``bridge.gate`` checks both). Bad
input answers 400 (413 for a body over the limit) with a code and the path of what was wrong, and
nothing is sent to any page.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from actors.call_actor import ResumeCall, RunCall
from bridge.approvals import open_approved
from bridge.call_progress import NDJSON, progress_lines
from bridge.console import console_routes
from bridge.console.limits import LoginLimiter
from bridge.fleet.member import seen_by
from bridge.gate import Gate
from bridge.http_edges import BearerChallenge, error_handlers
from bridge.live import live_routes
from bridge.live.grants import grant_link
from bridge.live.stops import with_live_view
from bridge.live.views import MAX_HANDBACK_WAIT
from bridge.metrics import HttpMetrics, scrape_tokens
from bridge.node import Node
from bridge.query import query_int, query_number
from bridge.responses import json_response, outcome_response
from bridge.route_groups import AUTOMATION, CORE, GroupedRoute, grouped
from bridge.tasks.routes import task_routes
from core.calls import CallResponse, last_opened_tab
from core.policy import USER
from core.session_names import names_one_shot
from core.settings import HttpConfig, Settings
from messages import strict_json
from messages.commands import (
    BLOCKS,
    CallSpec,
    CloseTab,
    NewTab,
    SwitchTab,
    parse_body,
    parse_call,
    parse_command,
    tabs_named,
    whole_param,
)
from messages.contract import CALL_TIMEOUT
from messages.errors import KitsuneError, invalid_call
from messages.fleet import ResumeRequest
from messages.paths import ROOT
from messages.results import Done
from messages.schema import published_schema

__all__ = ["create_app"]

Handler = Callable[[Request], Awaitable[Response]]

class Api:
    """The route handlers, over one node."""

    def __init__(self, node: Node, http: HttpConfig) -> None:
        self.node = node
        self.http = http

    # bodies

    async def body(self, request: Request) -> dict[str, Any]:
        """The request's JSON object; ``invalid_content_type``, ``body_too_large`` or strict_json's errors."""
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json":
            raise KitsuneError("invalid_content_type", "Send the body as application/json",
                               state={"contentType": media or None})
        limit = self.http.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise KitsuneError("body_too_large", f"The body is over {limit} bytes", state={"limit": limit})
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise KitsuneError("body_too_large", f"The body is over {limit} bytes", state={"limit": limit})
            chunks.append(chunk)
        body = strict_json.loads(b"".join(chunks))
        if not isinstance(body, dict):
            raise invalid_call("invalid_call", "", "the body must be a JSON object")
        return body

    def agent(self, request: Request) -> str:
        agent: str = request.state.agent
        return agent

    def session(self, request: Request) -> str | None:
        """The agent's session the request names (``X-Kitsune-Session``), if any."""
        session: str | None = getattr(request.state, "session", None)
        return session

    async def checked(self, spec: CallSpec, agent: str) -> CallSpec:
        """The call with its default tab filled in, after every tab it names was found open (a call
        that names no tab, of an agent with no current tab, has nothing to look up)."""
        default = spec.default_tab if spec.default_tab is not None else self.node.member.current(agent)
        named = [(path, tab) for i, command in enumerate(spec.commands)
                 for path, tab in tabs_named(command, ROOT.child(i)) if isinstance(tab, int)]  # not a reference
        if default is None and not named:
            return spec
        wanted = frozenset(tab for _, tab in named) | (frozenset({default}) if default is not None else frozenset())
        open_tabs = await self.node.open_tab_ids(wanted)
        if spec.default_tab is not None and spec.default_tab not in open_tabs:
            raise self._not_open(spec.default_tab, "")
        for path, tab in named:
            if tab not in open_tabs:
                raise self._not_open(tab, path)
        return CallSpec(spec.kind, spec.commands, default if default in open_tabs else None,
                        spec.stop_on_warning, spec.timeout)

    # container calls

    async def batch(self, request: Request) -> Response:
        return await self._container(request, "batch")

    async def parallel(self, request: Request) -> Response:
        return await self._container(request, "parallel")

    async def _container(self, request: Request, kind: str) -> Response:
        agent = self.agent(request)
        spec = await self.checked(parse_body(kind, await self.body(request)), agent)  # type: ignore[arg-type]
        return await self._run(request, RunCall(spec, None, agent, session=self.session(request)))

    async def workflow(self, request: Request) -> Response:
        agent = self.agent(request)
        body = await self.body(request)
        unknown = sorted(set(body) - {"workflow", "variables", "tabId", "stopOnWarning", "timeout"})
        if unknown:
            raise invalid_call("unknown_parameter", "", f"a workflow body takes no {unknown[0]!r}", param=unknown[0])
        if self.node.workflows is None:
            raise KitsuneError("workflow_not_found", "This node has no workflow directory")
        workflow = self.node.workflows.load(body.get("workflow"))  # type: ignore[arg-type]
        spec, source = workflow.call_spec(body.get("variables"), default_tab=body.get("tabId"),
                                          stop_on_warning=body.get("stopOnWarning", False),
                                          timeout=body.get("timeout", CALL_TIMEOUT))
        return await self._run(request, RunCall(await self.checked(spec, agent), source, agent,
                                                session=self.session(request)))

    async def resume(self, request: Request) -> Response:
        resume = ResumeRequest.from_body(await self.body(request), self.agent(request), self.session(request))
        return await self._run(request, ResumeCall(resume))

    async def _run(self, request: Request, message: RunCall | ResumeCall) -> Response:
        """The call's answer; asked with ``Accept: application/x-ndjson``, a line per finished step first."""
        agent, base = self.agent(request), str(request.base_url)

        async def answer(message: RunCall | ResumeCall) -> CallResponse:
            response = await self.node.run_async(message)
            await self._follow_opened(agent, response.body)
            return replace(response, body=await with_live_view(response.body, agent, base, self.node.live))

        if NDJSON not in request.headers.get("accept", ""):
            response = await answer(message)
            return json_response(response.body, response.http_status)
        return StreamingResponse(progress_lines(lambda heard: answer(replace(message, listener=heard))),
                                 media_type=NDJSON)

    async def _follow_opened(self, agent: str, body: dict[str, Any]) -> None:
        """Make the last tab a call opened or switched to (and that is still open) the agent's current tab, so
        that a direct tool after the call acts there, as after a direct newTab."""
        opened = last_opened_tab(body)
        if opened is not None and opened in await self.node.open_tab_ids(frozenset({opened})):
            await self.node.member.set_current(agent, opened)

    # tabs

    async def list_tabs(self, request: Request) -> Response:
        agent = self.agent(request)
        tabs = seen_by(agent, self.node.member.current(agent), await self.node.describe_tabs())
        return json_response({"tabs": tabs, "current": self.node.member.current(agent),
                      "closed_sessions": self.node.sessions.listing(agent)["tombstones"]})

    async def change_tabs(self, request: Request) -> Response:
        agent = self.agent(request)
        body = await self.body(request)
        op = body.get("op")
        if not isinstance(op, str) or op not in _TAB_OPS:
            raise invalid_call("invalid_parameter", "", "op must be open, close, select, takeover or live_view",
                               param="op")
        unknown = sorted(set(body) - _TAB_OPS[op])
        if unknown:
            raise invalid_call("unknown_parameter", "", f"{op} takes no {unknown[0]!r}", param=unknown[0])
        token = _confirm_token(body)
        if op == "open":
            if names_one_shot(body.get("session")):  # the approval of a container call's held one-shot newTab
                outcome, call = await open_approved(self.node, agent, body, token)
            else:
                command = parse_command({"action": "newTab", **{k: body[k] for k in ("url", "session", "node")
                                                                if k in body}}, "")
                outcome, call = await self.node.act(agent, command, None, token)
            if isinstance(outcome, Done):
                await self.node.member.set_current(agent, outcome.value["tabId"])
            return outcome_response(outcome, call)
        if body.get("tabId") is None:
            raise invalid_call("missing_parameter", "", f"{op} needs tabId", param="tabId")
        tab = whole_param(body["tabId"], "tabId")
        await self._open_tab(tab, "")
        if op == "close":
            outcome, call = await self.node.act(agent, CloseTab(tab_id=tab), tab, token)
            if isinstance(outcome, Done) and self.node.member.current(agent) == tab:
                await self.node.member.set_current(agent, None)
            return outcome_response(outcome, call)
        if op == "select":
            await self.node.member.set_current(agent, tab)
            return json_response({"ok": True, "tabId": tab})
        if op == "live_view":  # who may act through it: bridge.live.grants
            return json_response(await grant_link(self.node.live, self.node.confirms, self.node.policy_of(agent), agent,
                                                  self.session(request), tab, body.get("control"), token,
                                                  str(request.base_url)))
        call = await asyncio.to_thread(self.node.auditor(agent).takeover, tab)  # audited first, as every action
        previous = await self.node.take_over(tab, agent)
        return json_response({"ok": True, "tabId": tab, "previous": "you" if previous == agent else
                      ("user" if previous == USER else "agent"), "call": call})

    async def needs_user(self, request: Request) -> Response:
        tab = query_int(request, "tabId", required=True)
        assert tab is not None
        await self._open_tab(tab, "")
        return json_response({"tabId": tab, **await self.node.needs_user(tab)})

    async def handbacks(self, request: Request) -> Response:
        """How many times a person handed ``tabId`` back from Live View; with ``since`` and ``wait``, once
        that count passes ``since`` (or ``wait`` seconds passed): what a wait on the tab's stop watches."""
        tab = query_int(request, "tabId", required=True)
        since = query_int(request, "since")
        wait = query_number(request, "wait", 0.0, low=0.0, high=MAX_HANDBACK_WAIT)
        assert tab is not None
        await self._open_tab(tab, "")
        return json_response(await self.node.live.handbacks(tab, since, wait))

    async def _open_tab(self, tab: int, path: str) -> None:
        """Raise unless ``tab`` is open (:meth:`_not_open`)."""
        if tab not in await self.node.open_tab_ids(frozenset({tab})):
            raise self._not_open(tab, path)

    def _not_open(self, tab: int, path: str) -> KitsuneError:
        """Why a request naming a tab that is not open is refused whole: ``session_expired`` when its
        session's end closed it, else ``unknown_tab``."""
        closed = self.node.owners.closed_error(tab)  # its session ended, or its node left the fleet
        if closed is not None:
            return KitsuneError(closed.code, closed.message, state={"path": path, "tabId": tab, **(closed.state or {})})
        where = f"command {path}: no" if path else "No"
        return KitsuneError("unknown_tab", f"{where} open tab {tab}", state={"path": path, "tabId": tab})

    # sessions

    async def list_sessions(self, request: Request) -> Response:
        """The calling agent's sessions (name, mode, tabs, created, last used) and tombstones."""
        return json_response(self.node.sessions.listing(self.agent(request)))

    async def close_session(self, request: Request) -> Response:
        """Close one of the calling agent's sessions (its tabs close), or forget its tombstone."""
        return json_response(await self.node.sessions.close(self.agent(request), request.path_params["name"]))

    # direct actions

    async def act(self, request: Request) -> Response:
        """One action, outside any container (the MCP gateway's direct tools): one write per call."""
        agent = self.agent(request)
        body = await self.body(request)
        unknown = sorted(set(body) - {"command", "confirm_token"})
        if unknown:
            raise invalid_call("unknown_parameter", "", f"an action takes no {unknown[0]!r}", param=unknown[0])
        command = parse_command(body.get("command"), "command")
        if isinstance(command, BLOCKS):
            raise invalid_call("invalid_call", "command", "a direct call runs one action, not a block")
        parse_call("batch", [body["command"]])  # a reference has nothing to name here: refused as in a batch
        tab = command.tab_id if isinstance(command.tab_id, int) else self.node.member.current(agent)
        if command.acts_on_tab:
            if tab is None:
                raise invalid_call("missing_parameter", "command", "no tabId and no current tab", param="tabId")
            await self._open_tab(tab, "command")
        token = _confirm_token(body)
        if isinstance(command, NewTab) and names_one_shot(command.session):  # a held container newTab's approval
            opened = {"session": command.session, "url": command.url, "node": command.node}
            outcome, call = await open_approved(self.node, agent, {k: v for k, v in opened.items() if v is not None},
                                                token)
        else:
            outcome, call = await self.node.act(agent, command, tab if command.acts_on_tab else None, token)
        if isinstance(outcome, Done) and isinstance(command, NewTab | SwitchTab):  # it is the agent's current tab
            await self.node.member.set_current(agent, outcome.value["tabId"])
        return outcome_response(outcome, call)

    # the rest

    async def schema(self, request: Request) -> Response:
        return json_response(published_schema())

    async def caps(self, request: Request) -> Response:
        caps = self.node.policy_of(self.agent(request)).caps  # the calling agent's, as they are now
        enabled = sorted(caps)
        routes = sorted(path for path, groups in grouped(request.app.routes).items() if groups & caps)
        return json_response({"caps": enabled, "routes": routes})

    async def fleet(self, request: Request) -> Response:
        """The fleet's nodes alive (name, tabs, max_tabs; ``self`` marks this one): where a newTab may go."""
        return json_response({"node": self.node.config.name, "nodes": self.node.member.nodes()})

    async def healthz(self, request: Request) -> Response:
        healthy = self.node.healthy()
        return json_response({"ok": all(healthy.values()), **healthy}, 200 if all(healthy.values()) else 503)


_TAB_OPS: dict[str, frozenset[str]] = {
    "open": frozenset({"op", "url", "session", "node", "confirm_token"}),
    "close": frozenset({"op", "tabId", "confirm_token"}),
    "select": frozenset({"op", "tabId"}),
    "takeover": frozenset({"op", "tabId"}),
    "live_view": frozenset({"op", "tabId", "control", "confirm_token"}),
}
"""What each ``POST /api/tabs`` operation takes (the writes take the confirm token of their hold)."""


def _confirm_token(body: dict[str, Any]) -> str | None:
    token = body.get("confirm_token")
    if token is not None and not isinstance(token, str):
        raise invalid_call("invalid_parameter", "", "confirm_token must be a string", param="confirm_token")
    return token


def create_app(node: Node, config: Settings, mounts: Sequence[BaseRoute] = ()) -> Starlette:
    """The bridge's ASGI app over a started node; ``mounts`` are routes of the layers above it (MCP)."""
    api = Api(node, config.http)
    limiter = LoginLimiter()
    routes: list[BaseRoute] = [
        GroupedRoute("/api/batch", api.batch, methods=["POST"], groups=AUTOMATION),
        GroupedRoute("/api/parallel", api.parallel, methods=["POST"], groups=AUTOMATION),
        GroupedRoute("/api/workflow", api.workflow, methods=["POST"], groups=AUTOMATION),
        GroupedRoute("/api/resume", api.resume, methods=["POST"], groups=CORE | AUTOMATION),
        GroupedRoute("/api/tabs", api.list_tabs, methods=["GET"], groups=CORE),
        GroupedRoute("/api/tabs", api.change_tabs, methods=["POST"], groups=CORE),
        GroupedRoute("/api/needs-user", api.needs_user, methods=["GET"], groups=CORE),
        GroupedRoute("/api/sessions", api.list_sessions, methods=["GET"], groups=CORE),
        GroupedRoute("/api/sessions/{name}", api.close_session, methods=["DELETE"], groups=CORE),
        GroupedRoute("/api/act", api.act, methods=["POST"], groups=CORE),
        Route("/api/schema", api.schema, methods=["GET"]),
        Route("/api/caps", api.caps, methods=["GET"]),
        Route("/api/fleet", api.fleet, methods=["GET"]),
        GroupedRoute("/api/live/handbacks", api.handbacks, methods=["GET"], groups=CORE),
        Route("/healthz", api.healthz, methods=["GET"]),
        *task_routes(api, node),
        *live_routes(node.live),
        *console_routes(node, config, limiter=limiter),
        *mounts,
    ]
    return Starlette(routes=routes, exception_handlers=dict(error_handlers()), middleware=[
        Middleware(BearerChallenge),  # every 401, /metrics' too
        Middleware(HttpMetrics, metrics=node.metrics, allowed=scrape_tokens(config)),  # and GET /metrics
        Middleware(Gate, config=config, node=node, limiter=limiter)])
