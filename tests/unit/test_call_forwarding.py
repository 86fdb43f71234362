"""What decides that a call runs on another node, and what travels there (``bridge.fleet.calls``)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from actors.bus import Handler, LocalBus
from actors.call_actor import RunCall
from actors.loop import IoLoop
from bridge.fleet import calls
from bridge.fleet.calls import CallForwarding, rules_digest, tabs_known
from core.calls import CallResponse
from core.policy import Policy
from core.url_policy import UrlPolicy
from messages.codec import decode, encode, read_answer
from messages.commands import CallSpec, parse_body
from messages.events import Event
from messages.fleet import AskCallResult, AskCallStatus, CallAnswered, CallStatus, ForwardedCall
from messages.requests import Subjects
from messages.wire import Message


def _spec(body: dict[str, Any], kind: str = "batch") -> CallSpec:
    return parse_body(kind, body)  # type: ignore[arg-type]


@pytest.mark.parametrize(("body", "tabs"), [
    ({"tabId": 3, "commands": [{"action": "title"}]}, {3}),
    ({"commands": [{"action": "click", "selector": "a", "tabId": 4}, {"action": "title", "tabId": 5}]}, {4, 5}),
    ({"tabId": 3, "commands": [{"action": "sequence", "tabId": 6, "steps": [{"action": "title"}]},
                               {"action": "if", "condition": "true", "then": [{"action": "title", "tabId": 8}]}]},
     {3, 6, 8}),
    ({"commands": [{"action": "broadcast", "tabIds": [1, 2], "command": {"action": "title"}}]}, {1, 2}),
    ({"commands": [{"action": "getTabs"}]}, set()),
])
def test_the_tabs_of_a_call_known_before_it_runs(body: dict[str, Any], tabs: set[int]) -> None:
    assert tabs_known(_spec(body)) == frozenset(tabs)


@pytest.mark.parametrize("body", [
    {"tabId": 3, "commands": [{"action": "newTab", "url": "http://a.test/"}]},
    {"tabId": 3, "commands": [{"action": "getTabs"}, {"action": "title", "tabId": "${$0.tabs.0.tabId}"}]},
    {"tabId": 3, "commands": [{"action": "sequence", "steps": [{"action": "newTab"}]}]},
])
def test_a_call_whose_tabs_are_known_only_as_it_runs_has_none_known(body: dict[str, Any]) -> None:
    assert tabs_known(_spec(body)) is None


def test_a_parallels_tabs_are_those_of_its_sequences() -> None:
    spec = _spec({"sequences": [[{"action": "click", "selector": "a", "tabId": 1}], [{"action": "title", "tabId": 2}]]},
                 "parallel")
    assert tabs_known(spec) == frozenset({1, 2})


def test_a_forwarded_call_arrives_as_it_was_sent_typed_values_included() -> None:
    spec = _spec({"tabId": 9, "stopOnWarning": True, "timeout": 30, "commands": [
        {"action": "type", "selector": "#q", "text": "s3cret"},
        {"action": "retry", "attempts": 2, "body": [{"action": "click", "selector": "#go"}]}]})
    sent = ForwardedCall(17, spec, ("checkout", "ab" * 32), "alice", "s1", "digest", "kitsune.relay.x", "node-a")
    assert decode(ForwardedCall, encode(sent)) == sent
    assert decode(ForwardedCall, encode(dataclasses.replace(sent, workflow=None, relay=None))).workflow is None


def test_the_rules_digest_is_the_same_for_the_same_rules_and_differs_for_any_other() -> None:
    policy = Policy(caps=frozenset({"core", "automation"}), urls=UrlPolicy.from_config(["a.test"], ["b.test"]))
    same = Policy(caps=frozenset({"automation", "core"}), urls=UrlPolicy.from_config(["a.test"], ["b.test"]))
    assert rules_digest(policy, 30.0) == rules_digest(same, 30.0)
    others = [dataclasses.replace(policy, read_only=True), dataclasses.replace(policy, ask_before_act=True),
              dataclasses.replace(policy, urls=UrlPolicy.from_config(["a.test"])),
              dataclasses.replace(policy, urls=UrlPolicy.from_config(["a.test", "c.test"], ["b.test"])),
              dataclasses.replace(policy, user_tabs_writable=True),
              dataclasses.replace(policy, caps=frozenset({"core"})),
              dataclasses.replace(policy, max_checkpoints=5), dataclasses.replace(policy, live_view=False)]
    digests = {rules_digest(other, 30.0) for other in others} | {rules_digest(policy, 31.0)}
    assert len(digests) == len(others) + 1 and rules_digest(policy, 30.0) not in digests


def test_ended_responses_are_kept_up_to_a_size_the_oldest_going_first(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(calls, "ENDED_BYTES", 450)

    async def run_here(message: RunCall) -> CallResponse:
        return CallResponse({"status": "failed", "call": message.call, "text": "x" * 100, "resume_token": "t"})

    async def no_events(call: int) -> list[Event]:
        return []

    async def scenario() -> tuple[list[str], CallAnswered]:
        kept = CallForwarding("node-b", IoLoop(asyncio.get_running_loop()), LocalBus(), Subjects(),
                              node_of=lambda tab: None,
                              alive=frozenset, record=lambda spec, agent: 0, run_here=run_here,
                              policy_of=lambda agent: Policy(), step_timeout=30.0, workflow_sha256=lambda name: None,
                              reissue_here=lambda call, agent: f"new-{call}", events_of=no_events)
        spec = _spec({"tabId": 1, "commands": [{"action": "title"}]})
        (serve,) = kept.serving().values()
        for call in (1, 2, 3):
            sent = ForwardedCall(call, spec, None, "alice", None, rules_digest(Policy(), 30.0), None, "node-a")
            reply = read_answer(await _answered(serve, sent), CallAnswered)
            assert reply.body["resume_token"] == "t"  # its caller gets it; the kept copy has none
        statuses: list[str] = [read_answer(await _answered(serve, AskCallStatus(c)), CallStatus).status
                               for c in (1, 2, 3)]
        return statuses, read_answer(await _answered(serve, AskCallResult(3)), CallAnswered)

    statuses, result = asyncio.run(scenario())
    assert statuses == ["unknown", "ended", "ended"]  # two fit in 450 bytes: the first went
    assert result.body["resume_token"] == "new-3" and result.status == 200


async def _answered(serve: Handler, request: Message) -> bytes:
    answer = await serve(encode(request))
    assert answer is not None
    return answer
