"""Container calls (``browser_batch``, ``browser_parallel``, ``browser_workflow``, and their resume)
through the bridge, which keeps their checkpoints; each finished step is a progress notification.

The gateway asks the bridge for the call's progress as it runs (``Accept: application/x-ndjson``):
a line as the call starts (its steps), one per finished step, then the answer.
"""

from __future__ import annotations

from typing import Any

from mcp_gateway._caller import Caller
from messages.contract import SETTLE

__all__ = ["run_container"]


async def run_container(caller: Caller, path: str, body: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The bridge's answer to a container call that may run ``seconds``, its steps told as they finish."""
    async def follow(line: dict[str, Any]) -> None:
        if isinstance(line.get("steps"), int):
            caller.progress.begin(0, line["steps"])
        elif isinstance(line.get("path"), str):
            await caller.progress.step(f"step {line['path']} {line.get('status')}")

    caller.sent = True
    return await caller.bridge.stream(path, body, timeout=seconds + SETTLE + 30.0, on_progress=follow)
