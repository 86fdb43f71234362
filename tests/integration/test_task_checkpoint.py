"""A task's checkpoint holds exactly its own calls on its own tabs, once each, with their events, and the
messages its agent records, scrubbed (issue 33), on the two-node fleet of ``task_fleet`` (real Chromium,
real nats-server)."""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from tests.integration.fleet_nodes import until
from tests.integration.task_fleet import (
    HIT,
    Fleet,
    answer,
    api,
    create,
    hit,
    open_tab,
    refused,
    sessions,
)
from tests.site import TestSite


def _checkpoint(client: httpx.Client, task: str) -> dict[str, Any]:
    found: dict[str, Any] = answer(client.get(f"/api/tasks/{task}"))["task"]["checkpoint"]
    return found


def _calls_ended(client: httpx.Client, task: str, count: int) -> dict[str, Any]:
    """The task's checkpoint once it lists ``count`` calls ended."""
    def ended() -> dict[str, Any] | None:
        checkpoint = _checkpoint(client, task)
        return checkpoint if sum(e["kind"] == "call_ended" for e in checkpoint["events"]) >= count else None
    found: dict[str, Any] = until(ended, 10, f"{count} calls ended in the checkpoint")
    return found


def test_a_task_s_checkpoint_holds_its_own_calls_on_its_own_tabs_once_each(fleet: Fleet, site: TestSite) -> None:
    (s1,) = sessions(1)
    with api(fleet.bases[0], session=s1) as owner:
        mine, theirs = (open_tab(owner, site.url("/clicks"), fleet.nodes[0]) for _ in range(2))
        task = create(owner, [mine])["id"]
        second = create(owner, [theirs], "Another task")["id"]
        assert hit(owner, mine)["status"] == "ok"
        assert hit(owner, theirs)["status"] == "ok"
        for tab in (theirs, mine):
            batch = answer(owner.post("/api/batch", json={"tabId": tab, "commands": [
                {"action": "title"}, {"action": "click", "selector": "#hit"}]}))
            assert batch["status"] == "ok", batch
        assert site.wait_for_count(HIT, 4) == 4
        for name, tab in ((task, mine), (second, theirs)):
            checkpoint = _calls_ended(owner, name, 2)
            steps, events = checkpoint["steps"], checkpoint["events"]
            assert {s["tabId"] for s in steps} == {tab}, steps  # never another task's
            assert len({(s["call"], s["path"]) for s in steps}) == len(steps) == 3, steps  # never twice
            calls = {s["call"] for s in steps}
            assert [e["kind"] for e in events] == ["created", "call_started", "call_ended", "call_started",
                                                   "call_ended"], events
            assert {e["call"] for e in events if "call" in e} == calls, events
        assert not {s["call"] for s in _checkpoint(owner, task)["steps"]} & {
            s["call"] for s in _checkpoint(owner, second)["steps"]}


def test_messages_the_agent_records_are_kept_bounded_and_scrubbed(fleet: Fleet, site: TestSite) -> None:
    (s1,) = sessions(1)
    typed, shaped = "hush canary 9c2e", "CanaryTokenShaped_fedcba9876543210"
    with api(fleet.bases[0], session=s1) as owner:
        tab = open_tab(owner, site.url("/form"), fleet.nodes[0])
        task = create(owner, [tab], "Fill the form")["id"]
        fill = {"action": "fill", "tabId": tab, "selector": "#name", "value": typed}
        assert answer(owner.post("/api/act", json={"command": fill}))["status"] == "ok"
        _calls_ended(owner, task, 1)
        said = [{"role": "user", "content": f"Put {typed} in the name"},
                {"role": "assistant", "content": f"Typed {typed}; the site's key is {shaped}"}]
        recorded = answer(owner.post(f"/api/tasks/{task}/checkpoint", json={"summary": "filled",
                                                                              "messages": said}))["task"]
        assert recorded["checkpoint"]["messages"] == [
            {"role": "user", "content": "Put [redacted] in the name"},
            {"role": "assistant", "content": "Typed [redacted]; the site's key is [redacted]"}]
        more = [{"role": "tool", "content": f"line {i}"} for i in range(20)]
        kept = answer(owner.post(f"/api/tasks/{task}/checkpoint", json={"messages": more}))["task"]["checkpoint"]
        assert kept["messages"] == more and kept["summary"] == "filled"  # the newest 20; the summary stays
        refused(owner.post(f"/api/tasks/{task}/checkpoint", json={"messages": [*more, *more]}), "invalid_parameter")
        refused(owner.post(f"/api/tasks/{task}/checkpoint", json={"messages": [{"role": "system", "content": "x"}]}),
                "invalid_parameter")
        for record in (orjson.dumps(recorded), owner.get(f"/api/tasks/{task}").content):
            assert typed.encode() not in record and shaped.encode() not in record
