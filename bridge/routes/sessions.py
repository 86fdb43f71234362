"""The sessions' routes (group ``core``): ``GET /api/sessions`` lists the calling agent's sessions and
tombstones, ``DELETE /api/sessions/{name}`` closes one (its tabs close) or forgets its tombstone."""

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

    return [GroupedRoute("/api/sessions", listing, methods=["GET"], groups=CORE),
            GroupedRoute("/api/sessions/{name}", close, methods=["DELETE"], groups=CORE)]
