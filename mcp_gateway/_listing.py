"""What ``tools/list`` shows of each tool: its input schema made short enough for a model to carry.

A model gets the tool list with every request, so each byte is paid on every turn. The listed
schema keeps what a model needs to write a call (names, types, enums, required, defaults, short
descriptions) and leaves out what only a checker needs (string bounds, patterns, the rules across
parameters, the reference grammar): the gateway still checks a direct tool's arguments against
its whole schema (``ToolSpec.input_schema``) and the bridge's parser checks a container's body, so
nothing the short schema leaves out is accepted unchecked.

The container tools share one short command definition: the action names, each action's
parameters on one line, and the whole grammar as the ``kitsune://schema`` resource (also
``GET /api/schema``).
"""

from __future__ import annotations

from typing import Any

from messages.commands import ACTIONS, BLOCKS, Parallel, parameters
from messages.contract import CALL_TIMEOUT

__all__ = ["SCHEMA_URI", "compact", "container_schema", "grammar"]

SCHEMA_URI = "kitsune://schema"
"""The MCP resource of the whole command grammar (what ``GET /api/schema`` answers)."""

_KEPT = frozenset({"type", "enum", "const", "default", "required", "properties", "items", "description",
                   "additionalProperties"})
"""The schema keywords a listed schema keeps."""

_SAID_ONCE = frozenset({"tabId", "timeout", "confirm_token", "snapshot"})
"""Parameters the server's instructions describe once for every tool: listed without a description."""

_COMMON = frozenset({"tabId", "timeout", "label"})
"""Parameters every command takes, named once in the grammar rather than on each action."""


def compact(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` (an object's) as a model reads it: the kept keywords only, common parameters undescribed."""
    out: dict[str, Any] = _compacted(schema)
    for name in _SAID_ONCE & set(out.get("properties", {})):
        out["properties"][name].pop("description", None)
    return out


def _compacted(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in _KEPT:
            continue
        if key == "properties":
            out[key] = {name: _compacted(v) for name, v in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            kept = _compacted(value)
            if kept:  # an object's values of any JSON (a $ref to jsonValue) say nothing more than "object"
                out[key] = kept
        else:
            out[key] = value
    if "anyOf" in schema and "type" not in out and "enum" not in out:  # a reference or a value: the value's type
        types = sorted({t for m in schema["anyOf"] if isinstance(m, dict) and isinstance(t := m.get("type"), str)})
        if types:
            out["type"] = types[0] if len(types) == 1 else types
    return out


def _signature(action: str) -> str:
    """``click(selector, button?, clickCount?)``: an action and its own parameters, ``?`` when optional."""
    names = [p.json_name + ("" if p.required else "?") for p in parameters(ACTIONS[action])
             if p.json_name not in _COMMON]
    return f"{action}({', '.join(names)})"


def grammar() -> str:
    """The command language in a few lines: every action and block with its parameters."""
    actions = " ".join(_signature(a) for a, cls in ACTIONS.items() if cls not in BLOCKS)
    blocks = " ".join(_signature(cls.action) for cls in BLOCKS if cls is not Parallel)
    return (f"A command is {{\"action\": NAME, ...its parameters}}; every one also takes tabId?, timeout?, label?. "
            f"Actions: {actions}. Blocks (steps are lists of commands): {blocks}; parallel(sequences) at the top "
            f"level only. ${{$N.path}} in a value reads earlier step N's result. Whole JSON Schema: resource "
            f"{SCHEMA_URI} (GET /api/schema); the bridge checks every call whole and answers a bad command's path.")


_CALL_OPTIONS: dict[str, Any] = {
    "tabId": {"type": "integer", "description": "Default tab of steps that name none (your current tab)."},
    "stopOnWarning": {"type": "boolean", "default": False},
    "timeout": {"type": "number", "default": CALL_TIMEOUT, "description": "The call's deadline, seconds."},
}


def container_schema(kind: str) -> dict[str, Any]:
    """The listed input schema of a ``batch``, ``parallel`` or ``workflow`` call."""
    if kind == "workflow":
        return {"type": "object", "properties": {
            "workflow": {"type": "string", "description": "The workflow's name."},
            "variables": {"type": "object", "description": "Values of its variables."}, **_CALL_OPTIONS},
            "required": ["workflow"], "additionalProperties": False}
    command: dict[str, Any] = {"type": "object", "properties": {"action": {"enum": list(ACTIONS)}},
                               "required": ["action"]}
    if kind == "batch":
        command["description"] = grammar()
        steps = {"commands": {"type": "array", "items": {"$ref": "#/$defs/command"}}}
    else:
        command["description"] = "A command as browser_batch describes it."
        steps = {"sequences": {"type": "array", "items": {"type": "array", "items": {"$ref": "#/$defs/command"}},
                               "description": "Lists of commands, each run on its own tabs."}}
    return {"type": "object", "properties": {**steps, **_CALL_OPTIONS}, "required": [*steps],
            "additionalProperties": False, "$defs": {"command": command}}
