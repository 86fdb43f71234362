"""Capability groups declared beside their routes: the route a request reaches says its groups."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from bridge.routes.groups import AUTOMATION, CORE, GroupedRoute, grouped, groups_of


async def _ok(request: Request) -> Response:
    return PlainTextResponse("ok")


ROUTES = [GroupedRoute("/api/batch", _ok, methods=["POST"], groups=AUTOMATION),
          GroupedRoute("/api/tasks/{task}/{op}", _ok, methods=["POST"], groups=CORE),
          GroupedRoute("/api/tasks", _ok, methods=["GET"], groups=CORE),
          Route("/api/schema", _ok, methods=["GET"])]


def _scope(method: str, path: str) -> dict[str, object]:
    return {"type": "http", "method": method, "path": path, "root_path": "", "query_string": b"", "headers": []}


def test_the_route_a_request_reaches_gives_its_groups_whatever_its_method() -> None:
    assert groups_of(_scope("POST", "/api/batch"), ROUTES) == AUTOMATION
    assert groups_of(_scope("GET", "/api/batch"), ROUTES) == AUTOMATION  # a 405 of a group says the group
    assert groups_of(_scope("POST", "/api/tasks/t1/takeover"), ROUTES) == CORE  # a route with parameters
    assert groups_of(_scope("GET", "/api/schema"), ROUTES) is None  # a plain route is always on
    assert groups_of(_scope("GET", "/api/nowhere"), ROUTES) is None


def test_the_listing_names_each_grouped_path_up_to_its_first_parameter_once() -> None:
    assert grouped(Starlette(routes=ROUTES).routes) == {"/api/batch": AUTOMATION, "/api/tasks": CORE}
