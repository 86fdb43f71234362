"""The HTTP app in process (Starlette's test client) over a fake node: routes' shapes and errors.

The fake node runs calls and resumes on the pure core wired with fakes (``World``), so the
checkpoint errors are the core's own; the statuses are those of ``messages.errors.ERROR_CODES``
and the spec (Errors). The live-process tests (tests/integration/test_http.py) keep the real node.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any, cast

import pytest
from starlette.testclient import TestClient

from actors.bus import LocalBus
from actors.call_actor import ResumeCall, RunCall
from bridge.live.views import LiveViews, Pages
from bridge.node import Node
from bridge.routes.app import create_app
from bridge.routes.groups import grouped
from core.calls import CallResponse
from core.policy import USER, ConfirmTokens, Policy, TabOwners
from core.settings import Agent, HttpConfig, LiveViewConfig, Operator, Settings
from kitsune import app as kitsune_app
from messages.commands import Command
from messages.errors import ERROR_CODES, KitsuneError
from messages.requests import Subjects
from messages.results import Failed, Failure, HeldForApproval, Outcome, Unknown
from messages.schema import batch_schema, command_schema, parallel_schema
from messages.tokens import token_hash
from tests.unit.fakes import World
from tests.unit.helpers import click

ALICE = "alice-token-0123456789"
BOB = "bob-token-0123456789ab"
SCRAPE = "scrape-token-0123456789"


class FakeMetrics:
    """What the app's metrics middleware uses of ``NodeMetrics``: it records the requests."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, int]] = []

    def http_request(self, route: str, method: str, status: int, seconds: float) -> None:
        self.requests.append((route, method, status))

    def exposition(self) -> bytes:
        return b"# fake exposition\n"


class FakeAuditor:
    """Numbers the takeovers as the audit log numbers its entries."""

    def __init__(self, ids: Iterator[int]) -> None:
        self._ids = ids

    def takeover(self, tab: int) -> int:
        return next(self._ids)


class FakeSessions:
    """The node's sessions as the tab list reads them: none, and no tombstone."""

    def listing(self, agent: str) -> dict[str, Any]:
        return {"sessions": [], "tombstones": []}


class FakeMember:
    """The node's part in its fleet as the app uses it: each agent's current tab, a fleet of one."""

    def __init__(self) -> None:
        self.currents: dict[str, int] = {}

    def current(self, agent: str) -> int | None:
        return self.currents.get(agent)

    async def set_current(self, agent: str, tab: int | None) -> None:
        if tab is None:
            self.currents.pop(agent, None)
        else:
            self.currents[agent] = tab


async def _nowhere(tab: int) -> str:
    raise KitsuneError("unknown_tab", f"No open tab {tab}")


class FakeNode:
    """What ``create_app`` uses of ``Node``: calls and resumes run on ``World``, actions on its driver."""

    def __init__(self) -> None:
        self.world = World()
        self.owners = TabOwners()
        self.metrics = FakeMetrics()
        self.workflows = None
        self.parts = {"nats": True, "browser": True}
        self.acted: list[tuple[str, Command, int | None, str | None]] = []
        self._ids = itertools.count(500)
        self.policy = Policy()
        """Every agent's policy (its caps gate the routes)."""
        self.sessions = FakeSessions()
        self.member = FakeMember()
        self.browser = cast(Pages, None)
        """No browser: the console's thumbnails take it (no test here asks for one)."""
        self.confirms = ConfirmTokens()
        self.tasks: Any = None
        self.task_service: Any = None
        """No tasks: no test here reaches a task route (tests/unit/test_console_limits.py gives its own)."""
        self.held_takeovers: Any = None
        self.live = LiveViews("fake", self.browser, LocalBus(), Subjects(), self.owners, LiveViewConfig(),
                              node_of=_nowhere, policy_of=self.policy_of, auditor=cast(Any, None))
        """Mounts the Live View routes (no test here opens one: tests/integration/test_live_view.py does)."""

    def policy_of(self, agent: str | None) -> Policy:
        return self.policy

    async def run_async(self, message: RunCall | ResumeCall) -> CallResponse:
        calls = self.world.calls
        if isinstance(message, RunCall):
            return calls.run(message.spec, message.workflow, message.agent)
        request = message.request
        return calls.resume(request.call, request.resume_token, request.observed, request.agent)

    async def act(self, agent: str, command: Command, tab: int | None,
                  confirm_token: str | None = None) -> tuple[Outcome, int]:
        self.acted.append((agent, command, tab, confirm_token))
        return self.world.driver.execute(command, tab, 1.0), next(self._ids)

    async def describe_tabs(self) -> list[dict[str, Any]]:
        owners = {tab: self.owners.owner(tab) for tab in self.world.driver.tabs}
        return [{"tabId": tab, "url": f"https://example.org/{tab}", "title": f"tab {tab}",
                 "owner": None if owners[tab] == USER else owners[tab]} for tab in sorted(owners)]

    async def take_over(self, tab: int, agent: str) -> str:
        return self.owners.take_over(tab, agent)

    async def open_tab_ids(self, wanted: frozenset[int] = frozenset()) -> frozenset[int]:
        return frozenset(self.world.driver.tabs)

    async def needs_user(self, tab: int) -> dict[str, Any]:
        return {"needsUser": False}

    def healthy(self) -> dict[str, bool]:
        return dict(self.parts)

    def auditor(self, agent: str | None) -> FakeAuditor:
        return FakeAuditor(self._ids)


def config(caps: frozenset[str] = frozenset({"core", "automation"}), max_body_bytes: int = 1_048_576,
           operators: tuple[Operator, ...] = ()) -> Settings:
    """Agents alice and bob, the scrape token, and what a test sets."""
    agents = (Agent("alice", token_hash(ALICE)), Agent("bob", token_hash(BOB)))
    return Settings(agents=agents, operators=operators, policy=Policy(caps=caps),
                    http=HttpConfig(max_body_bytes=max_body_bytes, metrics_token_sha256=token_hash(SCRAPE)))


@pytest.fixture
def node() -> FakeNode:
    return FakeNode()


def client_of(node: FakeNode, bridge: Settings, token: str | None = ALICE) -> TestClient:
    """A test client of the app over ``node`` (cast: the app takes a Node, the fake has what it uses)."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    node.policy = bridge.policy  # as ``kitsune serve`` gives the node its configuration's policy
    return TestClient(create_app(cast(Node, node), bridge), headers=headers)


@pytest.fixture
def alice(node: FakeNode) -> TestClient:
    return client_of(node, config())


def error_of(answer: Any) -> tuple[int, str]:
    """The status and code of an error answer, after checking the status is its code's."""
    body = answer.json()
    assert set(body) <= {"error", "code", "retryable", "state"} and isinstance(body["error"], str)
    assert answer.status_code == ERROR_CODES[body["code"]].http_status
    assert body["retryable"] is ERROR_CODES[body["code"]].retryable
    return answer.status_code, body["code"]


# --- the caller ---------------------------------------------------------------------------------


@pytest.mark.parametrize("token", [None, "Basic " + ALICE, "Bearer wrong-token-0123456789", "Bearer "])
def test_every_route_but_healthz_answers_401_without_a_valid_bearer_token(node: FakeNode, token: str | None) -> None:
    headers = {"Authorization": token} if token is not None else {}
    client = TestClient(create_app(cast(Node, node), config()), headers=headers)
    reads = {"/api/tabs", "/api/needs-user", "/api/sessions", "/api/schema", "/api/caps"}
    app = create_app(cast(Node, node), config())
    for method, path in [*(("POST", path) for path in grouped(app.routes) if path not in ("/api/needs-user",
                                                                                          "/api/sessions")),
                         *(("GET", path) for path in sorted(reads)), ("DELETE", "/api/sessions/default")]:
        answer = client.request(method, path)
        assert error_of(answer) == (401, "unauthorized"), (method, path)
        assert answer.headers["www-authenticate"].startswith("Bearer"), (method, path)  # what to send
    assert client.get("/healthz").status_code == 200
    assert node.world.driver.sent == [] and node.acted == []


def test_the_authorization_header_given_twice_answers_400_duplicate_header(node: FakeNode) -> None:
    client = client_of(node, config(), token=None)
    answer = client.get("/api/caps", headers=[("Authorization", f"Bearer {ALICE}"),
                                              ("Authorization", f"Bearer {ALICE}")])
    assert error_of(answer) == (400, "duplicate_header")
    assert answer.json()["state"] == {"header": "authorization"}


def test_the_scrape_token_reads_metrics_only(node: FakeNode) -> None:
    scraper = client_of(node, config(), token=SCRAPE)
    assert scraper.get("/metrics").text == "# fake exposition\n"
    assert error_of(scraper.get("/api/caps")) == (401, "unauthorized")
    assert client_of(node, config(), token=ALICE).get("/metrics").status_code == 200
    refused = client_of(node, config(), token=None).get("/metrics")
    assert error_of(refused) == (401, "unauthorized") and refused.headers["www-authenticate"].startswith("Bearer")


def test_an_unknown_route_answers_404_and_a_wrong_method_405(alice: TestClient, node: FakeNode) -> None:
    assert error_of(alice.get("/api/nothing-here")) == (404, "route_not_found")  # JSON, like every error
    assert error_of(alice.get("/api/batch")) == (405, "method_not_allowed")
    assert [status for _, _, status in node.metrics.requests] == [404, 405]


def test_routes_outside_the_enabled_groups_answer_404_capability_disabled(node: FakeNode) -> None:
    core_only = client_of(node, config(caps=frozenset({"core"})))
    for path in ("/api/batch", "/api/parallel", "/api/workflow"):
        answer = core_only.post(path, json={"commands": [click("#a")]})
        assert error_of(answer) == (404, "capability_disabled")
        assert "automation" in answer.json()["error"]
    assert core_only.post("/api/resume", json={"call": 1, "resume_token": "x"}).json()["code"] != "capability_disabled"
    assert node.world.driver.sent == []


def test_the_app_factory_on_top_adds_mcp_behind_the_same_bearer_tokens(node: FakeNode) -> None:
    app = kitsune_app.create_app(cast(Node, node), config())
    assert [getattr(route, "path", None) for route in app.routes][-1] == "/mcp"
    refused = TestClient(app).post("/mcp", json={})
    assert error_of(refused) == (401, "unauthorized") and refused.headers["www-authenticate"].startswith("Bearer")


# --- the rest: schema, caps, health ---------------------------------------------------------------


def test_schema_publishes_the_command_batch_and_parallel_schemas(alice: TestClient) -> None:
    answer = alice.get("/api/schema")
    assert answer.headers["content-type"] == "application/json"
    assert answer.json() == {"command": command_schema(), "batch": batch_schema(), "parallel": parallel_schema()}


@pytest.mark.parametrize(("caps", "routes"), [
    ({"core"}, ["/api/act", "/api/live/handbacks", "/api/needs-user", "/api/resume", "/api/sessions", "/api/tabs",
                "/api/tasks"]),
    ({"automation"}, ["/api/batch", "/api/parallel", "/api/resume", "/api/workflow"]),
])
def test_caps_lists_the_enabled_groups_and_their_routes(node: FakeNode, caps: set[str], routes: list[str]) -> None:
    assert client_of(node, config(caps=frozenset(caps))).get("/api/caps").json() == {
        "caps": sorted(caps), "routes": routes}


def test_healthz_needs_no_token_and_answers_503_when_a_part_is_down(node: FakeNode) -> None:
    anyone = client_of(node, config(), token=None)
    assert (anyone.get("/healthz").status_code, anyone.get("/healthz").json()) == (
        200, {"ok": True, "nats": True, "browser": True})
    node.parts["browser"] = False
    assert (anyone.get("/healthz").status_code, anyone.get("/healthz").json()) == (
        503, {"ok": False, "nats": True, "browser": False})


# --- bodies ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("content", "headers", "code"), [
    (b'{"commands": []', {"content-type": "application/json"}, "invalid_json"),
    (b'{"commands": [], "commands": []}', {"content-type": "application/json"}, "duplicate_key"),
    (b"[]", {"content-type": "application/json"}, "invalid_call"),
    (b'{"commands": [{"action": "title"}]}', {"content-type": "text/plain"}, "invalid_content_type"),
    (b'{"commands": [{"action": "title"}]}', {}, "invalid_content_type"),
])
def test_a_body_that_is_not_one_json_object_answers_400(
        alice: TestClient, node: FakeNode, content: bytes, headers: dict[str, str], code: str) -> None:
    assert error_of(alice.post("/api/batch", content=content, headers=headers)) == (400, code)
    assert node.world.driver.sent == []


def test_a_body_over_the_limit_answers_413_declared_or_streamed(node: FakeNode) -> None:
    client = client_of(node, config(max_body_bytes=64))
    big = b'{"commands": [{"action": "title", "label": "' + b"x" * 100 + b'"}]}'
    answer = client.post("/api/batch", content=big, headers={"content-type": "application/json"})
    assert error_of(answer) == (413, "body_too_large")
    assert answer.json()["state"] == {"limit": 64}
    streamed = client.post("/api/batch", content=iter([big[:40], big[40:]]),
                           headers={"content-type": "application/json"})
    assert error_of(streamed) == (413, "body_too_large")
    assert node.world.driver.sent == []


@pytest.mark.parametrize(("command", "code", "path"), [
    ({"action": "clickk", "selector": "#hit"}, "unknown_action", "1"),
    ({"action": "click", "selector": 5}, "invalid_parameter", "1"),
    ({"action": "click", "selector": "${$7.text}"}, "bad_reference", "1"),
    ({"action": "click", "selector": "#hit", "tabId": 99}, "unknown_tab", "1"),
    ({"action": "sequence", "steps": [{"action": "title"}, {"action": "click"}]}, "missing_parameter", "1.1"),
])
def test_a_bad_command_answers_400_with_its_code_and_path_and_nothing_is_sent(
        alice: TestClient, node: FakeNode, command: dict[str, Any], code: str, path: str) -> None:
    answer = alice.post("/api/batch", json={"commands": [click("#a"), command], "tabId": 1})
    assert error_of(answer) == (400, code)
    assert answer.json()["state"]["path"] == path
    assert node.world.driver.sent == []


def test_unknown_fields_answer_400_unknown_parameter_naming_the_field(alice: TestClient) -> None:
    cases: list[tuple[str, dict[str, Any]]] = [
        ("/api/batch", {"commands": [click("#a")], "tabid": 1}),
        ("/api/resume", {"call": 1, "resume_token": "x", "observe": {}}),
        ("/api/act", {"command": click("#a"), "tab": 1}),
        ("/api/workflow", {"workflow": "w", "vars": {}}),
        ("/api/tabs", {"op": "select", "tabId": 1, "url": "x"}),
    ]
    for path, body in cases:
        answer = alice.post(path, json=body)
        assert error_of(answer) == (400, "unknown_parameter"), path
        assert answer.json()["state"]["param"] in body, path


# --- container calls and resume -------------------------------------------------------------------


def test_a_batch_that_finished_ok_answers_results_progress_status_summary_only(alice: TestClient) -> None:
    answer = alice.post("/api/batch", json={"commands": [click("#a"), {"action": "pageText"}], "tabId": 1})
    assert answer.status_code == 200
    body = answer.json()
    assert set(body) == {"results", "progress", "status", "summary"}
    assert body["status"] == "ok" and [p["status"] for p in body["progress"]] == ["ok", "ok"]


def test_a_parallel_call_answers_one_progress_list_per_sequence(alice: TestClient) -> None:
    answer = alice.post("/api/parallel", json={"sequences": [[click("#a", tab=1)], [click("#b", tab=2)]]})
    assert answer.status_code == 200
    assert answer.json()["status"] == "ok"
    assert [len(s) for s in answer.json()["progress"][0]["sequences"]] == [1, 1]


def test_a_call_that_did_not_finish_ok_answers_call_and_resume_token_and_resume_follows_the_spec(
        alice: TestClient, node: FakeNode) -> None:
    node.world.driver.on("#b", "unknown")
    first = alice.post("/api/batch", json={"commands": [click("#a"), click("#b")], "tabId": 1}).json()
    assert first["status"] == "unknown" and isinstance(first["call"], int) and first["resume_token"]

    required = alice.post("/api/resume", json={"call": first["call"], "resume_token": first["resume_token"]})
    assert error_of(required) == (400, "observed_required")
    assert required.json()["state"]["steps"][0]["step"] == "1"
    wrong = alice.post("/api/resume", json={"call": first["call"], "resume_token": "not-the-token"})
    assert error_of(wrong) == (403, "resume_token_invalid")
    unknown = alice.post("/api/resume", json={"call": first["call"] + 7, "resume_token": first["resume_token"]})
    assert error_of(unknown) == (404, "checkpoint_not_found")

    done = alice.post("/api/resume", json={"call": first["call"], "resume_token": first["resume_token"],
                                           "observed": {"1": "applied"}})
    assert done.status_code == 200 and done.json()["status"] == "ok"
    assert "resume_token" not in done.json()
    again = alice.post("/api/resume", json={"call": first["call"], "resume_token": first["resume_token"]})
    assert error_of(again) == (404, "checkpoint_not_found")
    assert node.world.driver.writes_sent("#b") == 1


def test_resume_inputs_of_the_wrong_type_answer_400_invalid_parameter(alice: TestClient) -> None:
    for body, param in [({"call": "1", "resume_token": "x"}, "call"), ({"call": 1, "resume_token": 5}, "resume_token")]:
        answer = alice.post("/api/resume", json=body)
        assert error_of(answer) == (400, "invalid_parameter")
        assert answer.json()["state"]["param"] == param


def test_a_workflow_on_a_node_without_a_workflow_directory_answers_404_workflow_not_found(
        alice: TestClient) -> None:
    assert error_of(alice.post("/api/workflow", json={"workflow": "checkout"})) == (404, "workflow_not_found")


# --- tabs and direct actions ----------------------------------------------------------------------


def test_tabs_open_select_list_and_close_answer_their_shapes(alice: TestClient, node: FakeNode) -> None:
    opened = alice.post("/api/tabs", json={"op": "open", "url": "https://example.org/"}).json()
    assert opened["status"] == "ok" and opened["ok"] is True and isinstance(opened["call"], int)
    tab = opened["tabId"]
    listed = alice.get("/api/tabs").json()
    assert listed["current"] == tab
    assert {t["tabId"]: (t["owner"], t["current"]) for t in listed["tabs"]}[tab] == ("user", True)
    assert alice.post("/api/tabs", json={"op": "select", "tabId": 1}).json() == {"ok": True, "tabId": 1}
    assert alice.get("/api/tabs").json()["current"] == 1
    closed = alice.post("/api/tabs", json={"op": "close", "tabId": 1}).json()
    assert (closed["status"], closed["ok"]) == ("ok", True)
    assert alice.get("/api/tabs").json()["current"] is None
    assert [command.action for _, command, _, _ in node.acted] == ["newTab", "closeTab"]


def test_a_takeover_answers_the_previous_owner_and_its_audit_call(node: FakeNode) -> None:
    node.owners.give(2, "bob")
    alice = client_of(node, config())
    taken = alice.post("/api/tabs", json={"op": "takeover", "tabId": 2}).json()
    assert taken["previous"] == "agent" and taken["ok"] is True and isinstance(taken["call"], int)
    assert node.owners.owner(2) == "alice"
    assert client_of(node, config(), token=BOB).get("/api/tabs").json()["tabs"][1]["owner"] == "agent"


@pytest.mark.parametrize(("body", "code"), [
    ({"op": "open", "url": "x", "confirm_token": 5}, "invalid_parameter"),
    ({"op": "shred", "tabId": 1}, "invalid_parameter"),
    ({"op": "close"}, "missing_parameter"),
    ({"op": "select", "tabId": True}, "invalid_parameter"),
    ({"op": "close", "tabId": 99}, "unknown_tab"),
])
def test_bad_tab_operations_answer_400(alice: TestClient, node: FakeNode, body: dict[str, Any], code: str) -> None:
    answer = alice.post("/api/tabs", json=body)
    assert error_of(answer) == (400, code)
    assert answer.json()["state"]["path"] == ""
    assert node.acted == []


def test_needs_user_answers_for_an_open_tab_and_400_otherwise(alice: TestClient) -> None:
    assert alice.get("/api/needs-user", params={"tabId": "2"}).json() == {"tabId": 2, "needsUser": False}
    assert error_of(alice.get("/api/needs-user")) == (400, "missing_parameter")
    assert error_of(alice.get("/api/needs-user", params={"tabId": "x"})) == (400, "invalid_parameter")
    assert error_of(alice.get("/api/needs-user", params={"tabId": "99"})) == (400, "unknown_tab")


@pytest.mark.parametrize(("answer", "status", "fields"), [
    ("ok", "ok", {"ok": True}),
    ("warn", "ok", {"ok": True, "warning": "the page looks different than expected"}),
    ("fail", "failed", {"code": "not_found", "retryable": False}),
    ("unknown", "unknown", {"code": "navigated", "retryable": False}),
    ("hold", "held", {"code": "needs_user", "retryable": False}),
])
def test_a_direct_action_answers_its_outcome_with_status_and_call(
        alice: TestClient, node: FakeNode, answer: str, status: str, fields: dict[str, Any]) -> None:
    node.world.driver.on("#a", answer)
    response = alice.post("/api/act", json={"command": click("#a", tab=1), "confirm_token": "c"})
    body = response.json()
    assert response.status_code == (200 if status == "ok" else ERROR_CODES[body["code"]].http_status)
    assert (body["status"], isinstance(body["call"], int)) == (status, True)
    assert fields.items() <= body.items()
    assert node.acted[0][2:] == (1, "c")


_DIRECT_ROUTES: list[tuple[str, dict[str, Any]]] = [
    ("/api/act", {"command": click("#a", tab=1)}),
    ("/api/tabs", {"op": "open", "url": "https://example.org/"}),
    ("/api/tabs", {"op": "close", "tabId": 1}),
]
_REFUSALS: list[Outcome] = [
    Failed(Failure("Session shop is closed", "session_expired", False, {"session": "shop"})),
    Failed(Failure("Task t-1 holds tab 1", "task_leased", False, {"tabId": 1})),
    Failed(Failure("Tab 1 is owned by another agent", "tab_owned", False, {"tabId": 1})),
    Failed(Failure("URL refused by policy", "url_denied", False)),
    Failed(Failure("Read-only mode", "read_only", False)),
    Unknown(Failure("Command timed out after 30s", "timeout", False)),
    HeldForApproval(Failure("The action needs approval", "needs_user", False, {"confirm_token": "t"})),
    Failed(Failure("not registered", "no_such_code_anywhere", False)),
]


@pytest.mark.parametrize(("path", "body"), _DIRECT_ROUTES)
@pytest.mark.parametrize("outcome", _REFUSALS, ids=lambda o: o.failure.code)
def test_every_direct_route_answers_an_error_with_its_codes_status(
        alice: TestClient, node: FakeNode, monkeypatch: pytest.MonkeyPatch, path: str, body: dict[str, Any],
        outcome: Outcome) -> None:
    async def refused(agent: str, command: Command, tab: int | None, token: str | None = None) -> tuple[Outcome, int]:
        return outcome, 77
    monkeypatch.setattr(node, "act", refused)
    answer = alice.post(path, json=body)
    code = answer.json()["code"]
    assert code == outcome.failure.code  # type: ignore[union-attr]
    assert answer.status_code == (ERROR_CODES[code].http_status if code in ERROR_CODES else 500), (path, code)
    assert answer.status_code != 200 and answer.json()["call"] == 77


def test_a_direct_action_runs_on_the_current_tab_and_refuses_what_a_batch_would(
        alice: TestClient, node: FakeNode) -> None:
    assert error_of(alice.post("/api/act", json={"command": click("#a")})) == (400, "missing_parameter")
    alice.post("/api/tabs", json={"op": "select", "tabId": 2})
    assert alice.post("/api/act", json={"command": click("#a")}).json()["status"] == "ok"
    assert node.acted[-1][2] == 2
    # A reference is refused by parsing the command as a one-command batch: its path is that batch's "0".
    for command, code, path in [({"action": "sequence", "steps": [click("#a")]}, "invalid_call", "command"),
                                (click("${$0.text}"), "bad_reference", "0"),
                                (click("#a", tab=99), "unknown_tab", "command")]:
        answer = alice.post("/api/act", json={"command": command})
        assert error_of(answer) == (400, code)
        assert answer.json()["state"]["path"] == path
    assert len(node.acted) == 1


# --- numbers: one strict reading on every route ---------------------------------------------------

_BAD_NUMBERS: list[Any] = [2**64, 1.0, -1, 10**30, "1", True, 2**53]
"""A tab id past JSON's exact integers, a number with a fraction (tab 1 exists: it was taken as tab 1 and
sent), a negative one, a 30-digit one, a string, a boolean, one past the largest tab id."""


def _number_routes(bad: Any) -> list[tuple[str, str, dict[str, Any], str]]:
    """(method, path, body or query, the parameter named) of every route taking a number, with ``bad`` in it."""
    return [
        ("POST", "/api/batch", {"commands": [click("#a")], "tabId": bad}, "tabId"),
        ("POST", "/api/batch", {"commands": [click("#a", tab=bad)]}, "tabId"),
        ("POST", "/api/batch", {"commands": [{"action": "broadcast", "tabIds": [1, bad],
                                              "command": {"action": "title"}}]}, "tabIds"),
        ("POST", "/api/parallel", {"sequences": [[click("#a", tab=bad)]]}, "tabId"),
        ("POST", "/api/act", {"command": click("#a", tab=bad)}, "tabId"),
        *(("POST", "/api/tabs", {"op": op, "tabId": bad}, "tabId") for op in ("close", "select", "takeover",
                                                                             "live_view")),
        ("GET", "/api/needs-user", {"tabId": str(bad)}, "tabId"),
        ("GET", "/api/live/handbacks", {"tabId": str(bad)}, "tabId"),
        ("GET", "/api/live/handbacks", {"tabId": "1", "since": str(bad)}, "since"),
    ]


@pytest.mark.parametrize("bad", _BAD_NUMBERS, ids=repr)
def test_every_route_reads_a_number_strictly_400_invalid_parameter_and_nothing_is_sent(
        alice: TestClient, node: FakeNode, bad: Any) -> None:
    for method, path, given, param in _number_routes(bad):
        if method == "GET" and isinstance(bad, bool | str):
            continue  # a query is text: "True" and "1" are read in test_query_numbers_are_digits_alone
        answer = alice.get(path, params=given) if method == "GET" else alice.post(path, json=given)
        assert answer.status_code == 400, (path, given, answer.text)
        body = answer.json()
        assert (body["code"], body["state"]["param"]) == ("invalid_parameter", param), (path, given)
        assert "path" in body["state"]
    assert node.acted == [] and node.world.driver.sent == []


@pytest.mark.parametrize("text", ["+1", " 1", "1.0", "1e0", "0x1", "-0", "\uff11", "9" * 30, "True", ""])
def test_query_numbers_are_digits_alone(alice: TestClient, text: str) -> None:
    for path, params in [("/api/needs-user", {"tabId": text}), ("/api/live/handbacks", {"tabId": text}),
                         ("/api/live/handbacks", {"tabId": "1", "since": text}),
                         ("/api/live/handbacks", {"tabId": "1", "since": "0", "wait": text + "s"})]:
        answer = alice.get(path, params=params)
        assert error_of(answer) == (400, "invalid_parameter"), (path, params, answer.text)
    assert error_of(alice.get("/api/needs-user", params=[("tabId", "1"), ("tabId", "1")])) == (
        400, "invalid_parameter")
