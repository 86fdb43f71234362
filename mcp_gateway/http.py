"""MCP over streamable HTTP at ``/mcp`` on ``kitsune serve``, with the API's own bearer tokens.

The bridge's middleware authenticates ``/mcp`` like every API route, so a request reaching
:class:`McpEndpoint` already names its agent. Each MCP session belongs to the agent that opened
it (a request with another agent's token answers 404 for it). Tools run as the caller's agent: the
gateway sends their requests in-process to the bridge's own ASGI app (no socket, no second port;
each answer streamed as the app sends it, so a container call's steps are told as they finish:
``_inprocess``) with the caller's bearer token, so they pass authentication, capability groups, policy, tab
ownership and the audit log exactly as the agent's own API requests would. They name the host and
port the agent reached, so a Live View link the bridge makes for them names that node. A direct call's
checkpoint belongs to the MCP session that made it: another client (another session, even of the
same agent) does not find it, and its resume answers the bridge's ``checkpoint_not_found``.

Every request a tool sends carries its MCP session's id (``X-Kitsune-Session``: the Mcp-Session-Id),
so a task's lease and a confirm token follow the MCP session. While a session lives, the leases of
the tasks it owns are renewed (``_leases``): it lives until it is closed (DELETE), unknown to the
SDK (404) or idle past the SDK's idle timeout, and it is heartbeaten only while its client is heard
from (a request in flight, its GET stream included, or one within a lease TTL): a client killed
without a word lets its leases expire. ``initialize``'s instructions name the agent's open tasks.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from typing import Any

import anyio
import anyio.abc
import httpx
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.streamable_http_manager import DEFAULT_SESSION_IDLE_TIMEOUT, StreamableHTTPSessionManager
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_gateway._bridge import Bridge
from mcp_gateway._caller import Caller
from mcp_gateway._handshake import instructions
from mcp_gateway._inprocess import InProcessTransport
from mcp_gateway._leases import DEFAULT_TTL, Leases
from mcp_gateway._tasks import open_tasks
from mcp_gateway.server import Gateway, approval_wait_from_env

__all__ = ["McpEndpoint"]


class _Session:
    """One MCP session over HTTP: the leases of its tasks, and when its client was last heard from."""

    def __init__(self) -> None:
        self.leases = Leases(live=self.heard_from)
        self.in_flight = 0
        """Its HTTP requests being served (an open GET stream is one)."""
        self.heard = time.monotonic()
        """When its last request ended."""
        self.scope = anyio.CancelScope()
        """Its heartbeat loop's."""

    def heard_from(self) -> bool:
        """Whether its client is heard from: a request in flight, or one that ended within a lease TTL."""
        ttl = max(self.leases.held.values(), default=DEFAULT_TTL)
        return self.in_flight > 0 or time.monotonic() - self.heard < ttl

    def idle(self) -> bool:
        """Whether the SDK closed it for idleness (no request in flight for its idle timeout)."""
        return self.in_flight == 0 and time.monotonic() - self.heard > DEFAULT_SESSION_IDLE_TIMEOUT


class McpEndpoint:
    """The ASGI app behind ``/mcp``: a stateful streamable-HTTP session manager over one gateway.

    The session manager starts with the first request (the node's HTTP server runs without a
    lifespan) and runs until the process ends.
    """

    def __init__(self, caps: frozenset[str]) -> None:
        self.gateway = Gateway(caps, approval_wait=approval_wait_from_env())
        server = self.gateway.server(self._identify)
        server.middleware.append(self._instructed)
        self._manager = StreamableHTTPSessionManager(app=server, session_idle_timeout=DEFAULT_SESSION_IDLE_TIMEOUT)
        self._http: httpx.AsyncClient | None = None
        self._started: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._group: anyio.abc.TaskGroup | None = None
        self._sessions: dict[tuple[str, str], _Session] = {}
        """The MCP sessions by agent and id."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await self._start(scope["app"])
        agent = scope.get("state", {}).get("agent")
        if not isinstance(agent, str):  # the bridge's middleware lets no request without an agent through
            raise RuntimeError("/mcp reached without an authenticated agent")
        # the SDK binds each session to the principal that opened it
        user = AuthenticatedUser(AccessToken(token="-", client_id=agent, scopes=[]))
        given = dict(scope["headers"]).get(b"mcp-session-id", b"").decode("latin-1")
        if not given:
            await self._manager.handle_request({**scope, "user": user}, receive, send)
            return
        key = (agent, given)
        session = self._session(key)
        statuses: list[int] = []

        async def answer(message: Message) -> None:
            if message["type"] == "http.response.start":
                statuses.append(message["status"])
            await send(message)

        session.in_flight += 1
        try:
            await self._manager.handle_request({**scope, "user": user}, receive, answer)
        finally:
            session.in_flight -= 1
            session.heard = time.monotonic()
            if scope["method"] == "DELETE" or statuses[:1] == [404]:  # closed, or unknown to the SDK
                self._end(key)

    def _session(self, key: tuple[str, str]) -> _Session:
        """The session of ``key``, its heartbeat loop started when it is new (idle ones are let go then)."""
        session = self._sessions.get(key)
        if session is None:
            for idle in [known for known, s in self._sessions.items() if s.idle()]:
                self._end(idle)
            session = self._sessions[key] = _Session()
            assert self._group is not None
            self._group.start_soon(self._beat, key, session)
        return session

    async def _beat(self, key: tuple[str, str], session: _Session) -> None:
        with session.scope:
            await session.leases.run()

    def _end(self, key: tuple[str, str]) -> None:
        session = self._sessions.pop(key, None)
        if session is not None:
            session.scope.cancel()

    async def _start(self, app: ASGIApp) -> None:
        if self._started is None:
            self._started = asyncio.Event()
            self._http = httpx.AsyncClient(transport=InProcessTransport(app), base_url="http://kitsune.internal")
            # a context of its own: the first request's (its agent, its log context) is not the manager's
            self._task = asyncio.create_task(self._run(self._started), name="kitsune-mcp-sessions",
                                             context=contextvars.Context())
        await self._started.wait()

    async def _run(self, started: asyncio.Event) -> None:
        async with self._manager.run(), anyio.create_task_group() as group:
            self._group = group
            started.set()
            await anyio.sleep_forever()

    async def _instructed(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """``initialize``'s result with instructions naming the agent's open tasks (as the bridge says them:
        the session has no id before this answer, so the listing carries none, and it owns no task yet)."""
        result = await call_next(ctx)
        if ctx.method != "initialize" or not isinstance(result, dict) or ctx.request is None:
            return result
        return {**result, "instructions": instructions(await open_tasks(self._identify(ctx).bridge))}

    def _identify(self, ctx: ServerRequestContext[Any, Any]) -> Caller:
        request = ctx.request
        assert request is not None and self._http is not None
        token = request.headers.get("authorization", "").partition(" ")[2].strip()
        # direct-call checkpoints, tasks and approvals belong to the MCP client (session) that made the call
        agent, session = request.scope["state"]["agent"], request.headers.get("mcp-session-id", "")
        # in-process requests name the node as the agent reached it, so the links the bridge makes name it too
        base = f"{request.url.scheme}://{request.url.netloc}"
        known = self._sessions.get((agent, session))
        return Caller(f"{agent}/{session}", Bridge(self._http, token, base=base, session=session), ctx,
                      known.leases if known is not None else None)
