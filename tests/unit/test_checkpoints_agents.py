"""Checkpoints belong to their agent (issue 13): only the agent whose call kept one resumes it, and
the limit of 20, oldest pushed out first, is each agent's; a node-wide cap pushes out the oldest
of the agent holding the most. The pure core with fakes (``World``), and the gateway's store.
"""

from __future__ import annotations

from typing import Any

import pytest

from core.checkpoints import Kept
from mcp_gateway._checkpoints import DirectCheckpoint, DirectCheckpoints
from messages.errors import KitsuneError
from messages.tokens import new_token
from tests.unit.fakes import World
from tests.unit.helpers import batch, click, read, snapshot


def failing_call(world: World, agent: str | None) -> dict[str, Any]:
    """A call of ``agent`` that fails at its second step (nothing sent there); its body."""
    world.driver.on("#b", "fail")
    body = world.calls.run(batch(click("#a"), click("#b"), read("#r")), agent=agent).body
    assert body["status"] == "failed"
    return body


def resume_error(world: World, call: Any, token: Any, agent: str | None) -> KitsuneError:
    with pytest.raises(KitsuneError) as raised:
        world.calls.resume(call, token, agent=agent)
    return raised.value


# --- a checkpoint is its agent's -------------------------------------------------------------------


def test_a_checkpoint_records_the_agent_whose_call_made_it_and_keeps_it_across_resumes() -> None:
    world = World()
    body = failing_call(world, "alice")
    assert snapshot(world, body, "alice").agent == "alice"
    world.driver.on("#b", "fail")
    again = world.calls.resume(body["call"], body["resume_token"], agent="alice").body
    assert again["status"] == "failed"
    assert snapshot(world, again, "alice").agent == "alice"


def test_another_agent_gets_checkpoint_not_found_as_for_a_call_with_none_and_nothing_changes() -> None:
    world = World()
    body = failing_call(world, "alice")
    before = snapshot(world, body, "alice")
    sent = len(world.driver.sent)
    events = len(world.events)
    refused = [resume_error(world, body["call"], token, "bob") for token in (body["resume_token"], new_token())]
    assert [(e.code, e.http_status) for e in refused] == [("checkpoint_not_found", 404)] * 2
    assert len(world.driver.sent) == sent and len(world.events) == events
    assert snapshot(world, body, "alice") == before  # same token, same place, same expiry
    assert world.store.calls() == [body["call"]] and world.drops == []
    assert world.calls.resume(body["call"], body["resume_token"], agent="alice").body["status"] == "ok"
    gone = resume_error(world, body["call"], body["resume_token"], "alice")  # now it truly has none
    assert [e.to_json() for e in refused] == [gone.to_json()] * 2


def test_the_node_itself_and_an_agent_do_not_find_each_others_checkpoints() -> None:
    world = World()
    mine = failing_call(world, None)
    theirs = failing_call(world, "alice")
    assert resume_error(world, mine["call"], mine["resume_token"], "alice").code == "checkpoint_not_found"
    assert resume_error(world, theirs["call"], theirs["resume_token"], None).code == "checkpoint_not_found"
    assert world.store.calls() == [mine["call"], theirs["call"]]


def test_another_agents_resume_never_compares_the_token(monkeypatch: pytest.MonkeyPatch) -> None:
    world = World()
    body = failing_call(world, "alice")
    compared: list[object] = []
    original = Kept.token_matches

    def spy(self: Kept, token: object) -> bool:
        compared.append(token)
        return original(self, token)

    monkeypatch.setattr(Kept, "token_matches", spy)
    resume_error(world, body["call"], body["resume_token"], "bob")
    assert compared == []
    resume_error(world, body["call"], new_token(), "alice")
    assert len(compared) == 1  # the owner's wrong token is compared: resume_token_invalid


def test_a_checkpoint_being_resumed_is_not_found_by_another_agent_either() -> None:
    world = World()
    body = failing_call(world, "alice")
    world.store.take(body["call"], body["resume_token"], "alice")
    assert resume_error(world, body["call"], body["resume_token"], "bob").code == "checkpoint_not_found"
    world.store.put_back(body["call"])
    assert resume_error(world, body["call"], body["resume_token"], "bob").code == "checkpoint_not_found"
    assert world.calls.resume(body["call"], body["resume_token"], agent="alice").body["status"] == "ok"


# --- the limit of 20 is each agent's ----------------------------------------------------------------


def test_an_agents_25_calls_push_out_only_its_own_oldest() -> None:
    world = World()
    alices = [failing_call(world, "alice") for _ in range(3)]
    bobs = [failing_call(world, "bob") for _ in range(25)]
    assert world.drops == [(b["call"], "pushed_out") for b in bobs[:5]]
    assert world.store.calls() == [a["call"] for a in alices] + [b["call"] for b in bobs[5:]]
    assert world.store.count("alice") == 3 and world.store.count("bob") == 20
    for alice in alices:
        assert world.calls.resume(alice["call"], alice["resume_token"], agent="alice").body["status"] == "ok"


def test_each_agent_holds_as_many_as_its_own_capacity() -> None:
    world = World(capacity_of=lambda agent: 2 if agent == "small" else 20)
    small = [failing_call(world, "small") for _ in range(3)]
    big = [failing_call(world, "big") for _ in range(3)]
    assert world.drops == [(small[0]["call"], "pushed_out")]
    assert world.store.calls() == [small[1]["call"], small[2]["call"], *(b["call"] for b in big)]


def test_a_capacity_asked_at_each_keep_follows_the_agents_policy_as_it_stands() -> None:
    capacity = {"alice": 20}
    world = World(capacity_of=lambda agent: capacity[str(agent)])
    bodies = [failing_call(world, "alice") for _ in range(5)]
    capacity["alice"] = 2
    newest = failing_call(world, "alice")
    assert world.drops == [(b["call"], "pushed_out") for b in bodies[:4]]
    assert world.store.calls() == [bodies[4]["call"], newest["call"]]


def test_the_total_cap_pushes_out_the_oldest_of_the_agent_holding_the_most() -> None:
    world = World(total_capacity=6)
    alices = [failing_call(world, "alice") for _ in range(2)]
    bobs = [failing_call(world, "bob") for _ in range(3)]
    carol = failing_call(world, "carol")
    assert world.drops == []
    failing_call(world, "carol")  # 7 > 6: bob holds the most
    assert world.drops == [(bobs[0]["call"], "pushed_out")]
    failing_call(world, "dave")  # alice, bob and carol hold 2 each: alice's oldest is the oldest
    assert world.drops[-1] == (alices[0]["call"], "pushed_out")
    failing_call(world, "carol")  # carol holds 3, the most: her oldest goes, not bob's older one
    assert world.drops[-1] == (carol["call"], "pushed_out")
    assert len(world.drops) == 3
    assert len(world.store) == 6


def test_a_checkpoint_being_resumed_counts_for_its_agent_and_is_not_pushed_out() -> None:
    world = World(capacity_of=lambda agent: 2)
    first, second = failing_call(world, "alice"), failing_call(world, "alice")
    world.store.take(first["call"], first["resume_token"], "alice")
    failing_call(world, "bob")
    failing_call(world, "alice")
    assert world.drops == [(second["call"], "pushed_out")]
    world.store.put_back(first["call"])
    assert world.store.count("alice") == 2


# --- the gateway's direct-call checkpoints -----------------------------------------------------------


def direct(call: int, agent: str) -> DirectCheckpoint:
    return DirectCheckpoint(agent, call, "browser_click", {"selector": "#x"}, {"code": "needs_user"}, 3, "approval")


def test_direct_checkpoints_an_agents_21_calls_push_out_only_its_own_oldest() -> None:
    store = DirectCheckpoints(lambda: 1000.0)
    store.keep(direct(1, "alice/s1"))
    for call in range(2, 23):
        store.keep(direct(call, "bob/s2"))
    assert store.find("alice/s1", 1) is not None
    assert store.find("bob/s2", 2) is None and store.find("bob/s2", 3) is not None
    assert len(store) == 21


def test_direct_checkpoints_the_total_cap_pushes_out_the_oldest_of_the_agent_holding_the_most() -> None:
    store = DirectCheckpoints(lambda: 1000.0, total_capacity=3)
    store.keep(direct(1, "alice"))
    store.keep(direct(2, "bob"))
    store.keep(direct(3, "bob"))
    store.keep(direct(4, "carol"))
    assert store.find("bob", 2) is None
    assert [store.find(a, c) is not None for a, c in (("alice", 1), ("bob", 3), ("carol", 4))] == [True] * 3
