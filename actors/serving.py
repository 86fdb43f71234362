"""Typed subjects: a node's handlers take messages, never bytes, and its requests get typed answers.

:func:`typed` makes the bus handler of one subject from a handler for each message type the subject
takes: each message is read once (``messages.codec.Reader``), given to its type's handler, and the
answer encoded. A message the subject does not take, or one its handler refuses (``Refused``), is
logged with the subject and the reason (never a value of the message) and answered with the error;
the node goes on. :func:`ask` is the other end: a request encoded, its answer read as one of the
types it may be, an error answer raised as its :class:`~messages.errors.KitsuneError`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from actors.bus import Bus, Handler
from messages.codec import Reader, encode, read_answer
from messages.commands import Command
from messages.errors import KitsuneError
from messages.requests import TabRequest
from messages.results import Failed, Failure
from messages.wire import SMALL, ErrorAnswer, Message, Refused

__all__ = ["ask", "taking", "typed"]

log = logging.getLogger(__name__)

A = TypeVar("A")

Handle = Callable[[Any], Awaitable[Any]]
"""Handles one message of its type; what it returns (None: nothing) answers it: a message, or its encoding
when the handler needed that anyway."""


def typed(subject: str, handlers: Mapping[type[Any], Handle], *, limit: int = SMALL,
          outcomes: bool = False) -> Handler:
    """The bus handler of ``subject``, which takes the message types of ``handlers``, each of at most ``limit``
    bytes. A message refused is answered with its error: an :class:`ErrorAnswer`, or where the answers are a
    step's ``outcomes``, a failed one (nothing was sent). A :class:`KitsuneError` a handler raises is answered
    as an ``ErrorAnswer`` too, except where the answers are outcomes: there it stays unanswered (the bus logs it),
    as the step may have been sent."""
    reader = Reader(handlers, limit)
    by_type = dict(handlers)

    async def handle(data: bytes) -> bytes | None:
        try:
            message = reader.read(data)
            handler = by_type.get(type(message)) or _handler_of(message, handlers, by_type)
            answer = await handler(message)
        except Refused as e:
            log.warning("refused a message on %s: %s", subject, e.message)
            return encode(Failed(Failure.of(e)) if outcomes else ErrorAnswer(e))
        except KitsuneError as e:
            if outcomes:
                raise
            return encode(ErrorAnswer(e))
        if answer is None or isinstance(answer, bytes):
            return answer
        return encode(answer)

    return handle


def _handler_of(message: Any, handlers: Mapping[type[Any], Handle], by_type: dict[type[Any], Handle]) -> Handle:
    """The handler of a message whose type is a subclass of one the subject takes (an event), remembered."""
    handler = by_type[type(message)] = next(h for cls, h in handlers.items() if isinstance(message, cls))
    return handler


def taking(command: type[Command],
           handle: Callable[[TabRequest], Awaitable[A]]) -> Callable[[TabRequest], Awaitable[A]]:
    """``handle`` for the requests of ``command`` only: those of another action are refused."""
    async def taken(request: TabRequest) -> A:
        if not isinstance(request.command, command):
            raise Refused(f"a {request.command.action} request, where a {command.action} was expected")
        return await handle(request)
    return taken


async def ask(bus: Bus, subject: str, request: Message, timeout: float, *answers: type[A]) -> A:
    """The answer to ``request`` on ``subject``, one of ``answers``: an error answer is raised as its error, an
    answer of another shape as ``invalid_message``, a failure of the bus as its ``BusError``."""
    return read_answer(await bus.request(subject, encode(request), timeout), *answers)
