"""Sessions on a live node: each agent's browser contexts, their modes, their end, their records.

A ``kitsune serve`` with alice and bob serves most tests over HTTP; the test site counts what it
receives (``GET /cookies/set`` sets a cookie: a sign-in's cookie, and a write). A node with a
short sweep serves the sweep; in-process nodes serve what needs a policy changed mid-way and a
browser that dies.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from bridge.node import Node
from bridge.wiring import run_node
from driver import ChromiumBrowser
from messages.commands import parse_body, parse_command
from messages.results import Done, Failed
from tests.integration.serving import TOKENS, Served, serve
from tests.nats_access import NatsAccess
from tests.nodes import chromium_pid, open_user_tab, resume_call, run_call
from tests.site import TestSite

SIGN_IN = "GET /cookies/set"


NARROW = "narrow-token-0123456789abcdef"
"""carol's token: she may reach 127.0.0.1 alone."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess) -> Iterator[Served]:
    agents = [*({"name": name, "token": token} for name, token in TOKENS.items()),
              {"name": "carol", "token": NARROW, "urls": {"allow": ["127.0.0.1"]}}]
    running = serve(tmp_path_factory.mktemp("sessions"), nats_access,
                    {"caps": ["core", "automation"], "agents": agents})
    yield running
    assert running.stop() == 0


@pytest.fixture(scope="module")
def other_site() -> Iterator[TestSite]:
    """A second site, on another loopback address (127.0.0.2)."""
    with TestSite(host="127.0.0.2") as served_elsewhere:
        yield served_elsewhere


def _batch(client: httpx.Client, commands: list[dict[str, Any]], status: int = 200) -> dict[str, Any]:
    answer = client.post("/api/batch", json={"commands": commands})
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _sign_in(site: TestSite, who: str, session: str | None = None) -> list[dict[str, Any]]:
    """A batch that opens a tab (in ``session``) and signs in as ``who``: the site sets the cookie ``sid``."""
    named = {"session": session} if session is not None else {}
    return [{"action": "newTab", "url": site.url(f"/cookies/set?name=sid&value={who}"), **named},
            {"action": "pageText", "tabId": "${$0.tabId}", "selector": "#server-cookies"}]


def _cookies_seen(site: TestSite, session: str | None = None) -> list[dict[str, Any]]:
    """A batch that opens a tab (in ``session``) on the cookie page: the server shows what it received."""
    named = {"session": session} if session is not None else {}
    return [{"action": "newTab", "url": site.url("/cookies"), **named},
            {"action": "pageText", "tabId": "${$0.tabId}", "selector": "#server-cookies"},
            {"action": "storage", "tabId": "${$0.tabId}", "op": "get", "key": "who"}]


def _store(who: str) -> dict[str, Any]:
    return {"action": "storage", "tabId": "${$0.tabId}", "op": "set", "key": "who", "value": who}


def _sessions(client: httpx.Client) -> dict[str, Any]:
    answer = client.get("/api/sessions")
    assert answer.status_code == 200, answer.text
    listed: dict[str, Any] = answer.json()
    return listed


def _eventually(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.05)


def test_an_agents_cookies_and_local_storage_never_reach_another_agent_in_either_direction(
        served: Served, site: TestSite) -> None:
    with served.client("alice") as alice, served.client("bob") as bob:
        signed = _batch(alice, [*_sign_in(site, "alice"), _store("alice")])
        assert signed["status"] == "ok" and signed["results"][1]["text"] == "sid=alice"
        seen = _batch(bob, _cookies_seen(site))
        assert seen["status"] == "ok"
        assert (seen["results"][1]["text"], seen["results"][2]["value"]) == ("", None)

        assert _batch(bob, [*_sign_in(site, "bob"), _store("bob")])["results"][1]["text"] == "sid=bob"
        again = _batch(alice, _cookies_seen(site))  # alice's later call: her own sign-in, never bob's
        assert (again["results"][1]["text"], again["results"][2]["value"]) == ("sid=alice", "alice")
        bobs = _batch(bob, _cookies_seen(site))
        assert (bobs["results"][1]["text"], bobs["results"][2]["value"]) == ("sid=bob", "bob")
    assert site.count(SIGN_IN) == 2


def test_a_named_session_is_kept_across_calls_apart_from_the_default_one(served: Served, site: TestSite) -> None:
    with served.client("alice") as alice:
        assert _batch(alice, _sign_in(site, "shopper", "shop"))["results"][0]["session"] == "shop"
        later = _batch(alice, _cookies_seen(site, "shop"))
        assert later["results"][0]["session"] == "shop" and later["results"][1]["text"] == "sid=shopper"
        default = _batch(alice, _cookies_seen(site))
        assert default["results"][0]["session"] == "default" and "shopper" not in default["results"][1]["text"]
        listed = {s["name"]: s for s in _sessions(alice)["sessions"]}
        assert listed["shop"]["mode"] == "reuse" and len(listed["shop"]["tabs"]) == 2
        tabs = {t["tabId"]: t for t in alice.get("/api/tabs").json()["tabs"]}
        assert {tabs[t]["session"] for t in listed["shop"]["tabs"]} == {"shop"}
    with served.client("bob") as bob:  # bob's "shop" is his own: alice's is nowhere in his lists
        assert "shop" not in {s["name"] for s in _sessions(bob)["sessions"]}
        assert _batch(bob, _cookies_seen(site, "shop"))["results"][1]["text"] == ""
        theirs = [t for t in bob.get("/api/tabs").json()["tabs"] if t["owner"] == "agent"]
        assert theirs and {t["session"] for t in theirs} == {None}


def test_a_one_shot_session_is_fresh_and_ends_with_its_call(served: Served, site: TestSite) -> None:
    with served.client("alice") as alice:
        _batch(alice, _sign_in(site, "alice"))
        once = _batch(alice, [*_cookies_seen(site, "call"), _store("once")])
        assert once["status"] == "ok"
        name = once["results"][0]["session"]
        assert name == f"call:{_call_of(served, name)}"  # named after its call, as the audit log numbers it
        assert (once["results"][1]["text"], once["results"][2]["value"]) == ("", None)
        tab = once["results"][0]["tabId"]

        listed = _sessions(alice)
        assert name not in {s["name"] for s in listed["sessions"]}
        assert {"name": name, "mode": "one-shot", "reason": "call_ended"} in [
            {k: t[k] for k in ("name", "mode", "reason")} for t in listed["tombstones"]]
        answer = alice.post("/api/act", json={"command": {"action": "title", "tabId": tab}})
        assert (answer.status_code, answer.json()["code"]) == (410, "session_expired")
        gone = alice.post("/api/batch", json={"commands": [{"action": "click", "tabId": tab, "selector": "#x"}]})
        assert (gone.status_code, gone.json()["code"], gone.json()["state"]["path"]) == (410, "session_expired", "0")
        assert _batch(alice, _cookies_seen(site))["results"][1]["text"] == "sid=alice"  # default untouched


def _call_of(served: Served, session: str) -> int:
    """The call the audit log says opened ``session``."""
    opened = [e for e in served.audit() if e["kind"] == "session" and e["op"] == "opened" and e["session"] == session]
    assert len(opened) == 1, opened
    call: int = opened[0]["parent"]["call"]
    return call


def test_keep_session_promotes_a_one_shot_session_that_later_calls_continue_in(
        served: Served, site: TestSite) -> None:
    with served.client("bob") as bob:
        kept = _batch(bob, [*_sign_in(site, "keeper", "call"),
                            {"action": "keepSession", "tabId": "${$0.tabId}", "name": "kept"}])
        assert kept["status"] == "ok", kept
        assert kept["results"][2] == {"ok": True, "session": "kept", "tabId": kept["results"][0]["tabId"]}
        listed = {s["name"]: s for s in _sessions(bob)["sessions"]}
        assert listed["kept"]["mode"] == "dynamic" and listed["kept"]["tabs"] == [kept["results"][0]["tabId"]]
        later = _batch(bob, _cookies_seen(site, "kept"))
        assert later["results"][1]["text"] == "sid=keeper"

        taken = _batch(bob, [{"action": "newTab", "session": "call"},
                             {"action": "keepSession", "tabId": "${$0.tabId}", "name": "kept"}])
        assert taken["results"][1]["code"] == "session_exists"
        reuse = _batch(bob, [{"action": "newTab", "session": "kept"},
                             {"action": "keepSession", "tabId": "${$0.tabId}", "name": "other"}])
        assert reuse["results"][1]["code"] == "session_not_promotable"

    def promotions() -> list[dict[str, Any]]:
        return [e for e in served.audit() if e["kind"] == "session" and e["op"] == "promoted"]
    _eventually(lambda: len(promotions()) == 1)
    promoted = promotions()
    assert [(e["agent"], e["session"], e["mode"]) for e in promoted] == [("bob", "kept", "dynamic")]
    assert promoted[0]["previous"] == f"call:{promoted[0]['parent']['call']}"


def test_closing_a_session_closes_its_tabs_and_naming_it_again_is_session_expired(
        served: Served, site: TestSite) -> None:
    with served.client("alice") as alice:
        tab = _batch(alice, _sign_in(site, "closer", "closing"))["results"][0]["tabId"]
        closed = alice.delete("/api/sessions/closing")
        assert closed.status_code == 200 and closed.json() == {"closed": "closing", "mode": "reuse", "tabs": [tab]}
        assert tab not in {t["tabId"] for t in alice.get("/api/tabs").json()["tabs"]}
        assert {"name": "closing", "reason": "closed"} in [
            {k: t[k] for k in ("name", "reason")} for t in alice.get("/api/tabs").json()["closed_sessions"]]

        named = _batch(alice, [{"action": "newTab", "url": site.url("/cookies"), "session": "closing"}])
        assert (named["status"], named["results"][0]["code"]) == ("failed", "session_expired")
        assert named["results"][0]["state"]["reason"] == "closed"
        assert alice.delete("/api/sessions/closing").json() == {"closed": "closing", "was": "tombstone"}
        fresh = _batch(alice, _cookies_seen(site, "closing"))  # the tombstone forgotten: a fresh session
        assert fresh["status"] == "ok" and fresh["results"][1]["text"] == ""
        missing = alice.delete("/api/sessions/never-opened")
        assert (missing.status_code, missing.json()["code"]) == (404, "session_not_found")


def test_reset_session_signs_the_session_out_closes_its_tabs_and_keeps_its_name(served: Served, site: TestSite) -> None:
    with served.client("alice") as alice:
        signed_in = _batch(alice, [
            {"action": "newTab", "url": site.url("/account"), "session": "to-reset"},
            {"action": "fill", "tabId": "${$0.tabId}", "selector": "#username", "value": "ann"},
            {"action": "fill", "tabId": "${$0.tabId}", "selector": "#password", "value": "canary-pass"},
            {"action": "click", "tabId": "${$0.tabId}", "selector": "#sign-in"},
            {"action": "waitFor", "tabId": "${$0.tabId}", "selector": "#account"}])
        assert signed_in["status"] == "ok", signed_in
        tab = signed_in["results"][0]["tabId"]
        reset = alice.post("/api/act", json={"command": {"action": "resetSession", "name": "to-reset"}}).json()
        assert (reset["status"], reset["session"], reset["closed"]) == ("ok", "to-reset", [tab]), reset
        listed = {s["name"]: s for s in _sessions(alice)["sessions"]}
        assert listed["to-reset"]["tabs"] == [] and listed["to-reset"]["mode"] == "reuse"  # kept under its name
        gone = alice.post("/api/act", json={"command": {"action": "title", "tabId": tab}}).json()
        assert gone["code"] in ("tab_closed", "unknown_tab"), gone
        again = _batch(alice, [{"action": "newTab", "url": site.url("/account"), "session": "to-reset"},
                               {"action": "title", "tabId": "${$0.tabId}"}])
        assert again["results"][1]["title"] == "Sign in", again  # signed out: a fresh context, same name
        theirs = alice.post("/api/act", json={"command": {"action": "resetSession", "name": "nobody-s"}})
        assert (theirs.status_code, theirs.json()["code"]) == (404, "session_not_found")

    def entries() -> list[dict[str, Any]]:
        return [e for e in served.audit() if e["kind"] == "session" and e["session"] == "to-reset"]
    _eventually(lambda: [e["op"] for e in entries()] == ["opened", "reset"])
    assert [e for e in served.audit() if e.get("kind") == "direct" and e.get("action") == "resetSession"
            and e["params"] == {"name": "to-reset"}]  # audited as every action, before it ran
    assert "canary-pass" not in repr(served.audit())


def test_reset_session_is_a_write_refused_in_read_only_mode_and_held_by_ask_before_act(
        node: Node, site: TestSite) -> None:
    opened = _run(node, "reset-agent", [{"action": "newTab", "url": site.url("/account"), "session": "kept"}])
    tab = opened["results"][0]["tabId"]
    reset = parse_command({"action": "resetSession", "name": "kept"})
    saved = node.policy
    try:
        node.policy = dataclasses.replace(saved, read_only=True)
        refused, _ = node.io.run(node.act("reset-agent", reset, None))
        assert isinstance(refused, Failed) and refused.failure.code == "read_only"
        node.policy = dataclasses.replace(saved, ask_before_act=True)
        held, _ = node.io.run(node.act("reset-agent", reset, None))
        assert not isinstance(held, Done) and held.failure.code == "needs_user" and held.failure.state
        assert tab in node.browser.tab_ids()  # nothing was reset
        token = held.failure.state["confirm_token"]
        done, _ = node.io.run(node.act("reset-agent", reset, None, token))
        assert isinstance(done, Done) and done.value["closed"] == [tab]
    finally:
        node.policy = saved
        node.io.run(node.sessions.close("reset-agent", "kept"))


def test_session_names_are_checked_before_anything_runs(served: Served, site: TestSite) -> None:
    with served.client("alice") as alice:
        for bad in ("a:b", "", "x" * 65, "-lead"):
            answer = alice.post("/api/batch", json={"commands": [
                {"action": "newTab", "url": site.url("/cookies/set?name=sid&value=bad"), "session": bad}]})
            assert (answer.status_code, answer.json()["code"]) == (400, "invalid_parameter"), bad
        direct = alice.post("/api/tabs", json={"op": "open", "url": site.url("/cookies"), "session": "call"})
        assert (direct.status_code, direct.json()["code"]) == (400, "invalid_parameter")
    assert site.count(SIGN_IN) == 0


def test_a_one_shot_sessions_opening_and_end_are_audit_entries_of_its_call(served: Served, site: TestSite) -> None:
    with served.client("alice") as alice:
        once = _batch(alice, [*_cookies_seen(site, "call"),
                              {"action": "waitFor", "selector": "#never", "timeout": 0.2}])
        assert once["status"] == "failed"  # failed ends a one-shot session, though its checkpoint is kept
        name = once["results"][0]["session"]

    def entries() -> list[dict[str, Any]]:
        return [e for e in served.audit() if e["kind"] == "session" and e["session"] == name]
    _eventually(lambda: len(entries()) == 2)  # a session's entries are not waited for: nothing waits on them
    assert [(e["op"], e["mode"], e.get("reason"), e["parent"]["call"]) for e in entries()] == [
        ("opened", "one-shot", None, once["call"]), ("closed", "one-shot", "call_ended", once["call"])]
    assert all(e["agent"] == "alice" for e in entries())


@pytest.fixture(scope="module")
def sweeping(tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess) -> Iterator[Served]:
    running = serve(tmp_path_factory.mktemp("sweeping"), nats_access,
                    {"caps": ["core", "automation"], "sessions": {"max_idle": 1.0, "sweep_interval": 0.2}})
    yield running
    assert running.stop() == 0


def test_the_sweep_ends_an_idle_session_and_a_call_naming_it_gets_session_expired(
        sweeping: Served, site: TestSite) -> None:
    with sweeping.client("alice") as alice:
        tab = _batch(alice, _sign_in(site, "idle", "idle"))["results"][0]["tabId"]
        _eventually(lambda: "idle" in {t["name"] for t in _sessions(alice)["tombstones"]})
        tombstone = next(t for t in _sessions(alice)["tombstones"] if t["name"] == "idle")
        assert (tombstone["mode"], tombstone["reason"]) == ("reuse", "swept")
        listed = alice.get("/api/tabs").json()
        assert tab not in {t["tabId"] for t in listed["tabs"]}
        assert "idle" in {t["name"] for t in listed["closed_sessions"]}

        named = _batch(alice, [{"action": "newTab", "session": "idle"}])
        assert named["results"][0]["code"] == "session_expired"
        on_its_tab = alice.post("/api/batch", json={"commands": [{"action": "pageText", "tabId": tab}]})
        assert (on_its_tab.status_code, on_its_tab.json()["code"]) == (410, "session_expired")
        resumed = alice.post("/api/resume", json={"call": named["call"], "resume_token": named["resume_token"]})
        assert resumed.json()["results"][0]["code"] == "session_expired"
    def swept_entries() -> list[dict[str, Any]]:
        return [e for e in sweeping.audit() if e["kind"] == "session" and e["op"] == "swept"]
    _eventually(lambda: len(swept_entries()) == 1)
    swept = swept_entries()
    assert [(e["agent"], e["session"], e["reason"]) for e in swept] == [("alice", "idle", "swept")]
    metrics = httpx.get(f"{sweeping.base}/metrics", headers={"Authorization": "Bearer alice-token-0123456789abcdef"})
    assert 'kitsune_sessions_closed_total{reason="swept"} 1.0' in metrics.text


def test_each_agents_own_url_lists_bind_what_the_pages_of_its_sessions_reach(
        served: Served, site: TestSite, other_site: TestSite) -> None:
    other_site.reset()
    target = other_site.url("/cookies/set?name=sid&value=fetched")
    reach = f"return await fetch({target!r}, {{mode: 'no-cors'}}).then(() => 'reached', () => 'refused')"
    carol = httpx.Client(base_url=served.base, headers={"Authorization": f"Bearer {NARROW}"}, timeout=90)
    with carol, served.client("alice") as alice:
        for client, expected in ((carol, "refused"), (alice, "reached")):
            ran = _batch(client, [{"action": "newTab", "url": site.url("/cookies")},
                                  {"action": "js", "tabId": "${$0.tabId}", "code": reach}])
            assert ran["status"] == "ok" and ran["results"][1]["value"] == expected, ran
        refused = _batch(carol, [{"action": "newTab", "url": other_site.url("/cookies")}])
        assert refused["results"][0]["code"] == "url_denied"
    assert other_site.count(SIGN_IN) == 1  # alice's fetch alone reached the other site


# --- in-process nodes: a policy changed mid-way, a browser that dies ------------------------------


def _run(node: Node, agent: str, commands: list[dict[str, Any]]) -> dict[str, Any]:
    return run_call(node, parse_body("batch", {"commands": commands}), agent=agent).body


def test_a_one_shot_session_outlives_an_unknown_write_and_a_hold_and_ends_when_the_resume_finishes(
        node: Node, site: TestSite) -> None:
    agent = "holder"
    slow_once = ("if (!window.waited) { window.waited = true; await new Promise(r => setTimeout(r, 3000)); }"
                 " return document.cookie")
    try:  # the first run of the script takes 3 s: given 0.5 s, it was sent and its outcome is unknown
        first = _run(node, agent, [*_sign_in(site, "holder", "call"),
                                   {"action": "js", "tabId": "${$0.tabId}", "code": slow_once, "timeout": 0.5}])
        assert first["status"] == "unknown", first
        name = first["results"][0]["session"]
        assert [s["name"] for s in node.sessions.listing(agent)["sessions"]] == [name]

        node.agent_policies[agent] = dataclasses.replace(node.policy, ask_before_act=True)
        held = resume_call(node, first["call"], first["resume_token"], {"2": "not_applied"}, agent=agent).body
        assert held["status"] == "held", held
        assert [s["name"] for s in node.sessions.listing(agent)["sessions"]] == [name]  # a hold keeps it too

        del node.agent_policies[agent]
        done = resume_call(node, held["call"], held["resume_token"], agent=agent).body
        assert done["status"] == "ok", done
        assert done["results"][2]["value"] == "sid=holder"  # the same browser all along
        assert site.count(SIGN_IN) == 1
        assert node.sessions.listing(agent)["sessions"] == []  # ended as the resume finished
        assert {"name": name, "reason": "call_ended"} in [
            {k: t[k] for k in ("name", "reason")} for t in node.sessions.listing(agent)["tombstones"]]
        _eventually(lambda: len(node.replay(first["call"]).sessions) == 2)
        assert [(e.op, e.session, e.mode, e.reason, e.agent) for e in node.replay(first["call"]).sessions] == [
            ("opened", name, "one-shot", None, agent), ("closed", name, "one-shot", "call_ended", agent)]
    finally:
        node.agent_policies.pop(agent, None)


def test_a_one_shot_session_ends_when_its_checkpoint_is_pushed_out(node: Node, site: TestSite) -> None:
    agent = "pusher"
    slow_once = "if (!window.waited) { window.waited = true; await new Promise(r => setTimeout(r, 3000)); } return 1"
    unknown: list[dict[str, Any]] = [{"action": "newTab", "session": "call"},
               {"action": "js", "tabId": "${$0.tabId}", "code": slow_once, "timeout": 0.3}]
    node.agent_policies[agent] = dataclasses.replace(node.policy, max_checkpoints=1)
    try:
        first = _run(node, agent, unknown)
        assert first["status"] == "unknown", first
        assert [s["name"] for s in node.sessions.listing(agent)["sessions"]] == [f"call:{first['call']}"]
        second = _run(node, agent, unknown)  # its checkpoint pushes the first one's out: so goes its session
        assert second["status"] == "unknown", second
        _eventually(lambda: [s["name"] for s in node.sessions.listing(agent)["sessions"]] == [
            f"call:{second['call']}"])
        assert (f"call:{first['call']}", "call_ended") in [
            (t["name"], t["reason"]) for t in node.sessions.listing(agent)["tombstones"]]
    finally:
        del node.agent_policies[agent]


def test_a_user_tab_and_its_popups_are_in_no_session_and_read_only_until_taken_over(
        node: Node, site: TestSite) -> None:
    tab = open_user_tab(node, site.url("/popups"))  # no agent opened it: the user context
    node.owners.take_over(tab, "alice")
    clicked, _ = node.io.run(node.act("alice", parse_command({"action": "click", "selector": "#open-popup"}), tab))
    assert isinstance(clicked, Done)

    def popups() -> list[dict[str, Any]]:
        return [t for t in node.io.run(node.describe_tabs()) if t["title"] == "Popup child"]
    _eventually(lambda: len(popups()) == 1)
    popup = popups()[0]
    assert popup["session"] is None and node.owners.owner(popup["tabId"]) == "user"
    write = parse_command({"action": "navigate", "url": site.url("/text")})
    refused, _ = node.io.run(node.act("alice", write, popup["tabId"]))
    assert isinstance(refused, Failed) and (refused.failure.code, refused.failure.state) == (
        "tab_owned", {"tabId": popup["tabId"], "owner": "user"})
    node.owners.take_over(popup["tabId"], "alice")
    done, _ = node.io.run(node.act("alice", write, popup["tabId"]))
    assert isinstance(done, Done)


def test_a_browser_that_dies_tombstones_every_session_and_its_tabs_end_tab_closed(
        nats_access: NatsAccess, site: TestSite) -> None:
    node = run_node(ChromiumBrowser(), nats_access.node_config(step_timeout=10.0, fleet="sessions-die"))
    try:
        tab = _run(node, "alice", _sign_in(site, "alice", "shop"))["results"][0]["tabId"]
        _run(node, "bob", _sign_in(site, "bob"))
        browser: Any = node.browser
        os.kill(node.io.run(chromium_pid(browser, tab)), signal.SIGKILL)
        _eventually(lambda: browser.restarts == 1)
        for agent, name in (("alice", "shop"), ("bob", "default")):
            listed = node.sessions.listing(agent)
            assert listed["sessions"] == []
            assert [(t["name"], t["reason"]) for t in listed["tombstones"]] == [(name, "browser_restarted")]
        after = _run(node, "alice", [{"action": "pageText", "tabId": tab}])
        assert after["results"][0]["code"] == "tab_closed"
        fresh = _run(node, "bob", _cookies_seen(site))  # an unnamed default: a fresh one, as after a sweep
        assert fresh["status"] == "ok" and fresh["results"][1]["text"] == ""
    finally:
        node.stop()
