"""Observability end to end: a real Prometheus scrapes three live ``kitsune serve`` nodes while a
workload runs batches, parallels, resumes, denials, holds and the shop's site tools, some of them on
a tab of another node of the fleet; then every panel expression of the Grafana dashboards is evaluated
through Prometheus' HTTP API and must return data. The alert rules are checked and unit-tested by
``promtool``, loaded by the same Prometheus, and evaluated there (a node leaving the fleet included).

Needs Debian's ``prometheus`` package (``prometheus`` and ``promtool`` on PATH; ``scripts/setup``
installs it): without it these tests fail, they never skip.
"""

from __future__ import annotations

import json
import math
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from actors.nats_server import free_port
from tests.integration.serving import TOKENS, Served, open_tab, serve
from tests.metric_labels import unbounded_labels
from tests.nats_access import NatsAccess
from tests.site import TestSite

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "grafana" / "dashboards").glob("*.json"))
RULES = ROOT / "prometheus" / "kitsune.rules.yaml"
RULE_TESTS = ROOT / "prometheus" / "kitsune.rules.test.yaml"
SCRAPE_TOKEN = "scrape-" + secrets.token_hex(12)
EXTRA_AGENTS = {f"agent-{i}-{secrets.token_hex(3)}": secrets.token_urlsafe(24) for i in range(8)}
RATE_WINDOW = "1m"
CHECKOUT = {"shipping_address": "1 Ship St", "billing_address": "2 Bill Rd"}
PLAIN, ASKING, PEER = "plain", "asking", "peer"
"""The nodes' names: plain and peer are one fleet, asking is a fleet of its own."""


def _binary(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not on PATH: install Debian's prometheus package (./scripts/setup does)",
                    pytrace=False)
    return found


# --- promtool ------------------------------------------------------------------------------------


def test_promtool_checks_the_alert_rules() -> None:
    checked = subprocess.run([_binary("promtool"), "check", "rules", str(RULES)], check=False,
                             capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 13 rules found" in checked.stdout


def test_promtool_unit_tests_of_the_alert_rules_pass() -> None:
    tested = subprocess.run([_binary("promtool"), "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent,
                            check=False, capture_output=True, text=True)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_promtool_checks_the_example_prometheus_config(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(SCRAPE_TOKEN)
    config = (ROOT / "prometheus" / "prometheus.yml").read_text()
    (tmp_path / "prometheus.yml").write_text(config.replace("/etc/prometheus/kitsune-scrape-token", str(token)))
    shutil.copy(RULES, tmp_path)
    checked = subprocess.run([_binary("promtool"), "check", "config", str(tmp_path / "prometheus.yml")],
                             check=False, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


# --- a real Prometheus over live nodes -----------------------------------------------------------


@dataclass
class Fleet:
    plain: Served
    """Agents alice, bob and eight more; URL deny list."""
    asking: Served
    """Ask-before-act: every write is held."""
    peer: Served
    """Of plain's fleet, with room for one tab: bob's, which his calls through plain reach over NATS."""
    prometheus: str
    """Prometheus' base URL."""
    made_up: list[str]
    """Values the workload invented (URLs, agent names): none may show in a label."""

    def query(self, expr: str) -> list[dict[str, Any]]:
        answer = httpx.get(f"{self.prometheus}/api/v1/query", params={"query": expr}, timeout=10).json()
        assert answer["status"] == "success", (expr, answer)
        result: list[dict[str, Any]] = answer["data"]["result"]
        return result


def _instance(served: Served) -> str:
    return urlsplit(served.base).netloc


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory,
          nats_access: NatsAccess) -> Iterator[tuple[Served, Served, Served]]:
    agents = [{"name": name, "token": token} for name, token in {**TOKENS, **EXTRA_AGENTS}.items()]
    metrics = {"metrics": {"token": SCRAPE_TOKEN}}
    plain = serve(tmp_path_factory.mktemp("observed"), nats_access, {
        "caps": ["core", "automation"], "agents": agents, "urls": {"deny": ["denied.test"]}, "node_name": PLAIN,
        **metrics})
    started = [plain]
    try:
        started.append(serve(tmp_path_factory.mktemp("observed-asking"), nats_access, {
            "caps": ["core", "automation"], "ask_before_act": True, "node_name": ASKING, **metrics}))
        started.append(serve(tmp_path_factory.mktemp("observed-peer"), nats_access, {
            "fleet": plain.directory.name, "node_name": PEER, "max_tabs": 1, **metrics}))
    except BaseException:
        for served in started:
            served.stop()
        raise
    yield plain, started[1], started[2]
    for served in reversed(started):
        assert served.stop() == 0


@pytest.fixture(scope="module")
def prometheus(nodes: tuple[Served, ...], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = _binary("prometheus")
    directory = tmp_path_factory.mktemp("prometheus")
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [{
            "job_name": "kitsune", "scrape_interval": "1s", "scrape_timeout": "1s",
            "authorization": {"type": "Bearer", "credentials": SCRAPE_TOKEN},
            "static_configs": [{"targets": [_instance(served) for served in nodes]}],
        }],
    }
    (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = (directory / "prometheus.log").open("w")
    process = subprocess.Popen([binary, f"--config.file={directory / 'prometheus.yml'}",
                                f"--storage.tsdb.path={directory / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                               stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, (directory / "prometheus.log").read_text()
            try:
                ready = httpx.get(f"{base}/-/ready", timeout=2).status_code == 200
                up = ready and httpx.get(f"{base}/api/v1/query", params={"query": 'up{job="kitsune"} == 1'},
                                         timeout=2).json()["data"]["result"]
            except httpx.HTTPError:
                up = []
            if up and len(up) == len(nodes):
                break
            assert time.monotonic() < deadline, f"not scraped:\n{(directory / 'prometheus.log').read_text()}"
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def _ok(answer: httpx.Response, status: int = 200) -> dict[str, Any]:
    """The JSON body of ``answer``, whose HTTP status must be ``status``: a direct route answers an error
    outcome with its code's status (``url_denied`` and a hold's ``needs_user`` 403, ``tab_owned`` 409)."""
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _scraped(served: Served, name: str, **labels: str) -> float | None:
    """A sample of a node's own ``/metrics`` now."""
    text = httpx.get(served.base + "/metrics", headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"}).text
    return next((s.value for family in text_string_to_metric_families(text) for s in family.samples
                 if s.name == name and s.labels == labels), None)


def _until(met: Any, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not met():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def _remote_tab(plain: Served, site: TestSite) -> int:
    """Bob's tab on the peer, opened through plain; the peer has no room left after it, so every other
    tab plain opens stays on plain (placement goes to the least loaded node with room)."""
    _until(lambda: _scraped(plain, "kitsune_fleet_nodes") == 2, "plain does not see the peer")
    with plain.client("bob") as bob:
        tab: int = _ok(bob.post("/api/act", json={"command": {"action": "newTab", "url": site.url("/clicks"),
                                                              "node": PEER}}))["tabId"]
    _until(lambda: _scraped(plain, "kitsune_fleet_tabs", node=PEER) == 1, "plain's registry misses the peer's tab")
    return tab


def _visit(made_up: list[str], site: TestSite, path: str) -> str:
    """A URL of ``site`` made up for one visit (kept in ``made_up``: no label may show it)."""
    made = site.url(f"{path}?visit={secrets.token_hex(6)}")
    made_up.append(made)
    return made


def _round(fleet_made_up: list[str], plain: Served, asking: Served, remote: int, site: TestSite,
           first: bool) -> None:
    """Batches, parallels, resumes (ok and refused), denials and holds on two fleets; a batch and a
    parallel through plain on the ``remote`` tab of the peer."""
    def url(path: str) -> str:
        return _visit(fleet_made_up, site, path)

    with plain.client("alice") as alice, plain.client("bob") as bob:
        one, two = open_tab(alice, url("/form")), open_tab(alice, url("/clicks"))
        assert _ok(alice.post("/api/batch", json={"tabId": one, "commands": [
            {"action": "fill", "selector": "#name", "value": "Ada"}, {"action": "title"}]}))["status"] == "ok"
        assert _ok(alice.post("/api/parallel", json={"sequences": [
            [{"action": "click", "tabId": two, "selector": "#hit"}],
            [{"action": "pageText", "tabId": one}]]}))["status"] == "ok"
        conflict = _ok(alice.post("/api/parallel", json={"sequences": [
            [{"action": "click", "tabId": two, "selector": "#hit"}],
            [{"action": "click", "tabId": two, "selector": "#hit"}]]}))
        assert "tab_owned" in json.dumps(conflict["results"])
        failed = _ok(alice.post("/api/batch", json={"tabId": one, "commands": [
            {"action": "click", "selector": "#late", "timeout": 2}]}))  # the resume's click has as long (stress-ng)
        assert failed["status"] == "failed"
        assert alice.post("/api/resume", json={"call": failed["call"], "resume_token": "wrong"}).status_code == 403
        assert alice.post("/api/resume", json={"call": failed["call"] + 10_000,
                                               "resume_token": failed["resume_token"]}).status_code == 404
        _ok(alice.post("/api/act", json={"command": {"action": "js", "tabId": one, "code":
                                                     "document.body.insertAdjacentHTML('beforeend', "
                                                     "'<button id=late>late</button>')"}}))
        assert _ok(alice.post("/api/resume", json={"call": failed["call"],
                                                   "resume_token": failed["resume_token"]}))["status"] == "ok"
        denied = _ok(alice.post("/api/act", json={"command": {"action": "navigate", "tabId": one,
                                                              "url": f"http://denied.test/{secrets.token_hex(4)}"}}),
                     403)
        assert (denied["status"], denied["code"]) == ("failed", "url_denied")
        owned = _ok(bob.post("/api/act", json={"command": {"action": "click", "tabId": one, "selector": "#name"}}),
                    409)
        assert (owned["status"], owned["code"]) == ("failed", "tab_owned")
        assert _ok(bob.post("/api/batch", json={"tabId": remote, "commands": [
            {"action": "click", "selector": "#hit"}, {"action": "title"}]}))["status"] == "ok"
        assert _ok(bob.post("/api/parallel", json={"sequences": [
            [{"action": "click", "tabId": remote, "selector": "#hit"}]]}))["status"] == "ok"
        if first:
            slow = open_tab(alice, url("/slow"))
            unknown = _ok(alice.post("/api/batch", json={"tabId": slow, "commands": [
                {"action": "submitForm", "selector": "#slow-form", "timeout": 1}]}))
            assert unknown["status"] == "unknown"
            for name, token in EXTRA_AGENTS.items():  # many agents, each with its own tab and URL
                fleet_made_up.append(name)
                with httpx.Client(base_url=plain.base, headers={"Authorization": f"Bearer {token}"},
                                  timeout=60) as agent:
                    tab = open_tab(agent, url("/text"))
                    _ok(agent.post("/api/batch", json={"tabId": tab, "commands": [{"action": "title"}]}))
                    _ok(agent.post("/api/tabs", json={"op": "close", "tabId": tab}))
        for tab in (one, two):
            _ok(alice.post("/api/tabs", json={"op": "close", "tabId": tab}))

    with asking.client("alice") as alice:
        new_tab = {"action": "newTab", "url": url("/clicks")}
        held = _ok(alice.post("/api/act", json={"command": new_tab}), 403)
        assert (held["status"], held["code"]) == ("held", "needs_user")
        tab = _ok(alice.post("/api/act", json={"command": new_tab,
                                               "confirm_token": held["state"]["confirm_token"]}))["tabId"]
        body = _ok(alice.post("/api/batch", json={"tabId": tab, "commands": [
            {"action": "title"}, {"action": "click", "selector": "#hit"}]}))
        assert body["status"] == "held"
        again = _ok(alice.post("/api/resume", json={"call": body["call"], "resume_token": body["resume_token"]}))
        assert again["status"] == "held"
        clicked = _ok(alice.post("/api/act", json={"command": {"action": "click", "tabId": tab, "selector": "#hit"}}),
                      403)
        assert (clicked["status"], clicked["code"]) == ("held", "needs_user")


def _site_tools(made_up: list[str], plain: Served, site: TestSite) -> None:
    """One batch of alice's on plain through the shop's pages: search (ok), the checkout (ok, its two
    continuation tokens redeemed) and leave, which navigates without a token (unknown, so it goes last)."""
    before = site.counts()
    with plain.client("alice") as alice:
        tab = open_tab(alice, _visit(made_up, site, "/shop"))
        body = _ok(alice.post("/api/batch", json={"tabId": tab, "commands": [
            {"action": "callSiteTool", "name": "search", "input": {"query": "coat"}},
            {"action": "navigate", "url": _visit(made_up, site, "/shop/billing")},
            {"action": "callSiteTool", "name": "checkout", "input": CHECKOUT},
            {"action": "navigate", "url": _visit(made_up, site, "/shop/leave")},
            {"action": "callSiteTool", "name": "leave", "input": {"note": "bye"}}]}))
        _ok(alice.post("/api/tabs", json={"op": "close", "tabId": tab}))
    assert (body["status"], body["results"][-1].get("code")) == ("unknown", "navigated"), body
    assert [step["status"] for step in body["progress"]] == ["ok", "ok", "ok", "ok", "unknown"], body
    sent = {key: n - before.get(key, 0) for key, n in site.counts().items() if n != before.get(key, 0)}
    assert sent == {"POST /shop/billing": 1, "POST /shop/shipping": 1, "POST /shop/confirmation": 1,
                    "POST /shop/leave": 1}


@pytest.fixture(scope="module")
def fleet(nodes: tuple[Served, Served, Served], prometheus: str, test_site: TestSite) -> Fleet:
    """The nodes after two rounds of the workload, each seen by several scrapes."""
    test_site.reset()
    test_site.slow_seconds = 3.0
    made_up: list[str] = []
    plain, asking, peer = nodes
    remote = _remote_tab(plain, test_site)
    _round(made_up, plain, asking, remote, test_site, first=True)
    _site_tools(made_up, plain, test_site)
    _scraped_twice(prometheus, len(nodes))  # between the rounds: the second round's increases show in rate()
    _round(made_up, plain, asking, remote, test_site, first=False)
    _site_tools(made_up, plain, test_site)
    _scraped_twice(prometheus, len(nodes))  # and after it
    return Fleet(plain, asking, peer, prometheus, made_up)


def _scraped_twice(prometheus: str, nodes: int) -> None:
    """Until Prometheus has scraped every node twice from now on (the time of each node's latest ``up`` sample):
    the first scrape may have begun before the last counts landed, the second began after."""
    def after(moment: float) -> float:
        """The latest of the nodes' last scrapes, once each node's last one began after ``moment``."""
        found: list[float] = []

        def scraped() -> bool:
            answer = httpx.get(f"{prometheus}/api/v1/query", params={"query": 'timestamp(up{job="kitsune"})'},
                               timeout=10).json()
            found[:] = [float(series["value"][1]) for series in answer["data"]["result"]]
            return len(found) == nodes and min(found) > moment

        _until(scraped, "every node scraped")
        return max(found)

    after(after(time.time()))


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def _expressions() -> list[tuple[str, str, str]]:
    """(dashboard, panel title, expression) of every panel target of every dashboard."""
    found = []
    for path in DASHBOARDS:
        dashboard = json.loads(path.read_text())
        for panel in _panels(dashboard["panels"]):
            for target in panel.get("targets", []):
                found.append((path.name, panel["title"], target["expr"]))
    return found


def _grafana(expr: str, fleet: Fleet) -> str:
    """The expression as Grafana sends it for the last minutes of the kitsune job and the plain node."""
    for name, value in {"__rate_interval": RATE_WINDOW, "__interval": "5s", "__range": "5m", "job": "kitsune",
                        "instance": _instance(fleet.plain)}.items():  # one value: Grafana puts it as it is
        expr = expr.replace(f"${{{name}}}", value).replace(f"${name}", value)
    assert "$" not in expr, expr
    return expr


def test_the_dashboards_are_provisioned_json_with_the_panels_sres_need() -> None:
    assert [p.name for p in DASHBOARDS] == ["kitsune-fleet.json", "kitsune-node.json"]
    fleet = json.loads(DASHBOARDS[0].read_text())
    titles = " | ".join(p["title"] for p in _panels(fleet["panels"])).lower()
    for needed in ("calls/s by status", "step latency p50", "step latency p95", "step latency p99",
                   "checkpoints held", "checkpoint drops", "resumes", "tabs open", "claims", "denials",
                   "needs-user", "audit write failures", "nats request latency", "browser restarts",
                   "nodes alive", "nodes missing from the fleet", "tabs per node", "claims per node",
                   "cross-node requests/s", "cross-node request latency", "site-tool calls",
                   "continuation tokens"):
        assert needed in titles, needed
    node = json.loads(DASHBOARDS[1].read_text())
    assert {"Site-tool calls/s by outcome", "Continuation tokens/s by outcome"} <= {p["title"] for p in node["panels"]}
    assert [v["name"] for v in node["templating"]["list"]] == ["datasource", "job", "instance"]
    assert all('instance=~"$instance"' in expr for name, _, expr in _expressions() if name == "kitsune-node.json"
               and "kitsune_" in expr)
    provisioning = yaml.safe_load((ROOT / "grafana/provisioning/dashboards/kitsune.yaml").read_text())
    assert provisioning["providers"][0]["type"] == "file"
    sources = yaml.safe_load((ROOT / "grafana/provisioning/datasources/prometheus.yaml").read_text())
    assert sources["datasources"][0]["type"] == "prometheus"


def test_every_panel_expression_returns_data_from_a_real_prometheus(fleet: Fleet) -> None:
    expressions = _expressions()
    assert len(expressions) >= 50
    empty, nan = [], []
    for dashboard, title, expr in expressions:
        result = fleet.query(_grafana(expr, fleet))
        if not result:
            empty.append(f"{dashboard} / {title}: {expr}")
        elif all(math.isnan(float(series["value"][1])) for series in result):
            nan.append(f"{dashboard} / {title}: {expr}")
    assert empty == [], "panels without data:\n" + "\n".join(empty)
    assert nan == [], "panels with only NaN:\n" + "\n".join(nan)


def test_dashboard_variables_find_the_nodes(fleet: Fleet) -> None:
    for path in DASHBOARDS:
        for variable in json.loads(path.read_text())["templating"]["list"]:
            if variable["type"] != "query":
                continue
            matched = re.fullmatch(r"label_values\((.+), (\w+)\)", variable["query"]["query"])
            assert matched, variable
            series = fleet.query(_grafana(matched.group(1), fleet))
            values = {s["metric"][matched.group(2)] for s in series}
            expected = ({"kitsune"} if matched.group(2) == "job"
                        else {_instance(n) for n in (fleet.plain, fleet.asking, fleet.peer)})
            assert values == expected, (variable["name"], values)


def test_the_workload_shows_in_prometheus(fleet: Fleet) -> None:
    def total(expr: str) -> float:
        return sum(float(s["value"][1]) for s in fleet.query(expr))

    assert total('kitsune_calls_total{status="ok"}') >= 6
    assert total('kitsune_calls_total{status="held"}') == 2
    assert total('kitsune_steps_total{action="submitForm", status="unknown"}') == 1
    assert total('kitsune_resumes_total{outcome="ok"}') == 2
    assert total('kitsune_resumes_total{outcome="held"}') == 2
    assert total('kitsune_resumes_total{outcome="refused", code="resume_token_invalid"}') == 2
    assert total('kitsune_resumes_total{outcome="refused", code="checkpoint_not_found"}') == 2
    assert total('kitsune_checkpoint_drops_total{reason="resumed_ok"}') == 2
    assert total('kitsune_policy_denials_total{code="url_denied", reason="denied"}') == 2
    assert total('kitsune_policy_denials_total{code="tab_owned", reason="agent_tab"}') == 2
    assert total('kitsune_needs_user_stops_total{reason="approval"}') == 8  # 2 x (open, batch, resume, act)
    assert total('kitsune_claim_conflicts_total{code="tab_owned"}') == 2
    assert total('kitsune_audit_entries_total') > 50
    assert total('kitsune_audit_write_failures_total') == 0
    assert total('kitsune_http_requests_total{route="/api/resume", status="403"}') == 2
    assert total('kitsune_site_tool_calls_total{outcome="ok"}') == 4  # 2 x (search, checkout)
    assert total('kitsune_site_tool_calls_total{outcome="unknown"}') == 2  # 2 x leave
    assert total('kitsune_continuations_total{outcome="redeemed"}') == 4  # 2 x the checkout's two tokens
    assert total('{__name__=~"kitsune_(site_tool_calls|continuations)_total", outcome!~"ok|unknown|redeemed"}') == 0
    assert total('kitsune_nats_requests_total{subject="open", outcome="ok"}') > 5  # tabs of a node's own calls: no NATS


def test_the_fleet_shows_in_prometheus_with_each_nodes_identity(fleet: Fleet) -> None:
    def at(served: Served, name: str, **labels: str) -> float:
        matchers = ", ".join(f'{k}="{v}"' for k, v in {"instance": _instance(served), **labels}.items())
        return sum(float(s["value"][1]) for s in fleet.query(f"{name}{{{matchers}}}"))

    one, alone = fleet.plain.directory.name, fleet.asking.directory.name
    for served, name, fleet_name in ((fleet.plain, PLAIN, one), (fleet.peer, PEER, one), (fleet.asking, ASKING, alone)):
        assert at(served, "kitsune_node_info", node=name, fleet=fleet_name) == 1
    assert [at(served, "kitsune_fleet_nodes") for served in (fleet.plain, fleet.peer, fleet.asking)] == [2, 2, 1]
    assert at(fleet.plain, "kitsune_fleet_tabs", node=PEER) == 1  # bob's, open all along
    assert at(fleet.peer, "kitsune_fleet_tabs", node=PEER) == 1
    # two rounds of bob's batch (two steps) and parallel (one step, its claim and release) on the peer's tab
    requests = "kitsune_cross_node_requests_total"
    assert at(fleet.plain, requests, subject="tab", outcome="ok") == 6
    assert at(fleet.plain, requests, subject="claims", outcome="ok") == 4
    assert at(fleet.plain, requests, subject="open", outcome="ok") == 1
    assert at(fleet.plain, "kitsune_cross_node_request_duration_seconds_count", subject="tab") == 6
    sent = {s["metric"]["subject"] for s in fleet.query(f'{requests}{{instance="{_instance(fleet.peer)}"}} > 0')}
    assert sent <= {"tabs"}  # the peer served the requests above, and sent none; only when the fleet's tab
    # list (a queue group) reaches it does it ask plain for plain's tabs
    assert at(fleet.asking, requests) == 0  # a fleet of one


def test_prometheus_loaded_the_alert_rules_and_evaluates_them_on_live_data(fleet: Fleet) -> None:
    groups = httpx.get(f"{fleet.prometheus}/api/v1/rules", timeout=10).json()["data"]["groups"]
    rules = [rule for group in groups for rule in group["rules"]]
    assert len(rules) == 13
    assert {rule["health"] for rule in rules} == {"ok"}, [(r["name"], r.get("lastError")) for r in rules]
    firing = {alert["labels"]["alertname"] for alert in httpx.get(f"{fleet.prometheus}/api/v1/alerts",
                                                                   timeout=10).json()["data"]["alerts"]}
    assert not firing & {"KitsuneNodeDown", "KitsuneAuditWriteFailures", "KitsuneNodeMissing", "KitsuneNatsReconnects"}


def test_live_label_values_are_bounded(fleet: Fleet) -> None:
    """Ten agents, dozens of tabs and URLs, calls and resumes: every label value is from a fixed set."""
    one, alone = fleet.plain.directory.name, fleet.asking.directory.name
    for served, fleet_name, names in ((fleet.plain, one, [PLAIN, PEER]), (fleet.peer, one, [PLAIN, PEER]),
                                      (fleet.asking, alone, [ASKING])):
        scraped = httpx.get(served.base + "/metrics", headers={"Authorization": f"Bearer {SCRAPE_TOKEN}"})
        assert scraped.status_code == 200
        assert unbounded_labels(scraped.text, [fleet_name], [*fleet.made_up, *TOKENS.values(), SCRAPE_TOKEN],
                                nodes=names) == []
    stored = fleet.query('{__name__=~"kitsune_.+"}')
    labels = {(k, v) for series in stored for k, v in series["metric"].items()
              if k not in ("__name__", "job", "instance", "fleet")}
    assert not [value for _, value in labels if any(made in value for made in fleet.made_up)]


def test_metrics_need_the_scrape_token_or_an_agents(fleet: Fleet) -> None:
    base = fleet.plain.base
    assert httpx.get(base + "/metrics").status_code == 401
    assert httpx.get(base + "/metrics", headers={"Authorization": "Bearer not-a-token-at-all"}).status_code == 401
    assert httpx.get(base + "/metrics", headers={"Authorization": f"Bearer {TOKENS['bob']}"}).status_code == 200
    scrape = {"Authorization": f"Bearer {SCRAPE_TOKEN}"}
    assert httpx.get(base + "/api/tabs", headers=scrape).status_code == 401  # the scrape token reads /metrics only


def test_serve_logs_are_json_lines_naming_call_and_agent_and_no_secret(fleet: Fleet) -> None:
    text = fleet.plain.log_file.read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert lines and all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    ended = [line for line in lines if line["message"].startswith(("batch call ended", "resume ended"))]
    assert ended and all(isinstance(line["call"], int) and line["agent"] for line in ended)
    assert {line["agent"] for line in ended} >= {"alice", *EXTRA_AGENTS}
    for secret in (SCRAPE_TOKEN, *TOKENS.values(), *EXTRA_AGENTS.values()):
        assert secret not in text


def test_a_node_that_leaves_is_missing_from_the_fleet(fleet: Fleet) -> None:
    """Last in this module: the peer stops (its heartbeat goes at once), and the alert rule sees it."""
    assert fleet.peer.stop() == 0

    def missing() -> set[str]:
        alerts = httpx.get(f"{fleet.prometheus}/api/v1/alerts", timeout=10).json()["data"]["alerts"]
        return {alert["labels"].get("node", "") for alert in alerts
                if alert["labels"]["alertname"] == "KitsuneNodeMissing"}  # pending: it holds for a minute

    _until(lambda: missing() == {PEER}, f"KitsuneNodeMissing not pending for {PEER}: {missing()}", seconds=60)
    assert _scraped(fleet.plain, "kitsune_fleet_nodes") == 1
    assert _scraped(fleet.plain, "kitsune_fleet_tabs", node=PEER) is None
