"""A node's drain, for operators (``bridge.drain``): ``POST /api/fleet/nodes/{id}/drain`` (body optional,
``{"deadline": seconds}``) starts it on that node, forwarded over NATS when it is another, and answers 202 with
where it is; ``GET`` the same path says where it is. Only an operator's bearer token passes (``bridge.routes.gate``)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from bridge.routes.requests import json_body
from bridge.routes.responses import json_response
from bridge.services import DrainService
from messages.errors import KitsuneError, invalid_call
from messages.fleet import DrainState
from messages.wire import KIND

__all__ = ["DRAIN_PATH", "drain_routes"]

DRAIN_PATH = "/api/fleet/nodes/{node}/drain"
_SMALL = 1024
"""A drain's body is a deadline at most."""


def drain_routes(drains: DrainService) -> list[BaseRoute]:
    """Start a node's drain, and say where it is."""

    async def start(request: Request) -> Response:
        body = await json_body(request, _SMALL) if request.headers.get("content-length") not in (None, "0") else {}
        unknown = sorted(set(body) - {"deadline"})
        if unknown:
            raise invalid_call("unknown_parameter", "", f"a drain takes no {unknown[0]!r}", param=unknown[0])
        deadline = body.get("deadline")
        if deadline is not None and (isinstance(deadline, bool) or not isinstance(deadline, int | float)):
            raise KitsuneError("invalid_parameter", "deadline must be a number of seconds", state={"param": "deadline"})
        state = await drains.drain(request.path_params["node"], None if deadline is None else float(deadline))
        return json_response(_body(state), 202)

    async def where(request: Request) -> Response:
        return json_response(_body(await drains.drain_state(request.path_params["node"])))

    return [Route(DRAIN_PATH, start, methods=["POST"]), Route(DRAIN_PATH, where, methods=["GET"])]


def _body(state: DrainState) -> dict[str, Any]:
    """A drain's state as the API answers it: ``node``, ``state``, ``deadline``, ``calls``."""
    return {key: value for key, value in state.to_json().items() if key != KIND}
