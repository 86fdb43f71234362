"""``POST /api/act`` (group ``core``): one action outside any container, the MCP gateway's direct tools.

One write per call; its tab is the one it names, else the agent's current tab, found open first. A
``newTab`` naming a one-shot session approves a container call's held ``newTab`` (``bridge.approvals``);
a ``newTab`` or ``switchTab`` that was done makes its tab the agent's current one.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from bridge.approvals import Approving, open_approved
from bridge.routes.groups import CORE, GroupedRoute
from bridge.routes.requests import agent_of, confirm_token, json_body, require_open, with_handles_resolved
from bridge.routes.responses import outcome_response
from bridge.services import CallService, TabService
from core.session_names import names_one_shot
from messages.commands import BLOCKS, NewTab, SwitchTab, parse_call, parse_command
from messages.errors import invalid_call
from messages.results import Done

__all__ = ["action_routes"]


def action_routes(calls: CallService, tabs: TabService, approving: Approving, body_limit: int) -> list[BaseRoute]:
    """``POST /api/act`` over ``calls`` and the agents' ``tabs`` (``approving`` a container call's held
    ``newTab``); bodies up to ``body_limit`` bytes."""

    async def act(request: Request) -> Response:
        agent = agent_of(request)
        body = with_handles_resolved(await json_body(request, body_limit), tabs)
        unknown = sorted(set(body) - {"command", "confirm_token"})
        if unknown:
            raise invalid_call("unknown_parameter", "", f"an action takes no {unknown[0]!r}", param=unknown[0])
        command = parse_command(body.get("command"), "command")
        if isinstance(command, BLOCKS):
            raise invalid_call("invalid_call", "command", "a direct call runs one action, not a block")
        parse_call("batch", [body["command"]])  # a reference has nothing to name here: refused as in a batch
        tab = command.tab_id if isinstance(command.tab_id, int) else tabs.current(agent)
        if command.acts_on_tab:
            if tab is None:
                raise invalid_call("missing_parameter", "command", "no tabId and no current tab", param="tabId")
            await require_open(tabs, tab, "command")
        token = confirm_token(body)
        if isinstance(command, NewTab) and names_one_shot(command.session):  # a held container newTab's approval
            opened = {"session": command.session, "url": command.url, "node": command.node}
            outcome, call = await open_approved(approving, agent, {k: v for k, v in opened.items() if v is not None},
                                                token)
        else:
            outcome, call = await calls.act(agent, command, tab if command.acts_on_tab else None, token)
        if isinstance(outcome, Done) and isinstance(command, NewTab | SwitchTab):  # it is the agent's current tab
            await tabs.set_current(agent, outcome.value["tabId"])
        return outcome_response(outcome, call)

    return [GroupedRoute("/api/act", act, methods=["POST"], groups=CORE)]
