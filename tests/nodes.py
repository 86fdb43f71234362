"""Calls on a started node from a thread that is not its loop's, through the API's own entry
(``Node.run_async``), for the tests and benchmarks that drive a node without HTTP."""

from __future__ import annotations

from typing import Any

from actors.call_actor import ResumeCall, RunCall
from bridge.node import Node
from core.calls import CallResponse
from core.checkpoints import WorkflowSource
from messages.commands import CallSpec
from messages.fleet import ResumeRequest


def run_call(node: Node, spec: CallSpec, workflow: WorkflowSource | None = None,
             agent: str | None = None) -> CallResponse:
    """Run a container call as ``POST /api/batch`` does: here, or on the node of its tabs."""
    return node.io.run(node.run_async(RunCall(spec, workflow, agent)))


def resume_call(node: Node, call: int, resume_token: str, observed: Any = None,
                agent: str | None = None) -> CallResponse:
    """Resume a checkpointed call as ``POST /api/resume`` does, wherever the fleet holds it."""
    return node.io.run(node.run_async(ResumeCall(ResumeRequest(call, resume_token, observed, agent))))


def open_user_tab(node: Node, url: str | None = None) -> int:
    """Open a tab of no agent on ``node`` (a user tab, in its own window), its actor ready; its id."""

    async def opened() -> int:
        tab = await node.browser.new_tab(url)
        await node.open_tab_ids()  # finds the new tab and gives it its actor
        return tab
    return node.io.run(opened(), timeout=60)
