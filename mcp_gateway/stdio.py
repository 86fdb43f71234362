"""``kitsune mcp``: MCP over stdio, against a running bridge or an embedded one.

With ``--bridge URL`` the gateway talks to that bridge's HTTP API as one agent (its token from
``--token-file``, ``KITSUNE_TOKEN`` or ``~/.kitsune/token``). Without it, the gateway starts an
embedded bridge for its own lifetime: a ``kitsune serve`` child on a free loopback port (with its
own embedded NATS and Chromium), reachable only with a token generated for this run, and stops
it on exit. The child starts in the background: the client's ``initialize`` and ``tools/list``
are answered at once (by ``_handshake``'s front while this module loads; the tools from the
child's configuration), and the first request to the bridge waits until it serves. The gateway's loop
starts before the MCP SDK has loaded (in a worker thread, ``_stdio_sdk``, once it is wanted): meanwhile it
serves the tool calls the front may take (``_front_calls``), then the SDK serves the channel, with the same
checkpoints, bridge client and session. The child is in its own session and gets SIGTERM if the gateway
dies, so it always shuts down gracefully (NATS and Chromium with it); its state directory is temporary and
removed.

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

import signal
import ssl
import sys
from collections.abc import Awaitable, Callable

import anyio
import anyio.abc
import httpx

from mcp_gateway._bridge import Bridge
from mcp_gateway._caller import Caller
from mcp_gateway._embedded import BridgeNotStarted, EmbeddedBridge, leave
from mcp_gateway._front_calls import FrontCalls
from mcp_gateway._handshake import Front
from mcp_gateway._leases import Leases
from mcp_gateway._tool_calls import ToolCalls, approval_wait_from_env

__all__ = ["serve"]

STDIO_AGENT = "stdio"
"""Whom the gateway's requests over stdio run as, in its own bookkeeping (the bridge knows the token's agent)."""


def serve(front: Front, *, caps: frozenset[str], known: frozenset[str] | None, bridge: str | None, token: str,
          embedded: EmbeddedBridge | None, session: str, listed: frozenset[str] | None = None) -> int:
    """Serve MCP over stdio, taking it over from ``front``, until the client closes it (or SIGTERM); the
    exit status. Every request to the bridge carries ``session``, the process's MCP session.

    The tool list follows the bridge's groups (``known``: an embedded bridge's configuration; else the
    bridge's ``GET /api/caps``), narrowed by ``caps``. An embedded bridge starts in the background, and
    the first request to it waits until it serves.
    """
    gateway = ToolCalls(caps, approval_wait=approval_wait_from_env(), bridge_caps=known)
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


async def _connected(front: Front, gateway: ToolCalls, url: str | None, token: str,
                     embedded: EmbeddedBridge | None, session: str) -> None:
    """Serve over a bridge at ``url``, or over the embedded one once it serves: the front's calls at once, the
    SDK's once it loaded. Meanwhile the leases of the tasks the process's session owns are renewed."""
    async with httpx.AsyncClient(base_url=url.rstrip("/") if url else "", verify=_tls(url)) as http, \
            anyio.create_task_group() as group:
        started = None
        if embedded is not None:
            token, started = embedded.token, _starting(group, http, embedded)
        bridge = Bridge(http, token, started=started, session=session)
        leases = Leases()
        group.start_soon(leases.run)
        group.start_soon(_until_signal, embedded)
        early = FrontCalls(front, gateway, lambda: Caller(STDIO_AGENT, bridge, None, leases))
        group.start_soon(early.run)
        await early.wanted.wait()
        serve_sdk = await anyio.to_thread.run_sync(_sdk)
        await serve_sdk(front, gateway, lambda ctx: Caller(STDIO_AGENT, bridge, ctx, leases), early)
        group.cancel_scope.cancel()


async def _until_signal(embedded: EmbeddedBridge | None) -> None:
    """A SIGTERM or SIGHUP stops the embedded bridge and ends the process at once: the calls still running are
    cut short (nobody is left to read their answers), and stdin's reader, a thread blocked on a read, would hold
    the exit."""
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
        async for _ in signals:
            leave(embedded)


def _sdk() -> Callable[..., Awaitable[None]]:
    """The SDK's server over stdio (loading the SDK: a second of CPU, in a worker thread)."""
    from mcp_gateway._stdio_sdk import serve_sdk  # noqa: PLC0415 (while the front's calls run)
    return serve_sdk


def _starting(group: anyio.abc.TaskGroup, http: httpx.AsyncClient,
              embedded: EmbeddedBridge) -> Callable[[], Awaitable[None]]:
    """Point ``http`` at the embedded bridge once it serves (in ``group``); what a request to it awaits first."""
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

    group.start_soon(starting)
    return started
