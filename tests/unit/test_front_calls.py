"""``kitsune mcp``'s front serves a ``tools/call`` before the SDK has loaded through the gateway's own handlers: its
answer is the SDK server's, byte for byte (results, errors of the gateway's own and the bridge's); what it cannot
serve as the SDK would is left, in order, to the SDK; a call it served and the SDK's next share the bridge's client,
the agent's token and the MCP session. The SDK's server runs here over memory streams; the bridge is a recorder."""

from __future__ import annotations

import io
import json
import os
import threading
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage

from mcp_gateway._bridge import Bridge
from mcp_gateway._caller import Caller
from mcp_gateway._front_calls import FrontCalls
from mcp_gateway._handshake import HANDSHAKE_VERSIONS, PROTOCOL_VERSION_META_KEY, Front
from mcp_gateway._tool_calls import ToolCalls
from mcp_gateway.server import mcp_server

pytestmark = pytest.mark.anyio

_GROUPS = frozenset({"core", "automation"})
_SNAPSHOT = {"ok": True, "tabId": 7, "url": "http://site/é", "title": "Naïve ☃ \u2028", "score": 1.5e20,
             "missing": None, "snapshot": "- heading \"Naïve\" [ref=e1]", "elements": [{"ref": "e1"}]}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _initialize(version: str, capabilities: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": capabilities or {},
                       "clientInfo": {"name": "test", "version": "1"}}}


def _call(name: str, arguments: Any = None, request_id: int | str = 5, **params: Any) -> dict[str, Any]:
    body = {"name": name, **({} if arguments is None else {"arguments": arguments}), **params}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}


class _Recorder:
    """The bridge: canned answers by route, every request's headers kept."""

    def __init__(self, status: int = 200, answer: dict[str, Any] | None = None, *, down: bool = False) -> None:
        self.status, self.answer, self.down = status, answer or _SNAPSHOT, down
        self.seen: list[tuple[str, str | None, str | None]] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.seen.append((request.url.path, request.headers.get("authorization"),
                          request.headers.get("x-kitsune-session")))
        if self.down:
            raise httpx.ConnectError("refused", request=request)
        if request.url.path == "/api/tabs" and request.method == "GET":
            return httpx.Response(200, json={"tabs": [{"tabId": 7}], "current": 7})
        return httpx.Response(self.status, json=self.answer)


class _Written(io.BytesIO):
    """The client's side of the channel: each answer written wakes the test."""

    def __init__(self) -> None:
        super().__init__()
        self.answered = threading.Event()

    def flush(self) -> None:
        super().flush()
        if self.getvalue().count(b"\n") >= 2:  # the initialize's answer, then the call's
            self.answered.set()


async def _front_answer(version: str, call: dict[str, Any], bridge: _Recorder) -> bytes:
    """The line the front writes for ``call`` (after the ``initialize`` it answered)."""
    written = _Written()
    front = Front(io.BytesIO(json.dumps(_initialize(version)).encode() + b"\n" + json.dumps(call).encode() + b"\n"),
                  written, calls=True)
    front.know_caps(_GROUPS)
    async with httpx.AsyncClient(transport=httpx.MockTransport(bridge.handle), base_url="http://bridge") as http, \
            anyio.create_task_group() as group:
        calls = ToolCalls(_GROUPS, bridge_caps=_GROUPS)
        group.start_soon(FrontCalls(front, calls, lambda: Caller("stdio", Bridge(http, "token", session="s"))).run)
        front.start()
        await anyio.to_thread.run_sync(written.answered.wait)
        group.cancel_scope.cancel()
    return written.getvalue().splitlines(keepends=True)[1]


async def _sdk_answer(version: str, call: dict[str, Any], bridge: _Recorder) -> bytes:
    """The line the gateway's SDK server writes for ``call``, as ``kitsune mcp``'s writer dumps it."""
    async with httpx.AsyncClient(transport=httpx.MockTransport(bridge.handle), base_url="http://bridge") as http:
        server = mcp_server(ToolCalls(_GROUPS, bridge_caps=_GROUPS),
                            lambda ctx: Caller("stdio", Bridge(http, "token", session="s"), ctx))
        to_server, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](10)
        outgoing, from_server = anyio.create_memory_object_stream[SessionMessage](10)
        async with anyio.create_task_group() as group:
            group.start_soon(server.run, incoming, outgoing, server.create_initialization_options())
            answers = []
            for message in (_initialize(version), {"jsonrpc": "2.0", "method": "notifications/initialized"}, call):
                await to_server.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message)))
                if "id" in message:
                    answers.append((await from_server.receive()).message.model_dump_json(by_alias=True,
                                                                                         exclude_unset=True))
            group.cancel_scope.cancel()
    return answers[-1].encode() + b"\n"


_CASES: dict[str, tuple[dict[str, Any], Callable[[], _Recorder]]] = {
    "snapshot": (_call("browser_snapshot", {}), _Recorder),
    "string-id": (_call("browser_snapshot", {}, request_id="five"), _Recorder),
    "no-arguments": (_call("browser_tabs"), lambda: _Recorder(answer={"tabs": [{"tabId": 7, "title": "é"}]})),
    "screenshot": (_call("browser_screenshot", {}),
                   lambda: _Recorder(answer={"ok": True, "image": "aGVsbG8=", "mimeType": "image/png"})),
    "unknown-tool": (_call("browser_nope", {}), _Recorder),
    "unknown-parameter": (_call("browser_click", {"selector": "#a", "bogus": 1}), _Recorder),
    "invalid-parameter": (_call("browser_click", {"selector": "#a", "clickCount": "twice"}), _Recorder),
    "bridge-error": (_call("browser_click", {"selector": "#a", "tabId": 9}), lambda: _Recorder(
        404, {"error": "No tab 9", "code": "tab_not_found", "retryable": False})),
    "bridge-down": (_call("browser_snapshot", {}), lambda: _Recorder(down=True)),
}


@pytest.mark.parametrize("version", HANDSHAKE_VERSIONS)
@pytest.mark.parametrize("case", list(_CASES))
async def test_the_front_s_answer_to_a_call_is_the_sdk_s_byte_for_byte(version: str, case: str) -> None:
    call, bridge = _CASES[case]
    front = await _front_answer(version, call, bridge())
    assert front == await _sdk_answer(version, call, bridge())
    assert json.loads(front)["id"] == call["id"]


def _taken(*messages: dict[str, Any]) -> tuple[list[Any], list[Any], list[object]]:
    """What a front whose gateway serves calls took, what it left for the SDK, and the ids it was told cancelled."""
    front = Front(io.BytesIO(b"".join(json.dumps(m).encode() + b"\n" for m in messages)), io.BytesIO(), calls=True)
    front.know_caps(_GROUPS)
    taken: list[Any] = []
    cancelled: list[object] = []
    front.serve_calls(taken.append, cancelled.append, lambda: None)
    front.start()
    left = []
    while (line := front.next_line()) is not None:
        left.append(json.loads(line))
    return taken, left, cancelled


def test_the_front_takes_a_plain_call_and_leaves_the_rest_to_the_sdk_in_order() -> None:
    plain = _call("browser_snapshot", {}, request_id=1)
    progress = _call("browser_snapshot", {}, request_id=2, _meta={"progressToken": "p"})
    modern = _call("browser_snapshot", {}, request_id=3, _meta={PROTOCOL_VERSION_META_KEY: "2026-07-28"})
    malformed = [_call("browser_snapshot", [1], request_id=4), {**_call("x"), "params": {"arguments": {}}},
                 _call("browser_snapshot", {}, request_id=6, task={"ttl": 1}), {**_call("x"), "id": True}]
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    early = _call("browser_snapshot", {}, request_id=0)
    taken, left, cancelled = _taken(early, _initialize("2025-11-25"), plain, progress, modern, *malformed, cancel)
    assert taken == [plain]
    assert left == [early, _initialize("2025-11-25"), progress, modern, *malformed, cancel]
    assert cancelled == [1]


def test_a_client_that_declared_elicitation_is_served_by_the_sdk_alone() -> None:
    plain = _call("browser_snapshot", {}, request_id=1)
    taken, left, _ = _taken(_initialize("2025-11-25", {"elicitation": {}}), plain)
    assert taken == [] and left == [_initialize("2025-11-25", {"elicitation": {}}), plain]


async def test_a_call_the_front_served_and_the_sdk_s_next_share_the_bridge_client_token_and_session() -> None:
    """The front opens a tab; the SDK's call then acts on the current tab, with the same client, token and session
    (so the bridge's current tab, and the gateway's checkpoints, are the same for both)."""
    bridge = _Recorder(answer={"ok": True, "tabId": 7, "status": "ok"})
    written = _Written()
    opened = _call("browser_tabs", {"op": "new"})
    front = Front(io.BytesIO(json.dumps(_initialize("2025-11-25")).encode() + b"\n" + json.dumps(opened).encode()
                             + b"\n"), written, calls=True)
    front.know_caps(_GROUPS)
    async with httpx.AsyncClient(transport=httpx.MockTransport(bridge.handle), base_url="http://bridge") as http, \
            anyio.create_task_group() as group:
        shared = Bridge(http, "token", session="mcp-1")
        calls = ToolCalls(_GROUPS, bridge_caps=_GROUPS)
        group.start_soon(FrontCalls(front, calls, lambda: Caller("stdio", shared)).run)
        front.start()
        await anyio.to_thread.run_sync(written.answered.wait)
        server = mcp_server(calls, lambda ctx: Caller("stdio", shared, ctx))
        to_server, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](10)
        outgoing, from_server = anyio.create_memory_object_stream[SessionMessage](10)
        group.start_soon(server.run, incoming, outgoing, server.create_initialization_options())
        for message in (_initialize("2025-11-25"), _call("browser_live_view", {}, request_id=6)):
            await to_server.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message)))
            answer = (await from_server.receive()).message
        group.cancel_scope.cancel()
    assert json.loads(written.getvalue().splitlines()[1])["result"]["structuredContent"]["tabId"] == 7
    assert isinstance(answer, types.JSONRPCResponse) and answer.id == 6
    assert [path for path, _, _ in bridge.seen] == ["/api/tabs", "/api/tabs", "/api/tabs"]  # opened; current; link
    assert {(token, session) for _, token, session in bridge.seen} == {("Bearer token", "mcp-1")}


async def test_a_call_the_front_serves_ends_unanswered_when_the_client_cancels_it() -> None:
    """As the SDK does: a cancelled request is never answered (its request to the bridge ends with it)."""
    asked, ended = anyio.Event(), anyio.Event()

    async def hanging(request: httpx.Request) -> httpx.Response:
        asked.set()
        try:
            await anyio.sleep_forever()
        finally:
            ended.set()
        raise AssertionError("unreachable")

    read, client = os.pipe()
    written = _Written()
    front = Front(os.fdopen(read, "rb"), written, calls=True)

    def give(*messages: dict[str, Any]) -> None:
        os.write(client, b"".join(json.dumps(message).encode() + b"\n" for message in messages))

    front.know_caps(_GROUPS)
    async with httpx.AsyncClient(transport=httpx.MockTransport(hanging), base_url="http://bridge") as http, \
            anyio.create_task_group() as group:
        early = FrontCalls(front, ToolCalls(_GROUPS, bridge_caps=_GROUPS),
                           lambda: Caller("stdio", Bridge(http, "token", session="s")))
        group.start_soon(early.run)
        front.start()
        give(_initialize("2025-11-25"), _call("browser_snapshot", {}))
        await asked.wait()
        give({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5}})
        await ended.wait()
        give(_call("browser_nope", {}, request_id=6))  # the next call is answered: nothing else was
        await anyio.to_thread.run_sync(written.answered.wait)
        os.close(client)
        group.cancel_scope.cancel()
    answers = [json.loads(line)["id"] for line in written.getvalue().splitlines()]
    assert answers == [0, 6]
    assert early.wanted.is_set()  # the front answered (or ended) a call: the SDK loads



def test_a_line_left_for_the_sdk_before_the_gateway_s_loop_ran_still_has_the_sdk_loaded() -> None:
    """A client that declared elicitation calls at once: its call is the SDK's, wanted even though the gateway's
    loop had not asked yet (else nothing would ever load the SDK to answer it)."""
    elicits = _initialize("2025-11-25", {"elicitation": {}})
    front = Front(io.BytesIO(json.dumps(elicits).encode() + b"\n" + json.dumps(_call("browser_snapshot", {})).encode()
                             + b"\n"), io.BytesIO(), calls=True)
    front.know_caps(_GROUPS)
    front.start()
    while front.next_line() is not None:  # the reading thread is done
        pass
    wanted: list[None] = []
    front.serve_calls(lambda call: None, lambda request_id: None, lambda: wanted.append(None))
    assert wanted == [None]
