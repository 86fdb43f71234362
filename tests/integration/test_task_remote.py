"""``remote`` tasks (issue 33) at the reference authority of ``tests/task_authority.py``, on a real node (real
nats-server, real Chromium, the real app over HTTP) configured through its configuration file: the task lives at
the authority (create, heartbeat, checkpoint, complete); the authority slow, down, or answering a newer revision
each time, and the node fails closed (nothing written there, a clear code); its credential is sent and never
in the node's logs; a node with no authority, or one its URL rules deny, keeps no ``remote`` task."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bridge.node import Node
from bridge.wiring import run_node
from core.settings import Settings
from driver import ChromiumBrowser
from kitsune.config import load_config
from messages.errors import KitsuneError
from tests.integration.fleet_nodes import sees, until
from tests.integration.serving import app_over
from tests.integration.task_fleet import AGENTS, HIT, answer, api, create, hit, open_tab, refused, sessions
from tests.nats_access import NatsAccess
from tests.site import TestSite
from tests.task_authority import ReferenceAuthority

TOKEN = f"authority-canary-{secrets.token_hex(12)}"
"""The node's credential at the authority: sent with every request, never logged."""
TIMEOUT = 3.0
"""Seconds the node gives the authority: beside `stress-ng` a request of the test's authority took over 1 s to be
handled, past its deadline (HTTP 504)."""
LEASE = 8.0
"""Seconds a task's lease lasts: long enough that a loaded machine's slow requests never outrun it mid-test."""


class _Lines(logging.Handler):
    """Every log line of the node's process, formatted (with its exception's text)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@dataclasses.dataclass(frozen=True)
class Remote:
    authority: ReferenceAuthority
    node: Node
    base: str
    logs: _Lines
    second: Node
    """A second node of the fleet, sharing the authority."""
    second_base: str


def _settings(directory: Path, authority: dict[str, Any], deny: list[str] | None = None) -> Settings:
    (directory / "kitsune.yaml").write_text(yaml.safe_dump({
        "agents": [{"name": name, "token": token} for name, token in AGENTS.items()], "caps": ["core", "automation"],
        "urls": {"deny": deny or []}, "tasks": {"lease_ttl": LEASE, "authority": authority}}))
    return load_config(directory / "kitsune.yaml", {"AUTHORITY_TOKEN": TOKEN})


@pytest.fixture(scope="module")
def remote(nats_access: NatsAccess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Remote]:
    authority = ReferenceAuthority(TOKEN)
    authority.start()
    settings = _settings(tmp_path_factory.mktemp("remote"), {"url": authority.url, "token_env": "AUTHORITY_TOKEN",
                                                             "timeout": TIMEOUT})
    logs, root = _Lines(), logging.getLogger()
    level = root.level
    root.addHandler(logs)
    root.setLevel(logging.DEBUG)
    name = f"remote-{secrets.token_hex(4)}"
    with contextlib.ExitStack() as stack:
        stack.callback(authority.stop)
        stack.callback(root.setLevel, level)
        stack.callback(root.removeHandler, logs)
        nodes = []
        for _ in range(2):
            config = nats_access.node_config(fleet=name, tasks=settings.node.tasks, step_timeout=10.0)
            nodes.append(run_node(ChromiumBrowser(), config, agent_policies=settings.agent_policies()))
            stack.callback(nodes[-1].stop)
        first, second = nodes
        until(lambda: sees(first, first.config.name, second.config.name)
              and sees(second, first.config.name, second.config.name), 10, "the nodes seeing each other")
        yield Remote(authority, first, stack.enter_context(app_over(first, settings)), logs, second,
                     stack.enter_context(app_over(second, settings)))


def _remote_task(owner: httpx.Client, remote: Remote, site: TestSite) -> tuple[int, dict[str, Any]]:
    """A new tab at the site's /clicks, and a new ``remote`` task of ``owner``'s on it."""
    tab = open_tab(owner, site.url("/clicks"), remote.node)
    return tab, create(owner, [tab], scope="remote")


@pytest.fixture
def authority(remote: Remote) -> Iterator[ReferenceAuthority]:
    """The authority up, quick and honest at the start and end of each test."""
    remote.authority.delay, remote.authority.stale = 0.0, False
    yield remote.authority
    remote.authority.delay, remote.authority.stale = 0.0, False


def test_a_remote_task_lives_at_the_authority(remote: Remote, authority: ReferenceAuthority, site: TestSite) -> None:
    s1, s2 = sessions(2)
    with api(remote.base, session=s1) as owner, api(remote.base, session=s2) as follower:
        tab, task = _remote_task(owner, remote, site)
        kept, revision = authority.records[task["id"]]
        assert (kept["scope"], kept["owner"], kept["tabs"], revision) == ("remote", s1, [tab], 1)
        assert hit(owner, tab)["status"] == "ok" and site.wait_for_count(HIT, 1) == 1
        assert (hit(follower, tab, 409)["code"], site.count(HIT)) == ("task_leased", 1)  # the authority's lease
        lease = authority.records[task["id"]][0]["lease_expires"]
        time.sleep(max(0.0, lease - LEASE / 2 + 0.3 - time.time()))  # past half the lease: the heartbeat writes
        answer(owner.post(f"/api/tasks/{task['id']}/heartbeat"))
        beat, after = authority.records[task["id"]]
        assert beat["lease_expires"] > lease and after > revision
        answer(owner.post(f"/api/tasks/{task['id']}/checkpoint", json={"summary": "hit once"}))
        assert authority.records[task["id"]][0]["checkpoint"]["summary"] == "hit once"
        assert answer(follower.get(f"/api/tasks/{task['id']}"))["task"]["state"] == "follower"
        answer(owner.post(f"/api/tasks/{task['id']}/complete", json={"summary": "done"}))
        assert authority.records[task["id"]][0]["status"] == "completed"
    assert authority.credentials and set(authority.credentials) == {f"Bearer {TOKEN}"}
    assert not [line for line in remote.logs.lines if TOKEN in line]


def test_a_slow_authority_fails_closed(remote: Remote, authority: ReferenceAuthority, site: TestSite) -> None:
    (s1,) = sessions(1)
    with api(remote.base, session=s1) as owner:
        tab, task = _remote_task(owner, remote, site)
        before = dict(authority.records)
        authority.delay = TIMEOUT + 0.5
        slow = refused(owner.post(f"/api/tasks/{task['id']}/checkpoint", json={"summary": "late"}),
                       "task_authority_unavailable")
        assert slow["retryable"] and "did not answer" in slow["error"], slow
        refused(owner.post("/api/tasks", json={"goal": "Late", "tabs": [open_tab(owner, site.url("/text"),
                                                                                   remote.node)], "scope": "remote"}),
                "task_authority_unavailable")
        assert (hit(owner, tab, 503)["code"], site.count(HIT)) == ("task_authority_unavailable", 0)
        time.sleep(authority.delay + 0.2)  # the authority handled each one late: past its deadline, nothing applied
        assert authority.records == before
    assert not [line for line in remote.logs.lines if TOKEN in line]


def test_an_authority_down_fails_closed_and_one_back_serves_again(
        remote: Remote, authority: ReferenceAuthority, site: TestSite) -> None:
    (s1,) = sessions(1)
    with api(remote.base, session=s1) as owner:
        tab, task = _remote_task(owner, remote, site)
        authority.stop()
        try:
            down = refused(owner.post(f"/api/tasks/{task['id']}/checkpoint", json={"summary": "lost"}),
                           "task_authority_unavailable")
            assert "could not be reached" in down["error"], down
            other = open_tab(owner, site.url("/text"), remote.node)
            refused(owner.post("/api/tasks", json={"goal": "Lost", "tabs": [other], "scope": "remote"}),
                    "task_authority_unavailable")
            assert (hit(owner, tab, 503)["code"], site.count(HIT)) == ("task_authority_unavailable", 0)
        finally:
            authority.start()
        assert authority.records[task["id"]][0]["checkpoint"]["summary"] == ""
        assert create(owner, [other], scope="remote")["tabs"] == [other]  # the failed creation held no tab
        assert hit(owner, tab)["status"] == "ok"


def test_a_stale_revision_is_a_conflict_and_nothing_is_written(
        remote: Remote, authority: ReferenceAuthority, site: TestSite) -> None:
    (s1,) = sessions(1)
    with api(remote.base, session=s1) as owner:
        _, task = _remote_task(owner, remote, site)
        before = authority.records[task["id"]]
        authority.stale = True
        stale = refused(owner.post(f"/api/tasks/{task['id']}/checkpoint", json={"summary": "stale"}),
                        "task_authority_conflict")
        assert stale["state"] == {"taskId": task["id"]}, stale
        refused(owner.post(f"/api/tasks/{task['id']}/complete", json={}), "task_authority_conflict")
        assert authority.records[task["id"]] == before
        authority.stale = False
        answer(owner.post(f"/api/tasks/{task['id']}/complete", json={}))


def test_two_nodes_share_one_authority(remote: Remote, authority: ReferenceAuthority, site: TestSite) -> None:
    """A task created through A is taken over, checkpointed and resumed through B, each write a compare-and-set at
    the one authority; a stale revision there is ``task_authority_conflict`` through B, and nothing is written."""
    s1, s2 = sessions(2)
    with api(remote.base, session=s1) as owner, api(remote.second_base, session=s2) as heir:
        tab, task = _remote_task(owner, remote, site)
        created = authority.records[task["id"]][1]
        assert answer(heir.get(f"/api/tasks/{task['id']}"))["task"]["state"] == "follower"  # B reads the authority
        assert (hit(heir, tab, 409)["code"], site.count(HIT)) == ("task_leased", 0)
        taken = answer(heir.post(f"/api/tasks/{task['id']}/takeover", json={"force": True}))
        kept, revision = authority.records[task["id"]]
        assert (taken["task"]["state"], kept["owner"]) == ("owner", s2) and revision > created
        assert (hit(owner, tab, 409)["code"], site.count(HIT)) == ("task_leased", 0)  # A reads it again too
        assert hit(heir, tab)["status"] == "ok" and site.wait_for_count(HIT, 1) == 1
        answer(heir.post(f"/api/tasks/{task['id']}/checkpoint", json={"summary": "hit through B"}))
        assert authority.records[task["id"]][0]["checkpoint"]["summary"] == "hit through B"
        resumed = answer(owner.get(f"/api/tasks/{task['id']}"))["task"]  # what a resume through A is given
        assert (resumed["state"], resumed["checkpoint"]["summary"]) == ("follower", "hit through B")
        before = authority.records[task["id"]]
        authority.stale = True
        for refusal in (heir.post(f"/api/tasks/{task['id']}/checkpoint", json={"summary": "stale"}),
                        owner.post(f"/api/tasks/{task['id']}/takeover", json={"force": True})):
            assert refused(refusal, "task_authority_conflict")["state"] == {"taskId": task["id"]}
        assert authority.records[task["id"]] == before  # nothing written on either failure
        authority.stale = False
        back = answer(owner.post(f"/api/tasks/{task['id']}/takeover", json={"force": True}))
        assert back["task"]["state"] == "owner" and authority.records[task["id"]][0]["owner"] == s1
        assert answer(heir.get(f"/api/tasks/{task['id']}"))["task"]["checkpoint"]["summary"] == "hit through B"


def test_a_node_without_an_authority_keeps_no_remote_task(node: Node, site: TestSite,
                                                           tmp_path: Path) -> None:
    settings = load_config(None, {"KITSUNE_AGENTS": f"alice={AGENTS['alice']}"})
    with app_over(node, settings) as base, api(base, session=sessions(1)[0]) as owner:
        tab = open_tab(owner, site.url("/text"), node)
        refused(owner.post("/api/tasks", json={"goal": "Far", "tabs": [tab], "scope": "remote"}),
                "task_authority_not_configured")
        assert not [t for t in answer(owner.get("/api/tasks"))["tasks"] if tab in t["tabs"]]


def test_an_authority_the_node_s_url_rules_deny_is_refused(tmp_path: Path) -> None:
    with pytest.raises(KitsuneError) as refusal:
        _settings(tmp_path, {"url": "http://127.0.0.1:9/", "token_env": "AUTHORITY_TOKEN"}, deny=["127.0.0.0/8"])
    assert refusal.value.code == "invalid_config" and "tasks.authority.url" in refusal.value.message
    assert TOKEN not in refusal.value.message
