"""The MCP gateway's task tools on a scripted bridge (a real :class:`Bridge` over a mock transport): each
tool's request and its ``X-Kitsune-Session``, the same header on container calls, resumes and direct
calls, a takeover's hold, the heartbeat loop's requests and its stop, and ``initialize``'s instructions."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import httpx
import pytest

from mcp_gateway._bridge import Bridge
from mcp_gateway._caller import Caller
from mcp_gateway._handshake import Front, bridge_caps, bridge_tasks, instructions, new_session
from mcp_gateway._leases import Leases
from mcp_gateway._tools import TOOLS, enabled_tools
from mcp_gateway.http import _Session
from mcp_gateway.server import Gateway
from tests.unit.test_mcp_gateway import PromptingCaller, _held

pytestmark = pytest.mark.anyio

SESSION = "mcp-0123456789abcdef"
_TASK = "t-00000000000000aa"
_TASKS = {"browser_task_create", "browser_task_get", "browser_task_checkpoint", "browser_task_complete",
          "browser_task_takeover"}


def _view(state: str = "owner", ttl: float = 30, task: str = _TASK) -> dict[str, Any]:
    return {"id": task, "agent": "alice", "goal": "Buy tea", "tabs": [3], "resume": "ask", "scope": "browser",
            "owner": SESSION, "lease_ttl": ttl, "status": "active", "state": state}


_LEASED = {"error": "Another session holds the task's lease", "code": "task_leased", "retryable": False,
           "state": {"taskId": _TASK}}


class Recorded:
    """A scripted bridge behind a real :class:`Bridge`: answers by "METHOD /path", records each request."""

    def __init__(self, routes: dict[str, Any]) -> None:
        self.routes = routes
        self.requests: list[tuple[str, str, dict[str, Any] | None, httpx.Headers]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.method, request.url.path, body, request.headers))
        answers = self.routes.get(f"{request.method} {request.url.path}", {"error": "no", "code": "x"})
        answer = answers.pop(0) if isinstance(answers, list) else answers
        return httpx.Response(200, json=answer(body) if callable(answer) else answer)

    def sent(self) -> list[tuple[str, str, dict[str, Any] | None]]:
        return [(method, path, body) for method, path, body, _ in self.requests if path != "/api/caps"]

    def sessions(self) -> set[str | None]:
        return {headers.get("x-kitsune-session") for _, _, _, headers in self.requests}


@asynccontextmanager
async def _bridge(routes: dict[str, Any], session: str = SESSION) -> AsyncIterator[tuple[Bridge, Recorded]]:
    recorded = Recorded({"GET /api/caps": {"caps": ["core", "automation"]}, **routes})
    async with httpx.AsyncClient(transport=httpx.MockTransport(recorded.handle), base_url="http://bridge") as http:
        yield Bridge(http, "token", session=session), recorded


def test_the_task_tools_are_core_tools_and_the_takeover_takes_a_confirm_token() -> None:
    core = {spec.name for spec in enabled_tools(frozenset({"core"}))}
    automation = {spec.name for spec in enabled_tools(frozenset({"automation"}))}
    assert core - automation >= _TASKS
    assert TOOLS["browser_task_get"].read_only and TOOLS["browser_task_takeover"].confirmable
    assert "required" not in TOOLS["browser_task_create"].input_schema  # a fork keeps its task's goal unless given
    assert set(TOOLS["browser_task_takeover"].input_schema["properties"]) == {"taskId", "force", "confirm_token"}
    assert "taskId" not in TOOLS["browser_task_get"].input_schema.get("required", [])


def test_the_descriptions_teach_owner_followers_explicit_takeover_and_unknown_calls() -> None:
    assert "other sessions follow (read only)" in TOOLS["browser_task_create"].description
    assert "explicit browser_task_takeover" in TOOLS["browser_task_create"].description
    for words in ("owner", "follower", "expired", "completed", "revoked"):
        assert words in TOOLS["browser_task_get"].description, words
    takeover = TOOLS["browser_task_takeover"].description
    for words in ("explicit and atomic", "task_leased unless force", "tabs re-observed", "in_flight",
                  "session lost mid-execution", "resume_token", "never retry a write blindly",
                  "context, not authority"):
        assert words in takeover, words


async def test_each_task_tool_sends_its_request_with_the_session_header() -> None:
    routes = {"POST /api/tasks": {"ok": True, "task": _view()},
              f"GET /api/tasks/{_TASK}": {"ok": True, "task": _view()},
              "GET /api/tasks": {"tasks": [_view()]},
              f"POST /api/tasks/{_TASK}/checkpoint": {"ok": True, "task": _view()},
              f"POST /api/tasks/{_TASK}/complete": {"ok": True, "task": _view("completed")},
              f"POST /api/tasks/{_TASK}/takeover": {"ok": True, "task": _view(), "tabs": [], "in_flight": []},
              f"POST /api/tasks/{_TASK}/fork": {"ok": True, "task": _view(), "forked_from": _TASK}}
    async with _bridge(routes) as (bridge, recorded):
        gateway, caller = Gateway(frozenset({"core"})), Caller("a", bridge)
        created = await gateway.call(caller, "browser_task_create",
                                     {"goal": "Buy tea", "tabs": [3], "resume": "off", "scope": "tab"})
        assert created == {"ok": True, "task": _view()}
        assert (await gateway.call(caller, "browser_task_get", {"taskId": _TASK}))["task"]["id"] == _TASK
        assert await gateway.call(caller, "browser_task_get", {}) == {"ok": True, "tasks": [_view()]}
        said = [{"role": "user", "content": "tea"}]
        await gateway.call(caller, "browser_task_checkpoint", {"taskId": _TASK, "summary": "in the cart",
                                                               "messages": said})
        await gateway.call(caller, "browser_task_complete", {"taskId": _TASK})
        await gateway.call(caller, "browser_task_takeover", {"taskId": _TASK, "force": True})
        assert (await gateway.call(caller, "browser_task_create", {"fork": _TASK, "goal": "Again"}))["forked_from"] \
            == _TASK
    assert recorded.sent() == [
        ("POST", "/api/tasks", {"goal": "Buy tea", "tabs": [3], "resume": "off", "scope": "tab"}),
        ("GET", f"/api/tasks/{_TASK}", None), ("GET", "/api/tasks", None),
        ("POST", f"/api/tasks/{_TASK}/checkpoint", {"summary": "in the cart", "messages": said}),
        ("POST", f"/api/tasks/{_TASK}/complete", {}),
        ("POST", f"/api/tasks/{_TASK}/takeover", {"force": True}),
        ("POST", f"/api/tasks/{_TASK}/fork", {"goal": "Again"})]
    assert recorded.sessions() == {SESSION}


async def test_a_bad_argument_is_refused_before_anything_is_sent() -> None:
    async with _bridge({}) as (bridge, recorded):
        refused = await Gateway(frozenset({"core"})).call(Caller("a", bridge), "browser_task_create", {"goal": ""})
    assert refused["code"] == "invalid_parameter" and recorded.sent() == []


async def test_container_calls_resumes_and_direct_calls_carry_the_session_too() -> None:
    routes = {"POST /api/batch": {"ok": True, "status": "ok", "call": 1},
              "POST /api/resume": {"ok": True, "status": "ok", "call": 1},
              "POST /api/act": {"ok": True, "status": "ok", "call": 2}}
    async with _bridge(routes) as (bridge, recorded):
        gateway, caller = Gateway(frozenset({"core", "automation"})), Caller("a", bridge)
        await gateway.call(caller, "browser_batch", {"commands": [{"action": "title"}]})
        await gateway.call(caller, "browser_resume", {"call": 1, "resume_token": "r"})
        await gateway.call(caller, "browser_click", {"selector": "#x", "tabId": 3})
    # the click, then its diff (a snapshot read): both in the session whose last snapshot it compares with
    assert [path for _, path, _ in recorded.sent()] == ["/api/batch", "/api/resume", "/api/act", "/api/act"]
    assert recorded.sessions() == {SESSION}


async def test_a_bridge_without_a_session_sends_no_header() -> None:
    async with _bridge({"GET /api/tasks": {"tasks": []}}, session="") as (bridge, recorded):
        await Gateway(frozenset({"core"})).call(Caller("a", bridge), "browser_task_get", {})
    assert recorded.sessions() == {None}


async def test_a_held_takeover_without_a_prompt_answers_its_confirm_token_and_goes_on_with_it() -> None:
    taken = {"ok": True, "task": _view(), "tabs": [{"tabId": 3, "url": "http://x/", "title": "X"}],
             "in_flight": [{"call": 5, "status": "unknown", "reason": "session lost mid-execution"}]}
    held = _held(4, action="takeOverTask")
    async with _bridge({f"POST /api/tasks/{_TASK}/takeover": [held, taken]}) as (bridge, recorded):
        gateway, leases = Gateway(frozenset({"core"})), Leases()
        caller = Caller("a", bridge, leases=leases)
        stop = await gateway.call(caller, "browser_task_takeover", {"taskId": _TASK})
        assert stop["code"] == "needs_user" and stop["state"]["confirm_token"] == "confirm-4"
        assert stop["state"]["approval"] == "confirm_token" and "keeps no checkpoint" in stop["hint"]
        assert leases.held == {}
        done = await gateway.call(caller, "browser_task_takeover", {"taskId": _TASK, "confirm_token": "confirm-4"})
    assert done == taken and leases.held == {_TASK: 30}
    assert [body for _, _, body in recorded.sent()] == [{}, {"confirm_token": "confirm-4"}]


async def test_a_held_takeover_is_asked_about_in_a_prompt_and_sent_again_once_allowed() -> None:
    taken = {"ok": True, "task": _view(), "tabs": [], "in_flight": []}
    routes = {f"POST /api/tasks/{_TASK}/takeover": [_held(4, action="takeOverTask"), taken],
              "POST /api/tabs": {"error": "no live view", "code": "live_view_disabled"}}
    async with _bridge(routes) as (bridge, recorded):
        caller = PromptingCaller(bridge, "accept")
        assert await Gateway(frozenset({"core"})).call(caller, "browser_task_takeover", {"taskId": _TASK}) == taken
    assert [body for _, path, body in recorded.sent() if path.endswith("/takeover")] == [
        {}, {"confirm_token": "confirm-4"}]


async def test_created_and_taken_tasks_are_held_and_a_completed_or_lost_one_let_go() -> None:
    other = "t-00000000000000bb"
    routes = {"POST /api/tasks": [{"ok": True, "task": _view(ttl=3)}, {"ok": True, "task": _view(task=other)}],
              f"POST /api/tasks/{_TASK}/complete": {"ok": True, "task": _view("completed")},
              f"POST /api/tasks/{other}/checkpoint": _LEASED | {"state": {"taskId": other}},
              "GET /api/tasks": {"tasks": [_view("follower")]}}
    async with _bridge(routes) as (bridge, _):
        gateway, leases = Gateway(frozenset({"core"})), Leases()
        caller = Caller("a", bridge, leases=leases)
        await gateway.call(caller, "browser_task_create", {"goal": "one"})
        await gateway.call(caller, "browser_task_create", {"goal": "two"})
        assert leases.held == {_TASK: 3, other: 30}
        await gateway.call(caller, "browser_task_checkpoint", {"taskId": other})
        assert leases.held == {_TASK: 3}
        await gateway.call(caller, "browser_task_complete", {"taskId": _TASK})
        assert leases.held == {}
        await gateway.call(caller, "browser_task_get", {})  # a follower's task is not held
        assert leases.held == {}


@pytest.mark.parametrize("lost", [_LEASED, {"error": "closed", "code": "task_closed", "retryable": False},
                                  {"ok": True, "task": _view("follower")}], ids=["leased", "closed", "follower"])
async def test_the_heartbeat_renews_every_third_of_the_ttl_until_the_task_is_lost(lost: dict[str, Any]) -> None:
    beats: list[float] = []

    def beat(body: Any) -> dict[str, Any]:
        beats.append(anyio.current_time())
        return lost if len(beats) == 3 else {"ok": True, "task": _view(ttl=0.6)}

    async with _bridge({f"POST /api/tasks/{_TASK}/heartbeat": beat}) as (bridge, recorded):
        leases = Leases()
        async with anyio.create_task_group() as group:
            group.start_soon(leases.run)
            started = anyio.current_time()
            leases.hold(bridge, _TASK, 0.6)
            await anyio.sleep(1.2)
            group.cancel_scope.cancel()
    assert len(beats) == 3 and leases.held == {}  # the third answer said it was lost: no fourth beat
    gaps = [b - a for a, b in zip([started, *beats], beats, strict=False)]
    assert all(0.19 < gap < 0.4 for gap in gaps), gaps  # every ttl/3
    assert [(method, body) for method, _, body in recorded.sent()] == [("POST", {})] * 3
    assert recorded.sessions() == {SESSION}


async def test_the_heartbeat_goes_on_through_a_bridge_that_is_not_there_for_a_while() -> None:
    unavailable = {"error": "down", "code": "bridge_unavailable", "retryable": True, "status": "failed"}
    script = [unavailable, {"ok": True, "task": _view(ttl=0.3)}, {"ok": True, "task": _view(ttl=0.3)}]
    async with _bridge({f"POST /api/tasks/{_TASK}/heartbeat": script}) as (bridge, recorded):
        leases = Leases()
        async with anyio.create_task_group() as group:
            group.start_soon(leases.run)
            leases.hold(bridge, _TASK, 0.3)
            with anyio.fail_after(5):
                while script:
                    await anyio.sleep(0.05)
            group.cancel_scope.cancel()
    assert leases.held == {_TASK: 0.3} and len(recorded.sent()) == 3


async def test_no_heartbeat_while_the_client_is_not_heard_from() -> None:
    heard = [False]
    async with _bridge({f"POST /api/tasks/{_TASK}/heartbeat": {"ok": True, "task": _view(ttl=0.3)}}) as (bridge,
                                                                                                        recorded):
        leases = Leases(live=lambda: heard[0])
        async with anyio.create_task_group() as group:
            group.start_soon(leases.run)
            leases.hold(bridge, _TASK, 0.3)
            await anyio.sleep(0.5)
            assert recorded.sent() == []
            heard[0] = True
            await anyio.sleep(0.25)
            group.cancel_scope.cancel()
    assert len(recorded.sent()) >= 1


async def test_an_http_session_is_heard_from_while_a_request_is_in_flight_or_for_a_lease_ttl_after() -> None:
    session = _Session()
    assert session.heard_from() and not session.idle()
    session.heard -= 31
    assert not session.heard_from()
    session.in_flight = 1
    assert session.heard_from()
    session.in_flight, session.heard = 0, session.heard - 3600
    assert session.idle()


def test_the_instructions_name_the_open_tasks_or_say_where_to_find_them() -> None:
    assert "browser_task_get lists your tasks" in instructions(None)
    assert "no open task" in instructions([_view("completed")])
    named = instructions([_view("expired"), _view("follower", task="t-1"), _view("completed", task="t-2")])
    assert f'{_TASK} "Buy tea" (expired)' in named and 't-1 "Buy tea" (follower)' in named and "t-2" not in named
    many = instructions([_view("expired", task=f"t-{n}") for n in range(12)])
    assert "t-9 " in many and "t-10 " not in many and "and 2 more" in many


def _initialize_line() -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}).encode()


def _front_answer(front: Front, written: io.BytesIO, know: Callable[[], None]) -> dict[str, Any]:
    front.start()
    know()
    assert front.next_line() is not None  # the initialize, replayed to the SDK
    assert front.next_line() is None  # the end of input: the initialize was answered
    answer: dict[str, Any] = json.loads(written.getvalue().splitlines()[0])
    return answer


def test_the_front_s_initialize_waits_for_the_tasks_when_told_to() -> None:
    written = io.BytesIO()
    front = Front(io.BytesIO(_initialize_line() + b"\n"), written, tasks_pending=True)
    knowing = threading.Timer(0.2, front.know_tasks, args=([_view("expired")],))
    answer = _front_answer(front, written, knowing.start)
    assert f"{_TASK} \"Buy tea\" (expired)" in answer["result"]["instructions"]


def test_the_front_s_initialize_does_not_wait_for_tasks_nobody_asks_for() -> None:
    written = io.BytesIO()
    answer = _front_answer(Front(io.BytesIO(_initialize_line() + b"\n"), written), written, lambda: None)
    assert answer["result"]["instructions"] == instructions(None)


@contextmanager
def _http_bridge(answers: dict[str, Any]) -> Iterator[tuple[str, list[tuple[str, str | None]]]]:
    """A bridge on a loopback port answering GET paths; the (path, session header) of each request."""
    heard: list[tuple[str, str | None]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            heard.append((self.path, self.headers.get("X-Kitsune-Session")))
            body = json.dumps(answers.get(self.path, {"error": "no", "code": "x"})).encode()
            self.send_response(200 if self.path in answers else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", heard
    finally:
        server.shutdown()
        server.server_close()


def test_the_stdio_front_asks_the_bridge_for_tasks_and_caps_as_its_session() -> None:
    session = new_session()
    assert len(session) == 20 and session.startswith("mcp-") and int(session[4:], 16) >= 0
    assert session != new_session()
    with _http_bridge({"/api/tasks": {"tasks": [_view("expired")]}, "/api/caps": {"caps": ["core"]}}) as (url, heard):
        assert bridge_tasks(url, "token", session) == [_view("expired")]
        assert bridge_caps(url, "token", session) == (frozenset({"core"}), None)
    assert heard == [("/api/tasks", session), ("/api/caps", session)]
    with _http_bridge({}) as (url, _):
        assert bridge_tasks(url, "token", session) is None  # a bridge without tasks: the instructions say where
