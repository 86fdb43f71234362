"""MCP over streamable HTTP at ``/mcp`` on a live node, with the SDK's own client: bearer tokens,
direct calls held by ask-before-act and approved, declined or left unanswered in the client's
prompt (elicitation), their checkpoints and resumes, progress notifications, and the test site's
write counts proving nothing is sent twice."""

from __future__ import annotations

import time
from typing import Any

import anyio
import httpx
import pytest

from tests.conftest import APPROVAL_WAIT
from tests.e2e.clients import Asker, act, audit_of, call, open_tab, over_http
from tests.integration.serving import TOKENS, Served
from tests.site import TestSite

pytestmark = pytest.mark.anyio

_INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
               "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                          "clientInfo": {"name": "raw", "version": "0"}}}
_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _no_confirm_token(result: dict[str, Any]) -> bool:
    return "confirm_token" not in repr(result)


def test_mcp_needs_a_bearer_token_and_a_session_belongs_to_the_agent_that_opened_it(asking: Served) -> None:
    assert httpx.post(asking.base + "/mcp", json=_INITIALIZE, headers=_HEADERS).status_code == 401
    wrong = httpx.post(asking.base + "/mcp", json=_INITIALIZE,
                       headers={**_HEADERS, "Authorization": "Bearer not-a-token-0000000000"})
    assert (wrong.status_code, wrong.json()["code"]) == (401, "unauthorized")
    opened = httpx.post(asking.base + "/mcp", json=_INITIALIZE,  # the node's first: it loads the MCP SDK
                        headers={**_HEADERS, "Authorization": f"Bearer {TOKENS['alice']}"}, timeout=60)
    assert opened.status_code == 200
    session = opened.headers["mcp-session-id"]
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    as_bob = httpx.post(asking.base + "/mcp", json=listing, headers={
        **_HEADERS, "Authorization": f"Bearer {TOKENS['bob']}", "Mcp-Session-Id": session,
        "Mcp-Protocol-Version": "2025-11-25"})
    assert as_bob.status_code == 404


async def test_an_approved_prompt_sends_the_write_once(asking: Served, site: TestSite) -> None:
    tab = open_tab(asking, site.url("/clicks"))
    asker = Asker("accept")
    async with over_http(asking, asker=asker) as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert {"browser_batch", "browser_click", "browser_resume"} <= names
        done = await call(session, "browser_click", {"tabId": tab, "selector": "#hit"})
        assert done["status"] == "ok" and "resume_token" not in done
    assert len(asker.messages) == 1 and "click" in asker.messages[0] and "#hit" in asker.messages[0]
    assert asker.schemas[0]["properties"]["approve"]["type"] == "boolean"
    assert site.wait_for_count("POST /clicks/hit") == 1
    time.sleep(0.3)
    assert site.count("POST /clicks/hit") == 1


async def test_a_declined_prompt_keeps_a_checkpoint_and_its_resume_asks_again(asking: Served, site: TestSite) -> None:
    tab = open_tab(asking, site.url("/clicks"))
    asker = Asker("decline", "accept")
    async with over_http(asking, asker=asker) as session:
        declined = await call(session, "browser_click", {"tabId": tab, "selector": "#hit"})
        assert (declined["code"], declined["status"]) == ("needs_user", "held")
        assert declined["state"]["decision"] == "declined" and declined["state"]["approval"] == "elicitation"
        assert _no_confirm_token(declined)  # the user said no: the agent gets no way around it
        assert isinstance(declined["call"], int) and declined["resume_token"]
        assert "declined" in declined["hint"] and "browser_resume" in declined["hint"]
        assert [e["call"] for e in audit_of(asking, "click", selector="#hit")][-1] == declined["call"]
        assert site.count("POST /clicks/hit") == 0
        async with over_http(asking) as other:  # another MCP client of the same agent
            elsewhere = await call(other, "browser_resume", {"call": declined["call"],
                                                             "resume_token": declined["resume_token"]})
            assert elsewhere["code"] == "checkpoint_not_found"

        done = await call(session, "browser_resume", {"call": declined["call"],
                                                      "resume_token": declined["resume_token"], "wait": 5})
        assert done["status"] == "ok", done
        assert site.wait_for_count("POST /clicks/hit") == 1
        gone = await call(session, "browser_resume", {"call": declined["call"],
                                                      "resume_token": declined["resume_token"]})
        assert gone["code"] == "checkpoint_not_found"  # dropped: it no longer stops on needs_user
    assert len(asker.messages) == 2
    time.sleep(0.3)
    assert site.count("POST /clicks/hit") == 1


async def test_an_unanswered_prompt_is_cancelled_and_resumes_report_progress_every_10_seconds(
        asking: Served, site: TestSite) -> None:
    tab = open_tab(asking, site.url("/clicks"))
    asker = Asker("hang", "hang", "accept")
    async with over_http(asking, asker=asker) as session:
        started = time.monotonic()
        cancelled = await call(session, "browser_click", {"tabId": tab, "selector": "#hit"})
        assert APPROVAL_WAIT <= time.monotonic() - started < APPROVAL_WAIT + 20  # cancelled, not left hanging
        assert cancelled["state"]["decision"] == "cancelled" and _no_confirm_token(cancelled)
        first = {"call": cancelled["call"], "resume_token": cancelled["resume_token"]}

        asked = len(asker.messages)
        not_asked = await call(session, "browser_resume", {**first, "wait": 0})
        assert not_asked["code"] == "needs_user" and len(asker.messages) == asked  # wait=0 asks nothing
        assert not_asked["call"] == cancelled["call"] and not_asked["resume_token"] != cancelled["resume_token"]
        latest = {"call": cancelled["call"], "resume_token": not_asked["resume_token"]}
        assert (await call(session, "browser_resume", first))["code"] == "resume_token_invalid"
        observed = await call(session, "browser_resume", {**latest, "observed": {}})
        assert observed["code"] == "observed_invalid"  # and the checkpoint stays as it was

        progress: list[tuple[float, float | None, float]] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, total, time.monotonic() - started))

        started = time.monotonic()
        waited = await call(session, "browser_resume", {**latest, "wait": 12}, progress_callback=on_progress)
        assert 12 <= time.monotonic() - started < 30  # the wait asked for, then the answer
        assert waited["state"]["decision"] == "cancelled" and waited["call"] == cancelled["call"]
        # a tick while the prompt is open: below the call's one step, of its total of 1
        assert len(progress) == 1 and 0 < progress[0][0] < 1 == progress[0][1] and progress[0][2] >= 9.5, \
            progress

        done = await call(session, "browser_resume", {"call": waited["call"], "resume_token": waited["resume_token"],
                                                      "wait": 5}, progress_callback=on_progress)
        assert done["status"] == "ok", done
        assert len(progress) == 2 and progress[1][:2] == (1, 1)  # answered at once: its one step finished
    assert site.wait_for_count("POST /clicks/hit") == 1
    time.sleep(0.3)
    assert site.count("POST /clicks/hit") == 1


async def test_type_with_submit_held_at_its_enter_resumes_with_the_enter_alone(asking: Served, site: TestSite) -> None:
    tab = open_tab(asking, site.url("/form"))
    asker = Asker("accept", "decline", "accept")
    async with over_http(asking, asker=asker) as session:
        stopped = await call(session, "browser_type", {"tabId": tab, "selector": "#name", "text": "Ada",
                                                       "submit": True})
        assert stopped["code"] == "needs_user" and stopped["state"]["action"] == "press"
        assert [(s["action"], s["status"]) for s in stopped["steps"]] == [("type", "ok"), ("press", "held")]
        assert site.count("POST /form") == 0
        done = await call(session, "browser_resume", {"call": stopped["call"], "resume_token": stopped["resume_token"],
                                                      "wait": 5})
        assert done["status"] == "ok", done
    assert "Ada" not in " ".join(asker.messages) and "3 typed characters" in asker.messages[0]
    assert site.wait_for_count("POST /form") == 1
    assert site.last_form["name"] == ["Ada"]  # typed once, never again
    assert len(audit_of(asking, "type", selector="#name")) == 2  # the hold and the approved request


async def test_fill_form_resumes_at_the_held_field(asking: Served, site: TestSite) -> None:
    tab = open_tab(asking, site.url("/form"))
    asker = Asker("accept", "decline", "accept", "accept")
    fields = [{"selector": "#name", "value": "Grace"}, {"selector": "#email", "value": "grace@example.org"}]
    async with over_http(asking, asker=asker) as session:
        stopped = await call(session, "browser_fill_form", {"tabId": tab, "fields": fields})
        assert [(s["action"], s["status"]) for s in stopped["steps"]] == [("fill", "ok"), ("fill", "held")]
        done = await call(session, "browser_resume", {"call": stopped["call"], "resume_token": stopped["resume_token"],
                                                      "wait": 5})
        assert done["status"] == "ok" and "steps" not in done, done  # every field ok: no step echoes one
        assert len(audit_of(asking, "fill", selector="#name")) == 2  # not filled again by the resume
        assert len(audit_of(asking, "fill", selector="#email")) == 3  # held, held again, approved
        submitted = await call(session, "browser_click", {"tabId": tab, "selector": "#submit"})
        assert submitted["status"] == "ok"
    assert site.wait_for_count("POST /form") == 1
    assert (site.last_form["name"], site.last_form["email"]) == (["Grace"], ["grace@example.org"])


async def test_a_resume_refuses_when_the_agent_made_another_tab_current(asking: Served, site: TestSite) -> None:
    first = open_tab(asking, site.url("/clicks"))
    asker = Asker("decline", "accept")
    async with over_http(asking, asker=asker) as session:
        stopped = await call(session, "browser_click", {"selector": "#hit"})  # on the current tab
        assert stopped["state"]["tabId"] == first
        second = open_tab(asking, site.url("/clicks"))
        resume = {"call": stopped["call"], "resume_token": stopped["resume_token"], "wait": 5}
        changed = await call(session, "browser_resume", resume)
        assert changed["code"] == "current_tab_changed"
        assert (changed["state"]["tabId"], changed["state"]["currentTab"]) == (first, second)
        assert (await call(session, "browser_tabs", {"op": "select", "tabId": first}))["ok"]
        done = await call(session, "browser_resume", resume)  # the checkpoint was kept as it was
        assert done["status"] == "ok", done
    assert site.wait_for_count("POST /clicks/hit") == 1
    time.sleep(0.3)
    assert site.count("POST /clicks/hit") == 1


async def test_tab_handoff_requests_keep_no_checkpoint(asking: Served, site: TestSite) -> None:
    async with over_http(asking) as session:  # a client without elicitation
        held = await call(session, "browser_tabs", {"op": "new", "url": site.url("/text")})
        assert held["code"] == "needs_user" and "resume_token" not in held and "call" in held
        opened = await call(session, "browser_tabs", {"op": "new", "url": site.url("/text"),
                                                      "confirm_token": held["state"]["confirm_token"]})
        assert opened["status"] == "ok"
        listed = await call(session, "browser_tabs", {})
        assert listed["current"] == opened["tabId"] and opened["tabId"] in [t["tabId"] for t in listed["tabs"]]
    async with over_http(asking, asker=Asker("decline")) as session:
        declined = await call(session, "browser_tabs", {"op": "close", "tabId": opened["tabId"]})
        assert declined["state"]["decision"] == "declined" and "resume_token" not in declined
        assert _no_confirm_token(declined)


async def test_ask_user_with_elicitation(asking: Served, site: TestSite) -> None:
    asker = Asker({"answer": "done", "note": "signed in"}, {"answer": "cant"}, "hang", {"answer": "done"})
    async with over_http(asking, asker=asker) as session:
        done = await call(session, "browser_ask_user", {"question": "Please pick the blue plan"})
        assert (done["answer"], done["via"], done["note"]) == ("done", "elicitation", "signed in")
        cant = await call(session, "browser_ask_user", {"question": "Please pick the blue plan"})
        assert cant["answer"] == "cant" and "resume_token" not in cant  # an answer: nothing to wait for
        unanswered = await call(session, "browser_ask_user", {"question": "Please pick the blue plan", "wait": 1})
        assert unanswered["state"]["decision"] == "cancelled" and unanswered["resume_token"]
        resume = {"call": unanswered["call"], "resume_token": unanswered["resume_token"]}
        again = await call(session, "browser_resume", {**resume, "wait": 0})
        assert again["code"] == "needs_user" and len(asker.messages) == 3
        answered = await call(session, "browser_resume", {"call": again["call"],
                                                          "resume_token": again["resume_token"], "wait": 5})
        assert (answered["answer"], answered["via"]) == ("done", "elicitation")
    assert "blue plan" in asker.messages[0]
    assert site.count("POST /clicks/hit") == 0


async def test_ask_user_without_elicitation_waits_for_the_page(asking: Served, site: TestSite) -> None:
    tab = open_tab(asking, site.url("/needs-user/captcha"))
    async with over_http(asking) as session:
        nothing = await call(session, "browser_ask_user", {"question": "Which plan?", "reason": "other"})
        assert nothing["code"] == "needs_user" and "resume_token" not in nothing  # nothing to watch
        asked = await call(session, "browser_ask_user", {"question": "Please solve the captcha",
                                                         "reason": "human_check", "tabId": tab})
        assert asked["state"]["evidence"] == "captcha" and asked["resume_token"]
        still = await call(session, "browser_resume", {"call": asked["call"], "resume_token": asked["resume_token"],
                                                       "wait": 1})
        assert still["code"] == "needs_user" and still["resume_token"] != asked["resume_token"]
        assert act(asking, {"action": "click", "tabId": tab, "selector": "#solve"})["status"] == "ok"  # the user
        done = await call(session, "browser_resume", {"call": still["call"], "resume_token": still["resume_token"],
                                                      "wait": 5})
        assert (done["ok"], done["answer"], done["via"], done["tabId"]) == (True, "done", "page", tab)


async def test_a_page_that_needs_the_user_is_a_stop_the_resume_waits_out(plain: Served, site: TestSite) -> None:
    tab = open_tab(plain, site.url("/needs-user/captcha"))
    select = {"tabId": tab, "selector": "#solve", "values": ["x"]}  # fails at once: a button is no <select>
    async with over_http(plain) as session:
        stopped = await call(session, "browser_select", select)
        assert (stopped["code"], stopped["state"]["reason"]) == ("needs_user", "human_check")
        assert stopped["state"]["evidence"] == "captcha" and stopped["state"]["failure"]["code"] == "wrong_element"
        assert "browser_resume" in stopped["hint"]
        again = await call(session, "browser_resume", {"call": stopped["call"], "resume_token": stopped["resume_token"],
                                                       "wait": 1})
        assert again["code"] == "needs_user" and again["resume_token"] != stopped["resume_token"]
        assert len(audit_of(plain, "select", selector="#solve")) == 1  # nothing sent while the check fails

        async def user_solves_it() -> None:
            await anyio.sleep(1.5)
            solved = await anyio.to_thread.run_sync(act, plain, {"action": "click", "tabId": tab, "selector": "#solve"})
            assert solved["status"] == "ok"

        started = time.monotonic()
        async with anyio.create_task_group() as group:
            group.start_soon(user_solves_it)
            rerun = await call(session, "browser_resume", {"call": again["call"], "resume_token": again["resume_token"],
                                                           "wait": 10})
        assert 1.5 <= time.monotonic() - started < 10  # run again once solved, before its wait ran out
        assert rerun["code"] == "wrong_element"  # run again once the page was solved: its own error now
        assert len(audit_of(plain, "select", selector="#solve")) == 2
        gone = await call(session, "browser_resume", {"call": again["call"], "resume_token": again["resume_token"]})
        assert gone["code"] == "checkpoint_not_found"  # a call that fails another way keeps no checkpoint


async def test_once_the_user_signed_in_the_resume_runs_the_call_again(plain: Served, site: TestSite) -> None:
    tab = open_tab(plain, site.url("/needs-user/sign-in"))
    click = {"tabId": tab, "selector": "#signed-in", "timeout": 1}  # there only once the user signed in
    async with over_http(plain) as session:
        started = time.monotonic()
        stopped = await call(session, "browser_click", click)
        assert time.monotonic() - started < 25  # the command's own timeout, not the node's 30 s
        assert (stopped["state"]["reason"], stopped["state"]["evidence"]) == ("sign_in", "password_field")
        assert stopped["state"]["failure"]["code"] == "not_found"
        assert act(plain, {"action": "click", "tabId": tab, "selector": "#sign-in"})["status"] == "ok"  # the user
        done = await call(session, "browser_resume", {"call": stopped["call"], "resume_token": stopped["resume_token"],
                                                      "wait": 5})
        assert done["status"] == "ok" and "resume_token" not in done, done
        assert len(audit_of(plain, "click", selector="#signed-in")) == 2
