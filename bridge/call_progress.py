"""A container call's progress as it runs: a JSON line per finished step (``Accept: application/x-ndjson``).

The bridge answers a call at its end; the MCP gateway wants to tell its client each finished step
(progress notifications). The node's event listeners hear every call; a watch picks out one: the
call that its own call actor starts (the first ``CallStarted`` or ``CallResumed`` on that actor's
thread), then every event of that call, from any thread (a parallel's sequences run on actors of
their own).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any

import orjson
import pykka

from actors.call_actor import CallActor
from core.calls import CallResponse, Calls
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

__all__ = ["NDJSON", "CallWatch", "CallWatches", "progress_lines"]

NDJSON = "application/x-ndjson"
_FINISHED: dict[type[Event], str] = {StepSucceeded: "ok", StepKept: "ok", StepFailed: "failed",
                                     StepOutcomeUnknown: "unknown", StepHeld: "held", StepSkipped: "skipped"}
"""The events that finish a step, and the step's status."""


class CallWatch:
    """The events of the call one call actor runs, handed to ``on_event`` on the emitting thread."""

    def __init__(self, on_event: Callable[[Event], None]) -> None:
        self._on_event = on_event
        self.thread: int | None = None
        """The call actor's thread, set as it starts (before it takes its message)."""
        self.call: int | None = None

    def __call__(self, event: Event) -> None:
        if self.call is None:
            if not isinstance(event, CallStarted) or threading.get_ident() != self.thread:
                return
            self.call = event.call
        if event.call == self.call:
            self._on_event(event)


class _WatchedCallActor(CallActor):
    """A call actor that tells its watch which thread it runs on."""

    def __init__(self, calls: Calls, watch: CallWatch) -> None:
        super().__init__(calls)
        self._watch = watch

    def on_start(self) -> None:
        self._watch.thread = threading.get_ident()


class CallWatches:
    """The open watches, as one of the node's event listeners (replaced, never changed in place,
    so that a thread telling them an event never sees the tuple change under it)."""

    def __init__(self) -> None:
        self._watches: tuple[CallWatch, ...] = ()
        self._lock = threading.Lock()

    def __call__(self, event: Event) -> None:
        for watch in self._watches:
            watch(event)

    def start(self, calls: Calls, on_event: Callable[[Event], None]) -> tuple[pykka.ActorRef[Any], CallWatch]:
        """A call actor whose call's events go to ``on_event``, and its watch (for :meth:`end`)."""
        watch = CallWatch(on_event)
        with self._lock:
            self._watches = (*self._watches, watch)
        return _WatchedCallActor.start(calls, watch), watch

    def end(self, watch: CallWatch) -> None:
        with self._lock:
            self._watches = tuple(w for w in self._watches if w is not watch)


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
