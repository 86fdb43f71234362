"""A persistent session's state, as it is saved and restored (issue 34), and the port it is kept through.

The state is Playwright's storage state of the session's context (cookies, local storage, IndexedDB) and
the origins its tabs had open. It is a secret: it never reaches a log, an event, the audit (only its size)
or an exception's text; where it is stored it is sealed (``actors.session_vault``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson

__all__ = ["SavedState", "StateStore"]


@dataclass(frozen=True, slots=True)
class SavedState:
    """One session's state at one time."""

    storage_state: dict[str, Any] = field(repr=False)
    """Playwright's ``storage_state(indexed_db=True)`` of its context."""
    origins: tuple[str, ...] = ()
    """The origins its tabs had open when it was saved."""
    saved_at: float = 0.0
    """Wall-clock time it was saved."""

    def to_bytes(self) -> bytes:
        return orjson.dumps({"storage_state": self.storage_state, "origins": list(self.origins),
                             "saved_at": self.saved_at})

    @classmethod
    def from_bytes(cls, data: bytes) -> SavedState:
        """The state ``to_bytes`` wrote; ValueError for anything else."""
        value = orjson.loads(data)
        if not isinstance(value, dict) or not isinstance(value.get("storage_state"), dict):
            raise ValueError("not a saved session state")
        return cls(value["storage_state"], tuple(str(o) for o in value.get("origins") or ()),
                   float(value.get("saved_at") or 0.0))


class StateStore(Protocol):
    """Where persistent sessions' states are kept, by agent and session name."""

    async def save(self, agent: str, name: str, state: SavedState) -> int:
        """Store ``state`` (in place of the one there); the bytes stored."""
        ...

    async def load(self, agent: str, name: str) -> tuple[SavedState, int] | None:
        """The state stored and its bytes, or None; ``session_state_refused`` when it cannot be opened
        (another key, or a blob moved from another agent or name)."""
        ...

    async def delete(self, agent: str, name: str) -> bool:
        """Forget the state stored; whether there was one."""
        ...
