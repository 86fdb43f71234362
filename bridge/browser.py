"""What a node needs of the browser driver: :class:`Browser` (how the node runs is ``core.settings.NodeConfig``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from playwright.async_api import Page

from actors.tab_actor import Pause
from core.url_policy import UrlPolicy
from driver.devtools import DevtoolsSession, FrontEndFile
from driver.quotas import Quotas
from driver.sessions import Sessions
from driver.site_tools import SiteTools
from messages.commands import Command
from messages.results import Outcome

__all__ = ["Browser"]


class Browser(Protocol):
    """What the node needs of the browser driver (``driver.ChromiumBrowser``)."""

    url_policy: Callable[[str | None], UrlPolicy] | None
    """An agent's URL lists (the node's for None), which the browser enforces on every request of every
    page of that agent's sessions (of the user tabs)."""
    own_endpoints: set[tuple[str, int]]
    """The node's listening endpoints, which the browser never reaches (its NATS, its HTTP API)."""
    on_navigated: Callable[[int, str], None]
    """Told (on the loop) of each navigation of a tab's main frame: the tab and its new URL."""
    next_tab_id: Callable[[], int]
    """Names each new page the moment it appears."""
    quotas: Quotas
    """Each agent's tabs and sessions and the node's caps, checked before a tab opens (the node sets the limits)."""

    def launch_early(self) -> None:
        """Begin launching the browser in the background; ``start`` finishes (or fails) it, ``stop`` ends it."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def execute(self, command: Command, tab_id: int | None, timeout: float, *,
                      pause: Pause | None = None, agent: str | None = None, call: int | None = None,
                      path: str | None = None, within: float | None = None, session: str | None = None,
                      as_read: bool = False) -> Outcome: ...

    async def new_tab(self, url: str | None = None) -> int: ...

    async def tabs(self) -> list[dict[str, Any]]: ...

    def tab_ids(self) -> frozenset[int]: ...

    async def target_of(self, tab_id: int) -> str | None: ...

    def page(self, tab_id: int) -> Page: ...

    async def needs_user(self, tab_id: int) -> dict[str, Any]: ...

    async def devtools_session(self, tab_id: int, send: Callable[[dict[str, Any]], Awaitable[None]], *,
                               limit: int | None = None) -> DevtoolsSession:
        """A person's DevTools on a tab (Live View ``mode=devtools``), not started yet."""

    async def devtools_file(self, path: str) -> FrontEndFile | None:
        """A file of the DevTools front end the browser bundles (None when there is none)."""

    @property
    def running(self) -> bool: ...

    @property
    def sessions(self) -> Sessions:
        """The agents' sessions: their browser contexts, and the tombstones of closed ones."""

    @property
    def site_tools(self) -> SiteTools:
        """The WebMCP tools its pages declare, and the continuations of the calls of them."""
