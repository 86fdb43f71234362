"""``kitsune mcp``'s MCP SDK server over stdio, taking the channel over from the front (``_handshake``): loaded
in a worker thread (``mcp_gateway.stdio``) while the front's calls run on the gateway's loop."""

from __future__ import annotations

import asyncio
import queue
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import suppress

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from mcp_gateway._front_calls import FrontCalls
from mcp_gateway._handshake import Front
from mcp_gateway._tool_calls import ToolCalls
from mcp_gateway.server import Identify, mcp_server

__all__ = ["serve_sdk"]


async def serve_sdk(front: Front, calls: ToolCalls, identify: Identify, early: FrontCalls) -> None:
    """Serve the client (taking the channel over from the front and the writing of its calls' answers from
    ``early``) until its stdin ends: the calls still running are then cancelled at once (nobody is left to read
    their answers)."""
    server = mcp_server(calls, identify)
    front.take_over()
    send = await _output(front)
    early.hand_over(send)
    async with anyio.create_task_group() as group:
        forward, incoming = anyio.create_memory_object_stream[SessionMessage | Exception]()
        outgoing, answers = anyio.create_memory_object_stream[SessionMessage]()

        async def until_end() -> None:
            async with forward:
                async for line in _lines(front):
                    await forward.send(_message_of(line))
            group.cancel_scope.cancel()

        async def write() -> None:
            replayed = front.initialize_id  # the client has the front's answer to it
            async with answers:
                async for answer in answers:
                    message = answer.message
                    if replayed is not None and isinstance(message, types.JSONRPCResponse | types.JSONRPCError) \
                            and message.id == replayed:
                        replayed = None
                        continue
                    line = message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await send(line.encode())

        group.start_soon(until_end)
        group.start_soon(write)
        async with outgoing:
            await server.run(incoming, outgoing, server.create_initialization_options())
        group.cancel_scope.cancel()


async def _lines(front: Front) -> AsyncIterator[bytes]:
    """The client's lines as they come, to the end of input: the front's reading thread wakes the loop (no thread
    waits for a line on the way)."""
    loop = asyncio.get_running_loop()
    arrived = asyncio.Event()

    def ready() -> None:
        with suppress(RuntimeError):  # the loop is closed: nobody reads any more
            loop.call_soon_threadsafe(arrived.set)

    front.on_line(ready)
    while True:
        arrived.clear()
        try:
            line = front.next_line(block=False)
        except queue.Empty:
            await arrived.wait()
            continue
        if line is None:
            return
        yield line


class _Output(asyncio.Protocol):
    """The client's channel as the loop writes it: whether it takes more now."""

    def __init__(self) -> None:
        self.writable = asyncio.Event()
        self.writable.set()

    def pause_writing(self) -> None:
        self.writable.clear()

    def resume_writing(self) -> None:
        self.writable.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.writable.set()


async def _output(front: Front) -> Callable[[bytes], Awaitable[None]]:
    """How the answers are written: by the loop itself where the channel is a pipe (as the SDKs' clients start a
    server: no thread on the way; what the pipe cannot take yet waits on the loop), else by a thread."""
    loop = asyncio.get_running_loop()
    try:
        transport, channel = await loop.connect_write_pipe(_Output, front.output)
    except (ValueError, OSError):  # a file, or no file at all
        return lambda data: anyio.to_thread.run_sync(front.write, data)
    transport.set_write_buffer_limits(high=0)  # each answer is awaited until the pipe took all of it

    async def send(data: bytes) -> None:
        if transport.is_closing():
            raise BrokenPipeError("the client closed the channel")
        transport.write(data)
        await channel.writable.wait()
    return send


def _message_of(line: bytes) -> SessionMessage | Exception:
    """A line of the client's as the SDK's server takes it (an exception when it is no JSON-RPC message)."""
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except Exception as e:  # the server answers it, as over the SDK's own stdio transport
        return e


