"""MkDocs hook: the reference pages, generated at each build from the contract registry.

The commands and their parameters come from the JSON Schema ``GET /api/schema`` serves
(``messages.schema``) and the command classes (``messages.commands``); the error codes and their
HTTP statuses from ``messages.errors.ERROR_CODES``; the MCP tools from the gateway's tool table;
the contract's numbers from ``messages/contract.py``. Nothing generated is committed, so the
reference cannot drift from the code.
"""

from __future__ import annotations

import ast
import dataclasses
import html
import inspect
import itertools
import json
import re
import typing
from collections.abc import Iterable, Mapping
from http import HTTPStatus
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

import messages.contract
from mcp_gateway._tools import TOOLS
from messages.commands import ACTIONS, BLOCKS, Cdp, Command, Title, is_write
from messages.errors import ERROR_CODES, UNKNOWN_CODE_STATUS
from messages.schema import batch_schema, parallel_schema, published_schema

__all__ = ["commands_page", "contract_page", "errors_page", "on_files", "pages", "tools_page"]

_GENERATED = "Generated at build time from"
_CODE_SPAN = re.compile(r"(``?)(.+?)\1")
_WRAPPED_PATTERN = re.compile(r"^\^\(\?:(.*)\)\$(?:\|.*)?$")
"""A parameter's pattern as the schema wraps it: ``^(?:...)$``, then ``|\\$\\{\\$`` if it takes references."""


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated reference pages to the site's files."""
    for path, content in pages().items():
        files.append(File.generated(config, path, content=content))
    return files


def pages() -> dict[str, str]:
    """Each generated file by its path in the site."""
    return {
        "reference/commands.md": commands_page(),
        "reference/errors.md": errors_page(),
        "reference/mcp-tools.md": tools_page(),
        "reference/contract.md": contract_page(),
        "reference/schema.json": json.dumps(published_schema(), indent=2) + "\n",
    }


# --- text ------------------------------------------------------------------------------------


def _prose(text: str) -> str:
    """Docstring text as Markdown: code spans kept (RST's double backticks too), ``<`` and ``|`` escaped outside."""
    out, last = [], 0
    for match in _CODE_SPAN.finditer(text):
        out.append(html.escape(text[last:match.start()], quote=False))
        out.append(f"`{match.group(2)}`")
        last = match.end()
    out.append(html.escape(text[last:], quote=False))
    return "".join(out).replace("|", "\\|")


def _docstring(cls: type) -> str:
    """A class's docstring, its paragraphs each on one line."""
    paragraphs = (inspect.getdoc(cls) or "").split("\n\n")
    return "\n\n".join(_prose(" ".join(p.split())) for p in paragraphs)


def _code(text: str) -> str:
    return f"`{text}`".replace("|", "\\|")


def _json(value: Any) -> str:
    return _code(json.dumps(value))


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return [*lines, ""]


# --- commands --------------------------------------------------------------------------------


def _type(schema: Mapping[str, Any], references: bool = True) -> str:
    """A parameter's type as a reader says it, from its JSON Schema; ``references``: say where ``${$N...}`` goes."""
    if "enum" in schema:
        return " \\| ".join(_json(value) for value in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(_type(member, references) for member in schema["anyOf"])
    ref = schema.get("$ref", "")
    if ref:
        return {"#/$defs/reference": "`${$N...}`", "#/$defs/jsonValue": "JSON value"}.get(ref, "command")
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        return f"list of {_type(schema['items'], references)}"
    if kind == "object" and "properties" in schema:
        required = [f"`{name}`" for name in schema["properties"] if name in schema.get("required", ())]
        optional = [f"`{name}`?" for name in schema["properties"] if name not in schema.get("required", ())]
        return "object (" + ", ".join(required + optional) + ")"
    if kind == "object":
        return "JSON object"
    if references and kind == "string" and schema.get("not", {}).get("pattern") not in (None, r"\$\{\$"):
        return "string (may hold `${$N...}`)"
    return str(kind)


def _bounds(schema: Mapping[str, Any]) -> str:
    bounded = schema["items"] if schema.get("type") == "array" else schema
    parts = [f"{sign} {_number(bounded[key])}" for key, sign in (
        ("minimum", "≥"), ("exclusiveMinimum", ">"), ("maximum", "≤")) if key in bounded]
    if "maxLength" in bounded:
        parts.append(f"≤ {bounded['maxLength']:,} characters")
    if "minItems" in schema:
        parts.append(f"≥ {schema['minItems']} items")
    pattern = schema.get("pattern")
    if pattern:
        inner = _WRAPPED_PATTERN.match(pattern)
        parts.append(_code(inner.group(1) if inner else pattern))
    return ", ".join(parts)


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int) and value > 9999 else str(value)


def _default(name: str, schema: Mapping[str, Any], required: Iterable[str]) -> str:
    if name in required:
        return "**required**"
    return _json(schema["default"]) if "default" in schema else ""


def _parameter_rows(properties: Mapping[str, Any], required: Iterable[str], skip: Iterable[str] = (),
                    references: bool = True) -> list[list[str]]:
    required, skip = set(required), set(skip)
    return [[f"`{name}`", _type(schema, references), _default(name, schema, required), _bounds(schema),
             _prose(schema.get("description", ""))]
            for name, schema in properties.items() if name not in skip and name != "action"]


_PARAMETER_HEADER = ("parameter", "type", "default", "bounds", "description")


def _sample(tp: Any) -> Any:
    """A value of a block parameter's type that holds only reads (``title``), for :func:`_kind`."""
    if tp is Command:
        return Title()
    if typing.get_origin(tp) is tuple:
        return (_sample(typing.get_args(tp)[0]),)
    return 0 if int in typing.get_args(tp) else "true"


def _kind(cls: type[Command]) -> str:
    """Whether a command reads or writes; a block of reads only may still write (it runs JavaScript)."""
    if cls is Cdp:
        return "a read or a write by its method (see the CDP guide)"
    if cls not in BLOCKS:
        return "write" if cls.writes else "read"
    fields = {f.name: _sample(typing.get_type_hints(cls)[f.name]) for f in dataclasses.fields(cls)
              if f.default is dataclasses.MISSING}
    return "write" if is_write(cls(**fields)) else "as its steps"


def _command_section(action: str, definition: Mapping[str, Any], common: Iterable[str]) -> list[str]:
    cls = ACTIONS[action]
    lines = [f"### `{action}` {{#{action}}}", "", _docstring(cls), "", f"*{_kind(cls).capitalize()}.*", ""]
    rows = _parameter_rows(definition["properties"], definition["required"], skip=common)
    lines += _table(_PARAMETER_HEADER, rows) if rows else ["No parameters of its own.", ""]
    rules = [_prose(rule["description"]) for rule in definition.get("allOf", ())]
    if rules:
        lines += ["Rules: " + "; ".join(rules) + ".", ""]
    return lines


def commands_page() -> str:
    """Every action and block with its parameters, and the bodies of the container calls."""
    schema = published_schema()
    definitions = schema["command"]["$defs"]
    every = [definitions[action] for action in ACTIONS]
    common = [name for name in every[0]["properties"] if name != "action"
              and all(name in d["properties"] for d in every)]
    lines = ["# Commands", "",
             f"{_GENERATED} the command classes (`messages.commands`) and the JSON Schema the node serves at "
             "`GET /api/schema` (also [here](schema.json), and as the MCP resource `kitsune://schema`). "
             "The [command language](../guides/commands.md) says how a call runs.", "",
             "A command is `{\"action\": NAME, ...parameters}`. A *write* is never sent twice by a resume "
             "unless the caller says it did not take effect; a *read* may be.", "",
             "## Every command", "", "Every action and block takes these:", "",
             *_table(_PARAMETER_HEADER, _parameter_rows({name: every[0]["properties"][name] for name in common}, ())),
             *_table(("command", "kind", "what it does"),
                     ([f"[`{action}`](#{action})", _kind(cls), _docstring(cls).split("\n\n")[0]]
                      for action, cls in ACTIONS.items()))]
    for title, actions in (("Actions", [a for a, c in ACTIONS.items() if c not in BLOCKS]),
                           ("Blocks", [cls.action for cls in BLOCKS])):
        lines += [f"## {title}", ""]
        for action in actions:
            lines += _command_section(action, definitions[action], common)
    lines += ["## Call bodies", ""]
    for route, builder in (("POST /api/batch", batch_schema), ("POST /api/parallel", parallel_schema)):
        body = builder()
        lines += [f"### `{route}`", "", _prose(inspect.getdoc(builder) or ""), "",
                  *_table(_PARAMETER_HEADER, _parameter_rows(body["properties"], body["required"]))]
    return "\n".join(lines)


# --- errors ----------------------------------------------------------------------------------


def errors_page() -> str:
    """Every error code with its HTTP status and whether it is retryable, then the codes of each status."""
    codes = sorted(ERROR_CODES.values(), key=lambda code: code.name)
    statuses = sorted({code.http_status for code in codes})
    lines = ["# Error codes and HTTP statuses", "",
             f"{_GENERATED} the error-code registry, `messages.errors.ERROR_CODES`: every code the node raises or "
             "answers is there (a unit test finds each code literal of the package in it).", "",
             "An error is answered as `{\"error\", \"code\", \"retryable\", \"state\"?}` with the HTTP status of "
             "its code; `retryable` is the code's unless the error says otherwise. A code that travels only "
             "inside a result (a step's failure) is answered with its call's status; the status here is the one "
             f"it answers with when raised. A code missing from the registry is a bug: it answers "
             f"{UNKNOWN_CODE_STATUS} and logs a warning.", "",
             "## Every code", "",
             *_table(("code", "HTTP status", "retryable"),
                     ([f"`{c.name}`", str(c.http_status), "yes" if c.retryable else "no"] for c in codes)),
             "## By HTTP status", ""]
    for status in statuses:
        names = ", ".join(f"`{c.name}`" for c in codes if c.http_status == status)
        lines += [f"### {status} {HTTPStatus(status).phrase}", "", names, ""]
    return "\n".join(lines)


# --- MCP tools -------------------------------------------------------------------------------


def tools_page() -> str:
    """Every tool of the MCP gateway with its groups and parameters."""
    lines = ["# MCP tools", "",
             f"{_GENERATED} the gateway's tool table (`mcp_gateway._tools.TOOLS`). A client sees the tools of the "
             "capability groups its agent has; `tabId`, `timeout` and `confirm_token` are described once, in the "
             "server's instructions. The [MCP guide](../guides/mcp.md) says how to connect.", "",
             *_table(("tool", "groups", "read-only"),
                     ([f"[`{name}`](#{name})", ", ".join(sorted(spec.groups)), "yes" if spec.read_only else ""]
                      for name, spec in TOOLS.items()))]
    for name, spec in TOOLS.items():
        schema = spec.input_schema
        confirmable = " Takes `confirm_token`." if spec.confirmable else ""
        lines += [f"## `{name}` {{#{name}}}", "", _prose(spec.description), "",
                  f"Groups: {', '.join(sorted(spec.groups))}.{confirmable}", ""]
        rows = _parameter_rows(schema.get("properties", {}), schema.get("required", ()), references=False)
        lines += _table(_PARAMETER_HEADER, rows) if rows else ["No parameters.", ""]
    return "\n".join(lines)


# --- the contract's numbers ------------------------------------------------------------------


def _documented_constants(source: str) -> list[tuple[str, str]]:
    """(name, docstring) of each module constant followed by its docstring."""
    body = ast.parse(source).body
    found = []
    for assign, doc in itertools.pairwise(body):
        if (isinstance(assign, ast.Assign) and len(assign.targets) == 1 and isinstance(assign.targets[0], ast.Name)
                and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
                and isinstance(doc.value.value, str)):
            found.append((assign.targets[0].id, " ".join(doc.value.value.split())))
    return found


def contract_page() -> str:
    """The contract's numbers (timeouts, lifetimes, capacities), each with what it is."""
    source = Path(messages.contract.__file__).read_text()
    rows = ([f"`{name}`", _code(_number(getattr(messages.contract, name))), _prose(doc)]
            for name, doc in _documented_constants(source))
    return "\n".join(["# The contract's numbers", "",
                      f"{_GENERATED} `messages/contract.py`, where every number of the contract lives once "
                      "(seconds unless said). The configuration may change those it names.", "",
                      *_table(("name", "value", "what it is"), rows)])
