"""A tool call's progress notifications: its finished steps, and a tick at least every 10 s.

MCP clients reset their request timeout on a progress notification (the TypeScript SDK's clients
time out at 60 s otherwise), and users want to see the steps move. ``progress`` counts the call's
finished steps (a direct tool's requests to the bridge, a container's steps) of ``total``. MCP
wants each notification's progress above the last: a tick with no step finished since adds a part
of a step (1/2, then 2/3, 3/4, ...), which the next finished step passes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio

__all__ = ["PROGRESS_EVERY", "Progress"]

PROGRESS_EVERY = 10.0
"""Seconds between progress notifications while no step finishes."""

Send = Callable[[float, float | None, str], Awaitable[None]]
"""Sends one notification: progress, total (None when unknown), message."""


class Progress:
    """The progress of one tool call (nothing is sent when its request carried no progressToken)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self.done = 0
        """Steps finished."""
        self.total: int | None = None
        """Steps in all, once known (it grows when a loop runs steps again)."""
        self._waiting_for: str | None = None
        self._ticks = 0
        self._last = -1.0

    def begin(self, done: int, total: int | None) -> None:
        """The steps done before this run (a resume's) and the total; nothing is sent."""
        self.done = max(self.done, done)
        self.total = total if total is None else max(total, self.done)

    async def step(self, message: str) -> None:
        """One more step finished."""
        self.done += 1
        self._ticks = 0
        if self.total is not None:
            self.total = max(self.total, self.done)
        await self._notify(message)

    async def tick(self) -> None:
        """A notification that the call still runs, saying what it waits for."""
        self._ticks += 1
        of = f" of {self.total}" if self.total is not None else ""
        await self._notify(self._waiting_for or f"{self.done}{of} steps done; running")

    @contextmanager
    def waiting(self, what: str) -> Iterator[None]:
        """Ticks say ``what`` the call waits for (the user's answer, a page) while the body runs."""
        previous, self._waiting_for = self._waiting_for, what
        try:
            yield
        finally:
            self._waiting_for = previous

    @asynccontextmanager
    async def ticking(self) -> AsyncIterator[None]:
        """A tick every ``PROGRESS_EVERY`` seconds while the body runs."""
        async def every() -> None:
            while True:
                await anyio.sleep(PROGRESS_EVERY)
                await self.tick()

        async with anyio.create_task_group() as group:
            group.start_soon(every)
            try:
                yield
            finally:
                group.cancel_scope.cancel()

    async def _notify(self, message: str) -> None:
        value = self.done + self._ticks / (self._ticks + 1)
        if value > self._last:
            self._last = value
            await self._send(value, self.total, message)
