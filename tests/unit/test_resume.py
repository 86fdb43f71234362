"""browser_resume (spec: browser_resume, Step paths, What each step does, Parallel, Errors).

The rule that holds throughout: resuming never sends a write again after it ran ok, and sends a
write whose outcome is unknown again only after the caller observed that it did not take effect.
``driver.writes_sent(key)`` counts every write the scripted driver received, a failed attempt
included (a ``"fail"`` answer means the page did nothing, not that nothing reached the driver).
"""

from __future__ import annotations

from typing import Any

import pytest

from core.checkpoints import Checkpoint
from core.claims import Claim
from messages.contract import RESUME_DEADLINE
from messages.events import CallResumed
from tests.unit.fakes import World
from tests.unit.helpers import batch, click, find, intercept, parallel, read, refused, sequence, snapshot

# --- helpers -----------------------------------------------------------------------------------


def run(world: World, *commands: dict[str, Any], **options: Any) -> dict[str, Any]:
    """Run a batch that must not finish ok; answer its body (with call and resume_token)."""
    body = world.calls.run(batch(*commands, **options)).body
    assert body["status"] != "ok", body
    assert "resume_token" in body
    return body


def resume(world: World, body: dict[str, Any], observed: Any = None) -> dict[str, Any]:
    return world.calls.resume(body["call"], body["resume_token"], observed).body


def received(world: World, key: str) -> int:
    """Commands (reads and writes) the driver received under ``key``."""
    return sum(1 for s in world.driver.sent if s.key == key)


def assert_left_as_it_was(world: World, body: dict[str, Any], before: Checkpoint, sent_before: int) -> None:
    """Nothing sent, the checkpoint unchanged, and the same token still works."""
    assert len(world.driver.sent) == sent_before
    assert snapshot(world, body) == before
    assert world.drops == []


# --- ok, skipped, failed -----------------------------------------------------------------------


def test_ok_step_is_kept_and_not_sent_again() -> None:
    world = World()
    world.driver.on("#a", ("value", {"n": 1}))
    world.driver.on("#b", "fail")
    body = run(world, click("#a"), click("#b"))
    again = resume(world, body)
    assert again["status"] == "ok"
    assert world.driver.writes_sent("#a") == 1
    assert again["progress"][0] == {"index": 0, "action": "click", "tabId": 3, "status": "ok", "resumed": "kept"}
    assert "resumed" not in again["progress"][1]
    assert again["results"][0] == {"ok": True, "n": 1}  # its stored result is reused


def test_write_that_ran_ok_is_never_sent_again_over_several_resumes() -> None:
    world = World()
    world.driver.on("#b", "fail", "fail", "fail")
    body = run(world, click("#a"), click("#b"))
    first = resume(world, body)
    second = resume(world, first | {"call": body["call"]})
    assert first["status"] == second["status"] == "failed"
    final = resume(world, second | {"call": body["call"]})
    assert final["status"] == "ok"
    assert final["progress"][0]["resumed"] == "kept"
    assert world.driver.writes_sent("#a") == 1
    assert world.driver.writes_sent("#b") == 4


def test_skipped_step_is_sent_because_it_never_started() -> None:
    world = World()
    world.driver.on("#a", "fail")
    body = run(world, click("#a"), click("#b"), read("#r"))
    assert [p["status"] for p in body["progress"]] == ["failed", "skipped", "skipped"]
    assert world.driver.writes_sent("#b") == 0
    again = resume(world, body)
    assert again["status"] == "ok"
    assert world.driver.writes_sent("#b") == 1
    assert received(world, "#r") == 1


@pytest.mark.parametrize("answer", ["fail", "fail_retryable"])
def test_failed_step_is_sent_again(answer: str) -> None:
    world = World()
    world.driver.on("#b", answer)
    body = run(world, click("#a"), click("#b"))
    assert body["progress"][1]["status"] == "failed"
    again = resume(world, body)
    assert again["status"] == "ok"
    assert world.driver.writes_sent("#b") == 2


def test_failed_step_observed_not_applied_same_as_leaving_it_out() -> None:
    world = World()
    world.driver.on("#b", "fail")
    body = run(world, click("#a"), click("#b"))
    again = resume(world, body, {"1": "not_applied"})
    assert again["status"] == "ok"
    assert world.driver.writes_sent("#b") == 2
    assert world.driver.writes_sent("#a") == 1


def test_failed_step_observed_applied_is_marked_ok_without_sending() -> None:
    world = World()
    world.driver.on("#b", "fail")
    body = run(world, click("#a"), click("#b"), read("#r"))
    again = resume(world, body, {"1": "applied"})
    assert again["status"] == "ok"
    assert again["progress"][1]["observed"] == "applied"
    assert world.driver.writes_sent("#b") == 1
    assert received(world, "#r") == 1


# --- held --------------------------------------------------------------------------------------


def test_held_step_is_sent_again_and_stays_held_while_ask_mode_is_on() -> None:
    world = World()
    world.driver.on("#buy", "hold", "hold")
    body = run(world, click("#a"), click("#buy"), click("#after"))
    assert body["status"] == "held"
    again = resume(world, body)
    assert world.driver.writes_sent("#buy") == 2
    assert again["status"] == "held"
    assert [p["status"] for p in again["progress"]] == ["ok", "held", "skipped"]
    assert world.driver.writes_sent("#after") == 0  # the call stops at the held step
    assert again["resume_token"] != body["resume_token"]


def test_sequence_still_stops_at_a_held_step() -> None:
    world = World()
    world.driver.on("#buy", "hold", "hold")
    body = run(world, sequence(click("#a"), click("#buy"), click("#after")))
    again = resume(world, body)
    assert [p["status"] for p in again["progress"][0]["steps"]] == ["ok", "held", "skipped"]
    assert world.driver.writes_sent("#after") == 0


def test_held_step_reported_applied_is_marked_ok_and_not_sent() -> None:
    world = World()
    world.driver.on("#buy", "hold")
    body = run(world, click("#a"), click("#buy"), click("#after"))
    again = resume(world, body, {"1": "applied"})
    assert again["status"] == "ok"
    assert again["progress"][1] == {"index": 1, "action": "click", "tabId": 3, "status": "ok",
                                    "observed": "applied"}
    assert again["results"][1]["ok"] is True
    assert world.driver.writes_sent("#buy") == 1
    assert world.driver.writes_sent("#after") == 1


def test_held_step_observed_not_applied_same_as_leaving_it_out() -> None:
    world = World()
    world.driver.on("#buy", "hold", "hold")
    body = run(world, click("#buy"), click("#after"))
    again = resume(world, body, {"0": "not_applied"})
    assert again["status"] == "held"
    assert world.driver.writes_sent("#buy") == 2
    assert world.driver.writes_sent("#after") == 0


# --- unknown reads and writes ------------------------------------------------------------------

READS = [
    read("#x", label="X"),
    find("#x", label="X"),
    {"action": "url", "label": "X"},
    {"action": "title", "label": "X"},
    {"action": "screenshot", "label": "X"},
    {"action": "waitFor", "selector": "#x", "label": "X"},
    {"action": "getTabs", "label": "X"},
]

WRITES = [
    click("#x", label="X"),
    {"action": "type", "selector": "#x", "text": "hello", "label": "X"},
    {"action": "fill", "selector": "#x", "value": "hello", "label": "X"},
    {"action": "select", "selector": "#x", "values": ["a"], "label": "X"},
    {"action": "press", "key": "Enter", "label": "X"},
    {"action": "check", "selector": "#x", "label": "X"},
    {"action": "submitForm", "label": "X"},
    {"action": "navigate", "url": "https://shop.example/", "label": "X"},
    {"action": "newTab", "label": "X"},
    {"action": "closeTab", "tabId": 2, "label": "X"},
    {"action": "switchTab", "tabId": 2, "label": "X"},
    {"action": "js", "code": "1 + 1", "label": "X"},
    {"action": "waitForResult", "code": "window.done", "label": "X"},
    {"action": "cookies", "label": "X"},
    {"action": "storage", "label": "X"},
    {"action": "clipboard", "label": "X"},
    {"action": "download", "selector": "#x", "label": "X"},
]


@pytest.mark.parametrize("command", READS, ids=lambda c: c["action"])
def test_unknown_read_is_sent_again_without_observation(command: dict[str, Any]) -> None:
    world = World()
    world.driver.on("X", "unknown")
    body = run(world, click("#a"), command, click("#c"))
    assert body["progress"][1]["status"] == "unknown"
    again = resume(world, body)
    assert again["status"] == "ok"
    assert received(world, "X") == 2
    assert world.driver.writes_sent("#a") == 1


@pytest.mark.parametrize("command", WRITES, ids=lambda c: c["action"])
def test_unknown_write_is_refused_until_observed(command: dict[str, Any]) -> None:
    world = World()
    world.driver.on("X", "unknown")
    body = run(world, click("#a"), command, click("#c"))
    before, sent = snapshot(world, body), len(world.driver.sent)
    error = refused(world, body)
    assert (error.code, error.http_status) == ("observed_required", 400)
    tab = None if command["action"] == "newTab" else command.get("tabId", 3)
    assert error.state == {"steps": [{"step": "1", "action": command["action"], "tabId": tab, "status": "unknown",
                                      "accepts": ["applied", "not_applied"]}]}
    assert_left_as_it_was(world, body, before, sent)


def test_unknown_write_has_no_default_observation() -> None:
    world = World()
    world.driver.on("#submit", "unknown")
    body = run(world, click("#a"), click("#submit"))
    for _ in range(3):
        assert refused(world, body).code == "observed_required"
    assert refused(world, body, {}).code == "observed_required"
    assert world.driver.writes_sent("#submit") == 1


def test_unknown_write_observed_not_applied_is_sent_again() -> None:
    world = World()
    world.driver.on("#submit", "unknown")
    body = run(world, click("#a"), click("#submit"), read("#r"))
    again = resume(world, body, {"1": "not_applied"})
    assert again["status"] == "ok"
    assert world.driver.writes_sent("#submit") == 2
    assert world.driver.writes_sent("#a") == 1
    assert "observed" not in again["progress"][1]


def test_unknown_write_observed_applied_is_marked_ok_without_sending() -> None:
    world = World()
    world.driver.on("#submit", "unknown")
    body = run(world, click("#a"), click("#submit"), read("#r"))
    again = resume(world, body, {"1": "applied"})
    assert again["status"] == "ok"
    assert again["progress"][1] == {"index": 1, "action": "click", "tabId": 3, "status": "ok",
                                    "observed": "applied"}
    assert again["results"][1]["ok"] is True
    assert world.driver.writes_sent("#submit") == 1
    assert received(world, "#r") == 1
    assert world.drops == [(body["call"], "resumed_ok")]


def test_unknown_read_accepts_an_observation_too() -> None:
    world = World()
    world.driver.on("#r", "unknown")
    body = run(world, read("#r"), click("#b"))
    again = resume(world, body, {"0": "applied"})
    assert again["status"] == "ok"
    assert again["progress"][0]["observed"] == "applied"
    assert received(world, "#r") == 1


# --- ok reads inside a sequence ------------------------------------------------------------------


def test_ok_read_inside_sequence_runs_again_when_a_later_step_that_will_run_uses_it() -> None:
    world = World()
    world.driver.on("#sel", ("value", {"text": "#first"}), ("value", {"text": "#second"}))
    world.driver.on("#first", "fail")
    body = run(world, sequence(read("#sel"), click("${$0.text}")))
    assert body["progress"][0]["steps"][0]["status"] == "ok"
    again = resume(world, body)
    assert again["status"] == "ok"
    assert received(world, "#sel") == 2
    assert "resumed" not in again["progress"][0]["steps"][0]
    assert world.driver.writes_sent("#first") == 1
    assert world.driver.writes_sent("#second") == 1  # the later step used fresh state


def test_ok_read_inside_sequence_not_run_again_when_the_step_that_uses_it_is_kept() -> None:
    world = World()
    world.driver.on("#sel", ("value", {"text": "#first"}), ("value", {"text": "#second"}))
    world.driver.on("#c", "fail")
    body = run(world, sequence(read("#sel"), click("${$0.text}"), click("#c")))
    again = resume(world, body)
    assert again["status"] == "ok"
    assert received(world, "#sel") == 1
    assert world.driver.writes_sent("#first") == 1
    assert world.driver.writes_sent("#second") == 0
    assert [p.get("resumed") for p in again["progress"][0]["steps"]] == ["kept", "kept", None]


def test_ok_read_inside_sequence_not_run_again_when_no_later_step_uses_it() -> None:
    world = World()
    world.driver.on("#c", "fail")
    body = run(world, sequence(read("#sel"), click("#c")))
    again = resume(world, body)
    assert again["status"] == "ok"
    assert received(world, "#sel") == 1
    assert again["progress"][0]["steps"][0]["resumed"] == "kept"


def test_top_level_ok_read_is_never_run_again() -> None:
    world = World()
    world.driver.on("#sel", ("value", {"text": "#first"}), ("value", {"text": "#second"}))
    world.driver.on("#first", "fail")
    body = run(world, read("#sel"), click("${$0.text}"))
    again = resume(world, body)
    assert again["status"] == "ok"
    assert received(world, "#sel") == 1
    assert again["progress"][0]["resumed"] == "kept"
    assert world.driver.writes_sent("#first") == 2  # the stored result is reused
    assert world.driver.writes_sent("#second") == 0


def test_ok_write_inside_sequence_used_by_a_later_step_is_never_sent_again() -> None:
    world = World()
    world.driver.on("#in-new-tab", "fail")
    body = run(world, sequence({"action": "newTab", "label": "open"},
                               click("#in-new-tab", tabId="${$0.tabId}")))
    again = resume(world, body)
    assert again["status"] == "ok"
    assert world.driver.writes_sent("open") == 1
    tabs = [s.tab for s in world.driver.sent if s.key == "#in-new-tab"]
    assert tabs == [100, 100]


def test_ok_read_inside_parallel_sequence_runs_again_when_a_later_step_uses_it() -> None:
    world = World()
    world.driver.on("#sel", ("value", {"text": "#first"}), ("value", {"text": "#second"}))
    world.driver.on("#first", "fail")
    body = run(world, parallel([read("#sel", tabId=1), click("${$0.text}", tabId=1)], [click("#b", tabId=2)]))
    again = resume(world, body)
    assert again["status"] == "ok"
    assert received(world, "#sel") == 2
    assert world.driver.writes_sent("#second") == 1
    assert world.driver.writes_sent("#b") == 1


# --- one-step blocks ---------------------------------------------------------------------------

BLOCKS_WHOSE_WRITE_RAN_OK: dict[str, dict[str, Any]] = {
    "try": {"action": "try", "body": [click("#a"), find("#missing")]},
    "if": {"action": "if", "condition": "cond", "then": [find("#missing")]},
    "while": {"action": "while", "condition": "cond", "body": [find("#missing")], "maxIterations": 3},
    "retry": {"action": "retry", "body": [click("#a"), find("#missing")], "attempts": 1, "delay": 0},
    "broadcast": {"action": "broadcast", "tabIds": [1, 2], "command": click("#a")},
}


def _block_whose_write_ran_ok(world: World, name: str) -> dict[str, Any]:
    world.driver.on("#missing", "fail")
    world.driver.on("#a", "ok", "fail")  # broadcast: ok on tab 1, fails on tab 2
    body = run(world, BLOCKS_WHOSE_WRITE_RAN_OK[name], click("#after"))
    assert body["progress"][0]["status"] == "failed"
    return body


def _writes(world: World) -> int:
    return world.driver.writes_sent("#a") + world.driver.writes_sent("cond")


@pytest.mark.parametrize("name", list(BLOCKS_WHOSE_WRITE_RAN_OK))
def test_block_whose_write_ran_ok_requires_applied(name: str) -> None:
    world = World()
    body = _block_whose_write_ran_ok(world, name)
    before, sent, writes = snapshot(world, body), len(world.driver.sent), _writes(world)
    error = refused(world, body)
    assert (error.code, error.http_status) == ("observed_required", 400)
    tab = 3 if name in ("try", "if", "while", "retry") else None
    assert error.state == {"steps": [{"step": "0", "action": name, "tabId": tab, "status": "failed",
                                      "accepts": ["applied"]}]}
    assert _writes(world) == writes
    assert_left_as_it_was(world, body, before, sent)


@pytest.mark.parametrize("name", list(BLOCKS_WHOSE_WRITE_RAN_OK))
def test_block_whose_write_ran_ok_refuses_not_applied(name: str) -> None:
    world = World()
    body = _block_whose_write_ran_ok(world, name)
    before, sent = snapshot(world, body), len(world.driver.sent)
    error = refused(world, body, {"0": "not_applied"})
    assert (error.code, error.http_status) == ("observed_invalid", 400)
    assert error.state == {"steps": [{"step": "0", "reason": "value_not_accepted", "accepts": ["applied"]}]}
    assert_left_as_it_was(world, body, before, sent)


@pytest.mark.parametrize("name", list(BLOCKS_WHOSE_WRITE_RAN_OK))
def test_block_whose_write_ran_ok_is_never_sent_again_applied_marks_it_ok(name: str) -> None:
    world = World()
    body = _block_whose_write_ran_ok(world, name)
    writes, finds = _writes(world), received(world, "#missing")
    again = resume(world, body, {"0": "applied"})
    assert again["status"] == "ok"
    assert again["progress"][0]["status"] == "ok"
    assert again["progress"][0]["observed"] == "applied"
    assert _writes(world) == writes
    assert received(world, "#missing") == finds
    assert world.driver.writes_sent("#after") == 1


def test_one_step_block_is_resumed_as_one_step() -> None:
    world = World()
    world.driver.on("#missing", "fail")
    body = run(world, {"action": "try", "body": [read("#r"), find("#missing")]}, click("#after"))
    assert "steps" not in body["progress"][0]
    again = resume(world, body)
    assert again["status"] == "ok"
    assert received(world, "#r") == 2  # the whole block runs again, its ok read included
    assert received(world, "#missing") == 2


def test_if_whose_condition_failed_is_sent_again_without_observation() -> None:
    world = World()
    world.driver.on("cond", "fail")
    body = run(world, {"action": "if", "condition": "cond", "then": [click("#then")]})
    assert body["progress"][0]["status"] == "failed"
    again = resume(world, body)
    assert again["status"] == "ok"
    assert world.driver.writes_sent("cond") == 2
    assert world.driver.writes_sent("#then") == 1


def test_unknown_block_with_no_write_ok_accepts_both_observations() -> None:
    world = World()
    world.driver.on("#a", "unknown")
    body = run(world, {"action": "try", "body": [click("#a")]})
    error = refused(world, body)
    assert error.state["steps"][0]["accepts"] == ["applied", "not_applied"]  # type: ignore[index]
    again = resume(world, body, {"0": "not_applied"})
    assert again["status"] == "ok"
    assert world.driver.writes_sent("#a") == 2


def test_block_whose_write_ran_ok_in_a_resume_requires_applied_next_time() -> None:
    world = World()
    world.driver.on("#a", "unknown")
    world.driver.on("#missing", "fail")
    body = run(world, {"action": "try", "body": [click("#a"), find("#missing")]})
    again = resume(world, body, {"0": "not_applied"})  # #a runs ok this time, the find fails
    assert again["status"] == "failed"
    error = refused(world, again | {"call": body["call"]})
    assert error.state["steps"][0]["accepts"] == ["applied"]  # type: ignore[index]
    assert world.driver.writes_sent("#a") == 2


# --- observed is checked -----------------------------------------------------------------------


def _mixed(world: World) -> dict[str, Any]:
    """0 ok click, 1 sequence (1.0 ok, 1.1 unknown write, 1.2 skipped), 2 skipped."""
    world.driver.on("#u", "unknown")
    return run(world, click("#a"), sequence(click("#s0"), click("#u"), click("#s2")), click("#z"))


@pytest.mark.parametrize(("path", "reason"), [
    ("0", "status_ok"),
    ("1.0", "status_ok"),
    ("1.2", "status_skipped"),
    ("2", "status_skipped"),
    ("1", "container_block"),
    ("7", "not_found"),
    ("1.9", "not_found"),
    ("1.1.0", "not_found"),
])
def test_observed_invalid_for_step_that_is_ok_skipped_a_container_block_or_does_not_exist(
        path: str, reason: str) -> None:
    world = World()
    body = _mixed(world)
    before, sent = snapshot(world, body), len(world.driver.sent)
    error = refused(world, body, {"1.1": "not_applied", path: "applied"})
    assert (error.code, error.http_status) == ("observed_invalid", 400)
    assert error.state is not None
    assert [(s["step"], s["reason"]) for s in error.state["steps"]] == [(path, reason)]
    assert set(error.state["steps"][0]) == {"step", "reason", "accepts"}
    assert_left_as_it_was(world, body, before, sent)
    assert resume(world, body, {"1.1": "applied"})["status"] == "ok"


@pytest.mark.parametrize("path", ["0", "0.1"])
def test_observed_invalid_for_a_parallel_or_one_of_its_sequences(path: str) -> None:
    world = World()
    world.driver.on("#b", "unknown")
    body = run(world, parallel([click("#a", tabId=1)], [click("#b", tabId=2)]))
    error = refused(world, body, {path: "applied"})
    assert error.code == "observed_invalid"
    assert error.state == {"steps": [{"step": path, "reason": "container_block", "accepts": []}]}


@pytest.mark.parametrize("value", ["maybe", "APPLIED", True, None, 1])
def test_observed_invalid_for_a_value_the_step_does_not_accept(value: Any) -> None:
    world = World()
    world.driver.on("#u", "unknown")
    body = run(world, click("#u"))
    error = refused(world, body, {"0": value})
    assert error.code == "observed_invalid"
    assert error.state == {"steps": [{"step": "0", "reason": "value_not_accepted",
                                      "accepts": ["applied", "not_applied"]}]}
    assert world.driver.writes_sent("#u") == 1


def test_observed_that_is_not_an_object_is_observed_invalid() -> None:
    world = World()
    world.driver.on("#u", "unknown")
    body = run(world, click("#u"))
    error = refused(world, body, ["0"])
    assert (error.code, error.http_status) == ("observed_invalid", 400)


def test_every_observed_entry_is_checked_before_anything_is_sent() -> None:
    world = World()
    body = _mixed(world)
    before, sent = snapshot(world, body), len(world.driver.sent)
    error = refused(world, body, {"0": "applied", "1.1": "not_applied", "9": "not_applied"})
    assert error.code == "observed_invalid"
    assert sorted((s["step"], s["reason"]) for s in error.state["steps"]) == [  # type: ignore[index]
        ("0", "status_ok"), ("9", "not_found")]
    assert_left_as_it_was(world, body, before, sent)


def test_observed_required_lists_every_step_that_needs_an_observation() -> None:
    world = World()
    world.driver.on("#u1", "unknown")
    world.driver.on("#u2", "unknown")
    body = run(world, parallel([click("#u1", tabId=1)], [click("#ok", tabId=2), click("#u2", tabId=2)]))
    error = refused(world, body)
    assert (error.code, error.http_status) == ("observed_required", 400)
    assert error.state == {"steps": [
        {"step": "0.0.0", "action": "click", "tabId": 1, "status": "unknown", "accepts": ["applied", "not_applied"]},
        {"step": "0.1.1", "action": "click", "tabId": 2, "status": "unknown", "accepts": ["applied", "not_applied"]},
    ]}
    error = refused(world, body, {"0.0.0": "applied"})
    assert [s["step"] for s in error.state["steps"]] == ["0.1.1"]  # type: ignore[index]
    assert world.driver.writes_sent() == 3


def test_observed_required_and_observed_invalid_leave_the_checkpoint_as_it_was() -> None:
    world = World()
    world.driver.on("#u", "unknown")
    body = run(world, click("#a"), click("#u"), click("#z"))
    before, sent = snapshot(world, body), len(world.driver.sent)
    assert refused(world, body).code == "observed_required"
    assert refused(world, body, {"0": "applied"}).code == "observed_invalid"
    assert_left_as_it_was(world, body, before, sent)
    again = resume(world, body, {"1": "not_applied"})  # the same token still works
    assert again["status"] == "ok"


# --- step paths --------------------------------------------------------------------------------


def test_step_paths_name_top_level_sequence_and_parallel_steps() -> None:
    world = World()
    for key in ("#top", "#seq", "#par", "#nested"):
        world.driver.on(key, "unknown")
    body = run(world, parallel(
        [click("#p0", tabId=1)],
        [click("#q0", tabId=2), click("#q1", tabId=2), click("#q2", tabId=2), click("#par", tabId=2)],
    ))
    assert [s["step"] for s in refused(world, body).state["steps"]] == ["0.1.3"]  # type: ignore[index]
    assert body["progress"][0]["sequences"][1][3]["status"] == "unknown"

    body = run(world, click("#a"), sequence(click("#b"), click("#c"), click("#seq")))
    assert [s["step"] for s in refused(world, body).state["steps"]] == ["1.2"]  # type: ignore[index]

    body = run(world, click("#a"), click("#b"), click("#top"))
    assert [s["step"] for s in refused(world, body).state["steps"]] == ["2"]  # type: ignore[index]

    body = run(world, parallel(
        [click("#p0", tabId=1)],
        [click("#q0", tabId=2), click("#q1", tabId=2), click("#q2", tabId=2),
         sequence(click("#nested"), tabId=2)],
    ))
    assert [s["step"] for s in refused(world, body).state["steps"]] == ["0.1.3.0"]  # type: ignore[index]
    assert body["progress"][0]["sequences"][1][3]["steps"][0]["status"] == "unknown"
    assert resume(world, body, {"0.1.3.0": "applied"})["status"] == "ok"


# --- stopOnWarning and kept steps after a stop ---------------------------------------------------


def test_stop_on_warning_is_kept_but_no_second_stop_at_a_kept_warning_step() -> None:
    world = World()
    world.driver.on("#a", "warn")
    body = run(world, click("#a"), click("#b"), stop_on_warning=True)
    assert [p["status"] for p in body["progress"]] == ["ok", "skipped"]
    again = resume(world, body)
    assert again["status"] == "ok"
    assert again["progress"][0]["resumed"] == "kept"
    assert world.driver.writes_sent("#a") == 1
    assert world.driver.writes_sent("#b") == 1


def test_resumed_batch_keeps_stop_on_warning() -> None:
    world = World()
    world.driver.on("#a", "warn")
    world.driver.on("#b", "warn")
    body = run(world, click("#a"), click("#b"), click("#c"), stop_on_warning=True)
    again = resume(world, body)
    assert [p["status"] for p in again["progress"]] == ["ok", "ok", "skipped"]
    assert world.driver.writes_sent("#c") == 0
    assert again["status"] == "skipped"
    final = resume(world, again | {"call": body["call"]})
    assert final["status"] == "ok"
    assert [world.driver.writes_sent(k) for k in ("#a", "#b", "#c")] == [1, 1, 1]


def test_without_stop_on_warning_a_warning_does_not_stop() -> None:
    world = World()
    world.driver.on("#a", "warn")
    world.driver.on("#c", "fail")
    body = run(world, click("#a"), click("#b"), click("#c"))
    assert [p["status"] for p in body["progress"]] == ["ok", "ok", "failed"]


def test_steps_after_the_stop_that_ran_ok_earlier_stay_kept_in_progress_and_next_checkpoint() -> None:
    world = World()
    world.driver.on("#sel", ("value", {"text": "#first"}), "fail", ("value", {"text": "#third"}))
    world.driver.on("#first", "fail")
    body = run(world, sequence(read("#sel"), click("#x"), click("${$0.text}")), click("#after"))
    assert [p["status"] for p in body["progress"][0]["steps"]] == ["ok", "ok", "failed"]

    # The read runs again (step 2 uses it) and now fails: the sequence stops before #x.
    again = resume(world, body)
    steps = again["progress"][0]["steps"]
    assert [p["status"] for p in steps] == ["failed", "ok", "skipped"]
    assert steps[1]["resumed"] == "kept"
    assert again["progress"][1]["status"] == "skipped"
    assert world.driver.writes_sent("#x") == 1
    assert again["results"][0]["state"]["results"][1] == {"ok": True}

    # In the next checkpoint #x is still ok: it cannot be observed, and it is not sent again.
    again = again | {"call": body["call"]}
    error = refused(world, again, {"0.1": "applied"})
    assert error.state["steps"][0]["reason"] == "status_ok"  # type: ignore[index]
    final = resume(world, again)
    assert final["status"] == "ok"
    assert final["progress"][0]["steps"][1]["resumed"] == "kept"
    assert world.driver.writes_sent("#x") == 1
    assert world.driver.writes_sent("#third") == 1
    assert world.driver.writes_sent("#after") == 1


# --- the resume deadline -----------------------------------------------------------------------


@pytest.mark.parametrize("timeout", [10, 120, 1000])
def test_resume_deadline_is_300s_regardless_of_the_original_timeout(timeout: int) -> None:
    world = World()
    world.driver.on("#b", "fail")
    body = run(world, click("#a"), click("#b"), timeout=timeout)
    resume(world, body)
    resumed = [e for e in world.events if isinstance(e, CallResumed)]
    assert RESUME_DEADLINE == 300
    assert [e.timeout for e in resumed] == [300]


def test_resume_runs_past_the_original_timeout() -> None:
    world = World()
    world.driver.on("#a", "fail")
    body = run(world, click("#a"), click("#b"), click("#c"), timeout=10)
    intercept(world, "#a", lambda: world.clock.advance(20))
    intercept(world, "#b", lambda: world.clock.advance(20))
    intercept(world, "#c", lambda: world.clock.advance(20))
    again = resume(world, body)
    assert again["status"] == "ok"  # 60 s, six times the original container timeout


def test_resume_stops_at_its_deadline_with_container_timeout_and_a_new_checkpoint() -> None:
    world = World()
    world.driver.on("#a", "fail")
    body = run(world, click("#a"), click("#b", timeout=100), click("#c"), timeout=1000)
    intercept(world, "#a", lambda: world.clock.advance(280))
    world.driver.on("#b", "hang")
    again = resume(world, body)
    assert again["results"][1]["code"] == "container_timeout"
    assert [p["status"] for p in again["progress"]] == ["ok", "unknown", "skipped"]
    assert "300s deadline" in again["summary"]
    assert again["call"] == body["call"]
    assert again["resume_token"] != body["resume_token"]
    assert refused(world, again).code == "observed_required"
    assert world.driver.writes_sent("#c") == 0


# --- parallel ----------------------------------------------------------------------------------


def test_parallel_sequence_that_finished_ok_sends_nothing_the_others_continue() -> None:
    world = World()
    world.driver.on("#b1", "fail")
    body = run(world, parallel([click("#a0", tabId=1), click("#a1", tabId=1)],
                               [click("#b0", tabId=2), click("#b1", tabId=2)]))
    again = resume(world, body)
    assert again["status"] == "ok"
    assert [world.driver.writes_sent(k) for k in ("#a0", "#a1", "#b0", "#b1")] == [1, 1, 1, 2]
    assert [p.get("resumed") for p in again["progress"][0]["sequences"][0]] == ["kept", "kept"]
    assert [p.get("resumed") for p in again["progress"][0]["sequences"][1]] == ["kept", None]


def test_parallel_sequences_continue_concurrently() -> None:
    world = World()
    world.driver.on("#a", "fail")
    world.driver.on("#b", "fail")
    barrier = {"action": "syncBarrier", "barrier": "meet"}
    body = run(world, parallel([click("#a", tabId=1), barrier, click("#a2", tabId=1)],
                               [click("#b", tabId=2), barrier, click("#b2", tabId=2)]))
    again = resume(world, body)  # both sequences must be running at once to meet
    assert again["status"] == "ok"
    assert world.driver.writes_sent("#a2") == world.driver.writes_sent("#b2") == 1


def test_parallel_sequences_keep_their_tab_claims_from_the_first_run_including_tabs_from_references() -> None:
    world = World()
    world.driver.on("#r", "fail")
    body = run(world, parallel(
        [{"action": "newTab", "label": "open"}, click("#n", tabId="${$0.tabId}"), read("#r", tabId=2)],
        [click("#b", tabId=1)],
    ))
    assert snapshot(world, body).claims["0.0"] == frozenset({100})
    assert world.claims.held() == {}  # released when the call ended
    during: list[dict[int, Claim]] = []
    other_call: list[Any] = []

    def look_at_the_claims() -> None:
        during.append(world.claims.held())
        other_call.append(world.claims.check_write(999, 100))

    intercept(world, "#r", look_at_the_claims)
    again = resume(world, body)
    assert again["status"] == "ok"
    assert during == [{100: Claim(body["call"], "0.0")}]
    assert other_call[0] is not None and other_call[0].code == "tab_claimed"
    assert world.driver.writes_sent("open") == 1
    assert world.driver.writes_sent("#n") == 1


def _two_sequences(world: World) -> dict[str, Any]:
    """Sequence 0 writes tab 1 (ok, then fails), sequence 1 writes tab 2 (fails)."""
    world.driver.on("#a1", "fail")
    world.driver.on("#b0", "fail")
    body = run(world, parallel([click("#a0", tabId=1), click("#a1", tabId=1)], [click("#b0", tabId=2)]))
    assert world.driver.writes_sent() == 3
    return body


def _assert_refused(again: dict[str, Any], code: str) -> dict[str, Any]:
    """Sequence 0 refused with ``code``: its kept step stays kept, its remaining step failed."""
    seq = again["progress"][0]["sequences"][0]
    assert seq[0]["status"] == "ok" and seq[0]["resumed"] == "kept"
    assert seq[1]["status"] == "failed"
    failure: dict[str, Any] = again["results"][0]["state"]["sequences"][0][1]
    assert failure["code"] == code
    return failure


def test_tab_closed_refuses_the_sequence_with_each_remaining_step_failed_none_sent() -> None:
    world = World()
    body = _two_sequences(world)
    world.driver.tabs.discard(1)
    again = resume(world, body)
    failure = _assert_refused(again, "tab_closed")
    assert failure["state"]["tabId"] == 1
    assert world.driver.writes_sent("#a1") == 1
    assert world.driver.writes_sent("#a0") == 1
    assert world.driver.writes_sent("#b0") == 2  # the other sequence resumes as usual
    assert again["progress"][0]["sequences"][1][0]["status"] == "ok"
    assert again["status"] == "failed"
    assert again["call"] == body["call"]


def test_tab_closed_is_never_replaced() -> None:
    world = World()
    body = _two_sequences(world)
    world.driver.tabs.discard(1)
    again = resume(world, body)
    again = resume(world, again | {"call": body["call"]})
    _assert_refused(again, "tab_closed")
    assert world.driver.writes_sent("#a1") == 1
    assert not any(s.action == "newTab" for s in world.driver.sent)


def test_closed_tab_of_a_kept_step_does_not_refuse_the_sequence() -> None:
    world = World()
    world.driver.on("#a1", "fail")
    body = run(world, parallel([click("#a0", tabId=1), click("#a1", tabId=2)], [click("#b0", tabId=3)]))
    world.driver.tabs.discard(1)
    again = resume(world, body)
    assert again["status"] == "ok"
    assert world.driver.writes_sent("#a1") == 2


def test_finished_ok_sequence_on_a_closed_tab_is_not_refused() -> None:
    world = World()
    world.driver.on("#b0", "fail")
    body = run(world, parallel([click("#a0", tabId=1)], [click("#b0", tabId=2)]))
    world.driver.tabs.discard(1)
    again = resume(world, body)
    assert again["status"] == "ok"
    assert again["progress"][0]["sequences"][0][0]["resumed"] == "kept"


def test_tab_owned_when_another_sequence_of_this_parallel_claimed_a_tab_it_writes() -> None:
    world = World()
    world.driver.on("#a", "fail")
    body = run(world, parallel([click("#a", tabId=1)], [click("#b", tabId=1)]))
    assert body["results"][0]["state"]["sequences"][1][0]["code"] == "tab_owned"
    again = resume(world, body)
    assert world.driver.writes_sent("#a") == 2
    assert world.driver.writes_sent("#b") == 0
    failure = again["results"][0]["state"]["sequences"][1][0]
    assert failure["code"] == "tab_owned"
    assert failure["state"] == {"tabId": 1, "sequence": "0.0"}
    assert again["progress"][0]["sequences"][1][0]["status"] == "failed"


def test_tab_owned_through_a_tab_claimed_by_reference_in_the_first_run() -> None:
    world = World()
    world.driver.on("#a1", "fail")
    world.driver.on("open", ("value", {"tabId": 1}))  # sequence 1's newTab answers a tab sequence 0 writes
    body = run(world, parallel([click("#a0", tabId=1), click("#a1", tabId=2)],
                               [{"action": "newTab", "label": "open"}, click("#b", tabId="${$0.tabId}")]))
    assert body["results"][0]["state"]["sequences"][1][1]["code"] == "tab_owned"
    again = resume(world, body)
    failure = again["results"][0]["state"]["sequences"][1][1]
    assert failure["code"] == "tab_owned"
    assert world.driver.writes_sent("#b") == 0
    assert world.driver.writes_sent("open") == 1
    assert world.driver.writes_sent("#a1") == 2


def test_tab_claimed_when_another_calls_parallel_in_progress_writes_one_of_its_tabs() -> None:
    world = World()
    body = _two_sequences(world)
    assert world.claims.claim(999, "0.0", 1) is None  # another call's parallel, in progress
    again = resume(world, body)
    failure = _assert_refused(again, "tab_claimed")
    assert failure["state"] == {"tabId": 1, "call": 999}
    assert world.driver.writes_sent("#a1") == 1
    assert world.driver.writes_sent("#b0") == 2
    assert world.claims.held() == {1: Claim(999, "0.0")}


def test_tabs_that_cannot_be_listed_refuse_every_sequence_with_that_error() -> None:
    world = World()
    body = _two_sequences(world)
    world.driver.tabs_unlistable = True
    again = resume(world, body)
    failure = _assert_refused(again, "tabs_unavailable")
    assert failure["retryable"] is True
    assert again["results"][0]["state"]["sequences"][1][0]["code"] == "tabs_unavailable"
    assert world.driver.writes_sent() == 3  # none sent
    world.driver.tabs_unlistable = False
    final = resume(world, again | {"call": body["call"]})
    assert final["status"] == "ok"
    assert [world.driver.writes_sent(k) for k in ("#a0", "#a1", "#b0")] == [1, 2, 2]


def test_refused_sequence_keeps_its_records_so_a_later_resume_can_try_it_again() -> None:
    world = World()
    world.driver.on("#a1", "unknown")
    world.driver.on("#b0", "fail")
    body = run(world, parallel([click("#a0", tabId=1), click("#a1", tabId=1)], [click("#b0", tabId=2)]))
    assert world.claims.claim(999, "0.0", 1) is None
    again = resume(world, body, {"0.0.1": "not_applied"})
    _assert_refused(again, "tab_claimed")
    assert world.driver.writes_sent("#a1") == 1
    assert world.driver.writes_sent("#b0") == 2
    world.claims.release(999)

    again = again | {"call": body["call"]}
    error = refused(world, again)  # its unknown write still needs an observation
    assert error.code == "observed_required"
    assert error.state == {"steps": [{"step": "0.0.1", "action": "click", "tabId": 1, "status": "unknown",
                                      "accepts": ["applied", "not_applied"]}]}
    final = resume(world, again, {"0.0.1": "not_applied"})
    assert final["status"] == "ok"
    assert [world.driver.writes_sent(k) for k in ("#a0", "#a1", "#b0")] == [1, 2, 2]
    assert final["progress"][0]["sequences"][1][0]["resumed"] == "kept"


def test_refused_sequence_keeps_its_claims_for_a_later_resume() -> None:
    world = World()
    world.driver.on("#r", "fail")
    body = run(world, parallel(
        [{"action": "newTab", "label": "open"}, click("#n", tabId="${$0.tabId}"), read("#r", tabId=2)],
        [click("#b", tabId=1)],
    ))
    world.claims.claim(999, "0.0", 100)
    again = resume(world, body)
    assert again["results"][0]["state"]["sequences"][0][2]["code"] == "tab_claimed"
    again = again | {"call": body["call"]}
    assert snapshot(world, again).claims["0.0"] == frozenset({100})


# --- more of the same rules ----------------------------------------------------------------------


def test_ok_read_inside_sequence_runs_again_for_a_later_unknown_write_observed_not_applied() -> None:
    world = World()
    world.driver.on("#sel", ("value", {"text": "#first"}), ("value", {"text": "#second"}))
    world.driver.on("#first", "unknown")
    body = run(world, sequence(read("#sel"), click("${$0.text}")))
    again = resume(world, body, {"0.1": "not_applied"})
    assert again["status"] == "ok"
    assert received(world, "#sel") == 2
    assert world.driver.writes_sent("#first") == 1
    assert world.driver.writes_sent("#second") == 1


def test_ok_read_inside_sequence_not_run_again_when_the_step_that_uses_it_is_reported_applied() -> None:
    world = World()
    world.driver.on("#sel", ("value", {"text": "#first"}), ("value", {"text": "#second"}))
    world.driver.on("#first", "unknown")
    body = run(world, sequence(read("#sel"), click("${$0.text}")))
    again = resume(world, body, {"0.1": "applied"})
    assert again["status"] == "ok"
    assert received(world, "#sel") == 1
    assert world.driver.writes_sent() == 1


def test_ok_reads_inside_sequence_run_again_along_a_chain_of_references() -> None:
    world = World()
    world.driver.on("#a", ("value", {"text": "#b"}), ("value", {"text": "#b2"}))
    world.driver.on("#b", ("value", {"text": "#first"}))
    world.driver.on("#b2", ("value", {"text": "#second"}))
    world.driver.on("#first", "fail")
    body = run(world, sequence(read("#a"), read("${$0.text}"), click("${$1.text}")))
    again = resume(world, body)
    assert again["status"] == "ok"
    assert received(world, "#a") == 2
    assert received(world, "#b2") == 1
    assert world.driver.writes_sent("#second") == 1


def test_ok_read_inside_sequence_runs_again_when_a_block_that_will_run_uses_it() -> None:
    world = World()
    world.driver.on("#sel", ("value", {"text": "#first"}), ("value", {"text": "#second"}))
    world.driver.on("#first", "fail")
    body = run(world, sequence(read("#sel"), {"action": "try", "body": [click("${$0.text}")]}))
    again = resume(world, body)
    assert again["status"] == "ok"
    assert received(world, "#sel") == 2
    assert world.driver.writes_sent("#second") == 1


def test_sequence_does_not_stop_again_at_a_kept_warning_step() -> None:
    world = World()
    world.driver.on("#a", "warn")
    body = run(world, sequence(click("#a"), click("#b")), stop_on_warning=True)
    again = resume(world, body)
    assert again["status"] == "ok"
    assert world.driver.writes_sent("#a") == 1
    assert world.driver.writes_sent("#b") == 1


@pytest.mark.parametrize("options", [{}, {"timeout": 10}])
def test_write_cut_off_by_a_timeout_is_unknown_and_needs_an_observation(options: dict[str, Any]) -> None:
    world = World()
    world.driver.on("#slow", "hang")
    body = run(world, click("#a"), click("#slow", timeout=20), **options)
    assert body["progress"][1]["status"] == "unknown"
    error = refused(world, body)
    assert [s["step"] for s in error.state["steps"]] == ["1"]  # type: ignore[index]
    assert world.driver.writes_sent("#slow") == 1


def test_held_step_in_a_parallel_sequence_reported_applied_is_marked_ok_unsent() -> None:
    world = World()
    world.driver.on("#buy", "hold")
    body = run(world, parallel([click("#buy", tabId=1), click("#after", tabId=1)], [click("#b", tabId=2)]))
    assert body["status"] == "held"
    again = resume(world, body, {"0.0.0": "applied"})
    assert again["status"] == "ok"
    assert again["progress"][0]["sequences"][0][0]["observed"] == "applied"
    assert world.driver.writes_sent("#buy") == 1
    assert world.driver.writes_sent("#after") == 1
    assert world.driver.writes_sent("#b") == 1


def test_tab_closed_refuses_a_sequence_whose_remaining_steps_only_read_that_tab() -> None:
    world = World()
    world.driver.on("#r", "fail")
    body = run(world, parallel([click("#a0", tabId=2), read("#r", tabId=1)], [click("#b0", tabId=3)]))
    world.driver.tabs.discard(1)
    again = resume(world, body)
    assert again["results"][0]["state"]["sequences"][0][1]["code"] == "tab_closed"
    assert received(world, "#r") == 1


def test_sequence_that_only_reads_a_tab_another_sequence_claimed_is_not_refused() -> None:
    world = World()
    world.driver.on("#a", "fail")
    world.driver.on("#r", "fail")
    body = run(world, parallel([click("#a", tabId=1)], [read("#r", tabId=1)]))
    again = resume(world, body)
    assert again["status"] == "ok"
    assert world.driver.writes_sent("#a") == 2
    assert received(world, "#r") == 2


def test_sequence_that_only_reads_a_tab_another_call_claimed_is_not_refused() -> None:
    world = World()
    world.driver.on("#r", "fail")
    body = run(world, parallel([read("#r", tabId=1)], [click("#b", tabId=2)]))
    world.claims.claim(999, "0.0", 1)
    again = resume(world, body)
    assert again["status"] == "ok"
    assert received(world, "#r") == 2


def test_tab_closed_through_a_reference_to_a_kept_new_tab() -> None:
    world = World()
    world.driver.on("#n", "fail")
    body = run(world, parallel([{"action": "newTab", "label": "open"}, click("#n", tabId="${$0.tabId}")],
                               [click("#b", tabId=2)]))
    world.driver.tabs.discard(100)
    again = resume(world, body)
    failure = again["results"][0]["state"]["sequences"][0][1]
    assert (failure["code"], failure["state"]["tabId"]) == ("tab_closed", 100)
    assert world.driver.writes_sent("#n") == 1
    assert world.driver.writes_sent("open") == 1
