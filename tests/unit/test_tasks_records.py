"""A task's record and its transitions: states as callers see them, the lease, takeovers, refusals."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from core.tasks import (
    MAX_GOAL,
    MAX_TABS,
    InFlight,
    Task,
    TaskLimits,
    acknowledged,
    call_ended,
    call_started,
    check_owner,
    check_write,
    completed,
    expired_now,
    lapsed,
    new_task,
    renewed,
    revoked,
    session_of,
    taken_over,
    with_checkpoint,
)
from kitsune.config import load_config
from messages.errors import KitsuneError

NOW = 1_700_000_000.0


def task(**changes: object) -> Task:
    made = new_task("alice", "s-1", "buy shoes", [3, 4, 3], now=NOW, scope="browser", lease_ttl=30.0,
                    task_id="t-0123456789abcdef")
    return dataclasses.replace(made, **changes)  # type: ignore[arg-type]


def code_of(error: pytest.ExceptionInfo[KitsuneError]) -> tuple[str, int]:
    return error.value.code, error.value.http_status


def test_a_new_task_is_active_owned_by_its_session_and_round_trips_as_json() -> None:
    made = new_task("alice", "s-1", "buy shoes", [3, 4, 3], now=NOW, scope="browser")
    assert made.id.startswith("t-") and len(made.id) == 18
    assert (made.tabs, made.resume, made.scope, made.owner, made.status) == ((3, 4), "ask", "browser", "s-1", "active")
    assert made.lease_expires == NOW + 30.0 and made.created == made.updated == NOW
    full = with_checkpoint(call_started(made, 12) or made, {"goal": "buy shoes"}, NOW + 1)
    assert Task.from_json(full.to_json()) == full


@pytest.mark.parametrize(("session", "status", "at", "state"), [
    ("s-1", "active", NOW, "owner"), ("s-2", "active", NOW, "follower"), (None, "active", NOW, "follower"),
    ("s-1", "active", NOW + 30.0, "expired"), ("s-2", "expired", NOW, "expired"),
    ("s-1", "completed", NOW, "completed"), ("s-1", "revoked", NOW, "revoked"),
])
def test_each_caller_sees_the_state_the_contract_names(session: str | None, status: str, at: float,
                                                       state: str) -> None:
    assert task(status=status).state_for(session, at) == state


def test_a_view_is_the_record_without_in_flight_with_the_callers_state() -> None:
    view = task(in_flight=(InFlight(12),)).view("s-2", NOW)
    assert "in_flight" not in view and view["state"] == "follower" and view["tabs"] == [3, 4]
    assert set(view) == {"id", "agent", "goal", "tabs", "resume", "scope", "owner", "lease_expires", "lease_ttl",
                         "status", "created", "updated", "checkpoint", "state"}


def test_a_renewal_writes_only_when_less_than_half_the_lease_is_left() -> None:
    assert renewed(task(), "s-1", NOW + 14.0) is None
    again = renewed(task(), "s-1", NOW + 16.0)
    assert again is not None and again.lease_expires == NOW + 46.0 and again.updated == NOW + 16.0


@pytest.mark.parametrize(("changes", "session", "code"), [
    ({}, "s-2", ("task_leased", 409)), ({}, None, ("task_leased", 409)),
    ({"lease_expires": NOW}, "s-1", ("task_expired", 409)), ({"status": "expired"}, "s-1", ("task_expired", 409)),
    ({"status": "completed"}, "s-1", ("task_closed", 409)), ({"status": "revoked"}, "s-1", ("task_revoked", 410)),
    ({"status": "revoked"}, "s-2", ("task_closed", 409)),
])
def test_only_the_lease_holder_renews_checkpoints_or_completes(changes: dict[str, object], session: str | None,
                                                                code: tuple[str, int]) -> None:
    changes_of: list[Callable[[Task], object]] = [lambda t: renewed(t, session, NOW + 20),
                                                  lambda t: completed(t, session, NOW + 1),
                                                  lambda t: check_owner(t, session, NOW + 1)]
    for change in changes_of:
        with pytest.raises(KitsuneError) as error:
            change(task(**changes))
        assert code_of(error) == code and error.value.state == {"taskId": "t-0123456789abcdef"}


@pytest.mark.parametrize(("changes", "session", "code"), [
    ({}, "s-1", None), ({}, "s-2", ("task_leased", 409)), ({}, None, ("task_leased", 409)),
    ({"lease_expires": NOW}, "s-1", ("task_expired", 409)), ({"status": "expired"}, "s-2", ("task_expired", 409)),
    ({"status": "revoked"}, "s-1", ("task_revoked", 410)), ({"status": "revoked"}, "s-2", None),
    ({"status": "completed"}, "s-2", None),
])
def test_a_write_on_a_tasks_tab_is_the_owners_only(changes: dict[str, object], session: str | None,
                                                   code: tuple[str, int] | None) -> None:
    if code is None:
        check_write(task(**changes), "alice", session, NOW + 1, 3)
        return
    with pytest.raises(KitsuneError) as error:
        check_write(task(**changes), "alice", session, NOW + 1, 3)
    assert code_of(error) == code and error.value.state == {"taskId": "t-0123456789abcdef", "tabId": 3}


@pytest.mark.parametrize(("changes", "code"), [
    ({}, "task_leased"), ({"lease_expires": NOW}, "task_expired"), ({"status": "expired"}, "task_expired"),
    ({"status": "revoked"}, None), ({"status": "completed"}, None),
])
@pytest.mark.parametrize("session", ["s-1", "s-2", None])
def test_another_agent_s_write_is_refused_whatever_session_it_names_and_told_of_no_task(
        changes: dict[str, object], code: str | None, session: str | None) -> None:
    if code is None:
        check_write(task(**changes), "bob", session, NOW + 1, 3)
        return
    with pytest.raises(KitsuneError) as error:
        check_write(task(**changes), "bob", session, NOW + 1, 3)
    assert error.value.code == code and error.value.state == {"tabId": 3, "owner": "another agent"}
    told = orjson.dumps(error.value.to_json()).decode()
    assert not [word for word in ("t-0123456789abcdef", "buy shoes", "s-1") if word in told], told


def test_a_task_s_goal_and_tabs_are_bounded_each_refusal_naming_its_limit() -> None:
    limits = TaskLimits(per_agent=2, goal=10, tabs=3)
    assert new_task("alice", "s-1", "g" * 10, [1, 2, 3], now=NOW, scope="browser", limits=limits).tabs == (1, 2, 3)
    for goal, tabs, parameter, most in [("g" * 11, [1], "goal", 10), ("g", [1, 2, 3, 4], "tabs", 3),
                                        ("g" * (MAX_GOAL + 1), [1], "goal", MAX_GOAL),
                                        ("g", list(range(30_000)), "tabs", MAX_TABS)]:
        with pytest.raises(KitsuneError) as error:
            new_task("alice", "s-1", goal, tabs, now=NOW, scope="browser",
                     limits=None if most in (MAX_GOAL, MAX_TABS) else limits)
        assert (error.value.code, error.value.state) == ("invalid_parameter", {"param": parameter, "max": most})
        assert str(most) in error.value.message


def test_a_takeover_needs_force_while_another_sessions_lease_lives_and_none_once_it_ended() -> None:
    with pytest.raises(KitsuneError) as error:
        taken_over(task(), "s-2", NOW + 1)
    assert code_of(error) == ("task_leased", 409)
    forced = taken_over(task(in_flight=(InFlight(12, True),)), "s-2", NOW + 1, force=True)
    assert (forced.owner, forced.lease_expires, forced.in_flight) == ("s-2", NOW + 31, (InFlight(12, True),))
    for ended in (task(lease_expires=NOW), task(status="expired")):
        claimed = taken_over(ended, "s-2", NOW + 1)
        assert (claimed.owner, claimed.status, claimed.lease_expires) == ("s-2", "active", NOW + 31)
    assert taken_over(task(), "s-1", NOW + 1).owner == "s-1"  # its own lease: no force needed


@pytest.mark.parametrize("status", ["completed", "revoked"])
def test_a_closed_task_is_never_taken_over_or_expired(status: str) -> None:
    changes: list[Callable[[Task], object]] = [lambda t: taken_over(t, "s-2", NOW, force=True),
                                               lambda t: expired_now(t, NOW)]
    for change in changes:
        with pytest.raises(KitsuneError) as error:
            change(task(status=status))
        assert code_of(error) == ("task_closed", 409)


def test_revoking_and_expiring_write_once() -> None:
    gone = revoked(task(), NOW + 1)
    assert gone is not None and gone.status == "revoked" and revoked(gone, NOW + 2) is None
    ended = expired_now(task(), NOW + 1)
    assert ended is not None and (ended.status, ended.lease_expires) == ("expired", NOW + 1)
    assert expired_now(ended, NOW + 2) is None


def test_the_sweeper_expires_only_an_active_task_whose_lease_passed() -> None:
    assert lapsed(task(), NOW + 29.9) is None
    swept = lapsed(task(), NOW + 30.0)
    assert swept is not None and swept.status == "expired"
    assert lapsed(task(status="completed", lease_expires=NOW), NOW + 60) is None


def test_calls_in_flight_stay_until_their_session_is_heard_from_again() -> None:
    started = call_started(task(), 12)
    assert started is not None and started.in_flight == (InFlight(12),)
    assert call_started(started, 12) is None and call_ended(started, 99) is None
    ended = call_ended(started, 12)
    assert ended is not None and ended.in_flight == (InFlight(12, True),) and call_ended(ended, 12) is None
    both = call_started(call_started(started, 13) or started, 14)
    assert both is not None and [f.call for f in both.in_flight] == [12, 13, 14]
    after = call_started(call_ended(ended, 12) or ended, 15)  # a later call answers the ended ones
    assert after is not None and after.in_flight == (InFlight(15),)
    heard = acknowledged(ended)
    assert heard is not None and heard.in_flight == () and acknowledged(heard) is None
    assert completed(ended, "s-1", NOW + 1).in_flight == ()


@pytest.mark.parametrize(("header", "code"), [(None, "session_required"), ("", "session_required"),
                                              ("-x", "invalid_parameter"), ("a" * 129, "invalid_parameter"),
                                              ("a b", "invalid_parameter")])
def test_a_session_is_required_and_well_formed(header: str | None, code: str) -> None:
    with pytest.raises(KitsuneError) as error:
        session_of(header)
    assert error.value.code == code and error.value.http_status == 400
    assert session_of("mcp:9f2c-41.a_b") == "mcp:9f2c-41.a_b"


def test_a_task_s_scope_is_the_caller_s_to_state() -> None:
    """No default in the core: the API's (``tab``) is applied where a request is read, nowhere else."""
    with pytest.raises(TypeError, match="scope"):
        new_task("alice", "s-1", "g", [3], now=NOW)  # type: ignore[call-arg]


@pytest.mark.parametrize(("changes", "parameter"), [
    ({"goal": " "}, "goal"), ({"resume": "always"}, "resume"), ({"scope": "world"}, "scope"),
    ({"tabs": [True]}, "tabs"), ({"tabs": ["3"]}, "tabs"), ({"lease_ttl": 0.0}, "lease_ttl"),
])
def test_a_task_is_made_only_of_the_contracts_values(changes: dict[str, object], parameter: str) -> None:
    arguments: dict[str, object] = {"goal": "g", "tabs": [3], "scope": "tab", **changes}
    with pytest.raises(KitsuneError) as error:
        new_task("alice", "s-1", now=NOW, **arguments)  # type: ignore[arg-type]
    assert error.value.code == "invalid_parameter" and error.value.state is not None
    assert error.value.state["param"] == parameter


def test_the_bounds_come_from_the_tasks_section_of_the_configuration(tmp_path: Path) -> None:
    assert load_config(None, {}).node.tasks.limits == TaskLimits(100, 500, 32)
    (tmp_path / "k.yaml").write_text("tasks: {max_per_agent: 5, max_goal: 200}\n")
    limits = load_config(tmp_path / "k.yaml", {"KITSUNE_TASKS__MAX_TABS": "4"}).node.tasks.limits
    assert limits == TaskLimits(per_agent=5, goal=200, tabs=4)
    for bad in ("tasks: {max_goal: 501}\n", "tasks: {max_tabs: 0}\n", "tasks: {max_per_agent: -1}\n"):
        (tmp_path / "k.yaml").write_text(bad)
        with pytest.raises(KitsuneError) as refused:
            load_config(tmp_path / "k.yaml", {})
        assert refused.value.message.startswith("tasks.max_"), bad
