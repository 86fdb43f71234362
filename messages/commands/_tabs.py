"""The actions on tabs and sessions: open, close, switch and list tabs; keep and reset a session."""

from __future__ import annotations

from dataclasses import dataclass

from messages.commands._actions import (
    MAX_NODE_NAME,
    MAX_SESSION_NAME,
    MAX_URL,
    NODE_NAME,
    SESSION_NAME,
    Command,
    Text,
    _param,
)


@dataclass(frozen=True, kw_only=True, slots=True)
class NewTab(Command):
    """Open a tab (in its own window); its result carries ``tabId``."""

    action = "newTab"
    acts_on_tab = False
    url: Text | None = _param("URL to open; about:blank when absent.", None, max_length=MAX_URL)
    session: str | None = _param(
        'The browser session (cookies, storage) to open it in: a name of the agent\'s reuse sessions, made on '
        'first use; "call" for a fresh one-shot session of this call, closed when the call ends for good; the '
        'agent\'s "default" session when absent.', None, max_length=MAX_SESSION_NAME, pattern=SESSION_NAME)
    node: str | None = _param(
        "The fleet's node to open it on (its name, as GET /api/fleet lists them); when absent, the node of its "
        "session if the session has tabs, else the least loaded node with room.", None, max_length=MAX_NODE_NAME,
        pattern=NODE_NAME)
    persist: bool | None = _param("Keep its reuse session's state, sealed in the fleet (outliving its node).", None)


@dataclass(frozen=True, kw_only=True, slots=True)
class CloseTab(Command):
    """Close the tab ``tabId`` (the default tab when absent); with ``forget``, its whole reuse session."""

    action = "closeTab"
    forget: bool = _param("Close its reuse session for good: all its tabs, and its stored state deleted.", False)


@dataclass(frozen=True, kw_only=True, slots=True)
class SwitchTab(Command):
    """Make ``tabId`` the current tab and bring its window to the front."""

    action = "switchTab"


@dataclass(frozen=True, kw_only=True, slots=True)
class KeepSession(Command):
    """Keep the one-shot session of tab ``tabId`` (the default tab when absent) as the agent's reuse
    session ``name``, so that later calls open tabs in the same browser (``"session": name``)."""

    action = "keepSession"
    writes = False
    name: str = _param("The reuse session's name.", max_length=MAX_SESSION_NAME, pattern=SESSION_NAME)


@dataclass(frozen=True, kw_only=True, slots=True)
class ResetSession(Command):
    """Close every tab of the agent's reuse session ``name`` and clear its storage (cookies, local storage, cache:
    a fresh browser context), keeping its name."""

    action = "resetSession"
    acts_on_tab = False
    name: str = _param("The reuse session's name.", max_length=MAX_SESSION_NAME, pattern=SESSION_NAME)


@dataclass(frozen=True, kw_only=True, slots=True)
class GetTabs(Command):
    """List the open tabs with their ids, URLs and titles."""

    action = "getTabs"
    writes = False
    acts_on_tab = False


TAB_ACTIONS: tuple[type[Command], ...] = (NewTab, CloseTab, SwitchTab, GetTabs, KeepSession, ResetSession)
"""The tabs' and sessions' actions, in the order of the contract."""
