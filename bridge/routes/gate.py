"""The bridge's gate, before every route: the bearer token names the agent (or, for ``DELETE
/api/tasks/{id}``, an operator of the console; for a node's drain, ``/api/fleet/nodes/{id}/drain``, an
operator only), the session header names its session, and a route outside the agent's capability groups
answers 404 ``capability_disabled``; errors as JSON.

Wrong operator tokens count against the client's address in the console's limiter
(``bridge.routes.console_limits``), as failed sign-ins do: past its limit, 429 ``login_rate_limited``, unchecked.
"""

from __future__ import annotations

import logging
import re

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from bridge.auth import bearer_token
from bridge.routes.console import client_address, rate_limited
from bridge.routes.console_limits import LoginLimiter
from bridge.routes.groups import groups_of
from bridge.routes.responses import error_response
from bridge.services import PolicyOf
from core.log_context import AGENT, SESSION
from core.settings import Settings
from messages.errors import KitsuneError
from messages.tokens import matching_index

__all__ = ["Gate"]

log = logging.getLogger(__name__)

PUBLIC = frozenset({"/healthz", "/livez", "/readyz"})
PUBLIC_PREFIXES = ("/live/", "/console")
"""Pages that authenticate by themselves: Live View by its link's token, the console its operators."""
_OPERATORS_ONLY = re.compile(r"/api/fleet/nodes/[^/]+/drain")
"""Routes only an operator's bearer token passes."""


SESSION_HEADER = "x-kitsune-session"
"""Names the agent's session a request is for: the owner of its tasks, the holder of its approvals."""
_SESSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")


def _session(request: Request) -> str | None:
    """The request's session (one header at most, of the session pattern), or None."""
    given = request.headers.getlist(SESSION_HEADER)
    if not given:
        return None
    if len(given) > 1:
        raise KitsuneError("duplicate_header", "Send X-Kitsune-Session once", state={"header": "X-Kitsune-Session"})
    if _SESSION.fullmatch(given[0]) is None:
        raise KitsuneError("invalid_parameter", "X-Kitsune-Session must match [A-Za-z0-9][A-Za-z0-9_.:-]{0,127}",
                           state={"header": "X-Kitsune-Session"})
    return given[0]


class Gate:
    """Authentication (bearer token → agent), capability groups, and errors as JSON: a plain ASGI middleware (no
    task, stream or wrapped response of its own a request, as Starlette's ``BaseHTTPMiddleware`` makes)."""

    def __init__(self, app: ASGIApp, config: Settings, policy_of: PolicyOf, limiter: LoginLimiter) -> None:
        self._app = app
        self._config = config
        self._policy_of = policy_of
        """The agents' policies as they are now: their capability groups."""
        self._limiter = limiter
        """The console's: failed operator secrets, per client address."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # a WebSocket (Live View's, by its link's token) or the lifespan
            await self._app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self._refusal(request)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        state = scope.get("state", {})
        if "agent" not in state:
            await self._app(scope, receive, send)
            return
        named = AGENT.set(state["agent"]), SESSION.set(state["session"])  # its log lines and its calls' ports
        try:
            await self._app(scope, receive, send)
        finally:
            AGENT.reset(named[0])
            SESSION.reset(named[1])

    def _agent(self, request: Request) -> str | None:
        token = bearer_token(request.headers.getlist("authorization"))
        if token is None:
            return None
        found = matching_index(token, [agent.token_sha256 for agent in self._config.agents])
        return self._config.agents[found].name if found is not None else None

    def _operator(self, request: Request) -> Response | None:
        """For an operator's request (``DELETE /api/tasks/{id}`` with a bearer token that is no agent's, a
        drain): None when the token is an operator's (``request.state.operator``), else the refusal. Wrong tokens
        count against the client's address in the console's limiter: past its limit 429 ``login_rate_limited``,
        unchecked."""
        token = bearer_token(request.headers.getlist("authorization"))
        if token is None or not self._config.operators:
            return error_response(KitsuneError("unauthorized", "A valid bearer token is needed"))
        address = client_address(request)
        if (wait := self._limiter.retry_after(address)) is not None:
            return rate_limited(wait, page=False)
        found = matching_index(token, [operator.secret_sha256 for operator in self._config.operators])
        if found is None:
            if self._limiter.failed(address):
                log.warning("operator tokens from %s refused for a while: too many failed", address)
            return error_response(KitsuneError("unauthorized", "A valid bearer token is needed"))
        request.state.operator = self._config.operators[found].name
        return None

    def _refusal(self, request: Request) -> Response | None:
        """The answer refusing ``request``, or None to pass it on with its agent and session (or its operator)
        in its state."""
        path = request.url.path
        if path.startswith(PUBLIC_PREFIXES):
            return None
        try:
            if _OPERATORS_ONLY.fullmatch(path):
                return self._operator(request)
            if path not in PUBLIC:
                agent = self._agent(request)
                if agent is None and request.method == "DELETE" and path.startswith("/api/tasks/"):
                    return self._operator(request)
                if agent is None:
                    return error_response(KitsuneError("unauthorized", "A valid bearer token is needed"))
                request.state.session = _session(request)
                request.state.agent = agent
            groups = groups_of(request.scope, request.app.routes)
            if groups is not None and not groups & self._policy_of(request.state.agent).caps:
                return error_response(KitsuneError(
                    "capability_disabled",
                    f"{path} is in the {'/'.join(sorted(groups))} capability group, which is not enabled "
                    "(KITSUNE_CAPS)"))
            return None
        except KitsuneError as e:
            return error_response(e)
