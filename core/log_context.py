"""What a log line is about: the call and the agent (and the agent's session), as context variables.

The HTTP handler sets the agent of a request, the call actor the agent of its call, the
event sink the call of every thread that emits its events, and the engine the step of each
write it is about to send; ``bridge.logs`` reads them into each structured log line. None ever holds a
secret (an agent's name, never its token).
"""

from __future__ import annotations

from contextvars import ContextVar

__all__ = ["AGENT", "CALL", "SESSION", "STEP"]

CALL: ContextVar[int | None] = ContextVar("kitsune_call", default=None)
"""The call (container or direct) the current thread or task works on."""
AGENT: ContextVar[str | None] = ContextVar("kitsune_agent", default=None)
"""The agent the current request or call is for."""
SESSION: ContextVar[str | None] = ContextVar("kitsune_session", default=None)
"""The agent's session the current request or call is for (``X-Kitsune-Session``): the one whose tasks'
leases its writes use and whose approvals it may redeem."""
STEP: ContextVar[str | None] = ContextVar("kitsune_step", default=None)
"""The path of the step whose write the current thread dispatched last (a tab request names it)."""
