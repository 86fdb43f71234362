"""The in-process transport of ``/mcp`` on ASGI apps of its own: an answer's chunks come as the app sends
them, and it behaves as a socket would (read timeout, disconnect, an app that fails). No network."""

from __future__ import annotations

import time
from typing import Any

import anyio
import httpx
import pytest
from starlette.types import Message, Receive, Scope, Send

from mcp_gateway._inprocess import InProcessTransport

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=InProcessTransport(app), base_url="http://kitsune.internal")


async def test_each_chunk_is_handed_on_as_the_app_sends_it_with_the_request_as_sent() -> None:
    seen: list[Message] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append(await receive())
        assert (scope["method"], scope["path"], scope["query_string"]) == ("POST", "/api/batch", b"x=1")
        await send({"type": "http.response.start", "status": 201, "headers": [(b"content-type", b"text/plain")]})
        for n in range(3):
            await send({"type": "http.response.body", "body": b"%d\n" % n, "more_body": True})
            await anyio.sleep(0.2)
        await send({"type": "http.response.body", "body": b""})

    async with _client(app) as client:
        started = time.monotonic()
        async with client.stream("POST", "/api/batch?x=1", json={"a": 1}) as response:
            assert response.status_code == 201
            heard = [(line, time.monotonic() - started) async for line in response.aiter_lines()]
    assert [line for line, _ in heard] == ["0", "1", "2"]
    assert heard[0][1] < 0.15 and heard[1][1] < 0.35, heard  # not at the end (0.6 s)
    assert seen == [{"type": "http.request", "body": b'{"a":1}', "more_body": False}]


async def test_a_closed_answer_tells_the_app_it_went_away_and_drops_what_it_sends_after() -> None:
    heard: list[Message] = []
    done = anyio.Event()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"first\n", "more_body": True})
        heard.append(await receive())
        await send({"type": "http.response.body", "body": b"late\n"})  # dropped, raises nothing
        done.set()

    async with _client(app) as client:
        async with client.stream("GET", "/") as response:
            async for line in response.aiter_lines():
                assert line == "first"
                break
        with anyio.fail_after(1):
            await done.wait()
    assert heard == [{"type": "http.disconnect"}]


async def test_the_read_timeout_bounds_the_answer_s_start_and_each_chunk() -> None:
    async def silent(scope: Scope, receive: Receive, send: Send) -> None:
        await anyio.sleep(5)

    async def stalls(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"one\n", "more_body": True})
        await anyio.sleep(5)

    async with _client(silent) as client:
        with pytest.raises(httpx.ReadTimeout):
            await client.get("/", timeout=0.2)
    async with _client(stalls) as client, client.stream("GET", "/", timeout=0.2) as response:
        with pytest.raises(httpx.ReadTimeout):
            async for _ in response.aiter_lines():
                pass


async def test_an_app_that_fails_answers_500_before_its_answer_and_breaks_the_body_after() -> None:
    async def before(scope: Scope, receive: Receive, send: Send) -> None:
        raise RuntimeError("boom")

    async def after(scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"half", "more_body": True})
        raise RuntimeError("boom")

    async def returns(scope: Scope, receive: Receive, send: Send) -> None:
        pass

    async with _client(before) as client:
        assert (await client.get("/")).status_code == 500
    async with _client(returns) as client:
        assert (await client.get("/")).status_code == 500
    async with _client(after) as client:
        with pytest.raises(httpx.ReadError):
            await client.get("/")
