"""What of a person's Live View input reaches the audit log, and how much of it.

A person's clicks and keys are their actions in the agent's tab: each is audited (``kind:
live_view``, ``op: input``, or ``input_refused`` on a view-only link, under the link's agent) with
its event type, never a typed value. A mouse press is an entry (``input: mousePressed`` with its
button); a named key (Enter, Tab, Backspace, an arrow...) is an entry with its name and modifiers;
typing (printable keys, and ``text`` messages: paste, IME) is one entry per run, ``input: text``
with ``text: "[redacted]"``, until the next audited input. Mouse moves, releases, wheels and key-ups
are not entries. At most :data:`RATE` entries a second (bursts of :data:`BURST`) per connection: an
input that would need one more is not sent (the person is told), so nothing a person does in the
tab goes unaudited.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["BURST", "RATE", "InputAudit"]

RATE = 10.0
"""Audited inputs a connection may send per second, on average."""
BURST = 20
"""Audited inputs a connection may send at once."""
_TYPING = {"input": "text", "text": "[redacted]"}


def _entry(message: Mapping[str, Any]) -> dict[str, Any] | None:
    """The audit fields of one input message (:data:`_TYPING` for typing); None when it is not audited."""
    kind, event = message.get("type"), message.get("event")
    if kind == "text":
        return _TYPING
    if kind == "mouse" and event == "mousePressed":
        button = message.get("button")
        return {"input": "mousePressed", "button": button if isinstance(button, str) else "none"}
    if kind == "key" and event in ("keyDown", "rawKeyDown"):
        key, modifiers = message.get("key"), message.get("modifiers", 0)
        modifiers = modifiers if isinstance(modifiers, int) and not isinstance(modifiers, bool) else 0
        if not isinstance(key, str) or len(key) <= 1:  # a character: its value is never written
            return _TYPING if modifiers & ~8 == 0 else {"input": "keyDown", "key": "[redacted]",
                                                        "modifiers": modifiers}
        return {"input": "keyDown", "key": key[:32], "modifiers": modifiers}
    return None


class InputAudit:
    """One connection's input audit: ``record(op, fields)`` writes an entry (without waiting)."""

    def __init__(self, record: Callable[[str, dict[str, Any]], None], *, rate: float = RATE, burst: int = BURST,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._record = record
        self._rate = rate
        self._burst = float(burst)
        self._tokens = float(burst)
        self._clock = clock
        self._at = clock()
        self._typing = False

    def admit(self, message: Mapping[str, Any], *, refused: bool = False) -> bool | None:
        """Audit ``message`` (a refused one as ``input_refused``): True when it was written or needs no entry
        of its own, False when it is over the rate (it must not be sent), None when it is not audited."""
        found = _entry(message)
        if found is None:
            return None
        if found is _TYPING and self._typing:
            return True  # coalesced into this run's entry
        now = self._clock()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        self._typing = found is _TYPING
        self._record("input_refused" if refused else "input", dict(found))
        return True
