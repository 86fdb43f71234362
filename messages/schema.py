"""The JSON Schema (2020-12) of the command language, generated from the command classes.

Published at ``GET /api/schema`` and in the MCP tools' input schemas, so what clients see is
what the parser accepts.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union

from messages.commands import ACTIONS, MAX_REFERENCE, Command, Param, parameters
from messages.contract import CALL_TIMEOUT, MAX_CALL_TIMEOUT
from messages.references import Ref, Template

__all__ = ["batch_schema", "command_schema", "parallel_schema"]

_SCHEMA = "https://json-schema.org/draft/2020-12/schema"
_REFERENCE = {"type": "string", "pattern": r"^\$\{\$[0-9]+(\.[A-Za-z0-9_\-]+)*\}$", "maxLength": MAX_REFERENCE,
              "description": "${$N.path}: a value from the result of earlier step N"}


def _definitions() -> dict[str, Any]:
    defs: dict[str, Any] = {
        "reference": _REFERENCE,
        "command": {"oneOf": [{"$ref": f"#/$defs/{action}"} for action in ACTIONS]},
    }
    for action, cls in ACTIONS.items():
        properties: dict[str, Any] = {"action": {"const": action}}
        for param in parameters(cls):
            properties[param.json_name] = _param_schema(param)
        defs[action] = {
            "type": "object",
            "description": (cls.__doc__ or "").strip().splitlines()[0],
            "properties": properties,
            "required": ["action", *(p.json_name for p in parameters(cls) if p.required)],
            "additionalProperties": False,
        }
    return defs


def _param_schema(param: Param) -> dict[str, Any]:
    schema = _type_schema(param.type, param.meta.get("max_length"))
    schema["description"] = param.meta["doc"]
    for key in ("minimum", "maximum"):
        if key in param.meta:
            schema[key] = param.meta[key]
    if param.meta.get("min_items"):
        schema["minItems"] = param.meta["min_items"]
    if not param.required and param.default not in (None, ()):
        schema["default"] = param.default
    return schema


def _type_schema(tp: Any, max_length: int | None) -> dict[str, Any]:
    """The schema of a parameter type; ``max_length`` bounds each of its strings."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        members = [m for m in typing.get_args(tp) if m not in (type(None), Template)]
        if str in members:
            return _type_schema(str, max_length)
        schemas = [{"$ref": "#/$defs/reference"} if m is Ref else _type_schema(m, max_length) for m in members]
        return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    if origin is Literal:
        return {"enum": list(typing.get_args(tp))}
    if origin is tuple:
        return {"type": "array", "items": _type_schema(typing.get_args(tp)[0], max_length)}
    if tp is Command:
        return {"$ref": "#/$defs/command"}
    if typing.is_typeddict(tp):
        fields = typing.get_type_hints(tp)
        return {"type": "object", "properties": {name: _type_schema(t, max_length) for name, t in fields.items()},
                "required": [name for name in fields if name in tp.__required_keys__], "additionalProperties": False}
    if tp is str:
        return {"type": "string"} if max_length is None else {"type": "string", "maxLength": max_length}
    return {"type": {int: "integer", float: "number", bool: "boolean"}[tp]}


def command_schema() -> dict[str, Any]:
    """The schema of one command (any action or block)."""
    return {"$schema": _SCHEMA, "title": "Kitsune command", "$ref": "#/$defs/command", "$defs": _definitions()}


_CALL_OPTIONS: dict[str, Any] = {
    "tabId": {"type": "integer", "description": "Default tab for steps that name none."},
    "stopOnWarning": {"type": "boolean", "default": False,
                      "description": "Stop at a step that succeeded with a warning."},
    "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_CALL_TIMEOUT, "default": CALL_TIMEOUT,
                "description": "The call's deadline in seconds (container_timeout)."},
}


def batch_schema() -> dict[str, Any]:
    """The body of a batch call: ``commands`` run in order."""
    return {
        "$schema": _SCHEMA, "title": "Kitsune batch", "type": "object",
        "properties": {"commands": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/command"}},
                       **_CALL_OPTIONS},
        "required": ["commands"], "additionalProperties": False, "$defs": _definitions(),
    }


def parallel_schema() -> dict[str, Any]:
    """The body of a parallel call: ``sequences``, each a list of commands on its own tabs."""
    sequence = {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/command"}}
    return {
        "$schema": _SCHEMA, "title": "Kitsune parallel", "type": "object",
        "properties": {"sequences": {"type": "array", "minItems": 1, "items": sequence}, **_CALL_OPTIONS},
        "required": ["sequences"], "additionalProperties": False, "$defs": _definitions(),
    }
