"""The MCP gateway's Live View on a scripted bridge: ``browser_live_view`` (its ``control``, held for approval
under ask-before-act like a write), the links in needs_user answers (and none when the bridge refuses them),
and hand-backs that wake a wait or answer a prompt."""

from __future__ import annotations

import time
from typing import Any

import anyio
import mcp_types as types
import pytest

from mcp_gateway import _direct
from mcp_gateway._caller import Caller
from mcp_gateway.server import Gateway
from tests.unit.test_mcp_gateway import PromptingCaller, ScriptedBridge, _held

pytestmark = pytest.mark.anyio

_URL = "http://node.test:8000/live/3#t=secret-token"
_LINK = {"ok": True, "tabId": 3, "url": _URL, "expires_in": 300.0, "call": 40}
_DISABLED = {"error": "Live View is not allowed for this agent (live_view: false)", "code": "live_view_disabled",
             "retryable": False}
_SIGN_IN = {"needs_user": True, "reason": "sign_in", "evidence": "password_field"}
_NOT_FOUND = {"error": "no #x", "code": "not_found", "retryable": True, "status": "failed", "call": 4}
_VIEW_ONLY = {**_LINK, "url": _URL + "-view", "control": False}
_CONTROLS = {**_LINK, "url": _URL + "-acts", "control": True}
_READ_ONLY = {"error": "This agent is read-only: a Live View link it asks for is view-only", "code": "read_only",
              "retryable": False, "state": {"tabId": 3}}


def _grant_held(token: str = "confirm-live", code: str = "needs_user") -> dict[str, Any]:
    """The bridge's hold of a link that controls (ask-before-act): no call id, a confirm token."""
    return {"error": "The action needs approval; nothing was done", "code": code, "retryable": False,
            "status": "held", "state": {"reason": "approval", "detail": "confirmation_required", "action": "live_view",
                                        "tabId": 3, "grant": "control", "confirm_token": token, "expires_in": 120.0}}


def _live_requests(bridge: ScriptedBridge) -> list[Any]:
    return [body for method, path, body in bridge.requests if (method, path) == ("POST", "/api/tabs")]


def _handback_waits(bridge: ScriptedBridge) -> list[dict[str, Any]]:
    return [params for _, path, params in bridge.requests if path == "/api/live/handbacks"]


async def test_browser_live_view_asks_for_the_current_tab_and_passes_refusals_through() -> None:
    bridge = ScriptedBridge({"GET /api/tabs": [{"current": 3, "tabs": []}, {"current": None, "tabs": []}],
                             "POST /api/tabs": [_LINK, _DISABLED]})
    gateway = Gateway(frozenset({"core"}))
    caller = Caller("a", bridge)
    assert await gateway.call(caller, "browser_live_view", {}) == _LINK
    assert await gateway.call(caller, "browser_live_view", {"tabId": 5}) == _DISABLED
    assert _live_requests(bridge) == [{"op": "live_view", "tabId": 3}, {"op": "live_view", "tabId": 5}]
    assert (await gateway.call(caller, "browser_live_view", {}))["code"] == "no_tab"
    assert len(_live_requests(bridge)) == 2 and not caller.sent  # a link acts on no page


async def test_a_link_that_controls_held_for_approval_is_asked_about_in_the_prompt_and_answered_once_approved(
) -> None:
    bridge = ScriptedBridge({"POST /api/tabs": [_grant_held(), _VIEW_ONLY, _CONTROLS]})
    caller = RecordingCaller(bridge, "accept")
    linked = await Gateway(frozenset({"core"})).call(caller, "browser_live_view", {"tabId": 3, "control": True})
    assert linked == _CONTROLS
    assert _live_requests(bridge) == [
        {"op": "live_view", "tabId": 3, "control": True},
        {"op": "live_view", "tabId": 3},  # the prompt's own link, as the policy gives (view-only): to look first
        {"op": "live_view", "tabId": 3, "control": True, "confirm_token": "confirm-live"}]
    assert "Live View link that acts" in caller.messages[0] and "tab 3" in caller.messages[0]
    assert str(_VIEW_ONLY["url"]) in caller.messages[0] and not caller.sent


@pytest.mark.parametrize("answer", ["decline", "cancel"])
async def test_a_refused_grant_of_control_sends_nothing_more_and_says_so(answer: str) -> None:
    bridge = ScriptedBridge({"POST /api/tabs": [_grant_held(), _VIEW_ONLY]})
    caller = PromptingCaller(bridge, answer)  # type: ignore[arg-type]
    gateway = Gateway(frozenset({"core"}))
    refused = await gateway.call(caller, "browser_live_view", {"tabId": 3, "control": True})
    assert (refused["code"], refused["status"]) == ("needs_user", "held")
    assert refused["state"]["approval"] == "elicitation" and "confirm_token" not in refused["state"]
    assert refused["state"]["decision"] == ("declined" if answer == "decline" else "cancelled")
    assert "Call browser_live_view again" in refused["hint"] and "url" not in refused
    assert len(_live_requests(bridge)) == 2 and len(gateway.checkpoints) == 0


async def test_without_prompts_a_grant_of_control_answers_its_confirm_token_which_gets_the_link() -> None:
    bridge = ScriptedBridge({"POST /api/tabs": [_grant_held(), _CONTROLS], "GET /api/tabs": {"current": 3}})
    gateway = Gateway(frozenset({"core"}))
    held = await gateway.call(Caller("a", bridge), "browser_live_view", {"control": True})
    assert held["state"]["approval"] == "confirm_token" and held["state"]["confirm_token"] == "confirm-live"
    assert "confirm_token=state.confirm_token" in held["hint"]
    linked = await gateway.call(Caller("a", bridge), "browser_live_view",
                                {"tabId": 3, "control": True, "confirm_token": "confirm-live"})
    assert linked == _CONTROLS
    assert _live_requests(bridge)[1] == {"op": "live_view", "tabId": 3, "control": True,
                                         "confirm_token": "confirm-live"}


async def test_control_false_and_refusals_of_control_pass_through_without_a_prompt() -> None:
    bridge = ScriptedBridge({"POST /api/tabs": [_VIEW_ONLY, _READ_ONLY]})
    caller = RecordingCaller(bridge)
    gateway = Gateway(frozenset({"core"}))
    assert await gateway.call(caller, "browser_live_view", {"tabId": 3, "control": False}) == _VIEW_ONLY
    assert await gateway.call(caller, "browser_live_view", {"tabId": 3, "control": True}) == _READ_ONLY
    assert not caller.messages
    assert [body.get("control") for body in _live_requests(bridge)] == [False, True]
    invalid = await gateway.call(caller, "browser_live_view", {"tabId": 3, "control": "yes"})
    assert (invalid["code"], invalid["state"]["param"]) == ("invalid_parameter", "control")


async def test_a_view_only_link_in_a_stop_says_it_shows_and_how_to_get_one_that_acts() -> None:
    bridge = ScriptedBridge({"POST /api/act": [_held(1)], "POST /api/tabs": [_VIEW_ONLY]})
    held = await Gateway(frozenset({"core"})).call(Caller("a", bridge), "browser_click", {"selector": "#x", "tabId": 3})
    assert held["live_view"]["control"] is False and held["live_view"]["url"] == _VIEW_ONLY["url"]
    assert "to see tab 3 live (view only" in held["hint"] and "control: true" in held["hint"]
    assert "open this link to act" not in held["hint"]


async def test_a_page_stop_and_its_stop_again_carry_fresh_links_unless_the_bridge_refuses(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_direct, "POLL_EVERY", 0.01)
    second = {**_LINK, "url": _URL + "-2"}
    bridge = ScriptedBridge({"POST /api/act": [_NOT_FOUND, _NOT_FOUND], "GET /api/needs-user": _SIGN_IN,
                             "POST /api/tabs": [_LINK, second, _DISABLED]})
    gateway = Gateway(frozenset({"core"}))
    stopped = await gateway.call(Caller("a", bridge), "browser_click", {"selector": "#x", "tabId": 3})
    assert stopped["live_view"] == {"url": _URL, "expires_in": 300.0, "tabId": 3, "reason": "sign_in"}
    assert "open this link to act in tab 3" in stopped["hint"] and "browser_resume" in stopped["hint"]
    again = await gateway.call(Caller("a", bridge), "browser_resume",
                               {"call": stopped["call"], "resume_token": stopped["resume_token"], "wait": 0.05})
    assert again["code"] == "needs_user" and again["live_view"]["url"] == _URL + "-2"
    disabled = await gateway.call(Caller("a", bridge), "browser_click", {"selector": "#x", "tabId": 3})
    assert disabled["code"] == "needs_user" and "live_view" not in disabled
    assert "open this link" not in disabled["hint"]


async def test_an_approval_prompt_shows_the_link_and_a_declined_hold_answers_with_the_same_one() -> None:
    bridge = ScriptedBridge({"POST /api/act": [_held(1)], "POST /api/tabs": [_LINK]})
    caller = RecordingCaller(bridge, "decline")
    declined = await Gateway(frozenset({"core"})).call(caller, "browser_click", {"selector": "#x", "tabId": 3})
    assert declined["state"]["decision"] == "declined" and declined["live_view"]["url"] == _URL
    assert declined["live_view"]["reason"] == "approval"
    assert _URL in caller.messages[0] and len(_live_requests(bridge)) == 1


async def test_a_hand_back_wakes_a_page_wait_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_direct, "POLL_EVERY", 60.0)  # a sleep between checks would outlast the test
    bridge = ScriptedBridge({"POST /api/act": [_NOT_FOUND, _ok_click()], "POST /api/tabs": _DISABLED,
                             "GET /api/needs-user": [_SIGN_IN, _SIGN_IN, {"needs_user": False}],
                             "GET /api/live/handbacks": lambda params: {
                                 "tabId": 3, "handbacks": 3 if "since" in params else 2, "held": False}})
    gateway = Gateway(frozenset({"core"}))
    stopped = await gateway.call(Caller("a", bridge), "browser_click", {"selector": "#x", "tabId": 3})
    started = time.monotonic()
    done = await gateway.call(Caller("a", bridge), "browser_resume",
                              {"call": stopped["call"], "resume_token": stopped["resume_token"], "wait": 20})
    assert done["status"] == "ok" and time.monotonic() - started < 5
    assert _handback_waits(bridge)[0] == {"tabId": 3}  # the count before the first check, then a wait past it
    waits = [params for params in _handback_waits(bridge) if "since" in params]
    assert len(waits) == 1 and (waits[0]["tabId"], waits[0]["since"]) == (3, 2) and 19 < waits[0]["wait"] <= 20


async def test_without_hand_back_counts_the_wait_sleeps_between_checks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_direct, "POLL_EVERY", 0.2)
    bridge = ScriptedBridge({"POST /api/act": [_NOT_FOUND, _ok_click()], "POST /api/tabs": _DISABLED,
                             "GET /api/needs-user": [_SIGN_IN, _SIGN_IN, _SIGN_IN, {"needs_user": False}],
                             "GET /api/live/handbacks": {"tabId": 3, "held": False}})  # no count
    gateway = Gateway(frozenset({"core"}))
    stopped = await gateway.call(Caller("a", bridge), "browser_click", {"selector": "#x", "tabId": 3})
    started = time.monotonic()
    done = await gateway.call(Caller("a", bridge), "browser_resume",
                              {"call": stopped["call"], "resume_token": stopped["resume_token"], "wait": 20})
    assert done["status"] == "ok" and 0.35 < time.monotonic() - started < 5  # two sleeps of 0.2 s
    assert all(params == {"tabId": 3} for params in _handback_waits(bridge))  # no count: never a wait, slept


async def test_a_hand_back_answers_an_open_ask_prompt_and_cancels_it() -> None:
    bridge = ScriptedBridge({"POST /api/tabs": _LINK, "GET /api/needs-user": _SIGN_IN,
                             "GET /api/live/handbacks": [{"handbacks": 0}, {"handbacks": 1}]})
    caller = RecordingCaller(bridge, "hang")
    asked = {"question": "Please sign in", "reason": "sign_in", "tabId": 3, "wait": 30}
    answered = await Gateway(frozenset({"core"})).call(caller, "browser_ask_user", asked)
    assert answered == {"ok": True, "answer": "done", "via": "live_view", "reason": "sign_in", "tabId": 3}
    assert caller.cancelled == 1 and _URL in caller.messages[0] and "Done — hand back" in caller.messages[0]
    assert [params.get("since") for params in _handback_waits(bridge)] == [None, 0]


async def test_an_ask_answered_in_its_prompt_stops_listening_for_hand_backs() -> None:
    bridge = ScriptedBridge({"POST /api/tabs": _DISABLED, "GET /api/live/handbacks": {"handbacks": 0}})
    caller = RecordingCaller(bridge, "accept")
    answered = await Gateway(frozenset({"core"})).call(
        caller, "browser_ask_user", {"question": "Pick the blue plan", "tabId": 3})
    assert (answered["answer"], answered["via"], answered["tabId"]) == ("done", "elicitation", 3)
    assert "http" not in caller.messages[0] and caller.cancelled == 0


_CLAIMED = {"error": "Tab 3 is claimed by the user: a person controls it in Live View until they hand it back; "
            "nothing was sent", "code": "tab_claimed", "retryable": False, "status": "failed", "call": 12,
            "state": {"tabId": 3, "by": "user", "reason": "live_view"}}


async def test_a_page_wait_waits_for_the_hand_back_and_a_person_s_claim_never_costs_the_checkpoint(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29: the sign-in form is gone, but the person who signed in through Live View has not pressed Done.
    The wait goes on while they hold the tab; had the click been refused tab_claimed all the same (they took
    the tab between the check and the click), the resume answers the stop again with a new token."""
    monkeypatch.setattr(_direct, "POLL_EVERY", 0.01)
    held = {"tabId": 3, "handbacks": 0, "held": True}
    bridge = ScriptedBridge({"POST /api/act": [_NOT_FOUND, _CLAIMED, _ok_click()], "POST /api/tabs": _DISABLED,
                             "GET /api/needs-user": [_SIGN_IN, *[{"needs_user": False}] * 50],
                             "GET /api/live/handbacks": held})
    gateway = Gateway(frozenset({"core"}))
    stopped = await gateway.call(Caller("a", bridge), "browser_click", {"selector": "#x", "tabId": 3})
    waited = await gateway.call(Caller("a", bridge), "browser_resume",
                                {"call": stopped["call"], "resume_token": stopped["resume_token"], "wait": 0.2})
    assert waited["code"] == "needs_user" and waited["resume_token"] != stopped["resume_token"]
    assert len(bridge.acts()) == 1  # the person still holds the tab: nothing sent
    bridge.routes["GET /api/live/handbacks"] = {**held, "handbacks": 1, "held": False}
    claimed = await gateway.call(Caller("a", bridge), "browser_resume",
                                 {"call": stopped["call"], "resume_token": waited["resume_token"], "wait": 5})
    assert claimed["code"] == "needs_user" and claimed["call"] == stopped["call"]
    assert claimed["resume_token"] not in (None, waited["resume_token"])  # the checkpoint lives on
    done = await gateway.call(Caller("a", bridge), "browser_resume",
                              {"call": stopped["call"], "resume_token": claimed["resume_token"], "wait": 5})
    assert done["status"] == "ok" and len(bridge.acts()) == 3


def _ok_click() -> dict[str, Any]:
    return {"ok": True, "status": "ok", "call": 9}


class RecordingCaller(PromptingCaller):
    """A prompting caller that records its prompts' messages, answered from a script: "accept" or "decline"
    (an ask's "accept" answers done), or "hang" (never answers, until cancelled)."""

    def __init__(self, bridge: Any, *script: str) -> None:
        super().__init__(bridge)
        self.script = list(script)
        self.messages: list[str] = []
        self.cancelled = 0

    async def prompt(self, message: str, schema: dict[str, Any], wait: float) -> types.ElicitResult | None:
        self.messages.append(message)
        step = self.script.pop(0)
        if step == "hang":
            try:
                await anyio.sleep(3600)
            except anyio.get_cancelled_exc_class():
                self.cancelled += 1
                raise
        if "answer" in schema["properties"]:
            return types.ElicitResult(action="accept", content={"answer": "done"})
        self.answers = ["accept" if step == "accept" else "decline"]
        return await super().prompt(message, schema, wait)
