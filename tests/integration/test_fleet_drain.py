"""A node that leaves its fleet gracefully (issue 34), with real processes: a drain under load, SIGTERM, the CLI.

Node A is a ``kitsune serve`` process; node B an in-process node of the same fleet, on the 3-server NATS
cluster, served over HTTP. Twenty agents run calls that each write once to the test site (a POST to a path of their
own: the site counts each), through A and B, on tabs of both. A drains while they run, one call held in
flight on it (the site holds its answer): the call finishes, new calls go to B, A leaves, its process exits 0.
An agent signed in to the site in a persistent session on A finds its sign-in through B once A left: the drain
saved it, and B restores it.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import nats.js.errors
import pytest

from actors.buckets import NODES_BUCKET, TABS_BUCKET
from actors.nats_server import EmbeddedNats
from bridge.wiring import run_node
from core.settings import NatsConfig, NodeConfig, SessionTimes
from driver import ChromiumBrowser
from kitsune.config import load_config
from kitsune.fleet import FLEET
from tests.integration.fleet_nodes import until
from tests.integration.persist_sessions import KEY, SIGN_IN, open_persistent, secrets_absent, seen_by_site
from tests.integration.serving import KITSUNE, Served, app_over, serve
from tests.nats_access import NatsAccess
from tests.nats_cluster import ClusterAccess
from tests.site import TestSite

AGENTS = {f"agent{i:02d}": f"agent{i:02d}-token-0123456789abcdef" for i in range(20)}
OPERATOR = "operator-token-0123456789abcdef"
EMPTY_ASKS = 5
"""Times a bucket with no keys is read before it is taken as empty (``Pair.kv_keys``)."""
WRITE = ("await new Promise(r => setTimeout(r, 50)); "
         "await fetch('/drain-writes/{key}', {{method: 'POST'}}); return 1")


def _settings() -> dict[str, Any]:
    return {"agents": [{"name": name, "token": token} for name, token in AGENTS.items()],
            "operators": [{"name": "sre", "token": OPERATOR}], "caps": ["core", "automation"],
            "sessions": {"persist_key": KEY}}


@dataclass
class Pair:
    """Node A (a process) and node B (in this one), of one fleet; B's node, to read the fleet's buckets."""

    a: Served
    a_name: str
    b: str
    b_name: str
    fleet: str
    nats: NatsAccess

    def kv_keys(self, bucket: str) -> dict[str, bytes]:
        """The keys of one of the fleet's buckets now, with their values, read from NATS itself. nats-py's ``keys()``
        can answer none while its watcher's first messages are still in the socket (it takes the consumer's pending
        count of 0 for the end): no keys is asked again a few times before it is believed."""
        async def read() -> dict[str, bytes]:
            client = await self.nats.client()
            try:
                kv = await client.jetstream().key_value(bucket)
                keys: list[str] = []
                for _ in range(EMPTY_ASKS):
                    try:
                        keys = await kv.keys()
                        break
                    except nats.js.errors.NoKeysError:
                        await asyncio.sleep(0.2)
                found = {key: await kv.get(key) for key in keys if key.startswith(self.fleet + ".")}
                return {key: entry.value or b"" for key, entry in found.items()}
            finally:
                await client.close()
        return asyncio.run(read())


@pytest.fixture
def pair(tmp_path_factory: pytest.TempPathFactory, nats_cluster: ClusterAccess) -> Iterator[Pair]:
    directory = tmp_path_factory.mktemp("drain")
    a = serve(directory, nats_cluster, {**_settings(), "drain_deadline": 60, "fleet": FLEET})  # the cluster's
    try:
        b = run_node(ChromiumBrowser(), nats_cluster.node_config(step_timeout=10.0,
                                                                  sessions=SessionTimes(persist_key=KEY)))
        try:
            config = load_config(None, {"KITSUNE_AGENTS": ",".join(f"{n}={t}" for n, t in AGENTS.items()),
                                        "KITSUNE_CAPS": "core,automation",
                                        "KITSUNE_OPERATORS": json.dumps(_settings()["operators"])})
            with app_over(b, config) as base:
                until(lambda: len(b.member.registry.alive()) == 2, 10, "node B seeing node A")
                yield Pair(a, httpx.get(a.base + "/livez").json()["node"], base, b.config.name, FLEET, nats_cluster)
        finally:
            b.stop()
    finally:
        if a.process.poll() is None:
            a.stop()


@dataclass
class Agent:
    """One agent's loop: a write a call, on its tab, through one node's API; elsewhere once refused."""

    name: str
    pair: Pair
    site: TestSite
    base: str
    tab: int = 0
    answers: list[tuple[str, int, str, str | None]] = field(default_factory=list)
    """(its write's key, HTTP status, the call's status, its error code) of every call answered."""
    lost: list[str] = field(default_factory=list)
    """Calls sent whose answer never came."""
    moved: list[str] = field(default_factory=list)
    """The node of each tab it opened after its first."""
    stop: threading.Event = field(default_factory=threading.Event)

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, timeout=90, headers={"Authorization": f"Bearer {AGENTS[self.name]}"})

    def open(self, node: str) -> None:
        with self.client() as client:
            answer = client.post("/api/tabs", json={"op": "open", "url": self.site.url("/clicks"), "node": node})
        assert answer.status_code == 200, answer.text
        self.tab = answer.json()["tabId"]

    def run(self) -> None:
        try:
            self._calls()
        except Exception as e:  # the test fails on it, after the others stopped
            self.lost.append(f"the agent stopped: {type(e).__name__}: {e}")

    def _calls(self) -> None:
        n = 0
        while not self.stop.is_set():
            key = f"{self.name}-{n}"
            n += 1
            try:
                with self.client() as client:
                    answer = client.post("/api/batch", json={"tabId": self.tab, "commands": [
                        {"action": "js", "code": WRITE.format(key=key)}]})
            except httpx.ConnectError:  # A stopped: never sent
                self._elsewhere()
                continue
            except httpx.TransportError as e:
                self.lost.append(f"{key}: {type(e).__name__}")
                continue
            body = answer.json()
            code = body.get("code") or (body.get("results") or [{}])[0].get("code")
            self.answers.append((key, answer.status_code, str(body.get("status")), code))
            if code in ("node_draining", "tab_closed"):
                self._elsewhere()

    def _elsewhere(self) -> None:
        """Go on through B, on a tab the fleet places: once A left, when the agent's session lived there (a tab of
        it opens where it lives: until then, ``node_draining``)."""
        self.base = self.pair.b
        with self.client() as client:
            while (answer := client.post("/api/tabs", json={"op": "open", "url": self.site.url("/clicks")}
                                         )).status_code != 200 and not self.stop.is_set():
                if answer.status_code == 503:
                    refused = answer.json()
                    assert (refused["code"], refused.get("state", {}).get("node")) == ("node_draining",
                                                                                      self.pair.a_name), answer.text
                else:  # a newTab may time out on a machine this busy (ending unknown: no site write is at stake)
                    assert answer.json()["code"] in ("timeout", "bus_timeout"), answer.text
                time.sleep(0.1)
        if answer.status_code != 200:  # the test ends
            return
        self.tab = answer.json()["tabId"]
        self.moved.append(self.node_of(self.tab))

    def node_of(self, tab: int) -> str:
        with self.client() as client:
            tabs = client.get("/api/tabs").json()["tabs"]
        return str(next(t["node"] for t in tabs if t["tabId"] == tab))


def _agents(pair: Pair, site: TestSite) -> list[Agent]:
    """Twenty agents: half with a tab on A, half on B, each through one node's API or the other's."""
    agents = []
    for i, name in enumerate(AGENTS):
        agent = Agent(name, pair, site, pair.a.base if i % 4 < 2 else pair.b)
        agent.open(pair.a_name if i % 2 == 0 else pair.b_name)
        agents.append(agent)
    return agents


def _operator(base: str) -> httpx.Client:
    return httpx.Client(base_url=base, timeout=30, headers={"Authorization": f"Bearer {OPERATOR}"})


def _held_call(pair: Pair, site: TestSite) -> tuple[threading.Thread, list[httpx.Response], int]:
    """A parallel call on a tab of A whose write the site holds (its tab claimed); the thread, its answer, the tab."""
    agent = Agent("agent00", pair, site, pair.a.base)
    agent.open(pair.a_name)
    with agent.client() as client:
        assert client.post("/api/act", json={"command": {"action": "navigate", "tabId": agent.tab,
                                                         "url": site.url("/slow")}}).status_code == 200
    answered: list[httpx.Response] = []

    def call() -> None:
        with agent.client() as client:
            answered.append(client.post("/api/parallel", json={"timeout": 600, "sequences": [
                [{"action": "submitForm", "tabId": agent.tab, "selector": "#slow-form", "timeout": 300}]]}))

    thread = threading.Thread(target=call)
    thread.start()
    return thread, answered, agent.tab


def test_a_node_drained_under_load_loses_no_answer_writes_nothing_twice_and_leaves_at_once(
        pair: Pair, site: TestSite) -> None:
    agents = _agents(pair, site)
    shopper = _signed_in_on_a(pair, site)
    threads = [threading.Thread(target=agent.run) for agent in agents]
    try:
        held_tab = _drain_under_load(pair, site, agents, threads)
        _left_at_once(pair, held_tab)
        until(lambda: all(agent.answers[-1][2] == "ok" for agent in agents if agent.moved), 120,
              "the moved agents' calls answered ok on B")
    finally:
        for agent in agents:
            agent.stop.set()
        for thread in threads:
            thread.join(timeout=120)
    _no_answer_lost_nothing_twice(pair, site, agents)
    _signed_in_through_b(pair, site, shopper)


def _signed_in_on_a(pair: Pair, site: TestSite) -> Agent:
    """agent19 signed in to the site in its persistent session ``shop``, on A (never saved until the drain)."""
    shopper = Agent("agent19", pair, site, pair.a.base)
    with shopper.client() as client:
        opened = client.post("/api/tabs", json={"op": "open", "url": site.url("/session/start"), "node": pair.a_name,
                                                "session": {"name": "shop", "persist": True}}).json()
        assert opened["status"] == "ok" and opened["restored"] is False, opened
        assert seen_by_site(client, opened["tabId"]) == "signed in"
    return shopper


def _signed_in_through_b(pair: Pair, site: TestSite, shopper: Agent) -> None:
    """Once A left, the shopper's session opens through B with its sign-in: restored from the drain's save."""
    shopper.base = pair.b
    with shopper.client() as client:
        restored = open_persistent(client, site.url("/session"))
        assert restored["status"] == "ok" and restored["restored"] is True, restored
        assert seen_by_site(client, restored["tabId"]) == "signed in"  # the site saw the sign-in's cookie
        assert shopper.node_of(restored["tabId"]) == pair.b_name
    assert site.count(SIGN_IN) == 1
    assert secrets_absent(site, pair.a.log_file.read_text(), pair.a.audit_file.read_text())


def _drain_under_load(pair: Pair, site: TestSite, agents: list[Agent], threads: list[threading.Thread]) -> int:
    """The agents' calls running and one held on A, A drained through B: A exits 0 once it left; the held tab."""
    slow = site.count("POST /slow")
    site.hold_slow()
    try:
        held, answered, held_tab = _held_call(pair, site)
        assert site.wait_for_count("POST /slow", slow + 1, timeout=30) == slow + 1
        claimed = f"{pair.fleet}.tab.{held_tab}"
        until(lambda: b'"claim":[' in pair.kv_keys(TABS_BUCKET).get(claimed, b""), 10, "the held call's claim")
        for thread in threads:
            thread.start()
        until(lambda: all(len(agent.answers) >= 2 for agent in agents), 120, "every agent answered twice")
        with _operator(pair.b) as operator:  # through B: the drain goes to A over NATS
            started = operator.post(f"/api/fleet/nodes/{pair.a_name}/drain", json={"deadline": 60})
        assert started.status_code == 202, started.text
        assert {**started.json(), "calls": 0} == {"node": pair.a_name, "state": "draining", "deadline": 60.0,
                                                  "calls": 0}
        assert started.json()["calls"] >= 1  # the held call at least
        _while_draining(pair, agents)
    finally:
        site.release_slow()
    held.join(timeout=60)
    assert answered and answered[0].status_code == 200 and answered[0].json()["status"] == "ok", answered
    assert pair.a.process.wait(timeout=60) == 0  # it left the fleet, then stopped
    return held_tab


def _while_draining(pair: Pair, agents: list[Agent]) -> None:
    """While A drains (its held call in flight): not ready, draining in the fleet, new calls refused."""
    ready = httpx.get(pair.a.base + "/readyz")
    assert (ready.status_code, ready.json()) == (503, {"ok": False, "node": pair.a_name, "nats": True,
                                                       "browser": True, "draining": True})
    assert httpx.get(pair.a.base + "/livez").status_code == 200
    with _operator(pair.b) as operator:  # B hears of it through the fleet, a heartbeat later at most
        until(lambda: (operator.get(f"/api/fleet/nodes/{pair.a_name}/drain").json()["state"] == "draining"), 30,
              "B seeing A draining")
        where = operator.get(f"/api/fleet/nodes/{pair.a_name}/drain")
    assert (where.status_code, where.json()["state"]) == (200, "draining")
    with httpx.Client(base_url=pair.a.base, headers={"Authorization": f"Bearer {AGENTS['agent01']}"}) as client:
        refused = client.post("/api/batch", json={"commands": [{"action": "getTabs"}]})
    assert (refused.status_code, refused.json()["code"], refused.json()["retryable"]) == (503, "node_draining", True)
    state = refused.json()["state"]  # agent01's current tab is on B, in its session: B is where to go
    assert (state["node"], state["home"], isinstance(state["tabId"], int)) == (pair.a_name, pair.b_name, True)
    until(lambda: all(len(agent.moved) for agent in agents if agent.tab and agent.base == pair.a.base), 120,
          "the agents of A moving to B")


def _left_at_once(pair: Pair, held_tab: int) -> None:
    """A's heartbeat, tabs (their claims with them) and sessions left the buckets when it left, not expired."""
    nodes, tabs = pair.kv_keys(NODES_BUCKET), pair.kv_keys(TABS_BUCKET)
    assert f"{pair.fleet}.{pair.a_name}" not in nodes and f"{pair.fleet}.{pair.b_name}" in nodes
    assert f"{pair.fleet}.tab.{held_tab}" not in tabs
    assert [key for key, value in tabs.items() if f'"node":"{pair.a_name}"'.encode() in value] == []


def _no_answer_lost_nothing_twice(pair: Pair, site: TestSite, agents: list[Agent]) -> None:
    assert [lost for agent in agents for lost in agent.lost] == []
    statuses: collections.Counter[tuple[int, str, str | None]] = collections.Counter()
    for agent in agents:
        assert set(agent.moved) <= {pair.b_name}, (agent.name, agent.moved)  # new tabs go to B
        for key, http, status, code in agent.answers:
            statuses[(http, status, code)] += 1
            count = site.count(f"POST /drain-writes/{key}")
            if status == "ok":
                assert count == 1, (key, http, status, code)
            elif code in ("node_draining", "tab_closed"):
                assert count == 0, (key, http, status, code)  # refused: nothing was sent
            else:
                assert (status, count <= 1) == ("unknown", True), (key, http, status, code)
    answered = {(http, status, code) for http, status, code in statuses if status != "unknown"}  # checked above
    assert answered <= {(200, "ok", None), (503, "None", "node_draining"), (200, "failed", "node_draining"),
                        (400, "None", "tab_closed"), (200, "failed", "tab_closed")}, statuses
    assert statuses[(503, "None", "node_draining")] + statuses[(200, "failed", "node_draining")] >= 1, statuses
    assert statuses[(200, "ok", None)] >= 2 * len(agents)


def test_sigterm_drains_a_served_node_its_call_in_flight_finishes_and_it_exits_0(
        tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess, site: TestSite) -> None:
    served = serve(tmp_path_factory.mktemp("sigterm"), nats_access, _settings())
    try:
        with httpx.Client(base_url=served.base, timeout=90,
                          headers={"Authorization": f"Bearer {AGENTS['agent01']}"}) as alice:
            opened = alice.post("/api/tabs", json={"op": "open", "url": site.url("/slow")})
            tab = opened.json()["tabId"]
            slow = site.count("POST /slow")
            site.hold_slow()
            answered: list[httpx.Response] = []
            call = threading.Thread(target=lambda: answered.append(alice.post("/api/batch", json={
                "tabId": tab, "commands": [{"action": "submitForm", "selector": "#slow-form"}]})))
            call.start()
            try:
                assert site.wait_for_count("POST /slow", slow + 1, timeout=30) == slow + 1
                served.process.terminate()
                until(lambda: httpx.get(served.base + "/readyz").status_code == 503, 30, "the node not ready")
                assert httpx.get(served.base + "/readyz").json()["draining"] is True
                assert served.process.poll() is None  # its call is in flight: it waits
            finally:
                site.release_slow()
            call.join(timeout=60)
        assert answered and answered[0].json()["status"] == "ok", answered
        assert served.process.wait(timeout=60) == 0
        assert site.count("POST /slow") == slow + 1
    finally:
        if served.process.poll() is None:
            served.process.kill()


def _drain_cli(*args: str, token: str | None = OPERATOR) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KITSUNE_OPERATOR_TOKEN"}
    if token is not None:
        env["KITSUNE_OPERATOR_TOKEN"] = token
    return subprocess.run([str(KITSUNE), "drain", *args], check=False, env=env, capture_output=True, text=True,
                          timeout=120)


def test_kitsune_drain_drains_the_node_at_its_url_and_waits_until_it_left(
        tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess) -> None:
    served = serve(tmp_path_factory.mktemp("cli"), nats_access, _settings())
    try:
        untold = _drain_cli("--url", served.base, token=None)
        assert untold.returncode == 2 and "KITSUNE_OPERATOR_TOKEN" in untold.stderr
        wrong = _drain_cli("--url", served.base, token=AGENTS["agent01"])  # an agent's token is no operator's
        assert wrong.returncode == 1 and "401 unauthorized" in wrong.stderr, wrong.stderr
        unknown = _drain_cli("--url", served.base, "--node", "no-such-node")
        assert unknown.returncode == 1 and "400 unknown_node" in unknown.stderr, unknown.stderr
        assert httpx.get(served.base + "/readyz").status_code == 200  # none of those drained it
        drained = _drain_cli("--url", served.base, "--deadline", "5", "--wait")
        assert drained.returncode == 0, drained.stderr
        assert '"state": "draining"' in drained.stdout and '"state": "left"' in drained.stdout
        assert served.process.wait(timeout=60) == 0
    finally:
        if served.process.poll() is None:
            served.process.kill()


def test_livez_answers_while_nats_is_down_and_readyz_says_nats_is_not_ready(site: TestSite) -> None:
    server = EmbeddedNats(fleet="readyz")
    node = run_node(ChromiumBrowser(), NodeConfig(nats=NatsConfig(server.start(), server.auth), fleet="readyz"))
    try:
        config = load_config(None, {"KITSUNE_AGENTS": f"agent01={AGENTS['agent01']}"})
        with app_over(node, config) as base:
            ready = httpx.get(base + "/readyz")
            assert (ready.status_code, ready.json()) == (200, {"ok": True, "node": node.config.name, "nats": True,
                                                              "browser": True, "draining": False})
            server.stop()  # the nats-server under the node
            until(lambda: httpx.get(base + "/readyz").status_code == 503, 30, "the node not ready without NATS")
            assert httpx.get(base + "/readyz").json() == {"ok": False, "node": node.config.name, "nats": False,
                                                          "browser": True, "draining": False}
            live = httpx.get(base + "/livez")
            assert (live.status_code, live.json()) == (200, {"ok": True, "node": node.config.name})
    finally:
        node.stop()
