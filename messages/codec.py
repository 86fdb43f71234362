"""The wire codec (orjson) for every typed message: events, results, outcomes, errors, step records, commands,
audit entries (encoded only: the audit log is read as JSON, never decoded back)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import orjson

from messages.audit import AuditEntry
from messages.commands import Command, command_to_json, parse_command
from messages.errors import KitsuneError
from messages.events import Event, event_from_json, event_to_json
from messages.requests import TabCancel, TabRequest
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

__all__ = ["decode", "decode_events", "decode_outcome", "encode"]

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
    (TabCancel, TabCancel.to_json),
    (AuditEntry, AuditEntry.to_json),
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
    TabCancel: TabCancel.from_json,
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
        decoder = _BY_CLASS[cls] = next(decoder for base, decoder in _DECODERS.items() if issubclass(cls, base))
    return decoder


_BY_CLASS: dict[type[Any], Callable[[Any], Any]] = {}


def decode_outcome(data: bytes) -> Outcome:
    """Parse an outcome of any kind (done, failed, unknown, held)."""
    return outcome_from_json(orjson.loads(data))


def decode_events(wire: Iterable[bytes]) -> list[Event]:
    """Events from their wire forms, in order: a replay's boundary, thousands at a time."""
    return [event_from_json(orjson.loads(data)) for data in wire]
