"""Tenant quotas, the pure rule (core.quotas): the fair share of a full node, and counts with reservations."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from core.quotas import Held, Tally, fair_share, fair_share_refusal
from kitsune.config import load_config
from messages.errors import KitsuneError


def _flood(cap: int, held: dict[str, int], agent: str, newcomer: bool) -> int:
    """Let ``agent`` open until the node's cap or the fair share refuses it; how many it then holds."""
    while sum(held.values()) < cap and fair_share_refusal(cap, sum(held.values()), held, agent, newcomer) is None:
        held[agent] = held.get(agent, 0) + 1
    return held[agent]


def test_a_lone_agent_with_nobody_else_configured_may_fill_the_node() -> None:
    assert _flood(6, {}, "alice", newcomer=False) == 6


def test_a_flooding_agent_leaves_a_tab_for_a_newcomer() -> None:
    held: dict[str, int] = {}
    assert _flood(6, held, "alice", newcomer=True) == 5
    assert fair_share_refusal(6, 5, held, "bob", newcomer=False) is None  # bob is below his share: the last tab


def test_past_its_share_an_agent_leaves_what_the_others_lack_of_theirs() -> None:
    held = {"alice": 7, "bob": 1}  # cap 10, share 5 each: bob lacks 4, alice may not take the 2 free
    assert fair_share(10, held, "alice", newcomer=False) == 5
    assert fair_share_refusal(10, 8, held, "alice", newcomer=False) == 5
    assert fair_share_refusal(10, 8, held, "bob", newcomer=False) is None
    held = {"alice": 5, "bob": 2}  # bob lacks 3 of his 5, and 3 are free: alice may not take one
    assert fair_share_refusal(10, 7, held, "alice", newcomer=False) == 5
    held = {"alice": 5, "bob": 5}  # both at their share, nobody else may come: what is free is anyone's
    assert fair_share_refusal(12, 10, held, "alice", newcomer=False) is None


def test_below_its_share_an_agent_takes_what_is_free() -> None:
    held = {"alice": 20, "bob": 2, "carol": 1}
    assert fair_share(30, held, "carol", newcomer=True) == 7
    assert fair_share_refusal(30, 23, held, "carol", newcomer=True) is None
    assert fair_share_refusal(30, 23, held, "alice", newcomer=True) == 7


def test_three_agents_flooding_in_turn_each_keep_their_share() -> None:
    held: dict[str, int] = {}
    cap = 12
    for _ in range(cap):
        for agent in ("a", "b", "c"):
            total = sum(held.values())
            if total < cap and fair_share_refusal(cap, total, held, agent, newcomer=False) is None:
                held[agent] = held.get(agent, 0) + 1
    assert held == {"a": 4, "b": 4, "c": 4}


def test_a_share_is_one_at_least() -> None:
    assert fair_share(2, {"a": 1, "b": 1, "c": 0}, "d", newcomer=True) == 1


def test_a_tally_counts_each_agent_and_the_total() -> None:
    tally = Tally()
    tally.add("alice")
    tally.add(None)  # a user tab: in the total only
    tally.add("alice")
    tally.remove("alice")
    assert (tally.of("alice"), tally.total, dict(tally.holders())) == (1, 2, {"alice": 1})
    tally.remove("alice")
    assert dict(tally.holders()) == {}


def test_a_reservation_is_counted_once_whether_its_tab_arrives_or_not() -> None:
    held = Held()
    first, second = held.reserve("alice"), held.reserve("alice")
    assert held.tally.of("alice") == 2
    held.arrived("alice")  # the first tab: meets a reservation, not counted twice
    held.unreserve("alice", first)  # the one it met may be either: the count stays right
    assert held.tally.of("alice") == 2
    held.unreserve("alice", second)  # never arrived
    assert held.tally.of("alice") == 1 and not held.awaited("alice")
    held.arrived("alice")  # a popup, with no reservation: counted
    held.left("alice")
    assert held.tally.of("alice") == 1


def test_quotas_are_configured_per_node_per_agent_and_by_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "kitsune.yaml"
    path.write_text(yaml.safe_dump({"quotas": {"tabs": 10}, "agents": [
        {"name": "alice", "token": "alice-token-0123456789"},
        {"name": "bob", "token": "bob-token-0123456789ab", "quotas": {"sessions": 2}}]}))
    config = load_config(path, {"KITSUNE_QUOTAS__SESSIONS": "5", "KITSUNE_MAX_SESSIONS": "12"})
    assert (config.node.max_sessions, config.policy.tab_quota, config.policy.session_quota) == (12, 10, 5)
    assert (config.agent_policies()["bob"].tab_quota, config.agent_policies()["bob"].session_quota) == (10, 2)
    with pytest.raises(KitsuneError, match=r"quotas\.tabs"):
        load_config(path, {"KITSUNE_QUOTAS__TABS": "0"})
