"""What the node keeps of a page's tool declaration, within per-document limits, and what ``siteTools`` lists.

A declaration is data from the web. Its limits are checked on the loop before anything else is done with it,
in time linear in what they bound: a declaration past one is refused by name (the page's ``registerTool``
promise rejects with the reason) and kept nowhere. A schema within them that names another resource (a
``$ref`` not of the form ``#...``) is kept, listed with ``invalid`` and never called: no schema is ever
retrieved. The ``siteTools`` answer is bounded in bytes; the tools left out are named.

A tab's frames share one more bound (:class:`Room`): together they hold at most :data:`MAX_FRAME_TOOLS` tools and
:data:`MAX_FRAME_SCHEMA_BYTES` of schemas, besides the top document's own limits, which no frame can take; the
node tracks at most :data:`MAX_TAB_DOCUMENTS` documents per tab. Declaration messages are bounded in rate too
(:class:`DeclarationRate`: the top document's, and its frames' together), so that a page that floods them costs the
node's loop a refusal each; and no check here walks a schema in Python: its shape is read from its text by scans in
C before it is parsed, so that no declaration holds the loop for long.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from messages.commands import SITE_TOOL_NAME

__all__ = ["DECLARATION_BURST", "DECLARATION_COST", "DECLARATION_RATE", "MAX_ANNOTATIONS", "MAX_DESCRIPTION",
           "MAX_FRAME_SCHEMA_BYTES", "MAX_FRAME_TOOLS", "MAX_LISTED", "MAX_SCHEMA_BYTES", "MAX_SCHEMA_DEPTH",
           "MAX_SCHEMA_NODES", "MAX_TAB_DOCUMENTS", "MAX_TOOLS", "DeclarationRate", "Refused", "Room", "declared",
           "listed", "rate_refused", "reads_only", "tab_documents_refused"]

MAX_TOOLS = 64
"""Tools one document may declare at a time."""
MAX_DESCRIPTION = 4096
"""Characters of a tool's description."""
MAX_SCHEMA_BYTES = 64 * 1024
"""Bytes of a tool's input schema, as the UTF-8 of the JSON text the page's declaration serialized to."""
MAX_SCHEMA_DEPTH = 32
"""Nesting of objects and arrays in a tool's input schema (``{}`` is 1 deep)."""
MAX_FRAME_TOOLS = 256
"""Tools the documents of a tab's frames (every document but the top one) may declare at a time, all together."""
MAX_FRAME_SCHEMA_BYTES = 4 * 1024 * 1024
"""Bytes of the input schemas the documents of a tab's frames may hold at a time, all together."""
MAX_TAB_DOCUMENTS = 128
"""Documents of one tab the node tracks at a time (the top one always): a frame's document past it is refused."""
DECLARATION_RATE = 1024 * 1024
"""Bytes of tools a second the top document of a tab may declare, and its frames together, sustained: a ``register``
counts the characters of its schema and description, and at least :data:`DECLARATION_COST`."""
DECLARATION_BURST = 5 * 1024 * 1024
"""Bytes of declarations they may send at once (a page declaring its 64 tools of 64 KiB at load, and more)."""
DECLARATION_COST = 4096
"""What a ``register`` counts at least (a small tool). (An ``unregister`` or ``clear`` only frees: never refused.)"""
MAX_SCHEMA_NODES = 4096
"""Objects and arrays in a tool's input schema: what its text may cost the node once parsed, and parsing it."""
MAX_ANNOTATIONS = ("title", "readOnlyHint", "untrustedContentHint", "destructiveHint", "idempotentHint",
                   "openWorldHint")
"""The annotations kept and listed: booleans, a title of 128. ``readOnlyHint: true`` makes a call of the tool a read
(:func:`reads_only`); the others are the page's information only, never a rule."""
MAX_LISTED = 1024 * 1024
"""Bytes of a ``siteTools`` answer's ``tools`` (JSON); the tools past it are named in ``truncated``."""
_LISTED_NAMES = 256
"""Names of left-out tools a ``siteTools`` answer lists at most (the rest are only counted)."""
_NAME = re.compile(SITE_TOOL_NAME)
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_STRINGS = re.compile(_STRING)
_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")
_REFERENCE = re.compile(r'"\$(?:ref|dynamicRef|recursiveRef)"\s*:\s*(?!"#)(' + _STRING + ")")
"""A reference's key and its value (a JSON string) when that does not start with ``#`` as written; a key is always
followed by ``:``, a string's content never has an unescaped ``"``, so nothing inside a string matches."""


class Refused(Exception):
    """A declaration the node does not keep; its message, given to the page, names the limit."""


@dataclass(frozen=True, slots=True)
class Room:
    """What the other documents of a tab leave to one declaration of a frame's document."""

    tools: int = MAX_FRAME_TOOLS
    """Tools that may still be declared (a tool declared again under its name takes no more)."""
    schema_bytes: int = MAX_FRAME_SCHEMA_BYTES
    """Bytes the declaration's schema may take (those of the tool it replaces are counted free)."""


@dataclass(slots=True)
class DeclarationRate:
    """Declaration messages within :data:`DECLARATION_RATE` (a bucket of :data:`DECLARATION_BURST`)."""

    left: float = DECLARATION_BURST
    """Bytes that may be sent now."""
    at: float | None = None
    """The loop's time of ``left``."""

    def take(self, now: float, size: int) -> bool:
        """Whether a message of ``size`` at ``now`` is within the rate (and counted); False when it is past it."""
        if self.at is not None:
            self.left = min(DECLARATION_BURST, self.left + (now - self.at) * DECLARATION_RATE)
        self.at = now
        cost = max(DECLARATION_COST, size)
        if self.left < cost:
            return False
        self.left -= cost
        return True


def rate_refused(tool: object) -> str:
    """The refusal of a declaration past its rate."""
    name = str(tool.get("name"))[:128] if isinstance(tool, dict) else "?"
    return (f"registerTool {name}: declaration_rate: this document (or its tab's frames) declared more than "
            f"{DECLARATION_RATE} bytes of tools a second (after {DECLARATION_BURST} at once)")


def tab_documents_refused() -> str:
    """The refusal of a frame's document past the documents the node tracks for its tab."""
    return f"tab_documents: this tab has {MAX_TAB_DOCUMENTS} documents already, the most the node tracks for one tab"


def declared(tool: object, tools: dict[str, dict[str, Any]], room: Room | None = None) -> tuple[dict[str, Any], int]:
    """What the node keeps of ``tool`` (``{name, description, inputSchema}``, ``annotations`` if any, ``form``
    (``{autosubmit}``) for a declarative form's, ``invalid`` when its schema cannot be used) and its schema's size
    in bytes, declared in a document that declares ``tools`` (in a frame's document, within ``room``); else
    :class:`Refused`."""
    if not isinstance(tool, dict):
        raise Refused("registerTool: a tool is an object")
    name, description, text = tool.get("name"), tool.get("description"), tool.get("inputSchema")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise Refused("registerTool: name must match [A-Za-z0-9_.-]{1,128}")
    if name not in tools and len(tools) >= MAX_TOOLS:
        raise Refused(f"registerTool {name}: tool_count: this document declares {MAX_TOOLS} tools already, the most "
                      "one document may")
    if room is not None and name not in tools and room.tools < 1:
        raise Refused(f"registerTool {name}: tab_tool_count: this tab's frames declare {MAX_FRAME_TOOLS} tools "
                      "already, the most a tab's frames may together")
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION:
        raise Refused(f"registerTool {name}: description_length: the description must be a string of at most "
                      f"{MAX_DESCRIPTION} characters")
    if not isinstance(text, str) or len(text) > MAX_SCHEMA_BYTES or (size := len(text.encode())) > MAX_SCHEMA_BYTES:
        raise Refused(f"registerTool {name}: schema_size: the input schema must be at most {MAX_SCHEMA_BYTES} bytes "
                      "of JSON")
    if room is not None and size > room.schema_bytes:
        raise Refused(f"registerTool {name}: tab_schema_size: this tab's frames hold schemas of "
                      f"{MAX_FRAME_SCHEMA_BYTES} bytes all together at most, and this one does not fit")
    schema, foreign = _schema(name, text)
    kept: dict[str, Any] = {"name": name, "description": description, "inputSchema": schema}
    annotations = _annotations(tool.get("annotations"))
    if annotations:
        kept["annotations"] = annotations
    if isinstance(form := tool.get("form"), dict):
        kept["form"] = {"autosubmit": form.get("autosubmit") is True}
    if foreign is not None:
        kept["invalid"] = (f"the input schema refers to {foreign[:200]!r}, which is not in the schema (only "
                           "references of the form #... are followed; no schema is ever retrieved)")
    return kept, size


def _schema(name: str, text: str) -> tuple[dict[str, Any], str | None]:
    """The schema of the JSON ``text`` and its first reference to another resource (None if none), its shape
    checked before it is parsed (a parse costs what it creates); else :class:`Refused`. Each step is a scan in C:
    its strings taken out, then its brackets alone, whose innermost pairs go one level a pass."""
    brackets = _STRINGS.sub("", text).encode().translate(_BRACKETS, _NOT_BRACKETS)
    if len(brackets) > 2 * MAX_SCHEMA_NODES:
        raise Refused(f"registerTool {name}: schema_nodes: the input schema has more than {MAX_SCHEMA_NODES} objects "
                      "and arrays")
    for _ in range(MAX_SCHEMA_DEPTH):
        brackets = brackets.replace(b"[]", b"")
    if brackets:
        raise Refused(f"registerTool {name}: schema_depth: the input schema nests more than {MAX_SCHEMA_DEPTH} deep")
    try:
        schema = orjson.loads(text)
    except orjson.JSONDecodeError:
        raise Refused(f"registerTool {name}: inputSchema must be a JSON object") from None
    if not isinstance(schema, dict):
        raise Refused(f"registerTool {name}: inputSchema must be a JSON object")
    return schema, _foreign(text)


def _foreign(text: str) -> str | None:
    """The first reference of the JSON ``text`` to another resource (a ``$ref`` not of the form ``#...``), if any.
    (A key spelt with escapes is missed here; the checker, which retrieves nothing, refuses it at the call.)"""
    for found in _REFERENCE.finditer(text):
        ref = orjson.loads(found.group(1))
        if not ref.startswith("#"):
            return str(ref)
    return None


def _annotations(given: object) -> dict[str, Any]:
    if not isinstance(given, dict):
        return {}
    kept: dict[str, Any] = {key: given[key] for key in MAX_ANNOTATIONS[1:] if isinstance(given.get(key), bool)}
    if isinstance(title := given.get("title"), str):
        kept["title"] = title[:128]
    return kept


def reads_only(declaration: dict[str, Any]) -> bool:
    """Whether the page declares the tool ``readOnlyHint: true``: a call of it counts as a read."""
    return declaration.get("annotations", {}).get("readOnlyHint") is True


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
