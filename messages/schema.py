"""The JSON Schema (2020-12) of the command language, generated from the command classes.

Published at ``GET /api/schema`` and in the MCP tools' input schemas, so what clients see is
what the parser accepts. Each parameter's schema comes from its type and bounds in
:mod:`messages.commands`; the parser's rules across parameters (the commands' ``check``
methods) are :data:`_CHECKS` here, and ``tests/unit/test_grammar.py`` holds the two in agreement.
Only the parser refuses what JSON Schema cannot say: a reference to a step that is not an earlier
one, more commands or deeper blocks than the call's limits, and an integer written as ``2.0``.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union

from messages.cdp_methods import refused_pattern
from messages.commands import ACTIONS, BLOCKS, MAX_REFERENCE, MAX_TAB_ID, MAX_TEXT, Command, Parallel, Param, parameters
from messages.contract import CALL_TIMEOUT, MAX_CALL_TIMEOUT
from messages.references import Ref, Template

__all__ = ["batch_schema", "command_schema", "parallel_schema", "published_schema"]

_SCHEMA = "https://json-schema.org/draft/2020-12/schema"
_STEP_AND_PATH = r"[0-9]+(\.[A-Za-z0-9_\-]+)*\}"
"""What follows ``${$`` in a reference: the step's index, the path into its result, ``}``."""
_REFERENCE = {"type": "string", "pattern": r"^\$\{\$" + _STEP_AND_PATH + "$", "maxLength": MAX_REFERENCE,
              "description": "${$N.path}: a value from the result of earlier step N"}
_MALFORMED = {"pattern": r"\$\{\$(?!(\{\$)?" + _STEP_AND_PATH + ")"}
"""A ``${$`` that opens no reference (``${${$0}`` is text ``${`` and a reference, as the parser reads it)."""
_ANY_REFERENCE = {"pattern": r"\$\{\$"}
_JSON_VALUES = {"$ref": "#/$defs/jsonValue"}
_JSON_VALUE = {"description": f"Any JSON value, taken as it is (no references); each string at most {MAX_TEXT} "
                              "characters.",
               "anyOf": [{"type": "string", "maxLength": MAX_TEXT}, {"type": "number"}, {"type": "boolean"},
                         {"type": "null"}, {"type": "array", "items": _JSON_VALUES},
                         {"type": "object", "additionalProperties": _JSON_VALUES}]}
_SEQUENCES = tuple[tuple[Command, ...], ...]
_STEPS = {"$ref": "#/$defs/command"}


def _needs_one_of(*names: str) -> dict[str, Any]:
    return {"anyOf": [{"required": [name]} for name in names]}


def _op_form(ops: list[str], needs: tuple[str, ...] = (), **properties: Any) -> dict[str, Any]:
    """``op`` one of ``ops`` and the parameters it needs; the default op's form needs none (``op`` may be absent)."""
    form: dict[str, Any] = {"properties": {"op": {"enum": ops}, **properties}}
    if needs:
        form["required"] = ["op", *needs]
    return form


_CHECKS: dict[str, dict[str, Any]] = {
    "find": {"description": "needs selector, ref or text", **_needs_one_of("selector", "ref", "text")},
    "waitFor": {"description": "needs selector, ref, url or loadState",
                **_needs_one_of("selector", "ref", "url", "loadState")},
    "cookies": {"description": "op set needs cookies",
                "anyOf": [_op_form(["get", "clear"]), _op_form(["set"], ("cookies",), cookies={"minItems": 1})]},
    "storage": {"description": "op remove needs key, op set needs key and value",
                "anyOf": [_op_form(["get", "clear"]), _op_form(["remove"], ("key",)),
                          _op_form(["set"], ("key", "value"))]},
    "clipboard": {"description": "op write needs text", "anyOf": [_op_form(["read"]), _op_form(["write"], ("text",))]},
    "cdp": {"description": "the method is not a refused one (cdp_method_refused)",
            "not": {"properties": {"method": {"pattern": refused_pattern()}}, "required": ["method"]}},
    "broadcast": {"description": "the command is one action that names no tabId",
                  "properties": {"command": {"$ref": "#/$defs/action", "not": {"required": ["tabId"]}}}},
}
"""The parser's rules across one command's parameters (the ``check`` methods), by action."""


def _definitions() -> dict[str, Any]:
    # anyOf, not oneOf: each alternative has its own action, and anyOf stops at the first that holds
    actions = [action for action, cls in ACTIONS.items() if cls not in BLOCKS]
    blocks = [cls.action for cls in BLOCKS if cls is not Parallel]
    defs: dict[str, Any] = {
        "reference": _REFERENCE,
        "jsonValue": _JSON_VALUE,
        "topLevelCommand": {"description": "A command of a call's top level: any command, or a parallel.",
                            "anyOf": [_STEPS, {"$ref": f"#/$defs/{Parallel.action}"}]},
        "command": {"description": "A command in a list of steps: an action or a block (a parallel runs only at "
                                   "a call's top level).",
                    "anyOf": [{"$ref": "#/$defs/action"}, *({"$ref": f"#/$defs/{block}"} for block in blocks)]},
        "action": {"description": "One action (not a block).",
                   "anyOf": [{"$ref": f"#/$defs/{action}"} for action in actions]},
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
        rules = [_CHECKS[action]] if action in _CHECKS else []
        if "ref" in properties:  # a target by selector or by a snapshot's ref, never both
            rules.append({"description": "selector or ref, not both", "not": {"required": ["selector", "ref"]}})
            if action in _TARGET_NEEDED:
                rules.append({"description": "needs selector or ref", **_needs_one_of("selector", "ref")})
        if rules:
            defs[action]["allOf"] = rules
    return defs


_TARGET_NEEDED = frozenset({"click", "type", "fill", "select", "check", "download"})
"""Actions that need an element: by ``selector`` or by ``ref``."""


def _param_schema(param: Param) -> dict[str, Any]:
    schema = _type_schema(param.type, param.meta.get("max_length"))
    schema["description"] = param.meta["doc"]
    bounded = schema["items"] if schema.get("type") == "array" else schema  # a list's bounds are its items'
    for key in ("minimum", "maximum"):
        if key in param.meta:
            bounded[key] = param.meta[key]
    if "pattern" in param.meta:  # a text that may hold references is checked once they are resolved
        takes_references = Template in typing.get_args(param.type)
        schema["pattern"] = f"^(?:{param.meta['pattern']})$" + (r"|\$\{\$" if takes_references else "")
    if param.meta.get("min_items"):
        schema["minItems"] = param.meta["min_items"]
    if not param.required and param.default not in (None, ()):
        schema["default"] = param.default
    return schema


def _type_schema(tp: Any, max_length: int | None) -> dict[str, Any]:
    """The schema of a parameter type; ``max_length`` bounds each of its strings."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        members = [m for m in typing.get_args(tp) if m is not type(None)]
        if Template in members:  # text that may hold references
            return {**_type_schema(str, max_length), "not": _MALFORMED}
        schemas = [{"$ref": "#/$defs/reference"} if m is Ref else _type_schema(m, max_length) for m in members]
        return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    if origin is Literal:
        return {"enum": list(typing.get_args(tp))}
    if tp == _SEQUENCES:  # the parser wants at least one sequence, each of at least one step
        return {"type": "array", "minItems": 1, "items": {"type": "array", "minItems": 1, "items": _STEPS}}
    if origin is tuple:
        return {"type": "array", "items": _type_schema(typing.get_args(tp)[0], max_length)}
    if tp is Command:
        return dict(_STEPS)
    if origin is dict:
        return {"type": "object", "additionalProperties": _JSON_VALUES}
    if typing.is_typeddict(tp):
        fields = typing.get_type_hints(tp)
        return {"type": "object", "properties": {name: _type_schema(t, max_length) for name, t in fields.items()},
                "required": [name for name in fields if name in tp.__required_keys__], "additionalProperties": False}
    if tp is str:  # a plain string: no references
        string = {"type": "string", "not": _ANY_REFERENCE}
        return string if max_length is None else {**string, "maxLength": max_length}
    return {"type": {int: "integer", float: "number", bool: "boolean"}[tp]}


def command_schema() -> dict[str, Any]:
    """The schema of one command of a call's top level (any action or block)."""
    return {"$schema": _SCHEMA, "title": "Kitsune command", "$ref": "#/$defs/topLevelCommand",
            "$defs": _definitions()}


_CALL_OPTIONS: dict[str, Any] = {
    "tabId": {"type": "integer", "minimum": 0, "maximum": MAX_TAB_ID,
              "description": "Default tab for steps that name none."},
    "stopOnWarning": {"type": "boolean", "default": False,
                      "description": "Stop at a step that succeeded with a warning."},
    "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_CALL_TIMEOUT, "default": CALL_TIMEOUT,
                "description": "The call's deadline in seconds (container_timeout)."},
}


def batch_schema() -> dict[str, Any]:
    """The body of a batch call: ``commands`` run in order."""
    return {
        "$schema": _SCHEMA, "title": "Kitsune batch", "type": "object",
        "properties": {"commands": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/topLevelCommand"}},
                       **_CALL_OPTIONS},
        "required": ["commands"], "additionalProperties": False, "$defs": _definitions(),
    }


def parallel_schema() -> dict[str, Any]:
    """The body of a parallel call: ``sequences``, each a list of commands on its own tabs."""
    sequences = {**_type_schema(_SEQUENCES, None), "description": "The sequences, each a list of steps."}
    return {
        "$schema": _SCHEMA, "title": "Kitsune parallel", "type": "object",
        "properties": {"sequences": sequences, **_CALL_OPTIONS},
        "required": ["sequences"], "additionalProperties": False, "$defs": _definitions(),
    }


def published_schema() -> dict[str, Any]:
    """The whole grammar as ``GET /api/schema`` and the MCP resource ``kitsune://schema`` publish it."""
    return {"command": command_schema(), "batch": batch_schema(), "parallel": parallel_schema()}
