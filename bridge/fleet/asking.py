"""One node's request to another node of its fleet, its refusals raised as the errors they were."""

from __future__ import annotations

from typing import Any

import orjson

from actors.bus import Bus, BusError
from messages.errors import KitsuneError

__all__ = ["ask_node"]


async def ask_node(bus: Bus, subject: str, node: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Node ``node``'s answer on ``subject``: ``fleet_unavailable`` when it does not answer, its own
    error (``{"error": {code, error, state}}``) raised as a :class:`KitsuneError`."""
    try:
        reply: dict[str, Any] = orjson.loads(await bus.request(subject, orjson.dumps(body), timeout))
    except BusError as e:
        raise KitsuneError("fleet_unavailable", f"Node {node} did not answer ({e.code})", retryable=True) from e
    if "error" in reply:
        error = reply["error"]
        raise KitsuneError(error["code"], error["error"], state=error.get("state"))
    return reply
