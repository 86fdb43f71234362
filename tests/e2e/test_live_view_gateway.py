"""Live View through the MCP gateway, with the SDK's own client against live nodes: ``browser_live_view``,
the links in needs_user answers (approval holds, sign-in stops, browser_ask_user), none for an agent
whose policy allows no Live View, a person's hand-back (the Live View WebSocket's ``done``) that
wakes a waiting resume and answers an open ask prompt, and ``control`` under ask-before-act: view-only by
default, a link that acts only once the user approved it (in the client's prompt, or by its confirm token)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest
from mcp import ClientSession
from mcp.shared.memory import create_client_server_memory_streams
from websockets.asyncio.client import connect

from mcp_gateway import _direct
from mcp_gateway._bridge import Bridge
from mcp_gateway._caller import Caller
from mcp_gateway.server import Gateway
from tests.e2e.clients import Asker, act, call, open_tab, over_http, over_stdio
from tests.integration.serving import TOKENS, Served, serve
from tests.nats_access import NatsAccess
from tests.site import TestSite

pytestmark = pytest.mark.anyio

_ORDER = {"selector": "#order", "timeout": 1}
"""On /account, there only once the person signed in: before, a stop the sign-in page resolves."""


@pytest.fixture(scope="module")
def viewing(tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess) -> Iterator[Served]:
    """A node where alice may open Live Views and bob may not (his agent entry's ``live_view: false``)."""
    agents = [{"name": "alice", "token": TOKENS["alice"]},
              {"name": "bob", "token": TOKENS["bob"], "live_view": False}]
    running = serve(tmp_path_factory.mktemp("viewing"), nats_access,
                    {"caps": ["core", "automation"], "agents": agents})
    yield running
    assert running.stop() == 0


def _assert_link(link: dict[str, Any], served: Served, tab: int) -> str:
    """A link to ``tab`` on the node the agent reached, valid 5 minutes; its token."""
    assert link["tabId"] == tab and link["expires_in"] == 300.0, link
    prefix = f"{served.base}/live/{tab}#t="
    assert link["url"].startswith(prefix), (link["url"], prefix)
    token: str = link["url"][len(prefix):]
    assert len(token) >= 32
    return token


async def _hand_back(url: str) -> None:
    """What a person does on the Live View page: take control of its tab, then press "Done — hand back"."""
    page, token = url.split("#t=", 1)
    async with connect(page.replace("http://", "ws://", 1) + "/ws") as socket:
        await socket.send(json.dumps({"type": "hello", "token": token}))
        seen = [json.loads(await socket.recv())["type"]]
        assert seen == ["ready"], seen
        await socket.send(json.dumps({"type": "done"}))
        with anyio.fail_after(10):
            while (message := json.loads(await socket.recv()))["type"] != "ended":
                pass
    assert message["code"] == "handed_back", message


async def _opened_controls(url: str) -> bool:
    """Whether the Live View that ``url`` opens controls its tab (its ``ready`` message says); then it leaves."""
    page, token = url.split("#t=", 1)
    async with connect(page.replace("http://", "ws://", 1) + "/ws") as socket:
        await socket.send(json.dumps({"type": "hello", "token": token}))
        with anyio.fail_after(10):
            ready = json.loads(await socket.recv())
    assert ready["type"] == "ready", ready
    return bool(ready["control"])


def _sign_in(served: Served, tab: int) -> None:
    """The person signs in on /account (through the API here: the WebSocket's input is the bridge's to test)."""
    for command in [{"action": "fill", "selector": "#username", "value": "ada"},
                    {"action": "fill", "selector": "#password", "value": "pass-word"},
                    {"action": "click", "selector": "#sign-in"}]:
        assert act(served, {**command, "tabId": tab})["status"] == "ok"


@asynccontextmanager
async def _in_process(served: Served, agent: str = "alice") -> AsyncIterator[ClientSession]:
    """An MCP session with a gateway of this process (so its constants can be patched) over the node's API."""
    gateway = Gateway(frozenset({"core", "automation"}))
    async with httpx.AsyncClient(base_url=served.base) as http, \
            create_client_server_memory_streams() as ((client_read, client_write), (server_read, server_write)):
        server = gateway.server(lambda ctx: Caller(agent, Bridge(http, TOKENS[agent]), ctx))
        async with anyio.create_task_group() as group:
            group.start_soon(server.run, server_read, server_write, server.create_initialization_options())
            async with ClientSession(client_read, client_write) as session:
                await session.initialize()
                yield session
            group.cancel_scope.cancel()


async def test_browser_live_view_answers_a_link_to_the_current_tab_on_the_node_reached(
        viewing: Served, site: TestSite) -> None:
    tab = open_tab(viewing, site.url("/account"))
    async with over_http(viewing) as session:
        listed = {tool.name: tool.annotations for tool in (await session.list_tools()).tools}["browser_live_view"]
        assert listed is None or not listed.read_only_hint  # its link may act: a person writes through it
        linked = await call(session, "browser_live_view", {})
        assert linked["ok"] is True and {"url", "expires_in", "tabId"} <= set(linked)
        over_mcp = _assert_link(linked, viewing, tab)
        unknown = await call(session, "browser_live_view", {"tabId": 999_999})
        assert unknown["code"] == "unknown_tab"
        devtools = await call(session, "browser_live_view", {"mode": "devtools"})
        assert (devtools["mode"], devtools["control"]) == ("devtools", True)
        assert f"/live/{tab}/devtools#t=" in devtools["url"]
    async with over_stdio(viewing, caps="core") as session:
        named = await call(session, "browser_live_view", {"tabId": tab})
        assert _assert_link(named, viewing, tab) != over_mcp  # a link of its own each time
    await _hand_back(named["url"])  # it opens the tab, and the hand-back is counted
    with viewing.client() as client:
        counted = client.get("/api/live/handbacks", params={"tabId": tab}).json()
    assert (counted["handbacks"], counted["held"]) == (1, False)
    assert site.count("POST /sign-in") == 0


async def test_a_hold_for_approval_carries_a_link_in_the_prompt_and_in_its_stops(
        asking: Served, site: TestSite) -> None:
    tab = open_tab(asking, site.url("/clicks"))
    async with over_http(asking) as session:  # no prompt: the hold's confirm token, and a link
        held = await call(session, "browser_click", {"tabId": tab, "selector": "#hit"})
        assert (held["code"], held["status"]) == ("needs_user", "held")
        first = _assert_link(held["live_view"], asking, tab)
        assert held["live_view"]["reason"] == "approval" and held["live_view"]["control"] is False
        assert "open this link to see tab" in held["hint"]  # view-only under ask_before_act: to look first
        again = await call(session, "browser_resume", {"call": held["call"], "resume_token": held["resume_token"]})
        assert again["code"] == "needs_user" and _assert_link(again["live_view"], asking, tab) != first
    asker = Asker("decline")
    async with over_http(asking, asker=asker) as session:
        declined = await call(session, "browser_click", {"tabId": tab, "selector": "#hit"})
        assert declined["state"]["decision"] == "declined"
        _assert_link(declined["live_view"], asking, tab)
    assert declined["live_view"]["url"] in asker.messages[0]  # the person could look before deciding
    assert site.count("POST /clicks/hit") == 0


async def test_a_sign_in_stop_carries_a_link_unless_the_agent_s_policy_allows_no_live_view(
        viewing: Served, site: TestSite) -> None:
    tabs = {agent: open_tab(viewing, site.url("/account"), agent) for agent in ("alice", "bob")}
    async with over_http(viewing) as session:
        stopped = await call(session, "browser_click", {"tabId": tabs["alice"], **_ORDER})
        assert (stopped["code"], stopped["state"]["reason"]) == ("needs_user", "sign_in")
        _assert_link(stopped["live_view"], viewing, tabs["alice"])
        asked = await call(session, "browser_ask_user", {"question": "Please sign in", "reason": "sign_in"})
        assert asked["resume_token"] and asked["live_view"]["reason"] == "sign_in"
        _assert_link(asked["live_view"], viewing, tabs["alice"])
        batch = await call(session, "browser_batch", {"tabId": tabs["alice"], "commands": [
            {"action": "click", **_ORDER}]})
        _assert_link(batch["live_view"], viewing, tabs["alice"])  # the bridge's own, passed on
    async with over_http(viewing, agent="bob") as session:
        stopped = await call(session, "browser_click", {"tabId": tabs["bob"], **_ORDER})
        assert stopped["code"] == "needs_user" and stopped["resume_token"]
        assert "live_view" not in stopped and "open this link" not in stopped["hint"]
        asked = await call(session, "browser_ask_user", {"question": "Please sign in", "reason": "sign_in"})
        assert asked["resume_token"] and "live_view" not in asked
        refused = await call(session, "browser_live_view", {})
        assert refused["code"] == "live_view_disabled"
    assert site.count("POST /account/order") == 0


async def test_a_hand_back_wakes_a_resume_waiting_on_the_sign_in_page(
        viewing: Served, site: TestSite, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_direct, "POLL_EVERY", 60.0)  # only a hand-back can make it look again within the wait
    tab = open_tab(viewing, site.url("/account"))
    async with _in_process(viewing) as session:
        stopped = await call(session, "browser_click", {"tabId": tab, **_ORDER})
        link = stopped["live_view"]
        _assert_link(link, viewing, tab)
        handed: list[float] = []

        async def person() -> None:
            await anyio.sleep(1.0)  # the resume looked once, and waits
            await anyio.to_thread.run_sync(_sign_in, viewing, tab)
            await anyio.sleep(1.0)  # signed in: nothing looks at the page until the hand-back
            await _hand_back(link["url"])
            handed.append(time.monotonic())

        started = time.monotonic()
        async with anyio.create_task_group() as group:
            group.start_soon(person)
            done = await call(session, "browser_resume", {"call": stopped["call"],
                                                          "resume_token": stopped["resume_token"], "wait": 40})
        ended = time.monotonic()
    assert done["status"] == "ok" and "resume_token" not in done, done
    assert handed and ended - handed[0] < 5 and ended - started < 15  # a poll alone would look after 40 s
    assert site.count("POST /sign-in") == 1 and site.wait_for_count("POST /account/order") == 1


async def test_a_hand_back_answers_an_open_ask_prompt(viewing: Served, site: TestSite) -> None:
    tab = open_tab(viewing, site.url("/account"))
    asker = Asker("hang")
    async with over_http(viewing, asker=asker) as session:
        async def person() -> None:
            with anyio.fail_after(15):
                while not asker.messages:
                    await anyio.sleep(0.05)
            url = asker.messages[0].split("Open ", 1)[1].split(" ", 1)[0]
            _assert_link({"url": url, "tabId": tab, "expires_in": 300.0}, viewing, tab)
            await _hand_back(url)

        started = time.monotonic()
        async with anyio.create_task_group() as group:
            group.start_soon(person)
            answered = await call(session, "browser_ask_user", {"question": "Please sign in", "reason": "sign_in",
                                                                "tabId": tab, "wait": 60})
        assert time.monotonic() - started < 20
    assert answered == {"ok": True, "answer": "done", "via": "live_view", "reason": "sign_in", "tabId": tab}


async def test_under_ask_before_act_a_link_acts_only_once_the_user_approved_it(asking: Served, site: TestSite) -> None:
    tab = open_tab(asking, site.url("/form"))
    async with over_http(asking) as session:  # no prompt: the hold's confirm token, which the agent shows the user
        listed = {t.name: t.input_schema for t in (await session.list_tools()).tools}["browser_live_view"]
        assert listed["properties"]["control"]["type"] == "boolean" and "confirm_token" in listed["properties"]
        viewing = await call(session, "browser_live_view", {"tabId": tab})
        assert viewing["control"] is False and not await _opened_controls(viewing["url"])
        held = await call(session, "browser_live_view", {"tabId": tab, "control": True})
        assert (held["code"], held["status"], held["state"]["approval"]) == ("needs_user", "held", "confirm_token")
        assert "url" not in held and "resume_token" not in held  # a link request keeps no checkpoint
        approved = await call(session, "browser_live_view", {"tabId": tab, "control": True,
                                                             "confirm_token": held["state"]["confirm_token"]})
        assert approved["control"] is True and await _opened_controls(approved["url"])
    asker = Asker("decline", "accept")
    async with over_stdio(asking, asker) as session:  # a prompt: asked there, sent again once approved
        declined = await call(session, "browser_live_view", {"tabId": tab, "control": True})
        assert declined["state"].get("decision") == "declined", declined
        assert "confirm_token" not in declined["state"] and "url" not in declined
        linked = await call(session, "browser_live_view", {"tabId": tab, "control": True})
        assert linked["control"] is True and await _opened_controls(linked["url"])
    assert all("Live View link that acts" in message and f"tab {tab}" in message for message in asker.messages)
    assert len(asker.messages) == 2 and site.count("POST /form") == 0
