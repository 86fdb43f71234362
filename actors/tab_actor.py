"""Tab actors: one per browser tab. Its writes run strictly one at a time; its reads run beside them.

Every request carries its deadline and travels as a :class:`Ticket`: the tab starts it at most
once, only before that deadline, and never after its caller withdrew it, so a caller that gave
up can say truthfully that nothing was sent. A read (``waitFor``, ``pageText``...) never waits
behind the tab's writes and never holds them up; a ``waitForResult`` gives the tab back to the
other writes between its polls.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from actors.loop import IoLoop, Later, LoopActor
from messages.commands import Command, WaitForResult
from messages.contract import SETTLE
from messages.requests import RequestEnded, RequestRunning, RequestWithdrawn, TabCancel, TabRequest
from messages.results import Failed, Failure, Outcome, Unknown

__all__ = ["Interrupt", "Pause", "ServedRequests", "TabActor", "TabDriver", "TabWork", "Ticket", "not_sent"]

Pause = Callable[[float], Awaitable[None]]
"""Awaited by a write between its rounds (a ``waitForResult`` between polls) instead of a sleep."""


class TabDriver(Protocol):
    """What a tab actor needs of the browser driver (``driver.ChromiumBrowser``)."""

    async def execute(self, command: Command, tab_id: int | None, timeout: float, *,
                      pause: Pause | None = None, agent: str | None = None, call: int | None = None,
                      path: str | None = None, within: float | None = None,
                      session: str | None = None, as_read: bool = False) -> Outcome:
        """Run ``command`` within ``within`` seconds (``timeout`` when None); messages name ``timeout``, the
        step's own (a request that spent time on its way has less left than its timeout). ``as_read``: only
        as a read (:attr:`TabRequest.as_read`)."""
        ...


_QUEUED, _STARTED, _WITHDRAWN = range(3)


class Ticket:
    """A request on its way to a tab: started at most once, before its deadline, unless withdrawn first.

    ``start`` (by the tab) and ``withdraw`` (by a caller that gives up) are atomic against each
    other, from any thread: exactly one of them wins.
    """

    __slots__ = ("_lock", "_state", "deadline", "request")

    def __init__(self, request: TabRequest, seconds: float) -> None:
        self.request = request
        """What to run."""
        self.deadline = time.monotonic() + seconds
        """When it must have ended (``time.monotonic()``); it is never started after it."""
        self._state = _QUEUED
        self._lock = threading.Lock()

    def start(self) -> bool:
        """Whether the tab may run it now: not withdrawn, not started before, deadline not passed."""
        with self._lock:
            if self._state != _QUEUED:
                return False
            self._state = _STARTED if time.monotonic() < self.deadline else _WITHDRAWN
            return self._state == _STARTED

    def withdraw(self) -> bool:
        """Make sure it never starts; whether it had not started (True: nothing was sent)."""
        with self._lock:
            if self._state == _QUEUED:
                self._state = _WITHDRAWN
            return self._state == _WITHDRAWN

    def left(self) -> float:
        """Seconds left until its deadline."""
        return self.deadline - time.monotonic()


@dataclass(frozen=True, slots=True)
class Interrupt:
    """The node is stopping: refuse what has not started, cancel what runs. The answer is the
    tickets of the writes that were running (their outcome is unknown)."""


def not_sent(command: Command, tab_id: int | None, why: str, code: str = "timeout") -> Failed:
    """The outcome of a request that was never run: nothing reached the page."""
    return Failed(Failure(f"{command.action}: {why}; nothing was sent", code, True,
                          {"tabId": tab_id, "sent": False}))


class _Turn:
    """A write's hold on the tab's write lock, given back during its pauses."""

    def __init__(self, lock: asyncio.Lock, ticket: Ticket) -> None:
        self._lock = lock
        self._ticket = ticket
        self.held = False

    async def take(self) -> bool:
        """Take the lock before the ticket's deadline; whether it was taken."""
        if not self._lock.locked():
            await self._lock.acquire()  # free: taken at once
        else:
            try:
                await asyncio.wait_for(self._lock.acquire(), max(0.0, self._ticket.left()))
            except TimeoutError:
                return False
        self.held = True
        return True

    def give_back(self) -> None:
        if self.held:
            self.held = False
            self._lock.release()

    async def pause(self, seconds: float) -> None:
        """Let the tab's other writes run for ``seconds``, then take the tab back (``TimeoutError``
        when it cannot before the deadline)."""
        self.give_back()
        await asyncio.sleep(seconds)
        if not await self.take():
            raise TimeoutError


class TabWork:
    """What runs on one tab: its requests, each in a task of its own, its writes one at a time. On the loop only:
    its actor's mailbox hands it requests from threads, and code on the loop runs a request with no hop at all
    (:meth:`run`)."""

    def __init__(self, tab_id: int, browser: TabDriver) -> None:
        self.tab_id = tab_id
        self._browser = browser
        self._writes = asyncio.Lock()
        self._running: dict[asyncio.Task[Any], Ticket] = {}
        """The requests running in the browser, by the task that runs each."""
        self._tasks: set[asyncio.Task[Outcome]] = set()
        """Every request's task, waiting for the tab or running."""
        self._stopping = False

    def submit(self, ticket: Ticket) -> asyncio.Task[Outcome]:
        """Start the request of ``ticket`` in a task of its own (the mailbox goes on meanwhile)."""
        task = asyncio.get_running_loop().create_task(self.run(ticket))
        self._tasks.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._tasks.discard)
        return task

    def run(self, ticket: Ticket) -> Coroutine[Any, Any, Outcome]:
        """The request of ``ticket``, to be awaited in the caller's own task: a write waits for the tab's turn."""
        return self._write(ticket) if ticket.request.writes else self._execute(ticket)

    async def _write(self, ticket: Ticket) -> Outcome:
        turn = _Turn(self._writes, ticket)
        if not await turn.take():
            return not_sent(ticket.request.command, self.tab_id,
                            f"tab {self.tab_id} was busy with other writes until the deadline")
        polls = isinstance(ticket.request.command, WaitForResult)
        try:
            return await self._execute(ticket, turn.pause if polls else None)
        finally:
            turn.give_back()

    async def _execute(self, ticket: Ticket, pause: Pause | None = None) -> Outcome:
        command = ticket.request.command
        if self._stopping:
            return not_sent(command, self.tab_id, "the node is stopping", "node_stopped")
        if not ticket.start():
            return not_sent(command, self.tab_id, "its deadline passed or its caller withdrew it before it started")
        timeout = ticket.request.timeout  # the step's own: what its messages name ("after 30s")
        left = max(0.0, ticket.left())  # what it has, once its time on the way and in the queue is spent
        task = asyncio.current_task()
        assert task is not None
        self._running[task] = ticket
        try:
            async with asyncio.timeout(left + SETTLE):
                return await self._browser.execute(command, self.tab_id, timeout, pause=pause,
                                                   agent=ticket.request.agent, call=ticket.request.call,
                                                   path=ticket.request.path, within=left,
                                                   session=ticket.request.session, as_read=ticket.request.as_read)
        except TimeoutError:
            failure = Failure(f"Command timed out after {timeout:g}s", "timeout", False)
            return Unknown(failure) if ticket.request.writes else Failed(Failure(failure.error, "timeout", True))
        except asyncio.CancelledError:
            if not self._stopping:
                raise
            failure = Failure(f"{command.action}: the node stopped while it ran", "node_stopped", False)
            return Unknown(failure) if ticket.request.writes else Failed(Failure(failure.error, failure.code, True))
        finally:
            del self._running[task]

    def interrupt(self) -> list[Ticket]:
        """Refuse what has not started, cancel what runs; the tickets of the writes that were running."""
        self._stopping = True
        writes = [ticket for ticket in self._running.values() if ticket.request.writes]
        for task in self._running:
            task.cancel()
        return writes


class TabActor(LoopActor):
    """Owns one tab of the browser: every command for it from a thread passes through this actor's mailbox.

    It runs on the loop, where Playwright runs: a command costs no thread hop inside the node.
    Each request runs in a task of its own, so the mailbox never waits for the browser.
    """

    def __init__(self, tab_id: int, browser: TabDriver, io: IoLoop, *, work: TabWork | None = None) -> None:
        super().__init__(io)
        self.tab_id = tab_id
        self.work = work if work is not None else TabWork(tab_id, browser)
        """What runs on the tab (given: its owner runs requests from the loop with it directly too)."""

    async def handle(self, message: Any) -> Any:
        if isinstance(message, Interrupt):
            return self.work.interrupt()
        if not isinstance(message, Ticket):
            raise TypeError(f"a tab actor takes Ticket or Interrupt, not {type(message).__name__}")
        return Later(self.work.submit(message))


class ServedRequests:
    """Requests this node's tabs took over the bus, by id, so that their senders can withdraw them.

    A request withdrawn before it arrived is remembered, so it is refused if it comes after all.
    At most ``capacity`` ids are remembered, the oldest forgotten first. Used on the loop only.
    """

    def __init__(self, capacity: int = 4096) -> None:
        self._capacity = capacity
        self._entries: collections.OrderedDict[str, Ticket | Outcome | None] = collections.OrderedDict()
        """Each id's ticket while it is on its way, its outcome once it ended, None if withdrawn first."""

    def admit(self, request: TabRequest) -> Ticket | None:
        """The ticket of a request that arrived; None when it was withdrawn before it came."""
        ticket = Ticket(request, request.seconds_left(time.time()))
        if request.id is not None:
            if request.id in self._entries:
                return None
            self._remember(request.id, ticket)
        return ticket

    def ended(self, request: TabRequest, outcome: Outcome) -> None:
        if request.id is not None:
            self._remember(request.id, outcome)

    def withdraw(self, cancel: TabCancel) -> RequestWithdrawn | RequestRunning | RequestEnded:
        """Withdraw a request; the answer to ``cancel``."""
        entry = self._entries.get(cancel.id)
        if isinstance(entry, Ticket):
            return RequestWithdrawn() if entry.withdraw() else RequestRunning()
        if entry is None:  # withdrawn already, or not arrived (yet): it never starts now
            self._remember(cancel.id, None)
            return RequestWithdrawn()
        return RequestEnded(entry)

    def _remember(self, key: str, entry: Ticket | Outcome | None) -> None:
        self._entries[key] = entry
        self._entries.move_to_end(key)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)
