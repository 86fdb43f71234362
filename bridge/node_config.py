"""What a node is made of: the browser driver it needs (:class:`Browser`) and how it runs (:class:`NodeConfig`)."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from playwright.async_api import Page

from actors.nats_connection import NatsAuth
from actors.tab_actor import Pause
from bridge.config import SessionTimes
from core.tasks import TaskLimits
from core.url_policy import UrlPolicy
from driver.quotas import Quotas
from driver.sessions import Sessions
from driver.site_tools import SiteTools
from messages.commands import Command
from messages.contract import (
    CHECKPOINT_CAPACITY,
    CHECKPOINT_TOTAL_CAPACITY,
    CHECKPOINT_TTL,
    CONTINUATION_TTL,
    LIVE_VIEW_LINKS,
    LIVE_VIEW_LINKS_PER_AGENT,
    LIVE_VIEW_TTL,
    MAX_SESSIONS,
    MAX_TABS,
    STEP_TIMEOUT,
    TASK_LEASE_TTL,
)
from messages.results import Outcome

__all__ = ["Browser", "NodeConfig"]


class Browser(Protocol):
    """What the node needs of the browser driver (``driver.ChromiumBrowser``)."""

    url_policy: Callable[[str | None], UrlPolicy] | None
    """An agent's URL lists (the node's for None), which the browser enforces on every request of every
    page of that agent's sessions (of the user tabs)."""
    own_endpoints: set[tuple[str, int]]
    """The node's listening endpoints, which the browser never reaches (its NATS, its HTTP API)."""
    next_tab_id: Callable[[], int]
    """Names each new page the moment it appears."""
    quotas: Quotas
    """Each agent's tabs and sessions and the node's caps, checked before a tab opens (the node sets the limits)."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def execute(self, command: Command, tab_id: int | None, timeout: float, *,
                      pause: Pause | None = None, agent: str | None = None, call: int | None = None,
                      path: str | None = None, within: float | None = None, session: str | None = None,
                      as_read: bool = False) -> Outcome: ...

    async def new_tab(self, url: str | None = None) -> int: ...

    async def tabs(self) -> list[dict[str, Any]]: ...

    def tab_ids(self) -> frozenset[int]: ...

    def page(self, tab_id: int) -> Page: ...

    async def needs_user(self, tab_id: int) -> dict[str, Any]: ...

    @property
    def running(self) -> bool: ...

    @property
    def sessions(self) -> Sessions:
        """The agents' sessions: their browser contexts, and the tombstones of closed ones."""

    @property
    def site_tools(self) -> SiteTools:
        """The WebMCP tools its pages declare, and the continuations of the calls of them."""


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """How a node runs."""

    nats_url: str | None = None
    """Join this NATS server or cluster (comma-separated URLs); None starts an embedded one."""
    nats_auth: NatsAuth = NatsAuth()
    """Credentials and TLS options for ``nats_url`` (an embedded server makes its own)."""
    fleet: str = "kitsune"
    """The fleet this node serves tabs in (the first token of its NATS subjects)."""
    audit_file: Path | None = None
    """The audit log's JSON-lines file (the stream alone when None)."""
    checkpoint_ttl: float = CHECKPOINT_TTL
    step_timeout: float = STEP_TIMEOUT
    max_checkpoints: int = CHECKPOINT_CAPACITY
    """Each agent's checkpoints at most, unless its policy says its own (``Node.checkpoint_capacity_of``)."""
    max_checkpoints_total: int = CHECKPOINT_TOTAL_CAPACITY
    """The node's checkpoints at most, of all agents."""
    sessions: SessionTimes = SessionTimes()
    """When idle sessions are swept (``max_exec_idle`` is raised to ``checkpoint_ttl`` at least)."""
    name: str = dataclasses.field(default_factory=lambda: "node-" + secrets.token_hex(4))
    """The node's name in its fleet (unique in it)."""
    max_tabs: int = MAX_TABS
    """Tabs this node takes at most: past it, a ``newTab`` goes to another node with room."""
    max_sessions: int = MAX_SESSIONS
    """Sessions (browser contexts) this node holds at most, of all agents."""
    agents: int | None = None
    """How many agents are configured (None: any may come); the fair share keeps room for one that holds nothing."""
    live_view_ttl: float = LIVE_VIEW_TTL
    """Seconds a Live View link of one of its tabs may be opened after it was made."""
    live_view_public_url: str | None = None
    """What its Live View links start with; the host the asking request named when None."""
    live_view_max_links_per_agent: int = LIVE_VIEW_LINKS_PER_AGENT
    """Live View links of its tabs one agent holds at once (its oldest unopened one goes past it)."""
    live_view_max_links: int = LIVE_VIEW_LINKS
    """Live View links of its tabs it holds at once, every agent's."""
    continuation_ttl: float = CONTINUATION_TTL
    """Seconds a site tool's continuation token may be redeemed after it was issued."""
    task_lease_ttl: float = TASK_LEASE_TTL
    """Seconds a task's lease lasts unless its owner's session is heard from."""
    task_limits: TaskLimits = TaskLimits()
    """An agent's tasks at most, a goal's characters, a task's tabs."""
