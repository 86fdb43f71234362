"""Call actors run container calls; the bus driver carries their actions to tab actors over NATS."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import dataclasses
import logging
import secrets
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pykka

from actors.bus import Bus, BusError
from actors.event_store import EventStore
from actors.loop import Answering, IoLoop, ask_from_loop
from actors.pipeline import RECORD_WAIT, OrderedWriter, Pending
from actors.serving import ask
from actors.tab_actor import not_sent
from core.calls import CallResponse, Calls, Listener
from core.checkpoints import WorkflowSource
from core.log_context import AGENT, CALL, SESSION, STEP
from core.policy import PolicyDriver
from core.ports import Recorded, not_recorded, wait_recorded
from messages.codec import decode_outcome, encode
from messages.commands import CallSiteTool, CallSpec, Command, GetTabs, NewTab, ResetSession, is_write
from messages.contract import SETTLE
from messages.errors import KitsuneError
from messages.events import CallEnded, Event, StepDispatched
from messages.fleet import ResumeRequest
from messages.requests import RequestEnded, RequestRunning, RequestWithdrawn, Subjects, TabCancel, TabRequest
from messages.results import Failed, Failure, Outcome, Unknown

__all__ = ["BusDriver", "CallActor", "CallActors", "EventSink", "LocalTabs", "LoopSteps", "ResumeCall", "RunCall"]

T = TypeVar("T")

_KEEP_IDLE = 8
"""Call actors a node keeps idle between calls (:class:`CallActors`)."""
_PLACE_AGAIN = 0.05
"""Seconds before a node placed to open a tab that had no responder is asked again (doubling to 0.5 s)."""

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RunCall:
    """Run a new container call."""

    spec: CallSpec
    workflow: WorkflowSource | None = None
    agent: str | None = None
    listener: Listener | None = None
    """Hears this call's events as they happen (a streaming request's progress)."""
    session: str | None = None
    """The agent's session it runs for (its tasks' leases, its approvals)."""
    call: int | None = None
    """Its call id when it is recorded already (a call another node forwarded here); None: a new one."""
    recording: Callable[[], int] | None = None
    """A new call's: the wait for its id, its audit entry on its way (:meth:`CallActors.run`)."""


@dataclass(frozen=True, slots=True)
class ResumeCall:
    """Resume a checkpointed call (spec: browser_resume)."""

    request: ResumeRequest
    """The resume, as it was asked for (its session's leases pass its resumed steps)."""
    listener: Listener | None = None
    """Hears this resume's events as they happen (a streaming request's progress)."""

    @property
    def agent(self) -> str | None:
        return self.request.agent

    @property
    def session(self) -> str | None:
        return self.request.session


class CallActor(Answering):
    """Container calls, or resumes of them, each from start to end in a context of its own (as on a new thread)."""

    def __init__(self, calls: Calls) -> None:
        super().__init__()
        self._calls = calls

    def handle(self, message: Any) -> Any:
        return contextvars.Context().run(self._handle, message)

    def _handle(self, message: Any) -> Any:
        if isinstance(message, RunCall | ResumeCall):
            AGENT.set(message.agent)  # this call's log lines name its agent (and call: EventSink)
            SESSION.set(message.session)  # and its ports (Node.ports_for) the agent's session
        if isinstance(message, RunCall):
            response = self._calls.run(message.spec, message.workflow, message.agent, message.listener,
                                       message.call if message.call is not None else message.recording)
            log.info("%s call ended %s", message.spec.kind, response.body.get("status"))
            return response
        if isinstance(message, ResumeCall):
            request = message.request
            response = self._calls.resume(request.call, request.resume_token, request.observed, request.agent,
                                          message.listener)
            log.info("resume ended %s", response.body.get("status"))
            return response
        raise TypeError(f"a call actor takes RunCall or ResumeCall, not {type(message).__name__}")


class CallActors:
    """The node's call actors: a call takes an idle one (its thread started already: starting one took about
    2 ms of a one-step call on a loaded machine) and gives it back when it ends; one whose asker stopped waiting
    (its call runs on) stops after it, and so does one past ``keep`` idle."""

    def __init__(self, calls: Calls, keep: int = _KEEP_IDLE) -> None:
        self._calls = calls
        self._keep = keep
        self._idle: list[pykka.ActorRef[CallActor]] = []
        self._stopped = False

    async def run(self, message: RunCall | ResumeCall) -> CallResponse:
        """Run a call or a resume on a call actor, from the loop; its response (or error). A new call's audit entry
        (its id) is on its way as the actor takes it: its round trip overlaps the hand-over to the actor's thread."""
        if isinstance(message, RunCall) and message.call is None:
            message = dataclasses.replace(message, recording=self._calls.recording(message.spec, message.agent))
        actor = self._idle.pop() if self._idle else CallActor.start(self._calls)
        ended = True
        try:
            response: CallResponse = await ask_from_loop(actor, message)
            return response
        except asyncio.CancelledError:  # its asker stopped waiting: the call runs on, on that actor
            ended = False
            raise
        finally:
            if ended and not self._stopped and len(self._idle) < self._keep and actor.is_alive():
                self._idle.append(actor)
            else:
                actor.stop(block=False)

    def forget(self) -> list[pykka.ActorRef[CallActor]]:
        """The idle actors, for the node to stop; later calls' actors stop as their calls end."""
        self._stopped = True
        idle, self._idle = self._idle, []
        return idle


LocalTabs = Callable[[int, TabRequest], Outcome | None]
"""Runs a request on the actor of a tab of this node and answers its outcome; None when the tab is
elsewhere. Raises ``TimeoutError`` when the tab does not answer in time."""
LocalTabsHere = Callable[[int, TabRequest], Coroutine[Any, Any, Outcome | None]]
"""The same, from the loop."""
OpenTabs = Callable[[], Coroutine[Any, Any, frozenset[int]]]
"""Ids of the fleet's open tabs (the registry's: no tab is asked for its title or URL)."""
Placement = Callable[[NewTab | ResetSession, str | None, int | None], str]
"""The subject of the node a ``newTab`` of an agent (None: a user tab) in a call opens on, or that holds the session
a ``resetSession`` names; raises :class:`KitsuneError` when no node can take it (``unknown_node``, ``fleet_full``,
``session_not_found``)."""


class BusDriver:
    """The engine's driver port: each action goes to the actor of its tab.

    A tab of this node is asked through its actor's mailbox (``local``); a tab of another node
    over the bus, in the same message. A request whose answer is lost (connection dropped, no
    answer in time) ends ``unknown`` for a write, never ``ok``; a tab nobody answers for is
    ``tab_closed``, with nothing sent.
    """

    def __init__(self, io: IoLoop, bus: Bus, subjects: Subjects, local: LocalTabs, place: Placement,
                 open_tabs: OpenTabs, agent: str | None = None, *, here: LocalTabsHere | None = None) -> None:
        self._io = io
        self._bus = bus
        self._subjects = subjects
        self._local = local
        self._here = here
        self._place = place
        self._open_tabs = open_tabs
        self._agent = agent
        """The agent whose calls it serves (its requests name it: a ``newTab`` opens in its session)."""

    def for_agent(self, agent: str) -> BusDriver:
        """The same driver for the calls of ``agent``."""
        return BusDriver(self._io, self._bus, self._subjects, self._local, self._place, self._open_tabs, agent,
                         here=self._here)

    def execute(self, command: Command, tab_id: int | None, timeout: float,
                recorded: Sequence[Recorded] = (), *, as_read: bool = False) -> Outcome:
        wait_recorded(recorded)  # on this thread: the request's time starts once they are made
        if isinstance(command, NewTab | ResetSession):
            try:
                subject = self._place(command, self._agent, CALL.get())
            except KitsuneError as e:  # no node to open it on: nothing sent
                return Failed(Failure.of(e))
        elif isinstance(command, GetTabs):
            subject = self._subjects.tabs
        elif tab_id is None:
            return Failed(Failure("No tab: the call has no default tab and the command names none", "no_tab", False))
        else:
            subject = self._subjects.tab(tab_id)
        writes = is_write(command) and not as_read
        request = self._request(command, timeout, writes, as_read)
        try:
            if tab_id is not None and (outcome := self._local(tab_id, request)) is not None:
                return outcome
            if tab_id is not None:  # another node's tab: named, so that it can be withdrawn
                request = dataclasses.replace(request, id=secrets.token_hex(8))
            reply = self._ask(subject, request)
        except BusError as e:
            if e.code == "no_responders" and tab_id is not None:
                return Failed(Failure(f"Tab {tab_id} is closed", "tab_closed", False, {"tabId": tab_id}))
            if e.sent and (withdrawn := self._withdraw(subject, request, tab_id)) is not None:
                return withdrawn
            failure = Failure(e.message, e.code, False)
            return Unknown(failure) if writes and e.sent else Failed(Failure(e.message, e.code, True))
        except TimeoutError:
            if (withdrawn := self._withdraw(subject, request, tab_id)) is not None:
                return withdrawn
            return _unanswered(tab_id, writes)
        return decode_outcome(reply)

    async def run_here(self, command: Command, tab_id: int, timeout: float) -> Outcome | None:
        """An action on a tab of this node, from the loop: no thread on its way (a write's records are made already);
        None when the tab is another node's (or the driver cannot ask from the loop)."""
        if self._here is None:
            return None
        writes = is_write(command)
        try:
            return await self._here(tab_id, self._request(command, timeout, writes, False))
        except TimeoutError:
            return _unanswered(tab_id, writes)

    def _ask(self, subject: str, request: TabRequest) -> bytes:
        """The reply to ``request`` on ``subject``. A node placed to open a tab (or reset a session) with no
        responder is placed and asked again until the request's deadline, pausing 50 ms doubling to 0.5 s:
        the fleet's registry has it alive, so its subscription has not crossed the cluster's routes yet (it
        just started) or it just died (placed elsewhere once its beat lapses). Nothing reached a subject
        without responders."""
        command, pause = request.command, _PLACE_AGAIN
        while True:
            left = max(0.0, request.deadline - time.time())
            try:
                return self._io.run(self._bus.request(subject, encode(request), left + SETTLE),
                                    timeout=left + 2 * SETTLE)
            except BusError as e:
                if e.code != "no_responders" or not isinstance(command, NewTab | ResetSession) or left <= pause:
                    raise
                unplaced = e
            time.sleep(pause)
            pause = min(2 * pause, 10 * _PLACE_AGAIN)
            try:
                subject = self._place(command, self._agent, CALL.get())
            except KitsuneError:  # its node left the fleet and no other has room (or it was named)
                raise unplaced from None

    def _request(self, command: Command, timeout: float, writes: bool, as_read: bool) -> TabRequest:
        return TabRequest(command, timeout, time.time() + timeout, CALL.get(), STEP.get() if writes else None,
                          agent=self._agent, session=SESSION.get(), as_read=as_read)

    def _withdraw(self, subject: str, request: TabRequest, tab_id: int | None) -> Outcome | None:
        """After a lost answer, withdraw the request from the tab's node: the outcome when that
        node says what became of it (nothing sent, or how it ended), None when it cannot tell."""
        if request.id is None or not self._bus.connected:
            return None
        try:
            answer = self._io.run(ask(self._bus, subject, TabCancel(request.id), SETTLE, RequestWithdrawn, RequestEnded,
                                      RequestRunning), timeout=2 * SETTLE)
        except (KitsuneError, TimeoutError):  # a BusError, or an answer it cannot read
            return None
        if isinstance(answer, RequestWithdrawn):
            return not_sent(request.command, tab_id, "no answer came in time and the tab's node withdrew it")
        return answer.outcome if isinstance(answer, RequestEnded) else None

    def list_tabs(self) -> frozenset[int]:
        try:
            return self._io.run(self._open_tabs(), timeout=5.0 + SETTLE)
        except (BusError, TimeoutError) as e:
            raise KitsuneError("tabs_unavailable", f"The tabs could not be listed ({type(e).__name__})",
                               retryable=True) from e


class LoopSteps:
    """The engine's steps on this node's tabs on the loop (``core.ports.StepsHere``): the agent's policy judges
    each (as :meth:`PolicyDriver.execute` does), a write's records are awaited, then the tab runs it in the asking
    task (a write in its turn among the tab's writes): no thread, no mailbox, no lookup of a session, and none of a
    lease unless a task holds the tab (then judged on a thread: the lease is read from the tasks' store). A
    ``callSiteTool`` the policy stops as a write, tried as a read first, runs on a thread as
    :meth:`PolicyDriver.execute` runs it."""

    def __init__(self, io: IoLoop, holds: Callable[[int], bool], driver: BusDriver,
                 policy: PolicyDriver | None = None) -> None:
        self._io = io
        self._holds = holds
        self._driver = driver
        self._policy = policy

    def holds(self, tab: int) -> bool:
        return self._holds(tab)

    def run(self, reads: Callable[[], Coroutine[Any, Any, T]], timeout: float) -> T:
        return self._io.run(reads(), timeout=timeout + 2 * RECORD_WAIT)  # a write's records may be waited for

    def read(self, command: Command, tab: int, timeout: float,
             sent: Callable[[], None] | None = None) -> Coroutine[Any, Any, Outcome | None]:
        """Not a coroutine of its own, but the driver's (or the policy's refusal): one coroutine less a read."""
        if sent is not None:  # runs once the awaiting task suspends: when the request is out
            asyncio.get_running_loop().call_soon(sent)
        if self._policy is not None and (refused := self._policy.refused(command, tab)) is not None:
            return _answer(refused)
        return self._driver.run_here(command, tab, timeout)

    async def write(self, command: Command, tab: int, timeout: float, recorded: Sequence[Recorded],
                    sent: Callable[[], None] | None = None) -> Outcome | None:
        if sent is not None:  # runs once this task first suspends: its request out, or a record or judgement awaited
            asyncio.get_running_loop().call_soon(sent)
        policy = self._policy
        if policy is not None:  # nothing awaited between the look at the tasks' mirror and the judgement
            here = policy.judges_here(tab)
            if isinstance(command, CallSiteTool) and (policy.tries_as_read(command, tab) if here else
                                                      await asyncio.to_thread(policy.tries_as_read, command, tab)):
                return await asyncio.to_thread(policy.execute, command, tab, timeout, recorded)  # as on a call thread
            refused = policy.refused(command, tab) if here else await asyncio.to_thread(policy.refused, command, tab)
            if refused is not None:
                return refused
        for wait in recorded:
            try:
                await (wait.wait() if isinstance(wait, Pending) else asyncio.to_thread(wait))
            except Exception as e:
                raise not_recorded(e) from e
        return await self._driver.run_here(command, tab, timeout)


async def _answer(outcome: Outcome) -> Outcome:
    return outcome


def _unanswered(tab_id: int | None, writes: bool) -> Outcome:
    """A request whose tab's answer did not come in time: a write's outcome is unknown."""
    failure = Failure(f"No answer from tab {tab_id} in time", "bus_timeout", False)
    return Unknown(failure) if writes else Failed(Failure(failure.error, failure.code, True))


class EventSink:
    """The engine's event sink: events go to the event store in order, from every call thread.

    An event is queued without waiting, except ``StepDispatched`` and ``CallEnded``, which wait
    until they (and every event before them) are stored, so a write is never sent before its
    dispatch is on record. Those two are acknowledged and go out at once, the others are posted
    and may linger a little to go out together (``actors.pipeline``): a dispatch waits for one
    round trip to the store, not for one per event queued before it.
    """

    def __init__(self, io: IoLoop, store: EventStore, listeners: list[Callable[[Event], None]] | None = None) -> None:
        self.listeners: list[Callable[[Event], None]] = listeners if listeners is not None else []
        """Called with every event on the emitting thread, as it happens (metrics, benchmarks)."""
        self._writer: OrderedWriter[_Queued, None] = OrderedWriter(
            io, send=lambda run: store.send([event for event, _ in run]),
            post=lambda run: store.post([event for event, _ in run]),
            on_stored=_stored, on_lost=_lost)

    async def start(self) -> None:
        """Start the writer (on the loop)."""
        await self._writer.start()

    async def stop(self) -> None:
        """Write what is queued, then stop."""
        await self._writer.stop()

    def __call__(self, event: Event) -> Callable[[], None] | None:
        """Queue ``event``; for a dispatch or a call's end, the wait until it is stored."""
        CALL.set(event.call)  # this thread's log lines name the call (the engine names a write's step: STEP)
        for listener in self.listeners:
            listener(event)
        if not isinstance(event, StepDispatched | CallEnded):
            self._writer.put((event, None), acknowledged=False, urgent=False)
            return None
        stored: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._writer.put((event, stored), acknowledged=True, urgent=True)
        return Pending(stored, RECORD_WAIT)


_Queued = tuple[Event, concurrent.futures.Future[None] | None]
"""An event on its way to the store, and what its emitter waits on (if it does)."""


def _stored(queued: _Queued, _: None) -> None:
    if queued[1] is not None:
        queued[1].set_result(None)


def _lost(queued: _Queued, error: Exception) -> None:
    event, stored = queued
    log.error("event of call %s not stored (%s)", event.call, type(error).__name__)
    if stored is not None:
        stored.set_exception(not_recorded())
