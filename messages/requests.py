"""Requests between actors over the bus, and the subjects they travel on."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from messages.commands import Command, command_to_json, parse_command

__all__ = ["Subjects", "TabRequest"]


@dataclass(frozen=True, slots=True)
class Subjects:
    """The subjects of one fleet: nodes that share a NATS server but not a fleet never meet."""

    fleet: str = "kitsune"
    """The fleet's name, the first token of its subjects."""

    def tab(self, tab_id: int) -> str:
        """Where the actor of tab ``tab_id`` takes its requests."""
        return f"{self.fleet}.tab.{tab_id}.do"

    @property
    def tabs(self) -> str:
        """Request (a ``getTabs``): the open tabs; the reply is ``Done({"tabs": [...]})``."""
        return f"{self.fleet}.tabs.list"

    @property
    def open(self) -> str:
        """Request (a ``newTab``), taken by one node of a queue group; the reply carries ``tabId``."""
        return f"{self.fleet}.fleet.open"


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
