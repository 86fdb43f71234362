"""A session's debug log: the last CDP methods its ``cdp`` steps sent, for a developer whose agent misbehaves.

Each entry is the method with its parameters as the audit keeps them (``messages.audit.redacted_params``: a CDP
method's parameters dropped, typed values redacted), when it was sent, how long it took and how it ended. The log
lives in the memory of the node that holds the session, bounded in entries and bytes (the oldest go first), and
goes with the session.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import Any

import orjson

from messages.audit import redacted_params
from messages.commands import Command

__all__ = ["MAX_LOG_BYTES", "MAX_LOG_ENTRIES", "DebugLog"]

MAX_LOG_ENTRIES = 200
"""Entries a session's debug log keeps at most."""
MAX_LOG_BYTES = 64 * 1024
"""Bytes of JSON a session's debug log keeps at most."""


class DebugLog:
    """The last CDP methods sent for one session, oldest first (on the loop)."""

    def __init__(self, wall: Callable[[], float] = time.time) -> None:
        self._wall = wall
        self._entries: collections.deque[tuple[dict[str, Any], int]] = collections.deque()
        self._size = 0
        self.dropped = 0
        """Entries pushed out by the bounds since the log was last cleared."""

    def add(self, command: Command, tab: int, seconds: float, outcome: str) -> None:
        """Record one method sent on ``tab``: ``outcome`` is ``ok`` or the code of its failure."""
        entry = {"time": round(self._wall() - seconds, 3), "tabId": tab, **redacted_params(command),
                 "ms": round(seconds * 1000, 1), "outcome": outcome}
        size = len(orjson.dumps(entry))
        self._entries.append((entry, size))
        self._size += size
        while len(self._entries) > MAX_LOG_ENTRIES or self._size > MAX_LOG_BYTES:
            self._size -= self._entries.popleft()[1]
            self.dropped += 1

    def entries(self) -> list[dict[str, Any]]:
        return [entry for entry, _ in self._entries]

    def clear(self) -> int:
        """Forget every entry; how many there were."""
        count = len(self._entries)
        self._entries.clear()
        self._size = self.dropped = 0
        return count
