"""Tab actors: one per browser tab, running its commands one at a time."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from actors.loop import IoLoop, LoopActor
from bridge.url_policy import UrlPolicy
from messages.commands import Command, is_write
from messages.requests import TabRequest
from messages.results import Failed, Failure, Outcome, Unknown

__all__ = ["SETTLE", "Browser", "TabActor"]

SETTLE = 2.0
"""Seconds a tab may answer after a command's own timeout before the asker gives up."""


class Browser(Protocol):
    """What tab actors and the node need of the browser driver (``bridge.browser.ChromiumBrowser``)."""

    url_policy: Callable[[], UrlPolicy] | None
    """The URL lists the browser enforces on every request of every page."""
    next_tab_id: Callable[[], int]
    """Names each new page the moment it appears."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def execute(self, command: Command, tab_id: int | None, timeout: float) -> Outcome: ...

    async def new_tab(self, url: str | None = None) -> int: ...

    async def tabs(self) -> list[dict[str, Any]]: ...

    def tab_ids(self) -> frozenset[int]: ...

    async def needs_user(self, tab_id: int) -> dict[str, Any]: ...

    @property
    def running(self) -> bool: ...


class TabActor(LoopActor):
    """Owns one tab of the browser: every command for it passes through this actor's mailbox.

    It runs on the loop, where Playwright runs: a command costs no thread hop inside the node.
    """

    def __init__(self, tab_id: int, browser: Browser, io: IoLoop) -> None:
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
