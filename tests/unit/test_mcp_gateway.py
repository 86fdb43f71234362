"""The MCP gateway's rules on a scripted bridge: direct-call checkpoints (capacity, expiry, tokens),
which stops keep one, waits and their caps, confirm-token continuations. No network, no browser."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

import mcp_types as types
import pytest

from core.calls import last_opened_tab
from mcp_gateway import _pages, _progress
from mcp_gateway._bridge import Bridge
from mcp_gateway._caller import Caller
from mcp_gateway._checkpoints import Continuations, DirectCheckpoint, DirectCheckpoints
from mcp_gateway._direct import DirectCalls, _describe, commands_of
from mcp_gateway._handshake import tools_result
from mcp_gateway._pages import PAGE_STATE_CHECKS
from mcp_gateway._tools import TOOLS, enabled_tools
from mcp_gateway.server import Gateway, approval_wait_from_env, to_call_tool_result
from messages.schema import command_schema

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _checkpoint(call: int, agent: str = "a") -> DirectCheckpoint:
    return DirectCheckpoint(agent, call, "browser_click", {"selector": "#x"}, {"code": "needs_user"}, 3, "approval")


# --- the store ---------------------------------------------------------------------------------------


def test_at_most_20_checkpoints_the_least_recently_kept_pushed_out_first() -> None:
    store = DirectCheckpoints(Clock())
    tokens = {call: store.keep(_checkpoint(call)) for call in range(1, 21)}
    store.keep(_checkpoint(1))  # resumed and stopped again: the newest now
    store.keep(_checkpoint(21))
    assert len(store) == 20
    assert store.find("a", 2) is None and store.find("a", 1) is not None
    assert store.find("a", 3) is not None and tokens


def test_a_checkpoint_expires_30_minutes_after_its_call_or_its_last_resume() -> None:
    clock = Clock()
    store = DirectCheckpoints(clock)
    store.keep(_checkpoint(7))
    clock.now += 1799
    assert store.find("a", 7) is not None
    store.keep(_checkpoint(7))  # a resume that stopped again
    clock.now += 1799
    assert store.find("a", 7) is not None
    clock.now += 2
    assert store.find("a", 7) is None


def test_only_the_sha256_of_the_latest_token_is_kept_and_it_rotates() -> None:
    store = DirectCheckpoints(Clock())
    first = store.keep(_checkpoint(5))
    kept = store.find("a", 5)
    assert kept is not None and kept.token_sha256 == hashlib.sha256(first.encode()).digest()
    assert first not in repr(kept) and len(first) == 32  # 24 random bytes, URL-safe
    second = store.keep(kept)
    latest = store.find("a", 5)
    assert latest is not None
    assert store.token_matches(latest, second) and not store.token_matches(latest, first)
    assert not store.token_matches(latest, None)


def test_checkpoints_belong_to_their_agent_and_a_taken_one_is_not_found() -> None:
    store = DirectCheckpoints(Clock())
    token = store.keep(_checkpoint(9, agent="alice"))
    assert store.find("bob", 9) is None
    found = store.find("alice", 9)
    assert found is not None
    assert store.take(found, token) is True
    assert store.find("alice", 9) is None and len(store) == 1
    assert store.take(found, token) is False  # a second resume at once finds it taken: it never runs twice
    store.put_back(found)
    assert store.find("alice", 9) == found


def test_a_continuation_answers_only_the_same_call_of_the_same_agent_once() -> None:
    clock = Clock()
    continuations = Continuations(clock, ttl=120)
    continuations.remember("tok", "a", "browser_type", {"selector": "#n", "text": "x"}, 1, ({"action": "type"},), 4)
    assert continuations.claim("tok", "b", "browser_type", {"selector": "#n", "text": "x"}) is None
    assert continuations.claim("tok", "a", "browser_type", {"selector": "#n", "text": "y"}) is None
    found = continuations.claim("tok", "a", "browser_type", {"selector": "#n", "text": "x"})
    assert found is not None and (found.step, found.call) == (1, 4)
    assert continuations.claim("tok", "a", "browser_type", {"selector": "#n", "text": "x"}) is None
    continuations.remember("late", "a", "browser_click", {}, 0, (), None)
    clock.now += 121
    assert continuations.claim("late", "a", "browser_click", {}) is None


def test_approval_wait_from_the_environment_is_capped_at_115_seconds() -> None:
    assert approval_wait_from_env({}) == 115
    assert approval_wait_from_env({"KITSUNE_APPROVAL_WAIT": "2"}) == 2
    assert approval_wait_from_env({"KITSUNE_APPROVAL_WAIT": "600"}) == 115
    assert approval_wait_from_env({"KITSUNE_APPROVAL_WAIT": "-1"}) == 0
    assert approval_wait_from_env({"KITSUNE_APPROVAL_WAIT": "soon"}) == 115


def test_tools_by_capability_group() -> None:
    core = {spec.name for spec in enabled_tools(frozenset({"core"}))}
    automation = {spec.name for spec in enabled_tools(frozenset({"automation"}))}
    assert "browser_resume" in core & automation
    assert {"browser_batch", "browser_parallel", "browser_workflow"} <= automation - core
    assert not [name for name, spec in TOOLS.items() if spec.read_only and spec.confirmable]
    assert "reference" not in repr(TOOLS["browser_click"].input_schema)  # a direct call has no ${$N} to refer to


def test_a_screenshot_is_an_image_and_readable_text() -> None:
    result = to_call_tool_result({"ok": True, "image": "aGVsbG8=", "mimeType": "image/png", "status": "ok"})
    assert isinstance(result.content[0], types.ImageContent) and result.content[0].data == "aGVsbG8="
    assert isinstance(result.content[1], types.TextContent) and "aGVsbG8=" not in result.content[1].text
    assert result.structured_content == {"ok": True, "mimeType": "image/png", "status": "ok", "bytes": 6}
    assert not result.is_error


def test_a_snapshot_is_text_and_its_structured_content_has_every_field_but_the_refs_list_the_text_says() -> None:
    shot = {"ok": True, "status": "ok", "url": "https://a.test/", "document": "t4d1", "truncated": False,
            "snapshot": '- button "Go" [ref=t4d1e2]', "elements": [{"ref": "t4d1e2", "role": "button", "name": "Go"}]}
    result = to_call_tool_result(shot)
    assert result.structured_content == {k: v for k, v in shot.items() if k != "elements"}
    assert isinstance(result.content[0], types.TextContent)
    assert result.content[0].text.endswith('snapshot:\n- button "Go" [ref=t4d1e2]')


# --- the gateway on a scripted bridge ----------------------------------------------------------------------


class ScriptedBridge(Bridge):
    """A bridge that sends nothing: answers requests from a script keyed by "METHOD /path"; records them.

    A route's answer is a body, a function of the request's body, or a list of those used in turn.
    """

    def __init__(self, routes: dict[str, Any]) -> None:  # no super().__init__(): it has no HTTP client
        self.routes = routes
        self.requests: list[tuple[str, str, Any]] = []
        self.streamed: list[str] = []
        """The paths asked for their progress lines (``stream``)."""
        self.snapshots: list[dict[str, Any]] = []
        """The snapshot reads a direct write sent after it (``since: last``), apart from :meth:`acts`."""

    async def get(self, path: str, *, timeout: float, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self._answer("GET", path, params)

    async def post(self, path: str, body: dict[str, Any], *, timeout: float) -> dict[str, Any]:
        return self._answer("POST", path, body)

    async def delete(self, path: str, *, timeout: float) -> dict[str, Any]:
        return self._answer("DELETE", path, None)

    async def stream(self, path: str, body: dict[str, Any], *, timeout: float, on_progress: Any) -> dict[str, Any]:
        self.streamed.append(path)
        return self._answer("POST", path, body)

    def _answer(self, method: str, path: str, body: Any) -> dict[str, Any]:
        command = body.get("command") if isinstance(body, dict) else None
        if isinstance(command, dict) and command.get("action") == "snapshot" and command.get("since") == "last":
            self.snapshots.append(body["command"])  # a direct write's diff: a read after it, kept apart
            return dict(self.routes.get("snapshot", {"error": "no", "code": "x"}))
        self.requests.append((method, path, body))
        key = f"{method} {path}"
        answers = self.routes.get(key)
        if answers is None:
            return {"caps": ["core", "automation"]} if path == "/api/caps" else {"error": "no", "code": "x"}
        answer = answers.pop(0) if isinstance(answers, list) else answers
        return answer(body) if callable(answer) else dict(answer)

    def acts(self) -> list[dict[str, Any]]:
        return [body for method, path, body in self.requests if path == "/api/act"]


class PromptingCaller(Caller):
    """A caller whose client shows prompts, answered from a script ("accept", "decline" or None)."""

    def __init__(self, bridge: Any, *answers: Literal["accept", "decline", "cancel"] | None) -> None:
        super().__init__("a", bridge)
        self.answers = list(answers)
        self.waits: list[float] = []

    @property
    def elicits(self) -> bool:
        return True

    async def prompt(self, message: str, schema: dict[str, Any], wait: float) -> types.ElicitResult | None:
        self.waits.append(wait)
        answer = self.answers.pop(0) if self.answers else None
        if answer is None:
            return None
        return types.ElicitResult(action=answer, content={"approve": True} if answer == "accept" else None)


def _held(call: int, action: str = "click", **state: Any) -> dict[str, Any]:
    return {"error": "The action needs approval; nothing was done", "code": "needs_user", "retryable": False,
            "status": "held", "call": call,
            "state": {"reason": "approval", "detail": "confirmation_required", "action": action, "tabId": 3,
                      "confirm_token": f"confirm-{call}", "expires_in": 120.0, **state}}


def _ok(call: int) -> dict[str, Any]:
    return {"ok": True, "status": "ok", "call": call}


async def test_a_hold_that_cannot_be_approved_keeps_no_checkpoint() -> None:
    bridge = ScriptedBridge({"POST /api/act": [_held(1, approvable=False)]})
    gateway = Gateway(frozenset({"core"}))
    result = await gateway.call(PromptingCaller(bridge, "accept"), "browser_click", {"selector": "#x", "tabId": 3})
    assert result["code"] == "needs_user" and "resume_token" not in result and len(gateway.checkpoints) == 0
    assert len(bridge.acts()) == 1  # never asked, never sent again


async def test_reads_and_container_results_never_get_a_direct_checkpoint() -> None:
    container = {"results": [], "progress": [], "status": "held", "summary": "1 held", "call": 8,
                 "resume_token": "bridge-token"}
    bridge = ScriptedBridge({"POST /api/act": [_held(1, action="pageText")], "POST /api/batch": [container]})
    gateway = Gateway(frozenset({"core", "automation"}))
    caller = Caller("a", bridge)
    read = await gateway.call(caller, "browser_page_text", {"tabId": 3})
    assert "resume_token" not in read
    batch = await gateway.call(caller, "browser_batch", {"commands": [{"action": "title"}]})
    assert batch == container and len(gateway.checkpoints) == 0


class ProgressCaller(Caller):
    """A caller whose request carried a progressToken."""

    @property
    def wants_progress(self) -> bool:
        return True


async def test_a_container_call_streams_its_steps_only_when_progress_was_asked_for() -> None:
    answer = {"results": [], "progress": [], "status": "ok", "summary": "ok"}
    bridge = ScriptedBridge({"POST /api/batch": [answer, answer]})
    gateway = Gateway(frozenset({"core", "automation"}))
    body = {"commands": [{"action": "title"}]}
    assert await gateway.call(Caller("a", bridge), "browser_batch", body) == answer
    assert bridge.streamed == []
    assert await gateway.call(ProgressCaller("a", bridge), "browser_batch", body) == answer
    assert bridge.streamed == ["/api/batch"]


async def test_an_unknown_outcome_is_never_a_page_stop() -> None:
    unknown = {"error": "Command timed out", "code": "timeout", "retryable": False, "status": "unknown", "call": 2}
    bridge = ScriptedBridge({"POST /api/act": [unknown],
                               "GET /api/needs-user": {"needs_user": True, "reason": "sign_in"}})
    gateway = Gateway(frozenset({"core"}))
    result = await gateway.call(Caller("a", bridge), "browser_click", {"selector": "#x", "tabId": 3})
    assert result == unknown and len(gateway.checkpoints) == 0


async def test_prompts_stay_open_at_most_115_seconds_and_resume_waits_at_most_300(
        monkeypatch: pytest.MonkeyPatch) -> None:
    bridge = ScriptedBridge({"POST /api/act": [_held(1), _held(2), _ok(3)]})
    gateway = Gateway(frozenset({"core"}))
    caller = PromptingCaller(bridge, "decline", "accept")
    stopped = await gateway.call(caller, "browser_click", {"selector": "#x", "tabId": 3})
    resume = {"call": stopped["call"], "resume_token": stopped["resume_token"], "wait": 1000}
    done = await gateway.call(caller, "browser_resume", resume)
    assert done["status"] == "ok" and caller.waits == [115, 115]
    assert bridge.acts()[-1] == {"command": {"action": "click", "selector": "#x", "tabId": 3},
                                 "confirm_token": "confirm-2"}

    waits: list[float] = []

    async def never(self: DirectCalls, caller: Caller, check: Any, tab: int, wait: float) -> bool:
        waits.append(wait)
        return False

    monkeypatch.setattr(DirectCalls, "poll", never)
    page = {"error": "no", "code": "not_found", "retryable": True, "status": "failed", "call": 4}
    bridge = ScriptedBridge({"POST /api/act": [page],
                               "GET /api/needs-user": {"needs_user": True, "reason": "sign_in", "evidence": "x"}})
    stopped = await gateway.call(Caller("a", bridge), "browser_click", {"selector": "#x", "tabId": 3})
    again = await gateway.call(Caller("a", bridge), "browser_resume",
                               {"call": stopped["call"], "resume_token": stopped["resume_token"], "wait": 1e9})
    assert waits == [300] and again["code"] == "needs_user" and len(bridge.acts()) == 1


async def test_a_resume_restarts_a_multi_request_tool_at_its_held_request() -> None:
    bridge = ScriptedBridge({"POST /api/act": [_ok(1), _held(2, action="fill"), _held(3, action="fill"), _ok(4)]})
    gateway = Gateway(frozenset({"core"}))
    caller = PromptingCaller(bridge, "decline", "accept")
    fields = [{"selector": "#a", "value": "1"}, {"selector": "#b", "value": "2"}]
    stopped = await gateway.call(caller, "browser_fill_form", {"fields": fields, "tabId": 3})
    assert stopped["call"] == 2 and [s["status"] for s in stopped["steps"]] == ["ok", "held"]
    checkpoint = gateway.checkpoints.find("a", 2)
    assert checkpoint is not None and checkpoint.step == 1 and "confirm_token" not in repr(checkpoint)
    done = await gateway.call(caller, "browser_resume", {"call": 2, "resume_token": stopped["resume_token"]})
    assert (done["status"], done["call"]) == ("ok", 4) and "steps" not in done  # all ok: no step echoes a field
    assert [body["command"]["selector"] for body in bridge.acts()] == ["#a", "#b", "#b", "#b"]
    assert gateway.checkpoints.find("a", 2) is None


async def test_a_resume_that_still_stops_keeps_the_same_call() -> None:
    bridge = ScriptedBridge({"POST /api/act": [_held(1), _held(2)]})
    gateway = Gateway(frozenset({"core"}))
    caller = PromptingCaller(bridge, "decline", "decline")
    stopped = await gateway.call(caller, "browser_click", {"selector": "#x", "tabId": 3})
    again = await gateway.call(caller, "browser_resume", {"call": 1, "resume_token": stopped["resume_token"]})
    assert (again["call"], again["held_call"], again["state"]["decision"]) == (1, 2, "declined")
    assert gateway.checkpoints.find("a", 1) is not None and gateway.checkpoints.find("a", 2) is None


def test_page_state_checks_cover_sign_in_and_human_check() -> None:
    assert set(PAGE_STATE_CHECKS) == {"sign_in", "human_check"}
    assert _progress.PROGRESS_EVERY == 10 and _pages.POLL_EVERY == 1


async def test_a_direct_tool_keeps_its_action_s_rules_across_parameters_and_sends_nothing_against_them() -> None:
    bridge = ScriptedBridge({"POST /api/act": [_ok(1)]})
    gateway = Gateway(frozenset({"core"}))
    result = await gateway.call(Caller("a", bridge), "browser_find", {"tabId": 3})
    assert result["code"] == "invalid_parameter" and "selector, ref or text" in result["error"] and bridge.acts() == []
    assert (await gateway.call(Caller("a", bridge), "browser_find", {"text": "Buy", "tabId": 3}))["ok"]


def test_a_session_name_has_the_command_language_s_shape_wherever_a_tool_takes_one() -> None:
    new_tab, keep = command_schema()["$defs"]["newTab"]["properties"], command_schema()["$defs"]["keepSession"]
    for taken, parser in [(TOOLS["browser_tabs"].input_schema["properties"]["session"], new_tab["session"]),
                          (TOOLS["browser_sessions"].input_schema["properties"]["name"], keep["properties"]["name"])]:
        assert {k: v for k, v in taken.items() if k != "description"} == \
            {k: v for k, v in parser.items() if k != "description"}


async def test_a_new_tab_opens_in_the_session_it_names_with_or_without_its_confirm_token() -> None:
    bridge = ScriptedBridge({"POST /api/tabs": [_ok(1)], "POST /api/act": [_ok(2)]})
    gateway = Gateway(frozenset({"core"}))
    assert (await gateway.call(Caller("a", bridge), "browser_tabs", {"op": "new", "session": "shop"}))["ok"]
    assert (await gateway.call(Caller("a", bridge), "browser_tabs",
                               {"op": "new", "url": "https://a.test/", "session": "shop", "confirm_token": "t"}))["ok"]
    assert [body for _, path, body in bridge.requests if path != "/api/caps"] == [
        {"op": "open", "session": "shop"},
        {"command": {"action": "newTab", "url": "https://a.test/", "session": "shop"}, "confirm_token": "t"}]
    refused = await gateway.call(Caller("a", bridge), "browser_tabs", {"op": "new", "session": "-shop"})
    assert refused["code"] == "invalid_parameter" and refused["state"]["param"] == "session"
    assert len(bridge.acts()) == 1 and len([path for _, path, _ in bridge.requests if path == "/api/tabs"]) == 1


async def test_browser_sessions_lists_closes_and_relays_the_bridge_s_refusal() -> None:
    listing = {"sessions": [{"name": "default", "mode": "reuse", "tabs": [], "created": 1.0, "last_used": 2.0}],
               "tombstones": []}
    gone = {"error": "You have no session 'shop'", "code": "session_not_found", "retryable": False}
    bridge = ScriptedBridge({"GET /api/sessions": listing,
                             "DELETE /api/sessions/shop": [{"closed": "shop", "mode": "reuse", "tabs": [4]}, gone]})
    gateway = Gateway(frozenset({"core"}))
    caller = Caller("a", bridge)
    assert await gateway.call(caller, "browser_sessions", {}) == {"ok": True, **listing}
    closed = await gateway.call(caller, "browser_sessions", {"op": "close", "name": "shop"})
    assert closed == {"ok": True, "closed": "shop", "mode": "reuse", "tabs": [4]} and caller.sent
    assert await gateway.call(caller, "browser_sessions", {"op": "close", "name": "shop"}) == gone
    unnamed = await gateway.call(caller, "browser_sessions", {"op": "close"})
    assert unnamed["code"] == "invalid_parameter" and "'name'" in unnamed["error"]
    assert [(method, path) for method, path, _ in bridge.requests if path != "/api/caps"] == [
        ("GET", "/api/sessions"), ("DELETE", "/api/sessions/shop"), ("DELETE", "/api/sessions/shop")]


def test_a_refused_argument_names_the_key_and_the_one_the_tool_takes() -> None:
    gateway = Gateway(frozenset({"core", "automation"}))
    refused = gateway._invalid("browser_tabs", {"action": "list"})
    assert refused is not None and refused["code"] == "unknown_parameter" and refused["state"] == {"param": "action"}
    assert refused["error"] == "unknown parameter 'action'; browser_tabs takes 'op'"
    close = gateway._invalid("browser_screenshot", {"full_page": True})
    assert close is not None and close["error"].endswith("browser_screenshot takes 'fullPage'")
    nested = gateway._invalid("browser_fill_form", {"fields": [{"selector": "#a", "vaule": "x"}]})
    assert nested is not None and nested["state"] == {"param": "fields/0/vaule"} and "takes 'value'" in nested["error"]
    unknown = gateway._invalid("browser_navigate", {"url": "http://a.test", "zzz": 1})
    assert unknown is not None and "'url'" in unknown["error"] and "'waitUntil'" in unknown["error"]  # what it takes


def test_the_tool_list_is_short_and_every_direct_tool_is_still_checked_against_its_whole_schema() -> None:
    listed = tools_result(frozenset({"core", "automation"}))
    assert len(json.dumps(listed, separators=(",", ":")).encode()) <= 12_300  # Playwright MCP 0.0.86: 21,266
    assert '"additionalProperties":false' not in json.dumps(listed, separators=(",", ":"))
    click = next(t for t in listed["tools"] if t["name"] == "browser_click")["inputSchema"]
    assert "maximum" not in click["properties"]["clickCount"]  # listed short ...
    gateway = Gateway(frozenset({"core"}))
    refused = gateway._invalid("browser_click", {"selector": "#a", "clickCount": 9})
    assert refused is not None and refused["state"] == {"param": "clickCount"}  # ... checked whole
    field = {"ref": "t1d1e2", "value": "a", "zzz": 1}
    closed: list[tuple[str, dict[str, Any]]] = [("browser_click", {"ref": "t1d1e2", "zzz": 1}),  # listed open
                                                ("browser_fill_form", {"fields": [field]})]
    for tool, arguments in closed:
        unknown = gateway._invalid(tool, arguments)
        assert unknown is not None and unknown["code"] == "unknown_parameter" and "'zzz'" in unknown["error"]


def test_browser_cdp_sends_a_method_or_the_read_it_names_and_needs_one_of_them() -> None:
    assert commands_of("browser_cdp", {"method": "DOM.getDocument", "params": {"depth": 1}}, 3) == [
        {"action": "cdp", "method": "DOM.getDocument", "params": {"depth": 1}, "tabId": 3}]
    assert commands_of("browser_cdp", {"read": "events", "enable": ["Log"], "tabId": 4}, 3) == [
        {"action": "cdpEvents", "enable": ["Log"], "tabId": 4}]
    assert commands_of("browser_cdp", {"read": "spec", "domain": "DOM"}, None) == [
        {"action": "cdpSpec", "domain": "DOM"}]
    gateway = Gateway(frozenset({"core"}))
    for neither_or_both in ({}, {"method": "DOM.getDocument", "read": "spec"}):
        refused = gateway._invalid("browser_cdp", neither_or_both)
        assert refused is not None and "method, or read" in refused["error"]
    assert _describe({"action": "cdp", "method": "Input.insertText", "params": {"text": "canary"}}) == (
        "cdp (method 'Input.insertText')")  # never its params


def test_the_last_tab_a_call_opened_becomes_current() -> None:
    body = {"progress": [{"action": "newTab", "status": "ok"},
                         {"action": "sequence", "status": "ok", "steps": [{"action": "newTab", "status": "ok"}]},
                         {"action": "parallel", "status": "failed", "sequences": [
                             [{"action": "newTab", "status": "ok"}], [{"action": "newTab", "status": "failed"}]]}],
            "results": [{"ok": True, "tabId": 1}, {"ok": True, "results": [{"ok": True, "tabId": 2}]},
                        {"error": "e", "code": "timeout", "state": {"sequences": [[{"ok": True, "tabId": 3}],
                                                                                  [{"error": "e", "code": "x"}]]}}]}
    assert last_opened_tab(body) == 3
    assert last_opened_tab({"progress": [{"action": "title", "status": "ok"}], "results": [{"ok": True}]}) is None
    assert last_opened_tab({"error": "bad", "code": "invalid_call"}) is None


async def test_a_direct_write_answers_what_changed_after_it_unless_told_not_to() -> None:
    diff = {"ok": True, "status": "ok", "diff": '~ - textbox "Name" [ref=t3d1e5]: Ada', "document": "t3d1",
            "changes": 1, "truncated": False}
    bridge = ScriptedBridge({"POST /api/act": [_ok(1), _ok(2), _ok(3)], "snapshot": diff})
    gateway = Gateway(frozenset({"core"}))
    clicked = await gateway.call(Caller("a", bridge), "browser_click", {"tabId": 3, "ref": "t3d1e7"})
    assert bridge.acts()[0]["command"] == {"action": "click", "ref": "t3d1e7", "tabId": 3}
    assert bridge.snapshots == [{"action": "snapshot", "since": "last", "maxChars": 4000, "tabId": 3}]
    assert clicked["page"]["diff"] == diff["diff"] and clicked["page"]["document"] == "t3d1"
    quiet = await gateway.call(Caller("a", bridge), "browser_click", {"tabId": 3, "ref": "t3d1e7", "snapshot": "none"})
    assert "page" not in quiet and len(bridge.snapshots) == 1 and "snapshot" not in bridge.acts()[1]["command"]
    filled = await gateway.call(Caller("a", bridge), "browser_fill_form",
                                {"tabId": 3, "fields": [{"ref": "t3d1e5", "value": "Ada"}]})
    assert bridge.acts()[2]["command"] == {"action": "fill", "ref": "t3d1e5", "value": "Ada", "tabId": 3}
    assert filled["page"]["diff"] == diff["diff"] and len(bridge.snapshots) == 2
    both = await gateway.call(Caller("a", bridge), "browser_click", {"tabId": 3, "ref": "t3d1e7", "selector": "#a"})
    assert both["code"] == "invalid_parameter" and len(bridge.acts()) == 3


_ARRIVED = {"ok": True, "status": "ok", "url": "https://a.test/", "document": "t4d1", "documentChanged": True,
            "snapshot": '- heading "Shop" [level=1] [ref=t4d1e2]', "truncated": False}
"""A ``snapshot {since: "last"}`` of a document the session has not read: the whole snapshot."""


async def test_a_navigation_and_a_tab_opened_at_a_url_answer_the_page_they_arrive_on_unless_told_not_to() -> None:
    bridge = ScriptedBridge({"POST /api/act": [_ok(1), _ok(2)], "snapshot": _ARRIVED,
                             "POST /api/tabs": {"ok": True, "status": "ok", "call": 3, "tabId": 4}})
    gateway = Gateway(frozenset({"core"}))
    caller = Caller("a", bridge)
    went = await gateway.call(caller, "browser_navigate", {"url": "https://a.test/", "tabId": 4})
    assert went["page"] == {k: v for k, v in _ARRIVED.items() if k in ("document", "documentChanged", "snapshot")}
    assert bridge.snapshots == [{"action": "snapshot", "since": "last", "maxChars": 4000, "tabId": 4}]
    opened = await gateway.call(caller, "browser_tabs", {"op": "new", "url": "https://a.test/"})
    assert opened["tabId"] == 4 and opened["page"]["snapshot"] == _ARRIVED["snapshot"]
    assert bridge.snapshots[1] == {"action": "snapshot", "since": "last", "maxChars": 4000, "tabId": 4}
    quiet = [await gateway.call(caller, "browser_navigate", {"url": "https://a.test/", "snapshot": "none"}),
             await gateway.call(caller, "browser_tabs", {"op": "new", "url": "https://a.test/", "snapshot": "none"}),
             await gateway.call(caller, "browser_tabs", {"op": "new"})]  # about:blank: nothing to show
    assert [("page" in answer, answer["status"]) for answer in quiet] == [(False, "ok")] * 3
    assert len(bridge.snapshots) == 2 and len(bridge.acts()) == 2


async def test_a_form_fills_selects_and_checks_each_field_in_one_request_and_answers_no_echo_of_them() -> None:
    diff = {"ok": True, "status": "ok", "diff": '~ - checkbox "Terms" [checked] [ref=t3d1e9]', "document": "t3d1"}
    bridge = ScriptedBridge({"POST /api/act": [_ok(1), {**_ok(2), "selected": ["jp"]}, {**_ok(3), "checked": True},
                                               {**_ok(4), "checked": False}], "snapshot": diff})
    fields = [{"ref": "t3d1e5", "value": "Ada"}, {"ref": "t3d1e7", "values": ["Japan"]},
              {"selector": "#terms", "checked": True}, {"ref": "t3d1e11", "checked": False}]
    filled = await Gateway(frozenset({"core"})).call(Caller("a", bridge), "browser_fill_form",
                                                     {"tabId": 3, "fields": fields})
    assert [body["command"] for body in bridge.acts()] == [
        {"action": "fill", "ref": "t3d1e5", "value": "Ada", "tabId": 3},
        {"action": "select", "ref": "t3d1e7", "values": ["Japan"], "tabId": 3},
        {"action": "check", "selector": "#terms", "checked": True, "tabId": 3},
        {"action": "check", "ref": "t3d1e11", "checked": False, "tabId": 3}]
    assert filled == {"ok": True, "status": "ok", "call": 4, "page": {"diff": diff["diff"], "document": "t3d1"}}
    said = [_describe(body["command"]) for body in bridge.acts()[1:]]  # as an approval prompt names each
    assert said == ["select (ref 't3d1e7'; values Japan)", "check (selector '#terms')", "uncheck (ref 't3d1e11')"]


@pytest.mark.parametrize(("field", "param", "said"), [
    ({"ref": "t3d1e9", "checked": "yes"}, "fields/1/checked", "type boolean"),
    ({"ref": "t3d1e5", "value": True}, "fields/1/value", "type string"),
    ({"ref": "t3d1e7", "values": "Japan"}, "fields/1/values", "type array"),
    ({"ref": "t3d1e9", "value": "x", "checked": True}, "fields/1", "a field takes one of value, values, checked"),
    ({"ref": "t3d1e9"}, "fields/1", "a field takes one of value, values, checked"),
    ({"ref": "t3d1e9", "selector": "#a", "checked": True}, "fields/1", "selector or ref, not both"),
    ({"ref": "t3d1e7", "option": "Japan"}, "fields/1/option", "unknown parameter 'option'; browser_fill_form takes "
                                                             "'values'"),
])
async def test_a_form_field_of_the_wrong_shape_is_refused_naming_it_with_nothing_sent(
        field: dict[str, Any], param: str, said: str) -> None:
    bridge = ScriptedBridge({"POST /api/act": _ok(1)})
    refused = await Gateway(frozenset({"core"})).call(Caller("a", bridge), "browser_fill_form", {
        "tabId": 3, "fields": [{"ref": "t3d1e5", "value": "Ada"}, field]})
    assert refused["code"] in ("invalid_parameter", "unknown_parameter") and refused["state"] == {"param": param}
    assert said in refused["error"] and bridge.acts() == []


async def test_a_field_its_element_refuses_stops_the_form_there_saying_which_fields_ran() -> None:
    wrong = {"error": "select: 't3d1e9' is not a <select>; nothing was sent", "code": "wrong_element",
             "retryable": False, "status": "failed", "call": 2}
    bridge = ScriptedBridge({"POST /api/act": [_ok(1), wrong, _ok(3)]})
    stopped = await Gateway(frozenset({"core"})).call(Caller("a", bridge), "browser_fill_form", {"tabId": 3, "fields": [
        {"ref": "t3d1e5", "value": "Ada"}, {"ref": "t3d1e9", "values": ["Japan"]}, {"ref": "t3d1e11", "value": "b"}]})
    assert stopped["code"] == "wrong_element" and "page" not in stopped and len(bridge.acts()) == 2
    assert stopped["steps"] == [{"action": "fill", "status": "ok", "call": 1},
                                {"action": "select", "status": "failed", "call": 2}]


async def test_a_page_cut_past_its_bound_says_so_and_where_to_read_on() -> None:
    cut = {**_ARRIVED, "snapshot": '- heading "Shop" [level=1] [ref=t4d1e2]\n# cut at line 1 of 90: snapshot with '
           "offset=1 for the rest, or narrow it (selector, ref, interactive, depth)", "truncated": True,
           "nextOffset": 1, "lines": 90}
    bridge = ScriptedBridge({"POST /api/act": [_ok(1)], "snapshot": cut})
    went = await Gateway(frozenset({"core"})).call(Caller("a", bridge), "browser_navigate",
                                                   {"url": "https://a.test/", "tabId": 4})
    assert (went["page"]["truncated"], went["page"]["nextOffset"]) == (True, 1)
    assert "snapshot with offset=1 for the rest" in went["page"]["snapshot"]
