"""JetStream publishes whose acknowledgements come to an inbox of the publisher's own.

What nats-py's ``publish_async`` does, without what it costs a publish beyond that (``bench/publish.py``): a token of
a NUID and random bytes, a semaphore, a callback when the answer comes and a ``PubAck`` read field by field. Here each
publisher subscribes once to ``<inbox>.*`` of its connection; a publish takes the next number of a counter as its reply
subject, and its acknowledgement's future is set from the answer's JSON as the answer arrives. Each acknowledgement
fails with ``TimeoutError`` unless it comes within its time from its sending (:class:`AckDeadlines`).
"""

from __future__ import annotations

import asyncio
import itertools
import json

import nats.errors
import nats.js.errors
from nats.aio.client import NO_RESPONDERS_STATUS, Client
from nats.aio.msg import Msg
from nats.js.api import Header, PubAck

from actors.jetstream import AckDeadlines

__all__ = ["AckedPublisher"]

_PRUNE_AT = 1024
"""Acknowledgements awaited past which those settled without an answer (run out) are forgotten."""


class AckedPublisher:
    """Publishes to the streams of one connection, each answered by the stream's acknowledgement (on the loop)."""

    def __init__(self, client: Client, seconds: float) -> None:
        self._client = client
        self._deadlines = AckDeadlines(seconds)
        self._prefix: str | None = None
        self._starting = asyncio.Lock()
        self._numbers = itertools.count()
        self._waiting: dict[str, asyncio.Future[PubAck]] = {}
        """The acknowledgements awaited, by reply subject."""

    async def publish(self, subject: str, data: bytes) -> asyncio.Future[PubAck]:
        """Send ``data`` on ``subject`` now; the future of the stream's acknowledgement (``TimeoutError`` past its time,
        ``NoStreamResponseError`` when no stream takes the subject, ``APIError`` when the stream refuses it)."""
        prefix = self._prefix if self._prefix is not None else await self._start()
        reply = f"{prefix}{next(self._numbers)}"
        acknowledgement: asyncio.Future[PubAck] = asyncio.get_running_loop().create_future()
        waiting = self._waiting
        if len(waiting) >= _PRUNE_AT:
            self._waiting = waiting = {key: future for key, future in waiting.items() if not future.done()}
        waiting[reply] = acknowledgement
        try:
            await self._client.publish(subject, data, reply=reply)
        except BaseException:
            del waiting[reply]
            raise
        return self._deadlines.within(acknowledgement)

    async def _start(self) -> str:
        async with self._starting:
            if self._prefix is None:
                inbox = self._client.new_inbox()
                await self._client.subscribe(f"{inbox}.*", cb=self._answered)
                self._prefix = f"{inbox}."
            return self._prefix

    async def _answered(self, message: Msg) -> None:
        acknowledgement = self._waiting.pop(message.subject, None)
        if acknowledgement is None or acknowledgement.done():
            return
        if message.headers and message.headers.get(Header.STATUS) == NO_RESPONDERS_STATUS:
            acknowledgement.set_exception(nats.js.errors.NoStreamResponseError())
            return
        try:
            answer = json.loads(message.data)
            if "error" in answer:
                acknowledgement.set_exception(nats.js.errors.APIError.from_error(answer["error"]))
            else:
                acknowledgement.set_result(PubAck(stream=answer["stream"], seq=answer["seq"],
                                                  duplicate=answer.get("duplicate")))
        except (ValueError, KeyError, TypeError):
            acknowledgement.set_exception(nats.errors.Error(f"not an acknowledgement: {message.data[:64]!r}"))
