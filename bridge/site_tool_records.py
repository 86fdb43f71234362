"""What the node records of its pages' site tools: step-log events, audit entries and metrics.

Every event of a ``callSiteTool`` (tool called, token requested, redeemed, expired or revoked,
chain completed) goes to the step log of the call it belongs to; the call of a tool is an audit
entry ``site_tool`` with its name and origin. The metrics count calls by outcome and continuation
tokens by how they ended. None of it ever holds a token or an input.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter

from actors.audit_actor import Auditor
from core.settings import SiteToolConfig
from driver.site_tools import SiteToolHooks, SiteTools
from messages.events import Event, SiteToolCalled, SiteToolEvent

__all__ = ["SiteToolRecords"]

CALL_OUTCOMES = ("ok", "unknown", "failed")
CONTINUATION_OUTCOMES = ("redeemed", "expired", "revoked", "refused")


class SiteToolRecords:
    """Records the site tools of one node's browser (owned by the node)."""

    def __init__(self, site_tools: SiteTools, config: SiteToolConfig, registry: CollectorRegistry, *,
                 emit: Callable[[Event], Any], auditor: Callable[[str | None], Auditor]) -> None:
        self.calls = Counter("kitsune_site_tool_calls", "Calls of the tools pages declare (callSiteTool), by "
                             "outcome (ok, unknown, failed)", ["outcome"], registry=registry)
        self.continuations = Counter("kitsune_continuations", "Continuation tokens of site tools, by how they ended "
                                     "(redeemed, expired, revoked, refused redemptions)", ["outcome"],
                                     registry=registry)
        for outcome in CALL_OUTCOMES:
            self.calls.labels(outcome)
        for outcome in CONTINUATION_OUTCOMES:
            self.continuations.labels(outcome)
        self._emit = emit
        """Stores an event of the step log."""
        self._auditor = auditor
        """An agent's audit."""
        site_tools.continuation_ttl = config.continuation_ttl
        site_tools.hooks = SiteToolHooks(event=self._record, continuation=self._continuation_ended,
                                         call_ended=self._call_ended)

    def _record(self, event: SiteToolEvent, agent: str | None) -> None:
        if isinstance(event, SiteToolCalled):
            self._auditor(agent).site_tool(event.tool, event.origin, event.tab_id, event.call, event.path)
        contextvars.Context().run(self._emit, event)  # the sink names the call in its own context, not the loop's

    def _continuation_ended(self, outcome: str) -> None:
        self.continuations.labels(outcome).inc()

    def _call_ended(self, outcome: str) -> None:
        self.calls.labels(outcome).inc()
