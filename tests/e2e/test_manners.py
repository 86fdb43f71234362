"""The gateway's manners with the SDK's own client over stdio: progress notifications per finished
step, nothing left behind by a client that exits mid-call, a tool list that follows the bridge's
capability groups, and a first answer that does not wait for Chromium."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import anyio
import pytest

from tests.e2e.clients import call, open_tab, over_stdio, process_tree, processes, sdk_served
from tests.e2e.test_stdio import AUTOMATION, CORE
from tests.integration.serving import Served
from tests.site import TestSite

pytestmark = pytest.mark.anyio


def _embedded_bridge() -> tuple[set[int], Path]:
    """The process tree of the embedded bridge of this test's ``kitsune mcp``, and its temp folder."""
    running = processes()
    gateways = {pid for pid, (parent, cmdline) in running.items() if parent == os.getpid() and " mcp" in cmdline}
    bridges = [pid for pid, (parent, cmdline) in running.items()
               if parent in gateways and "kitsune.cli serve" in cmdline]
    assert len(bridges) == 1, bridges
    folder = Path(running[bridges[0]][1].split("--state-dir ")[1].split()[0]).parent
    assert folder.name.startswith("kitsune-mcp-") and folder.is_dir()
    return process_tree(bridges[0], running), folder


async def test_a_batch_sends_a_progress_notification_per_finished_step(plain: Served, site: TestSite) -> None:
    tab = open_tab(plain, site.url("/text"))
    steps = [{"action": "navigate", "url": site.url("/wait?ms=800")}, {"action": "waitFor", "selector": "#late"},
             {"action": "navigate", "url": site.url("/wait?ms=800")}, {"action": "waitFor", "selector": "#late"},
             {"action": "pageText", "selector": "#late"}]
    heard: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, total, message))

    async with over_stdio(plain) as session:
        body = await call(session, "browser_batch", {"tabId": tab, "commands": steps}, progress_callback=on_progress)
    assert body["status"] == "ok", body
    finished = [(progress, total) for progress, total, _ in heard if progress == int(progress)]
    assert finished == [(n, 5) for n in range(1, 6)], heard
    assert all(a[0] < b[0] for a, b in itertools.pairwise(heard))  # always above the last


async def test_a_client_that_exits_mid_call_leaves_no_process_and_no_folder(site: TestSite) -> None:
    started = anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        started.set()  # the first step finished: the call runs

    async with anyio.create_task_group() as group, over_stdio(None, caps="core,automation") as session:
        opened = await call(session, "browser_tabs", {"op": "new", "url": site.url("/text")})
        assert opened["status"] == "ok", opened
        batch = {"commands": [{"action": "navigate", "url": site.url("/wait?ms=100")},
                              {"action": "waitFor", "selector": "#never", "timeout": 60}]}
        group.start_soon(lambda: session.call_tool("browser_batch", batch, progress_callback=on_progress))
        await started.wait()
        tree, folder = _embedded_bridge()
        commands = " ".join(processes()[pid][1] for pid in tree)
        assert "nats-server" in commands and "chrom" in commands
        group.cancel_scope.cancel()  # the client leaves: its stdin closes, the call still runs
    with anyio.fail_after(3):  # the bound: nothing left 3 s after the client exits
        while tree & set(processes()) or folder.exists():
            await anyio.sleep(0.1)


async def test_with_a_bridge_the_tools_follow_its_caps_narrowed_by_kitsune_caps_never_widened(
        plain: Served, core_only: Served) -> None:
    async def listed(served: Served, caps: str) -> set[str]:
        async with over_stdio(served, caps=caps) as session:
            return {tool.name for tool in (await session.list_tools()).tools}

    assert await listed(plain, "") == CORE | AUTOMATION  # no KITSUNE_CAPS: what the bridge offers
    assert await listed(plain, "automation") == AUTOMATION
    assert await listed(core_only, "") == CORE
    assert await listed(core_only, "core,automation") == CORE  # never past the bridge


async def test_the_first_tool_list_is_answered_while_chromium_is_still_starting(
        site: TestSite, tmp_path: Path) -> None:
    launched, go = tmp_path / "launched", tmp_path / "go"
    chromium = tmp_path / "chromium"
    chromium.write_text(f'#!/bin/sh\ntouch "{launched}"\nwhile [ ! -e "{go}" ]; do sleep 0.05; done\n'
                        'exec /usr/bin/chromium "$@"\n')
    chromium.chmod(0o755)
    events: list[str] = []
    async with over_stdio(None, caps="core", KITSUNE_CHROMIUM=str(chromium)) as session:
        events.append("initialized")
        names = {tool.name for tool in (await session.list_tools()).tools}
        events.append("listed")
        assert names == CORE
        go.touch()  # Chromium can start from here on: the list was answered before it could
        events.append("gate opened")
        opened = await call(session, "browser_tabs", {"op": "new", "url": site.url("/text")})
        assert opened["status"] == "ok", opened
        events.append("first call answered")
    assert launched.exists()  # the bridge did start Chromium, through the gate
    assert events == ["initialized", "listed", "gate opened", "first call answered"]


_HELD_SDK = '''import importlib.abc, pathlib, sys, time
class _Gate(importlib.abc.MetaPathFinder):
    """Holds the first import of the MCP SDK's types until the test opens the gate."""
    def find_spec(self, name, path=None, target=None):
        if name == "mcp_types":
            sys.meta_path.remove(self)
            pathlib.Path({held!r}).touch()
            while not pathlib.Path({go!r}).exists():
                time.sleep(0.05)
        return None
sys.meta_path.insert(0, _Gate())
'''


async def test_a_tool_list_answered_before_the_sdk_loaded_is_the_sdk_s_and_the_session_carries_on(
        site: TestSite, tmp_path: Path) -> None:
    held, go = tmp_path / "held", tmp_path / "go"
    (tmp_path / "sitecustomize.py").write_text(_HELD_SDK.format(held=str(held), go=str(go)))
    with anyio.fail_after(120):  # a front that does not answer would leave the client waiting at the gate
        async with over_stdio(None, caps="core,automation", PYTHONPATH=str(tmp_path)) as session:
            before = (await session.list_tools()).tools  # answered while the SDK cannot load: the gate is shut
            opened = await call(session, "browser_tabs", {"op": "new", "url": site.url("/text")})
            assert opened["status"] == "ok", opened  # the front's call, which the SDK is loaded after
            while not held.exists():  # the gateway reaches the gate: it had not loaded the SDK, and is held
                await anyio.sleep(0.05)
            go.touch()
            read = await call(session, "browser_page_text", {}, progress_callback=sdk_served)
            assert read["status"] == "ok", read  # the SDK took over and reads the tab the front's call opened
            after = (await session.list_tools()).tools
    assert {tool.name for tool in before} == CORE | AUTOMATION
    assert [tool.model_dump() for tool in before] == [tool.model_dump() for tool in after]
