"""Container calls (``browser_batch``, ``browser_parallel``, ``browser_workflow``, and their resume)
through the bridge, which keeps their checkpoints; each finished step is a progress notification.

When the client asked for progress (a progressToken), the gateway asks the bridge for the call's
progress as it runs (``Accept: application/x-ndjson``): a line as the call starts (its steps), one
per finished step, then the answer. Otherwise it asks for the answer alone: the lines would reach
no one, and hearing them costs the bridge's loop, which drives the browser, a wake-up per step.
"""

from __future__ import annotations

from typing import Any

from mcp_gateway._caller import Caller
from messages.contract import SETTLE

__all__ = ["run_container"]


async def run_container(caller: Caller, path: str, body: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The bridge's answer to a container call that may run ``seconds``, its steps told as they finish."""
    caller.sent = True
    timeout = seconds + SETTLE + 30.0
    if not caller.wants_progress:
        return await caller.bridge.post(path, body, timeout=timeout)

    async def follow(line: dict[str, Any]) -> None:
        if isinstance(line.get("steps"), int):
            caller.progress.begin(0, line["steps"])
        elif isinstance(line.get("path"), str):
            await caller.progress.step(f"step {line['path']} {line.get('status')}")

    return await caller.bridge.stream(path, body, timeout=timeout, on_progress=follow)
