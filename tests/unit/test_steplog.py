"""The step log: the fold of a call's events into progress, status and summary."""

from __future__ import annotations

import dataclasses
import gc
from typing import Any

import pytest

from messages.codec import encode, replay
from messages.events import (
    BlockWriteSucceeded,
    CallEnded,
    CallResumed,
    CallStarted,
    Event,
    OutlineStep,
    SessionChanged,
    SiteToolCalled,
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
from messages.results import Status, worst
from messages.steplog import StepLog, StepLogBuilder, StepRecord, fold, record_from_json, record_to_json

CALL = 42
Step = OutlineStep
BATCH = (Step("click", 3), Step("submitForm", 3), Step("pageText", 3))
NESTED = (
    Step("newTab"),
    Step("sequence", 3, steps=(Step("click", 3), Step("submitForm", 3))),
    Step("parallel", sequences=((Step("navigate", 4), Step("pageText", 4)), (Step("fill", 5), Step("click", 5)))),
)


def begin(outline: tuple[OutlineStep, ...] = BATCH, timeout: float = 120.0) -> CallStarted:
    return CallStarted(CALL, "batch", outline, timeout)


def ran(path: str, action: str, tab: int | None = 3) -> list[Event]:
    return [StepStarted(CALL, path, action, tab), StepSucceeded(CALL, path)]


def wrote(path: str, action: str, tab: int | None = 3) -> list[Event]:
    return [StepStarted(CALL, path, action, tab), StepDispatched(CALL, path), StepSucceeded(CALL, path)]


def failed(path: str, action: str, tab: int | None = 3, error: str = "No element matches #x",
           code: str = "not_found", retryable: bool = True) -> list[Event]:
    return [StepStarted(CALL, path, action, tab), StepFailed(CALL, path, code, error, retryable)]


def held(path: str, action: str, tab: int | None = 3) -> list[Event]:
    return [StepStarted(CALL, path, action, tab), StepHeld(CALL, path, "needs_user", "Held for approval")]


def lost(path: str, action: str, tab: int | None = 3) -> list[Event]:
    return [StepStarted(CALL, path, action, tab), StepDispatched(CALL, path),
            StepOutcomeUnknown(CALL, path, "timeout", "Command timed out after 30s")]


def spec_example() -> StepLog:
    """The checkpoint example of the spec: click ok, submitForm unknown, pageText skipped."""
    return fold([begin(), *wrote("0", "click"), *lost("1", "submitForm"), CallEnded(CALL, "stopped")])


# --- progress --------------------------------------------------------------------------------


def test_progress_records_are_index_action_tab_id_status_exactly() -> None:
    assert spec_example().progress == [
        {"index": 0, "action": "click", "tabId": 3, "status": "ok"},
        {"index": 1, "action": "submitForm", "tabId": 3, "status": "unknown"},
        {"index": 2, "action": "pageText", "tabId": 3, "status": "skipped"},
    ]


def test_progress_of_a_call_that_never_started_a_step_is_all_skipped() -> None:
    log = fold([begin()])
    assert [p["status"] for p in log.progress] == ["skipped", "skipped", "skipped"]
    assert log.status == "skipped"
    assert log.ended is None


def test_a_started_step_without_a_terminal_event_is_unknown() -> None:
    log = fold([begin(), *ran("0", "click"), StepStarted(CALL, "1", "submitForm", 3)])
    assert log.find("1").status == "unknown"  # type: ignore[union-attr]
    assert log.find("1").dispatched is False  # type: ignore[union-attr]


def test_a_started_read_without_a_terminal_event_is_unknown_too() -> None:
    log = fold([begin(), *wrote("0", "click"), *wrote("1", "submitForm"), StepStarted(CALL, "2", "pageText", 3),
                CallEnded(CALL, "internal_error")])
    assert log.progress[2]["status"] == "unknown"


def test_a_dispatched_write_without_a_terminal_event_is_unknown_never_ok() -> None:
    log = fold([begin(), StepStarted(CALL, "0", "click", 3), StepDispatched(CALL, "0"),
                CallEnded(CALL, "container_timeout")])
    record = log.find("0")
    assert record is not None
    assert (record.status, record.dispatched) == ("unknown", True)


def test_a_dispatched_write_is_unknown_even_without_a_start_event() -> None:
    log = fold([begin(), StepDispatched(CALL, "0")])
    assert log.progress[0]["status"] == "unknown"


def test_a_never_started_step_is_skipped_with_or_without_a_skip_event() -> None:
    log = fold([begin(), *failed("0", "click"), StepSkipped(CALL, "1", "stopped"), CallEnded(CALL, "stopped")])
    assert [p["status"] for p in log.progress] == ["failed", "skipped", "skipped"]


@pytest.mark.parametrize(("events", "status", "code", "error"), [
    (ran("0", "click"), "ok", None, None),
    (failed("0", "click", error="boom"), "failed", "not_found", "boom"),
    (held("0", "click"), "held", "needs_user", "Held for approval"),
    (lost("0", "click"), "unknown", "timeout", "Command timed out after 30s"),
])
def test_a_terminal_event_sets_the_status_code_and_error(events: list[Event], status: Status, code: str | None,
                                                         error: str | None) -> None:
    record = fold([begin(), *events]).find("0")
    assert record is not None
    assert (record.status, record.code, record.error) == (status, code, error)


def test_a_success_keeps_its_warning() -> None:
    log = fold([begin(), StepStarted(CALL, "0", "click", 3), StepSucceeded(CALL, "0", warning="covered")])
    assert log.find("0").warning == "covered"  # type: ignore[union-attr]


def test_the_tab_a_step_started_on_replaces_the_outline_tab() -> None:
    log = fold([begin((Step("click", None), Step("url", 3))), *ran("0", "click", 9), *ran("1", "url", 3)])
    assert [p["tabId"] for p in log.progress] == [9, 3]


def test_a_sequence_record_nests_its_steps_with_their_own_indexes() -> None:
    log = fold([begin(NESTED), *ran("0", "newTab", None), StepStarted(CALL, "1", "sequence", 3),
                *wrote("1.0", "click"), *lost("1.1", "submitForm")])
    assert log.progress[1] == {
        "index": 1, "action": "sequence", "tabId": 3, "status": "unknown", "steps": [
            {"index": 0, "action": "click", "tabId": 3, "status": "ok"},
            {"index": 1, "action": "submitForm", "tabId": 3, "status": "unknown"},
        ]}


def test_a_parallel_record_nests_sequences_of_steps() -> None:
    log = fold([begin(NESTED), *ran("0", "newTab", None), *wrote("1.0", "click"), *wrote("1.1", "submitForm"),
                *wrote("2.0.0", "navigate", 4), *ran("2.0.1", "pageText", 4),
                *held("2.1.0", "fill", 5), CallEnded(CALL, "stopped")])
    assert log.progress[2] == {
        "index": 2, "action": "parallel", "tabId": None, "status": "held", "sequences": [
            [{"index": 0, "action": "navigate", "tabId": 4, "status": "ok"},
             {"index": 1, "action": "pageText", "tabId": 4, "status": "ok"}],
            [{"index": 0, "action": "fill", "tabId": 5, "status": "held"},
             {"index": 1, "action": "click", "tabId": 5, "status": "skipped"}],
        ]}
    assert log.find("2.1.1").path == "2.1.1"  # type: ignore[union-attr]


def test_blocks_other_than_sequence_and_parallel_have_flat_records() -> None:
    log = fold([begin((Step("if", 3), Step("try", 3))), StepStarted(CALL, "0", "if", 3), BlockWriteSucceeded(CALL, "0"),
                StepSucceeded(CALL, "0")])
    assert log.progress == [{"index": 0, "action": "if", "tabId": 3, "status": "ok"},
                            {"index": 1, "action": "try", "tabId": 3, "status": "skipped"}]
    assert log.find("0").wrote is True  # type: ignore[union-attr]


def test_a_kept_step_is_ok_with_resumed_kept() -> None:
    log = fold([begin(), StepKept(CALL, "0", 3), *wrote("1", "submitForm")])
    assert log.progress[0] == {"index": 0, "action": "click", "tabId": 3, "status": "ok", "resumed": "kept"}
    assert "resumed" not in log.progress[1]


def test_a_kept_step_reports_the_tab_it_ran_on() -> None:
    log = fold([begin((Step("click", None), Step("url", None))), StepKept(CALL, "0", 8)])
    assert log.progress[0] == {"index": 0, "action": "click", "tabId": 8, "status": "ok", "resumed": "kept"}
    assert log.progress[1]["tabId"] is None


def test_a_sequence_whose_steps_were_all_kept_is_kept() -> None:
    log = fold([begin(NESTED), StepKept(CALL, "1.0", 3), StepKept(CALL, "1.1", 3), StepKept(CALL, "2.0.0", 4),
                *ran("2.0.1", "pageText", 4)])
    assert log.progress[1]["resumed"] == "kept"
    assert "resumed" not in log.progress[2]  # one of its steps ran again
    assert log.progress[2]["sequences"][0][0]["resumed"] == "kept"


def test_an_applied_observation_is_ok_with_observed_applied() -> None:
    log = fold([begin(), StepKept(CALL, "0", 3), StepObserved(CALL, "1", "applied")])
    assert log.progress[1] == {"index": 1, "action": "submitForm", "tabId": 3, "status": "ok",
                               "observed": "applied"}
    assert log.find("1").dispatched is False  # type: ignore[union-attr]


def test_a_not_applied_observation_changes_nothing_by_itself() -> None:
    log = fold([begin(), StepObserved(CALL, "1", "not_applied")])
    assert log.progress[1] == {"index": 1, "action": "submitForm", "tabId": 3, "status": "skipped"}
    log = fold([begin(), StepObserved(CALL, "1", "not_applied"), *wrote("1", "submitForm")])
    assert log.progress[1] == {"index": 1, "action": "submitForm", "tabId": 3, "status": "ok"}


def test_starting_a_step_again_clears_its_earlier_outcome() -> None:
    log = fold([begin(), *failed("0", "click"), StepStarted(CALL, "0", "click", 3)])
    record = log.find("0")
    assert record is not None
    assert (record.status, record.code, record.error) == ("unknown", None, None)


# --- container status ------------------------------------------------------------------------


@pytest.mark.parametrize(("statuses", "expected"), [
    ([], "ok"),
    (["ok", "ok"], "ok"),
    (["ok", "skipped"], "skipped"),
    (["skipped", "failed", "ok"], "failed"),
    (["failed", "held", "skipped"], "held"),
    (["held", "unknown", "failed"], "unknown"),
    (["unknown", "ok", "skipped", "held", "failed"], "unknown"),
])
def test_worst_ranks_unknown_held_failed_skipped_ok(statuses: list[Status], expected: Status) -> None:
    assert worst(statuses) == expected


OUTCOMES = {"ok": ran, "failed": failed, "held": held, "unknown": lost}


def _events_for(path: str, status: Status) -> list[Event]:
    return [] if status == "skipped" else OUTCOMES[status](path, "click")


@pytest.mark.parametrize(("first", "second", "expected"), [
    ("ok", "ok", "ok"),
    ("ok", "skipped", "skipped"),
    ("failed", "skipped", "failed"),
    ("failed", "held", "held"),
    ("unknown", "held", "unknown"),
    ("ok", "unknown", "unknown"),
])
def test_a_container_status_is_the_worst_of_its_steps(first: Status, second: Status, expected: Status) -> None:
    outline = (Step("sequence", 3, steps=(Step("click", 3), Step("click", 3))),
               Step("parallel", sequences=((Step("click", 3),), (Step("click", 3),))))
    log = fold([begin(outline), *_events_for("0.0", first), *_events_for("0.1", second),
                *_events_for("1.0.0", first), *_events_for("1.1.0", second)])
    assert log.progress[0]["status"] == expected
    assert log.progress[1]["status"] == expected
    assert log.status == expected


def test_a_container_own_terminal_event_does_not_hide_its_steps() -> None:
    outline = (Step("sequence", 3, steps=(Step("click", 3), Step("click", 3))),)
    log = fold([begin(outline), StepStarted(CALL, "0", "sequence", 3), *lost("0.0", "click"),
                StepSucceeded(CALL, "0")])
    assert log.status == "unknown"


def test_the_call_status_is_the_worst_top_level_status() -> None:
    assert spec_example().status == "unknown"
    assert fold([begin(), *ran("0", "click"), *failed("1", "submitForm")]).status == "failed"
    assert fold([begin(), *ran("0", "click"), *ran("1", "submitForm"), *ran("2", "pageText")]).status == "ok"


# --- resume ----------------------------------------------------------------------------------


def test_call_resumed_starts_the_log_over() -> None:
    first_run = [begin(), *wrote("0", "click"), *lost("1", "submitForm"), CallEnded(CALL, "stopped")]
    log = fold([*first_run, CallResumed(CALL, "batch", BATCH, 300.0, attempt=1)])
    assert [p["status"] for p in log.progress] == ["skipped", "skipped", "skipped"]
    assert (log.timeout, log.ended) == (300.0, None)


def test_a_resumed_run_reports_kept_and_observed_steps() -> None:
    log = fold([
        begin(), *wrote("0", "click"), *lost("1", "submitForm"), CallEnded(CALL, "stopped"),
        CallResumed(CALL, "batch", BATCH, 300.0, attempt=1),
        StepKept(CALL, "0", 3), StepObserved(CALL, "1", "applied"), *ran("2", "pageText"),
        CallEnded(CALL, "completed"),
    ])
    assert log.progress == [
        {"index": 0, "action": "click", "tabId": 3, "status": "ok", "resumed": "kept"},
        {"index": 1, "action": "submitForm", "tabId": 3, "status": "ok", "observed": "applied"},
        {"index": 2, "action": "pageText", "tabId": 3, "status": "ok"},
    ]
    assert (log.status, log.ended, log.summary) == ("ok", "completed", "3 commands: 3 ok.")


def test_the_log_names_the_call_kind_and_timeout_of_its_start() -> None:
    log = fold([CallStarted(7, "workflow", BATCH, 45.0)])
    assert (log.call, log.kind, log.timeout) == (7, "workflow", 45.0)
    log = fold([CallStarted(7, "workflow", BATCH, 45.0), CallResumed(7, "workflow", BATCH[:1], 300.0, 2)])
    assert (log.call, log.timeout, len(log.steps)) == (7, 300.0, 1)


def test_the_builder_folds_incrementally() -> None:
    builder = StepLogBuilder()
    builder.apply(begin())
    builder.apply(StepStarted(CALL, "0", "click", 3))
    assert builder.freeze().progress[0]["status"] == "unknown"
    builder.apply(StepSucceeded(CALL, "0"))
    assert builder.freeze().progress[0]["status"] == "ok"
    builder.apply(CallEnded(CALL, "stopped"))
    assert builder.freeze().ended == "stopped"



def test_a_step_status_is_its_record_status_as_the_events_fold_in() -> None:
    builder = StepLogBuilder()
    events: list[Event] = [begin(NESTED), *ran("0", "newTab", None), StepStarted(CALL, "1.0", "click", 3),
                           *failed("1.0", "click"), StepStarted(CALL, "2.0.0", "navigate", 4),
                           StepDispatched(CALL, "2.1.0"), StepSkipped(CALL, "2.0.1", "stopped")]
    paths = ["0", "1", "1.0", "1.1", "2", "2.0.0", "2.0.1", "2.1.0", "2.1.1"]
    seen: set[Status] = set()
    for event in events:
        builder.apply(event)
        for path in paths:
            assert builder.status(path) == builder.record(path).status
            seen.add(builder.status(path))
    assert seen == {"ok", "unknown", "failed", "skipped"}


def test_a_replay_of_the_wire_records_folds_what_the_events_fold() -> None:
    events: list[Event] = [
        CallStarted(CALL, "batch", NESTED, 60.0), *ran("0", "newTab", None), *wrote("1.0", "click"),
        *held("1.1", "submitForm"), StepStarted(CALL, "2", "parallel", None), BlockWriteSucceeded(CALL, "2"),
        *failed("2.0.0", "navigate", 4), StepSkipped(CALL, "2.0.1", "stopped"), *lost("2.1.0", "fill", 5),
        SessionChanged(CALL, "opened", "alice", "s1", "call"), SiteToolCalled(CALL, "2.1.1", 5, "add", "https://a.test"),
        CallEnded(CALL, "stopped"), CallResumed(CALL, "batch", NESTED, 300.0, 1), StepKept(CALL, "0", 3),
        StepObserved(CALL, "1.0", "applied"), StepObserved(CALL, "1.1", "not_applied"),
        StepStarted(CALL, "1.1", "submitForm", 3), StepDispatched(CALL, "1.1"),
        StepSucceeded(CALL, "1.1", warning="covered"), CallEnded(CALL, "completed"),
    ]
    replayed = replay(encode(e) for e in events)
    assert replayed == fold(events)
    assert [r.status for r in replayed.records()][:4] == ["ok", "ok", "ok", "ok"]
    assert (replayed.sessions, replayed.site_tools) == (fold(events).sessions, fold(events).site_tools)


def test_a_record_is_frozen_and_hashable_however_it_was_built() -> None:
    record = replay(encode(e) for e in [begin(), *ran("0", "click")]).steps[0]
    assert type(record) is StepRecord and hash(record) == hash(fold([begin(), *ran("0", "click")]).steps[0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.status = "failed"  # type: ignore[misc]

def test_a_replay_gives_the_collector_its_state_back_even_when_a_record_is_bad() -> None:
    good = [encode(e) for e in [begin(), *ran("0", "click")]]
    assert replay(good).steps[0].status == "ok" and gc.isenabled()
    with pytest.raises(KeyError):
        replay([*good, encode(StepSucceeded(CALL, "7"))])  # no step 7 in the call
    assert gc.isenabled()
    gc.disable()
    try:
        replay(good)
        assert not gc.isenabled()  # off before, off after
    finally:
        gc.enable()


# --- summary ---------------------------------------------------------------------------------


def test_summary_counts_statuses_in_order_and_names_the_first_problem() -> None:
    assert spec_example().summary == (
        "3 commands: 1 ok, 1 unknown, 1 skipped. Step 1 (submitForm on tab 3) has an unknown outcome: "
        "Command timed out after 30s. Observe the page, then resume with observed for each unknown write.")


def test_summary_of_an_all_ok_call_is_just_the_counts() -> None:
    assert fold([begin(BATCH[:1]), *ran("0", "click")]).summary == "1 command: 1 ok."
    assert fold([begin(BATCH[:2]), *ran("0", "click"), *ran("1", "submitForm")]).summary == "2 commands: 2 ok."


def test_summary_counts_top_level_commands_only() -> None:
    log = fold([begin(NESTED), *ran("0", "newTab", None), *ran("1.0", "click"), *ran("1.1", "submitForm"),
                *ran("2.0.0", "navigate", 4), *ran("2.0.1", "pageText", 4), *ran("2.1.0", "fill", 5),
                *ran("2.1.1", "click", 5)])
    assert log.summary == "3 commands: 3 ok."


def test_summary_names_the_first_problem_step_by_its_nested_path() -> None:
    log = fold([begin(NESTED), *ran("0", "newTab", None), *ran("1.0", "click"), *ran("1.1", "submitForm"),
                *ran("2.0.0", "navigate", 4), *failed("2.1.0", "fill", 5), *held("2.0.1", "pageText", 4),
                CallEnded(CALL, "stopped")])
    assert log.summary.startswith("3 commands: 2 ok, 1 held. Step 2.0.1 (pageText on tab 4) is held for approval")
    assert log.summary.endswith(" Approve it, then resume.")


def test_summary_of_a_failed_step_without_a_tab() -> None:
    log = fold([begin((Step("newTab"), Step("url", 3))), *failed("0", "newTab", None, error="Too many tabs"),
                CallEnded(CALL, "stopped")])
    assert log.summary == ("2 commands: 1 failed, 1 skipped. Step 0 (newTab) failed: Too many tabs. "
                           "Resume to send the failed and skipped steps again.")


def test_summary_of_a_failure_that_is_not_retryable_suggests_no_resume() -> None:
    log = fold([begin((Step("navigate"), Step("url", 3))),
                *failed("0", "navigate", error="URL refused by policy", code="url_denied", retryable=False),
                CallEnded(CALL, "stopped")])
    assert log.summary == ("2 commands: 1 failed, 1 skipped. Step 0 (navigate on tab 3) failed: URL refused by "
                           "policy. The failure is not retryable: a resume would meet it again, so fix its cause "
                           "or send a new call.")
    assert "Resume" not in log.summary


def test_summary_suggests_a_resume_when_one_failure_of_a_parallel_is_retryable() -> None:
    log = fold([begin(NESTED), *ran("0", "newTab", None), *ran("1.0", "click"), *ran("1.1", "submitForm"),
                *failed("2.0.0", "navigate", 4, code="url_denied", retryable=False), *failed("2.1.0", "fill", 5),
                CallEnded(CALL, "stopped")])
    assert log.summary.endswith(" Resume to send the failed and skipped steps again.")
    assert record_from_json(record_to_json(log.find("2.1.0"))).retryable is True  # type: ignore[arg-type]


def test_summary_of_an_unknown_step_without_an_error_says_no_none() -> None:
    log = fold([begin(), *wrote("0", "click"), StepStarted(CALL, "1", "submitForm", 3), StepDispatched(CALL, "1")])
    assert log.summary == (
        "3 commands: 1 ok, 1 unknown, 1 skipped. Step 1 (submitForm on tab 3) has an unknown outcome. "
        "Observe the page, then resume with observed for each unknown write.")


def test_summary_names_the_warning_a_call_stopped_at() -> None:
    log = fold([begin(), StepStarted(CALL, "0", "click", 3), StepSucceeded(CALL, "0", warning="Page was slow"),
                CallEnded(CALL, "stopped")])
    assert log.summary == ("3 commands: 1 ok, 2 skipped. Stopped at a warning of step 0 (click on tab 3): "
                           "Page was slow. Resume to run the skipped steps.")


def test_summary_names_the_container_deadline() -> None:
    log = fold([begin(timeout=90.0), *ran("0", "click"), CallEnded(CALL, "container_timeout")])
    assert log.summary == ("3 commands: 1 ok, 2 skipped. The call reached its 90s deadline. "
                           "Resume to run the skipped steps.")


def test_summary_names_no_typed_value_or_result() -> None:
    log = spec_example()
    assert set(log.summary.split()) & {"hunter2", "None"} == set()


# --- records ---------------------------------------------------------------------------------


def test_find_returns_the_record_at_a_path_or_none() -> None:
    log = fold([begin(NESTED), *ran("0", "newTab", None), *wrote("1.0", "click"), *lost("1.1", "submitForm")])
    record = log.find("1.1")
    assert isinstance(record, StepRecord)
    assert (record.path, record.index, record.action, record.tab_id, record.status) == (
        "1.1", 1, "submitForm", 3, "unknown")
    assert log.find("2.1.0").action == "fill"  # type: ignore[union-attr]
    assert log.find("2").is_container is True  # type: ignore[union-attr]
    assert log.find("2.2.0") is None
    assert log.find("3") is None
    assert log.find("1.then.0") is None


def test_records_walk_every_step_in_path_order() -> None:
    log = fold([begin(NESTED)])
    assert [r.path for r in log.records()] == ["0", "1", "1.0", "1.1", "2", "2.0.0", "2.0.1", "2.1.0", "2.1.1"]


def _progress_keys(records: list[dict[str, Any]]) -> set[str]:
    keys: set[str] = set()
    for record in records:
        keys |= set(record)
        keys |= _progress_keys(record.get("steps", []))
        for seq in record.get("sequences", []):
            keys |= _progress_keys(seq)
    return keys


def test_progress_shows_no_internal_fields() -> None:
    log = fold([begin(NESTED), *ran("0", "newTab", None), *lost("1.0", "click"), *failed("2.0.0", "navigate", 4)])
    assert _progress_keys(log.progress) == {"index", "action", "tabId", "status", "steps", "sequences"}
