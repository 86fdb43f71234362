"""``kitsune mcp`` over stdio with the SDK's own client: against a live node, and with its embedded bridge."""

from __future__ import annotations

import os
import time
from pathlib import Path

import anyio
import pytest

from messages.commands import ACTIONS
from tests.e2e.clients import act, call, open_tab, over_stdio, process_tree, processes, sdk_served
from tests.integration.serving import Served
from tests.site import TestSite

pytestmark = pytest.mark.anyio

CORE = {"browser_snapshot",
        "browser_resume", "browser_navigate", "browser_click", "browser_type", "browser_fill_form", "browser_select",
        "browser_press", "browser_page_text", "browser_find", "browser_screenshot", "browser_tabs", "browser_sessions",
        "browser_ask_user", "browser_live_view", "browser_site_tools", "browser_call_site_tool", "browser_cdp",
        "browser_task_create", "browser_task_get", "browser_task_checkpoint", "browser_task_complete",
        "browser_task_takeover"}
AUTOMATION = {"browser_batch", "browser_parallel", "browser_workflow", "browser_resume"}


async def test_the_tool_list_shows_only_the_enabled_groups_with_input_schemas_from_the_command_language(
        plain: Served) -> None:
    async with over_stdio(plain, caps="core") as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == CORE
        click = tools["browser_click"].input_schema
        assert "required" not in click  # a selector or a ref: the bridge checks that exactly one is given
        assert {"selector", "ref", "tabId", "button", "clickCount", "confirm_token", "snapshot"} == set(
            click["properties"])  # timeout: named once in the instructions, still taken
        assert click["properties"]["clickCount"]["type"] == "integer"  # from the command schema, made short
        resume = tools["browser_resume"].input_schema
        assert resume["required"] == ["call", "resume_token"] and {"observed", "wait"} <= set(resume["properties"])
        assert "confirm_token" not in tools["browser_page_text"].input_schema["properties"]
        refused = await call(session, "browser_batch", {"commands": [{"action": "title"}]})
        assert refused["code"] == "capability_disabled"

    async with over_stdio(plain, caps="core,automation") as session:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(tools) == CORE | AUTOMATION
        batch = tools["browser_batch"].input_schema  # short: the whole grammar is the resource
        commands = batch["properties"]["commands"]
        assert commands["items"] == {"type": "object"}
        assert all(f" {action}(" in commands["description"] for action in ACTIONS)  # every action, with its parameters
        assert "kitsune://schema" in commands["description"]


async def test_a_bad_batch_is_the_bridge_s_refusal_naming_the_command_with_nothing_sent(
        plain: Served, site: TestSite) -> None:
    tab = open_tab(plain, site.url("/clicks"))
    async with over_stdio(plain) as session:
        refused = await call(session, "browser_batch", {"tabId": tab, "commands": [
            {"action": "click", "selector": "#hit"}, {"action": "click", "selector": "#hit", "clickCount": 9}]})
        assert refused["code"] == "invalid_parameter" and refused["state"]["path"] == "1", refused
        assert "clickCount" in refused["error"] and "call" not in refused
        timed = await call(session, "browser_batch", {"tabId": tab, "timeout": "soon",
                                                      "commands": [{"action": "click", "selector": "#hit"}]})
        assert timed["code"] == "invalid_parameter" and "timeout" in timed["error"], timed
    assert site.count("POST /clicks/hit") == 0


async def test_a_batch_and_its_resume_never_send_a_write_twice(plain: Served, site: TestSite) -> None:
    tab = open_tab(plain, site.url("/clicks"))
    async with over_stdio(plain) as session:
        body = await call(session, "browser_batch", {"tabId": tab, "commands": [
            {"action": "click", "selector": "#hit"},
            {"action": "waitFor", "selector": "#local-count:text-is('1')", "timeout": 0.5},
            {"action": "pageText", "selector": "#total"}]})
        assert [p["status"] for p in body["progress"]] == ["ok", "failed", "skipped"]
        assert site.wait_for_count("POST /clicks/hit") == 1
        call_id, token = body["call"], body["resume_token"]

        wrong = await call(session, "browser_resume", {"call": call_id, "resume_token": token[::-1]})
        assert wrong["code"] == "resume_token_invalid"
        assert act(plain, {"action": "click", "tabId": tab, "selector": "#local"})["status"] == "ok"  # the user

        resumed = await call(session, "browser_resume", {"call": call_id, "resume_token": token})
        assert resumed["status"] == "ok", resumed
        assert resumed["progress"][0]["resumed"] == "kept"
        assert resumed["results"][2]["text"] == "1"
        assert "resume_token" not in resumed
    time.sleep(0.3)
    assert site.count("POST /clicks/hit") == 1


async def test_without_elicitation_a_hold_gives_a_confirm_token_and_a_resume_checks_it_once(
        asking: Served, site: TestSite) -> None:
    tab = open_tab(asking, site.url("/clicks"))
    async with over_stdio(asking) as session:
        held = await call(session, "browser_click", {"tabId": tab, "selector": "#hit"})
        assert (held["code"], held["status"]) == ("needs_user", "held")
        assert held["state"]["approval"] == "confirm_token" and held["state"]["confirm_token"]
        assert isinstance(held["call"], int) and held["resume_token"] and "confirm_token=" in held["hint"]

        again = await call(session, "browser_resume", {"call": held["call"], "resume_token": held["resume_token"]})
        assert (again["code"], again["call"]) == ("needs_user", held["call"])
        assert again["resume_token"] != held["resume_token"]
        assert again["state"]["confirm_token"] != held["state"]["confirm_token"]
        stale = await call(session, "browser_resume", {"call": held["call"], "resume_token": held["resume_token"]})
        assert stale["code"] == "resume_token_invalid"
        observed = await call(session, "browser_resume", {"call": held["call"], "resume_token": again["resume_token"],
                                                          "observed": {"0": "applied"}})
        assert observed["code"] == "observed_invalid"
        assert site.count("POST /clicks/hit") == 0

        done = await call(session, "browser_click", {"tabId": tab, "selector": "#hit",
                                                     "confirm_token": again["state"]["confirm_token"]})
        assert done["status"] == "ok", done
        assert site.wait_for_count("POST /clicks/hit") == 1
        gone = await call(session, "browser_resume", {"call": held["call"], "resume_token": again["resume_token"]})
        assert gone["code"] == "checkpoint_not_found"  # the hold was answered by the call itself
    time.sleep(0.3)
    assert site.count("POST /clicks/hit") == 1


async def test_type_with_submit_held_at_its_enter_presses_enter_alone_with_the_enter_token(
        asking: Served, site: TestSite) -> None:
    tab = open_tab(asking, site.url("/form"))
    arguments = {"tabId": tab, "selector": "#name", "text": "Ada", "submit": True}
    async with over_stdio(asking) as session:
        typing = await call(session, "browser_type", arguments)
        assert typing["state"]["action"] == "type"
        enter = await call(session, "browser_type", {**arguments, "confirm_token": typing["state"]["confirm_token"]})
        assert enter["state"]["action"] == "press" and enter["code"] == "needs_user"
        assert [s["status"] for s in enter["steps"]] == ["ok", "held"]
        assert site.count("POST /form") == 0
        done = await call(session, "browser_type", {**arguments, "confirm_token": enter["state"]["confirm_token"]})
        assert done["status"] == "ok", done
        assert "steps" not in done  # both requests ok: the page's diff says what they did
    assert site.wait_for_count("POST /form") == 1
    assert site.last_form["name"] == ["Ada"]  # typed once


async def test_without_a_bridge_it_runs_an_embedded_one_for_its_lifetime_and_leaves_nothing_behind(
        site: TestSite) -> None:
    async with over_stdio(None, caps="core") as session:
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert names == CORE
        # the first call is the front's while the SDK loads; one with a progressToken is the SDK's: it reads the
        # tab the front's opened (the same bridge client, token and MCP session)
        opened = await call(session, "browser_tabs", {"op": "new", "url": site.url("/text")})
        assert opened["status"] == "ok", opened
        text = await call(session, "browser_page_text", {"selector": "#heading"}, progress_callback=sdk_served)
        assert text["text"] == "Known text"
        running = processes()
        ours = process_tree(os.getpid(), running)  # not another suite's, on a shared machine
        bridges = [pid for pid, (_, cmdline) in running.items()
                   if pid in ours and "kitsune.cli serve" in cmdline and "kitsune-mcp-" in cmdline]
        assert len(bridges) == 1
        tree = process_tree(bridges[0], running)
        commands = " ".join(running[pid][1] for pid in tree)
        assert "nats-server" in commands and "chrom" in commands
        state_dir = Path(running[bridges[0]][1].split("--state-dir ")[1].split()[0]).parent
        assert state_dir.is_dir()
    with anyio.fail_after(20):
        while tree & set(processes()):
            await anyio.sleep(0.2)
    assert not state_dir.exists()
    assert os.path.basename(str(state_dir)).startswith("kitsune-mcp-")
