"""Kitsune's tool calls as the gateway runs them, whichever serves the request: the MCP SDK's server, or
``kitsune mcp``'s front before the SDK has loaded (so nothing here loads the SDK).

Container tools (``browser_batch``, ``browser_parallel``, ``browser_workflow``) pass their body to
the bridge, whose checkpoints they use (``_containers``). Direct tools send one request per write
through ``POST /api/act``; a direct call that stops on ``needs_user`` keeps a checkpoint here (spec:
Direct calls, ``_direct``), and ``browser_resume`` continues it from its held request (``_resume``).
Every call sends progress notifications (``_progress``): a finished step, and a tick every 10 s.
The task tools (``_tasks``) send ``/api/tasks`` requests as the caller's MCP session, whose leases
the transport renews (``_leases``).
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

import jsonschema  # type: ignore[import-untyped]

from mcp_gateway._arguments import unknown_parameter
from mcp_gateway._ask import ask_user
from mcp_gateway._caller import Caller
from mcp_gateway._containers import run_container
from mcp_gateway._direct import DirectCalls
from mcp_gateway._results import call_result, error
from mcp_gateway._resume import resume
from mcp_gateway._sessions import sessions
from mcp_gateway._tabs import live_view, tabs
from mcp_gateway._tasks import TASK_TOOLS, task_call
from mcp_gateway._tools import TOOLS
from messages.contract import APPROVAL_PROMPT_MAX, CALL_TIMEOUT
from messages.schema_errors import without_value

__all__ = ["ToolCalls", "approval_wait_from_env"]

log = logging.getLogger("mcp_gateway.server")

CAPS_TTL = 30.0
"""Seconds the bridge's answer to GET /api/caps is kept."""


def approval_wait_from_env(env: Mapping[str, str] | None = None) -> float:
    """``KITSUNE_APPROVAL_WAIT``: how long a direct call's approval prompt stays open (0 to 115 s, default 115)."""
    raw = (os.environ if env is None else env).get("KITSUNE_APPROVAL_WAIT", "").strip()
    try:
        value = float(raw) if raw else APPROVAL_PROMPT_MAX
    except ValueError:
        value = APPROVAL_PROMPT_MAX
    return min(max(value, 0.0), APPROVAL_PROMPT_MAX) if math.isfinite(value) else APPROVAL_PROMPT_MAX


_CONTAINERS = {"browser_batch": "/api/batch", "browser_parallel": "/api/parallel", "browser_workflow": "/api/workflow"}
"""The tools whose arguments are a call body, and its route. The bridge's parser is their one check
(a 400 naming the bad command's path, relayed as is): a JSON Schema pass here cost 15 ms (90 ms on
a loaded machine) for a 20-command batch, against the parser's 0.2 ms."""


class ToolCalls:
    """Kitsune's MCP tools for every connection of one transport; direct-call checkpoints in memory."""

    def __init__(self, caps: frozenset[str], *, approval_wait: float = APPROVAL_PROMPT_MAX,
                 clock: Callable[[], float] = time.monotonic, bridge_caps: frozenset[str] | None = None) -> None:
        self.caps = caps
        """The capability groups this gateway offers at most (those the bridge also enables are listed)."""
        self.direct = DirectCalls(approval_wait, clock)
        self.checkpoints = self.direct.checkpoints
        self.continuations = self.direct.continuations
        self._clock = clock
        self._bridge_caps: dict[str, tuple[float, frozenset[str]]] = {}
        self._known_bridge_caps = bridge_caps
        """The bridge's groups when they are known without asking it (an embedded bridge's configuration)."""
        self._validators = {name: jsonschema.Draft202012Validator(spec.input_schema) for name, spec in TOOLS.items()
                            if name not in _CONTAINERS}

    async def answer(self, caller: Caller, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run one tool call with its progress ticks; its ``CallToolResult`` as JSON (a failure of the gateway's
        own is an ``internal`` error result: a bug here must not take the connection down)."""
        try:
            async with caller.progress.ticking():
                result = await self.call(caller, name, arguments)
        except Exception as e:
            log.exception("tool %s failed", name)
            result = error("internal", f"The gateway failed ({type(e).__name__})")
        return call_result(result)

    def heard_bridge_caps(self, agent: str, groups: frozenset[str]) -> None:
        """Keep the bridge's groups for ``agent`` as if asked now (the handshake asked already)."""
        self._bridge_caps[agent] = (self._clock() + CAPS_TTL, groups)

    async def enabled_caps(self, caller: Caller) -> frozenset[str]:
        """This gateway's groups that the bridge enables too (its GET /api/caps for the caller's agent,
        kept 30 s), unless the bridge's groups are known beforehand."""
        if self._known_bridge_caps is not None:
            return self.caps & self._known_bridge_caps
        now = self._clock()
        cached = self._bridge_caps.get(caller.agent)
        if cached is None or cached[0] <= now:
            answer = await caller.bridge.get("/api/caps", timeout=10.0)
            groups = answer.get("caps")
            if "error" in answer or not isinstance(groups, list):
                return self.caps
            cached = (now + CAPS_TTL, frozenset(str(g) for g in groups))
            self._bridge_caps[caller.agent] = cached
        return self.caps & cached[1]

    async def call(self, caller: Caller, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run one tool call; its structured result (an ``error`` key when it did not succeed)."""
        spec = TOOLS.get(name)
        if spec is None:
            return error("unknown_tool", f"No tool named {name!r}")
        if not spec.groups & await self.enabled_caps(caller):
            return error("capability_disabled", f"{name} is in the {'/'.join(sorted(spec.groups))} capability "
                         "group, which is not enabled (KITSUNE_CAPS)")
        if name in _CONTAINERS:
            timeout = arguments.get("timeout")
            budget = float(timeout) if isinstance(timeout, int | float) and not isinstance(timeout, bool) else None
            return await run_container(caller, _CONTAINERS[name], arguments, budget or CALL_TIMEOUT)
        invalid = self._invalid(name, arguments)
        if invalid is not None:
            return invalid
        if name == "browser_resume":
            return await resume(self.direct, caller, arguments)
        if name == "browser_tabs":
            return await tabs(self.direct, caller, arguments)
        if name == "browser_sessions":
            return await sessions(caller, arguments)
        if name == "browser_ask_user":
            return await ask_user(self.direct, caller, arguments)
        if name == "browser_live_view":
            return await live_view(self.direct, caller, arguments)
        if name in TASK_TOOLS:
            return await task_call(self.direct, caller, name, arguments)
        return await self.direct.start(caller, spec, arguments)

    def _invalid(self, name: str, arguments: dict[str, Any]) -> dict[str, Any] | None:
        """The error of arguments that do not match the tool's input schema (the first by path), if any."""
        problem = next(iter(sorted(self._validators[name].iter_errors(arguments), key=lambda e: list(e.path))), None)
        if problem is None:
            return None
        where = "/".join(str(p) for p in problem.path)
        if problem.validator == "additionalProperties" and isinstance(problem.instance, dict):
            known = problem.schema.get("properties", {})
            key = sorted(k for k in problem.instance if k not in known)[0]
            named = "/".join([*(str(p) for p in problem.path), key])
            return error("unknown_parameter", f"{where + ': ' if where else ''}{unknown_parameter(name, key, known)}",
                         param=named)
        if problem.validator in ("anyOf", "oneOf", "not"):  # the schema says what it needs: "needs selector or text"
            rule = problem.schema.get("description") or without_value(problem)[1]
        else:  # never the value itself, which may be a typed value
            rule = without_value(problem)[1] if problem.validator != "required" else problem.message
        return error("invalid_parameter", f"{name}: {where + ': ' if where else ''}{rule}", param=where or None)
