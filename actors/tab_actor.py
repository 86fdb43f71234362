"""Tab actors: one per browser tab, running its commands one at a time."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from actors.loop import IoLoop, LoopActor
from messages.commands import Command, is_write
from messages.requests import TabRequest
from messages.results import Failed, Failure, Outcome, Unknown

__all__ = ["SETTLE", "TabActor", "TabDriver"]

SETTLE = 2.0
"""Seconds a tab may answer after a command's own timeout before the asker gives up."""


class TabDriver(Protocol):
    """What a tab actor needs of the browser driver (``bridge.browser.ChromiumBrowser``)."""

    async def execute(self, command: Command, tab_id: int | None, timeout: float) -> Outcome: ...


class TabActor(LoopActor):
    """Owns one tab of the browser: every command for it passes through this actor's mailbox.

    It runs on the loop, where Playwright runs: a command costs no thread hop inside the node.
    """

    def __init__(self, tab_id: int, browser: TabDriver, io: IoLoop) -> None:
        super().__init__(io)
        self.tab_id = tab_id
        self._browser = browser

    async def handle(self, message: Any) -> Outcome:
        if not isinstance(message, TabRequest):
            raise TypeError(f"a tab actor takes TabRequest, not {type(message).__name__}")
        try:
            async with asyncio.timeout(message.timeout + SETTLE):
                return await self._browser.execute(message.command, self.tab_id, message.timeout)
        except TimeoutError:
            failure = Failure(f"Command timed out after {message.timeout:g}s", "timeout", False)
            return Unknown(failure) if is_write(message.command) else Failed(Failure(failure.error, "timeout", True))
