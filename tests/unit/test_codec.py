"""The wire codec: every typed message survives encode/decode unchanged."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from messages.codec import decode, encode
from messages.commands import (
    ACTIONS,
    Broadcast,
    CallSiteTool,
    Cdp,
    CdpEvents,
    CdpSpec,
    Check,
    Click,
    Clipboard,
    CloseTab,
    Command,
    Cookies,
    Download,
    Fill,
    Find,
    GetTabs,
    If,
    Js,
    KeepSession,
    Navigate,
    NewTab,
    PageText,
    Parallel,
    Press,
    ResetSession,
    Retry,
    Screenshot,
    Select,
    Sequence,
    SiteTools,
    Snapshot,
    Storage,
    SubmitForm,
    SwitchTab,
    SyncBarrier,
    Title,
    Try,
    Type,
    Url,
    WaitFor,
    WaitForResult,
    While,
)
from messages.errors import KitsuneError
from messages.events import (
    EVENT_TYPES,
    BlockWriteSucceeded,
    CallEnded,
    CallResumed,
    CallStarted,
    ContinuationExpired,
    ContinuationRedeemed,
    ContinuationRequested,
    ContinuationRevoked,
    Event,
    OutlineStep,
    SessionChanged,
    SiteToolCalled,
    SiteToolChainCompleted,
    StepDispatched,
    StepFailed,
    StepHeld,
    StepKept,
    StepObserved,
    StepOutcomeUnknown,
    StepSkipped,
    StepStarted,
    StepSucceeded,
)
from messages.references import Ref, Template
from messages.results import Failure, Ok
from messages.steplog import StepRecord

OUTLINE = (
    OutlineStep("newTab"),
    OutlineStep("sequence", 3, steps=(OutlineStep("click", 3), OutlineStep("submitForm", 3))),
    OutlineStep("parallel", sequences=(
        (OutlineStep("navigate", 4), OutlineStep("pageText", 4)),
        (OutlineStep("sequence", 5, steps=(OutlineStep("fill", 5),)),),
    )),
    OutlineStep("if", 3),
)

EVENTS: list[Event] = [
    CallStarted(42, "batch", OUTLINE, 120.0),
    CallResumed(42, "parallel", OUTLINE, 300.0, attempt=2),
    StepStarted(42, "2.1.0.0", "fill", 5),
    StepStarted(42, "0", "newTab", None),
    StepDispatched(42, "1.1"),
    BlockWriteSucceeded(42, "3"),
    StepSucceeded(42, "0"),
    StepSucceeded(42, "1.0", warning="The element was covered; clicked anyway"),
    StepFailed(42, "2.0.1", "not_found", "No element matches main", True),
    StepOutcomeUnknown(42, "1.1", "timeout", "Command timed out after 30s"),
    StepHeld(42, "2.0.0", "needs_user", "The action needs approval; nothing was done"),
    StepSkipped(42, "3", "stopped"),
    StepKept(42, "0", 3),
    StepObserved(42, "1.1", "applied"),
    StepObserved(42, "2.0.0", "not_applied"),
    CallEnded(42, "container_timeout"),
    SessionChanged(42, "opened", "alice", "call:42", "one-shot"),
    SessionChanged(42, "swept", "alice", "shop", "reuse", "swept"),
    SiteToolCalled(42, "0", 3, "checkout", "http://shop.test"),
    ContinuationRequested(42, None, 3, "checkout", "http://shop.test"),
    ContinuationRedeemed(42, "1.0", 3, "try_on", "http://shop.test", "iframe"),
    SiteToolChainCompleted(42, "0", 3, "checkout", "http://shop.test", 3),
    ContinuationExpired(42, "0", 3, "checkout", "http://shop.test"),
    ContinuationRevoked(42, "0", 3, "checkout", "http://shop.test", "timeout"),
]

RECORD = StepRecord(
    "1", 1, "parallel", None, "unknown",
    sequences=(
        (StepRecord("1.0.0", 0, "click", 3, "ok", kept=True, dispatched=True),
         StepRecord("1.0.1", 1, "submitForm", 3, "unknown", dispatched=True, code="timeout",
                    error="Command timed out after 30s")),
        (StepRecord("1.1.0", 0, "sequence", 4, "held", steps=(
            StepRecord("1.1.0.0", 0, "fill", 4, "ok", observed="applied", warning="slow"),
            StepRecord("1.1.0.1", 1, "try", 4, "held", wrote=True, code="needs_user", error="held"),
            StepRecord("1.1.0.2", 2, "pageText", 4, "skipped"),
        )),),
    ),
)

COMMANDS: list[Command] = [
    Navigate(url="https://shop.example/", wait_until="networkidle", tab_id=3, timeout=10.0, label="home"),
    Click(selector=Template(("#row-", Ref(0, ("id",)))), button="middle", click_count=3),
    Type(selector="#q", text="hunter2", submit=Ref(1, ("submit",))),
    Fill(selector="#email", value="ada@example.test"),
    Select(selector="#c", values=("fr", Ref(0, ("code",)))),
    Press(key="Enter"),
    Check(selector="#terms", checked=False),
    SubmitForm(selector="#login", tab_id=Ref(0, ("tabId",))),
    PageText(selector="main", max_chars=100),
    Snapshot(ref="t3d2f1e4", depth=4, max_chars=900, offset=12, interactive=True, boxes=True, since="last"),
    Click(ref="t3d2e13"),
    Find(selector="li", text="Buy", limit=3),
    Url(),
    Title(tab_id=9),
    Screenshot(full_page=True),
    WaitFor(url="**/done", state="hidden", load_state="load"),
    Js(code="return [1, 2]"),
    WaitForResult(code="window.ready", interval=Ref(2, ("interval",))),
    SyncBarrier(barrier="b1"),
    NewTab(url="about:blank"),
    CloseTab(tab_id=4),
    SwitchTab(tab_id=4),
    GetTabs(),
    KeepSession(name="shop", tab_id=4),
    ResetSession(name="shop"),
    Cookies(op="set", cookies=({"name": "sid", "value": "v", "domain": ".shop.example", "httpOnly": True},)),
    Storage(op="remove", area="session", key="cart"),
    Clipboard(op="write", text="copied"),
    Download(selector="a.csv"),
    SiteTools(tab_id=2),
    CallSiteTool(name="checkout", input={"shipping_address": "1 Main St", "items": [1, {"n": None}]}),
    Cdp(method="DOM.getOuterHTML", params={"nodeId": 4}, tab_id=3),
    CdpEvents(enable=("Network", "Log")),
    CdpSpec(domain="DOM"),
    Sequence(steps=(Click(selector="a"), Sequence(steps=(PageText(selector=Ref(0, ("css",))),)))),
    Parallel(sequences=((NewTab(), Url(tab_id=Ref(0, ("tabId",)))), (Title(tab_id=2),))),
    If(condition="!!window.x", then=(Click(selector="a"),), otherwise=(Js(code="1"),)),
    While(condition="more()", body=(Click(selector=".next"),), max_iterations=7),
    Try(body=(Click(selector="a"),), catch=(Screenshot(),)),
    Retry(body=(SubmitForm(),), attempts=5, delay=2.0),
    Broadcast(tab_ids=(1, Ref(0, ("tabId",))), command=Navigate(url="https://shop.example/")),
]

MESSAGES: list[Any] = [
    *EVENTS,
    Ok(),
    Ok({"tabId": 7, "items": [{"text": "a"}], "nested": {"n": None}}),
    Ok({"text": "Hello"}, warning="Text was cut at 20000 characters"),
    Failure("Command timed out after 30s", "timeout"),
    Failure("Tab 3 belongs to another agent", "tab_owned", retryable=False, state={"tabId": 3, "owner": "a2"}),
    Failure("The action needs approval", "needs_user", True, {"confirm": {"token": "t", "expires": 1.5}}),
    KitsuneError("bad_reference", "command 1.2: selector: bad", state={"path": "1.2", "param": "selector"}),
    KitsuneError("checkpoint_not_found", "No checkpoint for call 42"),
    KitsuneError("timeout", "slow", retryable=True, state={"seconds": 30}),
    RECORD,
    StepRecord("0", 0, "click", None, "skipped"),
    *COMMANDS,
]


def _id(message: Any) -> str:
    name = type(message).__name__
    return f"{name}-{message.kind}" if isinstance(message, Event) else name


@pytest.mark.parametrize("message", MESSAGES, ids=[f"{i}-{_id(m)}" for i, m in enumerate(MESSAGES)])
def test_every_message_round_trips_unchanged(message: Any) -> None:
    data = encode(message)
    assert isinstance(data, bytes)
    decoded = decode(type(message), data)
    assert type(decoded) is type(message)
    assert decoded == message
    assert encode(decoded) == data


def test_every_event_type_is_covered() -> None:
    assert {type(e) for e in EVENTS} == set(EVENT_TYPES.values())
    assert {e.kind for e in EVENTS} == set(EVENT_TYPES)


def test_every_command_class_is_covered() -> None:
    assert {type(c) for c in COMMANDS} == set(ACTIONS.values())


@pytest.mark.parametrize("event", EVENTS, ids=[e.kind for e in EVENTS])
def test_an_event_decodes_as_event_into_its_own_kind(event: Event) -> None:
    decoded = decode(Event, encode(event))
    assert type(decoded) is type(event)
    assert decoded == event


@pytest.mark.parametrize("command", COMMANDS, ids=[c.action for c in COMMANDS])
def test_a_command_decodes_as_command_into_its_own_class(command: Command) -> None:
    decoded = decode(Command, encode(command))
    assert type(decoded) is type(command)
    assert decoded == command


def test_an_event_wire_form_carries_its_type_and_fields() -> None:
    assert orjson.loads(encode(StepFailed(7, "0.1.3", "not_found", "No element", False))) == {
        "type": "StepFailed", "call": 7, "path": "0.1.3", "code": "not_found", "error": "No element",
        "retryable": False}


def test_call_started_outline_nests_sequences_and_parallels_on_the_wire() -> None:
    wire = orjson.loads(encode(CallStarted(1, "batch", OUTLINE[1:3], 60.0)))
    assert wire["outline"] == [
        {"action": "sequence", "tab_id": 3, "steps": [{"action": "click", "tab_id": 3},
                                                      {"action": "submitForm", "tab_id": 3}]},
        {"action": "parallel", "tab_id": None, "sequences": [
            [{"action": "navigate", "tab_id": 4}, {"action": "pageText", "tab_id": 4}],
            [{"action": "sequence", "tab_id": 5, "steps": [{"action": "fill", "tab_id": 5}]}]]},
    ]


def test_resumed_call_keeps_its_outline_and_attempt() -> None:
    decoded = decode(CallResumed, encode(EVENTS[1]))
    assert isinstance(decoded, CallResumed)
    assert decoded.attempt == 2
    assert decoded.outline[2].sequences[1][0].steps == (OutlineStep("fill", 5),)


def test_result_wire_forms_follow_the_contract() -> None:
    assert orjson.loads(encode(Ok({"tabId": 7}, warning="w"))) == {"ok": True, "tabId": 7, "warning": "w"}
    assert orjson.loads(encode(Failure("gone", "tab_closed"))) == {
        "error": "gone", "code": "tab_closed", "retryable": False}
    assert orjson.loads(encode(KitsuneError("too_deep", "deep", state={"path": "0.0"}))) == {
        "error": "deep", "code": "too_deep", "retryable": False, "state": {"path": "0.0"}}


def test_results_decode_into_their_own_class_and_a_failure_is_no_ok() -> None:
    assert decode(Ok, encode(Ok({"a": 1}))) == Ok({"a": 1})
    with pytest.raises(TypeError, match="expected Ok, got Failure"):
        decode(Ok, encode(Failure("x", "y")))


def test_decoding_into_the_wrong_class_raises_type_error() -> None:
    with pytest.raises(TypeError, match="expected StepFailed, got StepSucceeded"):
        decode(StepFailed, encode(StepSucceeded(1, "0")))
    with pytest.raises(TypeError, match="expected Click, got Url"):
        decode(Click, encode(Url()))


def test_encoding_an_untyped_value_raises_type_error() -> None:
    with pytest.raises(TypeError, match="no wire form for dict"):
        encode({"ok": True})
