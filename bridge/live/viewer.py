"""One person's Live View connection to a tab of this node, and its relay from another node.

A viewer speaks JSON messages. From the person: ``ack`` (a frame was shown: accepted and ignored, since a frame
is acknowledged to the screencast once its send to the person finished), the input messages of
:func:`~driver.screencast.input_event`, ``done`` (hand the tab back), ``ping``. To the person:
``ready`` (with ``control``: false for a view-only link; again when a link's control ends because its
agent's policy no longer gives it), ``frame``, ``error`` (an input message
that was refused, with its ``code``), and last ``ended`` with a code, a message and the WebSocket
close code. Every input that is sent, or refused on a view-only link, passes
:class:`~driver.live_inputs.InputAudit` first. A :class:`LocalViewer` drives the tab's page; a
:class:`RelayedViewer`, on the node the person reached, carries the same messages over NATS to the
node that holds the tab (``<fleet>.live.<id>.in`` and ``.out``: ``messages.live``); the relay, not the person,
acknowledges each frame it sent on, and the tab's node publishes the next frame once the one before is
acknowledged (so the screencast makes a frame while the one before crosses NATS: never more than one on the way).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from actors.bus import Bus, BusError, Subscription
from actors.serving import ask, typed
from bridge.live.links import Control, LiveLinks, LiveRefusal
from driver.live_inputs import InputAudit
from driver.screencast import Screencast
from messages.codec import encode
from messages.errors import KitsuneError
from messages.live import (
    FromPerson,
    OpenView,
    PingViewer,
    ToPerson,
    ViewEnded,
    ViewerAlive,
    ViewerLeft,
    ViewOpened,
    ViewRefused,
)
from messages.requests import Subjects
from messages.wire import LARGE, Message

__all__ = ["HANDED_BACK", "PING_EVERY", "HeldViewer", "LocalViewer", "RelayedViewer", "Send", "Viewer"]

log = logging.getLogger(__name__)

A = TypeVar("A")

Send = Callable[[dict[str, Any]], Awaitable[None]]
"""Sends one message to the person."""
Ending = tuple[str, str, int]
"""Why a Live View ended: code, message, WebSocket close code."""

HANDED_BACK: Ending = ("handed_back", "You handed the tab back to the agent. You can close this page.", 1000)
LEFT_VIEW_ONLY: Ending = ("viewer_gone", "You left this view-only Live View.", 1000)
VIEW_ONLY = ("This Live View is view-only: its agent's policy (ask_before_act or read_only) lets no input through "
             "a link it asked for. An operator's link (the console), or one whose control was approved, can act. "
             "Nothing was sent.")
TOO_FAST = "Too many clicks and keys at once (each is audited); this one was not sent. Slow down."
PING_EVERY = 5.0
"""Seconds between a relay's pings to the tab's node (which ends a viewer not heard of for 3 of them)."""


class Viewer(Protocol):
    """A Live View connection, wherever its tab is."""

    async def deliver(self, message: dict[str, Any]) -> None:
        """A message from the person."""
        ...

    async def ended(self) -> Ending:
        """Wait for the end; why it ended."""
        ...

    async def close(self) -> None:
        """Let go of everything it holds (idempotent)."""
        ...


class HeldViewer(Viewer, Protocol):
    """A connection on the tab's own node: its :class:`Control` says whether it holds the tab, and why it ended."""

    control: Control


class LocalViewer:
    """A person's connection to a tab of this node: its screencast out, their input in (when its link controls)."""

    def __init__(self, links: LiveLinks, control: Control, page: Page, send: Send,
                 on_hand_back: Callable[[Control], None], audit: InputAudit,
                 may_control: Callable[[], bool] = lambda: True, *, relayed: bool = False) -> None:
        self.control = control
        self._may_control = may_control
        """Whether its link may still control the tab (its agent's policy, as it is now)."""
        self._links = links
        self._send = send
        self._on_hand_back = on_hand_back
        self._audit = audit
        self._relayed = relayed
        self._relay_took_last = asyncio.Event()
        """Relayed: the relay acknowledged the last frame published (none yet: set)."""
        self._relay_took_last.set()
        self._screencast = Screencast(page, self._relay_frame if relayed else send)
        self._page = page
        page.on("close", self._page_closed)

    async def _relay_frame(self, frame: dict[str, Any]) -> None:
        """Publish a frame to the relay once it acknowledged the one before."""
        await self._relay_took_last.wait()
        self._relay_took_last.clear()
        await self._send(frame)

    def _page_closed(self, page: Page) -> None:
        self.control.end("tab_closed", f"Tab {self.control.link.tab} was closed; this Live View has ended.", 4410)

    async def start(self) -> None:
        """Start the screencast; ``ready`` goes to the person first."""
        await self._ready()
        try:
            await self._screencast.start()
        except PlaywrightError as e:
            tab = self.control.link.tab
            raise LiveRefusal("tab_closed", f"Tab {tab} cannot be shown ({type(e).__name__})", 4410, 410) from e

    async def deliver(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        try:
            if kind == "ack":  # a person's is ignored: each frame was acknowledged once sent
                if self._relayed:
                    self._relay_took_last.set()
            elif kind == "done" and self.control.controls:
                await self._links.hand_back(self.control)
                self._on_hand_back(self.control)
                self.control.end(*HANDED_BACK)
            elif kind == "done":
                self.control.end(*LEFT_VIEW_ONLY)
            elif kind != "ping":
                await self._input(message)
        except ValueError as e:
            await self._send({"type": "error", "code": "invalid_input", "message": str(e)})
        except PlaywrightError:
            if self._page.is_closed():
                self._page_closed(self._page)

    async def _ready(self) -> None:
        link = self.control.link
        await self._send({"type": "ready", "tabId": link.tab, "agent": link.agent, "control": self.control.controls})

    async def _input(self, message: dict[str, Any]) -> None:
        """Send the person's input to the page, audited first; none from a view-only link (audited as refused),
        nor from one whose control its agent's policy withdrew since (it goes on view-only: ``ready`` again)."""
        if self.control.controls and not self._may_control():
            self._links.withdraw(self.control)
            log.info("tab %s: a Live View's control ended: its agent's policy gives it no more", self.control.link.tab)
            await self._ready()
        if not self.control.controls:
            if self._audit.admit(message, refused=True) is not None:
                await self._send({"type": "error", "code": "live_view_read_only", "message": VIEW_ONLY})
            return
        if self._audit.admit(message) is False:
            await self._send({"type": "error", "code": "live_view_input_rate", "message": TOO_FAST})
            return
        await self._screencast.send_input(message)

    async def ended(self) -> Ending:
        await self.control.ended.wait()
        assert self.control.reason is not None
        return self.control.reason

    async def close(self) -> None:
        self._page.remove_listener("close", self._page_closed)
        self._links.release(self.control)
        self.control.ended.set()
        await self._screencast.stop()
        self._relay_took_last.set()  # a frame waiting for the relay goes nowhere, and its wait ends


class RelayedViewer:
    """On the node the person reached: their Live View of another node's tab, relayed over NATS."""

    def __init__(self, bus: Bus, subjects: Subjects, node: str, viewer_id: str, send: Send) -> None:
        self._bus = bus
        self._subjects = subjects
        self._node = node
        self._id = viewer_id
        self._send = send
        self._out: Subscription | None = None
        self._ending: Ending | None = None
        self._ended = asyncio.Event()
        self._pinging: asyncio.Task[None] | None = None

    async def start(self, tab: int, token: str, mode: str = "tab") -> None:
        """Ask the tab's node to open it (``mode``: the screencast, or DevTools); :class:`LiveRefusal` as it
        answers."""
        out = self._subjects.live(self._id, "out")
        self._out = await self._bus.subscribe(out, typed(out, {ToPerson: self._to_person, ViewEnded: self._ended_there},
                                                         limit=LARGE))
        try:
            reply = await self._ask(OpenView(tab, token, self._id, mode), 15.0, ViewOpened, ViewRefused)
        except KitsuneError as e:
            await self.close()
            if isinstance(e, BusError):
                raise LiveRefusal("node_unavailable", f"The node of tab {tab} did not answer ({e.code})", 1011,
                                  503) from e
            raise LiveRefusal(e.code, e.message, 1011, e.http_status) from e
        if isinstance(reply, ViewRefused):
            await self.close()
            raise LiveRefusal(reply.code, reply.message, reply.close_code, reply.http_status)
        self._pinging = asyncio.create_task(self._ping())

    async def _ask(self, request: Message, timeout: float, *answers: type[A]) -> A:
        return await ask(self._bus, self._subjects.node(self._node, "live"), request, timeout, *answers)

    async def _to_person(self, message: ToPerson) -> None:
        await self._send(message.message)
        if message.message.get("type") == "frame":  # sent on: the tab's node may send the next
            await self._relay({"type": "ack"})

    async def _ended_there(self, ended: ViewEnded) -> None:
        self._end((ended.code, ended.message, ended.close_code))

    def _end(self, ending: Ending) -> None:
        if self._ending is None:
            self._ending = ending
        self._ended.set()

    async def _ping(self) -> None:
        while not self._ended.is_set():
            await asyncio.sleep(PING_EVERY)
            try:
                alive = (await self._ask(PingViewer(self._id), PING_EVERY, ViewerAlive)).alive
            except KitsuneError:  # no answer, or none it can read
                alive = False
            if not alive:
                self._end(("node_unavailable", "The node that holds this tab is gone; this Live View has ended.",
                           1011))

    async def deliver(self, message: dict[str, Any]) -> None:
        if message.get("type") != "ack":  # this relay acknowledges the frames it sent on
            await self._relay(message)

    async def _relay(self, message: dict[str, Any]) -> None:
        try:
            await self._bus.publish(self._subjects.live(self._id, "in"), encode(FromPerson(message)))
        except BusError as e:
            log.error("a Live View message could not be relayed (%s)", e.code)

    async def ended(self) -> Ending:
        await self._ended.wait()
        assert self._ending is not None
        return self._ending

    async def close(self) -> None:
        if self._pinging is not None:
            self._pinging.cancel()
        with contextlib.suppress(BusError):  # the tab's node lets go of it (it may have ended it already)
            await self._bus.publish(self._subjects.live(self._id, "in"), encode(ViewerLeft()))
        self._ended.set()
        out, self._out = self._out, None
        if out is not None:
            with contextlib.suppress(BusError):
                await out.unsubscribe()
