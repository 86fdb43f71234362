"""The message bus: request/reply and publish/subscribe over subjects, in process or over NATS.

Both implementations follow NATS semantics: subjects are dot-separated tokens, ``*`` matches one
token and ``>`` the rest (one or more); a queue group delivers each message to one member; a
subscription handles its messages one at a time, in order (or each in a task of its own, started
in order, when it is ``concurrent``); a handler's return value, when not None, is the reply to a
request. Failures are :class:`BusError`:

- ``no_responders``: nobody subscribes to the subject; nothing was delivered (retryable);
- ``bus_timeout``: no reply in time; the request may have been handled (not retryable as is);
- ``bus_disconnected``: the connection is down (retryable: nothing was sent) or was lost while
  the request was in flight (not retryable: it may have been handled); never a reply;
- ``bus_error``: any other failure of the transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription as _NatsSubscription

from actors.nats_connection import connect_options, display_url
from core.settings import NatsAuth
from messages.errors import KitsuneError

__all__ = ["Bus", "BusError", "Handler", "LocalBus", "NatsBus", "Subscription"]

_log = logging.getLogger(__name__)

Handler = Callable[[bytes], Awaitable[bytes | None]]
"""Handles one message; what it returns (when not None) is the reply to a request."""


class BusError(KitsuneError):
    """A bus operation failed; ``code`` is no_responders, bus_timeout, bus_disconnected or bus_error."""

    def __init__(self, code: str, message: str, *, subject: str | None = None, sent: bool = False) -> None:
        super().__init__(code, message, retryable=not sent)
        self.subject = subject
        """The subject of the failed operation."""
        self.sent = sent
        """Whether the message may have reached a handler (so its effect is unknown)."""


class Subscription(Protocol):
    """Interest in a subject, ended by :meth:`unsubscribe`."""

    async def unsubscribe(self) -> None:
        """Stop receiving; messages not yet handled are dropped. Idempotent."""
        ...


class Bus(Protocol):
    """The port every actor talks through."""

    @property
    def connected(self) -> bool:
        """Whether a request sent now can reach a handler."""
        ...

    async def request(self, subject: str, data: bytes, timeout: float) -> bytes:
        """Send ``data`` to one handler of ``subject`` and return its reply."""
        ...

    async def publish(self, subject: str, data: bytes) -> None:
        """Send ``data`` to every subscriber of ``subject`` (one per queue group); no reply."""
        ...

    async def subscribe(self, subject: str, handler: Handler, queue: str | None = None, *,
                        concurrent: bool = False) -> Subscription:
        """Handle the messages of ``subject`` (a pattern); with ``queue``, share them with its group;
        ``concurrent``: each message in a task of its own (a slow one does not hold up the next)."""
        ...

    async def close(self) -> None:
        """End every subscription and the connection; later operations raise ``bus_disconnected``."""
        ...


# --- subjects ----------------------------------------------------------------------------------

def _check_subject(subject: str, *, pattern: bool) -> list[str]:
    """The subject's tokens; ``ValueError`` if it is malformed (wildcards only in a pattern)."""
    tokens = subject.split(".")
    if not subject or any(not t or any(c.isspace() for c in t) for t in tokens):
        raise ValueError(f"malformed subject {subject!r}")
    for index, token in enumerate(tokens):
        wild = token in ("*", ">")
        if ("*" in token or ">" in token) and not (pattern and wild):
            raise ValueError(f"malformed subject {subject!r}")
        if token == ">" and index != len(tokens) - 1:
            raise ValueError(f"malformed subject {subject!r}")
    return tokens


def _matches(pattern: list[str], subject: list[str]) -> bool:
    for index, token in enumerate(pattern):
        if token == ">":
            return len(subject) > index
        if index >= len(subject) or (token != "*" and token != subject[index]):
            return False
    return len(pattern) == len(subject)


async def _handle(handler: Handler, subject: str, data: bytes) -> bytes | None:
    """Run a handler; a failure is logged (by type: its text may hold data) and gives no reply."""
    try:
        return await handler(data)
    except asyncio.CancelledError:
        raise
    except Exception as e:
        _log.error("handler for %s failed: %s", subject, type(e).__name__, exc_info=_log.isEnabledFor(logging.DEBUG))
        return None


_HANDLING: set[asyncio.Task[None]] = set()
"""Messages of concurrent subscriptions being handled (a task needs a reference until it ends)."""


def _spawn(handling: Awaitable[None]) -> None:
    task = asyncio.ensure_future(handling)
    _HANDLING.add(task)
    task.add_done_callback(_HANDLING.discard)


# --- in process --------------------------------------------------------------------------------

@dataclass(eq=False)
class _Delivery:
    data: bytes
    reply: asyncio.Future[bytes] | None


@dataclass(eq=False)
class _LocalSubscription:
    bus: LocalBus
    pattern: list[str]
    subject: str
    handler: Handler
    queue: str | None
    concurrent: bool = False
    inbox: asyncio.Queue[_Delivery | None] = field(default_factory=asyncio.Queue)
    worker: asyncio.Task[None] | None = None
    closed: bool = False

    async def unsubscribe(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.bus._remove(self)
        self.inbox.put_nowait(None)
        if self.worker is not None and self.worker is not asyncio.current_task():
            self.worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.worker

    async def _run(self) -> None:
        while (delivery := await self.inbox.get()) is not None and not self.closed:
            if self.concurrent:
                _spawn(self._answer(delivery))
            else:
                await self._answer(delivery)

    async def _answer(self, delivery: _Delivery) -> None:
        reply = await _handle(self.handler, self.subject, delivery.data)
        if reply is not None and delivery.reply is not None and not delivery.reply.done():
            delivery.reply.set_result(reply)


class LocalBus:
    """The bus in one process, for tests and single-node runs; same semantics as NATS."""

    def __init__(self) -> None:
        self._subs: list[_LocalSubscription] = []
        self._turns: dict[tuple[str, str], int] = {}
        self._closed = False

    @property
    def connected(self) -> bool:
        return not self._closed

    async def request(self, subject: str, data: bytes, timeout: float) -> bytes:
        reply: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        if not self._deliver(subject, data, reply):
            raise BusError("no_responders", f"no responders on {subject}", subject=subject)
        try:
            return await asyncio.wait_for(reply, timeout)
        except TimeoutError:
            raise BusError("bus_timeout", f"no reply on {subject} within {timeout:g} s",
                           subject=subject, sent=True) from None

    async def publish(self, subject: str, data: bytes) -> None:
        self._deliver(subject, data, None)

    async def subscribe(self, subject: str, handler: Handler, queue: str | None = None, *,
                        concurrent: bool = False) -> Subscription:
        if self._closed:
            raise BusError("bus_disconnected", "the bus is closed", subject=subject)
        sub = _LocalSubscription(self, _check_subject(subject, pattern=True), subject, handler, queue or None,
                                 concurrent)
        sub.worker = asyncio.get_running_loop().create_task(sub._run(), name=f"bus-sub:{subject}")
        self._subs.append(sub)
        return sub

    async def close(self) -> None:
        self._closed = True
        for sub in list(self._subs):
            await sub.unsubscribe()

    def _deliver(self, subject: str, data: bytes, reply: asyncio.Future[bytes] | None) -> bool:
        """Queue the message for every matching subscriber (one per group); whether any matched."""
        if self._closed:
            raise BusError("bus_disconnected", "the bus is closed", subject=subject)
        tokens = _check_subject(subject, pattern=False)
        chosen: list[_LocalSubscription] = []
        groups: dict[tuple[str, str], list[_LocalSubscription]] = {}
        for sub in self._subs:
            if _matches(sub.pattern, tokens):
                if sub.queue is None:
                    chosen.append(sub)
                else:
                    groups.setdefault((sub.subject, sub.queue), []).append(sub)
        for key, members in groups.items():
            turn = self._turns.get(key, 0)
            self._turns[key] = turn + 1
            chosen.append(members[turn % len(members)])
        for sub in chosen:
            sub.inbox.put_nowait(_Delivery(data, reply))
        return bool(chosen)

    def _remove(self, sub: _LocalSubscription) -> None:
        with contextlib.suppress(ValueError):
            self._subs.remove(sub)


# --- NATS --------------------------------------------------------------------------------------

class _NatsSubscriptionHandle:
    def __init__(self, sub: _NatsSubscription) -> None:
        self._sub = sub
        self._done = False

    async def unsubscribe(self) -> None:
        if self._done:
            return
        self._done = True
        # Closed or draining connection, or already gone: the interest is gone either way.
        with contextlib.suppress(nats.errors.Error):
            await self._sub.unsubscribe()


class NatsBus:
    """The bus over a nats-py connection that reconnects forever; counts its outages."""

    def __init__(self) -> None:
        self._nc = Client()
        self._closing = False
        self._refused = False
        """Whether the server refused the credentials (authorization violation)."""
        self._lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        """Resolved when the connection drops; replaced when it comes back."""
        self.disconnects = 0
        """Connections lost (not counting :meth:`close`)."""
        self.reconnects = 0
        """Connections re-established after a loss."""
        self.on_request: Callable[[str, float, str], None] | None = None
        self.on_reconnect: Callable[[], Awaitable[None]] | None = None
        """Run after each reconnect (the node makes sure its streams are there again)."""
        """Told of every request: its subject, seconds taken, and ``ok`` or the failure's code (metrics)."""

    @classmethod
    async def connect(
        cls, url: str, *, auth: NatsAuth = NatsAuth(), name: str = "kitsune", connect_timeout: float = 5.0,
        reconnect_wait: float = 0.25
    ) -> NatsBus:
        """Connect to ``url`` (or comma-separated URLs of one cluster) with ``auth``; ``bus_disconnected``
        if unreachable or if the server refuses the credentials (the message says which)."""
        servers = [u.strip() for u in url.split(",") if u.strip()]
        where = display_url(url)
        bus = cls()
        try:
            # With unlimited reconnects nats-py retries the first connect forever too; bound it here.
            await asyncio.wait_for(
                bus._nc.connect(
                    servers,
                    name=name,
                    allow_reconnect=True,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=reconnect_wait,  # type: ignore[arg-type]  # annotated int, slept as float
                    connect_timeout=max(1, round(connect_timeout)),
                    error_cb=bus._on_error,
                    disconnected_cb=bus._on_disconnected,
                    reconnected_cb=bus._on_reconnected,
                    **connect_options(auth),
                ),
                connect_timeout,
            )
        except (TimeoutError, OSError, nats.errors.Error) as e:
            bus._closing = True
            with contextlib.suppress(Exception):
                await bus._nc.close()
            why = " (the server refused the credentials)" if bus._refused else ""
            raise BusError("bus_disconnected", f"cannot connect to NATS at {where}{why}") from e
        _log.info("connected to NATS at %s", display_url(bus._server()))
        return bus

    @property
    def client(self) -> Client:
        """The nats-py client (JetStream, KV)."""
        return self._nc

    @property
    def connected(self) -> bool:
        # ``_lost`` is still resolved between nats-py's reconnect and our callback: not yet.
        return self._nc.is_connected and not self._closing and not self._lost.done()

    async def request(self, subject: str, data: bytes, timeout: float) -> bytes:
        if self.on_request is None:
            return await self._request(subject, data, timeout)
        started = time.monotonic()
        outcome = "bus_error"
        try:
            reply = await self._request(subject, data, timeout)
            outcome = "ok"
            return reply
        except BusError as e:
            outcome = e.code
            raise
        finally:
            self.on_request(subject, time.monotonic() - started, outcome)

    async def _request(self, subject: str, data: bytes, timeout: float) -> bytes:
        _check_subject(subject, pattern=False)
        self._check_connected(subject)
        lost = self._lost
        sending = asyncio.ensure_future(self._nc.request(subject, data, timeout=timeout))
        try:
            await asyncio.wait((sending, lost), return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not sending.done():
                sending.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await sending
        if not sending.done() or sending.cancelled():
            raise BusError("bus_disconnected", f"connection lost while requesting {subject}",
                           subject=subject, sent=True)
        try:
            return sending.result().data
        except nats.errors.NoRespondersError as e:
            raise BusError("no_responders", f"no responders on {subject}", subject=subject) from e
        except TimeoutError as e:  # nats.errors.TimeoutError is one
            raise BusError("bus_timeout", f"no reply on {subject} within {timeout:g} s",
                           subject=subject, sent=True) from e
        except nats.errors.BadSubjectError as e:
            raise ValueError(f"malformed subject {subject!r}") from e
        except nats.errors.Error as e:
            raise _translate(e, subject, sent=True) from e

    async def publish(self, subject: str, data: bytes) -> None:
        # While reconnecting nats-py buffers the message and sends it on reconnect (at most once).
        _check_subject(subject, pattern=False)
        if self._closing or self._nc.is_closed:
            raise BusError("bus_disconnected", "the bus is closed", subject=subject)
        try:
            await self._nc.publish(subject, data)
        except nats.errors.BadSubjectError as e:
            raise ValueError(f"malformed subject {subject!r}") from e
        except nats.errors.Error as e:
            raise _translate(e, subject, sent=False) from e

    async def subscribe(self, subject: str, handler: Handler, queue: str | None = None, *,
                        concurrent: bool = False) -> Subscription:
        _check_subject(subject, pattern=True)
        self._check_connected(subject)

        async def answer(msg: Msg) -> None:
            reply = await _handle(handler, subject, msg.data)
            if reply is not None and msg.reply:
                with contextlib.suppress(nats.errors.Error):  # the requester is gone: nothing to tell
                    await msg.respond(reply)

        async def on_message(msg: Msg) -> None:
            if concurrent:
                _spawn(answer(msg))
            else:
                await answer(msg)

        try:
            sub = await self._nc.subscribe(subject, queue=queue or "", cb=on_message)
            # nats-py writes a flush's PING straight to the socket, ahead of commands still queued (this
            # SUB): write the queue out first, so that the PONG proves the server has the interest.
            await self._nc._flush_pending(force_flush=True)
            await self._nc.flush()
        except nats.errors.Error as e:
            raise _translate(e, subject, sent=False) from e
        except asyncio.CancelledError:
            _own_cancellation()
            raise BusError("bus_disconnected", f"connection lost while subscribing to {subject}",
                           subject=subject) from None
        return _NatsSubscriptionHandle(sub)

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        try:
            await self._nc.close()
        except nats.errors.Error:
            pass  # closed as it went wrong: closed all the same
        except asyncio.CancelledError:
            _own_cancellation()
        if not self._lost.done():
            self._lost.set_result(None)

    def _check_connected(self, subject: str) -> None:
        if not self.connected:
            raise BusError("bus_disconnected", f"not connected to NATS (subject {subject})", subject=subject)

    def _server(self) -> str:
        url = self._nc.connected_url
        return url.geturl() if url is not None else "?"

    async def _on_disconnected(self) -> None:
        if not self._lost.done():
            self._lost.set_result(None)
        if self._closing:
            return
        self.disconnects += 1
        _log.warning("NATS connection lost (%d so far); reconnecting", self.disconnects)

    async def _on_reconnected(self) -> None:
        self.reconnects += 1
        self._lost = asyncio.get_running_loop().create_future()
        _log.info("NATS connection back at %s (%d reconnects)", display_url(self._server()), self.reconnects)
        if self.on_reconnect is not None:
            try:
                await self.on_reconnect()
            except Exception as e:  # the next reconnect tries again
                _log.error("after reconnecting: %s", type(e).__name__)

    async def _on_error(self, e: Exception) -> None:
        # Connection-level failures repeat on every reconnect attempt; the outage itself is logged once.
        text = str(e).lower()
        if "authorization violation" in text:
            if not self._refused:
                _log.error("NATS refused this client's credentials (authorization violation)")
            self._refused = True
            return
        if "permissions violation" in text:  # the server's text names the subject, never a credential
            _log.error("NATS refused an operation: %s", str(e).removeprefix("nats: "))
            return
        quiet = isinstance(e, OSError | TimeoutError | nats.errors.StaleConnectionError)
        _log.log(logging.DEBUG if quiet else logging.WARNING, "NATS client error: %s", type(e).__name__)


def _own_cancellation() -> None:
    """Raise the ``CancelledError`` being handled again if it is this task's own (it was asked to stop); else it is
    nats-py's, a future it awaited for the caller cancelled as the connection dropped, and the caller goes on."""
    task = asyncio.current_task()
    if task is None or task.cancelling():
        raise asyncio.CancelledError


def _translate(e: nats.errors.Error, subject: str, *, sent: bool) -> BusError:
    """A nats-py error as a :class:`BusError` (raise it ``from e``)."""
    if isinstance(e, nats.errors.NoRespondersError):
        return BusError("no_responders", f"no responders on {subject}", subject=subject)
    if isinstance(e, TimeoutError):
        return BusError("bus_timeout", f"no answer on {subject} in time", subject=subject, sent=sent)
    if isinstance(e, nats.errors.ConnectionClosedError | nats.errors.ConnectionReconnectingError
                  | nats.errors.ConnectionDrainingError | nats.errors.StaleConnectionError
                  | nats.errors.NoServersError):
        return BusError("bus_disconnected", f"connection to NATS lost ({subject})", subject=subject, sent=sent)
    return BusError("bus_error", f"NATS failed on {subject}: {type(e).__name__}", subject=subject, sent=sent)
