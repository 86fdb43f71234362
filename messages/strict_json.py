"""Strict JSON for every body the bridge reads: each object's keys unique, nesting bounded.

orjson parses. A key given twice is seen cheaply: orjson keeps the last, so writing the value out
again gives fewer ``:`` than the text had (each key has one, and strings keep theirs). Only then,
or when the text spells a colon as ``\\u003a``, is it parsed again, slowly, to name the key's
path. Paths are dotted from the body's root, as ``commands.0.selector``.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from messages.errors import KitsuneError

__all__ = ["MAX_DEPTH", "loads"]

MAX_DEPTH = 32
"""Objects and arrays nest at most this deep (the body itself is depth 1)."""

_CONTAINERS = (dict, list)


def loads(data: bytes | str) -> Any:
    """The JSON value of ``data``; ``invalid_json``, ``too_deep`` or ``duplicate_key`` (with ``state.path``)."""
    raw = data.encode() if isinstance(data, str) else data
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise KitsuneError("invalid_json",
                           f"The body is not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    try:
        _check_depth(value, 1)
    except _TooDeep as e:
        where = ".".join(reversed(e.path))
        raise KitsuneError("too_deep", f"The body nests deeper than {MAX_DEPTH} levels at {where or 'its root'}",
                           state={"path": where, "limit": MAX_DEPTH}) from None
    if raw.count(b":") != orjson.dumps(value).count(b":") or b"\\u003a" in raw or b"\\u003A" in raw:
        path = _duplicate(json.loads(raw, object_pairs_hook=_Pairs), [])
        if path is not None:
            where = ".".join(path)
            raise KitsuneError("duplicate_key", f"The body gives the key at {where} twice", state={"path": where})
    return value


class _TooDeep(Exception):
    def __init__(self) -> None:
        self.path: list[str] = []
        """Keys from the too deep value up to the root."""


def _check_depth(value: dict[str, Any] | list[Any] | Any, depth: int) -> None:
    if type(value) not in _CONTAINERS:
        return
    if depth > MAX_DEPTH:
        raise _TooDeep
    for key, item in value.items() if type(value) is dict else enumerate(value):
        if type(item) in _CONTAINERS:
            try:
                _check_depth(item, depth + 1)
            except _TooDeep as e:
                e.path.append(str(key))
                raise


class _Pairs(list[tuple[str, Any]]):
    """An object's (key, value) pairs as written, duplicates kept."""


def _duplicate(value: Any, path: list[str]) -> list[str] | None:
    """The path of the first key given twice, outer objects first."""
    if isinstance(value, _Pairs):
        seen: set[str] = set()
        for key, _ in value:
            if key in seen:
                return [*path, key]
            seen.add(key)
        children: Any = value
    elif isinstance(value, list):
        children = ((str(i), item) for i, item in enumerate(value))
    else:
        return None
    for key, item in children:
        found = _duplicate(item, [*path, key])
        if found is not None:
            return found
    return None
