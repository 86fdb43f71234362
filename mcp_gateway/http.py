"""MCP over streamable HTTP at ``/mcp`` on ``kitsune serve``, with the API's own bearer tokens.

The bridge's middleware authenticates ``/mcp`` like every API route, so a request reaching
:class:`McpEndpoint` already names its agent. Each MCP session belongs to the agent that opened
it (a request with another agent's token answers 404 for it). Tools run as the caller's agent: the
gateway sends their requests in-process to the bridge's own ASGI app (no socket, no second port)
with the caller's bearer token, so they pass authentication, capability groups, policy, tab
ownership and the audit log exactly as the agent's own API requests would. They name the host and
port the agent reached, so a Live View link the bridge makes for them names that node. A direct call's
checkpoint belongs to the MCP session that made it: another client (another session, even of the
same agent) does not find it, and its resume answers the bridge's ``checkpoint_not_found``.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import httpx
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import ASGIApp, Receive, Scope, Send

from mcp_gateway._bridge import Bridge
from mcp_gateway._caller import Caller
from mcp_gateway.server import Gateway, approval_wait_from_env

__all__ = ["McpEndpoint"]


class McpEndpoint:
    """The ASGI app behind ``/mcp``: a stateful streamable-HTTP session manager over one gateway.

    The session manager starts with the first request (the node's HTTP server runs without a
    lifespan) and runs until the process ends.
    """

    def __init__(self, caps: frozenset[str]) -> None:
        self.gateway = Gateway(caps, approval_wait=approval_wait_from_env())
        self._manager = StreamableHTTPSessionManager(app=self.gateway.server(self._identify))
        self._http: httpx.AsyncClient | None = None
        self._started: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        await self._start(scope["app"])
        agent = scope.get("state", {}).get("agent")
        if not isinstance(agent, str):  # the bridge's middleware lets no request without an agent through
            raise RuntimeError("/mcp reached without an authenticated agent")
        # the SDK binds each session to the principal that opened it
        user = AuthenticatedUser(AccessToken(token="-", client_id=agent, scopes=[]))
        await self._manager.handle_request({**scope, "user": user}, receive, send)

    async def _start(self, app: ASGIApp) -> None:
        if self._started is None:
            self._started = asyncio.Event()
            self._http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://kitsune.internal")
            # a context of its own: the first request's (its agent, its log context) is not the manager's
            self._task = asyncio.create_task(self._run(self._started), name="kitsune-mcp-sessions",
                                             context=contextvars.Context())
        await self._started.wait()

    async def _run(self, started: asyncio.Event) -> None:
        async with self._manager.run():
            started.set()
            await asyncio.Event().wait()

    def _identify(self, ctx: ServerRequestContext[Any, Any]) -> Caller:
        request = ctx.request
        assert request is not None and self._http is not None
        token = request.headers.get("authorization", "").partition(" ")[2].strip()
        # direct-call checkpoints belong to the MCP client (session) that made the call, of its agent
        session = request.headers.get("mcp-session-id", "")
        # in-process requests name the node as the agent reached it, so the links the bridge makes name it too
        base = f"{request.url.scheme}://{request.url.netloc}"
        return Caller(f"{request.scope['state']['agent']}/{session}", Bridge(self._http, token, base=base), ctx)
