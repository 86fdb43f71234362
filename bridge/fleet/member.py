"""This node as a member of its fleet: the tab registry kept up, requests placed, claims and owners.

Each node is the one authority on its own tabs. A claim, a release or a takeover of a tab goes
to the node that holds the tab (``<fleet>.node.<name>.claims``: ``ClaimTab``, ``ReleaseClaims``,
``TakeOver``), which decides it under its lock
against its :class:`~core.claims.ClaimTable` and :class:`~core.policy.TabOwners`, and records it
in the registry (a compare-and-set on the tab's key) before it answers. Every write reaching one
of its tabs, from any node, is admitted against the same tables (:meth:`FleetMember.admission`):
a claim or a takeover, once answered, holds for every later write, wherever it comes from, and a
write costs no KV round trip. Claims cost one round trip each way per call (claim, release).
A node alone is a fleet of one: the same registry, with one node in it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from actors.bus import Handler, NatsBus
from actors.fleet_registry import FleetRegistry, NodeEntry, TabEntry, agent_key
from actors.loop import IoLoop
from actors.serving import taking, typed
from bridge.fleet.asking import ask_node
from core.claims import Claim, ClaimTable
from core.policy import CLOSED, ELSEWHERE, USER, Policy, TabOwners, owned_by_another
from core.session_names import ONE_SHOT, one_shot_name
from driver.sessions import SessionChange
from messages.codec import decode_outcome, encode
from messages.commands import CdpEvents, Command, GetTabs, NewTab, ResetSession
from messages.contract import SETTLE
from messages.errors import KitsuneError
from messages.fleet import Acknowledged, ClaimDecided, ClaimTab, ReleaseClaims, TakeOver, TookOver
from messages.requests import Subjects, TabRequest
from messages.results import Done, Failed, Failure, Outcome
from messages.wire import Message

if TYPE_CHECKING:
    from bridge.browser import Browser

__all__ = ["HANDLE", "FleetClaims", "FleetMember", "FleetOwners", "MemberHooks", "seen_by"]

log = logging.getLogger(__name__)

A = TypeVar("A")

_LIST_TIMEOUT = 5.0
_HOME_WAIT = 1.0
"""Seconds a draining node looks for where a call's session lives now (``home``)."""

HANDLE = "target:"
"""A tab's stable handle is ``target:<its CDP target id>``: kept across reconnects, it names that tab while it is
open and no other ever (a restarted node's Chromium gives its pages new target ids)."""


@dataclass(frozen=True, slots=True)
class MemberHooks:
    """What the member tells the rest of its node, and asks of it."""

    lost: Callable[[str, list[int]], Awaitable[None]]
    """Another node left the fleet, with its tabs (the registry saw its heartbeat stop)."""
    origin_of: Callable[[int], str | None]
    """The node that sent a call running here (``bridge.fleet.calls``): its claims are that node's."""
    taken_over: Callable[[int, str], None]
    """One of this node's tabs changed owner (its Live View links follow the owner)."""


class FleetOwners(TabOwners):
    """The owners of this node's tabs; another node's tab is ``ELSEWHERE``: only the tab's node gives
    a tab an owner or changes it, and it admits every write against its owner (no copy here to go stale)."""

    def __init__(self, local: Callable[[int], bool]) -> None:
        super().__init__()
        self._local = local

    def owner(self, tab: int) -> str:
        own = super().owner(tab)
        return ELSEWHERE if own == USER and not self.holds(tab) and not self._local(tab) else own

    def give(self, tab: int, agent: str) -> None:
        if self._local(tab):  # another node's tab got its owner from its node
            super().give(tab, agent)


class FleetMember:
    """This node's part in the fleet (on the node's loop, but the engine's claims port, from call threads)."""

    def __init__(self, name: str, browser: Browser, io: IoLoop, bus: NatsBus, subjects: Subjects, *,
                 max_tabs: int, policy_of: Callable[[str | None], Policy], hooks: MemberHooks) -> None:
        self.name = name
        self.max_tabs = max_tabs
        self._browser = browser
        self._io = io
        self._bus = bus
        self._subjects = subjects
        self._policy_of = policy_of
        self._hooks = hooks
        self.registry = FleetRegistry(bus.client, subjects.fleet, name, heartbeat=self.heartbeat, on_lost=hooks.lost)
        """The fleet's registry (of one node when it is alone)."""
        self.table = ClaimTable()
        """The claims of this node's tabs, whichever node's calls made them."""
        self.owners = FleetOwners(lambda tab: tab in browser.tab_ids())
        self.claims = FleetClaims(self)
        self._callers: dict[int, str] = {}
        """The node of each call holding a claim on a tab of this node (released if that node is lost)."""
        self._deciding = asyncio.Lock()
        self._writing: set[asyncio.Task[None]] = set()
        """Registry writes of session changes under way (a task needs a reference until it ends)."""
        self.draining = False
        """The node drains (``bridge.drain``): its heartbeat says so, and no new tab is placed on it."""

    # the node's tabs in the registry

    async def announce_draining(self) -> None:
        """Say in the registry at once that the node drains: no new tab is placed on it."""
        self.draining = True
        await self.registry.beat()

    async def home(self, agent: str | None, tab: int | None, command: Command | None = None) -> str | None:
        """Where the session of ``agent``'s call lives now when that is another serving node (what a draining node
        answers): the session ``command`` opens or resets, else ``tab``'s; the registry's, read within a second."""
        entry = self.registry.tabs.get(tab) if tab is not None else None
        name = (session_name(command.session, None) if isinstance(command, NewTab) else command.name
                if isinstance(command, ResetSession) else entry.session if entry is not None else None)
        return None if agent is None or name is None else await self.registry.session_home(agent, name, _HOME_WAIT)

    def heartbeat(self) -> NodeEntry:
        return NodeEntry(self.name, len(self._browser.tab_ids()), self.max_tabs, draining=self.draining)

    async def tabs_changed(self, opened: frozenset[int], closed: frozenset[int]) -> None:
        """Record the tabs that opened (owner and session) and those that closed."""
        for tab in opened:
            session = self._browser.sessions.of_tab(tab)
            if session is not None:  # a popup of an agent's page lives in its session: it is that agent's tab
                self.owners.give(tab, session.agent)
            await self._quietly(self.registry.put_tab(TabEntry(tab, self.name, session.agent if session else None,
                                                               session.name if session else None,
                                                               target=await self._browser.target_of(tab))))
        for tab in closed:
            expired = self._browser.sessions.expired(tab)  # closed with its session: a later write is session_expired
            self.owners.closed(tab, expired.error() if expired is not None else None)  # ids are never reused
            await self._quietly(self.registry.remove_tab(tab))

    async def node_lost(self, node: str, tabs: list[int]) -> None:
        """Another node left: its ``tabs`` are closed for good, and its calls' claims on this node's tabs end."""
        for tab in tabs:
            self.owners.closed(tab, KitsuneError("tab_closed", f"Tab {tab} was on node {node}, which left the fleet",
                                                 state={"tabId": tab, "node": node}))
        for call in [call for call, caller in self._callers.items() if caller == node]:
            await self._release(call, None)

    def session_changed(self, change: SessionChange) -> None:
        """Record where a session lives, or that it ended (on the loop)."""
        if change.op == "opened":
            write = self.registry.put_session(change.agent, change.session)
        elif change.op == "promoted":
            assert change.previous is not None
            write = self._promoted(change.agent, change.previous, change.session)
        else:
            write = self.registry.remove_session(change.agent, change.session)
        task = asyncio.get_running_loop().create_task(self._quietly(write))
        self._writing.add(task)
        task.add_done_callback(self._writing.discard)

    async def _promoted(self, agent: str, previous: str, name: str) -> None:
        await self.registry.put_session(agent, name)
        await self.registry.remove_session(agent, previous)

    # each agent's current tab

    def current(self, agent: str) -> int | None:
        """``agent``'s current tab, as any node of the fleet last set it."""
        return self.registry.currents.get(agent_key(agent))

    async def set_current(self, agent: str, tab: int | None) -> None:
        """Make ``tab`` ``agent``'s current tab fleet-wide (None: none)."""
        await self._quietly(self.registry.put_current(agent, tab))  # this node knows it at once; the others soon

    # placement and listing

    def nodes(self) -> list[dict[str, Any]]:
        """The fleet's nodes alive, by name: their tabs and room."""
        beats = self.registry.alive()
        return [{"name": b.node, "tabs": b.tabs, "max_tabs": b.max_tabs, "self": b.node == self.name,
                 "draining": b.draining}
                for b in sorted(beats.values(), key=lambda b: b.node)]

    def place(self, command: NewTab | ResetSession, agent: str | None, call: int | None) -> str:
        """The subject of the node a ``newTab`` of ``call`` opens on (from a call's thread): the node it
        names, its session's node, else the least loaded node with room that is not draining (this one first
        among equals). A ``resetSession`` goes to its session's node."""
        registry = self.registry
        if isinstance(command, ResetSession):
            held = registry.session_node(agent, command.name) if agent is not None else None
            if held is None:
                raise KitsuneError("session_not_found", f"resetSession: you have no session {command.name!r}",
                                   state={"session": command.name})
            return self._subjects.node(held, "sessions")
        alive = registry.alive()
        where = registry.session_node(agent, session_name(command.session, call)) if agent is not None else None
        if command.node is not None:
            if command.node not in alive:
                raise KitsuneError("unknown_node", f"newTab: no node {command.node!r} in the fleet",
                                   state={"param": "node"})
            if where is not None and where != command.node:  # a browser context lives in one Chromium
                raise KitsuneError("invalid_parameter", f"newTab: its session lives on node {where!r}, not "
                                   f"{command.node!r}; name that node or none", state={"param": "node"})
            return self._subjects.node(str(command.node), "open")
        if where is not None:
            return self._subjects.node(where, "open")
        counts = dict.fromkeys(alive, 0)
        for entry in list(registry.tabs.values()):
            if entry.node in counts:
                counts[entry.node] += 1
        room = [node for node in alive if counts[node] < alive[node].max_tabs and not alive[node].draining]
        if not room:
            raise KitsuneError("fleet_full", "No node of the fleet has room for another tab", retryable=True)
        return self._subjects.node(min(room, key=lambda node: (counts[node], node != self.name, node)), "open")

    async def describe(self) -> list[dict[str, Any]]:
        """Every tab of the fleet, each with its node and owner (its node's answer; the registry's when
        that node does not answer, with no URL or title)."""
        nodes = sorted(self.registry.alive())
        answers = await asyncio.gather(*(self._bus.request(self._subjects.node(node, "tabs"),
                                                          encode(TabRequest(GetTabs(), _LIST_TIMEOUT)),
                                                          _LIST_TIMEOUT + SETTLE) for node in nodes),
                                       return_exceptions=True)
        tabs: list[dict[str, Any]] = []
        for node, answer in zip(nodes, answers, strict=True):
            outcome = decode_outcome(answer) if isinstance(answer, bytes) else None
            if isinstance(outcome, Done):
                tabs += outcome.value["tabs"]
            else:
                tabs += [{"tabId": e.tab, "url": None, "title": None, "node": node, "owner": e.owner,
                          "session": {"agent": e.owner, "name": e.session} if e.owner else None}
                         for e in self.registry.tabs.values() if e.node == node]
        for tab in tabs:
            entry = self.registry.tabs.get(tab["tabId"])
            tab["target"] = HANDLE + entry.target if entry is not None and entry.target else None
        return sorted(tabs, key=lambda tab: int(tab["tabId"]))

    def resolve(self, handle: str) -> int:
        """The tab a ``target:<id>`` handle names, wherever it is in the fleet; ``tab_closed`` when it is not open
        (closed, or its node restarted): never another tab."""
        target = handle.removeprefix(HANDLE)
        found = next((e.tab for e in list(self.registry.tabs.values()) if e.target == target), None)
        if found is None:
            raise KitsuneError("tab_closed", f"{handle} names no open tab: its tab closed, or its node restarted",
                               state={"tabId": handle})
        return found

    def _own(self, tabs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """This node's tabs as the fleet lists them: with their node and owner (None for a user tab)."""
        for tab in tabs:
            owner = self.owners.owner(tab["tabId"])
            tab.update(node=self.name, owner=None if owner in (USER, CLOSED) else owner)
        return tabs

    def serving(self) -> dict[str, Handler]:
        """The subjects this node answers as a member: the listing of its tabs, their claims and takeovers."""
        tabs, claims = self._subjects.node(self.name, "tabs"), self._subjects.node(self.name, "claims")
        return {tabs: typed(tabs, {TabRequest: taking(GetTabs, self._list_own)}, outcomes=True),
                claims: typed(claims, {TakeOver: self._take_over_for, ClaimTab: self._claim_for,
                                       ReleaseClaims: self._release_for})}

    async def _list_own(self, request: TabRequest) -> Outcome:
        return Done({"tabs": self._own(await self._browser.tabs())})

    async def open_ids(self, wanted: frozenset[int] = frozenset()) -> frozenset[int]:
        """Ids of the fleet's open tabs: this node's, and the others' of the registry; a ``wanted`` tab
        the mirror lacks is looked up in the bucket (opened a moment ago on another node)."""
        own = self._browser.tab_ids()
        alive = self.registry.alive()
        ids = {tab for tab, entry in list(self.registry.tabs.items()) if entry.node in alive} | own
        for tab in wanted - ids:
            if await self.registry.lookup(tab) is not None:
                ids.add(tab)
        return frozenset(ids)

    # admission of requests to this node's tabs

    def admission(self, tab: int, request: TabRequest) -> Outcome | None:
        """Why a write may not run on ``tab`` now, whichever node sent it: ``tab_claimed`` by another
        call's parallel, ``tab_owned`` by another agent (nothing is sent); None when it may. A ``cdpEvents``
        is its owner's alone, read or not: the events hold what the owner's pages sent."""
        command = request.command
        if isinstance(command, CdpEvents):
            return self._owners_only(tab, request.agent)
        if not request.writes or not command.acts_on_tab:
            return None
        if request.call is not None and (conflict := self.table.check_write(request.call, tab)) is not None:
            return Failed(conflict)
        return self._owners_only(tab, request.agent)

    def _owners_only(self, tab: int, agent: str | None) -> Outcome | None:
        """``tab_owned`` when ``tab`` is another agent's (or a user tab ``agent``'s policy may not write)."""
        if agent is not None and (owned := owned_by_another(tab, self.owners.owner(tab), agent,
                                                            self._policy_of(agent))) is not None:
            return Failed(owned)
        return None

    # claims and takeovers, decided by the tab's node

    async def take_over(self, tab: int, agent: str) -> str:
        """Make ``agent`` the owner of ``tab``, wherever it is; the previous owner."""
        holder = await self.holder(tab)
        if holder == self.name:
            async with self._deciding:
                previous = self.owners.take_over(tab, agent)
                self._hooks.taken_over(tab, agent)
                await self._rerecord(tab)
            return previous
        return (await self._ask(holder, TakeOver(tab, agent), TookOver)).previous

    # another node's requests: a takeover, claim or release of one of this node's tabs, by its calls

    async def _take_over_for(self, request: TakeOver) -> TookOver:
        return TookOver(await self.take_over(request.tab, request.agent))

    async def _claim_for(self, request: ClaimTab) -> ClaimDecided:
        return ClaimDecided(await self._claim(request.call, request.owner, request.tab, request.node))

    async def _release_for(self, request: ReleaseClaims) -> Acknowledged:
        await self._release(request.call, request.owner)
        return Acknowledged()

    def owner_of(self, tab: int) -> str | None:
        """The agent ``tab`` belongs to: this node's record for its own tabs, the registry's for the others;
        None for a user tab or one not open."""
        if tab in self._browser.tab_ids():
            owner = self.owners.owner(tab)
            return None if owner in (USER, CLOSED, ELSEWHERE) else owner
        entry = self.registry.tabs.get(tab)
        return entry.owner if entry is not None else None

    def node_of(self, tab: int) -> str | None:
        """The node that holds ``tab``, as this node knows now (None: not open in the fleet)."""
        if tab in self._browser.tab_ids():
            return self.name
        entry = self.registry.tabs.get(tab)
        return entry.node if entry is not None else None

    def claim_on(self, node: str, call: int, owner: str, tab: int) -> Failure | None:
        """Have ``node`` (this one or another) decide a claim of this node's call (from the call's thread)."""
        if node == self.name:
            return self._io.run(self._claim(call, owner, tab, self.name), timeout=10)
        try:
            decided = self._io.run(self._ask(node, ClaimTab(call, owner, tab, self.name), ClaimDecided), timeout=10)
        except KitsuneError as e:
            return Failure.of(e)
        return decided.failure

    def release_on(self, node: str, call: int, owner: str | None) -> None:
        """Have ``node`` release the claims of this node's call (of one sequence, or all), from its thread."""
        if node == self.name:
            self._io.run(self._release(call, owner), timeout=10)
        else:
            self._io.run(self._ask(node, ReleaseClaims(call, owner), Acknowledged), timeout=10)

    async def _claim(self, call: int, owner: str, tab: int, node: str) -> Failure | None:
        async with self._deciding:
            if self.table.held().get(tab) == Claim(call, owner):
                return None  # held already: nothing to record again
            conflict = self.table.claim(call, owner, tab)
            if conflict is not None:
                return conflict
            caller = self._hooks.origin_of(call) or node
            if caller != self.name:
                self._callers[call] = caller
            try:
                await self._rerecord(tab)
            except Exception as e:  # not on record in the fleet: not claimed
                self.table.unclaim(tab, Claim(call, owner))
                return Failure(f"The claim on tab {tab} could not be recorded ({type(e).__name__})",
                               "fleet_unavailable", True, {"tabId": tab})
        return None

    async def _release(self, call: int, owner: str | None) -> None:
        async with self._deciding:
            tabs = [tab for tab, claim in self.table.held().items()
                    if claim.call == call and owner in (None, claim.owner)]
            self.table.release(call, owner)
            if not any(claim.call == call for claim in self.table.held().values()):
                self._callers.pop(call, None)
            for tab in tabs:
                await self._quietly(self._rerecord(tab))

    async def _rerecord(self, tab: int) -> None:
        """Write this node's tab ``tab`` to the registry as its tables say it is now."""
        if (entry := self.registry.tabs.get(tab)) is None:
            return
        owner = self.owners.owner(tab)
        claim = self.table.held().get(tab)
        await self.registry.put_tab(replace(entry, owner=None if owner in (USER, CLOSED) else owner,
                                            claim=(claim.call, claim.owner, self._callers.get(claim.call, self.name))
                                            if claim is not None else None))

    async def holder(self, tab: int) -> str:
        """The node that holds ``tab``: as this node knows, else as the bucket says; ``unknown_tab`` if none."""
        if (node := self.node_of(tab)) is not None:
            return node
        entry = await self.registry.lookup(tab)
        if entry is None:
            raise KitsuneError("unknown_tab", f"No open tab {tab}", state={"tabId": tab})
        return entry.node

    async def _ask(self, node: str, request: Message, answer: type[A]) -> A:
        return await ask_node(self._bus, self._subjects.node(node, "claims"), node, request, 5.0, answer)

    @staticmethod
    async def _quietly(write: Any) -> None:
        try:
            await write
        except Exception as e:  # the registry lags; the tab's node still decides
            log.error("fleet registry not updated (%s)", type(e).__name__)


class FleetClaims:
    """The engine's claims port (``core.claims.TabClaims``) over the fleet: each tab's node decides."""

    def __init__(self, member: FleetMember) -> None:
        self._member = member
        self._claimed: dict[int, set[tuple[int, str, str]]] = {}
        """Per call of this node: (tab, sequence, node) of each claim it made."""
        self._lock = threading.Lock()

    def claim(self, call: int, owner: str, tab: int) -> Failure | None:
        """Claim ``tab`` through its node, once per call and sequence: each write step of the sequence
        claims again, and a claim this call holds is answered here, with no round trip."""
        with self._lock:
            if any(t == tab and seq == owner for t, seq, _ in self._claimed.get(call, ())):
                return None
        node = self._member.node_of(tab)
        if node is None:
            return None  # not open: its write answers tab_closed
        failure = self._member.claim_on(node, call, owner, tab)
        if failure is None:
            with self._lock:
                self._claimed.setdefault(call, set()).add((tab, owner, node))
        return failure

    def check_write(self, call: int, tab: int) -> Failure | None:
        """For this node's tabs (another node's tab admits the write itself, against its own table)."""
        return self._member.table.check_write(call, tab)

    def release(self, call: int, owner: str | None = None) -> None:
        with self._lock:
            mine = self._claimed.get(call, set())
            ending = {(tab, seq, node) for tab, seq, node in mine if owner in (None, seq)}
            mine -= ending
            if not mine:
                self._claimed.pop(call, None)
        for node in sorted({node for _, _, node in ending}):
            try:
                self._member.release_on(node, call, owner)
            except Exception as e:  # that node is gone, or will release them when it learns this node is
                log.error("claims of call %d on node %s not released (%s)", call, node, type(e).__name__)

    def conflicts(self) -> dict[str, int]:
        return self._member.table.conflicts()

    def held(self) -> Any:
        return self._member.table.held()


def session_name(session: str | None, call: int | None) -> str:
    """The name a ``newTab``'s session has on its node: ``default`` when absent, ``call:<id>`` for one-shot."""
    if session is None:
        return "default"
    return one_shot_name(call) if session == ONE_SHOT and call is not None else session



def seen_by(agent: str | None, current: int | None, tabs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The fleet's ``tabs`` as ``agent`` sees them: each tab's owner ``you``, ``user`` or ``agent`` (another,
    unnamed), its session's name for its own agent only, and whether it is the agent's ``current`` tab."""
    return [{**{k: v for k, v in tab.items() if k not in ("owner", "session")},
             "owner": "user" if tab.get("owner") is None else ("you" if tab["owner"] == agent else "agent"),
             "current": tab["tabId"] == current,
             "session": tab["session"]["name"] if tab.get("session") and tab["session"]["agent"] == agent else None}
            for tab in tabs]
