"""The node's metrics on the pure core: what each hook counts, and that every label stays bounded.

The call service, the policy driver, the claim table and the checkpoint store (behind its actor)
run for real with a scripted driver; the node around them is a stand-in with the few attributes
the metrics read (``bridge.metrics.ScrapedNode``). A workload with hundreds of distinct agents,
tabs, calls, URLs and made-up error codes must leave only label values from fixed sets.
"""

from __future__ import annotations

import contextlib
import hashlib
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pykka
import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from actors.bus import LocalBus
from actors.checkpoint_actor import CheckpointActor, CheckpointsPort
from actors.threads import ThreadedSequences
from bridge.metrics import HttpMetrics, NodeMetrics, scrape_tokens
from core.calls import Calls, SequentialIds
from core.checkpoints import CheckpointStore
from core.claims import ClaimTable
from core.engine import Driver, Ports
from core.policy import ConfirmTokens, Policy, PolicyDriver, TabOwners
from core.settings import Agent, HttpConfig, Settings
from core.url_policy import UrlPolicy
from kitsune.config import load_config
from messages.commands import parse_call
from messages.errors import KitsuneError
from messages.events import Event
from messages.results import Failed, Failure, HeldForApproval, Unknown
from tests.metric_labels import unbounded_labels
from tests.unit.fakes import FakeClock, ScriptedDriver


@dataclass(frozen=True)
class StandInConfig:
    fleet: str = "unit"


class StandInBrowser:
    restarts = 2
    running = True

    def __init__(self, tabs: set[int]) -> None:
        self._tabs = tabs

    def tab_ids(self) -> frozenset[int]:
        return frozenset(self._tabs)


@dataclass
class StandInNode:
    """The few things of a node that the metrics read (``bridge.metrics.ScrapedNode``)."""

    browser: StandInBrowser
    claims: ClaimTable
    checkpoints: CheckpointsPort
    config: StandInConfig = field(default_factory=StandInConfig)
    bus: LocalBus = field(default_factory=LocalBus)
    actors: list[pykka.ActorRef[Any]] = field(default_factory=list)

    def actor_refs(self) -> list[pykka.ActorRef[Any]]:
        return self.actors


class Bench:
    """The pure core wired to one NodeMetrics, as the node wires it."""

    def __init__(self, tabs: int = 300) -> None:
        self.clock = FakeClock()
        self.driver = ScriptedDriver(self.clock, set(range(1, tabs + 1)))
        self.claims = ClaimTable()
        self.policy = Policy(urls=UrlPolicy.from_config(deny=["denied.test"]), user_tabs_writable=True)
        self.owners = TabOwners()
        self.confirms = ConfirmTokens()
        self.checkpoint_actor = CheckpointActor.start(CheckpointStore(
            self.clock, capacity_of=lambda agent: 3, ttl=60,
            on_drop=lambda call, reason: self.metrics.checkpoint_dropped(reason)))
        self.checkpoints = CheckpointsPort(self.checkpoint_actor)
        self.node = StandInNode(StandInBrowser(self.driver.tabs), self.claims, self.checkpoints)
        self.node.actors.append(self.checkpoint_actor)
        self.metrics = NodeMetrics(self.node)
        self.calls = Calls(self.ports, self.checkpoints, audit=SequentialIds(), sink=self.emit,
                           on_resume=self.metrics.resumed)

    def emit(self, event: Event) -> None:
        self.metrics.on_event(event)  # as the node hands its events to its metrics

    def ports(self, agent: str | None) -> Ports:
        driver: Driver = self.driver if agent is None else PolicyDriver(
            self.driver, agent, lambda: self.policy, self.owners, self.confirms,
            on_refusal=self.metrics.policy_refused)
        return Ports(driver, self.clock, self.claims, ThreadedSequences())

    def batch(self, commands: list[dict[str, Any]], tab: int, agent: str = "alice") -> dict[str, Any]:
        return self.calls.run(parse_call("batch", commands, default_tab=tab), agent=agent).body

    def parallel(self, sequences: list[list[dict[str, Any]]], agent: str = "alice") -> dict[str, Any]:
        spec = parse_call("parallel", [{"action": "parallel", "sequences": sequences}])
        return self.calls.run(spec, agent=agent).body

    def samples(self) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        text = self.metrics.exposition().decode()
        return {(s.name, tuple(sorted(s.labels.items()))): s.value
                for family in text_string_to_metric_families(text) for s in family.samples}

    def value(self, name: str, **labels: str) -> float:
        return self.samples().get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def bench() -> Iterator[Bench]:
    made = Bench()
    yield made
    made.checkpoint_actor.stop()


def test_calls_steps_and_step_latency_come_from_the_events_and_the_fold(bench: Bench) -> None:
    bench.batch([{"action": "click", "selector": "#a"}, {"action": "title"}], 1)
    bench.driver.on("#b", "fail")
    bench.batch([{"action": "click", "selector": "#b"}, {"action": "title"}], 1)
    bench.driver.on("#c", "unknown")
    bench.batch([{"action": "click", "selector": "#c"}], 1)
    assert bench.value("kitsune_calls_total", kind="batch", status="ok") == 1
    assert bench.value("kitsune_calls_total", kind="batch", status="failed") == 1
    assert bench.value("kitsune_calls_total", kind="batch", status="unknown") == 1
    assert bench.value("kitsune_calls_total", kind="parallel", status="ok") == 0  # there from the start
    assert bench.value("kitsune_steps_total", action="click", status="ok") == 1
    assert bench.value("kitsune_steps_total", action="click", status="failed") == 1
    assert bench.value("kitsune_steps_total", action="title", status="skipped") == 1
    assert bench.value("kitsune_steps_total", action="click", status="unknown") == 1
    assert bench.value("kitsune_step_duration_seconds_count", action="click") == 3
    assert bench.value("kitsune_step_duration_seconds_count", action="title") == 1  # a skipped step never started
    assert bench.value("kitsune_calls_in_progress") == 0
    assert bench.metrics._running == {}  # no state kept for a call that ended


def test_resumes_by_outcome_and_code_and_checkpoint_drops_by_reason(bench: Bench) -> None:
    bench.driver.on("#a", "fail")
    body = bench.batch([{"action": "click", "selector": "#a"}], 1)
    with pytest.raises(KitsuneError):
        bench.calls.resume(body["call"], "wrong-token", agent="alice")
    with pytest.raises(KitsuneError):
        bench.calls.resume(body["call"] + 1000, body["resume_token"], agent="alice")
    bench.driver.on("#a", "fail")
    again = bench.calls.resume(body["call"], body["resume_token"], agent="alice").body
    assert again["status"] == "failed"
    assert bench.calls.resume(body["call"], again["resume_token"], agent="alice").body["status"] == "ok"
    for _ in range(4):  # capacity 3: the first of four is pushed out
        bench.driver.on("#x", "fail")
        bench.batch([{"action": "click", "selector": "#x"}], 1)
    bench.clock.advance(61)
    assert bench.checkpoints.calls() == []  # listing them drops the expired ones
    assert bench.value("kitsune_resumes_total", outcome="refused", code="resume_token_invalid") == 1
    assert bench.value("kitsune_resumes_total", outcome="refused", code="checkpoint_not_found") == 1
    assert bench.value("kitsune_resumes_total", outcome="failed", code="none") == 1
    assert bench.value("kitsune_resumes_total", outcome="ok", code="none") == 1
    assert bench.value("kitsune_checkpoint_drops_total", reason="resumed_ok") == 1
    assert bench.value("kitsune_checkpoint_drops_total", reason="pushed_out") == 1
    assert bench.value("kitsune_checkpoint_drops_total", reason="expired") == 3
    assert bench.value("kitsune_checkpoint_drops_total", reason="shutdown") == 0


def test_policy_denials_needs_user_stops_and_claim_conflicts(bench: Bench) -> None:
    bench.owners.give(7, "bob")
    bench.batch([{"action": "click", "selector": "#a"}], 7)  # bob's tab
    bench.batch([{"action": "navigate", "url": "https://denied.test/?q=1"}], 1)
    bench.batch([{"action": "navigate", "url": "ftp://x.test/"}], 1)
    bench.policy = Policy(read_only=True)
    bench.batch([{"action": "click", "selector": "#a"}], 1)
    bench.policy = Policy(ask_before_act=True, user_tabs_writable=True)
    body = bench.batch([{"action": "click", "selector": "#a"}], 1)
    assert body["status"] == "held"
    bench.metrics.policy_refused(HeldForApproval(Failure("page", "needs_user", False, {"reason": "made-up-7f"})))
    bench.policy = Policy(user_tabs_writable=True)
    bench.parallel([[{"action": "click", "tabId": 2, "selector": "#a"}],
                    [{"action": "click", "tabId": 2, "selector": "#b"}]])
    bench.driver.tabs.discard(9)
    bench.parallel([[{"action": "click", "tabId": 9, "selector": "#a"}, {"action": "title", "tabId": 9}],
                    [{"action": "title", "tabId": 3}]])
    assert bench.value("kitsune_policy_denials_total", code="tab_owned", reason="agent_tab") == 1
    assert bench.value("kitsune_policy_denials_total", code="url_denied", reason="denied") == 1
    assert bench.value("kitsune_policy_denials_total", code="url_denied", reason="scheme") == 1
    assert bench.value("kitsune_policy_denials_total", code="read_only", reason="read_only") == 1
    assert bench.value("kitsune_needs_user_stops_total", reason="approval") == 1
    assert bench.value("kitsune_needs_user_stops_total", reason="other") == 1
    assert bench.value("kitsune_claim_conflicts_total", code="tab_owned") == 1
    assert bench.value("kitsune_claim_conflicts_total", code="tab_closed") == 1  # one sequence, two steps
    assert bench.value("kitsune_claims_held") == 0  # released when the calls ended


def test_sampled_values_audit_and_nats(bench: Bench) -> None:
    bench.metrics.audit_recorded(True)
    bench.metrics.audit_recorded(True)
    bench.metrics.audit_recorded(False)
    bench.metrics.bus_request("unit.tab.12.do", 0.002, "ok")
    bench.metrics.bus_request("unit.tabs.list", 0.001, "no_responders")
    bench.metrics.bus_request("unit.weird.subject", 0.001, "ok")
    bench.metrics.bus_request("unit.node.node-b.claims", 0.001, "ok")
    bench.metrics.bus_request("unit.node.node-b.open", 0.001, "bus_timeout")
    bench.metrics.bus_request("unit.node.node-b.made-up", 0.001, "ok")
    bench.metrics.bus_request("unit.node.node-b.call", 0.004, "ok")
    assert bench.value("kitsune_audit_entries_total") == 2
    assert bench.value("kitsune_audit_write_failures_total") == 1
    assert bench.value("kitsune_nats_requests_total", subject="tab", outcome="ok") == 1
    assert bench.value("kitsune_nats_requests_total", subject="tabs", outcome="no_responders") == 1
    assert bench.value("kitsune_nats_requests_total", subject="other", outcome="ok") == 2
    assert bench.value("kitsune_nats_requests_total", subject="claims", outcome="ok") == 1
    assert bench.value("kitsune_nats_requests_total", subject="open", outcome="bus_timeout") == 1
    assert bench.value("kitsune_nats_requests_total", subject="call", outcome="ok") == 1
    assert bench.value("kitsune_nats_request_duration_seconds_count", subject="tab") == 1
    assert bench.value("kitsune_tabs_open") == 300
    assert bench.value("kitsune_browser_restarts_total") == 2
    assert bench.value("kitsune_nats_connected") == 1
    assert bench.value("kitsune_nats_reconnects_total") == 0  # an in-process bus never reconnects
    assert bench.value("kitsune_checkpoints_held") == 0
    assert bench.value("kitsune_actor_mailbox_depth", actor="CheckpointActor") == 0
    assert bench.value("kitsune_actor_mailbox_depth", actor="TabActor") == 0


def test_a_listener_that_fails_never_breaks_the_call(bench: Bench) -> None:
    bench.metrics._running = None  # type: ignore[assignment]  # every event now fails to count
    assert bench.batch([{"action": "click", "selector": "#a"}], 1)["status"] == "ok"


def test_two_nodes_in_one_process_keep_their_own_registries() -> None:
    one, two = Bench(), Bench()
    try:
        one.batch([{"action": "title"}], 1)
        assert one.value("kitsune_calls_total", kind="batch", status="ok") == 1
        assert two.value("kitsune_calls_total", kind="batch", status="ok") == 0
    finally:
        one.checkpoint_actor.stop()
        two.checkpoint_actor.stop()


# --- HTTP ----------------------------------------------------------------------------------------


def _app(metrics: NodeMetrics, config: Settings) -> Starlette:
    async def ok(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def boom(request: Request) -> Response:
        raise RuntimeError("boom")

    return Starlette(routes=[Route("/api/tabs", ok, methods=["GET", "POST"]), Route("/api/batch", boom,
                                                                                     methods=["POST"]),
                             Route("/api/items/{item}", ok), Mount("/mcp", routes=[Route("/{rest:path}", ok)])],
                     middleware=[Middleware(HttpMetrics, metrics=metrics, allowed=scrape_tokens(config))])


CONFIG = Settings(agents=(Agent("alice", hashlib.sha256(b"alice-token-0123456789").digest()),),
                  http=HttpConfig(metrics_token_sha256=hashlib.sha256(b"scrape-token-0123456789").digest()))


def test_http_requests_by_route_template_and_metrics_needs_a_bearer_token(bench: Bench) -> None:
    client = TestClient(_app(bench.metrics, CONFIG), raise_server_exceptions=False)
    assert client.get("/api/tabs").status_code == 200
    assert client.get("/api/items/12345?url=https://x.test/").status_code == 200
    assert client.post("/api/batch").status_code == 500
    assert client.get("/mcp/sessions/abc123").status_code == 200
    assert client.get(f"/nowhere/{secrets.token_hex(8)}").status_code == 404
    assert client.request("PROPFIND", "/api/tabs").status_code == 405
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer nope-nope-nope-nope"}).status_code == 401
    assert client.post("/metrics", headers={"Authorization": "Bearer scrape-token-0123456789"}).status_code == 405
    scraped = client.get("/metrics", headers={"Authorization": "Bearer scrape-token-0123456789"})
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    assert client.get("/metrics", headers={"Authorization": "Bearer alice-token-0123456789"}).status_code == 200
    assert bench.value("kitsune_http_requests_total", route="/api/tabs", method="GET", status="200") == 1
    assert bench.value("kitsune_http_requests_total", route="/api/items/{item}", method="GET", status="200") == 1
    assert bench.value("kitsune_http_requests_total", route="/api/batch", method="POST", status="500") == 1
    assert bench.value("kitsune_http_requests_total", route="/mcp", method="GET", status="200") == 1
    assert bench.value("kitsune_http_requests_total", route="other", method="GET", status="404") == 1
    assert bench.value("kitsune_http_requests_total", route="/api/tabs", method="other", status="405") == 1
    assert bench.value("kitsune_http_requests_total", route="/metrics", method="GET", status="401") == 2
    assert bench.value("kitsune_http_requests_total", route="/metrics", method="GET", status="200") == 2


def test_the_scrape_token_comes_from_the_config_or_the_environment() -> None:
    assert load_config(env={}).http.metrics_token_sha256 is None
    token = "scrape-token-0123456789"
    digest = hashlib.sha256(token.encode()).digest()
    assert load_config(env={"KITSUNE_METRICS_TOKEN": token}).http.metrics_token_sha256 == digest
    with pytest.raises(KitsuneError, match="16 characters"):
        load_config(env={"KITSUNE_METRICS_TOKEN": "short"})
    assert token not in repr(load_config(env={"KITSUNE_METRICS_TOKEN": token}))


# --- bounded labels ------------------------------------------------------------------------------


def test_label_values_stay_in_fixed_sets_whatever_the_workload(bench: Bench) -> None:
    """Hundreds of distinct agents, tabs, calls, URLs, codes and paths: no label grows with them."""
    made_up: list[str] = []

    def fresh(prefix: str) -> str:
        made_up.append(f"{prefix}{secrets.token_hex(6)}")
        return made_up[-1]

    def run(index: int) -> None:
        agent, tab = fresh("agent-"), 1 + index % 300
        url = f"https://{fresh('host')}.example.test/{fresh('p')}?token={fresh('t')}&id={index}"
        bench.driver.on(f"#s{index}", Failed(Failure("odd", fresh("code_"), False, {"url": url})))
        bench.driver.on(f"#u{index}", Unknown(Failure("odd", fresh("code_"), False)))
        bench.batch([{"action": "navigate", "url": url}, {"action": "click", "selector": f"#s{index}"}],
                    tab, agent=agent)
        body = bench.batch([{"action": "click", "selector": f"#u{index}"}], tab, agent=agent)
        if "call" in body:
            with pytest.raises(KitsuneError):
                bench.calls.resume(body["call"], fresh("tok"), agent=agent)
            with contextlib.suppress(KitsuneError):  # pushed out by another thread's call (capacity 3)
                bench.calls.resume(body["call"], body["resume_token"], {"0": "applied"}, agent=agent)
        bench.metrics.bus_request(f"unit.tab.{tab}.do", 0.001, fresh("outcome_"))
        bench.metrics.checkpoint_dropped(fresh("reason_"))
        bench.metrics.resumed(fresh("outcome_"), fresh("code_"))
        bench.metrics.policy_refused(Failed(Failure("x", fresh("code_"), False, {"reason": fresh("r")})))
        bench.metrics.policy_refused(Failed(Failure("x", "url_denied", False, {"reason": fresh("r")})))

    def worker(q: int) -> None:
        for i in range(50):
            run(q * 50 + i)

    threads = [threading.Thread(target=worker, args=(q,)) for q in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client = TestClient(_app(bench.metrics, CONFIG))
    for index in range(100):
        client.get(f"/api/items/{index}?url=https://{fresh('h')}.test/")
        client.get(f"/{fresh('path')}/{index}")
        client.request(fresh("M").upper()[:7], "/api/tabs")
    exposition = bench.metrics.exposition().decode()
    assert unbounded_labels(exposition, ["unit"], made_up, routes=["/api/items/{item}"]) == []
    assert bench.value("kitsune_calls_total", kind="batch", status="failed") == 200
    assert bench.value("kitsune_resumes_total", outcome="other", code="other") == 200
    series = sum(1 for f in text_string_to_metric_families(exposition) for _ in f.samples)
    assert series < 1500, series
