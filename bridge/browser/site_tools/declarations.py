"""What the node keeps of a page's tool declaration, within per-document limits, and what ``siteTools`` lists.

A declaration is data from the web. Its limits are checked on the loop before anything else is done with it,
in time linear in what they bound: a declaration past one is refused by name (the page's ``registerTool``
promise rejects with the reason) and kept nowhere. A schema within them that names another resource (a
``$ref`` not of the form ``#...``) is kept, listed with ``invalid`` and never called: no schema is ever
retrieved. The ``siteTools`` answer is bounded in bytes; the tools left out are named.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import orjson

from messages.commands import SITE_TOOL_NAME

__all__ = ["MAX_ANNOTATIONS", "MAX_DESCRIPTION", "MAX_LISTED", "MAX_SCHEMA_BYTES", "MAX_SCHEMA_DEPTH", "MAX_TOOLS",
           "Refused", "declared", "listed"]

MAX_TOOLS = 64
"""Tools one document may declare at a time."""
MAX_DESCRIPTION = 4096
"""Characters of a tool's description."""
MAX_SCHEMA_BYTES = 64 * 1024
"""Bytes of a tool's input schema, as the UTF-8 of the JSON text the page's declaration serialized to."""
MAX_SCHEMA_DEPTH = 32
"""Nesting of objects and arrays in a tool's input schema (``{}`` is 1 deep)."""
MAX_ANNOTATIONS = ("title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
"""The annotations kept (listed as the page's information only, never a rule): booleans, a title of 128."""
MAX_LISTED = 1024 * 1024
"""Bytes of a ``siteTools`` answer's ``tools`` (JSON); the tools past it are named in ``truncated``."""
_LISTED_NAMES = 256
"""Names of left-out tools a ``siteTools`` answer lists at most (the rest are only counted)."""
_NAME = re.compile(SITE_TOOL_NAME)
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")


class Refused(Exception):
    """A declaration the node does not keep; its message, given to the page, names the limit."""


def declared(tool: object, tools: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """What the node keeps of ``tool`` (``{name, description, inputSchema}``, ``annotations`` if any, ``invalid``
    when its schema cannot be used), declared in a document that declares ``tools``; else :class:`Refused`."""
    if not isinstance(tool, dict):
        raise Refused("registerTool: a tool is an object")
    name, description, text = tool.get("name"), tool.get("description"), tool.get("inputSchema")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise Refused("registerTool: name must match [A-Za-z0-9_.-]{1,128}")
    if name not in tools and len(tools) >= MAX_TOOLS:
        raise Refused(f"registerTool {name}: tool_count: this document declares {MAX_TOOLS} tools already, the most "
                      "one document may")
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        raise Refused(f"registerTool {name}: description_length: the description must be a string of at most "
                      f"{MAX_DESCRIPTION} characters")
    if not isinstance(text, str) or len(text) > MAX_SCHEMA_BYTES or len(text.encode()) > MAX_SCHEMA_BYTES:
        raise Refused(f"registerTool {name}: schema_size: the input schema must be at most {MAX_SCHEMA_BYTES} bytes "
                      "of JSON")
    try:
        schema = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise Refused(f"registerTool {name}: inputSchema must be a JSON object") from None
    if not isinstance(schema, dict):
        raise Refused(f"registerTool {name}: inputSchema must be a JSON object")
    depth, foreign = _walk(schema)
    if depth > MAX_SCHEMA_DEPTH:
        raise Refused(f"registerTool {name}: schema_depth: the input schema nests {depth} deep, more than "
                      f"{MAX_SCHEMA_DEPTH}")
    kept: dict[str, Any] = {"name": name, "description": description, "inputSchema": schema}
    annotations = _annotations(tool.get("annotations"))
    if annotations:
        kept["annotations"] = annotations
    if foreign is not None:
        kept["invalid"] = (f"the input schema refers to {foreign[:200]!r}, which is not in the schema (only "
                           "references of the form #... are followed; no schema is ever retrieved)")
    return kept


def _walk(schema: dict[str, Any]) -> tuple[int, str | None]:
    """The nesting depth of ``schema``, and its first reference to another resource (None if none)."""
    depth, foreign = 0, None
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, level = stack.pop()
        depth = max(depth, level)
        if isinstance(node, dict):
            if foreign is None:
                foreign = next((ref for key in _REFERENCES
                                if isinstance(ref := node.get(key), str) and not ref.startswith("#")), None)
            stack.extend((child, level + 1) for child in node.values() if isinstance(child, dict | list))
        else:
            stack.extend((child, level + 1) for child in node if isinstance(child, dict | list))
    return depth, foreign


def _annotations(given: object) -> dict[str, Any]:
    if not isinstance(given, dict):
        return {}
    kept: dict[str, Any] = {key: given[key] for key in MAX_ANNOTATIONS[1:] if isinstance(given.get(key), bool)}
    if isinstance(title := given.get("title"), str):
        kept["title"] = title[:128]
    return kept


def listed(tools: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """A ``siteTools`` answer's ``tools``: whole entries while they fit in :data:`MAX_LISTED` bytes of JSON; then
    ``truncated``: ``{"tools": how many were left out, "names": the first of their names, "reason"}``."""
    entries: list[dict[str, Any]] = []
    size, left_out, names = 0, 0, list[str]()
    for tool in tools:
        if not left_out:
            size += len(orjson.dumps(tool)) + 1
            if size <= MAX_LISTED:
                entries.append(tool)
                continue
        left_out += 1
        if len(names) < _LISTED_NAMES:
            names.append(tool["name"])
    if not left_out:
        return {"tools": entries}
    return {"tools": entries, "truncated": {
        "tools": left_out, "names": names,
        "reason": f"the answer's tools are at most {MAX_LISTED} bytes of JSON; the tools left out can be called by "
                  "name all the same"}}
