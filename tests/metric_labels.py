"""What a ``kitsune_*`` label value may be: a member of a fixed, finite set, never an id, URL or token.

The sets here are written from the command language and the issue, not read from
``bridge.metrics``, except the error-code allow-list, which is the metrics module's own
(a fixed set it defines; anything else must be ``other``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from prometheus_client.parser import text_string_to_metric_families

from bridge.metrics import CODES
from bridge.site_tool_records import CALL_OUTCOMES, CONTINUATION_OUTCOMES
from messages.cdp_methods import METRIC_DOMAINS
from messages.commands import ACTIONS
from messages.requests import NODE_OPS
from messages.results import STATUSES

ROUTES = frozenset({"/api/batch", "/api/parallel", "/api/workflow", "/api/resume", "/api/tabs", "/api/needs-user",
                    "/api/sessions", "/api/sessions/{name}", "/api/act", "/api/schema", "/api/caps", "/healthz",
                    "/livez", "/readyz", "/api/fleet/nodes/{node}/drain",
                    "/metrics", "/mcp", "/api/tasks", "/api/tasks/{task}", "/api/tasks/{task}/{op}", "other"})
HTTP_STATUSES = frozenset(str(n) for n in range(100, 600))
FIXED: dict[str, frozenset[str]] = {
    "kind": frozenset({"batch", "parallel", "workflow"}),
    "action": frozenset(ACTIONS) | {"other"},
    "code": CODES | {"other", "none"},
    "outcome": frozenset(STATUSES) | {"refused", "internal_error", "other", "no_responders", "bus_timeout",
                                      "bus_disconnected", "bus_error"}
    | frozenset(CALL_OUTCOMES) | frozenset(CONTINUATION_OUTCOMES),  # site tools' calls and continuation tokens
    "reason": frozenset({"expired", "pushed_out", "resumed_ok", "internal_error", "shutdown", "read_only",
                         "user_tab", "agent_tab", "denied", "not_allowed", "scheme", "unparseable", "approval",
                         "sign_in", "human_check", "closed", "swept", "call_ended", "browser_restarted",
                         "stored", "other"}),
    "mode": frozenset({"reuse", "one-shot", "dynamic", "other"}),
    "subject": frozenset({"tab", "tabs", "resume", "other", *NODE_OPS}),
    "route": ROUTES,
    "method": frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "other"}),
    "actor": frozenset({"CheckpointActor", "BarrierActor", "AuditActor", "TabActor"}),
    "domain": METRIC_DOMAINS | {"other"},
    "version": frozenset({"0.1.0"}),
}
NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+|Inf)$")
URL = re.compile(r"://|[?#&=@]|^www\.|\.(test|com|org|net)\b")


def looks_unbounded(value: str) -> str | None:
    """Why ``value`` looks like something a label must never hold, or None."""
    if URL.search(value):
        return "a URL"
    if NUMBER.match(value):
        return "a number (an id?)"
    if len(value) >= 16 and any(c.isdigit() for c in value):
        return "a token"
    return None


def unbounded_labels(exposition: str, fleets: Iterable[str], secrets: Iterable[str] = (),
                     routes: Iterable[str] = (), nodes: Iterable[str] = ()) -> list[str]:
    """Every label of every ``kitsune_*`` sample that is not from its fixed set (empty when all are).

    ``fleets`` are the nodes' configured fleets, ``nodes`` the names of the nodes of those fleets,
    ``routes`` route templates of an app besides the bridge's, ``secrets`` values the workload made
    up (none may show in a label).
    """
    fixed = {**FIXED, "fleet": frozenset(fleets), "node": frozenset(nodes), "route": ROUTES | frozenset(routes)}
    secrets = [s for s in secrets if s]
    problems = []
    families = [f for f in text_string_to_metric_families(exposition) if f.name.startswith("kitsune_")]
    assert families, "no kitsune_* metric at all"
    for family in families:
        for sample in family.samples:
            for name, value in sample.labels.items():
                where = f"{sample.name}{{{name}={value!r}}}"
                if name == "le":  # histogram buckets: fixed by the code
                    if not NUMBER.match(value):
                        problems.append(f"{where}: not a bucket bound")
                    continue
                if name == "status":
                    allowed = (HTTP_STATUSES if family.name == "kitsune_http_requests" else frozenset(STATUSES))
                elif name in fixed:
                    allowed = fixed[name]
                else:
                    problems.append(f"{where}: a label with no fixed set")
                    continue
                if value not in allowed:
                    problems.append(f"{where}: not one of its {len(allowed)} values")
                if name not in ("status", "fleet", "node") and (why := looks_unbounded(value)):  # both configured
                    problems.append(f"{where}: looks like {why}")
                if any(secret in value for secret in secrets):
                    problems.append(f"{where}: holds a value the workload made up")
    return problems
