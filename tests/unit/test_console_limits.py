"""The console's sign-in limit: 5 failures of an address in 5 minutes, then 429 unchecked until the window allows.

The limiter on a fake clock, then the console's routes in process (Starlette's test client over the
app's unit fake node, as tests/unit/test_app.py builds it) on the same clock: no test sleeps. Last,
the whole app: operator tokens on ``DELETE /api/tasks/{id}`` count in the same limit.
"""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from bridge.node import Node
from bridge.routes.app import create_app
from bridge.routes.console import console_routes
from bridge.routes.console_auth import COOKIE, Operators
from bridge.routes.console_limits import MAX_FAILURES, WINDOW, LoginLimiter
from core.settings import Operator
from messages.tokens import token_hash
from tests.unit.test_app import ALICE, FakeNode, config
from tests.unit.test_console_auth import PASSWORD, TOKEN, Clock

WRONG = "not-the-password-0123456789"


def test_five_failures_within_the_window_limit_a_key_until_the_oldest_is_window_old() -> None:
    clock = Clock()
    limiter = LoginLimiter(clock)
    for _ in range(MAX_FAILURES - 1):
        assert limiter.failed("a") is False
        clock.now += 10
    assert limiter.retry_after("a") is None
    assert limiter.failed("a") is True  # the fifth, 40 s after the first
    assert limiter.retry_after("a") == WINDOW - 40 and limiter.retry_after("b") is None
    clock.now += WINDOW - 40.5
    assert limiter.retry_after("a") == 1  # whole seconds, rounded up
    clock.now += 0.5
    assert limiter.retry_after("a") is None  # the first failure no longer counts
    assert limiter.failed("a") is True  # four are left in the window: one more limits again
    assert limiter.retry_after("a") == 10


def test_a_success_forgets_the_key_and_only_that_key() -> None:
    limiter = LoginLimiter(Clock())
    for _ in range(MAX_FAILURES):
        limiter.failed("a")
        limiter.failed("b")
    limiter.succeeded("a")
    assert limiter.retry_after("a") is None and limiter.retry_after("b") == WINDOW
    assert limiter.failed("a") is False


def test_memory_stays_bounded_old_keys_dropped_and_the_oldest_first_past_the_cap() -> None:
    clock = Clock()
    limiter = LoginLimiter(clock, max_keys=3)
    for key in ("a", "b", "c", "d"):
        for _ in range(MAX_FAILURES):
            limiter.failed(key)
        clock.now += 1
    assert len(limiter) == 3 and limiter.retry_after("a") is None and limiter.retry_after("b") is not None
    clock.now += WINDOW - 2.5  # b's failures passed, c's and d's not
    assert limiter.retry_after("c") is not None and len(limiter) == 2
    clock.now += 10
    assert limiter.retry_after("d") is None and len(limiter) == 0


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every secret the operators were asked about (a spy on ``Operators.named``)."""
    asked: list[str] = []
    named = Operators.named

    def spy(self: Operators, secret: str) -> str | None:
        asked.append(secret)
        return named(self, secret)

    monkeypatch.setattr(Operators, "named", spy)
    return asked


@pytest.fixture
def console(clock: Clock) -> TestClient:
    """The console's routes over the app's unit fake node, operators sre (a token) and night (a password)."""
    bridge = config(operators=(Operator("sre", token_hash(TOKEN)), Operator("night", token_hash(PASSWORD))))
    app = Starlette(routes=console_routes(cast(Node, FakeNode()), bridge, clock))
    return TestClient(app, follow_redirects=False)


def test_the_sixth_wrong_sign_in_and_a_right_one_answer_429_unchecked_until_the_window_allows(
        console: TestClient, clock: Clock, checked: list[str], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    for _ in range(MAX_FAILURES):
        assert console.post("/console/login", data={"secret": WRONG}).status_code == 403
        clock.now += 1
    for secret in (WRONG, PASSWORD):  # the sixth, then the right one
        limited = console.post("/console/login", data={"secret": secret})
        assert (limited.status_code, limited.headers["retry-after"]) == (429, str(int(WINDOW) - MAX_FAILURES))
        assert 'data-code="login_rate_limited"' in limited.text and "set-cookie" not in limited.headers
    by_token = console.get("/console/state", headers={"Authorization": f"Bearer {TOKEN}"})
    assert (by_token.status_code, by_token.json()["code"], by_token.headers["retry-after"]) == (
        429, "login_rate_limited", str(int(WINDOW) - MAX_FAILURES))
    assert checked == [WRONG] * MAX_FAILURES  # nothing checked while limited
    clock.now += WINDOW - MAX_FAILURES
    signed = console.post("/console/login", data={"secret": PASSWORD})
    assert signed.status_code == 303 and signed.headers["set-cookie"].startswith(f"{COOKIE}=")
    for _ in range(MAX_FAILURES):  # the success reset the address's count
        assert console.post("/console/login", data={"secret": WRONG}).status_code == 403
    assert console.post("/console/login", data={"secret": WRONG}).status_code == 429
    assert "console sign-ins from address:testclient refused" in caplog.text
    assert WRONG not in caplog.text and PASSWORD not in caplog.text and TOKEN not in caplog.text


def test_wrong_bearer_tokens_count_as_failed_sign_ins(console: TestClient, checked: list[str]) -> None:
    for _ in range(MAX_FAILURES):
        refused = console.get("/console/state", headers={"Authorization": f"Bearer {WRONG}"})
        assert (refused.status_code, refused.json()["code"]) == (403, "forbidden")
    limited = console.get("/console", headers={"Authorization": f"Bearer {TOKEN}"})
    assert (limited.status_code, limited.headers["retry-after"]) == (429, str(int(WINDOW)))
    assert 'data-code="login_rate_limited"' in limited.text
    assert console.post("/console/login", data={"secret": TOKEN}).status_code == 429
    assert checked == [WRONG] * MAX_FAILURES


class RecordedDeletes:
    """The node's tasks as ``DELETE /api/tasks/{id}`` uses them: each delete recorded, by whom."""

    def __init__(self) -> None:
        self.by: list[str] = []

    async def delete(self, agent: str | None, task: str, *, expire: bool, by: str) -> dict[str, Any]:
        self.by.append(by)
        return {"id": task, "status": "revoked"}


def bridge_app(operators: tuple[Operator, ...]) -> tuple[TestClient, RecordedDeletes]:
    """The whole bridge app over the unit fake node (its tasks recorded), with ``operators``."""
    node, tasks = FakeNode(), RecordedDeletes()
    node.task_service = tasks
    return TestClient(create_app(cast(Node, node), config(operators=operators)), follow_redirects=False), tasks


def delete_task(client: TestClient, token: str) -> Any:
    return client.delete("/api/tasks/t-1", headers={"Authorization": f"Bearer {token}"})


def test_wrong_operator_tokens_on_delete_tasks_count_against_the_console_s_limit(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    client, tasks = bridge_app((Operator("sre", token_hash(TOKEN)), Operator("night", token_hash(PASSWORD))))
    assert delete_task(client, TOKEN).status_code == 200
    for _ in range(MAX_FAILURES):
        refused = delete_task(client, WRONG)
        assert (refused.status_code, refused.json()["code"]) == (401, "unauthorized")
    limited = delete_task(client, PASSWORD)  # right, but unchecked
    assert (limited.status_code, limited.json()["code"]) == (429, "login_rate_limited")
    assert limited.headers["retry-after"] == str(int(WINDOW))
    assert client.post("/console/login", data={"secret": PASSWORD}).status_code == 429  # one count per node
    assert delete_task(client, ALICE).status_code == 200  # an agent's token is not an operator's guess
    assert tasks.by == ["operator:sre", "alice"]
    assert "operator tokens from address:testclient refused" in caplog.text
    assert WRONG not in caplog.text and PASSWORD not in caplog.text and TOKEN not in caplog.text


def test_with_no_operators_a_wrong_token_on_delete_tasks_is_401_and_nothing_is_counted() -> None:
    client, tasks = bridge_app(())
    for _ in range(MAX_FAILURES + 1):
        assert delete_task(client, WRONG).status_code == 401
    assert delete_task(client, ALICE).status_code == 200 and tasks.by == ["alice"]
