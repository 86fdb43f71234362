"""One node's request to another node of its fleet, its refusals raised as the errors they were."""

from __future__ import annotations

from typing import TypeVar

from actors.bus import Bus, BusError
from actors.serving import ask
from messages.errors import KitsuneError
from messages.wire import Message

__all__ = ["ask_node"]

A = TypeVar("A")


async def ask_node(bus: Bus, subject: str, node: str, request: Message, timeout: float, *answers: type[A]) -> A:
    """Node ``node``'s answer to ``request`` on ``subject``, one of ``answers``: ``fleet_unavailable`` when it
    does not answer, its own error (an ``ErrorAnswer``) raised as the :class:`KitsuneError` it was."""
    try:
        return await ask(bus, subject, request, timeout, *answers)
    except BusError as e:
        raise KitsuneError("fleet_unavailable", f"Node {node} did not answer ({e.code})", retryable=True) from e
