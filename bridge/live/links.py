"""Live View links of a node's tabs: tokens kept as hashes, one controller per tab, hand-backs counted.

A link is a random token (:data:`~messages.tokens.TOKEN_BYTES` bytes) bound to one tab and to the
agent (or operator) that asked for it; only its SHA-256 is kept. It opens the tab's Live View
for ``ttl`` seconds after it was made; an open connection is not cut at that moment. One
connection at a time controls a tab, whichever link opened it. Everything here runs on the
node's loop (no lock: one owner).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from messages.tokens import new_token, token_hash

__all__ = ["Control", "Link", "LiveLinks", "LiveRefusal"]


@dataclass(frozen=True, slots=True)
class Link:
    """What a token opens: a tab, for the agent that asked, until ``expires_at`` (loop clock)."""

    tab: int
    agent: str
    expires_at: float
    digest: bytes = field(repr=False)


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
CONTROLLED = ("live_view_controlled", "Someone else holds control of this tab in another Live View", 4409, 409)


@dataclass(slots=True)
class Control:
    """One connection's control of a tab, from its opening to its end."""

    link: Link
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    reason: tuple[str, str, int] | None = None
    """Why it ended: (code, message, WebSocket close code)."""

    def end(self, code: str, message: str, close_code: int) -> None:
        if self.reason is None:
            self.reason = (code, message, close_code)
        self.ended.set()


class LiveLinks:
    """The node's links and controls, and each tab's hand-back count."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._links: dict[bytes, Link] = {}
        self._controls: dict[int, Control] = {}
        self._handbacks: dict[int, int] = {}
        self._handed_back = asyncio.Condition()

    def issue(self, tab: int, agent: str) -> tuple[str, Link]:
        """A new link to ``tab`` for ``agent``: the token (given out once, never kept) and its link."""
        self._sweep()
        token = new_token()
        link = Link(tab, agent, self._clock() + self.ttl, token_hash(token))
        self._links[link.digest] = link
        return token, link

    def check(self, tab: int, token: object) -> Link:
        """The link ``token`` is for ``tab``; :class:`LiveRefusal` when it is not valid, expired or another tab's."""
        link = self._links.get(token_hash(token)) if isinstance(token, str) and token else None
        if link is None:  # looked up by its SHA-256: the token itself is never compared
            raise LiveRefusal(*NOT_VALID)
        if link.expires_at <= self._clock():
            raise LiveRefusal(*EXPIRED)
        if link.tab != tab:
            raise LiveRefusal(*OTHER_TAB)
        return link

    def take_control(self, tab: int, token: object) -> Control:
        """Control of ``tab`` for a connection that presented ``token``; refused while another holds it."""
        link = self.check(tab, token)
        if tab in self._controls:
            raise LiveRefusal(*CONTROLLED)
        control = Control(link)
        self._controls[tab] = control
        return control

    def release(self, control: Control) -> None:
        """The connection of ``control`` ended: the tab is the agent's again."""
        if self._controls.get(control.link.tab) is control:
            del self._controls[control.link.tab]

    async def hand_back(self, control: Control) -> None:
        """The person pressed "Done": control ends and whoever waits on the tab's hand-back is woken."""
        self.release(control)
        tab = control.link.tab
        async with self._handed_back:
            self._handbacks[tab] = self._handbacks.get(tab, 0) + 1
            self._handed_back.notify_all()

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
        """Revoke ``tab``'s links and end its Live View, with ``message`` on the page."""
        self._links = {k: link for k, link in self._links.items() if link.tab != tab}
        self._handbacks.pop(tab, None)
        if (control := self._controls.pop(tab, None)) is not None:
            control.end("tab_closed", message, 4410)

    def end_all(self, code: str, message: str, close_code: int) -> None:
        """End every Live View (the node stops) and revoke every link."""
        self._links.clear()
        for control in self._controls.values():
            control.end(code, message, close_code)
        self._controls.clear()

    def described(self) -> list[dict[str, object]]:
        """The links alive and the controls held, as metadata (tab, agent, seconds left, held): never a token."""
        self._sweep()
        now = self._clock()
        return [{"tabId": link.tab, "agent": link.agent, "expires_in": round(link.expires_at - now, 1),
                 "held": link.tab in self._controls} for link in self._links.values()]

    def _sweep(self) -> None:
        now = self._clock()
        self._links = {k: link for k, link in self._links.items() if link.expires_at > now}
