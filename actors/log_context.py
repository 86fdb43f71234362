"""What a log line is about: the call and the agent, as context variables.

The HTTP handler sets the agent of a request, the call actor the agent of its call, and the
event sink the call of every thread that emits its events; ``bridge.logs`` reads them into each
structured log line. Neither ever holds a secret (an agent's name, never its token).
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["AGENT", "CALL"]

CALL: ContextVar[int | None] = ContextVar("kitsune_call", default=None)
"""The call (container or direct) the current thread or task works on."""
AGENT: ContextVar[str | None] = ContextVar("kitsune_agent", default=None)
"""The agent the current request or call is for."""
