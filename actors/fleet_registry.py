"""The fleet's registry: every tab of every node, the nodes' heartbeats, where sessions live.

Two JetStream KV buckets hold it, and every node keeps a mirror of both from a KV watch:

- ``KITSUNE_TABS``: ``<fleet>.tab.<id>`` is a tab (:class:`TabEntry`: its node, owner, session
  and claim); ``<fleet>.session.<agent>.<name>`` is the node a session's browser context lives
  on (a session's tabs stay on one node). A node writes only its own tabs' and sessions' keys,
  each change a compare-and-set on the key's revision; the others read them.
- ``KITSUNE_NODES``: ``<fleet>.<node>`` is a node's heartbeat (:class:`NodeEntry`), put every
  :data:`HEARTBEAT` seconds by a thread of its own, not by the node's loop (``actors.heartbeat``:
  a stalled loop does not drop a node that serves); the bucket's entries expire after :data:`NODE_TTL`.

A node is lost when its heartbeat stops: unseen for :data:`NODE_LOST_AFTER` seconds, measured
against this node's own heartbeat as the watch brings it back (a node cut off from NATS sees no
heartbeat at all, its own included, and so judges no other node lost), or at once when it
deletes its heartbeat on a clean stop. Each survivor is told (``on_lost``), and the lost node's
keys are deleted by compare-and-set (the survivors race; one wins).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import nats.errors
import nats.js.errors
import orjson
from nats.aio.client import Client
from nats.js.kv import KeyValue

from actors.buckets import nodes_bucket, tabs_bucket
from actors.jetstream import ensure_bucket, patiently

__all__ = ["HEARTBEAT", "NODE_LOST_AFTER", "FleetRegistry", "NodeEntry", "TabEntry", "agent_key"]

log = logging.getLogger(__name__)

HEARTBEAT = 2.0
"""Seconds between a node's heartbeats."""
NODE_LOST_AFTER = 8.0
"""A node whose heartbeat is this many seconds behind this node's own has left the fleet."""
_CHECK = 1.0
"""Seconds between two looks for lost nodes."""
_DELETED = ("DEL", "PURGE")


@dataclass(frozen=True, slots=True)
class TabEntry:
    """One tab of the fleet."""

    tab: int
    node: str
    """The node whose browser holds it (every request for it goes there)."""
    owner: str | None = None
    """The agent it belongs to; None for a user tab."""
    session: str | None = None
    """The name of its owner's session (its browser context); None for a user tab."""
    claim: tuple[int, str, str] | None = None
    """(call, sequence, node of the call) of the parallel that claims it, if one does."""
    target: str | None = None
    """Its CDP target id: unique to this page of this Chromium, so the handle ``target:<id>`` names no other tab."""

    def to_json(self) -> bytes:
        return orjson.dumps({"tab": self.tab, "node": self.node, "owner": self.owner, "session": self.session,
                             "claim": list(self.claim) if self.claim is not None else None, "target": self.target})

    @classmethod
    def from_json(cls, data: bytes) -> TabEntry:
        body = orjson.loads(data)
        claim = body.get("claim")
        return cls(int(body["tab"]), str(body["node"]), body.get("owner"), body.get("session"),
                   (int(claim[0]), str(claim[1]), str(claim[2])) if claim else None, body.get("target"))


@dataclass(frozen=True, slots=True)
class NodeEntry:
    """A node's heartbeat: who it is and how full it is."""

    node: str
    tabs: int
    max_tabs: int
    http: str | None = None
    """Where its HTTP API answers, when it knows."""
    loop_lag: float = 0.0
    """Seconds the node's event loop had not run its watchdog's tick when this beat was sent."""
    draining: bool = False
    """It is leaving the fleet (``bridge.drain``): no new tab is placed on it."""

    def to_json(self) -> bytes:
        return orjson.dumps({"node": self.node, "tabs": self.tabs, "max_tabs": self.max_tabs, "http": self.http,
                             "loop_lag": self.loop_lag, "draining": self.draining})

    @classmethod
    def from_json(cls, data: bytes) -> NodeEntry:
        body = orjson.loads(data)
        return cls(str(body["node"]), int(body["tabs"]), int(body["max_tabs"]), body.get("http"),
                   float(body.get("loop_lag") or 0.0), bool(body.get("draining")))



def agent_key(agent: str) -> str:
    """An agent's name as one KV key token (any name: a digest, not the name itself)."""
    return hashlib.sha256(agent.encode()).hexdigest()[:24]


class FleetRegistry:
    """This node's view of the fleet and its writes to it (on the node's loop)."""

    def __init__(self, client: Client, fleet: str, node: str, *, heartbeat: Callable[[], NodeEntry],
                 on_lost: Callable[[str, list[int]], Awaitable[None]]) -> None:
        self._client = client
        self._fleet = fleet
        self.node = node
        self._heartbeat = heartbeat
        self._on_lost = on_lost
        self._tabs_kv: KeyValue | None = None
        self._nodes_kv: KeyValue | None = None
        self.tabs: dict[int, TabEntry] = {}
        """Every tab of the fleet, as the watch last told."""
        self._revisions: dict[str, int] = {}
        """Each key's last revision, as the watch last told (or this node last wrote)."""
        self.sessions: dict[tuple[str, str], str] = {}
        """(agent key, session name) -> the node its context lives on."""
        self.currents: dict[str, int] = {}
        """Agent key -> the agent's current tab (the tab its calls run on when they name none)."""
        self.nodes: dict[str, NodeEntry] = {}
        """The nodes alive, by name."""
        self._seen: dict[str, float] = {}
        """When each node's heartbeat last came back (``time.monotonic()``)."""
        self._gone: dict[int, tuple[str, float]] = {}
        """Other nodes' tabs deleted lately: their node, and when (a survivor faster than this node may
        have deleted a lost node's tabs before this node judged it lost)."""
        self._tasks: list[asyncio.Task[None]] = []
        self._watchers: list[Any] = []

    # life cycle

    @property
    def key(self) -> str:
        """This node's key in ``KITSUNE_NODES`` (its heartbeat's)."""
        return f"{self._fleet}.{self.node}"

    async def start(self) -> None:
        """Make or open both buckets, beat once, mirror them, and start judging the others (the next
        heartbeats are ``actors.heartbeat``'s)."""
        await self._open_buckets()
        await patiently(self.beat)  # buckets just made may still elect their leaders
        await self.watch()
        self._tasks.append(asyncio.get_running_loop().create_task(self._judging()))

    async def resync(self) -> None:
        """After a reconnect: the buckets made again if the server lost them, this node's own keys
        written again, its heartbeat, and the watches restarted."""
        await self._open_buckets()
        for entry in [e for e in self.tabs.values() if e.node == self.node]:
            await self._put(self._tab_key(entry.tab), entry.to_json())
        for (agent, name), node in list(self.sessions.items()):
            if node == self.node:
                await self._put(f"{self._fleet}.session.{agent}.{name.replace(':', '=')}",
                                orjson.dumps({"node": self.node}))
        await patiently(self.beat)
        await self.watch()

    async def _open_buckets(self) -> None:
        self._tabs_kv = await ensure_bucket(self._client, tabs_bucket())
        self._nodes_kv = await ensure_bucket(self._client, nodes_bucket())

    async def watch(self) -> None:
        """(Re)start the watches of both buckets and wait for their current values."""
        for watcher in self._watchers:
            with contextlib.suppress(Exception):
                await watcher.stop()
        tabs_kv, nodes_kv = self._tabs_kv, self._nodes_kv
        assert tabs_kv is not None and nodes_kv is not None
        self._watchers = [await patiently(lambda: tabs_kv.watch(f"{self._fleet}.>")),
                          await patiently(lambda: nodes_kv.watch(f"{self._fleet}.>"))]
        for watcher, apply in zip(self._watchers, (self._apply_tab, self._apply_node), strict=True):
            while (entry := await watcher.updates(timeout=10.0)) is not None:  # the current values first
                apply(entry)
            self._tasks.append(asyncio.get_running_loop().create_task(self._follow(watcher, apply)))

    async def stop(self) -> None:
        """Stop beating and hand back at once: this node's heartbeat and tabs leave the fleet."""
        for task in self._tasks:
            task.cancel()
        self._tasks.clear()
        with contextlib.suppress(Exception):
            for key in [k for k in self._revisions if self._is_own(k)]:
                await self._delete(key)
            if self._nodes_kv is not None:
                await self._nodes_kv.delete(self.key)
        for watcher in self._watchers:
            with contextlib.suppress(Exception):
                await watcher.stop()
        self._watchers.clear()

    # reads

    def alive(self) -> dict[str, NodeEntry]:
        """The nodes alive now, this one included."""
        return dict(self.nodes)

    async def lookup(self, tab: int) -> TabEntry | None:
        """A tab of a live node: from the mirror, else from the bucket (a tab the watch has not brought yet)."""
        entry = self.tabs.get(tab)
        if entry is None and self._tabs_kv is not None:
            with contextlib.suppress(nats.js.errors.KeyNotFoundError, nats.errors.Error):
                found = await self._tabs_kv.get(self._tab_key(tab))
                if found.value and found.operation not in _DELETED:
                    entry = TabEntry.from_json(found.value)
        return entry if entry is not None and entry.node in self.nodes else None

    # writes (this node's own keys)

    async def put_tab(self, entry: TabEntry) -> None:
        """Record one of this node's tabs as it is now (compare-and-set on the revision this node wrote)."""
        self.tabs[entry.tab] = entry
        await self._put(self._tab_key(entry.tab), entry.to_json())

    async def remove_tab(self, tab: int) -> None:
        self.tabs.pop(tab, None)
        await self._delete(self._tab_key(tab))

    async def put_session(self, agent: str, name: str) -> None:
        self.sessions[(agent_key(agent), name)] = self.node
        await self._put(self._session_key(agent, name), orjson.dumps({"node": self.node}))

    async def remove_session(self, agent: str, name: str) -> None:
        self.sessions.pop((agent_key(agent), name), None)
        await self._delete(self._session_key(agent, name))

    async def put_current(self, agent: str, tab: int | None) -> None:
        """Make ``tab`` ``agent``'s current tab on every node (None: it has none)."""
        key = agent_key(agent)
        if tab is None:
            self.currents.pop(key, None)
            await self._delete(f"{self._fleet}.current.{key}")
        else:
            self.currents[key] = tab
            await self._put(f"{self._fleet}.current.{key}", orjson.dumps({"tab": tab}))

    def session_node(self, agent: str, name: str) -> str | None:
        """The live node an agent's session lives on, if it lives."""
        node = self.sessions.get((agent_key(agent), name))
        return node if node in self.nodes else None

    async def session_home(self, agent: str, name: str, wait: float) -> str | None:
        """The serving node other than this one that holds ``agent``'s session ``name`` now: the mirror's, else its
        key in the bucket read within ``wait`` seconds (a session restored there that the watch has not brought)."""
        node = self.sessions.get((agent_key(agent), name))
        if node is None and self._tabs_kv is not None:
            with contextlib.suppress(nats.js.errors.KeyNotFoundError, nats.errors.Error, TimeoutError):
                found = await asyncio.wait_for(self._tabs_kv.get(self._session_key(agent, name)), wait)
                if found.value and found.operation not in _DELETED:
                    node = str(orjson.loads(found.value).get("node"))
        entry = self.nodes.get(node) if node is not None else None
        return node if entry is not None and node != self.node and not entry.draining else None

    # internals

    def _tab_key(self, tab: int) -> str:
        return f"{self._fleet}.tab.{tab}"

    def _session_key(self, agent: str, name: str) -> str:
        return f"{self._fleet}.session.{agent_key(agent)}.{name.replace(':', '=')}"  # call:<id> (no : in a key)

    def _is_own(self, key: str) -> bool:
        tokens = key.split(".")
        if tokens[1] == "tab":
            entry = self.tabs.get(int(tokens[2]))
            return entry is not None and entry.node == self.node
        if tokens[1] == "current":
            return False  # the agent's, whichever node set it
        return self.sessions.get((tokens[2], ".".join(tokens[3:]).replace("=", ":"))) == self.node

    async def _put(self, key: str, value: bytes) -> None:
        assert self._tabs_kv is not None
        revision = self._revisions.get(key, 0)
        try:
            self._revisions[key] = await (self._tabs_kv.update(key, value, last=revision) if revision
                                          else self._tabs_kv.create(key, value))
        except nats.js.errors.KeyWrongLastSequenceError:  # changed by a survivor's clean-up, made before, or lost
            try:
                found = await self._tabs_kv.get(key)
            except nats.js.errors.KeyNotFoundError:  # a server that lost its state: made again
                self._revisions[key] = await self._tabs_kv.create(key, value)
                return
            assert found.revision is not None
            self._revisions[key] = await self._tabs_kv.update(key, value, last=found.revision)

    async def _delete(self, key: str) -> None:
        assert self._tabs_kv is not None
        revision = self._revisions.pop(key, None)
        with contextlib.suppress(nats.js.errors.KeyWrongLastSequenceError):  # already changed: not this one's
            await self._tabs_kv.delete(key, last=revision)

    def _apply_tab(self, entry: KeyValue.Entry) -> None:
        tokens = entry.key.split(".")
        deleted = entry.operation in _DELETED or not entry.value
        if entry.revision is not None and not deleted:
            self._revisions[entry.key] = max(self._revisions.get(entry.key, 0), entry.revision)
        if tokens[1] == "tab":
            tab = int(tokens[2])
            if deleted:
                if (theirs := self.tabs.get(tab)) is not None and theirs.node != self.node:
                    now = time.monotonic()
                    self._gone = {t: g for t, g in self._gone.items() if now - g[1] < 2 * NODE_LOST_AFTER}
                    self._gone[tab] = (theirs.node, now)
                    self.tabs.pop(tab, None)
            else:
                self.tabs[tab] = TabEntry.from_json(entry.value or b"")
        elif tokens[1] == "current":
            if deleted:
                self.currents.pop(tokens[2], None)
            else:
                self.currents[tokens[2]] = int(orjson.loads(entry.value or b"{}")["tab"])
        elif tokens[1] == "session":
            key = (tokens[2], ".".join(tokens[3:]).replace("=", ":"))
            if deleted:
                self.sessions.pop(key, None)
            else:
                self.sessions[key] = str(orjson.loads(entry.value or b"{}").get("node"))

    def _apply_node(self, entry: KeyValue.Entry) -> None:
        node = entry.key.split(".", 1)[1]
        if entry.operation in _DELETED or not entry.value:
            if node != self.node and node in self.nodes:
                self._tasks.append(asyncio.get_running_loop().create_task(self._lost(node)))
            return
        self.nodes[node] = NodeEntry.from_json(entry.value)
        self._seen[node] = time.monotonic()

    async def _follow(self, watcher: Any, apply: Callable[[KeyValue.Entry], None]) -> None:
        async for entry in watcher:
            if entry is not None:
                try:
                    apply(entry)
                except Exception as e:  # one bad entry must not stop the mirror
                    log.error("fleet registry entry %s not understood (%s)", entry.key, type(e).__name__)

    async def beat(self) -> None:
        """Put this node's heartbeat now (the next ones are the heartbeat thread's)."""
        assert self._nodes_kv is not None
        await self._nodes_kv.put(self.key, self._heartbeat().to_json())

    async def _judging(self) -> None:
        while True:
            await asyncio.sleep(_CHECK)
            own = self._seen.get(self.node)
            if own is None:
                continue
            for node, seen in list(self._seen.items()):
                if node != self.node and node in self.nodes and own - seen > NODE_LOST_AFTER:
                    try:
                        await self._lost(node)
                    except Exception as e:  # told again at the next look? no: it is forgotten; say so
                        log.error("node %s left, but its work here was not all ended (%s)", node,
                                  type(e).__name__)

    async def _lost(self, node: str) -> None:
        """Forget a node that left: its tabs and sessions leave the mirror, then the bucket."""
        if self.nodes.pop(node, None) is None:
            return
        self._seen.pop(node, None)
        log.warning("node %s left the fleet", node)
        tabs = [tab for tab, entry in self.tabs.items() if entry.node == node]
        sessions = [key for key, where in self.sessions.items() if where == node]
        try:
            await self._on_lost(node, sorted({*tabs, *(tab for tab, (n, _) in self._gone.items() if n == node)}))
        finally:
            for tab in tabs:
                self.tabs.pop(tab, None)
                with contextlib.suppress(Exception):
                    await self._delete_theirs(self._tab_key(tab))
            for agent, name in sessions:
                self.sessions.pop((agent, name), None)
                with contextlib.suppress(Exception):
                    await self._delete_theirs(f"{self._fleet}.session.{agent}.{name.replace(':', '=')}")

    async def _delete_theirs(self, key: str) -> None:
        """Delete a lost node's key, unless it changed since this node saw it (another survivor did)."""
        assert self._tabs_kv is not None
        revision = self._revisions.pop(key, None)
        if revision is not None:
            with contextlib.suppress(nats.js.errors.KeyWrongLastSequenceError):
                await self._tabs_kv.delete(key, last=revision)

