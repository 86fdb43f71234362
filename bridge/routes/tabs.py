"""The tabs' routes (group ``core``): ``GET /api/tabs`` lists the fleet's tabs as the agent sees them,
``POST /api/tabs`` opens, closes, selects or takes over a tab or gives a Live View link of it,
``GET /api/needs-user`` reads a tab's needs-user hint and ``GET /api/live/handbacks`` counts the
times a person handed it back from Live View."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from bridge.approvals import Approving, open_approved
from bridge.fleet.member import seen_by
from bridge.live.grants import grant_link
from bridge.live.views import MAX_HANDBACK_WAIT
from bridge.routes.groups import CORE, GroupedRoute
from bridge.routes.query import query_int, query_number
from bridge.routes.requests import agent_of, confirm_token, json_body, require_open, session_of, with_handles_resolved
from bridge.routes.responses import json_response, outcome_response
from bridge.services import CallService, LiveLinkService, PolicyOf, SessionService, TabService
from core.policy import USER, ConfirmTokens
from core.session_names import names_one_shot
from messages.commands import parse_command, whole_param
from messages.errors import invalid_call
from messages.results import Done

__all__ = ["tab_routes"]

_OPS: dict[str, frozenset[str]] = {
    "open": frozenset({"op", "url", "session", "node", "confirm_token"}),
    "close": frozenset({"op", "tabId", "forget", "confirm_token"}),
    "select": frozenset({"op", "tabId"}),
    "takeover": frozenset({"op", "tabId"}),
    "live_view": frozenset({"op", "tabId", "control", "mode", "confirm_token"}),
}
"""What each ``POST /api/tabs`` operation takes (the writes take the confirm token of their hold)."""


def tab_routes(tabs: TabService, *, sessions: SessionService, calls: CallService, live: LiveLinkService,
               approving: Approving, confirms: ConfirmTokens, policy_of: PolicyOf,
               body_limit: int) -> list[BaseRoute]:
    """The tabs' routes over ``tabs``: the closed sessions the list names, the direct calls that open and close
    tabs (``approving`` those a container call held), Live View's links with the confirm tokens and policies
    that grant their control; bodies up to ``body_limit`` bytes."""
    routes = _TabRoutes(tabs, sessions, calls, live, approving, confirms, policy_of, body_limit)
    return [
        GroupedRoute("/api/tabs", routes.listing, methods=["GET"], groups=CORE),
        GroupedRoute("/api/tabs", routes.change, methods=["POST"], groups=CORE),
        GroupedRoute("/api/needs-user", routes.needs_user, methods=["GET"], groups=CORE),
        GroupedRoute("/api/live/handbacks", routes.handbacks, methods=["GET"], groups=CORE),
    ]


class _TabRoutes:
    def __init__(self, tabs: TabService, sessions: SessionService, calls: CallService, live: LiveLinkService,
                 approving: Approving, confirms: ConfirmTokens, policy_of: PolicyOf, body_limit: int) -> None:
        self._tabs = tabs
        self._sessions = sessions
        self._calls = calls
        self._live = live
        self._approving = approving
        self._confirms = confirms
        self._policy_of = policy_of
        self._limit = body_limit

    async def listing(self, request: Request) -> Response:
        agent = agent_of(request)
        tabs = seen_by(agent, self._tabs.current(agent), await self._tabs.describe())
        return json_response({"tabs": tabs,
                              "current": self._tabs.current(agent),
                              "closed_sessions": self._sessions.listing(agent)["tombstones"]})

    async def change(self, request: Request) -> Response:
        agent = agent_of(request)
        body = with_handles_resolved(await json_body(request, self._limit), self._tabs)
        op = body.get("op")
        if not isinstance(op, str) or op not in _OPS:
            raise invalid_call("invalid_parameter", "", "op must be open, close, select, takeover or live_view",
                               param="op")
        unknown = sorted(set(body) - _OPS[op])
        if unknown:
            raise invalid_call("unknown_parameter", "", f"{op} takes no {unknown[0]!r}", param=unknown[0])
        token = confirm_token(body)
        if op == "open":
            return await self._open(agent, body, token)
        if body.get("tabId") is None:
            raise invalid_call("missing_parameter", "", f"{op} needs tabId", param="tabId")
        tab = whole_param(body["tabId"], "tabId")
        await require_open(self._tabs, tab, "")
        if op == "close":  # with forget, its whole session: closed for good, its stored state deleted
            command = parse_command({"action": "closeTab", "tabId": tab, **{k: body[k] for k in ("forget",)
                                                                              if k in body}}, "")
            outcome, call = await self._calls.act(agent, command, tab, token)
            if isinstance(outcome, Done) and self._tabs.current(agent) in outcome.value.get("tabs", [tab]):
                await self._tabs.set_current(agent, None)
            return outcome_response(outcome, call)
        if op == "select":
            await self._tabs.set_current(agent, tab)
            return json_response({"ok": True, "tabId": tab})
        if op == "live_view":  # who may act through it: bridge.live.grants
            return json_response(await grant_link(self._live, self._confirms, self._policy_of(agent), agent,
                                                  session_of(request), tab, body.get("control"), token,
                                                  str(request.base_url), body.get("mode")))
        previous, call = await self._tabs.take_over(tab, agent)
        return json_response({"ok": True, "tabId": tab, "previous": "you" if previous == agent else
                              ("user" if previous == USER else "agent"), "call": call})

    async def _open(self, agent: str, body: dict[str, Any], token: str | None) -> Response:
        """Open a tab (the approval of a container call's held one-shot newTab when it names that session);
        it becomes the agent's current tab."""
        body = _session_object(body)
        if names_one_shot(body.get("session")) and "persist" not in body:
            outcome, call = await open_approved(self._approving, agent, body, token)
        else:
            command = parse_command({"action": "newTab", **{k: body[k] for k in ("url", "session", "node", "persist")
                                                            if k in body}}, "")
            outcome, call = await self._calls.act(agent, command, None, token)
        if isinstance(outcome, Done):
            await self._tabs.set_current(agent, outcome.value["tabId"])
        return outcome_response(outcome, call)

    async def needs_user(self, request: Request) -> Response:
        tab = query_int(request, "tabId", required=True)
        assert tab is not None
        await require_open(self._tabs, tab, "")
        return json_response({"tabId": tab, **await self._tabs.needs_user(tab)})

    async def handbacks(self, request: Request) -> Response:
        """How many times a person handed ``tabId`` back from Live View; with ``since`` and ``wait``, once
        that count passes ``since`` (or ``wait`` seconds passed): what a wait on the tab's stop watches."""
        tab = query_int(request, "tabId", required=True)
        since = query_int(request, "since")
        wait = query_number(request, "wait", 0.0, low=0.0, high=MAX_HANDBACK_WAIT)
        assert tab is not None
        await require_open(self._tabs, tab, "")
        return json_response(await self._live.handbacks(tab, since, wait))


def _session_object(body: dict[str, Any]) -> dict[str, Any]:
    """An ``open`` whose ``session`` is ``{"name", "persist"}`` as the ``newTab`` fields it stands for."""
    session = body.get("session")
    if not isinstance(session, dict):
        return body
    unknown = sorted(set(session) - {"name", "persist"})
    if unknown:
        raise invalid_call("unknown_parameter", "", f"session takes no {unknown[0]!r}", param=f"session.{unknown[0]}")
    if "name" not in session:
        raise invalid_call("missing_parameter", "", "session needs name", param="session.name")
    return {**body, "session": session["name"], **({"persist": session["persist"]} if "persist" in session else {})}
