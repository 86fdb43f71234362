"""What ``tools/list`` shows of each tool: its input schema made short enough for a model to carry.

A model gets the tool list with every request, so each byte is paid on every turn. The listed
schema keeps what a model needs to write a call (names, types, enums, required, defaults, short
descriptions where a name does not say it all) and leaves out what only a checker needs (string
bounds, patterns, closed objects' ``additionalProperties: false``, the rules across parameters, the
reference grammar): the gateway still checks a direct tool's arguments against its whole schema
(``ToolSpec.input_schema``) and the bridge's parser checks a container's body, so nothing the short
schema leaves out is accepted unchecked.

``browser_batch`` describes the command language in a few lines (every action with its parameters);
``browser_parallel`` takes lists of those commands; the whole grammar is the ``kitsune://schema``
resource (also ``GET /api/schema``).
"""

from __future__ import annotations

import functools
from typing import Any

from messages.commands import ACTIONS, BLOCKS, Parallel, parameters
from messages.contract import CALL_TIMEOUT
from messages.schema import command_schema

__all__ = ["SCHEMA_URI", "command_definitions", "compact", "container_schema", "grammar"]

SCHEMA_URI = "kitsune://schema"
"""The MCP resource of the whole command grammar (what ``GET /api/schema`` answers)."""

_KEPT = frozenset({"type", "enum", "const", "default", "required", "properties", "items", "description",
                   "additionalProperties"})
"""The schema keywords a listed schema keeps (``additionalProperties`` only where it types an object's values:
a closed object's ``false`` is the gateway's check, not what a model needs to write a call)."""

_SAID_ONCE = frozenset({"tabId", "timeout", "confirm_token", "snapshot", "selector", "ref"})
"""Parameters the server's instructions describe once for every tool: listed without a description."""

_UNLISTED = frozenset({"timeout"})
"""Parameters the instructions name for every tool that acts on a page (a step's seconds, rarely given): not listed
at all, still taken and checked."""

_SELF_EVIDENT = frozenset({"url", "waitUntil", "button", "clickCount", "text", "submit", "values", "key", "limit",
                           "fullPage", "maxChars", "depth", "since", "name", "input", "question", "goal", "force",
                           "call", "resume_token", "taskId", "summary", "method", "params", "read", "enable",
                           "domain"})
"""Parameters whose name, type and enum (with their tool's description) say what they are: listed without a
description."""

_COMMON = frozenset({"tabId", "timeout", "label"})
"""Parameters every command takes, named once in the grammar rather than on each action."""


def compact(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (an object's) as a model reads it: the kept keywords only, common parameters undescribed."""
    return dict(_compacted(schema))


def _compacted(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in _KEPT or (key == "additionalProperties" and not isinstance(value, dict)):
            continue
        if key == "properties":
            out[key] = {name: _parameter(name, v) for name, v in value.items() if name not in _UNLISTED}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            kept = _compacted(value)
            if kept:  # an object's values of any JSON (a $ref to jsonValue) say nothing more than "object"
                out[key] = kept
        elif key != "default" or value not in (False, 0):  # a flag's false, an offset's 0: what absence says
            out[key] = value
    if "anyOf" in schema and "type" not in out and "enum" not in out:  # a reference or a value: the value's type
        types = sorted({t for m in schema["anyOf"] if isinstance(m, dict) and isinstance(t := m.get("type"), str)})
        if types:
            out["type"] = types[0] if len(types) == 1 else types
    return out


def _parameter(name: str, schema: Any) -> Any:
    listed = _compacted(schema)
    if name in _SAID_ONCE | _SELF_EVIDENT and isinstance(listed, dict):
        listed.pop("description", None)
    return listed


def _signature(action: str) -> str:
    """``click(E, button?, clickCount?)``: an action and its own parameters, ``?`` when optional; ``E`` is the
    element (selector or ref), unmarked when the action needs one."""
    names = [p.json_name for p in parameters(ACTIONS[action]) if p.json_name not in _COMMON]
    optional = {p.json_name for p in parameters(ACTIONS[action]) if not p.required}
    shown = []
    for name in names:
        if name == "selector" and "ref" in names:
            shown.append("E" if _needs_element(action) else "E?")
        elif name != "ref" or "selector" not in names:
            shown.append(name + ("?" if name in optional else ""))
    return f"{action}({', '.join(shown)})"


@functools.cache
def command_definitions() -> dict[str, Any]:
    """The command schema's definitions, built once for the tool table (it read them 61 times as it was made, each
    time built anew: 0.04 s of CPU on the way to the first answer); shared, so read only (a part to change is
    copied first)."""
    definitions: dict[str, Any] = command_schema()["$defs"]
    return definitions


def _needs_element(action: str) -> bool:
    """Whether ``action`` needs selector or ref (its schema's rule across them)."""
    one_of = [{"required": ["selector"]}, {"required": ["ref"]}]
    return any(rule.get("anyOf") == one_of for rule in command_definitions()[action].get("allOf", []))


def grammar() -> str:
    """The command language in a few lines: every action and block with its parameters."""
    actions = " ".join(_signature(a) for a, cls in ACTIONS.items() if cls not in BLOCKS)
    blocks = " ".join(_signature(cls.action) + (" (top level only)" if cls is Parallel else "") for cls in BLOCKS)
    return (f"{{\"action\": NAME, ...its parameters}}; each also takes tabId?, timeout?, label?; E: selector or ref. "
            f"{actions}. Blocks (steps: lists of commands): {blocks}. ${{$N.path}} in a value reads step N's result. "
            f"Whole schema: resource {SCHEMA_URI}.")


_CALL_OPTIONS: dict[str, Any] = {"tabId": {"type": "integer"}, "stopOnWarning": {"type": "boolean"},
                                 "timeout": {"type": "number", "default": int(CALL_TIMEOUT)}}
"""A container call's options (tabId: the default tab of steps that name none; timeout: the call's deadline)."""


def container_schema(kind: str) -> dict[str, Any]:
    """The listed input schema of a ``batch``, ``parallel`` or ``workflow`` call (``parallel``'s commands are
    those ``batch``'s grammar describes)."""
    if kind == "workflow":
        steps: dict[str, Any] = {"workflow": {"type": "string"}, "variables": {"type": "object"}}
    elif kind == "batch":
        steps = {"commands": {"type": "array", "items": {"type": "object"}, "description": grammar()}}
    else:
        steps = {"sequences": {"type": "array", "items": {"type": "array", "items": {"type": "object"}},
                               "description": "Lists of browser_batch commands."}}
    return {"type": "object", "properties": {**steps, **_CALL_OPTIONS}, "required": [next(iter(steps))]}
