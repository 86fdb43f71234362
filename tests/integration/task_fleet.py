"""The fleet the task tests run on, and their helpers: two in-process nodes of one fleet on the real
nats-server, each with a real Chromium and the real app over HTTP (leases of 30 s: no owner loses its lease
between two requests however loaded the machine; a test whose owner must lose it ends it with :func:`lapse`).

One fleet serves the session's task tests (a plugin of tests/conftest.py, whose ``ONE_WORKER`` runs their files on
one xdist worker): each test works in sessions of its own (:func:`sessions`), so none sees another's tasks; the
agent ``dave`` is the quota test's alone (``test_tasks.py``), whose count of his tasks starts at none."""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from bridge.node import Node
from bridge.wiring import run_node
from core.settings import Settings, TaskConfig
from driver import ChromiumBrowser
from kitsune.config import load_config
from messages.errors import ERROR_CODES
from tests.integration.fleet_nodes import sees, until
from tests.integration.serving import TOKENS, app_over
from tests.nats_access import NatsAccess

LEASE = 30.0
"""Seconds a task's lease lasts on these nodes."""
AGENTS = {**TOKENS, "carol": "carol-token-0123456789abcdef", "dave": "dave-token-0123456789abcdef",
          "erin": "erin-token-0123456789abcdef"}
OPERATOR = "operator-token-0123456789abcdef"
HIT = "POST /clicks/hit"
SLOW = "POST /slow"
SLOW_WRITE = "fetch('/slow', {method: 'POST'}).then(() => true)"
"""A write the site holds (hold_slow) until the test lets it go."""
LOST = "session lost mid-execution"


@dataclass(frozen=True)
class Fleet:
    """Two nodes of one fleet, each served over HTTP."""

    name: str
    nodes: tuple[Node, Node]
    bases: tuple[str, str]


def _config(directory: Path) -> Settings:
    """Agents alice and bob, carol who asks before acting, erin whose force takeovers wait for a person, and an
    operator."""
    own: dict[str, dict[str, Any]] = {"carol": {"ask_before_act": True}, "erin": {"tasks": {"takeover": "ask"}}}
    agents = [{"name": name, "token": token, **own.get(name, {})} for name, token in AGENTS.items()]
    (directory / "kitsune.yaml").write_text(yaml.safe_dump({
        "agents": agents, "caps": ["core", "automation"], "operators": [{"name": "sre", "token": OPERATOR}]}))
    return load_config(directory / "kitsune.yaml", {})


@pytest.fixture(scope="session")
def fleet(nats_access: NatsAccess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    config, name = _config(tmp_path_factory.mktemp("tasks")), f"tasks-{secrets.token_hex(4)}"
    with contextlib.ExitStack() as stack:
        nodes = []
        for _ in range(2):
            node = run_node(ChromiumBrowser(), nats_access.node_config(fleet=name, tasks=TaskConfig(LEASE),
                                                                       step_timeout=10.0),
                            agent_policies=config.agent_policies())
            stack.callback(node.stop)
            nodes.append(node)
        first, second = nodes
        until(lambda: sees(first, first.config.name, second.config.name)
              and sees(second, first.config.name, second.config.name), 10, "the nodes seeing each other")
        bases = (stack.enter_context(app_over(first, config)), stack.enter_context(app_over(second, config)))
        yield Fleet(name, (first, second), bases)


def lapse(node: Node, task: str) -> None:
    """``task``'s lease run out now, as ``LEASE`` seconds of its owner's silence would have it: its end moved to
    this instant in the store of ``node`` (the node of its tabs), nothing else of it changed; readers then
    derive it expired, and the sweeper writes it so, as for any lease that ran out."""
    async def ended() -> None:
        await node.tasks.store.change(task, lambda t: dataclasses.replace(t, lease_expires=min(t.lease_expires,
                                                                                               time.time())))
    node.io.run(ended(), timeout=30)


def sessions(count: int) -> list[str]:
    """Names of ``count`` new sessions (each test its own: a session's tasks follow all its calls)."""
    return [f"s{i}-{secrets.token_hex(4)}" for i in range(count)]


@contextlib.contextmanager
def api(base: str, agent: str = "alice", session: str | None = None,
        token: str | None = None) -> Iterator[httpx.Client]:
    """A client of ``agent`` (or of ``token``) naming ``session`` in every request (none: no header)."""
    headers = {"Authorization": f"Bearer {token or AGENTS[agent]}",
               **({"X-Kitsune-Session": session} if session else {})}
    with httpx.Client(base_url=base, headers=headers, timeout=60) as client:
        yield client


def answer(response: httpx.Response, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    return body


def refused(response: httpx.Response, code: str) -> dict[str, Any]:
    """The error body of a refused request: ``code`` with its own HTTP status."""
    body = answer(response, ERROR_CODES[code].http_status)
    assert body["code"] == code, body
    return body


def open_tab(client: httpx.Client, url: str, node: Node, **session: str) -> int:
    """A new tab at ``url`` on ``node`` (in the browser ``session`` given); its id."""
    opened = answer(client.post("/api/tabs", json={"op": "open", "url": url, "node": node.config.name, **session}))
    assert opened["status"] == "ok", opened
    tab: int = opened["tabId"]
    return tab


def approved_tab(client: httpx.Client, url: str, node: Node) -> int:
    """A new tab of an agent that asks before acting: held first (403 ``needs_user``), then opened with the
    hold's confirm token."""
    body = {"op": "open", "url": url, "node": node.config.name}
    asked = answer(client.post("/api/tabs", json=body), 403)
    assert (asked["status"], asked["code"]) == ("held", "needs_user"), asked
    opened = answer(client.post("/api/tabs", json={**body, "confirm_token": asked["state"]["confirm_token"]}))
    assert opened["status"] == "ok", opened
    tab: int = opened["tabId"]
    return tab


def create(client: httpx.Client, tabs: list[int], goal: str = "Hit the button", **options: Any) -> dict[str, Any]:
    """A new task of the client's session on ``tabs``; its view."""
    created = answer(client.post("/api/tasks", json={"goal": goal, "tabs": tabs, **options}), 201)
    assert created["ok"] and created["task"]["state"] == "owner" and created["task"]["tabs"] == tabs, created
    task: dict[str, Any] = created["task"]
    return task


def hit(client: httpx.Client, tab: int, status: int = 200, **extra: Any) -> dict[str, Any]:
    """A direct click on the /clicks page's #hit (one POST /clicks/hit when it runs), answered with ``status``
    (a direct route answers an error outcome with its code's status: ``task_leased`` 409...)."""
    return answer(client.post("/api/act", json={"command": {"action": "click", "tabId": tab, "selector": "#hit"},
                                                **extra}), status)


def state(client: httpx.Client, task: str) -> str:
    got: str = answer(client.get(f"/api/tasks/{task}"))["task"]["state"]
    return got


def expire(client: httpx.Client, task: str) -> None:
    ended = answer(client.delete(f"/api/tasks/{task}", params={"expire": "true"}))
    assert ended["task"]["state"] == "expired" and ended["task"]["status"] == "expired", ended
