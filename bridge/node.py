"""A Kitsune node: the event loop, NATS, the browser and the actors, wired together.

``Node`` starts an embedded ``nats-server`` unless it is given a URL to join, connects the bus,
creates the event and audit streams, starts the browser and the long-lived actors (checkpoints,
claims, barriers, audit), and runs a call actor per container call. Tabs get an actor each and
answer on ``kitsune.tab.<id>.do``; ``newTab`` and ``getTabs`` go to the node itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pykka

from actors.audit_actor import AuditActor, AuditLog, JetStreamAuditLog, LocalAuditLog
from actors.bus import Bus, LocalBus, NatsBus, Subscription
from actors.call_actor import BusDriver, CallActor, EventSink, ResumeCall, RunCall
from actors.calls import CallResponse, Calls
from actors.checkpoint_actor import CheckpointActor, CheckpointsPort
from actors.checkpoints import CheckpointStore, WorkflowSource
from actors.claim_actor import ClaimsPort, TabClaimActor
from actors.engine import EngineConfig, Ports, SystemClock
from actors.event_store import EventStore, JetStreamEventStore, LocalEventStore
from actors.loop import IoLoop, ask_from_loop
from actors.sequence_actor import ActorSequences, BarrierActor
from actors.tab_actor import Browser, TabActor
from bridge.nats_server import EmbeddedNats
from messages.codec import decode, encode
from messages.commands import CallSpec, CloseTab, GetTabs, NewTab
from messages.events import Event
from messages.requests import FLEET_OPEN, TABS_LIST, TabRequest, tab_subject
from messages.results import Done, Failed, Failure, Outcome
from messages.steplog import StepLog, fold

__all__ = ["Node", "NodeConfig"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """How a node runs."""

    nats_url: str | None = None
    """Join this NATS server or cluster (comma-separated URLs); None starts an embedded one."""
    local_bus: bool = False
    """Use the in-process bus and stores instead of NATS (tests of the actors alone)."""
    checkpoint_ttl: float = 1800.0
    checkpoint_capacity: int = 20
    step_timeout: float = 30.0


class Node:
    """One Kitsune node. ``start``/``stop`` from any thread but the loop's; calls from threads or the loop."""

    def __init__(self, browser: Browser, config: NodeConfig = NodeConfig()) -> None:
        self.config = config
        self.browser = browser
        self.io = IoLoop()
        self.nats: EmbeddedNats | None = None
        self.bus: Bus = LocalBus()
        self.events: EventStore = LocalEventStore()
        self.audit_log: AuditLog = LocalAuditLog()
        self.store = CheckpointStore(SystemClock(), capacity=config.checkpoint_capacity, ttl=config.checkpoint_ttl)
        self._actors: list[pykka.ActorRef[Any]] = []
        self._tabs: dict[int, tuple[pykka.ActorRef[TabActor], Subscription]] = {}
        self._subscriptions: list[Subscription] = []
        self._sink: EventSink | None = None
        self.event_listeners: list[Callable[[Event], None]] = []
        """Called with every step-log event as it happens, on the emitting thread."""
        self.calls: Calls | None = None

    # life cycle

    def start(self) -> Node:
        """Start NATS (or join it), the browser and the actors; returns when the node answers."""
        try:
            self.io.run(self._connect(), timeout=60)
            checkpoints = CheckpointActor.start(self.store)
            claims = TabClaimActor.start()
            barriers = BarrierActor.start()
            audit = AuditActor.start(self.audit_log, self.io)
            self._actors += [checkpoints, claims, barriers, audit]
            self.claims = claims
            audit_proxy: Any = audit.proxy()
            assert self._sink is not None
            ports = Ports(BusDriver(self.io, self.bus), SystemClock(), ClaimsPort(claims), ActorSequences(barriers))
            self.calls = Calls(ports, CheckpointsPort(checkpoints),
                               call_ids=lambda: int(audit_proxy.record({"entry": "call"}).get()),
                               sink=self._sink, config=EngineConfig(step_timeout=self.config.step_timeout))
        except BaseException:
            self.stop()
            raise
        return self

    async def _connect(self) -> None:
        if not self.config.local_bus:
            url = self.config.nats_url
            if url is None:
                self.nats = EmbeddedNats()
                url = await asyncio.to_thread(self.nats.start)
            nats_bus = await NatsBus.connect(url, name="kitsune-node")
            self.bus = nats_bus
            self.events = await JetStreamEventStore.create(nats_bus, max_age_seconds=self.config.checkpoint_ttl)
            self.audit_log = await JetStreamAuditLog.create(nats_bus.client)
        self._sink = EventSink(self.io, self.events)
        self._sink.listeners = self.event_listeners
        await self._sink.start()
        await self.browser.start()
        self._subscriptions.append(await self.bus.subscribe(FLEET_OPEN, self._serve_open, queue="kitsune-open"))
        self._subscriptions.append(await self.bus.subscribe(TABS_LIST, self._serve_tabs, queue="kitsune-tabs"))
        await self._reconcile()

    def stop(self) -> None:
        """Stop everything this node started; checkpoints are dropped (reason ``shutdown``)."""
        try:
            self.io.run(self._disconnect(), timeout=60)
        except Exception as e:  # stop what can be stopped
            log.error("node stopped with an error (%s)", type(e).__name__)
        for actor in [*self._actors, *(ref for ref, _ in self._tabs.values())]:
            actor.stop(block=True, timeout=10)
        self._actors.clear()
        self._tabs.clear()
        self.store.close()
        self.io.close()

    async def _disconnect(self) -> None:
        for subscription in [*self._subscriptions, *(sub for _, sub in self._tabs.values())]:
            await subscription.unsubscribe()
        self._subscriptions.clear()
        if self._sink is not None:
            await self._sink.stop()
        await self.browser.stop()
        await self.bus.close()
        if self.nats is not None:
            await asyncio.to_thread(self.nats.stop)

    # calls

    def run(self, spec: CallSpec, workflow: WorkflowSource | None = None) -> CallResponse:
        """Run a container call on a call actor (from a thread)."""
        return self._on_call_actor(RunCall(spec, workflow))

    def resume(self, call: Any, resume_token: Any, observed: Any = None) -> CallResponse:
        """Resume a checkpointed call on a call actor (from a thread)."""
        return self._on_call_actor(ResumeCall(call, resume_token, observed))

    def _on_call_actor(self, message: RunCall | ResumeCall) -> CallResponse:
        assert self.calls is not None
        actor = CallActor.start(self.calls)
        try:
            response = actor.ask(message)
        finally:
            actor.stop()
        assert isinstance(response, CallResponse)
        return response

    async def run_async(self, message: RunCall | ResumeCall) -> CallResponse:
        """Run a call or resume from the loop, without blocking it."""
        assert self.calls is not None
        actor = CallActor.start(self.calls)
        try:
            response: CallResponse = await ask_from_loop(actor, message)
            return response
        finally:
            actor.stop(block=False)

    def replay(self, call: int) -> StepLog:
        """The step log of ``call`` rebuilt from the event stream alone."""
        return fold(self.io.run(self.events.read(call), timeout=30))

    # tabs

    def open_tab(self, url: str | None = None) -> int:
        """Open a tab (in its own window) with its actor; its id."""
        return self.io.run(self._open(url), timeout=60)

    def tab_actors(self) -> list[int]:
        """Tabs that have an actor."""
        return sorted(self._tabs)

    async def _open(self, url: str | None) -> int:
        tab_id = await self.browser.new_tab(url)
        await self._attach(tab_id)
        return tab_id

    async def _attach(self, tab_id: int) -> None:
        actor = TabActor.start(tab_id, self.browser, self.io)

        async def serve(data: bytes) -> bytes:
            request = decode(TabRequest, data)
            try:
                outcome: Outcome = await ask_from_loop(actor, request)
            except pykka.ActorDeadError:
                outcome = Failed(Failure(f"Tab {tab_id} is closed", "tab_closed", False, {"tabId": tab_id}))
            if isinstance(request.command, CloseTab) or not isinstance(outcome, Done):
                await self._reconcile()
            return encode(outcome)

        self._tabs[tab_id] = (actor, await self.bus.subscribe(tab_subject(tab_id), serve))

    async def _detach(self, tab_id: int) -> None:
        actor, subscription = self._tabs.pop(tab_id)
        await subscription.unsubscribe()
        actor.stop(block=False)

    async def _reconcile(self) -> None:
        """Give every open tab (popups included) an actor, and stop the actors of closed tabs."""
        open_tabs = self.browser.tab_ids()
        for tab_id in sorted(open_tabs - self._tabs.keys()):
            await self._attach(tab_id)
        for tab_id in sorted(self._tabs.keys() - open_tabs):
            await self._detach(tab_id)

    async def _serve_open(self, data: bytes) -> bytes:
        request = decode(TabRequest, data)
        assert isinstance(request.command, NewTab)
        outcome = await self.browser.execute(request.command, None, request.timeout)
        await self._reconcile()
        return encode(outcome)

    async def _serve_tabs(self, data: bytes) -> bytes:
        await self._reconcile()
        return encode(await self.browser.execute(GetTabs(), None, 5.0))
