"""Checkpoints (spec: Checkpoints, browser_resume, Errors): what a call that did not finish ok keeps.

Every test runs the pure core with fakes: ``World`` wires ``Calls`` with a checkpoint store on a
fake clock, a scripted driver and the drop reasons the store reports.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import re
from collections.abc import Sequence
from typing import Any

import pytest

from core.ports import Recorded
from messages.commands import Command
from messages.errors import KitsuneError
from messages.events import CallStarted
from messages.results import Failed, Failure, Outcome
from messages.tokens import new_token, token_hash
from tests.unit.fakes import ScriptedDriver, World
from tests.unit.helpers import batch, click, intercept, read, resume_error, snapshot

TTL = 30 * 60


# --- helpers -----------------------------------------------------------------------------------


def failing_call(world: World, key: str = "#b") -> dict[str, Any]:
    """Run click #a (ok), click ``key`` (fails, nothing sent), pageText (skipped); answer the body."""
    world.driver.on(key, "fail")
    body = world.calls.run(batch(click("#a"), click(key), read("#r"))).body
    assert body["status"] == "failed"
    return body


def crash_on(world: World, key: str) -> None:
    """The driver raises RuntimeError (an internal error) on ``key``, after recording it as sent."""
    original = world.driver.execute

    def execute(command: Command, tab_id: int | None, timeout: float, recorded: Sequence[Recorded] = (), *,
                as_read: bool = False) -> Outcome:
        if ScriptedDriver.key_of(command) == key:
            original(command, tab_id, timeout, recorded, as_read=as_read)  # recorded as sent: it may have taken effect
            raise RuntimeError("driver bug")
        return original(command, tab_id, timeout, recorded, as_read=as_read)

    world.driver.execute = execute  # type: ignore[method-assign]


# --- which calls keep a checkpoint --------------------------------------------------------------


def test_call_that_finished_ok_has_no_checkpoint_and_no_call_or_resume_token_fields() -> None:
    world = World()
    response = world.calls.run(batch(click("#a"), read("#r")))
    assert response.body["status"] == "ok"
    assert "call" not in response.body
    assert "resume_token" not in response.body
    assert world.store.calls() == []


@pytest.mark.parametrize(("answer", "status"), [
    ("unknown", "unknown"),
    ("hold", "held"),
    ("fail", "failed"),
    ("warn", "skipped"),  # stopOnWarning: the steps after the warning never started
])
def test_container_call_whose_status_is_not_ok_keeps_a_checkpoint(answer: str, status: str) -> None:
    world = World()
    world.driver.on("#a", answer)
    response = world.calls.run(batch(click("#a"), click("#b"), stop_on_warning=True))
    assert response.http_status == 200
    assert response.body["status"] == status
    assert world.store.calls() == [response.body["call"]]
    assert isinstance(response.body["resume_token"], str)


def test_container_timeout_keeps_a_checkpoint() -> None:
    world = World()
    world.driver.on("#a", "hang")
    response = world.calls.run(batch(click("#a", timeout=60), click("#b"), timeout=10))
    assert response.body["results"][0]["code"] == "container_timeout"
    assert response.body["status"] == "unknown"
    assert world.store.calls() == [response.body["call"]]
    assert "resume_token" in response.body


def test_response_adds_call_and_resume_token_to_results_progress_status_and_summary() -> None:
    world = World()
    world.driver.on("#submit", "unknown")
    body = world.calls.run(batch(click("#c"), {"action": "submitForm", "selector": "#submit"}, read("#r"))).body
    assert set(body) == {"results", "progress", "status", "summary", "call", "resume_token"}
    assert body["results"][0] == {"ok": True}
    assert body["results"][1]["code"] == "navigated"
    assert body["progress"] == [
        {"index": 0, "action": "click", "tabId": 3, "status": "ok"},
        {"index": 1, "action": "submitForm", "tabId": 3, "status": "unknown"},
        {"index": 2, "action": "pageText", "tabId": 3, "status": "skipped"},
    ]
    assert body["status"] == "unknown"
    assert body["summary"].startswith("3 commands: 1 ok, 1 unknown, 1 skipped.")


def test_call_is_the_audit_call_id_of_the_container() -> None:
    world = World()
    world.calls.run(batch(click("#ok")))
    body = failing_call(world)
    started = [e for e in world.events if isinstance(e, CallStarted)]
    assert body["call"] == started[-1].call == 2


def test_resume_token_is_24_random_bytes_url_safe() -> None:
    world = World()
    tokens = [failing_call(world)["resume_token"] for _ in range(5)]
    for token in tokens:
        assert re.fullmatch(r"[A-Za-z0-9_-]{32}", token)
        assert len(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))) == 24
    assert len(set(tokens)) == len(tokens)
    assert len(new_token()) == 32


def test_resuming_needs_both_call_and_resume_token() -> None:
    world = World()
    first = failing_call(world)
    second = failing_call(world, "#c")
    assert resume_error(world, first["call"], "").code == "resume_token_invalid"
    assert resume_error(world, first["call"], second["resume_token"]).code == "resume_token_invalid"
    assert resume_error(world, 99, first["resume_token"]).code == "checkpoint_not_found"
    assert world.driver.writes_sent("#b") == 1  # only the first run's failed attempt
    assert world.calls.resume(first["call"], first["resume_token"]).body["status"] == "ok"


def test_checkpoint_keeps_only_the_sha256_of_the_token() -> None:
    world = World()
    body = failing_call(world)
    token = body["resume_token"]
    checkpoint = snapshot(world, body)
    assert checkpoint.token_sha256 == hashlib.sha256(token.encode()).digest() == token_hash(token)
    for field in dataclasses.fields(checkpoint):
        value = getattr(checkpoint, field.name)
        assert token not in repr(value), field.name
        assert token.encode() != value
    assert token not in repr(checkpoint)


def test_checkpoint_holds_commands_with_typed_values_results_and_step_records() -> None:
    world = World()
    world.driver.on("#go", "fail")
    spec = batch({"action": "fill", "selector": "#email", "value": "kit@example.org"}, click("#go"))
    body = world.calls.run(spec).body
    checkpoint = snapshot(world, body)
    assert checkpoint.call == body["call"]
    assert checkpoint.spec == spec
    assert checkpoint.spec.commands[0].value == "kit@example.org"  # type: ignore[attr-defined]
    assert checkpoint.spec.default_tab == 3
    assert checkpoint.records["0"].status == "ok"
    assert checkpoint.records["1"].status == "failed"
    assert checkpoint.results["1"].code == "not_found"  # type: ignore[union-attr]
    assert checkpoint.workflow is None


def test_hold_confirm_token_is_not_kept_in_the_checkpoint_results() -> None:
    world = World()
    world.driver.on("#buy", "hold")
    body = world.calls.run(batch(click("#a"), click("#buy"))).body
    assert body["status"] == "held"
    checkpoint = snapshot(world, body)
    held = checkpoint.results["1"]
    assert isinstance(held, Failure)
    assert held.code == "needs_user"
    assert held.state == {"reason": "approval"}
    assert "confirm-secret" not in repr(checkpoint)


# --- how many and how long ---------------------------------------------------------------------


def test_at_most_20_checkpoints_the_oldest_is_pushed_out_first() -> None:
    world = World()
    bodies = [failing_call(world) for _ in range(21)]
    assert world.store.calls() == [b["call"] for b in bodies[1:]]
    assert world.drops == [(bodies[0]["call"], "pushed_out")]
    error = resume_error(world, bodies[0]["call"], bodies[0]["resume_token"])
    assert (error.code, error.http_status) == ("checkpoint_not_found", 404)
    assert world.calls.resume(bodies[1]["call"], bodies[1]["resume_token"]).body["status"] == "ok"


def test_a_replaced_checkpoint_counts_as_newest_when_pushing_out() -> None:
    world = World()
    bodies = [failing_call(world) for _ in range(20)]
    world.driver.on("#b", "fail")
    again = world.calls.resume(bodies[0]["call"], bodies[0]["resume_token"]).body
    assert again["status"] == "failed"
    failing_call(world)
    assert world.drops == [(bodies[1]["call"], "pushed_out")]
    assert bodies[0]["call"] in world.store.calls()
    assert world.calls.resume(bodies[0]["call"], again["resume_token"]).body["status"] == "ok"


def test_checkpoint_expires_30_minutes_after_its_call_ended() -> None:
    world = World()
    world.driver.on("#slow", "hang")
    body = world.calls.run(batch(click("#slow", timeout=90), timeout=100)).body  # the call takes 90 s
    world.clock.advance(TTL - 1)
    assert world.store.calls() == [body["call"]]
    assert world.drops == []
    world.clock.advance(2)
    error = resume_error(world, body["call"], body["resume_token"])
    assert (error.code, error.http_status) == ("checkpoint_not_found", 404)
    assert world.drops == [(body["call"], "expired")]


def test_replaced_checkpoint_expires_30_minutes_after_the_last_resume() -> None:
    world = World()
    body = failing_call(world)
    world.clock.advance(TTL - 60)
    world.driver.on("#b", "fail")
    again = world.calls.resume(body["call"], body["resume_token"]).body
    world.clock.advance(TTL - 1)  # well past 30 minutes after the call itself
    assert world.store.calls() == [body["call"]]
    world.clock.advance(1)
    assert resume_error(world, body["call"], again["resume_token"]).code == "checkpoint_not_found"
    assert world.drops == [(body["call"], "expired")]


def test_expired_checkpoint_is_dropped_as_expired_even_when_a_new_call_fills_the_store() -> None:
    world = World()
    bodies = [failing_call(world) for _ in range(20)]
    world.clock.advance(TTL)
    failing_call(world)
    reasons = dict(world.drops)
    assert reasons.get(bodies[0]["call"]) == "expired"
    assert "pushed_out" not in reasons.values()


# --- when it is dropped --------------------------------------------------------------------------


def test_checkpoint_dropped_when_resume_finishes_ok() -> None:
    world = World()
    body = failing_call(world)
    response = world.calls.resume(body["call"], body["resume_token"])
    assert response.body["status"] == "ok"
    assert "call" not in response.body
    assert "resume_token" not in response.body
    assert world.drops == [(body["call"], "resumed_ok")]
    assert world.store.calls() == []
    assert resume_error(world, body["call"], body["resume_token"]).code == "checkpoint_not_found"


def test_resume_that_does_not_finish_ok_answers_the_same_call_and_a_new_resume_token() -> None:
    world = World()
    body = failing_call(world)
    world.driver.on("#b", "fail")
    again = world.calls.resume(body["call"], body["resume_token"]).body
    assert again["status"] == "failed"
    assert again["call"] == body["call"]
    assert again["resume_token"] != body["resume_token"]
    assert re.fullmatch(r"[A-Za-z0-9_-]{32}", again["resume_token"])
    assert world.drops == []


def test_old_token_stops_working_after_a_resume_that_does_not_finish_ok() -> None:
    world = World()
    body = failing_call(world)
    world.driver.on("#b", "fail")
    again = world.calls.resume(body["call"], body["resume_token"]).body
    error = resume_error(world, body["call"], body["resume_token"])
    assert (error.code, error.http_status) == ("resume_token_invalid", 403)
    assert world.calls.resume(body["call"], again["resume_token"]).body["status"] == "ok"
    assert world.driver.writes_sent("#b") == 3


def test_a_reissued_token_resumes_and_the_one_before_it_stops_working() -> None:
    world = World()
    body = failing_call(world)
    assert world.store.reissue(body["call"], "someone-else") is None  # another agent's checkpoint is not found
    reissued = world.store.reissue(body["call"], None)
    assert reissued is not None and reissued != body["resume_token"]
    assert resume_error(world, body["call"], body["resume_token"]).code == "resume_token_invalid"
    world.driver.on("#b", "ok")
    assert world.calls.resume(body["call"], reissued).body["status"] == "ok"
    assert world.store.reissue(body["call"], None) is None  # resumed to its end: gone


def test_resume_failed_when_resume_stops_on_internal_error_drops_the_checkpoint() -> None:
    world = World()
    world.driver.on("#a", "fail")
    body = world.calls.run(batch(click("#a"), click("#b"), read("#r"))).body  # #b and pageText are skipped
    crash_on(world, "#b")
    response = world.calls.resume(body["call"], body["resume_token"])
    assert response.http_status == 200
    assert response.body["code"] == "resume_failed"
    assert isinstance(response.body["error"], str)
    statuses = [p["status"] for p in response.body["progress"]]
    assert statuses == ["ok", "unknown", "skipped"]  # what ran; the step in progress may have taken effect
    assert "resume_token" not in response.body
    assert world.drops == [(body["call"], "internal_error")]
    assert world.store.calls() == []
    error = resume_error(world, body["call"], body["resume_token"])
    assert (error.code, error.http_status) == ("checkpoint_not_found", 404)


def test_resume_failed_http_status_is_200() -> None:
    assert KitsuneError("resume_failed", "x").http_status == 200


def test_every_checkpoint_dropped_on_bridge_shutdown() -> None:
    world = World()
    bodies = [failing_call(world) for _ in range(3)]
    world.store.close()
    assert sorted(world.drops) == sorted((b["call"], "shutdown") for b in bodies)
    assert world.store.calls() == []
    for body in bodies:
        assert resume_error(world, body["call"], body["resume_token"]).code == "checkpoint_not_found"


def test_checkpoint_being_resumed_is_dropped_on_shutdown() -> None:
    world = World()
    body = failing_call(world)
    world.store.take(body["call"], body["resume_token"], None)
    world.store.close()
    assert world.drops == [(body["call"], "shutdown")]
    world.store.put_back(body["call"])
    assert world.store.calls() == []


def test_bridge_restart_loses_checkpoints() -> None:
    world = World()
    body = failing_call(world)
    restarted = World()  # a new store: checkpoints live in bridge memory only
    error = resume_error(restarted, body["call"], body["resume_token"])
    assert (error.code, error.http_status) == ("checkpoint_not_found", 404)


# --- concurrent resume -------------------------------------------------------------------------


def test_checkpoint_being_resumed_by_another_request_answers_checkpoint_not_found() -> None:
    world = World()
    body = failing_call(world)
    seen: list[KitsuneError] = []

    def second_resume() -> None:
        try:
            world.calls.resume(body["call"], body["resume_token"])
        except KitsuneError as e:
            seen.append(e)

    intercept(world, "#b", second_resume)
    response = world.calls.resume(body["call"], body["resume_token"])
    assert [(e.code, e.http_status) for e in seen] == [("checkpoint_not_found", 404)]
    assert response.body["status"] == "ok"
    assert world.driver.writes_sent("#b") == 2  # the failed first attempt and the one resume


def test_store_take_while_taken_answers_checkpoint_not_found_and_put_back_restores_it() -> None:
    world = World()
    body = failing_call(world)
    before = snapshot(world, body)
    world.store.take(body["call"], body["resume_token"], None)
    assert world.store.calls() == []
    with pytest.raises(KitsuneError) as raised:
        world.store.take(body["call"], body["resume_token"], None)
    assert raised.value.code == "checkpoint_not_found"
    world.store.put_back(body["call"])
    assert snapshot(world, body) == before


# --- errors leave the checkpoint as it was -------------------------------------------------------


def test_checkpoint_not_found_404_for_a_call_that_finished_ok() -> None:
    world = World()
    world.calls.run(batch(click("#a")))
    error = resume_error(world, 1, new_token())
    assert (error.code, error.http_status) == ("checkpoint_not_found", 404)
    assert world.driver.writes_sent("#a") == 1


def test_checkpoint_not_found_404_for_an_unknown_call() -> None:
    world = World()
    body = failing_call(world)
    before = snapshot(world, body)
    sent = len(world.driver.sent)
    error = resume_error(world, body["call"] + 1, body["resume_token"])
    assert (error.code, error.http_status) == ("checkpoint_not_found", 404)
    assert len(world.driver.sent) == sent
    assert snapshot(world, body) == before


def test_resume_token_invalid_403_sends_nothing_and_leaves_the_checkpoint_as_it_was() -> None:
    world = World()
    body = failing_call(world)
    before = snapshot(world, body)
    sent = len(world.driver.sent)
    error = resume_error(world, body["call"], new_token())
    assert (error.code, error.http_status) == ("resume_token_invalid", 403)
    assert len(world.driver.sent) == sent
    assert snapshot(world, body) == before
    assert world.drops == []
    assert world.calls.resume(body["call"], body["resume_token"]).body["status"] == "ok"


def test_error_keeps_expiry_of_the_checkpoint() -> None:
    world = World()
    body = failing_call(world)
    world.clock.advance(TTL - 10)
    assert resume_error(world, body["call"], new_token()).code == "resume_token_invalid"
    assert resume_error(world, body["call"], body["resume_token"], {"9": "applied"}).code == "observed_invalid"
    world.clock.advance(10)
    assert resume_error(world, body["call"], body["resume_token"]).code == "checkpoint_not_found"
    assert world.drops == [(body["call"], "expired")]


def test_no_error_contains_the_resume_token_typed_values_javascript_or_stored_results() -> None:
    world = World()
    world.driver.on("#email", "unknown")
    world.driver.on("#r", ("value", {"text": "stored-result-text"}))
    body = world.calls.run(batch(
        read("#r"),
        {"action": "js", "code": "window.secretScript()"},
        {"action": "fill", "selector": "#email", "value": "typed-secret-value"},
    )).body
    token = body["resume_token"]
    errors = [
        resume_error(world, body["call"], token),  # observed_required
        resume_error(world, body["call"], token, {"0": "applied", "2": "maybe"}),  # observed_invalid
        resume_error(world, body["call"], token + "x"),  # resume_token_invalid
        resume_error(world, body["call"] + 5, token),  # checkpoint_not_found
    ]
    assert [e.code for e in errors] == ["observed_required", "observed_invalid", "resume_token_invalid",
                                        "checkpoint_not_found"]
    for error in errors:
        text = repr(error.to_json()) + str(error)
        for secret in (token, "typed-secret-value", "window.secretScript()", "stored-result-text"):
            assert secret not in text, (error.code, secret)


def test_token_and_typed_values_never_enter_the_event_stream() -> None:
    world = World()
    world.driver.on("#email", Failed(Failure("Could not fill typed-secret-value", "not_editable", False)))
    body = world.calls.run(batch(
        {"action": "fill", "selector": "#email", "value": "typed-secret-value"},
        {"action": "js", "code": "window.secretScript()"},
    )).body
    world.calls.resume(body["call"], body["resume_token"])
    text = repr(world.events) + repr(body["results"])
    for secret in (body["resume_token"], "typed-secret-value", "window.secretScript()"):
        assert secret not in text


def test_at_most_20_checkpoints_when_a_taken_checkpoint_is_put_back() -> None:
    """A resume refused with an error puts its checkpoint back after another call kept a new one.

    Calls.resume takes the checkpoint out, checks the workflow and ``observed``, and puts it back
    on an error; a call that ends meanwhile keeps its checkpoint. The store must still hold at
    most 20, and the one put back is left as it was.
    """
    world = World()
    bodies = [failing_call(world) for _ in range(20)]
    first = bodies[0]
    before = snapshot(world, first)
    world.store.take(first["call"], first["resume_token"], None)  # a resume in progress
    failing_call(world)  # another call ends meanwhile
    world.store.put_back(first["call"])  # the resume was refused (observed_invalid, workflow_changed, ...)
    assert len(world.store.calls()) <= 20
    assert [reason for _, reason in world.drops] == ["pushed_out"]
    assert snapshot(world, first) == before


def test_resume_failed_inside_a_parallel_reports_what_ran_and_drops_the_checkpoint() -> None:
    world = World()
    world.driver.on("#a", "fail")
    world.driver.on("#b", "fail")
    body = world.calls.run(batch({"action": "parallel", "sequences": [
        [click("#a", tabId=1), click("#a2", tabId=1)], [click("#b", tabId=2)]]})).body
    crash_on(world, "#a2")
    response = world.calls.resume(body["call"], body["resume_token"])
    assert (response.http_status, response.body["code"]) == (200, "resume_failed")
    sequences = response.body["progress"][0]["sequences"]
    assert [[p["status"] for p in seq] for seq in sequences] == [["ok", "unknown"], ["ok"]]
    assert world.drops == [(body["call"], "internal_error")]
    assert world.claims.held() == {}
    assert resume_error(world, body["call"], body["resume_token"]).code == "checkpoint_not_found"
