"""The task tools: ``browser_task_create`` (or, with ``fork``, a fork of a task), ``_get``, ``_checkpoint``,
``_complete`` and ``_takeover`` over ``/api/tasks``.

A task has one owner session (the MCP session whose requests carry its id); every answer that
names this session a task's owner makes the session hold its lease (``_leases``), and one that
says it lost the task lets it go. A takeover held by ask-before-act is asked about as a tab
handoff is: in a prompt, or answered with its confirm token (it keeps no checkpoint).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from mcp_gateway._bridge import Bridge
from mcp_gateway._caller import Caller
from mcp_gateway._direct import DirectCalls, unkept_stop
from mcp_gateway._tools import TOOLS

__all__ = ["TASK_TOOLS", "open_tasks", "task_call"]

TASK_TOOLS = frozenset({"browser_task_create", "browser_task_get", "browser_task_checkpoint",
                        "browser_task_complete", "browser_task_takeover"})

_TIMEOUT = 30.0
"""Seconds the bridge gets to answer a task request (a checkpoint or a takeover observes tabs)."""


def _path(task: str, operation: str = "") -> str:
    return f"/api/tasks/{quote(task, safe='')}" + (f"/{operation}" if operation else "")


def _given(args: dict[str, Any], *names: str) -> dict[str, Any]:
    return {name: args[name] for name in names if args.get(name) is not None}


async def task_call(direct: DirectCalls, caller: Caller, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """One task tool's call; the leases the session holds follow its answer."""
    bridge, task = caller.bridge, args.get("taskId")
    if name == "browser_task_get":
        answer = await bridge.get(_path(task) if task else "/api/tasks", timeout=_TIMEOUT)
        if "error" not in answer and "tasks" in answer:
            answer = {"ok": True, **answer}
    elif name == "browser_task_takeover":
        answer = await _takeover(direct, caller, str(task), args)
    else:
        caller.sent = True
        if name == "browser_task_create" and isinstance(args.get("fork"), str):
            answer = await bridge.post(_path(args["fork"], "fork"), _given(args, "goal"), timeout=_TIMEOUT)
        elif name == "browser_task_create":
            answer = await bridge.post("/api/tasks", _given(args, "goal", "tabs", "resume", "scope"),
                                       timeout=_TIMEOUT)
        else:
            operation = name.removeprefix("browser_task_")
            answer = await bridge.post(_path(str(task), operation), _given(args, "summary", "messages"),
                                       timeout=_TIMEOUT)
    if caller.leases is not None:
        caller.leases.heard(bridge, answer, task if isinstance(task, str) else None)
    return answer


async def _takeover(direct: DirectCalls, caller: Caller, task: str, args: dict[str, Any]) -> dict[str, Any]:
    """A takeover, its hold (ask-before-act) asked about in a prompt or answered with its confirm token."""
    body = _given(args, "force")
    command = {"action": "takeOverTask", "taskId": task}  # what an approval prompt names

    async def resend(confirm: str) -> dict[str, Any]:
        return await caller.bridge.post(_path(task, "takeover"), {**body, "confirm_token": confirm},
                                        timeout=_TIMEOUT)

    caller.sent = True
    token = args.get("confirm_token")
    answer = await (resend(token) if isinstance(token, str) else
                    caller.bridge.post(_path(task, "takeover"), body, timeout=_TIMEOUT))
    outcome = await direct.settle(caller, TOOLS["browser_task_takeover"], command, answer, direct.approval_wait,
                                  resend=resend)
    if outcome.kind == "stop":
        return unkept_stop(caller, outcome, "A task takeover", "browser_task_takeover")
    return outcome.result


async def open_tasks(bridge: Bridge) -> list[dict[str, Any]] | None:
    """The agent's tasks (``GET /api/tasks``); None when the bridge does not say."""
    answer = await bridge.get("/api/tasks", timeout=5.0)
    tasks = answer.get("tasks")
    if "error" in answer or not isinstance(tasks, list):
        return None
    return [task for task in tasks if isinstance(task, dict)]
