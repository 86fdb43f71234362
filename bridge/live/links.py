"""Live View links of a node's tabs: tokens kept as hashes, one controller per tab, hand-backs counted.

A link is a random token (:data:`~messages.tokens.TOKEN_BYTES` bytes) bound to one tab, to the
agent (or operator) that asked for it, to whether it carries control (``control``: a view-only
link shows frames and sends no input) and to what it opens (``mode``: the screencast page, or
DevTools' front end for the tab, which always controls). Only its SHA-256 is kept. It opens the tab's Live View for
``ttl`` seconds after it was made; an open connection is not cut at that moment. A link ends
early when it is revoked: handed back (its "Done"), its agent lost the tab (a takeover), or pushed
out by its agent's newer links (``max_per_agent``); a revoked link's open connections end with
close code 4411. One connection at a time controls a tab, whichever link opened it; view-only
connections hold nothing. Everything here runs on the node's loop (no lock: one owner).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from messages.contract import LIVE_VIEW_LINKS, LIVE_VIEW_LINKS_PER_AGENT
from messages.errors import KitsuneError
from messages.tokens import new_token, token_hash

__all__ = ["REVOKED_CLOSE", "Control", "Link", "LiveLinks", "LiveRefusal"]


@dataclass(frozen=True, slots=True)
class Link:
    """What a token opens: a tab, for the agent that asked, until ``expires_at`` (loop clock)."""

    tab: int
    agent: str
    expires_at: float
    digest: bytes = field(repr=False)
    control: bool = True
    """Whether its connection may control the tab (mouse, keys, paste, "Done"); else frames only."""
    granted: bool = False
    """Whether its control was granted by a person (an approval): it then holds whatever its agent's policy
    becomes. Else its control is what that policy gave when it was made, checked again against the policy as
    it is when a connection opens and at each input (``LiveViews``); an operator's link always controls."""
    mode: str = "tab"
    """What it opens: ``tab`` (the screencast page) or ``devtools`` (DevTools for the tab: full control, as it can
    run script; it never opens view-only)."""


class LiveRefusal(Exception):
    """A Live View connection or page that may not open; ``close_code`` is its WebSocket close code."""

    def __init__(self, code: str, message: str, close_code: int, http_status: int) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.close_code = close_code
        self.http_status = http_status


NOT_VALID = ("live_view_token_invalid", "This Live View link is not valid (wrong or revoked)", 4401, 403)
EXPIRED = ("live_view_expired", "This Live View link has expired; ask for a new one", 4401, 403)
OTHER_TAB = ("live_view_wrong_tab", "This Live View link is for another tab", 4403, 403)
DEVTOOLS_VIEW_ONLY = ("live_view_read_only", "This DevTools link no longer controls the tab (its agent's policy "
                      "changed); DevTools cannot open view-only: ask for a new link", 4403, 403)
CONTROLLED = ("live_view_controlled", "Someone else holds control of this tab in another Live View", 4409, 409)
REVOKED_CLOSE = 4411
"""The close code of a connection whose link was revoked (handed back, its agent lost the tab, pushed out)."""
HANDED_BACK_LINK = "This Live View link was handed back with Done; ask for a new one"


@dataclass(eq=False, slots=True)
class Control:
    """One connection to a tab, from its opening to its end; it controls the tab when its link does."""

    link: Link
    controls: bool = True
    """Whether it controls the tab now: its link's control, unless its agent's policy withdrew it."""
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    reason: tuple[str, str, int] | None = None
    """Why it ended: (code, message, WebSocket close code)."""

    def end(self, code: str, message: str, close_code: int) -> None:
        if self.reason is None:
            self.reason = (code, message, close_code)
        self.ended.set()


class LiveLinks:
    """The node's links and connections, and each tab's hand-back count."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic, *,
                 max_per_agent: int = LIVE_VIEW_LINKS_PER_AGENT, max_links: int = LIVE_VIEW_LINKS) -> None:
        self.ttl = ttl
        self.max_per_agent = max_per_agent
        self.max_links = max_links
        self._clock = clock
        self._links: dict[bytes, Link] = {}
        """Alive links, oldest first."""
        self._revoked: dict[bytes, tuple[Link, str]] = {}
        """Revoked links until they would have expired, each with why (told to whoever presents it)."""
        self._open: set[Control] = set()
        self._controls: dict[int, Control] = {}
        self._handbacks: dict[int, int] = {}
        self._handed_back = asyncio.Condition()

    def issue(self, tab: int, agent: str, control: bool = True, granted: bool = False,
              mode: str = "tab") -> tuple[str, Link]:
        """A new link to ``tab`` for ``agent``: the token (given out once, never kept) and its link.

        Past ``max_per_agent`` of the agent's links, its oldest that no connection has open is revoked;
        ``live_view_quota`` when every one is open, or when the node holds ``max_links``."""
        self._sweep()
        mine = [link for link in self._links.values() if link.agent == agent]
        in_use = {c.link.digest for c in self._open}
        while len(mine) >= self.max_per_agent:
            spare = next((link for link in mine if link.digest not in in_use), None)
            if spare is None:
                raise KitsuneError("live_view_quota", f"Every one of this agent's {self.max_per_agent} Live View "
                                   "links is open now; close one, or wait for one to end",
                                   state={"scope": "agent", "limit": self.max_per_agent})
            self._revoke(spare, "This Live View link was replaced by newer ones of its agent; ask for a new one")
            mine.remove(spare)
        if len(self._links) >= self.max_links:
            raise KitsuneError("live_view_quota", f"This node holds {self.max_links} Live View links, its most; "
                               "try again when some expire", state={"scope": "node", "limit": self.max_links})
        token = new_token()
        link = Link(tab, agent, self._clock() + self.ttl, token_hash(token), control, granted and control, mode)
        self._links[link.digest] = link
        return token, link

    def check(self, tab: int, token: object, mode: str = "tab") -> Link:
        """The link ``token`` is for ``tab`` in ``mode``; :class:`LiveRefusal` when it is not valid, revoked,
        expired, another tab's, or opens the other mode."""
        digest = token_hash(token) if isinstance(token, str) and token else b""
        link = self._links.get(digest)  # looked up by its SHA-256: the token itself is never compared
        if link is None and (revoked := self._revoked.get(digest)) is not None and revoked[0].tab == tab:
            raise LiveRefusal("live_view_revoked", revoked[1], REVOKED_CLOSE, 403)
        if link is None:
            raise LiveRefusal(*NOT_VALID)
        if link.expires_at <= self._clock():
            raise LiveRefusal(*EXPIRED)
        if link.tab != tab:
            raise LiveRefusal(*OTHER_TAB)
        if link.mode != mode:
            raise LiveRefusal("live_view_wrong_mode", f"This Live View link opens the tab's {link.mode} view, not "
                              f"its {mode} view", 4403, 403)
        return link

    def seconds_left(self, link: Link) -> float:
        """Seconds ``link`` may still open a connection."""
        return max(0.0, round(link.expires_at - self._clock(), 1))

    def connect(self, tab: int, token: object, may_control: Callable[[Link], bool] = lambda link: True,
                mode: str = "tab") -> Control:
        """A connection to ``tab`` in ``mode`` that presented ``token``: it controls the tab when its link does and
        ``may_control`` agrees (refused while another holds control); a view-only one holds nothing, and a
        DevTools one that may not control is refused."""
        link = self.check(tab, token, mode)
        controls = link.control and may_control(link)
        if mode == "devtools" and not controls:
            raise LiveRefusal(*DEVTOOLS_VIEW_ONLY)
        if controls and tab in self._controls:
            raise LiveRefusal(*CONTROLLED)
        control = Control(link, controls)
        self._open.add(control)
        if controls:
            self._controls[tab] = control
        return control

    def withdraw(self, control: Control) -> None:
        """The connection of ``control`` goes on view-only: it no longer controls its tab (the agents' writes
        are let through again), and sends no more input."""
        control.controls = False
        if self._controls.get(control.link.tab) is control:
            del self._controls[control.link.tab]

    def release(self, control: Control) -> None:
        """The connection of ``control`` ended: the tab is the agent's again."""
        self._open.discard(control)
        if self._controls.get(control.link.tab) is control:
            del self._controls[control.link.tab]

    async def hand_back(self, control: Control) -> None:
        """The person pressed "Done": control ends, its link is revoked (a new one is needed to take control
        again), and whoever waits on the tab's hand-back is woken."""
        self.release(control)
        self._revoke(control.link, HANDED_BACK_LINK, end_open=False)
        tab = control.link.tab
        async with self._handed_back:
            self._handbacks[tab] = self._handbacks.get(tab, 0) + 1
            self._handed_back.notify_all()

    async def hand_back_link(self, link: Link) -> Control | None:
        """The person pressed "Done" outside their connection (DevTools' page): its connection that controls the
        tab is handed back (:meth:`hand_back`) and returned; without one, the link is revoked all the same."""
        control = next((c for c in self._open if c.link.digest == link.digest and c.controls), None)
        if control is None:
            self._revoke(link, HANDED_BACK_LINK)
            return None
        await self.hand_back(control)
        return control

    def revoke_tab(self, tab: int, keep: Callable[[Link], bool], message: str) -> int:
        """Revoke ``tab``'s links that ``keep`` refuses, and end their open connections; how many."""
        gone = [link for link in self._links.values() if link.tab == tab and not keep(link)]
        for link in gone:
            self._revoke(link, message)
        return len(gone)

    def _revoke(self, link: Link, message: str, *, end_open: bool = True) -> None:
        self._links.pop(link.digest, None)
        self._revoked[link.digest] = (link, message)
        for control in [c for c in self._open if c.link.digest == link.digest] if end_open else ():
            self.release(control)
            control.end("live_view_revoked", message, REVOKED_CLOSE)

    def controlled(self, tab: int) -> bool:
        """Whether a person holds control of ``tab`` now."""
        return tab in self._controls

    def controls(self) -> list[Control]:
        return list(self._controls.values())

    def handbacks(self, tab: int) -> int:
        """How many times ``tab`` was handed back since the node started."""
        return self._handbacks.get(tab, 0)

    async def wait_handback(self, tab: int, since: int, seconds: float) -> int:
        """The tab's hand-back count, once it is past ``since`` or ``seconds`` passed."""
        async with self._handed_back:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._handed_back.wait_for(lambda: self.handbacks(tab) > since), seconds)
        return self.handbacks(tab)

    def tab_closed(self, tab: int, message: str) -> None:
        """Revoke ``tab``'s links and end its Live Views, with ``message`` on the page."""
        self._links = {k: link for k, link in self._links.items() if link.tab != tab}
        self._revoked = {k: gone for k, gone in self._revoked.items() if gone[0].tab != tab}
        self._handbacks.pop(tab, None)
        self._controls.pop(tab, None)
        for control in [c for c in self._open if c.link.tab == tab]:
            self._open.discard(control)
            control.end("tab_closed", message, 4410)

    def end_all(self, code: str, message: str, close_code: int) -> None:
        """End every Live View (the node stops) and revoke every link."""
        self._links.clear()
        for control in self._open:
            control.end(code, message, close_code)
        self._open.clear()
        self._controls.clear()

    def described(self) -> list[dict[str, object]]:
        """The links alive and the controls held, as metadata (tab, agent, control, seconds left, held): never
        a token."""
        self._sweep()
        now = self._clock()
        return [{"tabId": link.tab, "agent": link.agent, "control": link.control,
                 "expires_in": round(link.expires_at - now, 1), "held": link.tab in self._controls}
                for link in self._links.values()]

    def _sweep(self) -> None:
        now = self._clock()
        self._links = {k: link for k, link in self._links.items() if link.expires_at > now}
        self._revoked = {k: gone for k, gone in self._revoked.items() if gone[0].expires_at > now}
