"""Call actors run container calls; the bus driver carries their actions to tab actors over NATS."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from actors.bus import Bus, BusError
from actors.calls import Calls
from actors.checkpoints import WorkflowSource
from actors.event_store import EventStore
from actors.log_context import AGENT, CALL
from actors.loop import Answering, IoLoop
from actors.tab_actor import SETTLE
from messages.codec import decode_outcome, encode
from messages.commands import CallSpec, Command, GetTabs, NewTab, is_write
from messages.errors import KitsuneError
from messages.events import CallEnded, Event, StepDispatched
from messages.requests import Subjects, TabRequest
from messages.results import Done, Failed, Failure, Outcome, Unknown

__all__ = ["BusDriver", "CallActor", "EventSink", "ResumeCall", "RunCall"]

log = logging.getLogger(__name__)

_IN_FLIGHT = 256
"""Events sent to the store and not yet acknowledged, at most."""

_Append = tuple[Event, asyncio.Task[None], concurrent.futures.Future[None] | None]
"""An event on its way to the store: the event, its append, and what its emitter waits on (if it does)."""


@dataclass(frozen=True, slots=True)
class RunCall:
    """Run a new container call."""

    spec: CallSpec
    workflow: WorkflowSource | None = None
    agent: str | None = None


@dataclass(frozen=True, slots=True)
class ResumeCall:
    """Resume a checkpointed call (spec: browser_resume)."""

    call: Any
    resume_token: Any
    observed: Any = None
    agent: str | None = None


class CallActor(Answering):
    """One container call, or one resume of it, from start to end."""

    def __init__(self, calls: Calls) -> None:
        super().__init__()
        self._calls = calls

    def handle(self, message: Any) -> Any:
        AGENT.set(getattr(message, "agent", None))  # this call's log lines name its agent (and call: EventSink)
        if isinstance(message, RunCall):
            response = self._calls.run(message.spec, message.workflow, message.agent)
            log.info("%s call ended %s", message.spec.kind, response.body.get("status"))
            return response
        if isinstance(message, ResumeCall):
            response = self._calls.resume(message.call, message.resume_token, message.observed, message.agent)
            log.info("resume ended %s", response.body.get("status"))
            return response
        raise TypeError(f"a call actor takes RunCall or ResumeCall, not {type(message).__name__}")


class BusDriver:
    """The engine's driver port: each action travels to the actor of its tab over the bus.

    A request whose answer is lost (connection dropped, no answer in time) ends ``unknown`` for
    a write, never ``ok``; a tab nobody answers for is ``tab_closed``, with nothing sent.
    """

    def __init__(self, io: IoLoop, bus: Bus, subjects: Subjects) -> None:
        self._io = io
        self._bus = bus
        self._subjects = subjects

    def execute(self, command: Command, tab_id: int | None, timeout: float) -> Outcome:
        if isinstance(command, NewTab):
            subject = self._subjects.open
        elif isinstance(command, GetTabs):
            subject = self._subjects.tabs
        elif tab_id is None:
            return Failed(Failure("No tab: the call has no default tab and the command names none", "no_tab", False))
        else:
            subject = self._subjects.tab(tab_id)
        request = encode(TabRequest(command, timeout))
        try:
            reply = self._io.run(self._bus.request(subject, request, timeout + SETTLE), timeout=timeout + 2 * SETTLE)
        except BusError as e:
            if e.code == "no_responders":
                return Failed(Failure(f"Tab {tab_id} is closed", "tab_closed", False, {"tabId": tab_id}))
            failure = Failure(e.message, e.code, False)
            return Unknown(failure) if is_write(command) and e.sent else Failed(Failure(e.message, e.code, True))
        except TimeoutError:
            failure = Failure(f"No answer from tab {tab_id} in time", "bus_timeout", False)
            return Unknown(failure) if is_write(command) else Failed(Failure(failure.error, failure.code, True))
        return decode_outcome(reply)

    def list_tabs(self) -> frozenset[int]:
        try:
            outcome = decode_outcome(self._io.run(self._bus.request(
                self._subjects.tabs, encode(TabRequest(GetTabs(), 5.0)), 5.0 + SETTLE)))
        except BusError as e:
            raise KitsuneError("tabs_unavailable", f"The tabs could not be listed ({e.code})", retryable=True) from e
        if not isinstance(outcome, Done):
            raise KitsuneError("tabs_unavailable", "The tabs could not be listed", retryable=True)
        return frozenset(tab["tabId"] for tab in outcome.value["tabs"])


class EventSink:
    """The engine's event sink: events go to the event store in order, from every call thread.

    Appends are pipelined: an event is queued without waiting, except ``StepDispatched`` and
    ``CallEnded``, which wait until they (and every event before them) are stored, so a write
    is never sent before its dispatch is on record. The writer sends each event to the store in
    queue order without waiting for the one before it to be acknowledged (up to ``_IN_FLIGHT``
    at once), and the acknowledgements are taken in the same order: a dispatch waits for one
    round trip to the store, not for one per event queued before it (parallel sequences).
    """

    def __init__(self, io: IoLoop, store: EventStore) -> None:
        self._io = io
        self._store = store
        self.listeners: list[Callable[[Event], None]] = []
        """Called with every event on the emitting thread, as it happens (metrics, benchmarks)."""
        self._queue: asyncio.Queue[tuple[Event, concurrent.futures.Future[None] | None]] | None = None
        self._writer: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the writer task (on the loop)."""
        self._queue = asyncio.Queue()
        self._writer = asyncio.get_running_loop().create_task(self._write())

    async def stop(self) -> None:
        """Write what is queued, then stop."""
        if self._queue is not None and self._writer is not None:
            await self._queue.join()
            self._writer.cancel()

    async def _write(self) -> None:
        assert self._queue is not None
        loop = asyncio.get_running_loop()
        in_flight: asyncio.Queue[_Append] = asyncio.Queue(_IN_FLIGHT)
        settler = loop.create_task(self._settle(in_flight))
        try:
            while True:
                event, stored = await self._queue.get()
                # Tasks take their first step in the order they were created, and an append sends its
                # event in its first step (nats-py queues the message before it awaits the ack): the
                # store receives the events in queue order, as when they were appended one by one.
                await in_flight.put((event, loop.create_task(self._store.append(event)), stored))
        finally:
            settler.cancel()

    async def _settle(self, in_flight: asyncio.Queue[_Append]) -> None:
        """Take the store's answers in queue order: an event is stored when it and all before it are."""
        assert self._queue is not None
        while True:
            event, append, stored = await in_flight.get()
            try:
                await append
            except Exception as e:
                log.error("event of call %s not stored (%s)", event.call, type(e).__name__)
                if stored is not None:
                    stored.set_exception(e)
            else:
                if stored is not None:
                    stored.set_result(None)
            finally:
                self._queue.task_done()

    def __call__(self, event: Event) -> Callable[[], None] | None:
        """Queue ``event``; for a dispatch or a call's end, the wait until it is stored."""
        assert self._queue is not None
        CALL.set(event.call)  # this thread's log lines name the call
        for listener in self.listeners:
            listener(event)
        stored: concurrent.futures.Future[None] | None = None
        if isinstance(event, StepDispatched | CallEnded):
            stored = concurrent.futures.Future()
        self._io.loop.call_soon_threadsafe(self._queue.put_nowait, (event, stored))
        if stored is None:
            return None
        return lambda: stored.result(timeout=30)
