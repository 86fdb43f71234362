"""The step engine, first run: statuses, events, references, blocks, parallel claims, secrets.

Each test is named after the rule it checks. Calls run through ``World`` (the pure core wired
with a fake clock and a scripted driver); resume rules are tested elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from actors.threads import ThreadedSequences
from core.calls import Calls, SequentialIds
from core.claims import Claim
from core.engine import Ports
from core.ports import Recorded
from messages.codec import decode, encode
from messages.commands import Command, parse_call
from messages.errors import KitsuneError
from messages.events import (
    BlockWriteSucceeded,
    CallEnded,
    CallResumed,
    CallStarted,
    Event,
    StepDispatched,
    StepFailed,
    StepHeld,
    StepSkipped,
    StepStarted,
    StepSucceeded,
)
from messages.results import Failed, Failure, Outcome, Unknown
from messages.steplog import fold
from tests.unit.fakes import FakeClock, ScriptedDriver, World
from tests.unit.helpers import DEFAULT_TAB, click, find, parallel

FIRST_CALL = 1  # World numbers calls from 1

# --- helpers -------------------------------------------------------------------------------


def run(world: World, commands: list[dict[str, Any]], *, kind: str = "batch", **options: Any) -> dict[str, Any]:
    """Parse and run a call; its response body."""
    options.setdefault("default_tab", DEFAULT_TAB)
    spec = parse_call(kind, commands, **options)  # type: ignore[arg-type]
    return world.calls.run(spec).body


def statuses(progress: list[dict[str, Any]]) -> list[str]:
    return [p["status"] for p in progress]


def kinds(events: list[Event]) -> list[str]:
    return [e.kind for e in events]


def path_events(events: list[Event], path: str) -> list[str]:
    """Kinds of the events of one step, in order."""
    return [e.kind for e in events if getattr(e, "path", None) == path]


def sent_keys(world: World) -> list[str]:
    return [s.key for s in world.driver.sent]


def assert_fold_matches(world: World, body: dict[str, Any], call: int = FIRST_CALL) -> None:
    """The report is the fold of the call's events, also after each event went over the wire."""
    events = world.events_of(call)
    step_log = fold(events)
    assert step_log.progress == body["progress"]
    assert step_log.status == body["status"]
    assert step_log.summary == body["summary"]
    wire = [decode(Event, encode(e)) for e in events]
    assert wire == events
    again = fold(wire)
    assert again.progress == body["progress"]
    assert again.status == body["status"]
    assert again.summary == body["summary"]


class EventCountingDriver(ScriptedDriver):
    """Records, for every command it receives, the events emitted before it was called."""

    def __init__(self, clock: FakeClock, events: list[Event]) -> None:
        super().__init__(clock)
        self.events = events
        self.seen_at_send: list[tuple[str, list[Event]]] = []

    def execute(self, command: Command, tab_id: int | None, timeout: float,
                recorded: Sequence[Recorded] = (), *, as_read: bool = False) -> Outcome:
        self.seen_at_send.append((self.key_of(command), list(self.events)))
        return super().execute(command, tab_id, timeout, recorded, as_read=as_read)


def counting_world() -> tuple[World, EventCountingDriver]:
    world = World()
    driver = EventCountingDriver(world.clock, world.events)
    world.driver = driver
    world.calls = Calls(lambda agent: Ports(driver, world.clock, world.claims, ThreadedSequences()), world.store,
                        audit=SequentialIds(), sink=world.events.append)
    return world, driver


@pytest.fixture
def world() -> World:
    return World()


# --- batch ---------------------------------------------------------------------------------


def test_batch_all_ok_is_ok_without_checkpoint_fields(world: World) -> None:
    body = run(world, [click("#a"), find("#list"), click("#b")])

    assert body["status"] == "ok"
    assert "call" not in body and "resume_token" not in body
    assert body["summary"] == "3 commands: 3 ok."
    assert body["results"] == [{"ok": True}, {"ok": True, "text": "text of #list"}, {"ok": True}]
    assert sent_keys(world) == ["#a", "#list", "#b"]


def test_failure_stops_batch_and_trailing_skipped_steps_have_no_result(world: World) -> None:
    world.driver.on("#b", "fail")
    body = run(world, [click("#a"), click("#b"), click("#c"), find("#d")])

    assert body["status"] == "failed"
    assert statuses(body["progress"]) == ["ok", "failed", "skipped", "skipped"]
    assert body["results"] == [{"ok": True},
                               {"error": "No element matches #b", "code": "not_found", "retryable": False}]
    assert sent_keys(world) == ["#a", "#b"]
    assert body["summary"] == ("4 commands: 1 ok, 1 failed, 2 skipped. Step 1 (click on tab 3) failed: "
                               "No element matches #b. The failure is not retryable: a resume would meet it again, so "
                               "fix its cause or send a new call.")
    assert isinstance(body["call"], int) and isinstance(body["resume_token"], str)


def test_progress_records_are_exactly_index_action_tab_status_with_default_tab(world: World) -> None:
    world.driver.on("#b", "fail")
    body = run(world, [click("#a"), click("#b", tab=2), {"action": "pageText"}])

    assert body["progress"] == [
        {"index": 0, "action": "click", "tabId": DEFAULT_TAB, "status": "ok"},
        {"index": 1, "action": "click", "tabId": 2, "status": "failed"},
        {"index": 2, "action": "pageText", "tabId": DEFAULT_TAB, "status": "skipped"},
    ]
    assert [(s.key, s.tab) for s in world.driver.sent] == [("#a", DEFAULT_TAB), ("#b", 2)]


# --- events --------------------------------------------------------------------------------


def test_call_started_is_first_and_call_ended_is_last(world: World) -> None:
    world.driver.on("#b", "fail")
    run(world, [click("#a"), click("#b"), click("#c")])
    events = world.events_of(FIRST_CALL)

    assert isinstance(events[0], CallStarted)
    assert isinstance(events[-1], CallEnded)
    assert events[-1].reason == "stopped"
    assert kinds(events).count("CallStarted") == 1 and kinds(events).count("CallEnded") == 1
    # each next write is recorded ahead as the step before it is sent; #c's turn never comes: skipped
    assert [(e.kind, getattr(e, "path", None)) for e in events] == [
        ("CallStarted", None), ("StepStarted", "0"), ("StepDispatched", "0"), ("StepDispatched", "1"),
        ("StepSucceeded", "0"), ("StepStarted", "1"), ("StepDispatched", "2"), ("StepFailed", "1"),
        ("StepSkipped", "2"), ("CallEnded", None)]


def test_call_that_ran_ok_ends_completed(world: World) -> None:
    run(world, [click("#a")])
    last = world.events_of(FIRST_CALL)[-1]
    assert isinstance(last, CallEnded) and last.reason == "completed"


def test_write_is_started_then_dispatched_before_driver_is_called() -> None:
    world, driver = counting_world()
    run(world, [click("#a"), click("#b", tab=2)])  # the first write of a list: recorded at its turn

    _, before_click = driver.seen_at_send[0]
    assert [(e.kind, getattr(e, "path", None)) for e in before_click[-3:]] == [
        ("StepStarted", "0"), ("StepDispatched", "0"), ("StepDispatched", "1")]  # then #b's, ahead
    started = before_click[-3]
    assert isinstance(started, StepStarted) and started.action == "click" and started.tab_id == DEFAULT_TAB


def test_next_write_is_dispatched_ahead_as_the_step_before_it_is_sent() -> None:
    world, driver = counting_world()
    run(world, [find("#list"), click("#a")])

    assert [key for key, _ in driver.seen_at_send] == ["#list", "#a"]
    _, before_find = driver.seen_at_send[0]
    assert [(e.kind, getattr(e, "path", None)) for e in before_find[-2:]] == [
        ("StepStarted", "0"), ("StepDispatched", "1")]
    _, before_click = driver.seen_at_send[1]
    assert [(e.kind, getattr(e, "path", None)) for e in before_click[-2:]] == [
        ("StepSucceeded", "0"), ("StepStarted", "1")]
    assert path_events(world.events, "1") == ["StepDispatched", "StepStarted", "StepSucceeded"]
    record = fold(world.events).find("1")
    assert record is not None and record.dispatched and record.tab_id == DEFAULT_TAB


def test_read_is_never_dispatched() -> None:
    world, driver = counting_world()
    run(world, [find("#list"), {"action": "pageText"}, {"action": "title"}])

    for path in ("0", "1", "2"):
        assert path_events(world.events, path) == ["StepStarted", "StepSucceeded"]
    _, before_find = driver.seen_at_send[0]
    assert isinstance(before_find[-1], StepStarted) and before_find[-1].path == "0"
    assert not any(isinstance(e, StepDispatched) for e in world.events)


def _scenario_batch(world: World) -> dict[str, Any]:
    world.driver.on("#b", "unknown")
    return run(world, [click("#a"), find("#x"), click("#b"), click("#c")])


def _scenario_nested(world: World) -> dict[str, Any]:
    world.driver.on("#s1", "fail_retryable")
    return run(world, [{"action": "newTab"},
                       {"action": "sequence", "steps": [click("#s0"), click("#s1"), find("#s2")]},
                       click("#after")])


def _scenario_parallel(world: World) -> dict[str, Any]:
    world.driver.on("#p0", "fail")
    return run(world, [parallel([click("#p0", tab=1), click("#p1", tab=1)],
                                [click("#q0", tab=2), find("#q1", tab=2), click("#q2", tab=2)],
                                [click("#r0", tab=1)])], kind="parallel")


def _scenario_hold_and_warning(world: World) -> dict[str, Any]:
    world.driver.on("#w", "warn").on("#h", "hold")
    return run(world, [click("#w"), {"action": "try", "body": [click("#t")], "catch": [click("#c")]},
                       click("#h"), click("#z")])


def _scenario_timeout(world: World) -> dict[str, Any]:
    world.driver.on("#slow", "hang")
    return run(world, [click("#a"), click("#slow"), click("#never")], timeout=5)


@pytest.mark.parametrize("scenario", [_scenario_batch, _scenario_nested, _scenario_parallel,
                                      _scenario_hold_and_warning, _scenario_timeout],
                         ids=["batch", "nested", "parallel", "hold_and_warning", "timeout"])
def test_fold_of_events_equals_reported_progress_status_summary_also_over_the_wire(
        world: World, scenario: Any) -> None:
    body = scenario(world)
    assert body["status"] != "ok"  # every scenario has something for the summary to say
    assert_fold_matches(world, body)


# --- statuses ------------------------------------------------------------------------------


@pytest.mark.parametrize(("answer", "retryable"), [("fail", False), ("fail_retryable", True)])
def test_failure_is_failed_with_retryable_as_given(world: World, answer: str, retryable: bool) -> None:
    world.driver.on("#a", answer)
    body = run(world, [click("#a"), click("#b")])

    assert body["status"] == "failed"
    assert statuses(body["progress"]) == ["failed", "skipped"]
    assert body["results"][0]["retryable"] is retryable
    assert body["results"][0]["code"] == ("not_found" if answer == "fail" else "not_ready")
    failed = [e for e in world.events if isinstance(e, StepFailed)]
    assert [(e.path, e.retryable) for e in failed] == [("0", retryable)]
    assert world.driver.writes_sent() == 1


def test_read_failure_is_failed_and_never_dispatched(world: World) -> None:
    world.driver.on("#x", "fail")
    body = run(world, [find("#x"), click("#b")])

    assert statuses(body["progress"]) == ["failed", "skipped"]
    record = fold(world.events).find("0")
    assert record is not None and record.dispatched is False and record.code == "not_found"


def test_unknown_outcome_is_unknown_and_stops_batch(world: World) -> None:
    world.driver.on("#submit", "unknown")
    body = run(world, [click("#a"), click("#submit"), click("#c")])

    assert body["status"] == "unknown"
    assert statuses(body["progress"]) == ["ok", "unknown", "skipped"]
    assert body["results"][1] == {"error": "The page navigated while the command ran", "code": "navigated",
                                  "retryable": False}
    assert len(body["results"]) == 2
    assert sent_keys(world) == ["#a", "#submit"]
    assert path_events(world.events, "1") == ["StepDispatched", "StepStarted", "StepOutcomeUnknown"]
    assert path_events(world.events, "2") == ["StepDispatched", "StepSkipped"]  # recorded ahead, never sent
    assert body["summary"].startswith("3 commands: 1 ok, 1 unknown, 1 skipped. Step 1 (click on tab 3) "
                                      "has an unknown outcome: The page navigated while the command ran.")


def test_held_step_is_held_and_stops_batch(world: World) -> None:
    world.driver.on("#buy", "hold")
    body = run(world, [click("#a"), click("#buy"), click("#c")])

    assert body["status"] == "held"
    assert statuses(body["progress"]) == ["ok", "held", "skipped"]
    assert body["results"][1]["code"] == "needs_user"
    assert len(body["results"]) == 2
    assert sent_keys(world) == ["#a", "#buy"]
    assert [type(e) for e in world.events if getattr(e, "path", None) == "1"][-1] is StepHeld
    assert all(b"confirm-secret" not in encode(e) for e in world.events)  # a confirm token never enters an event


def test_write_hanging_past_container_deadline_is_unknown_container_timeout(world: World) -> None:
    world.driver.on("#slow", "hang")
    body = run(world, [click("#a"), click("#slow"), click("#c"), find("#d")], timeout=5)

    assert body["status"] == "unknown"
    assert statuses(body["progress"]) == ["ok", "unknown", "skipped", "skipped"]
    assert body["results"][1]["code"] == "container_timeout"
    assert len(body["results"]) == 2
    assert sent_keys(world) == ["#a", "#slow"]
    end = world.events_of(FIRST_CALL)[-1]
    assert isinstance(end, CallEnded) and end.reason == "container_timeout"
    assert "The call reached its 5s deadline." in body["summary"]


def test_write_never_sent_before_the_container_deadline_is_failed_not_unknown(world: World) -> None:
    world.driver.on("#queued", "busy")  # its tab stayed busy with other writes until the deadline
    body = run(world, [click("#a"), click("#queued"), click("#c")], timeout=5)

    assert body["status"] == "failed"
    assert statuses(body["progress"]) == ["ok", "failed", "skipped"]
    assert body["results"][1]["code"] == "container_timeout"
    resumed = world.calls.resume(body["call"], body["resume_token"]).body  # a failed step needs no observation
    assert resumed["status"] == "ok"
    assert world.driver.writes_sent("#a") == 1 and world.driver.writes_sent("#queued") == 2


def test_read_in_flight_at_container_deadline_is_unknown(world: World) -> None:
    world.driver.on("#list", "hang")
    body = run(world, [find("#list"), click("#c")], timeout=5)

    assert body["status"] == "unknown"
    assert statuses(body["progress"]) == ["unknown", "skipped"]
    assert body["results"][0]["code"] == "container_timeout"
    assert sent_keys(world) == ["#list"]
    end = world.events_of(FIRST_CALL)[-1]
    assert isinstance(end, CallEnded) and end.reason == "container_timeout"


# --- stopOnWarning -------------------------------------------------------------------------


def test_warning_stops_batch_when_stop_on_warning(world: World) -> None:
    world.driver.on("#a", "warn")
    body = run(world, [click("#a"), click("#b"), find("#c")], stop_on_warning=True)

    assert body["status"] == "skipped"
    assert statuses(body["progress"]) == ["ok", "skipped", "skipped"]
    assert body["results"] == [{"ok": True, "warning": "the page looks different than expected"}]
    assert sent_keys(world) == ["#a"]
    assert body["summary"] == ("3 commands: 1 ok, 2 skipped. Stopped at a warning of step 0 (click on tab 3): "
                               "the page looks different than expected. Resume to run the skipped steps.")
    assert "resume_token" in body


def test_warning_does_not_stop_batch_without_stop_on_warning(world: World) -> None:
    world.driver.on("#a", "warn")
    body = run(world, [click("#a"), click("#b"), find("#c")])

    assert body["status"] == "ok"
    assert statuses(body["progress"]) == ["ok", "ok", "ok"]
    assert body["results"][0]["warning"] == "the page looks different than expected"
    assert sent_keys(world) == ["#a", "#b", "#c"]
    assert "resume_token" not in body


# --- references ----------------------------------------------------------------------------


def test_reference_to_new_tab_id_is_resolved_for_later_step(world: World) -> None:
    body = run(world, [{"action": "newTab"}, click("#a", tab="${$0.tabId}")])

    assert body["status"] == "ok"
    assert body["results"][0] == {"ok": True, "tabId": 100}
    assert [(s.action, s.tab) for s in world.driver.sent] == [("newTab", None), ("click", 100)]
    assert body["progress"][1]["tabId"] == 100


def test_reference_with_missing_path_fails_step_reference_unresolved_and_sends_nothing(world: World) -> None:
    body = run(world, [{"action": "newTab"}, click("${$0.missing}"), click("#c")])

    assert body["status"] == "failed"
    assert statuses(body["progress"]) == ["ok", "failed", "skipped"]
    assert body["results"][1]["code"] == "reference_unresolved"
    assert [s.action for s in world.driver.sent] == ["newTab"]
    assert "StepDispatched" not in path_events(world.events, "1")


def test_reference_with_missing_tab_path_fails_step_reference_unresolved(world: World) -> None:
    body = run(world, [{"action": "title"}, click("#a", tab="${$0.tabId}")])

    assert statuses(body["progress"]) == ["ok", "failed"]
    assert body["results"][1]["code"] == "reference_unresolved"
    assert sent_keys(world) == ["title"]


# --- sequence ------------------------------------------------------------------------------


def test_sequence_runs_steps_in_order_with_nested_progress_paths(world: World) -> None:
    body = run(world, [click("#first"),
                       {"action": "sequence", "steps": [click("#s0"), find("#s1"), click("#s2", tab=2)]}])

    assert body["status"] == "ok"
    assert sent_keys(world) == ["#first", "#s0", "#s1", "#s2"]
    assert body["progress"][1] == {
        "index": 1, "action": "sequence", "tabId": None, "status": "ok",
        "steps": [{"index": 0, "action": "click", "tabId": DEFAULT_TAB, "status": "ok"},
                  {"index": 1, "action": "find", "tabId": DEFAULT_TAB, "status": "ok"},
                  {"index": 2, "action": "click", "tabId": 2, "status": "ok"}],
    }
    started = [e.path for e in world.events if isinstance(e, StepStarted)]
    assert started == ["0", "1.0", "1.1", "1.2"]


def test_failing_step_in_sequence_stops_the_sequence_and_the_batch(world: World) -> None:
    world.driver.on("#s1", "fail")
    body = run(world, [{"action": "sequence", "steps": [click("#s0"), click("#s1"), click("#s2")]},
                       click("#after")])

    assert body["status"] == "failed"
    assert body["progress"][0]["status"] == "failed"
    assert statuses(body["progress"][0]["steps"]) == ["ok", "failed", "skipped"]
    assert body["progress"][1]["status"] == "skipped"
    assert sent_keys(world) == ["#s0", "#s1"]
    assert body["results"][0]["code"] == "not_found"
    assert len(body["results"]) == 1
    assert "Step 0.1 (click on tab 3) failed" in body["summary"]
    skipped = [e.path for e in world.events if isinstance(e, StepSkipped)]
    assert skipped == ["0.2", "1"]


def test_reference_inside_sequence_names_a_step_of_the_sequence(world: World) -> None:
    body = run(world, [click("#outer"),
                       {"action": "sequence", "steps": [{"action": "newTab"}, click("#in", tab="${$0.tabId}")]}])

    assert body["status"] == "ok"
    # $0 is the sequence's newTab (tab 100), not the batch's click
    assert [(s.key, s.tab) for s in world.driver.sent] == [("#outer", DEFAULT_TAB), ("newTab", None), ("#in", 100)]
    assert body["progress"][1]["steps"][1]["tabId"] == 100


# --- parallel ------------------------------------------------------------------------------


def test_parallel_sequences_run_independently_and_status_is_the_worst(world: World) -> None:
    world.driver.on("#a0", "fail")
    body = run(world, [parallel([click("#a0", tab=1), click("#a1", tab=1)],
                                [click("#b0", tab=2), find("#b1", tab=2), click("#b2", tab=2)])], kind="parallel")

    assert body["status"] == "failed"
    sequences = body["progress"][0]["sequences"]
    assert statuses(sequences[0]) == ["failed", "skipped"]
    assert statuses(sequences[1]) == ["ok", "ok", "ok"]
    assert sequences[1][2] == {"index": 2, "action": "click", "tabId": 2, "status": "ok"}
    assert body["progress"][0]["status"] == "failed"
    assert sorted(sent_keys(world)) == ["#a0", "#b0", "#b1", "#b2"]
    assert [s.tab for s in world.driver.sent if s.key.startswith("#b")] == [2, 2, 2]
    record = fold(world.events).find("0.1.2")
    assert record is not None and record.status == "ok"
    nested = body["results"][0]["state"]["sequences"]
    assert nested[0] == [{"error": "No element matches #a0", "code": "not_found", "retryable": False}]
    assert len(nested[1]) == 3


def test_parallel_of_unknown_and_failed_sequences_is_unknown(world: World) -> None:
    world.driver.on("#a0", "fail").on("#b0", "unknown")
    body = run(world, [parallel([click("#a0", tab=1)], [click("#b0", tab=2)])], kind="parallel")

    assert body["status"] == "unknown"
    assert [statuses(s) for s in body["progress"][0]["sequences"]] == [["failed"], ["unknown"]]


def test_second_sequence_writing_a_claimed_tab_is_refused_tab_owned_before_it_starts(world: World) -> None:
    body = run(world, [parallel([click("#a0", tab=1), click("#a1", tab=1)],
                                [find("#b0", tab=2), click("#b1", tab=1)])], kind="parallel")

    assert sent_keys(world) == ["#a0", "#a1"]  # nothing of the refused sequence, not even its read
    sequences = body["progress"][0]["sequences"]
    assert statuses(sequences[0]) == ["ok", "ok"]
    assert statuses(sequences[1]) == ["failed", "failed"]
    refused = body["results"][0]["state"]["sequences"][1]
    assert [r["code"] for r in refused] == ["tab_owned", "tab_owned"]
    assert refused[0]["state"] == {"tabId": 1, "sequence": "0.0"}
    assert not [e for e in world.events if isinstance(e, StepStarted) and e.path.startswith("0.1.")]
    assert body["status"] == "failed"


def test_sequence_writing_a_tab_claimed_by_another_call_is_refused_tab_claimed(world: World) -> None:
    assert world.claims.claim(999, "0.0", 2) is None
    body = run(world, [parallel([click("#a0", tab=1)], [click("#b0", tab=2), click("#b1", tab=2)])],
               kind="parallel")

    assert sent_keys(world) == ["#a0"]
    assert [statuses(s) for s in body["progress"][0]["sequences"]] == [["ok"], ["failed", "failed"]]
    refused = body["results"][0]["state"]["sequences"][1][0]
    assert refused["code"] == "tab_claimed"
    assert refused["state"] == {"tabId": 2, "call": 999}
    assert refused["retryable"] is True
    assert world.claims.held() == {2: Claim(999, "0.0")}  # the other call's claim stays


def test_write_outside_parallel_to_a_tab_claimed_by_another_call_fails_tab_claimed(world: World) -> None:
    assert world.claims.claim(999, "0.0", DEFAULT_TAB) is None
    body = run(world, [find("#read"), click("#write")])

    assert statuses(body["progress"]) == ["ok", "failed"]
    assert body["results"][1]["code"] == "tab_claimed"
    assert sent_keys(world) == ["#read"]


def test_sequence_writing_a_closed_tab_is_refused_tab_closed(world: World) -> None:
    body = run(world, [parallel([click("#a0", tab=1)], [find("#b0", tab=2), click("#b1", tab=7)])],
               kind="parallel")

    assert sent_keys(world) == ["#a0"]
    assert [statuses(s) for s in body["progress"][0]["sequences"]] == [["ok"], ["failed", "failed"]]
    refused = body["results"][0]["state"]["sequences"][1]
    assert [r["code"] for r in refused] == ["tab_closed", "tab_closed"]
    assert refused[0]["state"] == {"tabId": 7}


def test_every_sequence_is_refused_when_tabs_cannot_be_listed(world: World) -> None:
    world.driver.tabs_unlistable = True
    body = run(world, [parallel([click("#a0", tab=1)], [find("#b0", tab=2), click("#b1", tab=2)])],
               kind="parallel")

    assert world.driver.sent == []
    assert [statuses(s) for s in body["progress"][0]["sequences"]] == [["failed"], ["failed", "failed"]]
    codes = [r["code"] for seq in body["results"][0]["state"]["sequences"] for r in seq]
    assert codes == ["tabs_unavailable"] * 3
    assert body["status"] == "failed"


def test_claims_are_released_after_the_call(world: World) -> None:
    world.driver.on("#b1", "unknown")
    body = run(world, [parallel([click("#a0", tab=1), {"action": "newTab"}, click("#a2", tab="${$1.tabId}")],
                                [click("#b0", tab=2), click("#b1", tab=2)])], kind="parallel")

    assert body["status"] == "unknown"
    assert sent_keys(world) and world.claims.held() == {}
    # the report still says what each sequence claimed (the checkpoint keeps it)
    second = run(world, [parallel([click("#c0", tab=1)], [click("#d0", tab=2)])], kind="parallel")
    assert second["status"] == "ok"
    assert world.claims.held() == {}


def test_sync_barrier_makes_sequences_meet(world: World) -> None:
    barrier = {"action": "syncBarrier", "barrier": "b", "timeout": 2}
    body = run(world, [parallel([click("#a0", tab=1), barrier, click("#a2", tab=1)],
                                [click("#b0", tab=2), find("#b1", tab=2), barrier, click("#b3", tab=2)])],
               kind="parallel")

    assert body["status"] == "ok"
    keys = sent_keys(world)
    assert sorted(keys) == ["#a0", "#a2", "#b0", "#b1", "#b3"]
    # nobody passes the barrier before everyone reached it
    assert max(keys.index(k) for k in ("#a0", "#b0", "#b1")) < min(keys.index(k) for k in ("#a2", "#b3"))
    sequences = body["progress"][0]["sequences"]
    assert sequences[0][1] == {"index": 1, "action": "syncBarrier", "tabId": None, "status": "ok"}
    assert sequences[1][2]["status"] == "ok"


def test_sequence_failing_before_its_barrier_releases_the_partner(world: World) -> None:
    world.driver.on("#a0", "fail")
    barrier = {"action": "syncBarrier", "barrier": "b", "timeout": 2}
    body = run(world, [parallel([click("#a0", tab=1), barrier, click("#a2", tab=1)],
                                [click("#b0", tab=2), barrier, click("#b2", tab=2)])], kind="parallel")

    sequences = body["progress"][0]["sequences"]
    assert statuses(sequences[0]) == ["failed", "skipped", "skipped"]
    assert statuses(sequences[1]) == ["ok", "failed", "skipped"]
    barrier_result = body["results"][0]["state"]["sequences"][1][1]
    assert barrier_result["code"] == "barrier_timeout"
    assert sorted(sent_keys(world)) == ["#a0", "#b0"]
    assert body["status"] == "failed"


def test_sequences_meet_at_a_barrier_name_each_uses_twice(world: World) -> None:
    barrier = {"action": "syncBarrier", "barrier": "b", "timeout": 1}
    body = run(world, [parallel([click("#a0", tab=1), barrier, click("#a2", tab=1), barrier],
                                [click("#b0", tab=2), barrier, click("#b2", tab=2), barrier])], kind="parallel")

    # "Wait until every sequence of the parallel that names this barrier reaches it": two sequences, two parties
    assert [statuses(s) for s in body["progress"][0]["sequences"]] == [["ok"] * 4, ["ok"] * 4]
    assert sorted(sent_keys(world)) == ["#a0", "#a2", "#b0", "#b2"]


# --- blocks --------------------------------------------------------------------------------

CONDITION = "document.title"


def test_if_with_false_condition_runs_the_else_branch(world: World) -> None:
    world.driver.on(CONDITION, ("value", {"value": False}))
    body = run(world, [{"action": "if", "condition": CONDITION, "then": [click("#then")],
                        "else": [click("#else")]}, click("#after")])

    assert body["status"] == "ok"
    assert sent_keys(world) == [CONDITION, "#else", "#after"]
    assert body["results"][0]["branch"] == "else"
    assert body["progress"][0] == {"index": 0, "action": "if", "tabId": DEFAULT_TAB, "status": "ok"}


def test_if_with_true_condition_runs_the_then_branch(world: World) -> None:
    body = run(world, [{"action": "if", "condition": CONDITION, "then": [click("#then")],
                        "else": [click("#else")]}])

    assert body["status"] == "ok"
    assert sent_keys(world) == [CONDITION, "#then"]
    assert body["results"][0]["branch"] == "then"


def test_if_whose_branch_fails_is_failed_and_records_its_condition_write(world: World) -> None:
    world.driver.on("#then", "fail")
    body = run(world, [{"action": "if", "condition": CONDITION, "then": [click("#then")]}, click("#after")])

    assert statuses(body["progress"]) == ["failed", "skipped"]
    record = fold(world.events).find("0")
    assert record is not None and record.wrote is True and record.dispatched is True


def test_while_reaching_max_iterations_fails_max_iterations(world: World) -> None:
    body = run(world, [{"action": "while", "condition": "more()", "body": [click("#next")], "maxIterations": 3},
                       click("#after")])

    assert body["status"] == "failed"
    assert statuses(body["progress"]) == ["failed", "skipped"]
    assert body["results"][0]["code"] == "max_iterations"
    assert world.driver.writes_sent("#next") == 3
    assert "#after" not in sent_keys(world)


def test_while_stops_when_condition_turns_false(world: World) -> None:
    world.driver.on("more()", "ok", "ok", ("value", {"value": False}))
    body = run(world, [{"action": "while", "condition": "more()", "body": [click("#next")], "maxIterations": 5}])

    assert body["status"] == "ok"
    assert body["results"][0] == {"ok": True, "iterations": 2}
    assert world.driver.writes_sent("#next") == 2


def test_try_with_catch_catches_a_body_failure(world: World) -> None:
    world.driver.on("#missing", "fail")
    body = run(world, [{"action": "try", "body": [click("#missing"), click("#never")], "catch": [click("#fallback")]},
                       click("#after")])

    assert body["status"] == "ok"
    assert statuses(body["progress"]) == ["ok", "ok"]
    assert sent_keys(world) == ["#missing", "#fallback", "#after"]
    assert body["results"][0]["caught"]["code"] == "not_found"


def test_try_without_catch_fails_with_the_body_failure(world: World) -> None:
    world.driver.on("#missing", "fail")
    body = run(world, [{"action": "try", "body": [click("#missing")]}, click("#after")])

    assert body["status"] == "failed"
    assert statuses(body["progress"]) == ["failed", "skipped"]
    assert body["results"][0]["code"] == "not_found"
    assert sent_keys(world) == ["#missing"]


def test_retry_retries_retryable_failures_until_ok(world: World) -> None:
    world.driver.on("#btn", "fail_retryable", "fail_retryable", "ok")
    body = run(world, [{"action": "retry", "body": [click("#btn")], "attempts": 3}, click("#after")])

    assert body["status"] == "ok"
    assert body["results"][0]["attempts"] == 3
    assert world.driver.writes_sent("#btn") == 3
    assert sent_keys(world)[-1] == "#after"


def test_retry_runs_again_after_a_failure_that_sent_nothing(world: World) -> None:
    world.driver.on("#list", "fail", "ok")
    body = run(world, [{"action": "retry", "body": [find("#list")], "attempts": 3}])

    assert body["status"] == "ok"
    assert body["results"][0]["attempts"] == 2
    assert sent_keys(world) == ["#list", "#list"]


def test_retry_does_not_retry_a_non_retryable_failure_after_a_write_was_sent(world: World) -> None:
    world.driver.on("#check", "fail")
    body = run(world, [{"action": "retry", "body": [click("#buy"), find("#check")], "attempts": 3}])

    assert body["status"] == "failed"
    assert body["results"][0]["code"] == "not_found"
    assert world.driver.writes_sent("#buy") == 1
    assert sent_keys(world) == ["#buy", "#check"]


def test_retry_gives_up_after_its_attempts(world: World) -> None:
    world.driver.on("#btn", "fail_retryable", "fail_retryable", "fail_retryable", "ok")
    body = run(world, [{"action": "retry", "body": [click("#btn")], "attempts": 3}])

    assert body["status"] == "failed"
    assert body["results"][0]["code"] == "not_ready"
    assert world.driver.writes_sent("#btn") == 3


def test_broadcast_sends_the_command_once_per_tab(world: World) -> None:
    body = run(world, [{"action": "broadcast", "tabIds": [1, 2], "command": click("#x")}])

    assert body["status"] == "ok"
    assert [(s.key, s.tab) for s in world.driver.sent] == [("#x", 1), ("#x", 2)]
    assert [r["tabId"] for r in body["results"][0]["results"]] == [1, 2]


def test_broadcast_with_one_unknown_tab_is_unknown(world: World) -> None:
    world.driver.on("#x", "ok", "unknown")
    body = run(world, [{"action": "broadcast", "tabIds": [1, 2], "command": click("#x")}, click("#after")])

    assert body["status"] == "unknown"
    assert statuses(body["progress"]) == ["unknown", "skipped"]
    assert body["results"][0]["code"] == "navigated"
    assert [(s.key, s.tab) for s in world.driver.sent] == [("#x", 1), ("#x", 2)]


def test_block_in_which_a_write_ran_ok_records_wrote(world: World) -> None:
    world.driver.on("#check", "fail")
    run(world, [{"action": "try", "body": [click("#save"), find("#check")]}])

    record = fold(world.events).find("0")
    assert record is not None
    assert record.status == "failed" and record.wrote is True
    assert [type(e) for e in world.events if getattr(e, "path", None) == "0"].count(BlockWriteSucceeded) == 1


def test_block_whose_writes_did_not_run_ok_records_no_write(world: World) -> None:
    world.driver.on("#save", "fail")
    run(world, [{"action": "try", "body": [find("#look"), click("#save")]}])

    record = fold(world.events).find("0")
    assert record is not None and record.status == "failed" and record.wrote is False


# --- secrets -------------------------------------------------------------------------------

TYPED = "hunter2-topsecret"
JS_BODY = "return window.__secretFunction(41) + 1"


def _type(selector: str = "#pw") -> dict[str, Any]:
    return {"action": "type", "selector": selector, "text": TYPED}


def _assert_no_secret_in_events(world: World, *secrets: str) -> None:
    for event in world.events:
        wire = encode(event)
        for secret in secrets:
            assert secret.encode() not in wire, f"{event.kind} carries a secret"


@pytest.mark.parametrize("outcome_type", [Failed, Unknown])
def test_typed_text_in_driver_failure_is_scrubbed_from_result_events_and_summary(
        world: World, outcome_type: type[Failed] | type[Unknown]) -> None:
    world.driver.on("#pw", outcome_type(Failure(f"Could not type {TYPED} into #pw", "not_editable", False)))
    body = run(world, [_type(), click("#login")])

    assert body["results"][0]["error"] == "Could not type [redacted] into #pw"
    assert TYPED not in body["summary"] and "[redacted]" in body["summary"]
    assert TYPED not in repr(body)
    _assert_no_secret_in_events(world, TYPED)
    assert_fold_matches(world, body)


def test_typed_text_in_error_of_step_inside_sequence_is_scrubbed(world: World) -> None:
    world.driver.on("#pw", Failed(Failure(f"Could not type {TYPED} into #pw", "not_editable", False)))
    body = run(world, [{"action": "sequence", "steps": [click("#user"), _type()]}])

    assert body["results"][0]["error"] == "Could not type [redacted] into #pw"
    assert TYPED not in repr(body)
    _assert_no_secret_in_events(world, TYPED)


def test_typed_text_in_error_caught_by_try_is_scrubbed_from_result(world: World) -> None:
    world.driver.on("#pw", Failed(Failure(f"Could not type {TYPED} into #pw", "not_editable", False)))
    body = run(world, [{"action": "try", "body": [_type()], "catch": [click("#reset")]}])

    assert body["status"] == "ok"
    assert body["results"][0]["caught"]["error"] == "Could not type [redacted] into #pw"
    assert TYPED not in repr(body)
    _assert_no_secret_in_events(world, TYPED)


def test_typed_text_in_error_of_one_broadcast_tab_is_scrubbed_from_result(world: World) -> None:
    world.driver.on("#pw", "ok", Failed(Failure(f"Could not type {TYPED} into #pw", "not_editable", False)))
    body = run(world, [{"action": "broadcast", "tabIds": [1, 2], "command": _type()}])

    assert body["status"] == "failed"
    assert body["results"][0]["error"] == "Could not type [redacted] into #pw"
    assert TYPED not in repr(body)
    _assert_no_secret_in_events(world, TYPED)


def test_typed_value_given_by_reference_inside_a_block_is_scrubbed(world: World) -> None:
    page_value = "s3cr3t-from-the-page"
    world.driver.on("#code", ("value", {"text": page_value}))
    world.driver.on("#pw", Failed(Failure(f"Could not type {page_value} into #pw", "not_editable", False)))
    body = run(world, [find("#code"),
                       {"action": "try", "body": [{"action": "type", "selector": "#pw", "text": "${$0.text}"}]}])

    assert statuses(body["progress"]) == ["ok", "failed"]
    _assert_no_secret_in_events(world, page_value)
    assert body["results"][1]["error"] == "Could not type [redacted] into #pw"


def test_typed_value_given_by_reference_is_scrubbed(world: World) -> None:
    page_value = "s3cr3t-from-the-page"
    world.driver.on("#code", ("value", {"text": page_value}))
    world.driver.on("#pw", Failed(Failure(f"Could not type {page_value} into #pw", "not_editable", False)))
    body = run(world, [find("#code"), {"action": "type", "selector": "#pw", "text": "${$0.text}"}])

    assert body["results"][1]["error"] == "Could not type [redacted] into #pw"
    _assert_no_secret_in_events(world, page_value)


def test_js_body_in_driver_failure_is_scrubbed(world: World) -> None:
    world.driver.on(JS_BODY, Failed(Failure(f"Evaluation failed: {JS_BODY} is not a function", "js_error", False)))
    body = run(world, [{"action": "js", "code": JS_BODY}])

    assert body["results"][0]["error"] == "Evaluation failed: [redacted] is not a function"
    assert JS_BODY not in repr(body)
    _assert_no_secret_in_events(world, JS_BODY)


def test_no_event_carries_typed_text_or_javascript(world: World) -> None:
    condition = "document.querySelector('#secret-flag') !== null"
    body = run(world, [_type(), {"action": "fill", "selector": "#card", "value": "4111-1111-1111-1111"},
                       {"action": "js", "code": JS_BODY},
                       {"action": "if", "condition": condition, "then": [_type("#again")]},
                       {"action": "sequence", "steps": [_type("#seq")]}])

    assert body["status"] == "ok"
    assert world.driver.writes_sent() == 6  # type, fill, js, the if's condition and type, the sequence's type
    assert [e.path for e in world.events if isinstance(e, StepSucceeded)] == ["0", "1", "2", "3", "4.0"]
    _assert_no_secret_in_events(world, TYPED, "4111-1111-1111-1111", JS_BODY, condition)


# --- driver errors -------------------------------------------------------------------------


class RaisingDriver(ScriptedDriver):
    """Raises ``error`` (after recording the command) for commands whose key is in ``raising``."""

    def __init__(self, clock: FakeClock, raising: dict[str, Exception]) -> None:
        super().__init__(clock)
        self.raising = raising

    def execute(self, command: Command, tab_id: int | None, timeout: float,
                recorded: Sequence[Recorded] = (), *, as_read: bool = False) -> Outcome:
        outcome = super().execute(command, tab_id, timeout, recorded, as_read=as_read)
        error = self.raising.get(self.key_of(command))
        if error is not None:
            raise error
        return outcome


def raising_world(raising: dict[str, Exception]) -> World:
    world = World()
    driver = RaisingDriver(world.clock, raising)
    world.driver = driver
    world.calls = Calls(lambda agent: Ports(driver, world.clock, world.claims, ThreadedSequences()), world.store,
                        audit=SequentialIds(), sink=world.events.append)
    return world


def test_driver_error_raised_after_a_write_was_dispatched_is_unknown() -> None:
    world = raising_world({"#a": KitsuneError("browser_gone", "The browser went away")})
    body = run(world, [click("#a"), click("#b")])

    assert statuses(body["progress"]) == ["unknown", "skipped"]
    assert body["results"][0]["code"] == "browser_gone"
    assert sent_keys(world) == ["#a"]


def test_driver_error_raised_on_a_read_is_failed() -> None:
    world = raising_world({"#list": KitsuneError("browser_gone", "The browser went away", retryable=True)})
    body = run(world, [find("#list"), click("#b")])

    assert statuses(body["progress"]) == ["failed", "skipped"]
    assert body["results"][0] == {"error": "The browser went away", "code": "browser_gone", "retryable": True}


def test_internal_error_ends_the_call_and_a_write_in_flight_is_unknown() -> None:
    world = raising_world({"#a": RuntimeError("bug in a port")})
    response = world.calls.run(parse_call("batch", [find("#x"), click("#a"), click("#b")], default_tab=DEFAULT_TAB))

    assert response.http_status == 500
    assert response.body["code"] == "internal_error"
    assert statuses(response.body["progress"]) == ["ok", "unknown", "skipped"]
    end = world.events[-1]
    assert isinstance(end, CallEnded) and end.reason == "internal_error"
    assert "bug in a port" not in repr(response.body)


# --- bad calls -----------------------------------------------------------------------------


@pytest.mark.parametrize(("commands", "code", "path"), [
    ([click("#a"), {"action": "explode"}], "unknown_action", "1"),
    ([click("#a"), {"action": "click"}], "missing_parameter", "1"),
    ([click("#a", tab="${$1.tabId}"), click("#b")], "bad_reference", "0"),
    ([{"action": "sequence", "steps": [click("#a"), {"action": "type", "selector": "#b"}]}], "missing_parameter",
     "0.1"),
    ([{"action": "parallel", "sequences": [[click("#a", tab=1)], []]}], "empty_parallel", "0.1"),
])
def test_bad_call_is_rejected_before_anything_reaches_the_driver(
        world: World, commands: list[dict[str, Any]], code: str, path: str) -> None:
    with pytest.raises(KitsuneError) as raised:
        run(world, commands)

    assert raised.value.code == code
    assert raised.value.state is not None and raised.value.state["path"] == path
    assert raised.value.http_status == 400
    assert world.driver.sent == []
    assert world.events == []


# --- sanity of the helpers above -----------------------------------------------------------


def test_succeeded_event_per_step_of_an_ok_batch(world: World) -> None:
    run(world, [click("#a"), find("#b")])
    assert [e.path for e in world.events if isinstance(e, StepSucceeded)] == ["0", "1"]


def test_write_whose_dispatch_cannot_be_recorded_is_never_sent() -> None:
    world = World()

    def sink(event: Event) -> None:
        if isinstance(event, StepDispatched):
            raise KitsuneError("bus_timeout", "the event stream did not answer")
        world.events.append(event)

    world.calls._sink = sink  # the event stream fails for dispatches only
    body = run(world, [{"action": "title"}, {"action": "click", "selector": "#buy"}, {"action": "title"}])

    assert statuses(body["progress"]) == ["ok", "failed", "skipped"]
    assert body["results"][1]["code"] == "events_unavailable"
    assert body["results"][1]["retryable"] is True
    assert world.driver.writes_sent("#buy") == 0


def test_events_the_sink_loses_after_dispatch_do_not_stop_the_call() -> None:
    world = World()

    def sink(event: Event) -> None:
        if isinstance(event, StepSucceeded | CallEnded):
            raise KitsuneError("bus_timeout", "the event stream did not answer")
        world.events.append(event)

    world.calls._sink = sink
    body = run(world, [{"action": "click", "selector": "#a"}, {"action": "click", "selector": "#b"}])

    assert body["status"] == "ok"
    assert world.driver.writes_sent() == 2


class Audit:
    """An audit port whose entries can be made to fail; records which waits were called."""

    def __init__(self, failing: bool) -> None:
        self.failing = failing
        self.entries: list[tuple[str, str]] = []
        self.waited: list[str] = []

    def step(self, call: int, path: str, command: Command, tab_id: int | None, *, resumed: bool) -> Any:
        self.entries.append((path, command.action))

        def written() -> None:
            self.waited.append(path)
            if self.failing:
                raise KitsuneError("audit_unavailable", "The audit log cannot be written", retryable=True)
        return written

    def observed(self, call: int, path: str, command: Command, tab_id: int | None) -> None:
        self.entries.append((path, "observed"))

    def withdrawn(self, call: int, path: str, command: Command, tab_id: int | None) -> None:
        self.entries.append((path, "withdrawn"))


def _with_audit(world: World, audit: Audit) -> None:
    world.calls = Calls(lambda agent: Ports(world.driver, world.clock, world.claims, ThreadedSequences(), audit),
                        world.store, audit=SequentialIds(), sink=world.events.append)


def test_a_write_whose_audit_entry_cannot_be_written_is_never_sent_and_reads_go_on() -> None:
    world = World()
    audit = Audit(failing=True)
    _with_audit(world, audit)
    body = run(world, [{"action": "title"}, {"action": "click", "selector": "#buy"}])

    assert statuses(body["progress"]) == ["ok", "failed"]
    assert body["results"][1]["code"] == "audit_unavailable"
    assert world.driver.writes_sent() == 0
    assert audit.entries == [("0", "title"), ("1", "click")]


def test_a_write_waits_for_its_audit_entry_and_a_read_never_does() -> None:
    world = World()
    audit = Audit(failing=False)
    _with_audit(world, audit)
    body = run(world, [{"action": "title"}, {"action": "click", "selector": "#buy"}])

    assert body["status"] == "ok"
    assert audit.waited == ["1"]


def test_a_call_s_listener_hears_its_events_alone_and_in_order_and_its_resume_s_too(world: World) -> None:
    run(world, [click("#other")])  # another call's events: never told to the listener below
    world.driver.on("#b", "fail")
    heard: list[Event] = []
    spec = parse_call("batch", [click("#a"), click("#b")], default_tab=DEFAULT_TAB)
    body = world.calls.run(spec, listener=heard.append).body
    assert heard == world.events_of(body["call"]) and isinstance(heard[0], CallStarted)

    world.driver.on("#b", "ok")
    resumed: list[Event] = []
    assert world.calls.resume(body["call"], body["resume_token"], listener=resumed.append).body["status"] == "ok"
    assert resumed == world.events_of(body["call"])[len(heard):] and isinstance(resumed[0], CallResumed)
