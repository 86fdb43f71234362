"""The wire codec (orjson) for every typed message: events, results, errors, step records, commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import orjson

from messages.commands import Command, command_to_json, parse_command
from messages.errors import KitsuneError
from messages.events import Event, event_from_json, event_to_json
from messages.results import Failure, Ok, result_from_json
from messages.steplog import StepRecord, record_from_json, record_to_json

__all__ = ["decode", "encode"]

T = TypeVar("T")

_ENCODERS: list[tuple[type[Any], Callable[[Any], Any]]] = [
    (Event, event_to_json),
    (Ok, Ok.to_json),
    (Failure, Failure.to_json),
    (KitsuneError, KitsuneError.to_json),
    (StepRecord, record_to_json),
    (Command, command_to_json),
]
_DECODERS: dict[type[Any], Callable[[Any], Any]] = {
    Event: event_from_json,
    Ok: result_from_json,
    Failure: result_from_json,
    KitsuneError: KitsuneError.from_json,
    StepRecord: record_from_json,
    Command: parse_command,
}


def encode(message: Any) -> bytes:
    """Serialize a typed message to JSON bytes."""
    for cls, to_json in _ENCODERS:
        if isinstance(message, cls):
            return orjson.dumps(to_json(message))
    raise TypeError(f"no wire form for {type(message).__name__}")


def decode(cls: type[T], data: bytes) -> T:
    """Parse JSON bytes back into a message of ``cls`` (or, for ``Event``, of its own kind)."""
    base = next(base for base in _DECODERS if issubclass(cls, base))
    message = _DECODERS[base](orjson.loads(data))
    if not isinstance(message, cls):
        raise TypeError(f"expected {cls.__name__}, got {type(message).__name__}")
    return message
