"""The sessions' routes (group ``core``): ``GET /api/sessions`` lists the calling agent's sessions and
tombstones, ``DELETE /api/sessions/{name}`` closes one (its tabs close) or forgets its tombstone;
``GET /api/sessions/{name}/debug-log`` answers the last CDP methods its ``cdp`` steps sent (``DELETE``: cleared)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from bridge.routes.groups import CORE, GroupedRoute
from bridge.routes.requests import agent_of
from bridge.routes.responses import json_response
from bridge.services import SessionService

__all__ = ["session_routes"]


def session_routes(sessions: SessionService) -> list[BaseRoute]:
    """The sessions' routes over ``sessions``."""

    async def listing(request: Request) -> Response:
        return json_response(sessions.listing(agent_of(request)))

    async def close(request: Request) -> Response:
        return json_response(await sessions.close(agent_of(request), request.path_params["name"]))

    async def debug_log(request: Request) -> Response:
        agent, name = agent_of(request), request.path_params["name"]
        if request.method == "DELETE":
            return json_response(sessions.clear_debug_log(agent, name))
        return json_response(sessions.debug_log(agent, name))

    return [GroupedRoute("/api/sessions", listing, methods=["GET"], groups=CORE),
            GroupedRoute("/api/sessions/{name}", close, methods=["DELETE"], groups=CORE),
            GroupedRoute("/api/sessions/{name}/debug-log", debug_log, methods=["GET", "DELETE"], groups=CORE)]
