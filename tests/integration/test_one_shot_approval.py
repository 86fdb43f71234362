"""A held one-shot ``newTab`` approved end to end on a live ``kitsune serve`` (issue 29, section 4).

carol asks before acting (on the session's ``tenants`` node): her batch's ``newTab {"session": "call"}`` is
held with a confirm token bound to her call's session ``call:<id>``; ``POST /api/tabs`` open with that token opens
the tab there; the resume that reports the step ``applied`` gives it the tab, so the later steps'
``${$0.tabId}`` name it. Each later write is held in turn, confirmed with ``POST /api/act`` and
reported applied: the site counts the form's one submission once.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from bridge.approvals import open_approved
from bridge.node import Node
from messages.commands import parse_body
from messages.errors import KitsuneError
from messages.results import Done
from tests.integration.serving import Served
from tests.nodes import run_call
from tests.site import TestSite

SUBMIT = "POST /form"


def _post(client: httpx.Client, path: str, body: dict[str, Any], status: int = 200) -> dict[str, Any]:
    answer = client.post(path, json=body)
    assert answer.status_code == status, answer.text
    result: dict[str, Any] = answer.json()
    return result


def _statuses(body: dict[str, Any]) -> list[str]:
    return [step["status"] for step in body["progress"]]


def _resume(client: httpx.Client, stopped: dict[str, Any], observed: dict[str, str]) -> dict[str, Any]:
    return _post(client, "/api/resume", {"call": stopped["call"], "resume_token": stopped["resume_token"],
                                         "observed": observed})


def _confirm(client: httpx.Client, command: dict[str, Any], held: dict[str, Any]) -> None:
    confirmed = _post(client, "/api/act", {"command": command, "confirm_token": held["state"]["confirm_token"]})
    assert confirmed["status"] == "ok", confirmed


def test_a_held_one_shot_new_tab_is_approved_by_an_open_in_its_calls_session_and_the_resume_uses_its_tab(
        tenants: Served, site: TestSite) -> None:
    site.reset()
    url = site.url("/form")
    steps = [{"action": "newTab", "url": url, "session": "call"},
             {"action": "fill", "tabId": "${$0.tabId}", "selector": "#name", "value": "Ada"},
             {"action": "click", "tabId": "${$0.tabId}", "selector": "#submit"}]
    with tenants.client("carol") as carol:
        held = _post(carol, "/api/batch", {"commands": steps})
        call, hold = held["call"], held["results"][0]
        assert (_statuses(held), hold["code"]) == (["held", "skipped", "skipped"], "needs_user")

        opened = _post(carol, "/api/tabs", {"op": "open", "url": url, "session": "call",
                                            "confirm_token": hold["state"]["confirm_token"]})
        assert (opened["status"], opened["session"]) == ("ok", f"call:{call}"), opened
        assert (hold["state"]["session"], hold["state"]["call"]) == (f"call:{call}", call)  # the hold named it
        tab = opened["tabId"]
        listed = {t["tabId"]: t for t in carol.get("/api/tabs").json()["tabs"]}
        assert (listed[tab]["owner"], listed[tab]["session"]) == ("you", f"call:{call}")
        sessions = {s["name"]: s for s in carol.get("/api/sessions").json()["sessions"]}
        assert (sessions[f"call:{call}"]["mode"], sessions[f"call:{call}"]["tabs"]) == ("one-shot", [tab])

        filling = _resume(carol, held, {"0": "applied"})
        assert _statuses(filling) == ["ok", "held", "skipped"], filling
        assert filling["results"][0]["tabId"] == tab  # the approved tab is the step's result: ${$0.tabId} names it
        assert filling["results"][1]["state"]["tabId"] == tab
        _confirm(carol, {**steps[1], "tabId": tab}, filling["results"][1])

        clicking = _resume(carol, filling, {"1": "applied"})
        assert _statuses(clicking) == ["ok", "ok", "held"], clicking
        assert clicking["results"][2]["state"]["tabId"] == tab
        _confirm(carol, {**steps[2], "tabId": tab}, clicking["results"][2])
        assert site.wait_for_count(SUBMIT) == 1

        done = _resume(carol, clicking, {"2": "applied"})
        assert (done["status"], _statuses(done)) == ("ok", ["ok", "ok", "ok"]), done
        time.sleep(0.3)
        assert site.count(SUBMIT) == 1  # written once: the resume sent nothing again
        gone = carol.get("/api/sessions").json()
        assert f"call:{call}" not in {s["name"] for s in gone["sessions"]}  # it ended with its call
        assert {"name": f"call:{call}", "reason": "call_ended"}.items() <= next(
            t for t in gone["tombstones"] if t["name"] == f"call:{call}").items()


def test_an_open_in_a_one_shot_session_is_refused_without_a_held_calls_token_and_opens_nothing(
        tenants: Served, site: TestSite) -> None:
    url = site.url("/form")
    with tenants.client("carol") as carol:
        before = carol.get("/api/tabs").json()["tabs"]
        refused = _post(carol, "/api/tabs", {"op": "open", "url": url, "session": "call"}, 400)
        assert (refused["code"], refused["state"]["param"]) == ("invalid_parameter", "session")
        forged = _post(carol, "/api/tabs", {"op": "open", "url": url, "session": "call", "confirm_token": "x" * 32},
                       403)
        assert (forged["code"], forged["state"]["param"]) == ("confirm_token_invalid", "confirm_token")
        direct = _post(carol, "/api/tabs", {"op": "open", "url": url}, 403)  # a direct hold names no call
        assert direct["code"] == "needs_user" and "call" not in direct["state"]
        not_a_calls = _post(carol, "/api/tabs", {"op": "open", "url": url, "session": "call",
                                                 "confirm_token": direct["state"]["confirm_token"]}, 403)
        assert not_a_calls["code"] == "confirm_token_invalid"

        held = _post(carol, "/api/batch", {"commands": [{"action": "newTab", "url": url, "session": "call"}]})
        token = held["results"][0]["state"]["confirm_token"]
        other = _post(carol, "/api/tabs", {"op": "open", "url": url, "session": f"call:{held['call'] + 1000}",
                                           "confirm_token": token}, 400)
        assert (other["code"], other["state"]["call"]) == ("invalid_parameter", held["call"])
        with tenants.client("bob") as bob:
            bobs = _post(bob, "/api/tabs", {"op": "open", "url": url, "session": "call", "confirm_token": token}, 403)
            assert bobs["code"] == "confirm_token_invalid"  # another agent's token approves nothing of his
        assert carol.get("/api/tabs").json()["tabs"] == before

        named = _post(carol, "/api/tabs", {"op": "open", "url": url, "session": f"call:{held['call']}",
                                           "confirm_token": token})
        assert (named["status"], named["session"]) == ("ok", f"call:{held['call']}")
        again = _post(carol, "/api/tabs", {"op": "open", "url": url, "session": "call", "confirm_token": token}, 403)
        assert again["code"] == "confirm_token_invalid"  # once

        later = _post(carol, "/api/batch", {"commands": [{"action": "newTab", "url": url, "session": "call"}]})
        by_act = _post(carol, "/api/act", {"command": {"action": "newTab", "url": url, "session": "call"},
                                           "confirm_token": later["results"][0]["state"]["confirm_token"]})
        assert (by_act["status"], by_act["session"]) == ("ok", f"call:{later['call']}")  # POST /api/act approves too


# --- an in-process node: the approved session's life -------------------------------------------


def _eventually(check: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not in time"
        time.sleep(0.05)


def test_an_approved_one_shot_session_is_its_held_calls_kept_for_max_exec_idle_and_ends_with_its_checkpoint(
        node: Node, site: TestSite) -> None:
    agent, url = "approver", site.url("/form")
    table = node.sessions.sessions.table
    node.agent_policies[agent] = dataclasses.replace(node.policy, ask_before_act=True, max_checkpoints=1)

    def held_new_tab() -> dict[str, Any]:
        body = run_call(node, parse_body("batch", {"commands": [{"action": "newTab", "url": url, "session": "call"}]}),
                        agent=agent).body
        assert body["status"] == "held", body
        return body

    def approve(held: dict[str, Any]) -> Any:
        token = held["results"][0]["state"]["confirm_token"]
        return node.io.run(open_approved(node, agent, {"session": "call", "url": url}, token), timeout=60)[0]

    try:
        first = held_new_tab()
        assert isinstance(approve(first), Done)
        session = table.find(agent, f"call:{first['call']}")
        assert session is not None and (session.mode, session.call, session.held) == ("one-shot", first["call"], True)
        time.sleep(0.05)
        assert session not in table.idle(max_idle=0, max_exec_idle=3600)  # a held call's: max_idle does not sweep it
        assert session in table.idle(max_idle=3600, max_exec_idle=0)  # max_exec_idle does

        second = held_new_tab()  # its checkpoint pushes the first one's out: so goes the approved session
        _eventually(lambda: not table.is_open(agent, f"call:{first['call']}"))
        assert (f"call:{first['call']}", "call_ended") in [
            (t["name"], t["reason"]) for t in node.sessions.listing(agent)["tombstones"]]
        held_new_tab()  # and the second's, before its hold is approved: nothing is opened for it
        with pytest.raises(KitsuneError) as refused:
            approve(second)
        assert (refused.value.code, refused.value.http_status) == ("checkpoint_not_found", 404)
        assert not table.is_open(agent, f"call:{second['call']}")
    finally:
        del node.agent_policies[agent]
