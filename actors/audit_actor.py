"""The audit log: every container call, step, resume and direct call, written before it acts.

Entries go to a JSON-lines file and to the JetStream stream ``KITSUNE_AUDIT`` that every node
shares; an entry's id is its sequence number in the stream, and a container call's id is its
entry's (monotonic, unique across the fleet). Typed values are redacted and JavaScript bodies
dropped (``messages.commands.audit_params``); no token ever enters an entry. If an entry cannot
be written, the write it records is refused (fail closed).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import orjson
import pykka
from nats.aio.client import Client
from nats.js.api import StorageType, StreamConfig

from actors.loop import IoLoop
from messages.commands import CallSpec, Command, audit_params
from messages.errors import KitsuneError

__all__ = ["AUDIT_STREAM", "AuditActor", "AuditLog", "Auditor", "JetStreamAuditLog", "LocalAuditLog"]

log = logging.getLogger(__name__)

AUDIT_STREAM = "KITSUNE_AUDIT"
_SUBJECT = "kitsune.audit.entries"


class AuditLog(Protocol):
    """Where audit entries are numbered and kept."""

    async def append(self, entry: Mapping[str, Any]) -> int:
        """Keep ``entry``; its sequence number (unique, increasing)."""
        ...


class LocalAuditLog:
    """Entries numbered in this process's memory (a node without NATS)."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    async def append(self, entry: Mapping[str, Any]) -> int:
        self.entries.append(dict(entry))
        return len(self.entries)


class JetStreamAuditLog:
    """Entries in the JetStream stream ``KITSUNE_AUDIT`` (file storage), shared by every node."""

    def __init__(self, client: Client) -> None:
        self._js = client.jetstream()

    @classmethod
    async def create(cls, client: Client) -> JetStreamAuditLog:
        """Ensure the stream exists and wrap it."""
        log_ = cls(client)
        try:
            await log_._js.stream_info(AUDIT_STREAM)
        except Exception:  # nats.js.errors.NotFoundError: not there yet
            await log_._js.add_stream(StreamConfig(name=AUDIT_STREAM, subjects=[_SUBJECT], storage=StorageType.FILE))
        return log_

    async def append(self, entry: Mapping[str, Any]) -> int:
        ack = await self._js.publish(_SUBJECT, orjson.dumps(entry))
        return int(ack.seq)


class AuditActor(pykka.ThreadingActor):
    """The audit log's single writer: numbers each entry in the log, then appends it to the file."""

    def __init__(self, log_: AuditLog, io: IoLoop, file: Path | None,
                 on_record: Callable[[bool], None] = lambda written: None) -> None:
        super().__init__()
        self._log = log_
        self._io = io
        self._path = file
        self._on_record = on_record
        """Told of every entry: whether it was written (metrics)."""
        self.failures = 0
        """Entries that could not be written."""

    def record(self, entry: Mapping[str, Any]) -> int:
        """Write one entry; its id. Raises ``audit_unavailable`` when it cannot be written."""
        try:
            seq = self._io.run(self._log.append(entry), timeout=10)
            if self._path is not None:
                with self._path.open("ab") as file:
                    file.write(orjson.dumps({"call": seq, **entry}) + b"\n")
        except Exception as e:
            self.failures += 1
            self._on_record(False)
            log.error("audit entry not written (%s)", type(e).__name__)
            raise KitsuneError("audit_unavailable", "The audit log cannot be written; nothing was sent",
                               retryable=True) from e
        self._on_record(True)
        return seq


class Auditor:
    """The audit of one agent's calls: the call service's ``CallAudit`` and the engine's ``StepAudit``."""

    def __init__(self, actor: pykka.ActorRef[AuditActor], agent: str | None) -> None:
        self._proxy: Any = actor.proxy()
        self._agent = agent

    def _record(self, entry: dict[str, Any], agent: str | None = None) -> int:
        return int(self._start(entry, agent).get())

    def _start(self, entry: dict[str, Any], agent: str | None = None) -> pykka.Future[int]:
        """Hand an entry to the audit actor; the future of its id."""
        future: pykka.Future[int] = self._proxy.record(
            {"time": round(time.time(), 3), "agent": agent or self._agent, **entry})
        return future

    def call(self, spec: CallSpec, agent: str | None) -> int:
        return self._record({"kind": "call", "call_kind": spec.kind, "commands": len(spec.commands),
                             "tabId": spec.default_tab}, agent)

    def resume(self, call: int, agent: str | None) -> None:
        self._record({"kind": "resume", "parent": {"call": call}}, agent)

    def step(self, call: int, path: str, command: Command, tab_id: int | None, *,
             resumed: bool) -> Callable[[], None]:
        parent: dict[str, Any] = {"call": call, "path": path}
        if resumed:
            parent["resumed"] = True
        written = self._start({"kind": "step", "action": command.action, "tabId": tab_id,
                               "params": audit_params(command), "parent": parent})

        def wait() -> None:  # raises audit_unavailable when the entry could not be written
            written.get()
        return wait

    def observed(self, call: int, path: str, command: Command, tab_id: int | None) -> None:
        self._record({"kind": "step", "action": command.action, "tabId": tab_id,
                      "params": {**audit_params(command), "observed": "applied", "sent": False},
                      "parent": {"call": call, "path": path, "resumed": True}})

    def takeover(self, tab_id: int) -> int:
        """Record a tab takeover; its entry's id."""
        return self._record({"kind": "takeover", "tabId": tab_id})

    def direct(self, command: Command, tab_id: int | None) -> int:
        """Record a direct call; its call id."""
        return self._record({"kind": "direct", "action": command.action, "tabId": tab_id,
                             "params": audit_params(command)})
