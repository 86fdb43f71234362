"""A Kitsune node: the event loop, NATS, the browser and the actors, wired together.

``bridge.wiring.start_node`` connects first (``bridge.connection``: NATS, embedded or joined, the
bus, the event and audit streams, the first tab ids), then ``Node`` builds every part whole with
what it needs, then ``Node.open`` starts them. A call runs on a call actor; tabs get an actor each:
calls on this node ask it directly, calls on other nodes over ``kitsune.tab.<id>.do``; ``newTab``
and ``getTabs`` go to the node itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pykka
from playwright.async_api import Error as PlaywrightError

from actors.audit_actor import AuditActor, Auditor, AuditTrail, JetStreamAuditLog, recorded
from actors.bus import Subscription
from actors.call_actor import BusDriver, CallActors, EventSink, LoopSteps, ResumeCall, RunCall
from actors.checkpoint_actor import CheckpointActor, CheckpointsPort
from actors.event_store import JetStreamEventStore
from actors.heartbeat import Heartbeat, LoopWatch
from actors.loop import IoLoop
from actors.sequence_actor import ActorSequences, BarrierActor
from actors.serving import taking, typed
from actors.session_vault import SessionVault
from actors.tab_actor import not_sent
from actors.tab_actors import TabActors
from actors.task_authority import AuthorityTaskStore
from actors.task_scopes import ScopedTaskStore
from actors.task_store import JetStreamTaskStore, LocalTaskStore
from actors.threads import SystemClock
from bridge.browser import Browser
from bridge.connection import Connection
from bridge.console import console_serving
from bridge.drain import Drain, DrainParts
from bridge.fleet.calls import CallForwarding
from bridge.fleet.member import FleetMember, MemberHooks, seen_by
from bridge.fleet.metrics import FleetMetrics
from bridge.fleet.resume import ResumeRoutes
from bridge.live import LiveViews
from bridge.metrics import NodeMetrics
from bridge.quota_metrics import set_quotas
from bridge.session_keeper import SessionKeeper
from bridge.site_tool_records import SiteToolRecords
from bridge.tasks.fleet import FleetTasks, TabNodes
from bridge.tasks.held import HeldTakeovers
from bridge.tasks.service import Tasks
from bridge.workflows import WorkflowLibrary
from core.calls import CallResponse, Calls
from core.checkpoints import CheckpointStore, DropReason
from core.engine import EngineConfig, Ports
from core.log_context import CALL, SESSION, STEP
from core.policy import ConfirmTokens, HeldStep, Policy, PolicyDriver
from core.session_names import ONE_SHOT
from core.settings import NodeConfig
from driver.proxy import endpoints_of
from driver.sessions import SessionChange
from driver.snapshots import describe
from messages.codec import replay
from messages.commands import Command, GetTabs, NewTab, ResetSession, is_write, secret_values
from messages.errors import KitsuneError
from messages.events import Event
from messages.requests import Subjects, TabRequest
from messages.results import Done, Failed, Failure, Outcome, status_of
from messages.steplog import StepLog

__all__ = ["Browser", "Node"]  # Browser lives in bridge.browser

log = logging.getLogger(__name__)


class Node:
    """One Kitsune node, built whole by ``bridge.wiring.start_node``; calls from threads or the loop."""

    def __init__(self, browser: Browser, config: NodeConfig, connection: Connection, io: IoLoop, *,
                 policy: Policy = Policy(), agent_policies: Mapping[str, Policy] | None = None,
                 workflows: WorkflowLibrary | None = None) -> None:
        self.config = config
        self.browser = browser
        self.io = io
        self.subjects = Subjects(config.fleet)
        self.nats = connection.nats
        """The NATS server this node started and owns (None when it joined one)."""
        self.bus = connection.bus
        self.events = connection.events
        self.policy = policy
        """The node's policy: that of every agent with no policy of its own, as it is now."""
        self.agent_policies: dict[str, Policy] = dict(agent_policies or {})
        """The policies of agents that have their own, as they are now."""
        self.confirms = ConfirmTokens()
        self.workflows = workflows
        self._wire_browser(connection)
        self.event_listeners: list[Callable[[Event], None]] = []
        """Called with every step-log event as it happens, on the emitting thread."""
        self.metrics = NodeMetrics(self)
        """The node's Prometheus metrics, in a registry of its own (``GET /metrics``)."""
        self.event_listeners.append(self.metrics.on_event)
        self._sink = EventSink(io, self.events, self.event_listeners)
        self.audit = AuditActor.start(config.audit_file, self.metrics.audit_recorded)
        self._audit_log = connection.audit_log
        self._audit_trail = AuditTrail(connection.audit_log, io, self.audit)
        self.member = FleetMember(config.name, browser, io, self.bus, self.subjects, max_tabs=config.max_tabs,
                                  policy_of=self.policy_of,
                                  hooks=MemberHooks(self._node_lost, self._origin_of, self._taken_over))
        """This node's part in its fleet: the registry of tabs, placement, the owners and claims of its tabs."""
        self.owners = self.member.owners
        self.claims = self.member.claims
        """The tab claims of parallel sequences, each decided by its tab's node (``bridge.fleet.member``)."""
        self.loop_watch = LoopWatch(self.metrics.registry, self.member.heartbeat)  # read by the heartbeat thread
        self._heartbeat = Heartbeat(connection.url, connection.auth, self.member.registry.key, self.loop_watch)
        """The thread that beats for it in the fleet (``actors.heartbeat``)."""
        self.fleet_metrics = FleetMetrics(self.member, config.fleet, self.metrics.registry)
        """Its identity and its view of the fleet, in the same registry (``bridge.fleet.metrics``)."""
        self._build_parts()

    def _wire_browser(self, connection: Connection) -> None:
        """Point the browser at this node: its URL rules, its own endpoints (never reached), the fleet's tab ids."""
        self.browser.url_policy = lambda agent: self.policy_of(agent).urls
        self.browser.own_endpoints.update(endpoints_of(connection.url, 4222))
        self.browser.next_tab_id = connection.tab_ids.take

    def _build_parts(self) -> None:
        """Build the parts that serve the node's tabs, calls, sessions and tasks, each whole."""
        c, io = self.config, self.io
        self.live = LiveViews(c.name, self.browser, self.bus, self.subjects, self.owners, c.live_view,
                              auditor=self.auditor, policy_of=self.policy_of, node_of=self.member.holder)
        """The Live Views of its tabs (``bridge.live``): a person controlling a tab holds the agents' writes."""
        self.tabs = TabActors(self.browser, io, self.bus, self.subjects, on_change=self._tabs_changed,
                              admission=self._admission)
        """The actors of this node's tabs."""
        self.drain = Drain(c.name, c.drain_deadline, DrainParts(
            self.member.announce_draining, self._audit_log.last_id, self.interrupt, self._leave, self.member.home))
        """Its drain (``bridge.drain``): once begun, no new call runs here, and the node leaves the fleet."""
        self.resumes = ResumeRoutes(io, self.bus, self.subjects, self._run_here, self._reissue_here)
        """Resumes of checkpoints wherever in the fleet they are held (``bridge.fleet.resume``)."""
        self.forwarding = CallForwarding(
            c.name, io, self.bus, self.subjects, node_of=self.member.node_of, alive=self._nodes_alive,
            record=lambda spec, agent: self.auditor(None).call(spec, agent), run_here=self._run_sent,
            policy_of=self.policy_of, step_timeout=c.step_timeout, workflow_sha256=self.workflow_sha256,
            reissue_here=self._reissue_here, events_of=self.events.read)
        """Calls on another node's tabs, sent there whole, and those sent here (``bridge.fleet.calls``)."""
        self.site_tools = SiteToolRecords(self.browser.site_tools, c.site_tools, self.metrics.registry,
                                          emit=self._sink, auditor=self.auditor)
        """The events, audit and metrics of its pages' site tools."""
        set_quotas(self.browser.quotas, c, self.policy_of, self.metrics.registry)
        remote = AuthorityTaskStore(c.tasks.authority) if c.tasks.authority is not None else None
        nodes = TabNodes(c.name, self.bus, self.subjects, node_of=self.member.node_of, alive=self._nodes_alive)
        self.tasks = Tasks(ScopedTaskStore(JetStreamTaskStore(self.bus.client, c.fleet), remote, LocalTaskStore(),
                                           nodes), io, self, c.tasks, owner_of=self.member.owner_of)
        """The agents' tasks (``bridge.tasks``): leases every write to their tabs passes (in this node's memory for
        ``tab`` ones on its tabs, in the fleet's KV for ``browser`` ones, or the host's authority for ``remote``)."""
        self.task_service = FleetTasks(self.tasks, nodes)
        """The tasks as the routes reach them: a ``tab`` task another node keeps, through that node."""
        self.held_takeovers = HeldTakeovers(self.confirms, self.task_service.take_over,
                                            lambda by, op, task: self.auditor(by).task(op, task))
        """The takeovers held for a person here (``tasks.takeover: ask``), as the console decides them."""
        self.browser.on_navigated = self.tasks.navigated
        key = c.sessions.persist_key
        self.sessions = SessionKeeper(self.browser.sessions, io, dataclasses.replace(
            c.sessions, max_exec_idle=max(c.sessions.max_exec_idle, c.checkpoints.ttl)), emit=self._sink,
            auditor=self.auditor, store=SessionVault(self.bus.client, c.fleet, key) if key is not None else None,
            persist_default=lambda agent: self.policy_of(agent).persist_sessions, on_change=self._session_changed)
        """The agents' sessions as the node keeps them: recorded, ended with their calls, swept, persistent ones
        saved (``save_persistent``) and restored through the fleet's sealed store."""
        self._build_calls()
        self._subscriptions: list[Subscription] = []
        self._interrupted = False
        self.bus.on_request = self._bus_request
        self.bus.on_reconnect = self._streams_again

    def _build_calls(self) -> None:
        """Build what runs calls: the checkpoints' and barriers' actors, the driver, the engine's calls."""
        c, io = self.config, self.io
        checkpoints = CheckpointActor.start(CheckpointStore(
            SystemClock(), capacity_of=self.checkpoint_capacity_of, total_capacity=c.checkpoints.total,
            ttl=c.checkpoints.ttl, on_drop=self._checkpoint_dropped, on_keep=self.resumes.kept))
        barriers = BarrierActor.start()
        self._actors: list[pykka.ActorRef[Any]] = [checkpoints, barriers, self.audit]
        self.checkpoints = CheckpointsPort(checkpoints)
        """The checkpoints, through the actor that owns them."""
        self._sequences = ActorSequences(barriers)
        self._driver = BusDriver(io, self.bus, self.subjects, local=self.tabs.ask, place=self.member.place,
                                 open_tabs=self.open_tab_ids, here=self.tabs.ask_here)
        self.calls = Calls(self.ports_for, self.resumes.reachable(self.checkpoints), audit=self.auditor(None),
                           sink=self._sink, config=EngineConfig(step_timeout=c.step_timeout),
                           workflow_sha256=self.workflow_sha256, on_resume=self.metrics.resumed,
                           on_end=self.sessions.call_ended)
        self._call_actors = CallActors(self.calls)

    # life cycle

    async def open(self) -> None:
        """Start the parts (on the loop): the records, the browser, the fleet's registry and heartbeat, the
        tasks' store, the sessions' sweeper, the subjects it serves; then find the browser's tabs."""
        self.loop_watch.start()
        await self._sink.start()
        await self._audit_trail.start()
        await self.browser.start()
        await self.member.registry.start()
        self._heartbeat.start()  # off this loop
        await self.tasks.store.start()
        self.sessions.start()
        opening = self.subjects.node(self.config.name, "open")
        resetting = self.subjects.node(self.config.name, "sessions")
        serving = {opening: typed(opening, {TabRequest: taking(NewTab, self._serve_open)}, outcomes=True),
                   resetting: typed(resetting, {TabRequest: taking(ResetSession, self._serve_open)}, outcomes=True),
                   **self.drain.serving(self.subjects.node(self.config.name, "drain")), **self.member.serving(),
                   **self.forwarding.serving(), **self.live.serving(), **self.task_service.serving(),
                   **console_serving(self)}
        self._subscriptions += await asyncio.gather(*(self.bus.subscribe(subject, handler, concurrent=True)  # at once
                                                      for subject, handler in serving.items()))
        listing = typed(self.subjects.tabs, {TabRequest: taking(GetTabs, self._serve_tabs)}, outcomes=True)
        self._subscriptions.append(await self.bus.subscribe(self.subjects.tabs, listing, queue="tabs",
                                                            concurrent=True))
        await self.tabs.reconcile()

    async def _streams_again(self) -> None:
        """After a reconnect: the streams, buckets and registry again (a restarted nats-server may have lost them)."""
        await JetStreamEventStore.create(self.bus, max_age_seconds=self.config.checkpoints.ttl)
        await JetStreamAuditLog.create(self.bus.client)
        await self.tasks.store.resync()
        await self.member.registry.resync()

    def _admission(self, tab: int, request: TabRequest) -> Outcome | None:
        """Why a request may not run on a tab of this node now: the node drains and its call is new, a person
        controls it, its call's node left the fleet, the fleet's claims, or its task."""
        return (self.drain.admission(tab, request) or self.live.admission(tab, request)
                or self.forwarding.admission(tab, request) or self.member.admission(tab, request)
                or self.tasks.admission(tab, request))

    async def _leave(self) -> None:
        """The drain's last step: the heartbeat stops, the registry entry and keys go (``bridge.drain``)."""
        await asyncio.to_thread(self._heartbeat.stop)
        await self.member.registry.stop()  # its registry entry and keys, the claims of its tabs with them

    async def _node_lost(self, node: str, tabs: list[int]) -> None:
        self.forwarding.origin_lost(node)
        await self.member.node_lost(node, tabs)

    async def _tabs_changed(self, opened: frozenset[int], closed: frozenset[int]) -> None:
        self.live.tabs_closed(closed)
        await self.member.tabs_changed(opened, closed)
        await self.tasks.tabs_closed(closed)

    def _origin_of(self, call: int) -> str | None:
        return self.forwarding.origin_of(call)

    def _taken_over(self, tab: int, agent: str) -> None:
        self.live.taken_over(tab, agent)  # a tab's links follow its owner

    def _session_changed(self, change: SessionChange) -> None:
        if change.op == "reset":  # open still, where it was: its audit entry is all there is to it
            return
        self.metrics.session_changed(dataclasses.replace(change, reason="stored") if change.op == "stored" else change)
        self.member.session_changed(change)

    def _bus_request(self, subject: str, seconds: float, outcome: str) -> None:
        self.metrics.bus_request(subject, seconds, outcome)
        self.fleet_metrics.bus_request(subject, seconds, outcome)

    def _checkpoint_dropped(self, call: int, reason: DropReason) -> None:
        self.metrics.checkpoint_dropped(reason)
        self.sessions.checkpoint_dropped(call, reason)
        self.resumes.dropped(call)

    def _reissue_here(self, call: int, agent: str | None) -> str | None:
        return self.checkpoints.reissue(call, agent)

    def auditor(self, agent: str | None) -> Auditor:
        """The audit of ``agent``'s calls and steps."""
        return Auditor(self._audit_trail, agent)

    def policy_of(self, agent: str | None) -> Policy:
        """The policy ``agent``'s actions pass now (resumed steps included); the node's for None."""
        return self.policy if agent is None else self.agent_policies.get(agent, self.policy)

    def _nodes_alive(self) -> frozenset[str]:
        return frozenset(self.member.registry.alive())

    def checkpoint_capacity_of(self, agent: str | None) -> int:
        """How many checkpoints of ``agent``'s calls are kept: its own policy's number, else the node's."""
        own = self.agent_policies.get(agent) if agent is not None else None
        return own.max_checkpoints if own is not None else self.config.checkpoints.per_agent

    def ports_for(self, agent: str | None, confirm_token: str | None = None) -> Ports:
        """The ports a call of ``agent`` runs with: its policy in the driver (its session: ``SESSION``), its audit."""
        policy = None if agent is None else self._policy_driver(agent, confirm_token)
        bus = self._driver if agent is None else self._driver.for_agent(agent)
        return Ports(policy or self._driver, SystemClock(), self.claims, self._sequences, self.auditor(agent),
                     self.sessions.approved, LoopSteps(self.io, self.tabs.holds, bus, policy))

    def _policy_driver(self, agent: str, confirm_token: str | None) -> PolicyDriver:
        return PolicyDriver(self._driver.for_agent(agent), agent, lambda: self.policy_of(agent), self.owners,
                            self.confirms, confirm_token=confirm_token, session=SESSION.get(), leases=self.tasks,
                            on_refusal=self.metrics.policy_refused)

    def workflow_sha256(self, name: str) -> str | None:
        return self.workflows.sha256(name) if self.workflows is not None else None

    def stop(self) -> None:
        """Stop everything this node started; checkpoints are dropped with their actor (reason ``shutdown``)."""
        self.io.run(self.astop(), timeout=120)
        self.io.close()

    async def interrupt(self) -> None:
        """End at once what runs on this node's tabs (the node stops; it does not wait for them): its persistent
        sessions are saved first, while the browser is whole; requests not yet started are refused with nothing
        sent, later ones too; running ones are cancelled; barriers release their sequences. A write that was
        running ends ``unknown``, and the audit log records that (``interrupted``)."""
        if self._interrupted:
            return
        self._interrupted = True
        await self.sessions.save_persistent()  # the persistent sessions' states, before anything of the browser goes
        await self.live.stop()  # the people in its Live Views are told, before the HTTP server closes their sockets
        self._sequences.abort_all()
        running = await self.tabs.interrupt()
        auditor = self.auditor(None)
        for tab_id, ticket in running:
            request = ticket.request
            try:
                await asyncio.to_thread(auditor.interrupted, request.call, request.path, request.command, tab_id)
            except KitsuneError as e:
                log.error("the interrupted write on tab %d could not be audited (%s)", tab_id, e.code)

    async def astop(self) -> None:
        """The same, on the loop (the loop itself is left running)."""
        await self.sessions.stop()
        await self.interrupt()
        await self._disconnect()
        actors = [*self._actors, *self.tabs.forget(), *self._call_actors.forget()]
        self._actors.clear()
        await asyncio.to_thread(lambda: [actor.stop(block=True, timeout=10) for actor in actors])

    async def _disconnect(self) -> None:
        """Stop each part in turn; a part that fails to stop is logged, and the others still stop."""
        stops: list[Callable[[], Awaitable[Any]]] = [
            functools.partial(asyncio.to_thread, self._heartbeat.stop), self.loop_watch.stop,
            self.member.registry.stop,  # hands its tabs back
            self.tasks.store.stop,
            self.resumes.stop,  # its checkpoints are no longer reached from other nodes
            *(sub.unsubscribe for sub in [*self._subscriptions, *self.tabs.subscriptions()]),
            self._sink.stop, self._audit_trail.stop, self.browser.stop, self.bus.close]
        if self.nats is not None:
            stops.append(functools.partial(asyncio.to_thread, self.nats.stop))
        self._subscriptions.clear()
        for stop in stops:
            try:
                await stop()
            except Exception as e:
                log.error("node stopped with an error (%s)", type(e).__name__)

    # calls

    async def run_async(self, message: RunCall | ResumeCall) -> CallResponse:
        """Run a call or resume from the loop, without blocking it: a resume where its checkpoint is, a call
        on the node of its tabs when they are all on another (``bridge.fleet.calls``). The tasks its session
        owns follow it."""
        tab = message.spec.default_tab if isinstance(message, RunCall) else None
        with await self.drain.admitting(message.agent, tab), self.tasks.following(message) as followed:
            if isinstance(followed, ResumeCall):
                return await self.resumes.resume(followed)
            forwarded = await self.forwarding.run(followed)
            return forwarded if forwarded is not None else await self._run_here(followed)

    async def reissue(self, call: int, agent: str) -> str | None:
        """A new resume token for ``agent``'s checkpoint of ``call``, wherever the fleet holds it."""
        return await self.resumes.reissue(call, agent)

    async def page_view(self, tab: int) -> dict[str, list[str]]:
        """A tab's headings and outline (none for another node's tab, or a page that does not answer)."""
        try:
            return await asyncio.wait_for(describe(self.browser.page(tab)), 3.0)
        except (KitsuneError, PlaywrightError, TimeoutError):
            return {"headings": [], "outline": []}

    async def _run_sent(self, message: RunCall) -> CallResponse:
        """A call another node sent here (or one of this node's that it declined): in flight while it runs."""
        with self.drain.flight(message.call):
            return await self._run_here(message)

    async def _run_here(self, message: RunCall | ResumeCall) -> CallResponse:
        return await self._call_actors.run(message)

    async def act(self, agent: str, command: Command, tab: int | None, confirm_token: str | None = None,
                  held: HeldStep | None = None) -> tuple[Outcome, int]:
        """Run one action for ``agent`` outside any container (a direct call); the outcome and its call id.
        Audited first: a write whose entry cannot be written is not sent; a read runs while its entry is
        written, and answers once it is (``audit_unavailable`` when it cannot be). An approval of a held step
        (``held``: a one-shot ``newTab``, ``bridge.approvals``) acts in that call's name and step."""
        if isinstance(command, NewTab) and command.session == ONE_SHOT and held is None:
            raise KitsuneError("invalid_parameter", 'newTab: a one-shot session ("call") ends with its container '
                               "call; a direct call names a reuse session", state={"param": "session"})
        with await self.drain.admitting(agent, tab, command):
            return await self._act(agent, command, tab, confirm_token, held)

    async def _act(self, agent: str, command: Command, tab: int | None, confirm_token: str | None,
                   held: HeldStep | None) -> tuple[Outcome, int]:
        entry = self.auditor(agent).direct(command, tab)
        reading = None if is_write(command) else asyncio.ensure_future(self._direct(agent, command, tab,
                                                                                    confirm_token))
        try:
            call = await recorded(entry)
        except BaseException:
            if reading is not None:
                reading.cancel()
            raise
        named, _ = CALL.set(call if held is None else held.call), STEP.set(held.path if held else None)
        session = SESSION.get()
        self.tasks.direct(agent, session, call, secret_values(command))
        outcome: Outcome = Failed(Failure("the direct call did not end", "internal", False))
        try:
            outcome = await (reading or self._direct(agent, command, tab, confirm_token))
        finally:
            CALL.reset(named)
            self.tasks.direct(agent, session, call, [], step={
                "call": call, "path": "0", "action": command.action, "tabId": tab, "status": status_of(outcome),
                "code": None if isinstance(outcome, Done) else outcome.failure.code})
        return outcome, call

    async def _direct(self, agent: str, command: Command, tab: int | None, confirm_token: str | None) -> Outcome:
        """A direct call's action through ``agent``'s policy: a read of a tab of this node from the loop (no thread
        on its way), anything else through the driver on a thread of its own."""
        driver = self._policy_driver(agent, confirm_token)
        timeout = command.timeout if isinstance(command.timeout, float) else self.config.step_timeout
        if tab is not None and not is_write(command):
            read = await LoopSteps(self.io, self.tabs.holds, self._driver.for_agent(agent), driver).read(command, tab,
                                                                                                      timeout)
            if read is not None:
                return read
        return await asyncio.to_thread(driver.execute, command, tab, timeout)

    async def describe_tabs(self) -> list[dict[str, Any]]:
        """The fleet's open tabs: ids, URLs, titles, each with its node, owner and session. A tab that
        opened while they were read (a popup) has no actor or owner yet: they are read again once it has."""
        await self.tabs.reconcile()
        listed = await self.member.describe()
        if self.browser.tab_ids() - set(self.tabs.ids()):
            await self.tabs.reconcile()
            listed = await self.member.describe()
        return listed

    async def open_tab_ids(self, wanted: frozenset[int] = frozenset()) -> frozenset[int]:
        """Ids of the fleet's open tabs, no title or URL read; each ``wanted`` one looked up if need be."""
        await self.tabs.reconcile()
        return await self.member.open_ids(wanted)

    async def take_over(self, tab: int, agent: str) -> str:
        """Make ``agent`` the owner of ``tab`` (decided by the tab's node); the previous owner."""
        return await self.member.take_over(tab, agent)

    async def needs_user(self, tab: int) -> dict[str, Any]:
        """Whether the tab shows something only a person can do (sign in, a human check), on any node."""
        return await self.live.page_hint(tab)

    def revoke_site_calls(self, calls: set[int], tabs: tuple[int, ...], code: str, message: str) -> int:
        """End the site-tool calls of ``calls`` on ``tabs`` of this node, their continuation tokens revoked (their
        task's authority ended); how many."""
        return self.browser.site_tools.revoke(calls, tabs, code, message)

    def healthy(self) -> dict[str, bool]:
        """Whether each part of the node answers."""
        return {"nats": self.bus.connected, "browser": self.browser.running}

    def replay(self, call: int) -> StepLog:
        """The step log of ``call`` rebuilt from the event stream alone."""
        return replay(self.io.run(self.events.records(call), timeout=30))

    # tabs

    def actor_refs(self) -> list[pykka.ActorRef[Any]]:
        """The node's running actors: the long-lived ones, then one per tab (metrics)."""
        return [*self._actors, *self.tabs.refs()]

    async def _serve_open(self, request: TabRequest) -> Outcome:
        """A ``newTab`` placed on this node, or a ``resetSession`` of a session it holds; its tabs found again."""
        if (refused := self.drain.admission(None, request)) is not None:
            return refused
        left = request.seconds_left(time.time())
        if left <= 0:  # it waited past its deadline on the way: never opened late
            return not_sent(request.command, None, "its deadline passed before it arrived")
        outcome = await self.browser.execute(request.command, None, left, agent=request.agent, call=request.call)
        await self.tabs.reconcile()
        return outcome

    async def _serve_tabs(self, request: TabRequest) -> Outcome:
        """A ``getTabs`` of a call: the fleet's tabs as its agent sees them (``GET /api/tabs``'s)."""
        agent = request.agent
        return Done({"tabs": seen_by(agent, self.member.current(agent) if agent else None, await self.describe_tabs())})

