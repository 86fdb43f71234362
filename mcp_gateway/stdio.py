"""``kitsune mcp``: MCP over stdio, against a running bridge or an embedded one.

With ``--bridge URL`` the gateway talks to that bridge's HTTP API as one agent (its token from
``--token-file``, ``KITSUNE_TOKEN`` or ``~/.kitsune/token``). Without it, the gateway starts an
embedded bridge for its own lifetime: a ``kitsune serve`` child on a free loopback port (with its
own embedded NATS and Chromium), reachable only with a token generated for this run, and stops
it on exit. The child starts in the background: the client's ``initialize`` and ``tools/list``
are answered at once (by ``_handshake``'s front while this module loads; the tools from the
child's configuration), and the first request to the bridge waits until it serves. The child is
in its own session and gets SIGTERM if the gateway dies, so it always shuts down gracefully (NATS
and Chromium with it); its state directory is temporary and removed.

The process is one MCP session: an id made at start (``mcp-`` and 16 hex digits) rides every request
to the bridge, so the tasks it creates or takes over are its own, and it renews their leases while
it runs; a new process is a new session, which takes a task over explicitly.

When the client closes stdin (or sends SIGTERM or SIGHUP), the calls in flight are cancelled at
once, not awaited: the SDKs kill a server 2 to 4 s after closing its stdin, and the embedded
bridge must be stopped and its directory removed by then.

Standard output is the MCP channel: nothing else may write to it, so the child's output is read
through a pipe and its log goes to standard error.
"""

from __future__ import annotations

import asyncio
import queue
import signal
import ssl
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import suppress
from typing import Any

import anyio
import httpx
import mcp_types as types
from mcp.shared.message import SessionMessage

from mcp_gateway._bridge import Bridge
from mcp_gateway._caller import Caller
from mcp_gateway._embedded import BridgeNotStarted, EmbeddedBridge, leave
from mcp_gateway._handshake import Front
from mcp_gateway._leases import Leases
from mcp_gateway.server import Gateway, approval_wait_from_env

__all__ = ["serve"]

STDIO_AGENT = "stdio"
"""Whom the gateway's requests over stdio run as, in its own bookkeeping (the bridge knows the token's agent)."""

async def _serve(front: Front, gateway: Gateway, bridge: Bridge,
                 starting: Callable[[], Coroutine[Any, Any, None]] | None, embedded: EmbeddedBridge | None) -> None:
    """Serve the client (taking the channel over from the front) until its stdin ends or SIGTERM/SIGHUP:
    either way the calls still running are cancelled at once (nobody is left to read their answers).
    Meanwhile the leases of the tasks the process's session owns are renewed."""
    leases = Leases()
    server = gateway.server(lambda ctx: Caller(STDIO_AGENT, bridge, ctx, leases))
    signalled = False
    front.take_over()
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
            send = await _output(front)
            async with answers:
                async for answer in answers:
                    message = answer.message
                    if replayed is not None and isinstance(message, types.JSONRPCResponse | types.JSONRPCError) \
                            and message.id == replayed:
                        replayed = None
                        continue
                    line = message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await send(line.encode())

        async def until_signal() -> None:
            nonlocal signalled
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                async for _ in signals:
                    signalled = True
                    group.cancel_scope.cancel()

        group.start_soon(until_end)
        group.start_soon(until_signal)
        group.start_soon(write)
        group.start_soon(leases.run)
        if starting is not None:
            group.start_soon(starting)
        async with outgoing:
            await server.run(incoming, outgoing, server.create_initialization_options())
        group.cancel_scope.cancel()
    if signalled:  # stdin is still open: its reader, a thread blocked on a read, would hold the exit
        leave(embedded)


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


def serve(front: Front, *, caps: frozenset[str], known: frozenset[str] | None, bridge: str | None, token: str,
          embedded: EmbeddedBridge | None, session: str, listed: frozenset[str] | None = None) -> int:
    """Serve MCP over stdio, taking it over from ``front``, until the client closes it (or SIGTERM); the
    exit status. Every request to the bridge carries ``session``, the process's MCP session.

    The tool list follows the bridge's groups (``known``: an embedded bridge's configuration; else the
    bridge's ``GET /api/caps``), narrowed by ``caps``. An embedded bridge starts in the background, and
    the first request to it waits until it serves.
    """
    gateway = Gateway(caps, approval_wait=approval_wait_from_env(), bridge_caps=known)
    if listed is not None:  # the running bridge's groups, as the front asked them
        gateway.heard_bridge_caps(STDIO_AGENT, listed)
    try:
        anyio.run(_connected, front, gateway, bridge, token, embedded, session)
    except KeyboardInterrupt:
        pass
    except OSError as e:
        print(f"kitsune mcp: {e}", file=sys.stderr)
        return 1
    return 0


def _tls(url: str | None) -> ssl.SSLContext | bool:
    """How the bridge's certificate is checked: an ``https`` bridge's against the system's trust store; a bridge
    over plain HTTP (the embedded one, on loopback) has none to check, and loading the store took 0.04 s of CPU
    (0.14 s under load) on the way to the first answer, so its context trusts nothing (TLS, if asked for, fails)."""
    if url is not None and url.lower().startswith("https://"):
        return True
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


async def _connected(front: Front, gateway: Gateway, url: str | None, token: str,
                     embedded: EmbeddedBridge | None, session: str) -> None:
    """Serve over a bridge at ``url``, or over the embedded one once it serves."""
    async with httpx.AsyncClient(base_url=url.rstrip("/") if url else "", verify=_tls(url)) as http:
        if embedded is None:
            await _serve(front, gateway, Bridge(http, token, session=session), None, None)
            return
        served = anyio.Event()
        failure: list[BridgeNotStarted] = []

        async def starting() -> None:
            try:
                http.base_url = httpx.URL(await anyio.to_thread.run_sync(embedded.wait, abandon_on_cancel=True))
            except BridgeNotStarted as e:
                print(f"kitsune mcp: {e}", file=sys.stderr)
                failure.append(e)
            served.set()

        async def started() -> None:
            await served.wait()
            if failure:
                raise failure[0]

        await _serve(front, gateway, Bridge(http, embedded.token, started=started, session=session), starting,
                     embedded)
