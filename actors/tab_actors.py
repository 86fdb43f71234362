"""A node's tabs: an actor for each open page, served over NATS to the calls of other nodes.

Calls on this node ask a tab's actor directly (:meth:`TabActors.ask`); calls on other nodes send
their requests to ``<fleet>.tab.<id>.do`` (``TabRequest``, ``TabCancel``), where the node admits each
one once, runs it in the actor, and lets its sender withdraw it (:class:`actors.tab_actor.ServedRequests`). The actors
follow the browser's pages (:meth:`TabActors.reconcile`), popups and crashed tabs included, and
the fleet's registry is told of every tab that opens or closes (``on_change``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, cast

import pykka

from actors.bus import Bus, Subscription
from actors.loop import IoLoop, ask_from_loop
from actors.serving import typed
from actors.tab_actor import Interrupt, ServedRequests, TabActor, TabDriver, TabWork, Ticket, not_sent
from messages.commands import CloseTab
from messages.contract import SETTLE
from messages.requests import Subjects, TabCancel, TabRequest
from messages.results import Done, Failed, Failure, Outcome
from messages.wire import LARGE, Message

__all__ = ["Admission", "TabActors", "TabsDriver", "tab_closed"]

Admission = Callable[[int, TabRequest], Outcome | None]
"""Why a request may not run on a tab of this node (a claim or an owner of the fleet's), or None."""
TabsChanged = Callable[[frozenset[int], frozenset[int]], Awaitable[None]]
"""Told the tabs that opened and those that closed, once their actors are attached or stopped."""


class TabsDriver(TabDriver, Protocol):
    """What the tab actors need of the browser driver: its tabs' commands, and which tabs are open."""

    def tab_ids(self) -> frozenset[int]: ...


class TabActors:
    """The actors of a node's open tabs (on the node's loop, but :meth:`ask`, from a call's thread)."""

    def __init__(self, browser: TabsDriver, io: IoLoop, bus: Bus, subjects: Subjects, *,
                 on_change: TabsChanged, admission: Admission = lambda tab, request: None) -> None:
        self._browser = browser
        self._io = io
        self._subjects = subjects
        self._on_change = on_change
        self._admission = admission
        self._bus = bus
        """Where the tabs take other nodes' requests."""
        self._tabs: dict[int, tuple[pykka.ActorRef[TabActor], Subscription, TabWork]] = {}
        self._served = ServedRequests()
        """Requests other nodes' calls sent to this node's tabs (so that they can withdraw them)."""
        self._reconciling = asyncio.Lock()

    def ids(self) -> list[int]:
        """Tabs that have an actor, in id order."""
        return sorted(self._tabs)

    def refs(self) -> list[pykka.ActorRef[Any]]:
        return [ref for ref, _, _ in list(self._tabs.values())]

    def subscriptions(self) -> list[Subscription]:
        return [sub for _, sub, _ in self._tabs.values()]

    def holds(self, tab_id: int) -> bool:
        """Whether ``tab_id`` is a tab of this node (from any thread)."""
        return tab_id in self._tabs

    def forget(self) -> list[pykka.ActorRef[Any]]:
        """Let go of every actor (the node stops them); theirs."""
        refs = self.refs()
        self._tabs.clear()
        return refs

    async def interrupt(self) -> list[tuple[int, Ticket]]:
        """Interrupt every tab's actor (:class:`Interrupt`); the requests that were running, by tab."""
        running: list[tuple[int, Ticket]] = []
        for tab_id, (actor, _, _) in list(self._tabs.items()):
            with contextlib.suppress(pykka.ActorDeadError):
                running += [(tab_id, ticket) for ticket in await ask_from_loop(actor, Interrupt())]
        return running

    def ask(self, tab_id: int, request: TabRequest) -> Outcome | None:
        """Run a request of a call on this node in the actor of one of its tabs (no NATS on the way);
        None when the tab is not this node's (from a thread). A request the tab did not start in
        time is withdrawn: it then never runs, and nothing was sent."""
        admitted = self._admitted(tab_id, request)
        if admitted is None and self._unattached(tab_id):
            self._io.run(self.reconcile(), timeout=30)
            admitted = self._admitted(tab_id, request)
        if not isinstance(admitted, tuple):
            return admitted
        (actor, _, _), ticket = admitted
        try:
            outcome = cast(Outcome, actor.ask(ticket, timeout=_wait(request)))
        except pykka.ActorDeadError:
            outcome = tab_closed(tab_id)
        except pykka.Timeout as e:
            return _unanswered(ticket, tab_id, e)
        if _changes_tabs(request, outcome):
            self._io.run(self.reconcile(), timeout=30)
        return outcome

    async def ask_here(self, tab_id: int, request: TabRequest) -> Outcome | None:
        """:meth:`ask` from the loop: run in the asking task itself, past the actor's mailbox (no hop at all, no
        timer but the tab's own, which bounds it; a write waits for its turn on the same lock as the mailbox's
        writes, in the order they come to it). Cancelled with the asking task (a write then ends unknown, as when
        the node stops)."""
        admitted = self._admitted(tab_id, request)
        if admitted is None and self._unattached(tab_id):
            await self.reconcile()
            admitted = self._admitted(tab_id, request)
        if not isinstance(admitted, tuple):
            return admitted
        (_, _, work), ticket = admitted
        outcome = await work.run(ticket)
        if _changes_tabs(request, outcome):
            await self.reconcile()
        return outcome

    def _unattached(self, tab_id: int) -> bool:
        """Whether ``tab_id`` is a tab of this node's browser that has no actor yet (a popup opened since the tabs were
        last reconciled)."""
        return tab_id not in self._tabs and tab_id in self._browser.tab_ids()

    def _admitted(self, tab_id: int, request: TabRequest) -> (
            tuple[tuple[pykka.ActorRef[TabActor], Subscription, TabWork], Ticket] | Outcome | None):
        """The actor of ``tab_id`` and the ticket ``request`` travels as; why it may not run; None when the tab
        is not this node's."""
        attached = self._tabs.get(tab_id)
        if attached is None:
            return None
        if (refused := self._admission(tab_id, request)) is not None:
            return refused
        return attached, Ticket(request, request.timeout)

    async def reconcile(self) -> None:
        """Give every open tab (popups included) an actor, and stop the actors of closed tabs.

        One at a time: two at once could both give a tab an actor, and a request to it would run twice.
        """
        async with self._reconciling:
            open_tabs = self._browser.tab_ids()
            opened = frozenset(open_tabs - self._tabs.keys())
            closed = frozenset(self._tabs.keys() - open_tabs)
            for tab_id in sorted(opened):
                await self._attach(tab_id)
            for tab_id in sorted(closed):
                actor, subscription, _ = self._tabs.pop(tab_id)
                await subscription.unsubscribe()
                actor.stop(block=False)
            if opened or closed:
                await self._on_change(opened, closed)

    async def _attach(self, tab_id: int) -> None:
        work = TabWork(tab_id, self._browser)
        actor = TabActor.start(tab_id, self._browser, self._io, work=work)

        async def run(request: TabRequest) -> Outcome:  # a request from a call on another node
            if (refused := self._admission(tab_id, request)) is not None:
                return refused
            ticket = self._served.admit(request)
            if ticket is None:
                return not_sent(request.command, tab_id, "its caller withdrew it before it arrived")
            # on the loop already: past the actor's mailbox, in a task of its own that no cancel of this one stops
            outcome = await asyncio.shield(work.submit(ticket))
            self._served.ended(request, outcome)
            if _changes_tabs(request, outcome):
                await self.reconcile()
            return outcome

        async def withdraw(cancel: TabCancel) -> Message:  # its caller's, when the answer did not come in time
            return self._served.withdraw(cancel)

        subject = self._subjects.tab(tab_id)
        subscription = await self._bus.subscribe(
            subject, typed(subject, {TabRequest: run, TabCancel: withdraw}, limit=LARGE, outcomes=True),
            concurrent=True)
        self._tabs[tab_id] = (actor, subscription, work)


def _wait(request: TabRequest) -> float:
    """How long a call on this node waits for a tab's answer."""
    return request.timeout + 2 * SETTLE


def _unanswered(ticket: Ticket, tab_id: int, error: Exception) -> Outcome:
    """A request its tab did not answer in time: withdrawn if it had not started (nothing was sent), else
    ``TimeoutError``."""
    if ticket.withdraw():
        return not_sent(ticket.request.command, tab_id, f"tab {tab_id} did not start it in time")
    raise TimeoutError(f"tab {tab_id} did not answer") from error


def tab_closed(tab_id: int) -> Outcome:
    return Failed(Failure(f"Tab {tab_id} is closed", "tab_closed", False, {"tabId": tab_id}))


def _changes_tabs(request: TabRequest, outcome: Outcome) -> bool:
    """Whether the tabs may have changed (a tab closed or crashed): the node then reconciles its actors."""
    return isinstance(request.command, CloseTab) or not isinstance(outcome, Done)
