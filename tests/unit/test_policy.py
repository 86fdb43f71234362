"""The bridge's policy as a pure driver wrapper: read-only, tab ownership, URL lists, ask-before-act."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from core.policy import SITE_TOOL_WRITES, USER, ConfirmTokens, Policy, PolicyDriver, TabOwners
from core.ports import Recorded, wait_recorded
from core.url_policy import UrlPolicy
from messages.commands import CallSiteTool, Click, Command, Navigate, NewTab, Title
from messages.contract import CONFIRM_PER_AGENT
from messages.errors import KitsuneError
from messages.results import Done, Failed, Failure, HeldForApproval, Outcome


class Recording:
    """A driver that records what reaches it and answers ok (newTab: tab 7). Its pages declare the site tool
    ``search`` read-only: a call tried as a read of any other answers ``site_tool_writes``, as the tab's node does."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int | None]] = []
        self.reads: list[str] = []
        """The site tools it ran as reads."""

    def execute(self, command: Command, tab_id: int | None, timeout: float,
                recorded: Sequence[Recorded] = (), *, as_read: bool = False) -> Outcome:
        wait_recorded(recorded)
        if as_read:
            if not isinstance(command, CallSiteTool) or command.name != "search":
                return Failed(Failure("not declared read-only; nothing was sent", SITE_TOOL_WRITES, False))
            self.reads.append(command.name)
        self.sent.append((command.action, tab_id))
        return Done({"tabId": 7} if isinstance(command, NewTab) else {})

    def list_tabs(self) -> frozenset[int]:
        return frozenset({1, 2})


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def driver_for(agent: str = "alice", *, confirm_token: str | None = None, **policy: Any) -> tuple[PolicyDriver,
                                                                                                  Recording]:
    inner = Recording()
    owners = TabOwners()
    owners.give(1, "alice")
    owners.give(2, "bob")
    driven = PolicyDriver(inner, agent, lambda: Policy(**policy), owners, CONFIRMS, confirm_token=confirm_token)
    return driven, inner


CLOCK = Clock()
CONFIRMS = ConfirmTokens(CLOCK)


def test_read_only_refuses_writes_before_sending_and_lets_reads_through() -> None:
    driver, inner = driver_for(read_only=True)
    outcome = driver.execute(Click(selector="#a"), 1, 5)
    assert isinstance(outcome, Failed) and outcome.failure.code == "read_only"
    assert isinstance(driver.execute(Title(), 1, 5), Done)
    assert inner.sent == [("title", 1)]


SEARCH, BUY = CallSiteTool(name="search", input={"q": "coat"}), CallSiteTool(name="buy", input={"item": "coat"})


@pytest.mark.parametrize(("rule", "tab", "code"), [({"read_only": True}, 1, "read_only"), ({}, 2, "tab_owned")])
def test_a_site_tool_its_page_declares_read_only_runs_as_a_read_where_its_other_tools_are_refused(
        rule: dict[str, Any], tab: int, code: str) -> None:
    driver, inner = driver_for(**rule)
    assert isinstance(driver.execute(SEARCH, tab, 5), Done)
    refused = driver.execute(BUY, tab, 5)
    assert isinstance(refused, Failed) and refused.failure.code == code
    assert (inner.sent, inner.reads) == ([("callSiteTool", tab)], ["search"])


def test_ask_before_act_holds_a_site_tool_call_unless_its_page_declares_the_tool_read_only() -> None:
    driver, inner = driver_for(ask_before_act=True)
    assert isinstance(driver.execute(SEARCH, 1, 5), Done)
    held = driver.execute(BUY, 1, 5)
    assert isinstance(held, HeldForApproval) and held.failure.code == "needs_user"
    approved, inner_approved = driver_for(ask_before_act=True, confirm_token=held.failure.state["confirm_token"])  # type: ignore[index]
    assert isinstance(approved.execute(BUY, 1, 5), Done)
    assert (inner.reads, inner_approved.sent, inner_approved.reads) == (["search"], [("callSiteTool", 1)], [])


def test_a_site_tool_call_the_policy_lets_through_is_sent_once_as_a_write() -> None:
    driver, inner = driver_for()
    assert isinstance(driver.execute(SEARCH, 1, 5), Done) and isinstance(driver.execute(BUY, 1, 5), Done)
    assert (inner.sent, inner.reads) == ([("callSiteTool", 1), ("callSiteTool", 1)], [])


def test_writes_to_another_agents_tab_answer_tab_owned_and_reads_are_allowed() -> None:
    driver, inner = driver_for()
    refused = driver.execute(Click(selector="#a"), 2, 5)
    assert isinstance(refused, Failed) and refused.failure.code == "tab_owned"
    assert refused.failure.state == {"tabId": 2, "owner": "agent"}
    assert isinstance(driver.execute(Title(), 2, 5), Done)
    assert inner.sent == [("title", 2)]


def test_user_tabs_are_read_only_unless_configured_writable() -> None:
    driver, _ = driver_for()
    refused = driver.execute(Click(selector="#a"), 3, 5)
    assert isinstance(refused, Failed) and refused.failure.state == {"tabId": 3, "owner": "user"}
    writable, inner = driver_for(user_tabs_writable=True)
    assert isinstance(writable.execute(Click(selector="#a"), 3, 5), Done) and inner.sent == [("click", 3)]


def test_takeover_is_atomic_and_the_previous_owner_loses_the_tab() -> None:
    owners = TabOwners()
    owners.give(4, "alice")
    assert owners.take_over(4, "bob") == "alice"
    assert owners.owner(4) == "bob" and owners.owner(5) == USER


def test_a_new_tab_belongs_to_the_agent_that_opened_it() -> None:
    inner = Recording()
    owners = TabOwners()
    PolicyDriver(inner, "carol", Policy, owners, CONFIRMS).execute(NewTab(), None, 5)
    assert owners.owner(7) == "carol"


@pytest.mark.parametrize("url", ["http://127.1/", "http://allowed.test@denied.test/", "data:text/html,x"])
def test_url_lists_refuse_navigations_before_sending(url: str) -> None:
    driver, inner = driver_for(urls=UrlPolicy.from_config(deny=["127.0.0.1", "denied.test"]))
    outcome = driver.execute(Navigate(url=url), 1, 5)
    assert isinstance(outcome, Failed) and outcome.failure.code == "url_denied"
    assert inner.sent == []


def test_ask_before_act_holds_writes_with_a_token_bound_to_agent_action_tab_and_parameters() -> None:
    held = driver_for(ask_before_act=True)[0].execute(Click(selector="#a"), 1, 5)
    assert isinstance(held, HeldForApproval) and held.failure.code == "needs_user"
    token = held.failure.state["confirm_token"]  # type: ignore[index]
    other_params, inner = driver_for(ask_before_act=True, confirm_token=token)
    assert isinstance(other_params.execute(Click(selector="#b"), 1, 5), HeldForApproval)
    assert isinstance(other_params.execute(Click(selector="#a"), 2, 5), Failed)  # another agent's tab
    assert inner.sent == []
    right, inner = driver_for(ask_before_act=True, confirm_token=token)
    assert isinstance(right.execute(Click(selector="#a", timeout=9), 1, 5), Done)  # timeout is not a parameter
    assert isinstance(right.execute(Click(selector="#a"), 1, 5), HeldForApproval)  # once
    assert inner.sent == [("click", 1)]


def test_a_confirm_token_is_bound_to_its_agent() -> None:
    held = driver_for("alice", ask_before_act=True)[0].execute(Click(selector="#a", tab_id=None), 1, 5)
    token = held.failure.state["confirm_token"]  # type: ignore[union-attr,index]
    thief, inner = driver_for("bob", ask_before_act=True, confirm_token=token, user_tabs_writable=True)
    assert isinstance(thief.execute(Click(selector="#a"), 3, 5), HeldForApproval)
    assert inner.sent == []


def test_a_confirm_token_expires_after_120_seconds() -> None:
    tokens = ConfirmTokens(CLOCK)
    command = Click(selector="#a")
    token = tokens.issue("alice", None, command, 1)
    CLOCK.t += 120.0
    assert tokens.redeem(token, "alice", None, command, 1) is False
    fresh = tokens.issue("alice", None, command, 1)
    CLOCK.t += 119.0
    assert tokens.redeem(fresh, "alice", None, command, 1) is True


def test_an_agent_holds_at_most_its_bound_of_confirm_tokens_its_own_oldest_going_first() -> None:
    tokens = ConfirmTokens(CLOCK)
    command = Click(selector="#a")
    theirs = tokens.issue("bob", None, command, 1)
    mine = [tokens.issue("alice", None, command, 1) for _ in range(CONFIRM_PER_AGENT + 1)]
    assert tokens.redeem(mine[0], "alice", None, command, 1) is False  # pushed out by the newest
    assert all(tokens.redeem(token, "alice", None, command, 1) for token in mine[1:])
    assert tokens.redeem(theirs, "bob", None, command, 1) is True  # another agent's never goes


def test_an_approval_given_to_one_session_never_authorizes_a_call_of_another() -> None:
    tokens = ConfirmTokens(CLOCK)
    command = Click(selector="#a")
    token = tokens.issue("alice", "session-1", command, 1)
    assert tokens.redeem(token, "alice", "session-2", command, 1) is False
    assert tokens.redeem(token, "alice", None, command, 1) is False
    assert tokens.redeem(token, "alice", "session-1", command, 1) is True


def test_a_bad_confirm_token_is_told_apart_from_a_first_ask_and_comes_with_a_new_hold() -> None:
    first = driver_for(ask_before_act=True)[0].execute(Click(selector="#a"), 1, 5)
    assert isinstance(first, HeldForApproval) and first.failure.code == "needs_user"
    wrong, inner = driver_for(ask_before_act=True, confirm_token="not-a-token")
    again = wrong.execute(Click(selector="#a"), 1, 5)
    assert isinstance(again, HeldForApproval) and again.failure.code == "confirm_token_invalid"
    assert again.failure.state is not None and again.failure.state["reason"] == "approval"
    fresh = again.failure.state["confirm_token"]
    assert fresh != first.failure.state["confirm_token"]  # type: ignore[index]
    assert inner.sent == []
    confirmed, inner = driver_for(ask_before_act=True, confirm_token=fresh)
    assert isinstance(confirmed.execute(Click(selector="#a"), 1, 5), Done)
    assert inner.sent == [("click", 1)]


def test_an_action_on_a_closed_tab_is_tab_closed_not_a_user_tab() -> None:
    owners = TabOwners()
    owners.give(1, "alice")
    owners.closed(1)
    inner = Recording()
    driven = PolicyDriver(inner, "alice", Policy, owners, CONFIRMS)
    refused = driven.execute(Click(selector="#a"), 1, 5)
    assert isinstance(refused, Failed) and refused.failure.code == "tab_closed"
    read = driven.execute(Title(), 1, 5)
    assert isinstance(read, Failed) and read.failure.code == "tab_closed"
    assert inner.sent == []


def test_an_action_on_a_tab_whose_session_ended_is_session_expired() -> None:
    owners = TabOwners()
    owners.give(1, "alice")
    owners.closed(1, KitsuneError("session_expired", "Session 'shop' was swept", state={"session": "shop"}))
    inner = Recording()
    driven = PolicyDriver(inner, "alice", Policy, owners, CONFIRMS)
    for command in (Click(selector="#a"), Title()):
        refused = driven.execute(command, 1, 5)
        assert isinstance(refused, Failed) and refused.failure.code == "session_expired"
        assert refused.failure.state == {"session": "shop"}
    assert inner.sent == []
