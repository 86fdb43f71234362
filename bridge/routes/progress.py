"""A container call's progress as it runs: a JSON line per finished step (``Accept: application/x-ndjson``).

The bridge answers a call at its end; the MCP gateway wants to tell its client each finished step
(progress notifications). The call's message carries a listener (``RunCall.listener``) that hears
that call's events alone, from any thread (a parallel's sequences run on actors of their own).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import orjson

from core.calls import CallResponse
from messages.errors import KitsuneError
from messages.events import (
    CallStarted,
    Event,
    OutlineStep,
    StepFailed,
    StepHeld,
    StepKept,
    StepOutcomeUnknown,
    StepSkipped,
    StepSucceeded,
)

__all__ = ["NDJSON", "progress_lines"]

NDJSON = "application/x-ndjson"
_FINISHED: dict[type[Event], str] = {StepSucceeded: "ok", StepKept: "ok", StepFailed: "failed",
                                     StepOutcomeUnknown: "unknown", StepHeld: "held", StepSkipped: "skipped"}
"""The events that finish a step, and the step's status."""


def _outline_size(steps: Iterable[OutlineStep]) -> int:
    return sum(1 + _outline_size(s.steps) + sum(_outline_size(q) for q in s.sequences) for s in steps)


def _line(event: Event) -> dict[str, Any] | None:
    if isinstance(event, CallStarted):
        return {"call": event.call, "steps": _outline_size(event.outline)}
    status = _FINISHED.get(type(event))
    return None if status is None else {"path": str(getattr(event, "path", "")), "status": status}


class _Heard:
    """Lines heard on the emitting threads, for the loop: woken once for those heard since it last took them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._lines: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.ready = asyncio.Event()
        """Set when there are lines to take (or the call ended)."""

    def add(self, line: dict[str, Any]) -> None:
        """(from any thread)"""
        with self._lock:
            self._lines.append(line)
            first = len(self._lines) == 1
        if first:
            self._loop.call_soon_threadsafe(self.ready.set)

    def take(self) -> list[dict[str, Any]]:
        """(on the loop) The lines heard since the last take."""
        self.ready.clear()
        with self._lock:
            lines, self._lines = self._lines, []
        return lines


async def progress_lines(run: Callable[[Callable[[Event], None]], Awaitable[CallResponse]]) -> AsyncIterator[bytes]:
    """A call run by ``run(on_event)`` as JSON lines: ``{"progress": {"call", "steps"}}`` as it starts
    (``steps``: the size of its outline, blocks and their steps), ``{"progress": {"path", "status"}}``
    per finished step, then ``{"result", "httpStatus"}``. A refusal before the call starts (a bad
    resume token) is the last line alone.

    The loop, which also drives the browser, is woken once for the lines heard since it last took
    them, not once per line, and they go out as one chunk."""
    heard = _Heard(asyncio.get_running_loop())

    def on_event(event: Event) -> None:  # on the emitting thread
        line = _line(event)
        if line is not None:
            heard.add(line)

    async def answer() -> dict[str, Any]:
        try:
            response = await run(on_event)
        except KitsuneError as e:
            return {"result": e.to_json(), "httpStatus": e.http_status}
        finally:
            heard.ready.set()
        return {"result": response.body, "httpStatus": response.http_status}

    running = asyncio.ensure_future(answer())
    try:
        while not running.done():
            await heard.ready.wait()
            lines = heard.take()
            if lines:
                yield b"".join(orjson.dumps({"progress": line}) + b"\n" for line in lines)
        yield orjson.dumps(await running) + b"\n"
    finally:
        running.cancel()
