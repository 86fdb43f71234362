"""The tool calls ``kitsune mcp``'s front takes before the MCP SDK has loaded, run on the gateway's loop.

The SDK takes about a second of CPU to load, and the first tool call waited for it. The front passes a
``tools/call`` it may serve as the SDK would (``_handshake.servable_call``, from a client without elicitation)
here: it runs through the gateway's own handlers (:meth:`ToolCalls.answer`, the SDK's path too), with the same
checkpoints, current tab, bridge client and session the SDK's calls get afterwards, and its answer is the JSON
the SDK would write, byte for byte. A ``notifications/cancelled`` for it ends it unanswered, as the SDK does.
Until the SDK took the channel over the front writes the answer; after, the SDK's writer does.

The SDK is not loaded before it is wanted (:attr:`FrontCalls.wanted`): once the front left a line that needs the
SDK's answer, or wrote its first call's answer (the SDK then loads while the agent reads it). Until then its
second of CPU is not on the way to the first answer, which on two cores shares them with the bridge's start.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

import anyio
import pydantic_core

from mcp_gateway._caller import Caller
from mcp_gateway._handshake import Front
from mcp_gateway._tool_calls import ToolCalls

__all__ = ["FrontCalls", "answer_line"]


def answer_line(request_id: int | str, result: dict[str, Any]) -> bytes:
    """The JSON-RPC answer to ``request_id`` as the SDK's stdio writer writes it (pydantic's JSON, one line)."""
    return pydantic_core.to_json({"jsonrpc": "2.0", "id": request_id, "result": result}) + b"\n"


class FrontCalls:
    """Runs the calls the front takes (``caller``: who each runs as), until the gateway's loop ends."""

    def __init__(self, front: Front, calls: ToolCalls, caller: Callable[[], Caller]) -> None:
        self._front = front
        self._calls = calls
        self._caller = caller
        self._inbox, self._taken = anyio.create_memory_object_stream[dict[str, Any]](math.inf)
        self._running: dict[tuple[type, object], anyio.CancelScope] = {}
        """The calls under way, by their id (its type too: 1 and "1" are two ids)."""
        self._send: Callable[[bytes], Awaitable[None]] | None = None
        self._handed = anyio.Event()
        self.wanted = anyio.Event()
        """Set once the SDK is wanted: a line left for it needs its answer, or the front answered a call."""

    async def run(self) -> None:
        """Take the front's calls (from now on) and run each, until cancelled."""
        loop = asyncio.get_running_loop()

        def start(call: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(self._inbox.send_nowait, call)

        def cancel(request_id: object) -> None:
            with suppress(RuntimeError):  # the loop is closed
                loop.call_soon_threadsafe(self._cancel, request_id)

        def wanted() -> None:
            with suppress(RuntimeError):
                loop.call_soon_threadsafe(self.wanted.set)

        self._front.serve_calls(start, cancel, wanted)
        async with anyio.create_task_group() as group, self._taken:
            async for call in self._taken:
                group.start_soon(self._run, call)

    def hand_over(self, send: Callable[[bytes], Awaitable[None]]) -> None:
        """The SDK's writer, which writes the answers of the calls still under way once it took the channel over."""
        self._send = send
        self._handed.set()

    def _cancel(self, request_id: object) -> None:
        scope = self._running.get((type(request_id), request_id))
        if scope is not None:
            scope.cancel()

    async def _run(self, call: dict[str, Any]) -> None:
        request_id, params = call["id"], call["params"]
        key = (type(request_id), request_id)
        with anyio.CancelScope() as scope:
            self._running[key] = scope
            try:
                result = await self._calls.answer(self._caller(), params["name"], dict(params.get("arguments") or {}))
                await self._write(answer_line(request_id, result))
            finally:
                self.wanted.set()
                if self._running.get(key) is scope:  # a client that reused an id under way leaves the later call's
                    del self._running[key]

    async def _write(self, line: bytes) -> None:
        try:
            if await anyio.to_thread.run_sync(self._front.answer_call, line):
                return
        except OSError:  # the client closed the channel: nobody reads the answer
            return
        await self._handed.wait()
        assert self._send is not None
        with suppress(OSError):
            await self._send(line)
