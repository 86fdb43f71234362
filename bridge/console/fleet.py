"""The console's view of the fleet: the registry's nodes and tabs, and each node's own part.

Nodes and tabs come from the fleet (``FleetMember.nodes``, ``Node.describe_tabs``). What only a
node knows, it tells itself: the calls running on it, its checkpoints (metadata only), its
sessions and their tombstones, who holds its tabs in Live View, and its tabs' thumbnails. Each
node answers those on ``<fleet>.node.<name>.console`` (:func:`console_serving`); the console's
own node answers its part directly. A node that does not answer is listed under ``missing``.
Tasks are the fleet's already (its KV bucket, mirrored on every node): the console reads its own
node's mirror, every agent's (configured on any node), as metadata only (no checkpoint, no
session: whether a lease is live).
"""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any, Protocol, TypeVar

from actors.bus import Bus, Handler
from actors.checkpoint_actor import CheckpointsPort
from actors.serving import typed
from bridge.browser import Browser
from bridge.console.thumbs import Thumbnails
from bridge.fleet.asking import ask_node
from bridge.fleet.member import FleetMember
from bridge.live import LiveViews
from bridge.metrics import NodeMetrics
from bridge.session_keeper import SessionKeeper
from bridge.tasks.held import HeldTakeovers
from bridge.tasks.service import Tasks
from core.settings import NodeConfig
from core.tasks import Task
from messages.fleet import AskNodePart, AskThumbnail, NodePart, Thumbnail
from messages.requests import Subjects
from messages.wire import Message

__all__ = ["GOAL_SHOWN", "PART_TIMEOUT", "ConsoleNode", "console_serving", "fleet_state", "node_part", "task_rows",
           "thumbnail"]

PART_TIMEOUT = 5.0
"""Seconds another node has to answer its part or a thumbnail."""
GOAL_SHOWN = 120
"""Characters of a task's goal the console shows, at most."""
_PARTS = ("calls", "checkpoints", "sessions", "tombstones")

A = TypeVar("A")


class ConsoleNode(Protocol):
    """What the console reads of its node: the parts it shows, and the fleet it asks for the rest."""

    @property
    def config(self) -> NodeConfig: ...
    @property
    def browser(self) -> Browser: ...
    @property
    def bus(self) -> Bus: ...
    @property
    def subjects(self) -> Subjects: ...
    @property
    def member(self) -> FleetMember: ...
    @property
    def checkpoints(self) -> CheckpointsPort | None: ...
    @property
    def sessions(self) -> SessionKeeper: ...
    @property
    def metrics(self) -> NodeMetrics: ...
    @property
    def live(self) -> LiveViews: ...
    @property
    def tasks(self) -> Tasks: ...
    @property
    def held_takeovers(self) -> HeldTakeovers: ...

    async def describe_tabs(self) -> list[dict[str, Any]]: ...


async def node_part(node: ConsoleNode) -> NodePart:
    """What ``node`` alone knows: its calls in flight, checkpoints, sessions, tombstones, Live View holders."""
    checkpoints = await asyncio.to_thread(node.checkpoints.describe, 10) if node.checkpoints is not None else []
    sessions = node.sessions.sessions
    table = sessions.table
    now, wall = table.clock(), table.wall()
    return NodePart(
        calls=node.metrics.running_calls(),
        checkpoints=checkpoints,
        sessions=[{"agent": s.agent, "name": s.name, "mode": s.mode, "tabs": sessions.tabs_of(s),
                   "age": round(wall - s.created, 1), "idle": round(now - s.used, 1)} for s in table],
        tombstones=[{"agent": t.agent, "name": t.name, "mode": t.mode, "reason": t.reason,
                     "closed": round(wall - t.closed_at, 1)} for t in table.tombstones()],
        held=[{"tabId": c.link.tab, "by": c.link.agent} for c in node.live.links.controls()],
    )


async def fleet_state(node: ConsoleNode) -> dict[str, Any]:
    """The fleet as the console shows it: nodes, tabs, every node's part (each row with its node), and its tasks."""
    nodes = node.member.nodes()
    names = [entry["name"] for entry in nodes]
    tabs, *parts = await asyncio.gather(node.describe_tabs(), *(_part_of(node, name) for name in names),
                                        return_exceptions=True)
    if isinstance(tabs, BaseException):
        raise tabs
    state: dict[str, Any] = {"node": node.config.name, "nodes": nodes, "missing": [],
                             **{section: [] for section in _PARTS}}
    held: dict[int, str] = {}
    for name, part in zip(names, parts, strict=True):
        if not isinstance(part, NodePart):
            state["missing"].append(name)
            continue
        for section in _PARTS:
            state[section] += [{"node": name, **row} for row in getattr(part, section)]
        held |= {int(h["tabId"]): str(h["by"]) for h in part.held}
    state["tabs"] = [_tab_row(tab, held) for tab in tabs]
    state["tasks"] = task_rows(node)
    state["takeovers"] = node.held_takeovers.pending()  # this node's: decided here
    return state


def task_rows(node: ConsoleNode) -> list[dict[str, Any]]:
    """Every task of the fleet (the node's mirror), newest first: what an operator may see of it."""
    now = time.time()  # a lease ends on the wall clock (``bridge.tasks``)
    return [_task_row(task, now) for task in node.tasks.store.listed()]


def _task_row(task: Task, now: float) -> dict[str, Any]:
    live = task.live(now)
    goal = task.goal if len(task.goal) <= GOAL_SHOWN else task.goal[:GOAL_SHOWN - 1] + "…"
    return {"id": task.id, "agent": task.agent, "goal": goal,
            "status": "active" if live else task.state_for(None, now), "lease_live": live,
            "lease_expires_in": round(task.lease_expires - now, 1) if live else None, "tabs": list(task.tabs),
            "age": round(now - task.created, 1)}


def _tab_row(tab: dict[str, Any], held: dict[int, str]) -> dict[str, Any]:
    session = tab.get("session")
    tab_id = int(tab["tabId"])
    return {"tabId": tab_id, "node": tab.get("node"), "agent": tab.get("owner"),
            "session": session["name"] if session else None, "title": tab.get("title"), "url": tab.get("url"),
            "held_by": held.get(tab_id)}


async def _part_of(node: ConsoleNode, name: str) -> NodePart:
    if name == node.config.name:
        return await node_part(node)
    return await _ask(node, name, AskNodePart(), NodePart)


async def thumbnail(node: ConsoleNode, thumbnails: Thumbnails, tab: int) -> bytes:
    """The JPEG of ``tab``, taken by its node; ``unknown_tab`` when it is open nowhere in the fleet."""
    holder = await node.member.holder(tab)
    if holder == node.config.name:
        return await thumbnails.of(tab)
    return base64.b64decode((await _ask(node, holder, AskThumbnail(tab), Thumbnail)).jpeg)


async def _ask(node: ConsoleNode, name: str, request: Message, answer: type[A]) -> A:
    return await ask_node(node.bus, node.subjects.node(name, "console"), name, request, PART_TIMEOUT, answer)


def console_serving(node: ConsoleNode) -> dict[str, Handler]:
    """The subject ``node`` answers the consoles of the fleet on (its part, its tabs' thumbnails)."""
    thumbnails = Thumbnails(node.browser)

    async def part(request: AskNodePart) -> NodePart:
        return await node_part(node)

    async def thumb(request: AskThumbnail) -> Thumbnail:
        return Thumbnail(base64.b64encode(await thumbnails.of(request.tab)).decode())

    subject = node.subjects.node(node.config.name, "console")
    return {subject: typed(subject, {AskNodePart: part, AskThumbnail: thumb})}
