"""Prometheus metrics of a node (DESIGN: Observability): ``kitsune_*`` on ``/metrics``.

Every label value comes from a fixed, finite set: call kinds, action names, step statuses, error codes of an
allow-list (anything else is ``other``), drop and denial reasons, route templates, HTTP methods and statuses, CDP
domains (``bridge.cdp_metrics``). Never a URL, tab id, call id, agent token or agent name (agents are unbounded
too). Each node has its own registry, so several nodes in one process do not clash.

What the node does reaches :class:`NodeMetrics` three ways: its step-log events (calls, steps, step latency,
sequences refused on closed tabs), the node's hooks (checkpoint drops, policy refusals and holds, resumes, audit
writes, NATS requests, sessions opened and closed), and values read at each scrape (checkpoints held, tabs, claims
and claim conflicts, NATS reconnects, browser restarts, actor mailboxes, CDP methods sent). :class:`HttpMetrics`
counts HTTP requests by route template and serves ``GET /metrics`` to a bearer token: the node's scrape token or an
agent's. The node's identity (``kitsune_node_info``) and fleet view are ``bridge.fleet.metrics``'s (same registry).

This module does not import the node: it reads a :class:`ScrapedNode`, the few things of a node it samples, and
the node imports it (``bridge.node`` -> ``bridge.metrics``, never back).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import orjson
import pykka
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from actors.bus import Bus, NatsBus
from bridge.auth import bearer_token
from bridge.cdp_metrics import CdpMethods
from core.log_context import AGENT
from messages.commands import ACTIONS
from messages.errors import ERROR_CODES, KitsuneError
from messages.events import (
    CallEnded,
    CallResumed,
    CallStarted,
    Event,
    OutlineStep,
    StepFailed,
    StepHeld,
    StepOutcomeUnknown,
    StepStarted,
    StepSucceeded,
)
from messages.paths import ROOT, StepPath
from messages.requests import NODE_OPS
from messages.results import STATUSES, Done, HeldForApproval, Outcome
from messages.steplog import StepLogBuilder
from messages.tokens import matching_index

if TYPE_CHECKING:
    from core.settings import Settings
    from driver.sessions import SessionChange

__all__ = ["CODES", "HttpMetrics", "NodeMetrics", "ScrapedNode", "bounded", "scrape_tokens"]

log = logging.getLogger(__name__)

# No ``*_created`` series: they double what Prometheus stores, and no panel or alert reads them.
disable_created_metrics()  # type: ignore[no-untyped-call]

# --- the fixed sets every label value comes from -----------------------------------------------

KINDS = ("batch", "parallel", "workflow")
ACTION_NAMES = frozenset(ACTIONS)
"""Every action and block name (``sequence``, ``parallel``, ``if``, ...)."""
CODES = frozenset(ERROR_CODES)
"""Error codes a label may name; any other code is ``other``."""
DROP_REASONS = ("expired", "pushed_out", "resumed_ok", "internal_error", "shutdown")
SESSION_MODES = ("reuse", "one-shot", "dynamic")
SESSION_CLOSE_REASONS = ("closed", "swept", "call_ended", "browser_restarted", "stored")
RESUME_OUTCOMES = (*STATUSES, "refused", "internal_error")
DENIALS = {"read_only": ("read_only",), "tab_owned": ("user_tab", "agent_tab"),
           "url_denied": ("denied", "not_allowed", "scheme", "unparseable")}
"""Policy refusals: code -> reasons."""
NEEDS_USER_REASONS = ("approval", "sign_in", "human_check")
CONFLICT_CODES = ("tab_owned", "tab_claimed", "tab_closed")
BUS_OUTCOMES = ("ok", "no_responders", "bus_timeout", "bus_disconnected", "bus_error")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
ACTORS = ("CheckpointActor", "BarrierActor", "AuditActor", "TabActor")

STEP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
BUS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)

_MAX_RUNNING = 10_000
"""Calls followed at once; past that the oldest is forgotten (a call whose end was never seen)."""


class _Browser(Protocol):
    @property
    def running(self) -> bool: ...

    def tab_ids(self) -> frozenset[int]: ...


class _Checkpoints(Protocol):
    def count(self, timeout: float | None = None) -> int:
        """Checkpoints held (being resumed included), answered within ``timeout`` seconds."""
        ...


class _Claims(Protocol):
    def held(self) -> Mapping[int, object]: ...

    def conflicts(self) -> Mapping[str, int]: ...


class ScrapedNode(Protocol):
    """What the metrics read of a node at each scrape (``bridge.node.Node`` is one)."""

    @property
    def browser(self) -> _Browser:
        """Its tabs and whether it runs (and ``restarts``, when the driver counts them)."""
        ...

    @property
    def bus(self) -> Bus: ...

    @property
    def checkpoints(self) -> _Checkpoints:
        """Its checkpoints (through their actor)."""
        ...

    @property
    def claims(self) -> _Claims: ...

    def actor_refs(self) -> list[pykka.ActorRef[Any]]:
        """Its running actors."""
        ...


def bounded(value: object, allowed: Iterable[str], other: str = "other") -> str:
    """``value`` when it is one of ``allowed``, else ``other``: a label value from a fixed set."""
    return value if isinstance(value, str) and value in allowed else other


@dataclass(slots=True)
class _Running:
    """A call being followed, from its CallStarted (or CallResumed) to its CallEnded."""

    kind: str
    resumed: bool
    actions: dict[str, str]
    builder: StepLogBuilder = field(default_factory=StepLogBuilder)
    started: dict[str, tuple[float, str]] = field(default_factory=dict)
    refused: set[str] = field(default_factory=set)
    agent: str | None = field(default_factory=AGENT.get)  # the call actor's thread names its agent
    since: float = field(default_factory=time.monotonic)


def _actions(outline: Iterable[OutlineStep], within: StepPath = ROOT) -> Iterator[tuple[str, str]]:
    """(path, action) of every step of an outline."""
    for index, step in enumerate(outline):
        path = within.child(index)
        yield path, step.action
        yield from _actions(step.steps, path)
        for q, sequence in enumerate(step.sequences):
            yield from _actions(sequence, path.child(q))


def _sequence_of(path: str, actions: dict[str, str]) -> str | None:
    """The parallel's sequence (``"2.1"``) that the step at ``path`` belongs to, if any."""
    return next((lane for lane in StepPath(path).ancestors() if actions.get(lane.parent) == "parallel"), None)


class NodeMetrics:
    """The metrics of one node, in its own registry; the node calls its hooks and hands it its events."""

    def __init__(self, node: ScrapedNode) -> None:
        self.node = node
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.calls = Counter("kitsune_calls", "Container calls (first runs) by kind and final status",
                             ["kind", "status"], registry=r)
        self.calls_running = Gauge("kitsune_calls_in_progress", "Container calls and resumes running now",
                                   registry=r)
        self.steps = Counter("kitsune_steps", "Steps by action and final status (kept steps of a resume not counted)",
                             ["action", "status"], registry=r)
        self.step_seconds = Histogram("kitsune_step_duration_seconds", "Step latency, from start to outcome",
                                      ["action"], buckets=STEP_BUCKETS, registry=r)
        self.resumes = Counter("kitsune_resumes", "Resumes by outcome and error code", ["outcome", "code"],
                               registry=r)
        self.drops = Counter("kitsune_checkpoint_drops", "Checkpoints dropped, by reason", ["reason"], registry=r)
        self.sessions_open = Gauge("kitsune_sessions_open", "Browser sessions open now, by mode", ["mode"], registry=r)
        self.sessions_closed = Counter("kitsune_sessions_closed", "Browser sessions closed, by reason (swept: idle)",
                                       ["reason"], registry=r)
        self.denials = Counter("kitsune_policy_denials", "Actions the policy refused, by code and reason",
                               ["code", "reason"], registry=r)
        self.needs_user = Counter("kitsune_needs_user_stops", "Actions stopped on needs_user, by reason",
                                  ["reason"], registry=r)
        self.audit_written = Counter("kitsune_audit_entries", "Audit entries written", registry=r)
        self.audit_failed = Counter("kitsune_audit_write_failures", "Audit entries that could not be written "
                                    "(the writes they recorded were refused)", registry=r)
        self.bus_requests = Counter("kitsune_nats_requests", "NATS requests by subject kind and outcome",
                                    ["subject", "outcome"], registry=r)
        self.bus_seconds = Histogram("kitsune_nats_request_duration_seconds", "NATS request latency",
                                     ["subject"], buckets=BUS_BUCKETS, registry=r)
        self.http_requests = Counter("kitsune_http_requests", "HTTP requests by route template, method and status",
                                     ["route", "method", "status"], registry=r)
        self.http_seconds = Histogram("kitsune_http_request_duration_seconds", "HTTP request latency by route",
                                      ["route"], buckets=HTTP_BUCKETS, registry=r)
        self._lock = threading.Lock()
        self._running: dict[int, _Running] = {}
        self.calls_running.set_function(lambda: len(self._running))  # read as it is scraped, not set on every event
        self._refused_on_closed = 0
        """Parallel sequences refused before they started because a tab they need is closed."""
        for kind in KINDS:  # series present from the start: rates and alerts see their first increase
            for status in STATUSES:
                self.calls.labels(kind, status)
        for reason in DROP_REASONS:
            self.drops.labels(reason)
        for code, reasons in DENIALS.items():
            for reason in reasons:
                self.denials.labels(code, reason)
        for reason in NEEDS_USER_REASONS:
            self.needs_user.labels(reason)
        for outcome in RESUME_OUTCOMES:
            self.resumes.labels(outcome, "none")
        for values, family in ((SESSION_MODES, self.sessions_open), (SESSION_CLOSE_REASONS, self.sessions_closed)):
            for value in values:
                family.labels(value)
        r.register(_Sampled(self))
        r.register(CdpMethods(node))

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)

    # step-log events

    def on_event(self, event: Event) -> None:
        """An event listener of the node: never raises (it runs inside the engine's emit)."""
        try:
            self._on_event(event)
        except Exception as e:
            log.error("metrics: event %s not counted (%s)", event.kind, type(e).__name__)

    def _on_event(self, event: Event) -> None:
        with self._lock:
            if isinstance(event, CallStarted):  # a CallResumed too
                if len(self._running) >= _MAX_RUNNING:
                    del self._running[next(iter(self._running))]
                self._running[event.call] = _Running(bounded(event.call_kind, KINDS), isinstance(event, CallResumed),
                                                     dict(_actions(event.outline)))
            run = self._running.get(event.call)
            if run is None:
                return
            run.builder.apply(event)
            if isinstance(event, StepStarted):
                run.started[event.path] = (time.monotonic(), event.action)
            elif isinstance(event, StepSucceeded | StepFailed | StepOutcomeUnknown | StepHeld):
                began = run.started.pop(event.path, None)
                if began is not None:
                    self.step_seconds.labels(bounded(began[1], ACTION_NAMES)).observe(time.monotonic() - began[0])
                elif isinstance(event, StepFailed) and event.code == "tab_closed":
                    sequence = _sequence_of(event.path, run.actions)
                    if sequence is not None and sequence not in run.refused:
                        run.refused.add(sequence)
                        self._refused_on_closed += 1
            elif isinstance(event, CallEnded):
                del self._running[event.call]
                step_log = run.builder.freeze()
                if not run.resumed:
                    self.calls.labels(run.kind, step_log.status).inc()
                for record in step_log.records():
                    if not record.kept:
                        self.steps.labels(bounded(record.action, ACTION_NAMES), record.status).inc()

    def running_calls(self) -> list[dict[str, Any]]:
        """The calls in flight (the console): call, kind, agent, resumed, seconds running, steps, actions running."""
        with self._lock:
            return [{"call": call, "kind": run.kind, "agent": run.agent, "resumed": run.resumed,
                     "steps": len(run.actions), "age": round(time.monotonic() - run.since, 1),
                     "running": sorted(a for _, a in run.started.values())} for call, run in self._running.items()]

    def checkpoint_dropped(self, reason: str) -> None:  # the node's hooks, from here on
        """A checkpoint was dropped (expired, pushed_out, resumed_ok, internal_error, shutdown)."""
        self.drops.labels(bounded(reason, DROP_REASONS)).inc()

    def session_changed(self, change: SessionChange) -> None:
        """A session opened, was promoted, closed, swept or stored (saved and freed)."""
        if change.op == "promoted":  # from one-shot to dynamic
            self.sessions_open.labels("one-shot").dec()
        elif change.op != "opened":
            self.sessions_closed.labels(bounded(change.reason or "closed", SESSION_CLOSE_REASONS)).inc()
        opened = change.op in ("opened", "promoted")
        self.sessions_open.labels(bounded(change.mode, SESSION_MODES)).inc(1 if opened else -1)

    def policy_refused(self, outcome: Outcome) -> None:
        """The policy refused an action (``Failed``) or held it for approval (``HeldForApproval``)."""
        if isinstance(outcome, Done):
            return
        failure = outcome.failure
        state = failure.state or {}
        if isinstance(outcome, HeldForApproval) or failure.code == "needs_user":
            self.needs_user.labels(bounded(state.get("reason"), NEEDS_USER_REASONS)).inc()
            return
        code = bounded(failure.code, DENIALS)
        if code == "tab_owned":
            reason = "user_tab" if state.get("owner") == "user" else "agent_tab"
        elif code == "url_denied":
            reason = bounded(state.get("reason"), DENIALS["url_denied"])
        else:
            reason = code
        self.denials.labels(code, reason).inc()

    def resumed(self, outcome: str, code: str | None) -> None:
        """A resume ended: the resumed call's status, ``refused`` or ``internal_error``; the error code."""
        self.resumes.labels(bounded(outcome, RESUME_OUTCOMES), "none" if code is None else bounded(code, CODES)).inc()

    def audit_recorded(self, written: bool) -> None:
        """An audit entry was written, or could not be."""
        (self.audit_written if written else self.audit_failed).inc()

    def bus_request(self, subject: str, seconds: float, outcome: str) -> None:
        """A NATS request took ``seconds``: ``ok`` or the failure's code."""
        kind = _subject_kind(subject)
        self.bus_requests.labels(kind, bounded(outcome, BUS_OUTCOMES, "bus_error")).inc()
        self.bus_seconds.labels(kind).observe(seconds)

    # HTTP

    def http_request(self, route: str, method: str, status: int, seconds: float) -> None:
        self.http_requests.labels(route, bounded(method, METHODS), str(status if 100 <= status <= 599 else 500)).inc()
        self.http_seconds.labels(route).observe(seconds)


def _subject_kind(subject: str) -> str:
    """``tab`` (``<fleet>.tab.<id>.do``), ``tabs`` (``<fleet>.tabs.list``), or a node's op (:data:`NODE_OPS`)."""
    tokens = subject.split(".")[1:]
    if len(tokens) == 3 and tokens[0] == "tab" and tokens[2] == "do":
        return "tab"
    if len(tokens) == 3 and tokens[0] == "node":
        return bounded(tokens[2], NODE_OPS)
    return "tabs" if tokens == ["tabs", "list"] else "other"


class _Sampled(Collector):
    """Values read from the node at each scrape."""

    def __init__(self, metrics: NodeMetrics) -> None:
        self._metrics = metrics

    def describe(self) -> list[Metric]:
        return []  # nothing read at registration: the node is not started yet

    def collect(self) -> Iterator[Metric]:
        node = self._metrics.node
        yield _gauge("kitsune_checkpoints_held", "Checkpoints held (being resumed included)",
                     _try(lambda: node.checkpoints.count(timeout=2)))
        yield _gauge("kitsune_tabs_open", "Open tabs", _try(lambda: len(node.browser.tab_ids())))
        yield _gauge("kitsune_claims_held", "Tabs claimed by parallel sequences of calls in progress",
                     len(node.claims.held()))
        conflicts = node.claims.conflicts()
        conflict = CounterMetricFamily("kitsune_claim_conflicts", "Tab claim conflicts by code (tab_owned, "
                                       "tab_claimed) and parallel sequences refused on a closed tab (tab_closed)",
                                       labels=["code"])
        counts = {**{code: conflicts.get(code, 0) for code in CONFLICT_CODES[:2]},
                  "tab_closed": self._metrics._refused_on_closed}
        for code in CONFLICT_CODES:
            conflict.add_metric([code], counts[code])
        yield conflict
        bus = node.bus
        nats = bus if isinstance(bus, NatsBus) else None
        yield _counter("kitsune_nats_reconnects", "NATS connections re-established", nats.reconnects if nats else 0)
        yield _counter("kitsune_nats_disconnects", "NATS connections lost", nats.disconnects if nats else 0)
        yield _gauge("kitsune_nats_connected", "Whether the node is connected to NATS", int(bus.connected))
        yield _counter("kitsune_browser_restarts", "Times the browser died and was restarted",
                       getattr(node.browser, "restarts", 0))
        yield _gauge("kitsune_browser_running", "Whether the browser runs", int(node.browser.running))
        depth: Tally[str] = Tally(dict.fromkeys(ACTORS, 0))
        for ref in _try(node.actor_refs) or []:
            depth[bounded(ref.actor_class.__name__, ACTORS)] += ref.actor_inbox.qsize()
        mailbox = GaugeMetricFamily("kitsune_actor_mailbox_depth", "Messages waiting in actor mailboxes, by actor "
                                    "class (tab actors added up)", labels=["actor"])
        for actor, size in sorted(depth.items()):
            mailbox.add_metric([actor], size)
        yield mailbox


def _try(read: Callable[[], Any]) -> Any:
    try:
        return read()
    except Exception as e:
        log.debug("metrics: a value could not be read (%s)", type(e).__name__)
        return None


def _gauge(name: str, documentation: str, value: float | None) -> Metric:
    family = GaugeMetricFamily(name, documentation, labels=[])
    if value is not None:
        family.add_metric([], value)
    return family


def _counter(name: str, documentation: str, value: float) -> Metric:
    return CounterMetricFamily(name, documentation, value=value)


# --- HTTP --------------------------------------------------------------------------------------

METRICS_PATH = "/metrics"


def scrape_tokens(config: Settings) -> Callable[[str], bool]:
    """Whether a bearer token may read ``/metrics``: the scrape token, or an agent's."""
    hashes = [agent.token_sha256 for agent in config.agents]
    if config.http.metrics_token_sha256 is not None:
        hashes.append(config.http.metrics_token_sha256)

    def allowed(token: str) -> bool:
        return matching_index(token, hashes) is not None

    return allowed


class HttpMetrics:
    """ASGI middleware: counts every request by route template and status; serves ``GET /metrics``."""

    def __init__(self, app: ASGIApp, metrics: NodeMetrics, allowed: Callable[[str], bool]) -> None:
        self._app = app
        self._metrics = metrics
        self._allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        started = time.monotonic()
        route = _route(dict(scope))  # before the router changes the scope (a Mount's root_path)
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            if scope["path"] == METRICS_PATH:
                await self._scrape(scope, sending)
            else:
                await self._app(scope, receive, sending)
        finally:
            self._metrics.http_request(route, scope["method"], status, time.monotonic() - started)

    async def _scrape(self, scope: Scope, send: Send) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            await _answer(send, 405, b'{"error":"GET /metrics","code":"method_not_allowed","retryable":false}')
            return
        try:
            token = bearer_token([value.decode("latin-1") for name, value in scope["headers"]
                                  if name == b"authorization"])
        except KitsuneError as e:
            await _answer(send, e.http_status, orjson.dumps(e.to_json()))
            return
        if token is None or not self._allowed(token):
            await _answer(send, 401, b'{"error":"A valid bearer token is needed","code":"unauthorized",'
                                     b'"retryable":false}')
        else:
            body = await asyncio.to_thread(self._metrics.exposition)
            await _answer(send, 200, b"" if scope["method"] == "HEAD" else body, CONTENT_TYPE_LATEST)


async def _answer(send: Send, status: int, body: bytes, media: str = "application/json") -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", media.encode()), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _route(scope: Scope) -> str:
    """The template of the route a request matched (``/api/tabs``, ``/mcp``), ``/metrics``, or ``other``."""
    if scope["path"] == METRICS_PATH:
        return METRICS_PATH
    app = scope.get("app")
    for route in getattr(app, "routes", ()):
        match, _ = route.matches(scope)
        if match != Match.NONE:
            return str(route.path)
    return "other"
