"""Requests between actors over the bus, and the subjects they travel on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from messages.commands import Command, command_to_json, parse_command

__all__ = ["FLEET_OPEN", "TABS_LIST", "TabRequest", "tab_subject"]

TABS_LIST = "kitsune.tabs.list"
"""Request (a ``getTabs``): the open tabs; the reply is ``Done({"tabs": [...]})``."""
FLEET_OPEN = "kitsune.fleet.open"
"""Request (a ``newTab``), taken by one node of a queue group; the reply carries ``tabId``."""


def tab_subject(tab_id: int) -> str:
    """Where the actor of tab ``tab_id`` takes its requests."""
    return f"kitsune.tab.{tab_id}.do"


@dataclass(frozen=True, slots=True)
class TabRequest:
    """Run one action (references resolved) in a tab; the reply is an outcome."""

    command: Command
    """The action to run."""
    timeout: float
    """Seconds the tab has for it."""

    def to_json(self) -> dict[str, Any]:
        return {"command": command_to_json(self.command), "timeout": self.timeout}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TabRequest:
        return cls(parse_command(data["command"]), float(data["timeout"]))
