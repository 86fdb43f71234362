"""A node's Live Views: links to its tabs, the people controlling them, and the fleet's way to them.

The tab's node is the authority for its Live Views, as for its claims: it makes each link (the
token never leaves it but in the answer to the asker), checks each connection, holds the
controls, and refuses the agents' writes to a tab a person controls (:meth:`LiveViews.admission`).
A link follows its agent's hold on the tab: a takeover revokes the links of the agent that lost it
(:meth:`LiveViews.taken_over`), and whether a link controls is the policy's (``bridge.live.grants``), as
it is when a connection opens and at each input, unless a person granted it (:meth:`LiveViews.may_control`).
Another node forwards its requests there over ``<fleet>.node.<name>.live`` (``messages.live``), and
relays a person's connection there (:class:`~bridge.live.viewer.RelayedViewer`), so a link works
whichever node the person reaches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from playwright.async_api import Page

from actors.bus import Bus, BusError, Handler, Subscription
from actors.serving import typed
from bridge.fleet.asking import ask_node
from bridge.live.devtools import DevtoolsViewer
from bridge.live.links import Control, Link, LiveLinks, LiveRefusal
from bridge.live.viewer import HANDED_BACK, PING_EVERY, HeldViewer, LocalViewer, RelayedViewer, Send, Viewer
from core.policy import Policy, TabOwners, owned_by_another
from core.settings import LiveViewConfig
from driver.devtools import DevtoolsSession, FrontEndFile
from driver.live_inputs import InputAudit
from messages.codec import encode
from messages.commands import is_write
from messages.errors import KitsuneError
from messages.live import (
    AskHandbacks,
    AskPageHint,
    DevtoolsLink,
    FromPerson,
    Handbacks,
    IssueLink,
    LinkChecked,
    LinkIssued,
    OpenView,
    PageHint,
    PingViewer,
    ToPerson,
    ViewEnded,
    ViewerAlive,
    ViewerLeft,
    ViewOpened,
    ViewRefused,
)
from messages.requests import Subjects, TabRequest
from messages.results import Failed, Failure, Outcome
from messages.tokens import new_token
from messages.wire import LARGE, Message

if TYPE_CHECKING:
    from actors.audit_actor import Auditor

__all__ = ["MAX_HANDBACK_WAIT", "OPERATOR", "LiveViews", "Pages"]

log = logging.getLogger(__name__)

A = TypeVar("A")

OPERATOR = "operator:"
"""The prefix of the name a console operator's links are made for (``operator:<name>``)."""
MAX_HANDBACK_WAIT = 30.0
"""Seconds a wait for a hand-back lasts at most."""
_STOP_WAIT = 3.0
_RELAYED = LARGE - 4096
"""Bytes of JSON a DevTools message relayed to another node may have (the bus's bound, less the envelope's)."""
_STOPPING = ("node_stopping", "The node that holds this tab is stopping; this Live View has ended.", 1001)


class Pages(Protocol):
    """What Live View needs of the browser: its open tabs and their pages."""

    def tab_ids(self) -> frozenset[int]: ...

    def page(self, tab_id: int) -> Page: ...

    async def needs_user(self, tab_id: int) -> dict[str, Any]: ...

    async def devtools_session(self, tab_id: int, send: Send, *, limit: int | None = None) -> DevtoolsSession: ...

    async def devtools_file(self, path: str) -> FrontEndFile | None: ...


class LiveViews:
    """This node's Live Views, and its way to those of the fleet's other nodes (on the node's loop)."""

    def __init__(self, name: str, browser: Pages, bus: Bus, subjects: Subjects, owners: TabOwners,
                 config: LiveViewConfig, *, node_of: Callable[[int], Awaitable[str]],
                 policy_of: Callable[[str | None], Policy], auditor: Callable[[str | None], Auditor]) -> None:
        self.links = LiveLinks(config.ttl, max_per_agent=config.max_links_per_agent, max_links=config.max_links)
        """Its links, as many as the configuration lets one agent, and the node, hold at once."""
        self._public_url = config.public_url
        """What links start with (``live_view.public_url``); the asking request's base URL when None."""
        self.name = name
        self._bus = bus
        self._browser = browser
        self._subjects = subjects
        self._owners = owners
        self._node_of = node_of
        self._policy_of = policy_of
        self._auditor = auditor
        self._relayed: dict[str, tuple[HeldViewer, Subscription, list[float]]] = {}
        """Viewers of this node's tabs that people reached through another node, by viewer id."""
        self._watching: set[asyncio.Task[None]] = set()
        self._connections = 0
        self._none_open = asyncio.Event()
        self._none_open.set()

    # links

    async def issue(self, tab: int, agent: str, base_url: str, control: bool | None = None, *,
                    granted: bool = False, mode: str = "tab") -> dict[str, Any]:
        """A link to ``tab`` for ``agent`` (``operator:<name>`` for the console's): ``{tabId, url, expires_in,
        control, mode}``; it starts with the configured public URL, else with ``base_url`` (the request's).
        ``mode`` ``devtools`` opens DevTools for the tab (``/live/<tab>/devtools``): its control must be True.
        ``control`` None gives the agent's default (:meth:`default_control`); True must have been granted
        by the caller (``bridge.live.grants``): ``granted`` when a person approved it (it then outlasts a change
        of the agent's policy; else :meth:`may_control` checks it again at each connection and input).

        ``live_view_disabled`` when the agent's policy allows no Live View, ``tab_owned`` when the tab is
        another agent's (only its owner may show it), ``unknown_tab`` when it is not open, ``live_view_quota``
        past the links an agent or the node may hold.
        """
        self.may_show(tab, agent)
        control = self.default_control(agent) if control is None else control
        node = await self._node_of(tab)
        if mode == "devtools" and not control:
            raise KitsuneError("invalid_parameter", "A DevTools link controls the tab", state={"param": "control"})
        if node == self.name:
            token, expires_in = self._issue_here(tab, agent, control, granted, mode)
        else:
            issued = await self._ask(node, IssueLink(tab, agent, control, granted, mode), 5.0, LinkIssued)
            token, expires_in = issued.token, issued.expires_in
        base = self._public_url or base_url.rstrip("/")
        path = f"/live/{tab}/devtools" if mode == "devtools" else f"/live/{tab}"
        return {"tabId": tab, "url": f"{base}{path}#t={token}", "expires_in": expires_in, "control": control,
                "mode": mode}

    def default_control(self, agent: str) -> bool:
        """Whether ``agent``'s links carry control unless granted: an operator's do; an agent's do unless its
        policy is ``read_only`` or ``ask_before_act`` (its own link must not carry writes around its policy)."""
        if agent.startswith(OPERATOR):
            return True
        policy = self._policy_of(agent)
        return not (policy.read_only or policy.ask_before_act)

    def may_control(self, link: Link) -> bool:
        """Whether a connection of ``link`` may control its tab now: its control was granted by a person, or its
        agent's policy as it is now still gives it (a link made before the agent became ``ask_before_act`` or
        ``read_only`` must not keep acting for it)."""
        return link.control and (link.granted or self.default_control(link.agent))

    def allowed(self, agent: str) -> bool:
        """Whether ``agent`` may open Live Views (an operator always may)."""
        return agent.startswith(OPERATOR) or self._policy_of(agent).live_view

    async def page_hint(self, tab: int) -> dict[str, Any]:
        """The tab's needs-user hint (``{needs_user, reason, evidence}``), read by the tab's node."""
        node = await self._node_of(tab)
        if node == self.name:
            return await self._browser.needs_user(tab)
        return (await self._ask(node, AskPageHint(tab), 15.0, PageHint)).hint

    def _issue_here(self, tab: int, agent: str, control: bool, granted: bool, mode: str) -> tuple[str, float]:
        if tab not in self._browser.tab_ids():
            raise KitsuneError("unknown_tab", f"No open tab {tab}", state={"tabId": tab})
        self.may_show(tab, agent)
        token, _ = self.links.issue(tab, agent, control, granted, mode)
        self._auditor(agent).live_view("link", tab, control=control, **({"mode": mode} if mode != "tab" else {}))
        return token, self.links.ttl

    def may_show(self, tab: int, agent: str) -> None:
        """Raise unless ``agent`` may have a link to ``tab``: ``live_view_disabled``, or ``tab_owned`` when the tab
        is another's as this node knows (another node's tab is judged there)."""
        if not self.allowed(agent):
            raise KitsuneError("live_view_disabled", "Live View is not allowed for this agent (live_view: false)")
        if tab in self._browser.tab_ids() and (owned := self._owned_by_another(tab, agent)) is not None:
            raise KitsuneError(owned.code, owned.error.replace("to write to it", "to show it in Live View"),
                               state=owned.state)

    def _owned_by_another(self, tab: int, agent: str) -> Failure | None:
        """Why ``agent`` may not show ``tab`` (it is not, or no longer, its own); None for an operator."""
        if agent.startswith(OPERATOR):
            return None
        return owned_by_another(tab, self._owners.owner(tab), agent, self._policy_of(agent))

    def taken_over(self, tab: int, agent: str) -> None:
        """``agent`` took ``tab`` over: the links of the agents that lost it end, with their connections."""
        message = f"Tab {tab} was taken over by another agent; this Live View link has ended."
        if self.links.revoke_tab(tab, lambda link: self._owned_by_another(tab, link.agent) is None, message):
            log.info("tab %s taken over: the Live View links of its previous owner were revoked", tab)

    async def handbacks(self, tab: int, since: int | None, wait: float) -> dict[str, Any]:
        """``{tabId, handbacks, held}``; with ``since``, once the count is past it or ``wait`` seconds passed."""
        node = await self._node_of(tab)
        asked = AskHandbacks(tab, since, wait)
        seen = await self._handbacks_for(asked) if node == self.name else \
            await self._ask(node, asked, wait + 5.0, Handbacks)
        return {"tabId": tab, "handbacks": seen.count, "held": seen.held}

    async def _handbacks_for(self, asked: AskHandbacks) -> Handbacks:
        count = self.links.handbacks(asked.tab)
        if asked.since is not None and asked.wait > 0:
            count = await self.links.wait_handback(asked.tab, asked.since, min(asked.wait, MAX_HANDBACK_WAIT))
        return Handbacks(count, self.links.controlled(asked.tab))

    # the agents' writes

    def admission(self, tab: int, request: TabRequest) -> Outcome | None:
        """``tab_claimed`` by the user for a write to a tab a person controls now (nothing is sent)."""
        command = request.command
        if not self.links.controlled(tab) or not is_write(command) or not command.acts_on_tab:
            return None
        return Failed(Failure(f"Tab {tab} is claimed by the user: a person controls it in Live View until they "
                              "hand it back; nothing was sent", "tab_claimed", False,
                              {"tabId": tab, "by": "user", "reason": "live_view"}))

    # connections

    async def open(self, tab: int, token: object, send: Send, mode: str = "tab") -> Viewer:
        """A person's connection to ``tab`` with ``token``, wherever the tab is: the screencast's messages, or
        (``mode`` ``devtools``) CDP messages; :class:`LiveRefusal` if refused."""
        try:
            node = await self._node_of(tab)
        except KitsuneError as e:
            raise LiveRefusal("tab_closed", f"Tab {tab} is not open", 4410, 404) from e
        if node == self.name:
            return await self._open_here(tab, token, send, mode)
        if not isinstance(token, str):
            raise LiveRefusal("live_view_token_invalid", "This Live View link is not valid", 4401, 403)
        viewer = RelayedViewer(self._bus, self._subjects, node, new_token(12), send)
        await viewer.start(tab, token, mode)
        return viewer

    async def _open_here(self, tab: int, token: object, send: Send, mode: str = "tab",
                         relayed: bool = False) -> HeldViewer:
        """A connection to a tab of this node; ``relayed``: ``send`` publishes to the node the person reached."""
        link = self.links.check(tab, token, mode)
        if self._owned_by_another(tab, link.agent) is not None:  # a takeover revokes them; this is the backstop
            self.taken_over(tab, self._owners.owner(tab))
        control = self.links.connect(tab, token, self.may_control, mode)  # the policy as it is now
        if mode == "devtools":
            return await self._open_devtools(control, send, _RELAYED if relayed else None)
        agent = control.link.agent
        audit = InputAudit(lambda op, fields: self._auditor(agent).live_view(op, tab, **fields))
        try:
            page = self._browser.page(tab)
            viewer = LocalViewer(self.links, control, page, send, self._handed_back, audit,
                                 lambda: self.may_control(control.link), relayed=relayed)
            await viewer.start()
        except BaseException:
            self.links.release(control)
            raise
        self._auditor(agent).live_view("opened", tab, control=control.controls)
        return viewer

    async def _open_devtools(self, control: Control, send: Send, limit: int | None) -> DevtoolsViewer:
        """A person's DevTools on ``control``'s tab (it holds the tab); ``limit`` bounds each message relayed."""
        tab, agent = control.link.tab, control.link.agent

        def closed(control: Control, fields: dict[str, Any]) -> None:
            self._auditor(agent).live_view("closed", tab, **fields)

        try:
            session = await self._browser.devtools_session(tab, send, limit=limit)
            viewer = DevtoolsViewer(self.links, control, self._browser.page(tab), session,
                                    lambda: self.may_control(control.link), closed)
            await viewer.start()
        except KitsuneError as e:
            self.links.release(control)
            raise LiveRefusal(e.code, f"DevTools cannot open on tab {tab} ({e.code})", 1011, e.http_status) from e
        except BaseException:
            self.links.release(control)
            raise
        self._auditor(agent).live_view("opened", tab, control=True, mode="devtools")
        return viewer

    async def devtools_link(self, tab: int, token: object, done: bool = False) -> float:
        """Seconds the DevTools link ``token`` of ``tab`` may still open it; with ``done``, the person pressed
        "Done": their DevTools connection ends and the tab is handed back (the link with it). Decided by the tab's
        node; :class:`LiveRefusal` when the link does not open it."""
        try:
            node = await self._node_of(tab)
        except KitsuneError as e:
            raise LiveRefusal("tab_closed", f"Tab {tab} is not open", 4410, 404) from e
        if not isinstance(token, str):
            raise LiveRefusal("live_view_token_invalid", "This Live View link is not valid", 4401, 403)
        asked = DevtoolsLink(tab, token, done)
        answer: LinkChecked | ViewRefused = await (
            self._devtools_link_for(asked) if node == self.name else
            self._ask_either(node, asked, LinkChecked, ViewRefused))
        if isinstance(answer, ViewRefused):
            raise LiveRefusal(answer.code, answer.message, answer.close_code, answer.http_status)
        return answer.expires_in

    async def _devtools_link_for(self, request: DevtoolsLink) -> LinkChecked | ViewRefused:
        try:
            link = self.links.check(request.tab, request.token, "devtools")
        except LiveRefusal as e:
            return ViewRefused(e.code, e.message, e.close_code, e.http_status)
        left = self.links.seconds_left(link)
        if request.done:
            control = await self.links.hand_back_link(link)
            if control is not None:
                self._handed_back(control)
                control.end(*HANDED_BACK)
        return LinkChecked(left)

    async def devtools_file(self, path: str) -> FrontEndFile | None:
        """A file of DevTools' front end, as this node's browser bundles it (None when there is none)."""
        return await self._browser.devtools_file(path)

    def _handed_back(self, control: Control) -> None:
        self._auditor(control.link.agent).live_view("handed_back", control.link.tab)

    # the node's life

    def tabs_closed(self, tabs: frozenset[int]) -> None:
        """End the Live Views of tabs that closed, and revoke their links."""
        for tab in tabs:
            self.links.tab_closed(tab, f"Tab {tab} was closed; this Live View has ended.")

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[None]:
        """One person's connection to this node, from its opening to its close (:meth:`stop` waits for them)."""
        self._connections += 1
        self._none_open.clear()
        try:
            yield
        finally:
            self._connections -= 1
            if self._connections == 0:
                self._none_open.set()

    async def stop(self) -> None:
        """The node stops: every Live View ends with a message saying so, told before its socket closes
        (for at most :data:`_STOP_WAIT` seconds)."""
        self.links.end_all(*_STOPPING)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._none_open.wait(), _STOP_WAIT)

    def serving(self) -> dict[str, Handler]:
        """The subjects this node answers for its Live Views."""
        subject = self._subjects.node(self.name, "live")
        return {subject: typed(subject, {IssueLink: self._issue_for, AskPageHint: self._hint_for,
                                         AskHandbacks: self._handbacks_for, OpenView: self._open_for,
                                         PingViewer: self._ping_for, DevtoolsLink: self._devtools_link_for})}

    # other nodes' requests

    async def _ask(self, node: str, request: Message, timeout: float, answer: type[A]) -> A:
        return await ask_node(self._bus, self._subjects.node(node, "live"), node, request, timeout, answer)

    async def _ask_either(self, node: str, request: Message, *answers: type[A]) -> A:
        return await ask_node(self._bus, self._subjects.node(node, "live"), node, request, 5.0, *answers)

    async def _issue_for(self, request: IssueLink) -> LinkIssued:
        return LinkIssued(*self._issue_here(request.tab, request.agent, request.control, request.granted,
                                            request.mode))

    async def _hint_for(self, request: AskPageHint) -> PageHint:
        return PageHint(await self._browser.needs_user(request.tab))

    async def _ping_for(self, request: PingViewer) -> ViewerAlive:
        relayed = self._relayed.get(request.viewer)
        if relayed is not None:
            relayed[2][0] = time.monotonic()
        return ViewerAlive(relayed is not None)

    async def _open_for(self, request: OpenView) -> ViewOpened | ViewRefused:
        """A person's connection to one of this node's tabs, reached through another node: relayed."""
        bus, viewer_id, out = self._bus, request.viewer, self._subjects.live(request.viewer, "out")

        async def send(message: dict[str, Any]) -> None:
            await bus.publish(out, encode(ToPerson(message)))

        try:
            viewer = await self._open_here(request.tab, request.token, send, request.mode, relayed=True)
        except LiveRefusal as e:
            return ViewRefused(e.code, e.message, e.close_code, e.http_status)

        async def heard(message: FromPerson) -> None:
            await viewer.deliver(message.message)

        async def left(message: ViewerLeft) -> None:
            viewer.control.end("viewer_gone", "The viewer left", 1000)

        person = self._subjects.live(viewer_id, "in")
        subscription = await bus.subscribe(person, typed(person, {FromPerson: heard, ViewerLeft: left},
                                                         limit=LARGE))
        self._relayed[viewer_id] = (viewer, subscription, [time.monotonic()])
        watch = asyncio.create_task(self._relay_until_ended(viewer_id, out))
        self._watching.add(watch)
        watch.add_done_callback(self._watching.discard)
        return ViewOpened()

    async def _relay_until_ended(self, viewer_id: str, out: str) -> None:
        """Watch a relayed viewer: it ends on its own, or when its relay stops pinging; then tell the relay."""
        viewer, subscription, heard_at = self._relayed[viewer_id]
        while not viewer.control.ended.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(viewer.control.ended.wait(), PING_EVERY)
            if time.monotonic() - heard_at[0] > 3 * PING_EVERY:
                viewer.control.end("viewer_gone", "The node the viewer reached stopped relaying it", 1011)
        code, message, close_code = await viewer.ended()
        del self._relayed[viewer_id]
        with contextlib.suppress(BusError):
            await self._bus.publish(out, encode(ViewEnded(code, message, close_code)))
            await subscription.unsubscribe()
        await viewer.close()
