"""The wire codec (orjson) for every typed message: events, results, outcomes, errors, step records, commands,
the messages between nodes (``messages.wire``), audit entries (encoded only: the audit log is read as JSON,
never decoded back); and the reading of what one subject takes (:class:`Reader`) or one request is answered."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast

import orjson

from messages import fleet, live  # noqa: F401  # every kind between nodes, known to readers
from messages.audit import AuditEntry
from messages.commands import Command, command_to_json, parse_command
from messages.errors import KitsuneError
from messages.events import Event, event_from_json, event_to_json
from messages.replay import replay
from messages.requests import TabRequest
from messages.results import (
    Done,
    Failed,
    Failure,
    HeldForApproval,
    Ok,
    Outcome,
    Unknown,
    outcome_from_json,
    outcome_to_json,
    result_from_json,
)
from messages.steplog import StepRecord, record_from_json, record_to_json
from messages.wire import KIND, KINDS, SMALL, ErrorAnswer, Message, Refused

__all__ = ["Reader", "decode", "decode_events", "decode_outcome", "encode", "read_answer", "replay"]

T = TypeVar("T")

_ENCODERS: list[tuple[type[Any], Callable[[Any], Any]]] = [
    (Event, event_to_json),
    (Ok, Ok.to_json),
    (Failure, Failure.to_json),
    (KitsuneError, KitsuneError.to_json),
    (StepRecord, record_to_json),
    (Command, command_to_json),
    (Done, outcome_to_json),
    (Failed, outcome_to_json),
    (Unknown, outcome_to_json),
    (HeldForApproval, outcome_to_json),
    (TabRequest, TabRequest.to_json),
    (AuditEntry, AuditEntry.to_json),
    (Message, lambda message: message.to_json()),
]
_DECODERS: dict[type[Any], Callable[[Any], Any]] = {
    Event: event_from_json,
    Ok: result_from_json,
    Failure: result_from_json,
    KitsuneError: KitsuneError.from_json,
    StepRecord: record_from_json,
    Command: parse_command,
    Done: outcome_from_json,
    Failed: outcome_from_json,
    Unknown: outcome_from_json,
    HeldForApproval: outcome_from_json,
    TabRequest: TabRequest.from_json,
}


def encode(message: Any) -> bytes:
    """Serialize a typed message to JSON bytes."""
    for cls, to_json in _ENCODERS:
        if isinstance(message, cls):
            return orjson.dumps(to_json(message))
    raise TypeError(f"no wire form for {type(message).__name__}")


def decode(cls: type[T], data: bytes) -> T:
    """Parse JSON bytes back into a message of ``cls`` (or, for ``Event``, of its own kind)."""
    message = _decoder(cls)(orjson.loads(data))
    if not isinstance(message, cls):
        raise TypeError(f"expected {cls.__name__}, got {type(message).__name__}")
    return message


def _decoder(cls: type[Any]) -> Callable[[Any], Any]:
    decoder = _BY_CLASS.get(cls)
    if decoder is None:
        decoder = _BY_CLASS[cls] = cls.from_json if issubclass(cls, Message) else \
            next(decoder for base, decoder in _DECODERS.items() if issubclass(cls, base))
    return decoder


_BY_CLASS: dict[type[Any], Callable[[Any], Any]] = {}


def decode_outcome(data: bytes) -> Outcome:
    """Parse an outcome of any kind (done, failed, unknown, held)."""
    return outcome_from_json(orjson.loads(data))


def decode_events(wire: Iterable[bytes]) -> list[Event]:
    """Events from their wire forms, in order."""
    return [event_from_json(orjson.loads(data)) for data in wire]


class Reader:
    """Reads what one subject takes: messages of ``types``, each by its kind (one that names no kind as the
    plain type among them, if there is one), of at most ``limit`` bytes; anything else is :class:`Refused`."""

    def __init__(self, types: Iterable[type[Any]], limit: int = SMALL) -> None:
        taken = tuple(types)
        self.limit = limit
        """Bytes a message may have."""
        self._kinds = {cls.KIND: cls for cls in taken if issubclass(cls, Message)}
        plain = [cls for cls in taken if not issubclass(cls, Message)]
        if len(plain) > 1:
            raise TypeError("a subject takes one plain message type at most")
        self._plain = plain[0] if plain else None

    def read(self, data: bytes) -> Any:
        """The message ``data`` is; :class:`Refused` with the reason when the subject does not take it."""
        if len(data) > self.limit:
            raise Refused(f"{len(data)} bytes, over the {self.limit} a message here may have")
        try:
            body = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise Refused("not JSON") from None
        if not isinstance(body, dict):
            raise Refused(f"a JSON {type(body).__name__}, not an object")
        kind = body.get(KIND)
        cls = self._plain if kind is None else self._kinds.get(kind) if isinstance(kind, str) else None
        if cls is None:
            raise Refused(_stranger(kind))
        try:
            return _decoder(cls)(body)
        except Refused as e:
            raise Refused(f"a malformed {_name(cls)}: {e.message}") from None
        except KitsuneError as e:  # a command that does not parse: its code and path, never its text
            where = (e.state or {}).get("path")
            raise Refused(f"a malformed {_name(cls)}: {e.code}" + (f" at command {where}" if where else "")) from None
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise Refused(f"a malformed {_name(cls)} ({type(e).__name__})") from None


def _stranger(kind: Any) -> str:
    """Why a message of ``kind`` is not taken, naming the kind only when it is one of the fleet's."""
    if kind is None:
        return "an untyped message (no kind)"
    if isinstance(kind, str) and kind in KINDS:
        return f"a message of kind {kind!r}, which this subject does not take"
    return "a message of an unknown kind"


def _name(cls: type[Any]) -> str:
    return cls.KIND if issubclass(cls, Message) else cls.__name__


_ANSWERS: dict[tuple[type[Any], ...], Reader] = {}


def read_answer(data: bytes, *types: type[T]) -> T:
    """The answer to a request, one of ``types``; an :class:`ErrorAnswer` is raised as its error, anything
    else as :class:`Refused`."""
    reader = _ANSWERS.get(types)
    if reader is None:
        reader = _ANSWERS[types] = Reader((*types, ErrorAnswer), limit=sys.maxsize)  # NATS bounds it
    answer = reader.read(data)
    if isinstance(answer, ErrorAnswer):
        raise answer.error
    return cast(T, answer)
