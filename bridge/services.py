"""The services the HTTP routes depend on, each a small interface: a group of routes takes only those it uses,
and a route test builds only those. ``bridge.routes.app.create_app`` is the one place that makes them of a node.

The node's own parts serve where they fit as they are (``SessionKeeper`` is a :class:`SessionService`,
``bridge.tasks.service.Tasks`` a :class:`TaskService`, ``bridge.live.LiveViews`` both Live View services);
``bridge.routes.app`` adapts the node for the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from actors.call_actor import ResumeCall, RunCall
from bridge.live.viewer import Send, Viewer
from bridge.workflows import WorkflowLibrary
from core.calls import CallResponse
from core.policy import Policy
from driver.devtools import FrontEndFile
from messages.commands import Command
from messages.errors import KitsuneError
from messages.fleet import DrainState
from messages.results import Outcome

__all__ = ["CallService", "DrainService", "FleetService", "Health", "LiveLinkService", "LiveSocketService", "PolicyOf",
           "SessionService", "TabService", "TaskService"]

PolicyOf = Callable[[str | None], Policy]
"""The policy an agent's requests pass now (its capability groups, ask-before-act...); the node's for None."""
Health = Callable[[], dict[str, bool]]
"""Whether each part of the node answers, by name (``GET /healthz``)."""


class TabService(Protocol):
    """The fleet's tabs as the routes use them: each agent's current tab, which tabs are open, who owns them."""

    def current(self, agent: str) -> int | None:
        """``agent``'s current tab, as any node of the fleet last set it (None: none)."""

    async def set_current(self, agent: str, tab: int | None) -> None:
        """Make ``tab`` ``agent``'s current tab fleet-wide (None: none)."""

    async def describe(self) -> list[dict[str, Any]]:
        """The fleet's open tabs: ids, URLs, titles, each with its node, owner and session."""

    async def open_ids(self, wanted: frozenset[int] = frozenset()) -> frozenset[int]:
        """Ids of the fleet's open tabs, no title or URL read; each ``wanted`` one looked up if need be."""

    async def take_over(self, tab: int, agent: str) -> tuple[str, int]:
        """Make ``agent`` the owner of ``tab`` (decided by the tab's node), audited first as every action: the
        previous owner and the audit's call id."""

    async def needs_user(self, tab: int) -> dict[str, Any]:
        """Whether the tab shows something only a person can do (sign in, a human check), on any node."""

    def closed_error(self, tab: int) -> KitsuneError | None:
        """Why ``tab`` closed when it was more than a close (its session ended, its node left the fleet)."""

    def resolve(self, handle: str) -> int:
        """The open tab a stable handle (``target:<id>``) names; ``tab_closed`` when none does."""


class CallService(Protocol):
    """The calls: container calls and their resumes, direct actions, the workflow library."""

    @property
    def workflows(self) -> WorkflowLibrary | None:
        """The node's workflows (None: it has no workflow directory)."""

    async def run(self, message: RunCall | ResumeCall) -> CallResponse:
        """Run a call, or resume one, wherever the fleet runs it; its answer."""

    async def act(self, agent: str, command: Command, tab: int | None,
                  confirm_token: str | None = None) -> tuple[Outcome, int]:
        """Run one action for ``agent`` outside any container (``confirm_token``: the approval of its hold),
        audited first; the outcome and the call id."""


class SessionService(Protocol):
    """The agents' sessions (``GET /api/sessions``, ``DELETE /api/sessions/{name}``, their debug logs)."""

    def listing(self, agent: str) -> dict[str, Any]:
        """``agent``'s sessions (name, mode, tabs, created, last used) and tombstones."""

    async def close(self, agent: str, name: str) -> dict[str, Any]:
        """Close ``agent``'s session ``name`` (its tabs close), or forget its tombstone."""

    def debug_log(self, agent: str, name: str) -> dict[str, Any]:
        """The last CDP methods sent for ``agent``'s session ``name`` (``session_not_found`` for none of its own)."""

    def clear_debug_log(self, agent: str, name: str) -> dict[str, Any]:
        """Empty that log."""


class TaskService(Protocol):
    """The agents' tasks: each ``(agent, session)``'s records and leases (``bridge.tasks``)."""

    def listing(self, agent: str, session: str | None) -> list[dict[str, Any]]:
        """``agent``'s tasks, as ``session`` sees them."""

    async def create(self, agent: str, session: str | None, body: dict[str, Any]) -> dict[str, Any]:
        """A new task of ``agent`` owned by ``session``, from a request's body."""

    async def get(self, agent: str, session: str | None, task_id: str) -> dict[str, Any]:
        """One of ``agent``'s tasks."""

    async def delete(self, agent: str | None, task_id: str, *, expire: bool, by: str) -> dict[str, Any]:
        """Revoke (or ``expire``) a task: its agent's, or any for an operator (``agent`` None); ``by`` audited."""

    async def heartbeat(self, agent: str, session: str | None, task_id: str) -> dict[str, Any]:
        """Renew the lease ``session`` holds on the task."""

    async def checkpoint(self, agent: str, session: str | None, task_id: str, summary: Any,
                         messages: Any = None) -> dict[str, Any]:
        """Record where the task is, with ``summary`` and the agent's recent ``messages``."""

    async def complete(self, agent: str, session: str | None, task_id: str, summary: Any,
                       messages: Any = None) -> dict[str, Any]:
        """End the task done, with ``summary`` and the agent's recent ``messages``."""

    async def fork(self, agent: str, session: str | None, task_id: str, goal: Any = None) -> dict[str, Any]:
        """A new task of ``session`` from the checkpoint of another, on new tabs opened from its pages."""

    async def may_take_over(self, agent: str, session: str | None, task_id: str, force: bool) -> None:
        """Raise unless ``session`` could take the task over now."""

    async def take_over(self, agent: str, session: str | None, task_id: str, force: bool) -> dict[str, Any]:
        """Make ``session`` the task's owner, atomically."""


class LiveLinkService(Protocol):
    """Live View links as the API's routes give them (``bridge.live.grants``, ``bridge.live.stops``)."""

    async def issue(self, tab: int, agent: str, base_url: str, control: bool | None = None, *,
                    granted: bool = False, mode: str = "tab") -> dict[str, Any]:
        """A link to ``tab`` for ``agent``: ``{tabId, url, expires_in, control, mode}`` (``LiveViews.issue``)."""

    def allowed(self, agent: str) -> bool:
        """Whether ``agent`` may open Live Views."""

    def may_show(self, tab: int, agent: str) -> None:
        """Raise unless ``agent`` may be given a link to ``tab`` (its policy, the tab's owner)."""

    async def page_hint(self, tab: int) -> dict[str, Any]:
        """The tab's needs-user hint (``{needs_user, reason, evidence}``), read by the tab's node."""

    async def handbacks(self, tab: int, since: int | None, wait: float) -> dict[str, Any]:
        """``{tabId, handbacks, held}``; with ``since``, once the count is past it or ``wait`` seconds passed."""


class LiveSocketService(Protocol):
    """Live View's own page and WebSocket: a person's connections, which authenticate by the link's token."""

    def connection(self) -> AbstractAsyncContextManager[None]:
        """Held while one person's connection is open (the node waits for them as it stops)."""

    async def open(self, tab: int, token: object, send: Send, mode: str = "tab") -> Viewer:
        """The viewer of ``tab`` for the link ``token``, its messages to the person through ``send`` (``mode``:
        the screencast's, or DevTools' CDP messages); ``LiveRefusal`` when the token does not open it."""

    async def devtools_link(self, tab: int, token: object, done: bool = False) -> float:
        """Seconds the DevTools link ``token`` of ``tab`` may still open it (with ``done``: the tab is handed back
        from it); ``LiveRefusal`` when it does not open it."""

    async def devtools_file(self, path: str) -> FrontEndFile | None:
        """A file of DevTools' front end (None when there is none)."""


class DrainService(Protocol):
    """The drains of the fleet's nodes (``bridge.drain``), for operators."""

    async def drain(self, node: str, deadline: float | None) -> DrainState:
        """Start ``node``'s drain (this node's, or another's over NATS); where it is."""

    async def drain_state(self, node: str) -> DrainState:
        """Where ``node``'s drain is: ``serving``, ``draining``, or ``left`` (no longer in the fleet)."""


class FleetService(Protocol):
    """The fleet as ``GET /api/fleet`` shows it: where a ``newTab`` may go."""

    @property
    def name(self) -> str:
        """This node's name."""

    def nodes(self) -> list[dict[str, Any]]:
        """The fleet's nodes alive, by name: their tabs and room (``self`` marks this one)."""

    def draining(self) -> bool:
        """Whether this node drains (it is not ready: ``GET /readyz``)."""
