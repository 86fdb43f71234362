"""A task survives an MCP client's loss: the SDK's own client over stdio (``kitsune mcp --bridge``) against a
live node whose leases last 3 s. Client process 1 creates a task on its tab and starts a slow write; it is
killed (SIGKILL) mid-call. Client process 2 of the same agent is told of the task as it connects, lists it,
waits for the lease to expire, takes it over, and gets the checkpoint's context, the tab re-observed, and
the call in flight as unknown (never ok); the site saw the write once. Its own heartbeats then keep it.
Over streamable HTTP the MCP session owns its tasks while it lives; on an asking node a takeover is held
for approval (a confirm token, or a prompt) as any write."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.e2e.clients import Asker, call, open_tab, over_stdio, processes
from tests.integration.serving import TOKENS, Served, serve
from tests.nats_access import NatsAccess
from tests.site import TestSite

pytestmark = pytest.mark.anyio

LEASE_TTL = 3
_SLOW_WRITE = {"action": "waitForResult", "timeout": 60, "code": "fetch('/slow', {method: 'POST'}).then(() => true)"}
"""A write the site holds (hold_slow) until the test lets it go: the call is in flight meanwhile."""


@pytest.fixture(scope="module")
def leasing(tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess) -> Iterator[Served]:
    """A node whose task leases last 3 s."""
    running = serve(tmp_path_factory.mktemp("leasing"), nats_access,
                    {"caps": ["core", "automation"], "tasks": {"lease_ttl": LEASE_TTL}})
    yield running
    assert running.stop() == 0


def _gateway_pid(served: Served) -> int:
    """The pid of the one ``kitsune mcp`` this test process runs against ``served``."""
    found = [pid for pid, (parent, cmdline) in processes().items()
             if parent == os.getpid() and f"mcp --bridge {served.base}" in cmdline]
    assert len(found) == 1, found
    return found[0]


async def _past_the_lease(view: dict[str, Any]) -> None:
    """Until the lease ``view`` gave has ended (its ``lease_expires``, on this machine's clock): a task still its
    owner's after it was renewed meanwhile, which only heartbeats do when the session sends nothing else."""
    await anyio.sleep(max(0.0, view["lease_expires"] - time.time()) + 0.1)


async def _task(session: ClientSession, task: str) -> dict[str, Any]:
    got = await call(session, "browser_task_get", {"taskId": task})
    assert got.get("ok"), got
    view: dict[str, Any] = got["task"]
    return view


async def _lose_the_owner_mid_call(served: Served, site: TestSite, tab: int) -> tuple[str, str]:
    """Client 1 creates the task, checkpoints it, starts the slow write and is killed meanwhile; the task's
    id and the summary it checkpointed."""
    summary = "Item form opened; submitting it slowly next"
    async with over_stdio(served) as first:
        created = await call(first, "browser_task_create", {"goal": "Submit the slow form once", "tabs": [tab]})
        assert created["task"]["state"] == "owner" and created["task"]["lease_ttl"] == LEASE_TTL, created
        task = created["task"]["id"]
        checkpointed = await call(first, "browser_task_checkpoint", {"taskId": task, "summary": summary})
        assert checkpointed["task"]["state"] == "owner", checkpointed
        await _past_the_lease(checkpointed["task"])  # the gateway's heartbeats keep it meanwhile
        assert (await _task(first, task))["state"] == "owner"
        gateway = _gateway_pid(served)
        failures: list[BaseException] = []

        async def slow_write() -> None:
            try:
                await first.call_tool("browser_batch", {"tabId": tab, "commands": [_SLOW_WRITE]})
            except Exception as e:  # the gateway dies under it
                failures.append(e)

        async with anyio.create_task_group() as group:
            group.start_soon(slow_write)
            await anyio.to_thread.run_sync(lambda: site.wait_for_count("POST /slow", 1, timeout=30))
            os.kill(gateway, signal.SIGKILL)  # mid-call: no goodbye, no last heartbeat
        assert failures, "the call answered although its gateway was killed"
    return task, summary


async def test_a_task_survives_its_client_s_death_and_a_new_client_takes_it_over(
        leasing: Served, site: TestSite) -> None:
    tab = open_tab(leasing, site.url("/slow"))
    site.hold_slow()
    try:
        task, summary = await _lose_the_owner_mid_call(leasing, site, tab)
    finally:
        site.release_slow()  # the page's write ends now: the bridge saw the call through, its old session did not
    async with over_stdio(leasing) as second:
        assert second.instructions is not None and task in second.instructions  # told of it on connect
        listed = await call(second, "browser_task_get", {})
        (mine,) = [view for view in listed["tasks"] if view["id"] == task]
        assert mine["state"] in ("follower", "expired"), mine
        with anyio.fail_after(LEASE_TTL * 5):
            while (await _task(second, task))["state"] != "expired":
                await anyio.sleep(0.5)
        taken = await call(second, "browser_task_takeover", {"taskId": task})
        assert taken.get("ok") and taken["task"]["state"] == "owner", taken
        checkpoint = taken["task"]["checkpoint"]
        assert checkpoint["goal"] == "Submit the slow form once" and checkpoint["summary"] == summary
        assert checkpoint["page"]["url"] == site.url("/slow")
        (observed,) = taken["tabs"]
        assert observed["tabId"] == tab and observed["url"] == site.url("/slow") and observed["needs_user"] is False
        slow = {step["call"] for step in checkpoint["steps"] if step["action"] == "waitForResult"}
        assert {lost["call"] for lost in taken["in_flight"]} == slow, taken  # the batch client 1 never heard end
        assert all(lost["status"] == "unknown" and lost["reason"] == "session lost mid-execution"
                   for lost in taken["in_flight"]), taken["in_flight"]
        assert site.count("POST /slow") == 1  # the takeover sent nothing again
        await _past_the_lease(taken["task"])  # its own heartbeats keep it now
        assert (await _task(second, task))["state"] == "owner"
        done = await call(second, "browser_task_complete", {"taskId": task, "summary": "Seen submitted once"})
        assert done["task"]["state"] == "completed", done


def _state(served: Served, task: str, session: str | None = None) -> str:
    """The task's state as the agent's plain API client sees it (as ``session``, or as none: never its owner)."""
    with served.client() as client:
        headers = {"X-Kitsune-Session": session} if session else {}
        state: str = client.get(f"/api/tasks/{task}", headers=headers).json()["task"]["state"]
        return state


@asynccontextmanager
async def _over_http(served: Served) -> AsyncIterator[tuple[ClientSession, list[str]]]:
    """An MCP session over streamable HTTP as alice, and the Mcp-Session-Id the node gave it (once known)."""
    given: list[str] = []

    async def heard(response: httpx2.Response) -> None:
        if "mcp-session-id" in response.headers and not given:
            given.append(response.headers["mcp-session-id"])

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS['alice']}"}, timeout=60,
                                  event_hooks={"response": [heard]}) as http, \
            streamable_http_client(served.base + "/mcp", http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session, given


async def test_an_http_session_owns_its_tasks_while_it_lives_and_lets_their_leases_go_when_it_closes(
        leasing: Served, site: TestSite) -> None:
    tab = open_tab(leasing, site.url("/text"))
    async with _over_http(leasing) as (first, given):
        assert first.instructions is not None and "Your agent" in first.instructions  # the bridge answered
        created = await call(first, "browser_task_create", {"goal": "Read the text", "tabs": [tab]})
        task = created["task"]["id"]
        assert created["task"]["owner"] == "you" and _state(leasing, task, given[0]) == "owner"  # its Mcp-Session-Id
        await _past_the_lease(created["task"])  # no request meanwhile: its heartbeats keep it
        assert _state(leasing, task) == "follower" and (await _task(first, task))["state"] == "owner"
    with anyio.fail_after(LEASE_TTL * 4):  # the session closed: no more heartbeats
        while _state(leasing, task) != "expired":
            await anyio.sleep(0.5)
    async with _over_http(leasing) as (second, _):
        assert second.instructions is not None and f'{task} "Read the text" (expired)' in second.instructions
        taken = await call(second, "browser_task_takeover", {"taskId": task})
        assert taken["task"]["state"] == "owner" and _state(leasing, task, given[0]) == "follower", taken
        assert taken["in_flight"] == [] and taken["tabs"][0]["url"] == site.url("/text")
        assert (await call(second, "browser_task_complete", {"taskId": task}))["task"]["state"] == "completed"


async def test_a_takeover_is_held_by_ask_before_act_and_goes_on_once_approved(asking: Served, site: TestSite) -> None:
    tab = open_tab(asking, site.url("/text"))
    async with over_stdio(asking) as first:
        task = (await call(first, "browser_task_create", {"goal": "Read it", "tabs": [tab]}))["task"]["id"]
    async with over_stdio(asking) as second:  # no prompt: the hold's confirm token comes back
        held = await call(second, "browser_task_takeover", {"taskId": task, "force": True})
        assert held["code"] == "needs_user" and held["state"]["approval"] == "confirm_token", held
        assert _state(asking, task) == "follower"  # nothing taken yet
        taken = await call(second, "browser_task_takeover", {"taskId": task, "force": True,
                                                             "confirm_token": held["state"]["confirm_token"]})
        assert taken["task"]["state"] == "owner", taken
    asker = Asker("accept")
    async with over_stdio(asking, asker) as third:  # a prompt: the approval there, the takeover sent once more
        taken = await call(third, "browser_task_takeover", {"taskId": task, "force": True})
        assert taken["task"]["state"] == "owner", taken
        assert len(asker.messages) == 1 and task in asker.messages[0]
        await call(third, "browser_task_complete", {"taskId": task})
