"""``kitsune mcp``'s front answers ``initialize`` and ``tools/list`` exactly as the gateway's SDK
server does, and leaves everything else, in order, to it. The SDK's server runs here over memory
streams, on the same lines the front reads from a pipe."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from typing import Any

import anyio
import httpx
import mcp_types as types
import pytest
from mcp.shared.message import SessionMessage
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, KNOWN_PROTOCOL_VERSIONS

from mcp_gateway._bridge import Bridge
from mcp_gateway._caller import Caller
from mcp_gateway._handshake import HANDSHAKE_VERSIONS, PROTOCOL_VERSION_META_KEY, Front
from mcp_gateway.server import Gateway

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _initialize(version: str, request_id: int = 0) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}


_INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
_TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
_PING = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
_PROBE = {"jsonrpc": "2.0", "id": 0, "method": "server/discover",
          "params": {"_meta": {PROTOCOL_VERSION_META_KEY: "2026-07-28"}}}


def _lines(*messages: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(m).encode() + b"\n" for m in messages)


def _front(data: bytes, caps: frozenset[str] | None = None, *, taken: bool = False,
           ended: Callable[[], None] | None = None) -> tuple[Front, io.BytesIO]:
    """A front over ``data`` that read it all: what it wrote, and (by next_line) what it left (``ended``: called if
    the input ends before the SDK took over)."""
    written = io.BytesIO()
    front = Front(io.BytesIO(data), written)
    if ended is not None:
        front.on_early_end(ended)
    if caps is not None:
        front.know_caps(caps)
    if taken:
        front.take_over()
    front.start()
    return front, written


def _left(front: Front) -> list[Any]:
    """The lines the front left for the SDK, up to the end of input."""
    left = []
    while (line := front.next_line()) is not None:
        left.append(json.loads(line))
    return left


async def _sdk_answers(caps: frozenset[str], *messages: dict[str, Any]) -> list[Any]:
    """The gateway's SDK server's answers to ``messages`` (its groups known, as an embedded bridge's)."""
    gateway = Gateway(caps, bridge_caps=frozenset({"core", "automation"}))
    async with httpx.AsyncClient() as http:
        server = gateway.server(lambda ctx: Caller("stdio", Bridge(http, "token"), ctx))
        to_server, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](10)
        outgoing, from_server = anyio.create_memory_object_stream[SessionMessage](10)
        answers = []
        async with anyio.create_task_group() as group:
            group.start_soon(server.run, incoming, outgoing, server.create_initialization_options())
            for message in messages:
                await to_server.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message)))
                if "id" in message:
                    answer = await from_server.receive()
                    answers.append(json.loads(answer.message.model_dump_json(by_alias=True, exclude_unset=True)))
            group.cancel_scope.cancel()
    return answers


def test_the_front_negotiates_among_the_sdk_s_handshake_versions() -> None:
    assert HANDSHAKE_VERSIONS == HANDSHAKE_PROTOCOL_VERSIONS
    assert PROTOCOL_VERSION_META_KEY == types.PROTOCOL_VERSION_META_KEY


def test_a_client_that_opens_with_a_discover_probe_is_the_sdk_s_even_for_an_initialize_after_it() -> None:
    """The SDK's client probes ``server/discover`` (10 s), then falls back to ``initialize``: on a node slow to
    start, the SDK serves the probe's era when it comes, so the front must not answer the ``initialize``."""
    messages = (_PROBE, _initialize("2025-11-25", 1), _INITIALIZED, {**_TOOLS_LIST, "id": 2})
    front, written = _front(_lines(*messages), frozenset({"core"}))
    assert _left(front) == list(messages)
    assert written.getvalue() == b""


@pytest.mark.parametrize("version", [*KNOWN_PROTOCOL_VERSIONS, "1999-01-01"])
@pytest.mark.parametrize("caps", [frozenset({"core"}), frozenset({"automation"}), frozenset({"core", "automation"})],
                         ids=["core", "automation", "both"])
async def test_the_front_answers_initialize_and_tools_list_as_the_sdk_s_server_does(
        version: str, caps: frozenset[str]) -> None:
    messages = (_initialize(version), _INITIALIZED, _TOOLS_LIST)
    front, written = _front(_lines(*messages), caps)
    left = _left(front)
    assert [json.loads(line) for line in written.getvalue().splitlines()] == await _sdk_answers(caps, *messages)
    assert left == [_initialize(version), _INITIALIZED]  # the initialize replayed, the answered list not
    assert front.initialize_id == 0


def test_what_the_front_does_not_answer_is_left_to_the_sdk_in_order() -> None:
    messages = (_TOOLS_LIST, _initialize("2025-06-18"), _INITIALIZED, _PING, _TOOLS_LIST)
    front, written = _front(_lines(*messages), frozenset({"core"}))
    left = _left(front)
    answered = [json.loads(line)["id"] for line in written.getvalue().splitlines()]
    assert answered == [0, 1]  # the list before initialize is the SDK's; the one after it is answered
    assert left == [_TOOLS_LIST, _initialize("2025-06-18"), _INITIALIZED, _PING]


def test_a_malformed_initialize_and_what_follows_it_are_the_sdk_s() -> None:
    malformed = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
    front, written = _front(_lines(malformed, _TOOLS_LIST), frozenset({"core"}))
    assert _left(front) == [malformed, _TOOLS_LIST]
    assert written.getvalue() == b""
    assert front.initialize_id is None


@pytest.mark.parametrize(("messages", "taken", "calls"), [
    ((_initialize("2025-06-18"), _INITIALIZED, _PING), False, 1),
    ((_PROBE,), False, 1),  # the era the SDK would serve whole: the client left before it could
    ((_initialize("2025-06-18"), _INITIALIZED, _PING), True, 0),  # the SDK's to end: it cancels what runs
], ids=["before-the-sdk", "probe-before-the-sdk", "after-the-sdk"])
def test_input_that_ends_before_the_sdk_took_over_ends_the_process_once(
        messages: tuple[dict[str, Any], ...], taken: bool, calls: int) -> None:
    ended: list[None] = []
    front, _ = _front(_lines(*messages), frozenset({"core"}), taken=taken, ended=lambda: ended.append(None))
    _left(front)  # the end of input reached the SDK's side: the reading thread is done
    assert len(ended) == calls


def test_once_the_sdk_took_over_the_front_answers_nothing() -> None:
    messages = (_initialize("2025-06-18"), _INITIALIZED, _TOOLS_LIST)
    front, written = _front(_lines(*messages), frozenset({"core"}), taken=True)
    assert _left(front) == list(messages)
    assert written.getvalue() == b""
    assert front.initialize_id is None
