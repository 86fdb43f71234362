"""The messages between nodes (``messages.wire``, ``messages.fleet``, ``messages.live``) and how a subject reads them.

Every kind survives the codec unchanged and is read back by a reader of its subject; what a subject does not
take is refused with a reason that names what is wrong (a field, a kind, a size) and never a value.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from messages.codec import Reader, decode, encode, read_answer
from messages.commands import CallSpec, GetTabs, parse_command
from messages.errors import KitsuneError
from messages.fleet import (
    Acknowledged,
    AskCallResult,
    AskCallStatus,
    AskNodePart,
    AskThumbnail,
    CallAnswered,
    CallDeclined,
    CallGone,
    CallStatus,
    ClaimDecided,
    ClaimTab,
    DrainNode,
    DrainState,
    ForwardedCall,
    NodePart,
    PingHolder,
    Reissued,
    ReissueToken,
    ReleaseClaims,
    ResumeRequest,
    TakeOver,
    TaskAnswered,
    TaskOp,
    Thumbnail,
    TookOver,
)
from messages.live import (
    AskHandbacks,
    AskPageHint,
    DevtoolsLink,
    FromPerson,
    Handbacks,
    IssueLink,
    LinkChecked,
    LinkIssued,
    OpenView,
    PageHint,
    PingViewer,
    ToPerson,
    ViewEnded,
    ViewerAlive,
    ViewerLeft,
    ViewOpened,
    ViewRefused,
)
from messages.requests import RequestEnded, RequestRunning, RequestWithdrawn, TabCancel, TabRequest
from messages.results import Done, Failure, Unknown
from messages.wire import KINDS, SMALL, ErrorAnswer, Message, Refused

SECRET = "s3cret-value"
SPEC = CallSpec("workflow", (parse_command({"action": "type", "selector": "#q", "text": SECRET}),
                             parse_command({"action": "click", "selector": "#go"})), 4, True, 30.0)

MESSAGES: list[Message] = [
    Acknowledged(),
    TakeOver(3, "alice"), TookOver("user"),
    ClaimTab(7, "0.1", 3, "node-a"), ClaimDecided(None),
    ClaimDecided(Failure("Tab 3 is claimed", "tab_claimed", False, {"tabId": 3, "by": 8})),
    ReleaseClaims(7, None), ReleaseClaims(7, "0.1"),
    ForwardedCall(7, SPEC, ("checkout", "ab" * 32), "alice", "s1", "digest", "kitsune.relay.k", "node-a"),
    ForwardedCall(7, CallSpec("batch", (GetTabs(),)), None, None, None, "digest", None, "node-a"),
    CallAnswered({"status": "failed", "call": 7, "resume_token": "t"}, 200), CallDeclined("rules"),
    AskCallStatus(7), CallStatus("ended"), AskCallResult(7), CallGone(),
    PingHolder(), ResumeRequest(7, "token", {"0": "applied"}, "alice", "s1"), ResumeRequest(7, "token"),
    ReissueToken(7, "alice"), Reissued("token"), Reissued(None),
    DrainNode(), DrainNode(12.5), DrainState("kitsune-0", "draining", 30.0, 2), DrainState("kitsune-1", "left"),
    AskNodePart(), NodePart([{"call": 7}], [], [{"agent": "alice"}], [], [{"tabId": 3, "by": "operator:x"}]),
    AskThumbnail(3), Thumbnail("/9j/4AAQ"),
    TaskOp("checkpoint", "t-0123456789abcdef", "alice", "s1", {"summary": "read", "messages": []}),
    TaskOp("delete", "t-0123456789abcdef", None, None, {"expire": True, "by": "operator:sre"}),
    TaskAnswered({"ok": True}, {"id": "t-0123456789abcdef"}), TaskAnswered(None),
    IssueLink(3, "alice", True, False), IssueLink(3, "alice", True, True, "devtools"), LinkIssued("token", 600.0),
    AskPageHint(3), DevtoolsLink(3, "token", False), DevtoolsLink(3, "token", True), LinkChecked(12.5),
    PageHint({"needs_user": True, "reason": "sign_in", "evidence": "a password field"}),
    AskHandbacks(3, None, 0.0), AskHandbacks(3, 2, 12.5), Handbacks(2, True), OpenView(3, "token", "viewer-1"),
    OpenView(3, "token", "viewer-2", "devtools"),
    ViewOpened(), ViewRefused("live_view_expired", "This link has expired", 4401, 403), PingViewer("viewer-1"),
    ViewerAlive(True), FromPerson({"type": "mouse", "x": 1}), ViewerLeft(), ToPerson({"type": "frame", "data": "x"}),
    ViewEnded("handed_back", "You handed the tab back", 1000),
    TabCancel("a1"), RequestWithdrawn(), RequestRunning(), RequestEnded(Unknown(Failure("lost", "bus_timeout"))),
    RequestEnded(Done({"title": "Shop"})),
    ErrorAnswer(KitsuneError("resume_token_invalid", "The resume token is not valid")),
    ErrorAnswer(KitsuneError("fleet_unavailable", "Node b did not answer", retryable=True, state={"node": "b"})),
]


@pytest.mark.parametrize("message", MESSAGES, ids=[f"{i}-{m.KIND}" for i, m in enumerate(MESSAGES)])
def test_every_message_round_trips_and_is_read_by_its_subject(message: Message) -> None:
    data = encode(message)
    assert orjson.loads(data)["kind"] == message.KIND
    assert decode(type(message), data) == message
    assert Reader([type(message), TabRequest], limit=1 << 20).read(data) == message
    assert encode(decode(type(message), data)) == data


def test_every_kind_is_covered_and_kinds_are_the_class_names_in_snake_case() -> None:
    assert {type(m) for m in MESSAGES} == set(KINDS.values())
    assert KINDS["claim_tab"] is ClaimTab and KINDS["request_ended"] is RequestEnded


def test_a_plain_message_is_read_when_it_names_no_kind() -> None:
    request = TabRequest(parse_command({"action": "title"}), 5.0, id="x")
    reader = Reader([TabRequest, TabCancel], limit=SMALL)
    assert reader.read(encode(request)) == request and reader.read(encode(TabCancel("x"))) == TabCancel("x")


def test_a_request_to_run_as_a_read_travels_as_one_and_runs_as_a_read() -> None:
    command = parse_command({"action": "callSiteTool", "name": "search"})
    plain, as_read = TabRequest(command, 5.0), TabRequest(command, 5.0, as_read=True)
    reader = Reader([TabRequest], limit=SMALL)
    assert reader.read(encode(as_read)) == as_read and reader.read(encode(plain)) == plain
    assert (plain.writes, as_read.writes) == (True, False)


def _reason(reader: Reader, body: Any) -> str:
    with pytest.raises(Refused) as refused:
        reader.read(body if isinstance(body, bytes) else orjson.dumps(body))
    assert refused.value.code == "invalid_message" and SECRET not in refused.value.message
    return refused.value.message


@pytest.mark.parametrize(("body", "reason"), [
    (b"not json " + SECRET.encode(), "not JSON"),
    ([SECRET], "a JSON list, not an object"),
    ({"op": "claim", "call": SECRET}, "an untyped message (no kind)"),
    ({"kind": SECRET}, "a message of an unknown kind"),
    ({"kind": ["claim_tab"]}, "a message of an unknown kind"),
    ({"kind": "open_view", "token": SECRET}, "a message of kind 'open_view', which this subject does not take"),
    ({"kind": "claim_tab", "call": 1, "owner": "0", "tab": 3}, "a malformed claim_tab: no field 'node'"),
    ({"kind": "claim_tab", "call": SECRET, "owner": "0", "tab": 3, "node": "a"},
     "a malformed claim_tab: field 'call' is not an integer"),
    ({"kind": "claim_tab", "call": True, "owner": "0", "tab": 3, "node": "a"},
     "a malformed claim_tab: field 'call' is not an integer"),
    ({"kind": "claim_tab", "call": 1, "owner": 0, "tab": 3, "node": "a"},
     "a malformed claim_tab: field 'owner' is not a string"),
    ({"kind": "release_claims", "call": 1, "owner": [SECRET]},
     "a malformed release_claims: field 'owner' is not a string"),
    ({"kind": "call_declined", "reason": SECRET},
     "a malformed call_declined: field 'reason' is not one of rules, workflow"),
    ({"kind": "forwarded_call", "call": 1, "spec": {"kind": "batch", "commands": [{"action": "type", "text": SECRET}],
                                                      "tabId": 1, "stopOnWarning": False, "timeout": 5},
      "workflow": None, "agent": None, "session": None, "rules": "d", "relay": None, "origin": "a"},
     "a malformed forwarded_call: missing_parameter at command 0"),
    ({"kind": "forwarded_call", "call": 1, "spec": {"kind": "batch", "commands": [], "tabId": 1,
                                                      "stopOnWarning": False, "timeout": 5},
      "workflow": [SECRET], "agent": None, "session": None, "rules": "d", "relay": None, "origin": "a"},
     "a malformed forwarded_call: field 'workflow' is not a pair of strings"),
    ({"kind": "handbacks", "count": 1, "held": "yes"}, "a malformed handbacks: field 'held' is not a boolean"),
    ({"kind": "ask_handbacks", "tab": 1, "since": None, "wait": "long"},
     "a malformed ask_handbacks: field 'wait' is not a number"),
])
def test_a_reader_refuses_what_its_subject_does_not_take_naming_no_value(body: Any, reason: str) -> None:
    reader = Reader([ClaimTab, ReleaseClaims, CallDeclined, ForwardedCall, Handbacks, AskHandbacks])
    assert _reason(reader, body) == reason


def test_a_plain_message_that_does_not_parse_is_refused_by_its_type_name() -> None:
    reader = Reader([TabRequest])
    assert _reason(reader, {"command": {"action": "type", "selector": "#q", "text": SECRET}, "timeout": SECRET}) == \
        "a malformed TabRequest (ValueError)"
    assert _reason(reader, {"command": {"action": "js", "code": SECRET, "bogus": 1}, "timeout": 5}) == \
        "a malformed TabRequest: unknown_parameter at command 0"


def test_a_message_over_its_subjects_bound_is_refused_before_it_is_read() -> None:
    data = encode(ToPerson({"type": "frame", "data": SECRET + "x" * 100}))
    assert _reason(Reader([ToPerson], limit=100), data) == f"{len(data)} bytes, over the 100 a message here may have"
    assert Reader([ToPerson], limit=len(data)).read(data) == decode(ToPerson, data)


def test_an_answer_is_one_of_its_kinds_an_error_answer_is_raised_and_anything_else_refused() -> None:
    assert read_answer(encode(TookOver("alice")), TookOver) == TookOver("alice")
    with pytest.raises(KitsuneError) as raised:
        read_answer(encode(ErrorAnswer(KitsuneError("unknown_tab", "No open tab 3", state={"tabId": 3}))), TookOver)
    assert (raised.value.code, raised.value.state) == ("unknown_tab", {"tabId": 3})
    with pytest.raises(Refused, match="kind 'acknowledged'"):
        read_answer(encode(Acknowledged()), TookOver)
    with pytest.raises(Refused, match="not JSON"):
        read_answer(b"", TookOver)


@pytest.mark.parametrize(("body", "code", "param"), [
    ({"call": 7, "resume_token": "t", "extra": 1}, "unknown_parameter", "extra"),
    ({"call": "7", "resume_token": "t"}, "invalid_parameter", "call"),
    ({"call": True, "resume_token": "t"}, "invalid_parameter", "call"),
    ({"resume_token": "t"}, "invalid_parameter", "call"),
    ({"call": 7, "resume_token": 5}, "invalid_parameter", "resume_token"),
])
def test_a_resume_request_is_parsed_once_at_the_edge(body: dict[str, Any], code: str, param: str) -> None:
    with pytest.raises(KitsuneError) as refused:
        ResumeRequest.from_body(body, "alice", None)
    assert (refused.value.code, (refused.value.state or {}).get("param")) == (code, param)
    parsed = ResumeRequest.from_body({"call": 7, "resume_token": "t", "observed": {"0": "applied"}}, "alice", "s1")
    assert parsed == ResumeRequest(7, "t", {"0": "applied"}, "alice", "s1")
