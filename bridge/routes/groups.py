"""Capability groups, declared beside the routes they gate: ``GroupedRoute("/api/batch", ..., groups=AUTOMATION)``.
The gate answers an agent none of whose groups a route is in 404 ``capability_disabled``; ``GET /api/caps``
lists the routes of the agent's groups."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from starlette.routing import BaseRoute, Match, Route
from starlette.types import Scope

__all__ = ["AUTOMATION", "CORE", "GroupedRoute", "grouped", "groups_of"]

CORE = frozenset({"core"})
AUTOMATION = frozenset({"automation"})


class GroupedRoute(Route):
    """A route of the HTTP API in capability groups, declared with it: an agent none of whose groups it is in
    is answered 404 ``capability_disabled`` (a plain route is always on)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], *, methods: list[str], groups: frozenset[str]) -> None:
        super().__init__(path, endpoint, methods=methods)
        self.groups = groups


def grouped(routes: Sequence[BaseRoute]) -> dict[str, frozenset[str]]:
    """Each grouped route's path, up to its first parameter (``/api/tasks/{task}`` is ``/api/tasks``), and the
    groups of the routes there."""
    found: dict[str, frozenset[str]] = {}
    for route in routes:
        if isinstance(route, GroupedRoute):
            path = route.path.split("/{")[0]
            found[path] = found.get(path, frozenset()) | route.groups
    return found


def groups_of(scope: Scope, routes: Sequence[BaseRoute]) -> frozenset[str] | None:
    """The groups of the route a request reaches (its path, whatever its method), None for a plain route."""
    return next((route.groups for route in routes
                 if isinstance(route, GroupedRoute) and route.matches(scope)[0] is not Match.NONE), None)
