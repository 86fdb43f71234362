"""A node refuses what a fleet subject does not take, on every subject, and goes on serving (``messages.wire``).

One node with its Chromium, on a nats-server of its own that lets messages of 4 MB through (NATS's default
is 1 MB), so that an oversized message reaches the node and its own bound refuses it. On every subject a
node serves (its ``open``, ``tabs``, ``claims``, ``call``, ``live`` and ``console``, the fleet's
``tabs.list``, a tab's, a held checkpoint's, both ways of a relayed Live View, a forwarded call's relay of
events), it is sent: garbage bytes, valid JSON of the wrong shape (the untyped form these requests
had), a message of another subject's kind, one of the subject's own kinds with a field of the wrong type,
and one over the subject's bound, each carrying a secret. Each is answered ``invalid_message`` where the
subject answers (a failed outcome where its answers are a step's: nothing was sent), and logged with the
subject and the reason, never the secret; then the subject serves a well-formed request.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import secrets
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest

from actors.bus import NatsBus
from actors.call_actor import RunCall
from actors.loop import IoLoop
from actors.nats_server import free_port, nats_server_binary, server_answers
from bridge.fleet.calls import CallForwarding
from bridge.live.viewer import RelayedViewer
from bridge.node import Node
from bridge.wiring import run_node
from core.calls import CallResponse
from core.policy import Policy
from core.settings import NatsConfig, NodeConfig
from driver import ChromiumBrowser
from messages.codec import decode_outcome, encode, read_answer
from messages.commands import CallSpec, GetTabs, NewTab, parse_body, parse_command
from messages.errors import KitsuneError
from messages.events import CallEnded, CallStarted, Event
from messages.fleet import (
    Acknowledged,
    AskCallStatus,
    AskNodePart,
    CallAnswered,
    CallStatus,
    NodePart,
    PingHolder,
    ReleaseClaims,
    ResumeRequest,
)
from messages.live import OpenView, PingViewer, ToPerson, ViewerAlive
from messages.requests import Subjects, TabRequest
from messages.results import Done, Failed
from messages.wire import LARGE, SMALL, Message
from tests.integration.browser_fixtures import LoopThread
from tests.integration.fleet_nodes import until

FLEET = "wire"
NODE = "wire-node"
SUBJECTS = Subjects(FLEET)
SECRET = "s3cret-" + secrets.token_hex(8)
"""Carried by every bad message: it must reach no log line."""
MAX_PAYLOAD = 4 * 1024 * 1024


@pytest.fixture(scope="module")
def wide_nats(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A nats-server with JetStream that takes messages of :data:`MAX_PAYLOAD` bytes; its URL."""
    binary = nats_server_binary()
    assert binary is not None, "nats-server is not installed"
    run = tmp_path_factory.mktemp("wide-nats")
    (run / "server.conf").write_text(json.dumps({"max_payload": MAX_PAYLOAD}))
    port, name = free_port(), f"wire-{secrets.token_hex(4)}"
    server = subprocess.Popen([str(binary), "-c", str(run / "server.conf"), "-a", "127.0.0.1", "-p", str(port),
                               "-n", name, "-js", "-sd", str(run / "store")], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        until(lambda: server_answers(port, name), 10, "the nats-server answering")
        yield f"nats://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)


@pytest.fixture(scope="module")
def node(wide_nats: str) -> Iterator[Node]:
    config = NodeConfig(nats=NatsConfig(wide_nats), fleet=FLEET, name=NODE, step_timeout=5.0)
    started = run_node(ChromiumBrowser(), config)
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def sender(wide_nats: str) -> Iterator[tuple[LoopThread, NatsBus]]:
    """A bus of another process's, on a loop of its own, that sends what it is told to."""
    loop = LoopThread()
    bus = loop.run(NatsBus.connect(wide_nats, name="wire-sender"))
    try:
        yield loop, bus
    finally:
        loop.run(bus.close())
        loop.close()


@pytest.fixture(scope="module")
def tab(node: Node, sender: tuple[LoopThread, NatsBus]) -> int:
    """A tab of the node, opened as another node's call opens one: on its ``open`` subject."""
    outcome = decode_outcome(_ask(sender, SUBJECTS.node(NODE, "open"), TabRequest(NewTab(), 15.0)))
    assert isinstance(outcome, Done), outcome
    return int(outcome.value["tabId"])


def _ask(sender: tuple[LoopThread, NatsBus], subject: str, message: Any) -> bytes:
    loop, bus = sender
    return loop.run(bus.request(subject, message if isinstance(message, bytes) else encode(message), 20.0))


def _publish(sender: tuple[LoopThread, NatsBus], subject: str, data: bytes) -> None:
    loop, bus = sender
    loop.run(bus.publish(subject, data))


def _bad_messages(wrong: dict[str, Any], wrong_reason: str, other: Message, limit: int,
                  plain: str | None = None) -> list[tuple[bytes, str]]:
    """Each bad message for a subject, with the reason it is refused for: ``wrong`` is one of the subject's
    kinds with a field of the wrong type, ``other`` a message of another subject's; ``plain``: the name of the
    subject's plain message type, which a message naming no kind is read as."""
    oversized = orjson.dumps({**wrong, "pad": SECRET + "x" * limit})
    return [
        (b"\x93 not json " + SECRET.encode(), "not JSON"),
        (orjson.dumps({"op": "own", "tab": 1, "agent": SECRET}),
         f"a malformed {plain} (KeyError)" if plain else "an untyped message (no kind)"),
        (encode(other), f"a message of kind {other.KIND!r}, which this subject does not take"),
        (orjson.dumps(wrong), wrong_reason),
        (oversized, f"{len(oversized)} bytes, over the {limit} a message here may have"),
    ]


def _refusals(caplog: pytest.LogCaptureFixture, subject: str) -> list[str]:
    prefix = f"refused a message on {subject}: "
    return [r.getMessage().removeprefix(prefix) for r in caplog.records
            if r.name == "actors.serving" and r.getMessage().startswith(prefix)]


def _refused_each(caplog: pytest.LogCaptureFixture, subject: str, bad: list[tuple[bytes, str]],
                  send: Callable[[bytes], Any]) -> list[Any]:
    """Send each bad message: each is logged with the subject and its reason, none with the secret; their answers."""
    caplog.clear()
    answers = [send(data) for data, _ in bad]
    until(lambda: len(_refusals(caplog, subject)) >= len(bad), 10, f"the refusals logged on {subject}")
    assert _refusals(caplog, subject) == [reason for _, reason in bad]
    assert SECRET not in caplog.text
    return answers


NODE_SUBJECTS: dict[str, tuple[dict[str, Any], str, Message, Message, Callable[[Any], bool]]] = {
    # op: a kind of its own with a wrong field, and its reason; another subject's message; a well-formed
    # request, and what its answer is
    "claims": ({"kind": "release_claims", "call": SECRET, "owner": None},
               "a malformed release_claims: field 'call' is not an integer", OpenView(1, SECRET, "v"),
               ReleaseClaims(1, None), lambda answer: answer == Acknowledged()),
    "call": ({"kind": "ask_call_status", "call": SECRET},
             "a malformed ask_call_status: field 'call' is not an integer", OpenView(1, SECRET, "v"),
             AskCallStatus(1), lambda answer: answer == CallStatus("unknown")),
    "live": ({"kind": "issue_link", "tab": 1, "agent": "a", "control": SECRET, "granted": False},
             "a malformed issue_link: field 'control' is not a boolean", ResumeRequest(1, SECRET),
             PingViewer("nobody"), lambda answer: answer == ViewerAlive(False)),
    "console": ({"kind": "ask_thumbnail", "tab": SECRET},
                "a malformed ask_thumbnail: field 'tab' is not an integer", OpenView(1, SECRET, "v"),
                AskNodePart(), lambda answer: isinstance(answer, NodePart)),
}


@pytest.mark.parametrize("op", sorted(NODE_SUBJECTS))
def test_a_nodes_request_subject_refuses_what_it_does_not_take_and_serves_the_next(
        node: Node, sender: tuple[LoopThread, NatsBus], caplog: pytest.LogCaptureFixture, op: str) -> None:
    caplog.set_level(logging.WARNING, logger="actors.serving")
    subject = SUBJECTS.node(NODE, op)
    wrong, reason, other, well_formed, answered = NODE_SUBJECTS[op]
    limit = LARGE if op == "call" else SMALL  # a forwarded call carries its commands
    for answer in _refused_each(caplog, subject, _bad_messages(wrong, reason, other, limit),
                                lambda data: _ask(sender, subject, data)):
        with pytest.raises(KitsuneError) as refused:
            read_answer(answer, Acknowledged)
        assert refused.value.code == "invalid_message" and SECRET not in refused.value.message
    assert answered(read_answer(_ask(sender, subject, well_formed), type(well_formed), Acknowledged, CallStatus,
                                ViewerAlive, NodePart))


@pytest.mark.parametrize("which", ["open", "tabs", "tabs.list", "tab"])
def test_a_subject_of_steps_refuses_with_a_failed_outcome_nothing_sent_and_serves_the_next(
        node: Node, sender: tuple[LoopThread, NatsBus], tab: int, caplog: pytest.LogCaptureFixture,
        which: str) -> None:
    caplog.set_level(logging.WARNING, logger="actors.serving")
    subject = {"tab": SUBJECTS.tab(tab), "tabs.list": SUBJECTS.tabs}.get(which) or SUBJECTS.node(NODE, which)
    wrong = {"command": {"action": "type", "selector": "#q", "text": SECRET}, "timeout": "soon"}
    bad = _bad_messages(wrong, "a malformed TabRequest (ValueError)", OpenView(1, SECRET, "v"),
                        LARGE if which == "tab" else SMALL, "TabRequest")
    for answer in _refused_each(caplog, subject, bad, lambda data: _ask(sender, subject, data)):
        outcome = decode_outcome(answer)
        assert isinstance(outcome, Failed) and outcome.failure.code == "invalid_message", outcome
    if which == "open":  # a request of another action than the subject's
        caplog.clear()
        title = decode_outcome(_ask(sender, subject, TabRequest(parse_command({"action": "title"}), 5.0)))
        assert isinstance(title, Failed) and title.failure.code == "invalid_message"
        assert _refusals(caplog, subject) == ["a title request, where a newTab was expected"]
    well_formed = {"open": TabRequest(NewTab(), 15.0), "tab": TabRequest(parse_command({"action": "url"}), 5.0)}
    outcome = decode_outcome(_ask(sender, subject, well_formed.get(which, TabRequest(GetTabs(), 5.0))))
    assert isinstance(outcome, Done), outcome


def test_a_checkpoints_subject_refuses_what_it_does_not_take_and_serves_the_next(
        node: Node, sender: tuple[LoopThread, NatsBus], tab: int, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="actors.serving")
    spec = parse_body("batch", {"tabId": tab, "commands": [{"action": "click", "selector": "#nowhere",
                                                             "timeout": 0.5}]})
    call = node.io.run(node.run_async(RunCall(spec)), timeout=60).body["call"]
    assert node.resumes.holds(call)
    subject = SUBJECTS.checkpoint(call)
    bad = _bad_messages({"kind": "resume_request", "call": call, "resume_token": 5, "observed": SECRET},
                        "a malformed resume_request: field 'resume_token' is not a string", OpenView(1, SECRET, "v"),
                        LARGE)
    for answer in _refused_each(caplog, subject, bad, lambda data: _ask(sender, subject, data)):
        with pytest.raises(KitsuneError) as refused:
            read_answer(answer, CallAnswered)
        assert refused.value.code == "invalid_message"
    assert read_answer(_ask(sender, subject, PingHolder()), Acknowledged) == Acknowledged()
    with pytest.raises(KitsuneError) as wrong_token:  # served, under the holder's rules
        read_answer(_ask(sender, subject, ResumeRequest(call, "not-its-token")), CallAnswered)
    assert wrong_token.value.code == "resume_token_invalid" and node.resumes.holds(call)


def test_a_relayed_live_view_refuses_what_its_subjects_do_not_take_and_goes_on(
        node: Node, sender: tuple[LoopThread, NatsBus], tab: int, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="actors.serving")
    loop, bus = sender
    link = node.io.run(node.live.issue(tab, "operator:wire", "http://wire.test"), timeout=10)
    heard: list[dict[str, Any]] = []

    async def to_person(message: dict[str, Any]) -> None:
        heard.append(message)

    viewer_id = "viewer-" + secrets.token_hex(4)
    viewer = RelayedViewer(bus, SUBJECTS, NODE, viewer_id, to_person)  # this process is the node the person reached
    loop.run(viewer.start(tab, link["url"].split("#t=")[1]))
    try:
        until(lambda: any(m.get("type") == "ready" for m in heard), 10, "the view ready")
        for direction, wrong, reason in [
                ("in", {"kind": "from_person", "message": SECRET},
                 "a malformed from_person: field 'message' is not an object"),
                ("out", {"kind": "view_ended", "code": "x", "message": SECRET, "close_code": "1000"},
                 "a malformed view_ended: field 'close_code' is not an integer")]:
            subject = SUBJECTS.live(viewer_id, direction)
            _refused_each(caplog, subject, _bad_messages(wrong, reason, OpenView(tab, SECRET, viewer_id), LARGE),
                          functools.partial(_publish, sender, subject))
        loop.run(bus.publish(SUBJECTS.live(viewer_id, "out"), encode(ToPerson({"type": "note"}))))
        until(lambda: {"type": "note"} in heard, 10, "a well-formed message relayed to the person")
        loop.run(viewer.deliver({"type": "done"}))  # the person hands the tab back, through the relay
        assert loop.run(viewer.ended(), timeout=10)[0] == "handed_back"
    finally:
        loop.run(viewer.close())


def test_a_calls_relay_of_events_refuses_what_it_does_not_take_and_goes_on(
        wide_nats: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="actors.serving")
    heard: list[Event] = []

    async def scenario() -> CallResponse | None:
        there, here, sniffer = [await NatsBus.connect(wide_nats) for _ in range(3)]
        relays: list[str] = []
        injected = asyncio.Event()

        async def run_there(message: RunCall) -> CallResponse:  # the call's node: its events relayed as they happen
            assert message.listener is not None and message.call is not None
            message.listener(CallStarted(message.call, "batch", (), 10.0))
            await asyncio.wait_for(injected.wait(), 20)
            message.listener(CallEnded(message.call, "completed"))
            return CallResponse({"status": "ok", "call": message.call})

        async def sniffed(msg: Any) -> None:
            relays.append(msg.subject)

        (subject, serve), = _forwarding("node-b", there, run_there).serving().items()
        serving = await there.subscribe(subject, serve, concurrent=True)
        await sniffer.client.subscribe(f"{FLEET}.relay.*", cb=sniffed)
        spec = CallSpec("batch", (parse_command({"action": "title"}),), default_tab=7)
        running = asyncio.ensure_future(_forwarding("node-a", here).run(RunCall(spec, listener=heard.append)))
        try:
            while not relays:
                await asyncio.sleep(0.05)
            bad = _bad_messages({"type": "CallEnded", "call": 1}, "a malformed Event (KeyError)",
                                OpenView(1, SECRET, "v"), LARGE, "Event")
            await asyncio.to_thread(_refused_each, caplog, relays[0], bad,
                                    lambda data: asyncio.run_coroutine_threadsafe(
                                        sniffer.publish(relays[0], data), loop).result(5))
            injected.set()
            return await asyncio.wait_for(running, 30)
        finally:
            await serving.unsubscribe()
            for bus in (there, here, sniffer):
                await bus.close()

    loop = asyncio.new_event_loop()
    try:
        response = loop.run_until_complete(scenario())
    finally:
        loop.close()
    assert response is not None and response.body["status"] == "ok"
    assert [type(event) for event in heard] == [CallStarted, CallEnded]  # the relay went on; nothing else was heard


def _forwarding(name: str, bus: NatsBus, run_here: Any = None) -> CallForwarding:
    """One of two ends that forward calls to each other (every tab is ``node-b``'s), the run faked."""
    async def no_events(call: int) -> list[Event]:
        return []

    forwarding = CallForwarding(
        name, IoLoop(asyncio.get_running_loop()), bus, SUBJECTS, node_of=lambda tab: "node-b",
        alive=lambda: frozenset({"node-a", "node-b"}), record=lambda spec, agent: 4242, run_here=run_here,
        policy_of=lambda agent: Policy(), step_timeout=30.0, workflow_sha256=lambda name: None,
        reissue_here=lambda call, agent: None, events_of=no_events)
    return forwarding
