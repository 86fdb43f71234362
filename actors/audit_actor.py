"""The audit actor: the audit log's single writer, and the source of call ids.

A call id is the audit sequence number of the call's entry: monotonic and unique across the
fleet when the log is the JetStream stream ``KITSUNE_AUDIT`` that every node shares.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import orjson
import pykka
from nats.aio.client import Client
from nats.js.api import StorageType, StreamConfig

from actors.loop import IoLoop

__all__ = ["AUDIT_STREAM", "AuditActor", "AuditLog", "JetStreamAuditLog", "LocalAuditLog"]

AUDIT_STREAM = "KITSUNE_AUDIT"
_SUBJECT = "kitsune.audit.entries"


class AuditLog(Protocol):
    """Where audit entries are written."""

    async def append(self, entry: Mapping[str, Any]) -> int:
        """Write ``entry``; its sequence number (unique, increasing)."""
        ...


class LocalAuditLog:
    """Audit entries in this process's memory."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    async def append(self, entry: Mapping[str, Any]) -> int:
        self.entries.append(dict(entry))
        return len(self.entries)


class JetStreamAuditLog:
    """Audit entries in the JetStream stream ``KITSUNE_AUDIT``, shared by every node."""

    def __init__(self, client: Client) -> None:
        self._js = client.jetstream()

    @classmethod
    async def create(cls, client: Client) -> JetStreamAuditLog:
        """Ensure the stream exists and wrap it."""
        log = cls(client)
        config = StreamConfig(name=AUDIT_STREAM, subjects=[_SUBJECT], storage=StorageType.FILE)
        try:
            await log._js.stream_info(AUDIT_STREAM)
        except Exception:  # nats.js.errors.NotFoundError and its kin: the stream is not there yet
            await log._js.add_stream(config)
        return log

    async def append(self, entry: Mapping[str, Any]) -> int:
        ack = await self._js.publish(_SUBJECT, orjson.dumps(entry))
        return int(ack.seq)


class AuditActor(pykka.ThreadingActor):
    """Writes audit entries one at a time, in order."""

    def __init__(self, log: AuditLog, io: IoLoop) -> None:
        super().__init__()
        self._log = log
        self._io = io

    def record(self, entry: Mapping[str, Any]) -> int:
        """Write one entry; its sequence number."""
        return self._io.run(self._log.append(entry), timeout=10)
