"""What the API says about itself, in no capability group: ``GET /api/schema`` (the command language's JSON
Schema), ``GET /api/caps`` (the calling agent's groups and their routes), ``GET /api/fleet`` (the nodes a
``newTab`` may go to), and the node's health, no token needed: ``GET /livez`` (200 while the process serves; it
reads neither NATS nor the browser), ``GET /readyz`` (200 only when NATS is connected, the browser is up and the
node does not drain; else 503 naming which is not) and ``GET /healthz`` (as before the split: 200 when NATS and
the browser answer, whether the node drains or not)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from bridge.routes.groups import grouped
from bridge.routes.requests import agent_of
from bridge.routes.responses import json_response
from bridge.services import FleetService, Health, PolicyOf
from messages.schema import published_schema

__all__ = ["about_routes"]


def about_routes(policy_of: PolicyOf, fleet: FleetService, healthy: Health) -> list[BaseRoute]:
    """The routes about the API: its schema, the agents' capability groups (``policy_of``), the ``fleet``, and
    the node's health."""

    async def schema(request: Request) -> Response:
        return json_response(published_schema())

    async def caps(request: Request) -> Response:
        enabled = policy_of(agent_of(request)).caps  # the calling agent's, as they are now
        routes = sorted(path for path, groups in grouped(request.app.routes).items() if groups & enabled)
        return json_response({"caps": sorted(enabled), "routes": routes})

    async def nodes(request: Request) -> Response:
        """The fleet's nodes alive (name, tabs, max_tabs; ``self`` marks this one): where a newTab may go."""
        return json_response({"node": fleet.name, "nodes": fleet.nodes()})

    async def health(request: Request) -> Response:
        parts = healthy()
        return json_response({"ok": all(parts.values()), **parts}, 200 if all(parts.values()) else 503)

    async def live(request: Request) -> Response:
        return json_response({"ok": True, "node": fleet.name})

    async def ready(request: Request) -> Response:
        parts = {**healthy(), "draining": fleet.draining()}
        ok = parts["nats"] and parts["browser"] and not parts["draining"]
        return json_response({"ok": ok, "node": fleet.name, **parts}, 200 if ok else 503)

    return [Route("/api/schema", schema, methods=["GET"]), Route("/api/caps", caps, methods=["GET"]),
            Route("/api/fleet", nodes, methods=["GET"]), Route("/healthz", health, methods=["GET"]),
            Route("/livez", live, methods=["GET"]), Route("/readyz", ready, methods=["GET"])]
