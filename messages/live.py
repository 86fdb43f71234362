"""Live View between nodes: the requests to a tab's node and their answers, and a person's relayed connection.

Requests travel on ``<fleet>.node.<name>.live``; a person's connection reached through another node is
relayed on ``<fleet>.live.<viewer>.in`` (:class:`FromPerson`, :class:`ViewerLeft`) and ``.out``
(:class:`ToPerson`, :class:`ViewEnded`), published, never answered. A link's token crosses only in
:class:`LinkIssued` and :class:`OpenView`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from messages.wire import Message

__all__ = ["AskHandbacks", "AskPageHint", "DevtoolsLink", "FromPerson", "Handbacks", "IssueLink", "LinkChecked",
           "LinkIssued", "OpenView", "PageHint", "PingViewer", "ToPerson", "ViewEnded", "ViewOpened", "ViewRefused",
           "ViewerAlive", "ViewerLeft"]


# --- <fleet>.node.<name>.live: requests to the node of a tab --------------------------------

@dataclass(frozen=True, slots=True)
class IssueLink(Message):
    """A Live View link to ``tab`` for ``agent``; answered :class:`LinkIssued`."""

    tab: int
    """The tab, one of the answering node's."""
    agent: str
    """Whom the link is for (``operator:<name>`` for a console's)."""
    control: bool
    """Whether the link controls the tab."""
    granted: bool
    """Whether a person granted that control."""
    mode: str = "tab"
    """What it opens: ``tab`` (the screencast page) or ``devtools`` (DevTools' front end for the tab)."""


@dataclass(frozen=True, slots=True)
class LinkIssued(Message):
    """A link made."""

    token: str
    """The link's token (a secret: never logged)."""
    expires_in: float
    """Seconds it is valid."""


@dataclass(frozen=True, slots=True)
class AskPageHint(Message):
    """Whether ``tab`` shows something only a person can do; answered :class:`PageHint`."""

    tab: int
    """The tab."""


@dataclass(frozen=True, slots=True)
class PageHint(Message):
    """A tab's needs-user hint."""

    hint: dict[str, Any]
    """``{needs_user, reason, evidence}``, as the tab's node read it."""


@dataclass(frozen=True, slots=True)
class AskHandbacks(Message):
    """How many times ``tab`` was handed back; answered :class:`Handbacks`."""

    tab: int
    """The tab."""
    since: int | None
    """With a wait: the count the asker knows; the answer comes once the count is past it."""
    wait: float
    """Seconds the answer may wait for a hand-back."""


@dataclass(frozen=True, slots=True)
class Handbacks(Message):
    """A tab's hand-backs."""

    count: int
    """How many times it was handed back since its node started."""
    held: bool
    """Whether a person controls it now."""


@dataclass(frozen=True, slots=True)
class OpenView(Message):
    """Open a person's connection with ``token`` to ``tab``, relayed through ``viewer``'s subjects; answered
    :class:`ViewOpened` or :class:`ViewRefused`."""

    tab: int
    """The tab."""
    token: str
    """The link's token, as the person presented it (a secret: never logged)."""
    viewer: str
    """The relay's id: its subjects are ``<fleet>.live.<viewer>.in`` and ``.out``."""
    mode: str = "tab"
    """What the person opens: ``tab`` (the screencast's messages) or ``devtools`` (CDP messages)."""


@dataclass(frozen=True, slots=True)
class DevtoolsLink(Message):
    """Whether ``token`` opens ``tab``'s DevTools (before its front end loads), or, with ``done``, the person
    hands the tab back from it; answered :class:`LinkChecked` or :class:`ViewRefused`."""

    tab: int
    """The tab."""
    token: str
    """The link's token, as the person presented it (a secret: never logged)."""
    done: bool
    """Whether the person pressed "Done": their DevTools connection ends and the tab is handed back."""


@dataclass(frozen=True, slots=True)
class LinkChecked(Message):
    """The link opens the tab's DevTools (or was handed back)."""

    expires_in: float
    """Seconds the link may still open a connection."""


@dataclass(frozen=True, slots=True)
class ViewOpened(Message):
    """The connection is open: the relay's subjects carry it."""


@dataclass(frozen=True, slots=True)
class ViewRefused(Message):
    """The connection was refused (``bridge.live.links.LiveRefusal``)."""

    code: str
    """The error code."""
    message: str
    """What a person reads."""
    close_code: int
    """The WebSocket close code."""
    http_status: int
    """The HTTP status of the code."""


@dataclass(frozen=True, slots=True)
class PingViewer(Message):
    """Whether the tab's node still relays ``viewer`` (and that its relay is alive); answered :class:`ViewerAlive`."""

    viewer: str
    """The relay's id."""


@dataclass(frozen=True, slots=True)
class ViewerAlive(Message):
    """Whether the tab's node still relays the viewer."""

    alive: bool
    """True while it does."""


# --- <fleet>.live.<viewer>.in and .out: a relayed connection -----------------------------------

@dataclass(frozen=True, slots=True)
class FromPerson(Message):
    """One message of the person, for the tab's node (``ack``, an input, ``done``, ``ping``)."""

    message: dict[str, Any]
    """The message as their page sent it (the tab's node checks each input)."""


@dataclass(frozen=True, slots=True)
class ViewerLeft(Message):
    """The person left, or the relaying node let go: the tab's node ends the connection."""


@dataclass(frozen=True, slots=True)
class ToPerson(Message):
    """One message for the person (``ready``, ``frame``, ``error``)."""

    message: dict[str, Any]
    """The message as their page gets it."""


@dataclass(frozen=True, slots=True)
class ViewEnded(Message):
    """The connection ended on the tab's node."""

    code: str
    """Why."""
    message: str
    """What a person reads."""
    close_code: int
    """The WebSocket close code."""
