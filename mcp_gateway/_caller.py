"""One tool call as the gateway serves it: the agent it runs as, its bridge, and its MCP request."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from mcp_gateway._bridge import Bridge
from mcp_gateway._leases import Leases
from mcp_gateway._progress import Progress

if TYPE_CHECKING:  # a call without a request context (the front's, before the SDK loaded) needs no SDK
    import mcp_types as types
    from mcp.server.context import ServerRequestContext

__all__ = ["Caller"]


@dataclass
class Caller:
    """One tool call: the agent it runs as, its bridge, and its MCP request (prompts, progress)."""

    agent: str
    """Whose checkpoints it sees: the MCP client's (stdio: the one client; HTTP: the agent's session)."""
    bridge: Bridge
    ctx: ServerRequestContext[Any, Any] | None = None
    leases: Leases | None = None
    """The leases of the tasks its MCP session owns (None: the session beats none)."""
    sent: bool = False
    """Whether a request that may act on a page has been sent during this call."""
    progress: Progress = field(init=False)
    """The call's progress notifications."""

    def __post_init__(self) -> None:
        self.progress = Progress(self.notify)

    @property
    def elicits(self) -> bool:
        """Whether the client can show a prompt now (elicitation, on a channel that carries requests)."""
        if self.ctx is None:
            return False
        capabilities = self.ctx.session.client_capabilities
        return capabilities is not None and capabilities.elicitation is not None and self.ctx.session.can_send_request

    @property
    def wants_progress(self) -> bool:
        """Whether the request carried a progressToken: without one, no notification reaches the client."""
        return self.ctx is not None and self.ctx.meta is not None and self.ctx.meta.get("progress_token") is not None

    async def notify(self, done: float, total: float | None, message: str) -> None:
        """One progress notification (a call that sent no progressToken gets nothing)."""
        if self.ctx is not None:
            with suppress(Exception):
                await self.ctx.session.report_progress(done, total, message)

    async def prompt(self, message: str, schema: dict[str, Any], wait: float) -> types.ElicitResult | None:
        """The user's answer, or None when the prompt was not answered within ``wait`` seconds.

        While it is open, the call's progress ticks say so. A prompt given up on is cancelled at
        the client (notifications/cancelled).
        """
        if self.ctx is None or wait <= 0:
            return None
        from mcp.shared.exceptions import MCPError  # noqa: PLC0415 (loaded already: there is a request context)
        ctx = self.ctx
        with self.progress.waiting("waiting for the user's answer"), anyio.move_on_after(wait):
            try:
                return await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
            except (MCPError, ValueError):
                return None  # the client could not show it: as good as no answer
        return None
