"""The wire discipline between nodes: each message a node sends another is a :class:`Message`.

A message's wire form is flat: its kind (its class's name in snake case) and its fields,
``{"kind": "claim_tab", "call": 7, ...}``. Read back, each field is checked against its
annotation, so a handler gets a message whose fields are what they say. The few plain messages
older than kinds, which cross on the hot path (a tab's ``TabRequest``, an ``Event``), keep their
own wire forms; a subject that takes one reads a message naming no kind as that one
(``messages.codec.Reader``).

What a subject does not take is :class:`Refused`, with a reason that names what is wrong and never
a value: a message may carry a token, a typed value or a script.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

from messages.errors import KitsuneError

__all__ = ["KIND", "KINDS", "LARGE", "SMALL", "ErrorAnswer", "Message", "Refused", "checked"]

KIND = "kind"
"""The key of a message's kind in its wire form."""
SMALL = 64 * 1024
"""Bytes a message of a subject that carries no commands, results or frames may have."""
LARGE = 1024 * 1024
"""Bytes a message that carries commands, results or frames may have: NATS's own default bound."""

KINDS: dict[str, type[Message]] = {}
"""Every message class, by its kind."""

_MISSING: Any = object()


class Refused(KitsuneError):
    """A message its subject does not take (``invalid_message``); its message is the reason, naming no value."""

    def __init__(self, reason: str) -> None:
        super().__init__("invalid_message", reason)


def checked(data: Mapping[str, Any], name: str, annotation: Any, default: Any = _MISSING) -> Any:
    """Field ``name`` of ``data`` as a field annotated ``annotation`` holds it; :class:`Refused` naming the
    field, never its value, when it is missing (and has no ``default``) or of another type."""
    value = data.get(name, default)
    if value is _MISSING:
        raise Refused(f"no field {name!r}")
    try:
        return _check_of(annotation)(value)
    except TypeError as e:
        raise Refused(f"field {name!r} is not {e.args[0]}") from None


class Message:
    """A message between nodes with a flat wire form: its kind and its fields (subclasses are frozen dataclasses)."""

    __slots__ = ()
    KIND: ClassVar[str]
    """The message's kind on the wire: its class's name in snake case."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.KIND = re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()
        KINDS[cls.KIND] = cls  # a dataclass with slots replaces its class: the last one stays

    def to_json(self) -> dict[str, Any]:
        return {KIND: self.KIND, **{name: getattr(self, name) for name in _fields(type(self))}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """Read the fields back, each checked against its annotation (:class:`Refused` otherwise)."""
        return cls(**{name: checked(data, name, annotation) for name, (annotation, required)
                      in _fields(cls).items() if required or name in data})


@dataclass(frozen=True, slots=True)
class ErrorAnswer(Message):
    """The answer to a request that raised an error, or that its subject refused; read back, it is raised."""

    error: KitsuneError
    """The error, as the answering node raised it."""

    def to_json(self) -> dict[str, Any]:
        return {KIND: self.KIND, "error": self.error.to_json()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        error = checked(data, "error", dict[str, Any])
        return cls(KitsuneError(checked(error, "code", str), checked(error, "error", str),
                                retryable=checked(error, "retryable", bool),
                                state=checked(error, "state", dict[str, Any] | None, None)))


# --- the checks of fields --------------------------------------------------------------------

Check = Callable[[Any], Any]
"""Returns the value as its field holds it, or raises ``TypeError`` naming what it should be."""
_FIELDS: dict[type[Message], dict[str, tuple[Any, bool]]] = {}
_CHECKS: dict[Any, Check] = {}


def _fields(cls: type[Message]) -> dict[str, tuple[Any, bool]]:
    """Each field of ``cls``, in order, with its annotation and whether it is required (it has no default)."""
    found = _FIELDS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = _FIELDS[cls] = {
            f.name: (hints[f.name], f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
            for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return found


def _check_of(annotation: Any) -> Check:
    check = _CHECKS.get(annotation)
    if check is None:
        check = _CHECKS[annotation] = _check(annotation)
    return check


def _check(annotation: Any) -> Check:
    """The check of a field annotated ``annotation``: a scalar, ``X | None``, a literal, a dict, a list, a pair, Any."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is Any:
        return lambda value: value
    if origin is types.UnionType and type(None) in args:
        inner = _check(next(arg for arg in args if arg is not type(None)))
        return lambda value: None if value is None else inner(value)
    if origin is Literal:
        return lambda value: _expect(isinstance(value, str) and value in args, value, f"one of {', '.join(args)}")
    if origin is dict:
        return lambda value: _expect(isinstance(value, dict), value, "an object")
    if origin is list:
        return lambda value: _expect(isinstance(value, list), value, "a list")
    if origin is tuple:
        return lambda value: tuple(_expect(isinstance(value, list) and len(value) == len(args)
                                           and all(isinstance(v, str) for v in value), value, "a pair of strings"))
    return _SCALARS[annotation]


def _expect(holds: bool, value: Any, what: str) -> Any:
    if not holds:
        raise TypeError(what)
    return value


_SCALARS: dict[Any, Check] = {
    str: lambda value: _expect(isinstance(value, str), value, "a string"),
    bool: lambda value: _expect(isinstance(value, bool), value, "a boolean"),
    int: lambda value: _expect(isinstance(value, int) and not isinstance(value, bool), value, "an integer"),
    float: lambda value: float(_expect(isinstance(value, int | float) and not isinstance(value, bool), value,
                                       "a number")),
}
