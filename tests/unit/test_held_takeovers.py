"""The takeovers held for a person (``bridge.tasks.held``): one agent's queue is bounded, the others' untouched."""

from __future__ import annotations

from typing import Any

from bridge.tasks.held import HELD_PER_AGENT, HeldTakeovers
from core.policy import ConfirmTokens


async def _take_over(agent: str, session: str | None, task: str, force: bool) -> dict[str, Any]:
    raise AssertionError("no takeover is made here")


def test_an_agent_holding_past_its_bound_pushes_out_its_own_oldest_never_another_agents() -> None:
    now = [0.0]
    held = HeldTakeovers(ConfirmTokens(), _take_over, lambda by, op, task: None, clock=lambda: now[0])
    bobs = held.hold("bob-token", "bob", "s-b", "t-bob", True)
    alices = []
    for n in range(HELD_PER_AGENT + 4):
        now[0] += 1.0
        alices.append(held.hold(f"alice-token-{n}", "alice", "s-a", f"t-{n}", True))
    waiting = [h["id"] for h in held.pending()]
    assert waiting == [bobs, *alices[4:]]  # alice's four oldest left the queue, bob's stays
    assert not any("-token" in str(h) for h in held.pending())  # never a hold's confirm token
