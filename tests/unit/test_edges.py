"""The HTTP API's edges: a route's refusal answers its JSON and status; a WebSocket's is left to its endpoint."""

from __future__ import annotations

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, WebSocketRoute
from starlette.testclient import TestClient
from starlette.websockets import WebSocket

from bridge.routes.edges import error_handlers
from messages.errors import KitsuneError


async def _refusing(request: Request) -> Response:
    raise KitsuneError("tab_closed", "Tab 7 is closed", state={"tabId": 7})


async def _refusing_socket(socket: WebSocket) -> None:
    raise KitsuneError("tab_closed", "Tab 7 is closed")


APP = Starlette(routes=[Route("/refuses", _refusing), WebSocketRoute("/socket", _refusing_socket)],
                exception_handlers=dict(error_handlers()))


def test_a_routes_refusal_answers_its_json_and_status() -> None:
    answer = TestClient(APP).get("/refuses")
    refused = KitsuneError("tab_closed", "Tab 7 is closed", state={"tabId": 7})
    assert (answer.status_code, answer.json()) == (refused.http_status, refused.to_json())


def test_a_sockets_refusal_is_raised_on_to_its_server_not_answered_as_http() -> None:
    with pytest.raises(KitsuneError), TestClient(APP).websocket_connect("/socket"):
        pass


def test_a_path_or_method_no_route_takes_answers_json() -> None:
    client = TestClient(APP)
    assert client.get("/nowhere").json()["code"] == "route_not_found"
    assert client.post("/refuses").json()["code"] == "method_not_allowed"
