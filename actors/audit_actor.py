"""The audit log: every container call, step, resume and direct call, written before it acts.

Entries go to the JetStream stream ``KITSUNE_AUDIT`` that every node shares, then to a JSON-lines
file; an entry's id is its sequence number in the stream, and a container call's id is its
entry's (monotonic, unique across the fleet). Typed values are redacted and JavaScript bodies
dropped (``messages.audit``, whose typed entries hold nothing else); no token ever enters an entry. If an entry cannot
be written, the write it records is refused (fail closed).

The stream numbers entries on the loop, several on their way at once (``actors.pipeline``); the
audit actor then writes them to the file in the stream's order and answers whoever waits: the
entries settled in one pass of the loop reach it together, one hand-off and one write a burst.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import pykka
from nats.aio.client import Client
from nats.js.api import StorageType, StreamConfig

from actors.acked import AckedPublisher
from actors.buckets import AUDIT_STREAM, AUDIT_SUBJECT
from actors.jetstream import ensure_stream, kept_in
from actors.loop import IoLoop
from actors.pipeline import RECORD_WAIT, OrderedWriter, Pending
from messages.audit import (
    AuditEntry,
    CallEntry,
    DirectEntry,
    InterruptedEntry,
    LiveViewEntry,
    ObservedStepEntry,
    ResumeEntry,
    SessionEntry,
    SiteToolEntry,
    StepEntry,
    TakeoverEntry,
    TaskEntry,
    WithdrawnEntry,
    redacted_params,
)
from messages.codec import encode
from messages.commands import CallSpec, Command, is_write
from messages.errors import KitsuneError

__all__ = ["AUDIT_STREAM", "AUDIT_SUBJECT", "AuditActor", "AuditLog", "AuditTrail", "Auditor", "JetStreamAuditLog",
           "LocalAuditLog", "audit_config", "recorded"]

log = logging.getLogger(__name__)

_WAIT = RECORD_WAIT
"""Seconds to wait for an entry to be written."""
_ACK_TIMEOUT = 5.0
"""Seconds the stream has to acknowledge an entry."""


class AuditLog(Protocol):
    """Where audit entries are numbered and kept."""

    async def send(self, entry: AuditEntry, data: bytes) -> Awaitable[int]:
        """Send ``entry`` (``data``: its wire form) now, without waiting; what it answers gives its sequence number
        (unique, increasing) once the entry is kept."""
        ...


class LocalAuditLog:
    """Entries numbered in this process's memory (a node without NATS)."""

    def __init__(self) -> None:
        self.entries: list[AuditEntry] = []

    async def send(self, entry: AuditEntry, data: bytes) -> Awaitable[int]:
        self.entries.append(entry)
        return _already_kept(len(self.entries))


def audit_config() -> StreamConfig:
    """The audit stream as a node makes it (and ``actors.nats_admin`` provisions it)."""
    return StreamConfig(name=AUDIT_STREAM, subjects=[AUDIT_SUBJECT], storage=StorageType.FILE)


class JetStreamAuditLog:
    """Entries in the JetStream stream ``KITSUNE_AUDIT`` (file storage), shared by every node."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._js = client.jetstream()
        self._acked = AckedPublisher(client, _ACK_TIMEOUT)

    @classmethod
    async def create(cls, client: Client) -> JetStreamAuditLog:
        """Ensure the stream exists with its replicas (``actors.jetstream``) and wrap it."""
        await ensure_stream(client, audit_config())
        return cls(client)

    async def last_id(self) -> int:
        """The id of the stream's last entry now: every call the fleet numbered so far has an id up to it."""
        return int((await self._js.stream_info(AUDIT_STREAM)).state.last_seq)

    async def send(self, entry: AuditEntry, data: bytes) -> Awaitable[int]:
        if not self._client.is_connected:
            raise KitsuneError("bus_disconnected", "not connected to NATS; audit entry not kept")
        acknowledgement = await self._acked.publish(AUDIT_SUBJECT, data)  # the answer names its stream (below)
        return self._kept(acknowledgement)

    @staticmethod
    async def _kept(acknowledgement: asyncio.Future[Any]) -> int:
        return kept_in(await acknowledgement, AUDIT_STREAM)


async def _already_kept(seq: int) -> int:
    """An acknowledgement that is already in."""
    return seq


@dataclass(frozen=True, slots=True)
class _Numbered:
    """An entry the stream numbered (or could not), for the audit actor to write."""

    data: bytes
    """The entry's wire form (what the stream keeps)."""
    seq: int | None
    """Its id; None when the stream could not keep it."""
    answer: concurrent.futures.Future[int] | None
    """Resolved with the id once the entry is written, or with ``audit_unavailable``; None when nobody waits."""


@dataclass(frozen=True, slots=True)
class _Burst:
    """The entries the stream settled in one pass of the writer, in the stream's order."""

    entries: tuple[_Numbered, ...]


class AuditActor(pykka.ThreadingActor):
    """The audit log's file writer: takes the entries the stream numbered, a burst at a time in the
    stream's order, writes their lines to the JSON-lines file at once and answers whoever waits for each."""

    def __init__(self, file: Path | None, on_record: Callable[[bool], None] = lambda written: None) -> None:
        super().__init__()
        self._path = file
        self._file: BinaryIO | None = None
        self._on_record = on_record
        """Told of every entry: whether it was written (metrics)."""

    def on_receive(self, message: Any) -> None:
        if not isinstance(message, _Burst):
            raise TypeError(f"the audit actor takes bursts of numbered entries, not {type(message).__name__}")
        lines = [_line(numbered) for numbered in message.entries]
        try:
            if self._path is not None and (kept := [line for line in lines if isinstance(line, bytes)]):
                _write_all(self._open(self._path), b"".join(kept))
        except Exception as e:
            self._close()
            lines = [e if isinstance(line, bytes) else line for line in lines]
        for numbered, line in zip(message.entries, lines, strict=True):
            self._answer(numbered, line)

    def _answer(self, numbered: _Numbered, line: bytes | Exception) -> None:
        """Answer whoever waits for an entry: its id once its ``line`` is written, else ``audit_unavailable``."""
        if isinstance(line, bytes):
            assert numbered.seq is not None
            self._on_record(True)
            if numbered.answer is not None:
                numbered.answer.set_result(numbered.seq)
            return
        self._on_record(False)
        log.error("audit entry not written (%s)", type(line).__name__)
        if numbered.answer is not None:
            numbered.answer.set_exception(KitsuneError(
                "audit_unavailable", "The audit log cannot be written; nothing was sent", retryable=True))

    def on_stop(self) -> None:
        self._close()

    def _open(self, path: Path) -> BinaryIO:
        """The file, open for appending; opened again when the path no longer names the open file
        (moved away, rotated, deleted), and an error when it cannot be opened (fail closed)."""
        if self._file is not None and not _names(path, self._file):
            self._close()
        if self._file is None:
            self._file = path.open("ab", buffering=0)  # each burst's lines go to the file as they are written
        return self._file

    def _close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None


def _line(numbered: _Numbered) -> bytes | Exception:
    """An entry's line in the file (its id first, as ``call``, then its wire form's fields), or why it has none."""
    if numbered.seq is None:
        return KitsuneError("audit_unavailable", "The audit stream did not keep the entry")
    return b'{"call":%d,%b\n' % (numbered.seq, numbered.data[1:])


def _write_all(file: BinaryIO, data: bytes) -> None:
    """Write ``data`` whole (an unbuffered file may take part of it at a time)."""
    written = file.write(data)
    while written < len(data):
        written += file.write(memoryview(data)[written:])


def _names(path: Path, file: BinaryIO) -> bool:
    """Whether ``path`` still names the open ``file``."""
    try:
        return os.path.samestat(os.fstat(file.fileno()), os.stat(path))
    except FileNotFoundError:
        return False


@dataclass(slots=True)
class _Entry:
    """An entry on its way."""

    entry: AuditEntry
    answer: concurrent.futures.Future[int] | None
    """The future of its id; None when nobody asks."""
    urgent: bool
    """Whether someone waits for it."""
    data: bytes = b""
    """Its wire form, once sent (the audit actor's line is made of it)."""


class AuditTrail:
    """Where entries are recorded: numbered by the audit log on the loop, several on their way at
    once (``actors.pipeline``), then written to the file by the audit actor in the log's order: the
    entries settled in one pass of the writer go to the actor together (one hand-off, one write)."""

    def __init__(self, log_: AuditLog, io: IoLoop, actor: pykka.ActorRef[AuditActor]) -> None:
        self._io = io
        self._actor = actor
        self._burst: list[_Numbered] = []
        """Entries settled in this pass of the loop, not yet handed to the actor (touched on the loop only)."""
        self._log = log_
        self._writer: OrderedWriter[_Entry, int] = OrderedWriter(
            io, send=lambda items: self._send(items[-1]),  # one at a time: every entry is acknowledged
            on_stored=lambda item, seq: self._settled(_Numbered(item.data, seq, item.answer), urgent=item.urgent),
            on_lost=lambda item, error: self._settled(_Numbered(item.data, None, item.answer), urgent=item.urgent))

    async def start(self) -> None:
        """Start numbering (on the loop)."""
        await self._writer.start()

    async def stop(self) -> None:
        """Number what was handed over, then stop (the actor is stopped by its owner)."""
        await self._writer.stop()
        self._hand_over()

    def record(self, entry: AuditEntry, *, urgent: bool = True) -> concurrent.futures.Future[int]:
        """Start recording one entry (from any thread); the future of its id, or of ``audit_unavailable``.
        An entry nobody waits for (not ``urgent``) may linger a little to go out with others."""
        answer: concurrent.futures.Future[int] = concurrent.futures.Future()
        self._writer.put(_Entry(entry, answer, urgent), acknowledged=True, urgent=urgent)
        return answer

    def post(self, entry: AuditEntry) -> None:
        """Start recording one entry nobody waits for or asks the id of (from any thread): it may linger a little to
        go out with others, and is written as any entry (a failure logged and counted)."""
        self._writer.put(_Entry(entry, None, False), acknowledged=True, urgent=False)

    async def _send(self, item: _Entry) -> Awaitable[int]:
        """Encode an entry (once: its line in the file is made of it) and send it; an entry that cannot be encoded
        is lost as one the log did not keep."""
        item.data = encode(item.entry)
        return await self._log.send(item.entry, item.data)

    def _settled(self, numbered: _Numbered, *, urgent: bool) -> None:
        """Keep a settled entry for the actor: the burst goes at once when someone waits for this entry or no
        other is on its way (the pass is over), else once the writer suspends (the loop runs the callback then)."""
        self._burst.append(numbered)
        if urgent or not self._writer.in_flight():
            self._hand_over()
        elif len(self._burst) == 1:
            self._io.loop.call_soon(self._hand_over)

    def _hand_over(self) -> None:
        """Tell the actor the entries kept so far, as one burst."""
        if self._burst:
            burst, self._burst = tuple(self._burst), []
            self._actor.tell(_Burst(burst))


class Auditor:
    """The audit of one agent's calls: the call service's ``CallAudit`` and the engine's ``StepAudit``."""

    def __init__(self, trail: AuditTrail, agent: str | None) -> None:
        self._trail = trail
        self._agent = agent

    def _record(self, entry: AuditEntry) -> int:
        return self._trail.record(entry).result(timeout=_WAIT)

    def call(self, spec: CallSpec, agent: str | None) -> int:
        return self.calling(spec, agent)()

    def calling(self, spec: CallSpec, agent: str | None) -> Callable[[], int]:
        entry = self._trail.record(CallEntry(time=_now(), agent=agent or self._agent, call_kind=spec.kind,
                                             commands=len(spec.commands), tab_id=spec.default_tab))
        return lambda: entry.result(timeout=_WAIT)

    def resume(self, call: int, agent: str | None) -> None:
        self._record(ResumeEntry(time=_now(), agent=agent or self._agent, call=call))

    def step(self, call: int, path: str, command: Command, tab_id: int | None, *,
             resumed: bool) -> Callable[[], None] | None:
        entry = StepEntry(time=_now(), agent=self._agent, action=command.action, tab_id=tab_id,
                          params=redacted_params(command), call=call, path=path, resumed=resumed)
        if not is_write(command):  # the engine waits only for a write's entry: a read's has no answer to make
            self._trail.post(entry)
            return None
        return Pending(self._trail.record(entry), _WAIT)  # raises audit_unavailable when the entry was not written

    def observed(self, call: int, path: str, command: Command, tab_id: int | None) -> None:
        self._record(ObservedStepEntry(time=_now(), agent=self._agent, action=command.action, tab_id=tab_id,
                                       params=redacted_params(command), call=call, path=path))

    def withdrawn(self, call: int, path: str, command: Command, tab_id: int | None) -> None:
        self._record(WithdrawnEntry(time=_now(), agent=self._agent, action=command.action, tab_id=tab_id, call=call,
                                    path=path))

    def interrupted(self, call: int | None, path: str | None, command: Command, tab_id: int) -> None:
        """Record that a write was running when its node stopped: its outcome is unknown."""
        self._record(InterruptedEntry(time=_now(), agent=self._agent, action=command.action, tab_id=tab_id,
                                      call=call, path=path))

    def takeover(self, tab_id: int) -> int:
        """Record a tab takeover; its entry's id."""
        return self._record(TakeoverEntry(time=_now(), agent=self._agent, tab_id=tab_id))

    def session(self, op: str, session: str, mode: str, call: int | None, *, reason: str | None = None,
                previous: str | None = None, size: int | None = None) -> None:
        """Record that one of the agent's sessions opened, was promoted, closed, swept or stored, or its state
        saved or restored (``size`` bytes) (without waiting: it is told from the loop, and sends nothing to a page)."""
        self._trail.record(SessionEntry(time=_now(), agent=self._agent, op=op, session=session, mode=mode, call=call,
                                        reason=reason, previous=previous, size=size), urgent=False)

    def live_view(self, op: str, tab_id: int, **detail: Any) -> None:
        """Record a Live View link made, opened, a person's input, or a hand-back (without waiting: told from
        the loop)."""
        self._trail.record(LiveViewEntry(time=_now(), agent=self._agent, op=op, tab_id=tab_id, detail=detail),
                           urgent=False)

    def task(self, op: str, task_id: str, source: str | None = None) -> int:
        """Record a task's creation, fork (from ``source``), takeover, completion, revocation or expiry (before it
        happens); its id."""
        return self._record(TaskEntry(time=_now(), agent=self._agent, op=op, task_id=task_id, source=source))

    def site_tool(self, tool: str, origin: str, tab_id: int, call: int, path: str | None) -> None:
        """Record that a page's tool is called (without waiting: told from the loop, just before it is)."""
        self._trail.record(SiteToolEntry(time=_now(), agent=self._agent, tool=tool, origin=origin, tab_id=tab_id,
                                         call=call, path=path), urgent=False)

    def direct(self, command: Command, tab_id: int | None) -> concurrent.futures.Future[int]:
        """Start recording a direct call (from any thread); the future of its call id, or of ``audit_unavailable``
        (:func:`recorded` waits for it on the loop)."""
        return self._trail.record(DirectEntry(time=_now(), agent=self._agent, action=command.action, tab_id=tab_id,
                                              params=redacted_params(command)))


async def recorded(entry: concurrent.futures.Future[int]) -> int:
    """On the loop: the id of an ``entry`` being recorded once it is written; ``audit_unavailable`` when it cannot
    be, ``TimeoutError`` when it is not within the wait for an entry."""
    async with asyncio.timeout(_WAIT):
        return await asyncio.wrap_future(entry)


def _now() -> float:
    """An entry's time: Unix seconds, to the millisecond."""
    return round(time.time(), 3)
