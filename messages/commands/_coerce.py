"""A parameter's JSON value checked against its type and bounds (``ValueError`` saying what is wrong)."""

from __future__ import annotations

import math
import re
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any, Literal, Union

from messages.commands._actions import MAX_REFERENCE
from messages.commands._params import Param
from messages.references import Ref, Template, parse_references


def checked(param: Param, tp: Any, raw: Any) -> Any:
    """``raw`` as a value of ``tp`` within the parameter's bounds; ``ValueError`` saying what is wrong."""
    limit = param.meta.get("max_length", MAX_REFERENCE)
    if any(len(text) > limit for text in _raw_strings(raw)):
        raise ValueError(f"longer than {limit} characters")
    value = _coerce(tp, raw)
    if isinstance(value, str) and "pattern" in param.meta and re.fullmatch(param.meta["pattern"], value) is None:
        raise ValueError(f"must match {param.meta['pattern']}")
    for number in value if isinstance(value, tuple) else (value,):  # a list's bounds are its items'
        if isinstance(number, int | float) and not isinstance(number, bool):
            within(number, param.meta.get("minimum"), param.meta.get("maximum"))
    if isinstance(value, tuple) and len(value) < param.meta.get("min_items", 0):
        raise ValueError("needs at least one item")
    return value


def within(value: float, low: float | None, high: float | None) -> None:
    """``ValueError`` unless ``low <= value <= high`` (a bound that is None is no bound)."""
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{value} is outside {low}..{high}")


def whole_number(raw: Any, low: int, high: int) -> int:
    """A JSON integer from ``low`` to ``high`` (never a boolean, never ``2.0``); ``ValueError`` saying what is
    wrong: the one reading of a tab id, a count or a call id outside a command (bodies, query parameters)."""
    value = _integer(raw)
    within(value, low, high)
    return value


def without_references(tp: Any) -> Any:
    """The type ``tp`` once its references are resolved: ``Ref`` and ``Template`` taken out."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        members = [without_references(m) for m in typing.get_args(tp) if m not in (Ref, Template)]
        return Union[tuple(members)] if len(members) > 1 else members[0]  # noqa: UP007
    if origin is tuple:
        return tuple[without_references(typing.get_args(tp)[0]), ...]  # type: ignore[misc]
    return tp


def json_type(raw: Any) -> str:
    """What a JSON value is, as an error message says it."""
    if raw is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "an object"}.get(type(raw), type(raw).__name__)


def _raw_strings(raw: Any) -> Iterator[str]:
    """The strings of a JSON value: itself, its items, an object's values."""
    if isinstance(raw, str):
        yield raw
    elif isinstance(raw, list | dict):
        for item in raw.values() if isinstance(raw, dict) else raw:
            yield from _raw_strings(item)


def _coerce(tp: Any, raw: Any) -> Any:
    """Check ``raw`` against a parameter type; raise ``ValueError`` saying what was expected."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return _union(typing.get_args(tp), raw)
    if origin is Literal:
        return _literal(typing.get_args(tp), raw)
    if origin is tuple:
        return _items(typing.get_args(tp)[0], raw)
    if typing.is_typeddict(tp):
        return _typed_dict(tp, raw)
    if origin is dict:
        return _json_object(raw)
    scalar = _SCALARS.get(tp)
    if scalar is None:  # pragma: no cover - a bug in this module
        raise TypeError(f"no parser for parameter type {tp!r}")
    return scalar(raw)


def _union(members: tuple[Any, ...], raw: Any) -> Any:
    """A whole reference or template where the union takes one, else the first member ``raw`` fits."""
    if isinstance(raw, str) and "${$" in raw and (Ref in members or Template in members):
        return _reference(raw, allow_template=Template in members)
    errors = []
    for member in members:
        if member in (Ref, Template):
            continue
        try:
            return _coerce(member, raw)
        except ValueError as e:
            errors.append(str(e))
    raise ValueError(" or ".join(dict.fromkeys(errors)))


def _literal(allowed: tuple[Any, ...], raw: Any) -> Any:
    if raw in allowed:
        return raw
    raise ValueError("expected one of " + ", ".join(repr(a) for a in allowed))


def _items(item_type: Any, raw: Any) -> tuple[Any, ...]:
    if not isinstance(raw, list):
        raise ValueError(f"expected a list, got {json_type(raw)}")
    return tuple(_coerce(item_type, item) for item in raw)


def _typed_dict(tp: Any, raw: Any) -> dict[str, Any]:
    """An object with exactly the fields of the TypedDict ``tp``, each of its type."""
    if not isinstance(raw, dict):
        raise ValueError(f"expected an object, got {json_type(raw)}")
    fields = typing.get_type_hints(tp)
    if not set(raw) <= set(fields):
        raise ValueError("an object takes only " + ", ".join(fields))
    missing = [name for name in fields if name in tp.__required_keys__ and name not in raw]
    if missing:
        raise ValueError(f"an object needs {missing[0]}")
    out = {}
    for name, item in raw.items():
        try:
            out[name] = _coerce(fields[name], item)
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from None
    return out


def _json_object(raw: Any) -> dict[str, Any]:
    """Any JSON object, taken as it is: its strings are not references."""
    if not isinstance(raw, dict):
        raise ValueError(f"expected an object, got {json_type(raw)}")
    return raw


def _reference(raw: str, *, allow_template: bool) -> Ref | Template:
    try:
        parsed = parse_references(raw)
    except ValueError as e:
        raise ValueError(f"bad reference: {e}") from None
    if isinstance(parsed, Template) and not allow_template:
        raise ValueError("bad reference: this parameter takes one whole ${$N...} reference")
    assert not isinstance(parsed, str)
    return parsed


def _null(raw: Any) -> None:
    if raw is not None:
        raise ValueError(f"expected null, got {json_type(raw)}")


def _string(raw: Any) -> str:
    if not isinstance(raw, str):
        raise ValueError(f"expected a string, got {json_type(raw)}")
    if "${$" in raw:
        raise ValueError("references are not allowed in this parameter")
    return raw


def _boolean(raw: Any) -> bool:
    if not isinstance(raw, bool):
        raise ValueError(f"expected a boolean, got {json_type(raw)}")
    return raw


def _integer(raw: Any) -> int:
    """A JSON integer: a number written with a fraction or an exponent (``48.0``, ``4.8e1``) is not one (it
    would be read as another value than the one written: ``2**64 + 0.0``), nor is a boolean."""
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ValueError(f"expected an integer, got {json_type(raw)}")
    return raw


def _number(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ValueError(f"expected a number, got {json_type(raw)}")
    if not math.isfinite(raw):
        raise ValueError("expected a finite number")
    return float(raw)


_SCALARS: dict[Any, Callable[[Any], Any]] = {type(None): _null, str: _string, bool: _boolean, int: _integer,
                                             float: _number}
