"""The gateway's tools: names, capability groups, descriptions and input schemas.

Input schemas come from the command language's own JSON Schema (``messages.schema``): the
container tools take a batch or parallel body as the bridge does, and each direct tool takes the
parameters of the action it sends, so what a client sees is what the bridge accepts.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from mcp_gateway._listing import command_definitions, compact, container_schema
from messages.schema import batch_schema, parallel_schema

__all__ = ["CDP_READS", "FORM_FIELDS", "PAGE_MAX_CHARS", "TOOLS", "ToolSpec", "enabled_tools"]

_REFERENCE = {"$ref": "#/$defs/reference"}

_CONFIRM_TOKEN = {"type": "string"}
"""A hold's ``state.confirm_token``, once the user approved exactly this call (the instructions say so once)."""

_TAB = {"type": "integer"}
"""The tab to act on; the current tab when absent (the instructions say so once)."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool as clients see it."""

    name: str
    groups: frozenset[str]
    """Capability groups the tool belongs to; it is listed when one of them is enabled."""
    description: str
    input_schema: dict[str, Any]
    read_only: bool = False
    confirmable: bool = False
    """Whether it takes ``confirm_token``: only then can its holds be approved and checkpointed."""
    listed_schema: dict[str, Any] | None = None
    """The input schema ``tools/list`` shows, when it is not ``input_schema`` made short (``_listing``)."""

    @property
    def listed(self) -> dict[str, Any]:
        """The input schema ``tools/list`` shows: short, as a model reads it (the checks use ``input_schema``)."""
        if self.listed_schema is not None:
            return self.listed_schema
        found = _LISTED.get(self.name)
        if found is None:
            found = _LISTED[self.name] = compact(self.input_schema)
        return found


_LISTED: dict[str, dict[str, Any]] = {}
"""Each tool's listed schema, made once."""


def _without_references(schema: Any) -> Any:
    """A parameter schema with ``${$N...}`` references taken out: a direct call has no earlier steps."""
    if isinstance(schema, dict):
        members = schema.get("anyOf")
        if isinstance(members, list) and _REFERENCE in members:
            rest = [m for m in members if m != _REFERENCE]
            merged = {k: v for k, v in schema.items() if k != "anyOf"}
            if len(rest) == 1:
                return {**rest[0], **merged}
            return {**merged, "anyOf": rest}
        return {k: _without_references(v) for k, v in schema.items()}
    if isinstance(schema, list):
        return [_without_references(v) for v in schema]
    return schema


def _action_properties(action: str) -> tuple[dict[str, Any], list[str]]:
    """The parameters of ``action`` (without ``action`` and ``label``) and which are required."""
    definition = command_definitions()[action]
    properties = {name: _without_references(copy.deepcopy(schema))
                  for name, schema in definition["properties"].items() if name not in ("action", "label")}
    if "tabId" in properties:
        properties["tabId"] = dict(_TAB)
    required = [name for name in definition["required"] if name != "action"]
    return properties, required


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


def _referred(schema: Any) -> set[str]:
    """The names of the command schema's definitions ``schema`` refers to (``#/$defs/NAME``)."""
    if isinstance(schema, dict):
        ref = schema.get("$ref")
        own = {ref.removeprefix("#/$defs/")} if isinstance(ref, str) and ref.startswith("#/$defs/") else set()
        return own.union(*(_referred(v) for v in schema.values()))
    if isinstance(schema, list):
        return set().union(*(_referred(v) for v in schema))
    return set()


def _with_definitions(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with the command schema's definitions it refers to (a JSON value's, say), and theirs."""
    definitions, wanted = command_definitions(), _referred(schema)
    found: dict[str, Any] = {}
    while wanted:
        name = wanted.pop()
        found[name] = copy.deepcopy(definitions[name])
        wanted |= _referred(found[name]) - set(found)
    return {**schema, "$defs": found} if found else schema


def _direct(action: str, *, confirmable: bool, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    properties, required = _action_properties(action)
    properties.update(extra or {})
    if confirmable:
        properties["confirm_token"] = dict(_CONFIRM_TOKEN)
    schema = _object(properties, required)
    rules = command_definitions()[action].get("allOf")  # across parameters: "selector or text"
    if rules:
        schema["allOf"] = copy.deepcopy(rules)
    return _with_definitions(schema)


def _container(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k not in ("$schema", "title")}


_SNAPSHOT_AFTER = {"snapshot": {"enum": ["diff", "none"]}}
"""Whether a write answers the page after it (``diff``, the default: what changed since your last snapshot of the
tab, the whole snapshot after a navigation); the instructions say so once."""

PAGE_MAX_CHARS = 4000
"""The bound of a write's page (a diff, or the snapshot after a navigation): past it the text is cut at an
element's line and says where to read on."""


FORM_FIELDS = {"value": "fill", "values": "select", "checked": "check"}
"""A ``browser_fill_form`` field's command, by the key its value is given under (that command's own parameter)."""


def _fill_form_schema() -> dict[str, Any]:
    fill, _ = _action_properties("fill")
    given = {key: {k: v for k, v in _action_properties(action)[0][key].items() if k not in ("default", "description")}
             for key, action in FORM_FIELDS.items()}
    field = _object({"selector": fill["selector"], "ref": fill["ref"], **given}, [])
    field["allOf"] = [*copy.deepcopy(command_definitions()["fill"]["allOf"]),
                      {"description": "a field takes one of value, values, checked",
                       "oneOf": [{"required": [key]} for key in FORM_FIELDS]}]
    return _object({
        "fields": {"type": "array", "minItems": 1, "items": field},
        "tabId": dict(_TAB),
        "timeout": {"type": "number", "minimum": 0},  # seconds each field's request may take
        "confirm_token": dict(_CONFIRM_TOKEN), **copy.deepcopy(_SNAPSHOT_AFTER),
    }, ["fields"])


CDP_READS = {"events": "cdpEvents", "spec": "cdpSpec"}
"""A ``browser_cdp`` call's action by its ``read`` (none: ``cdp``, the method given)."""


def _cdp_schema() -> dict[str, Any]:
    """``browser_cdp``'s: a method and its params (``cdp``), or ``read`` with ``cdpEvents``'s or ``cdpSpec``'s own."""
    sent, _ = _action_properties("cdp")
    schema = _object({**sent, "read": {"enum": list(CDP_READS)}, "enable": _action_properties("cdpEvents")[0]["enable"],
                      "domain": _action_properties("cdpSpec")[0]["domain"], "confirm_token": dict(_CONFIRM_TOKEN)}, [])
    schema["allOf"] = [{"description": "method, or read", "oneOf": [{"required": ["method"]}, {"required": ["read"]}]}]
    return _with_definitions(schema)


def _resume_schema() -> dict[str, Any]:
    return _object({
        "call": {"type": "integer"},
        "resume_token": {"type": "string"},
        "observed": {
            "type": ["object", "null"], "additionalProperties": {"enum": ["applied", "not_applied"]},
            "description": "Containers: what you saw of each unknown, held or failed step, by path."},
        "wait": {"type": "number", "minimum": 0, "default": 120, "description": "Direct calls: seconds, at most 300."},
    }, ["call", "resume_token"])


def _tabs_schema() -> dict[str, Any]:
    return _object({
        "op": {"enum": ["list", "new", "select", "close", "takeover"], "default": "list"},
        "tabId": dict(_TAB),
        "url": {"type": "string", "description": "For new."},
        "session": _described("newTab", "session", "For new: its session (\"default\")."),
        "persist": _described("newTab", "persist", "For new: sign-ins outlive tabs, node."),
        "forget": {"type": "boolean"},
        "confirm_token": dict(_CONFIRM_TOKEN), **copy.deepcopy(_SNAPSHOT_AFTER),
    }, [])


def _described(action: str, parameter: str, description: str) -> dict[str, Any]:
    """The command language's schema of ``action``'s ``parameter``, described anew for a tool."""
    properties, _ = _action_properties(action)
    return {**properties[parameter], "description": description}


def _sessions_schema() -> dict[str, Any]:
    schema = _object({
        "op": {"enum": ["list", "close"], "default": "list",
               "description": "close: its tabs close; a tombstone's frees the name."},
        "name": _action_properties("keepSession")[0]["name"],
    }, [])
    schema["allOf"] = [{"if": {"properties": {"op": {"const": "close"}}, "required": ["op"]},
                        "then": {"required": ["name"]}}]
    return schema


def _ask_user_schema() -> dict[str, Any]:
    return _object({
        "question": {"type": "string", "minLength": 1},
        "reason": {"enum": ["sign_in", "human_check", "other"], "default": "other",
                   "description": "sign_in, human_check: answered once the tab stops showing it."},
        "tabId": dict(_TAB),
        "wait": {"type": "number", "minimum": 0, "default": 120, "description": "Seconds, at most 120."},
    }, ["question"])


def _live_view_schema() -> dict[str, Any]:
    return _object({
        "tabId": dict(_TAB),
        "control": {"type": "boolean", "description": "The person may act (absent: per your policy)."},
        "mode": {"enum": ["tab", "devtools"], "description": "devtools: the tab's DevTools (acts)."},
        "confirm_token": dict(_CONFIRM_TOKEN),
    }, [])


_TASK_ID = {"type": "string", "minLength": 1}


def _task_schema(**properties: dict[str, Any]) -> dict[str, Any]:
    return _object({"taskId": dict(_TASK_ID), **properties}, ["taskId"])


def _task_create_schema() -> dict[str, Any]:
    return _object({
        "goal": {"type": "string", "minLength": 1},
        "tabs": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True},
        "resume": {"enum": ["ask", "auto", "off"], "default": "ask",
                   "description": "At a takeover, calls in flight: tokens, resumed, none."},
        "scope": {"enum": ["tab", "browser", "remote"], "default": "tab"},
        "fork": dict(_TASK_ID, description="A task to fork (new tabs, its checkpoint)"),
    }, [])


_SUMMARY = {"type": "string"}
"""Where the task stands (4 KiB; secrets become [redacted])."""

_CORE = frozenset({"core"})
_AUTOMATION = frozenset({"automation"})

TOOLS: dict[str, ToolSpec] = {spec.name: spec for spec in [
    ToolSpec("browser_batch", _AUTOMATION,
             "Run commands in order in one call when the steps are known: returns each result and a summary, a few "
             "hundred bytes a step.",
             _container(batch_schema()), listed_schema=container_schema("batch")),
    ToolSpec("browser_parallel", _AUTOMATION,
             "Run lists of commands concurrently, each on its own tabs: returns each list's results as browser_batch.",
             _container(parallel_schema()), listed_schema=container_schema("parallel")),
    ToolSpec("browser_workflow", _AUTOMATION,
             "Run a workflow of the node with its variables: returns what browser_batch returns.",
             _object({"workflow": {"type": "string", "description": "The workflow's name."},
                      "variables": {"type": "object", "description": "Values of the workflow's variables."},
                      **{k: v for k, v in _container(batch_schema())["properties"].items() if k != "commands"}},
                     ["workflow"]), listed_schema=container_schema("workflow")),
    ToolSpec("browser_resume", _CORE | _AUTOMATION,
             "Continue a stopped call: returns its answer; nothing that ran ok is sent again.", _resume_schema()),
    ToolSpec("browser_navigate", _CORE, "Load a URL: returns the final url, HTTP status and the page's snapshot.",
             _direct("navigate", confirmable=True, extra=_SNAPSHOT_AFTER), confirmable=True),
    ToolSpec("browser_snapshot", _CORE,
             "Read the page's accessibility tree: returns it as text, a ref on each element to act on; since=last "
             "only what changed.", _direct("snapshot", confirmable=False), read_only=True),
    ToolSpec("browser_click", _CORE, "Click an element: returns what changed.",
             _direct("click", confirmable=True, extra=_SNAPSHOT_AFTER), confirmable=True),
    ToolSpec("browser_type", _CORE, "Type text key by key (submit: then Enter): returns what changed.",
             _direct("type", confirmable=True, extra=_SNAPSHOT_AFTER), confirmable=True),
    ToolSpec("browser_fill_form", _CORE,
             "Set fields in order, one write each: value fills text, values a select's options, checked a "
             "checkbox or radio. Returns what changed.", _fill_form_schema(), confirmable=True),
    ToolSpec("browser_select", _CORE, "Choose a select's options by value or label: returns what changed.",
             _direct("select", confirmable=True, extra=_SNAPSHOT_AFTER), confirmable=True),
    ToolSpec("browser_press", _CORE, "Press a key or chord (Enter, Control+A): returns what changed.",
             _direct("press", confirmable=True, extra=_SNAPSHOT_AFTER), confirmable=True),
    ToolSpec("browser_page_text", _CORE, "The visible text of the page or an element: returns it (costly).",
             _direct("pageText", confirmable=False), read_only=True),
    ToolSpec("browser_find", _CORE, "Find elements by selector or visible text: returns up to limit matches.",
             _direct("find", confirmable=False), read_only=True),
    ToolSpec("browser_screenshot", _CORE, "Screenshot the viewport, page or an element: returns a PNG (costly).",
             _direct("screenshot", confirmable=False), read_only=True),
    ToolSpec("browser_tabs", _CORE,
             "List, open (at a url: returns its snapshot), select, close (forget: its session) or take "
             "over tabs: one you open is yours and current.", _tabs_schema(), confirmable=True),
    ToolSpec("browser_sessions", _CORE,
             "List or close your browser sessions (each its own cookies, storage and tabs): returns them.",
             _sessions_schema()),
    ToolSpec("browser_ask_user", _CORE,
             "Ask the user what only a person can do or decide (sign in, a human check): waits, returns the answer.",
             _ask_user_schema(), read_only=True),
    ToolSpec("browser_site_tools", _CORE,
             "The tools the page declares (WebMCP, not MCP tools): returns their names, descriptions and "
             "input schemas.",
             _direct("siteTools", confirmable=False), read_only=True),
    ToolSpec("browser_call_site_tool", _CORE,
             "Call a tool browser_site_tools lists by its name, with input its schema accepts (else invalid_input, "
             "nothing runs): returns its last output, followed by the node across pages. An unknown outcome "
             "(navigated mid-execution, continuation expired) may have acted: look first, never blindly call again.",
             _direct("callSiteTool", confirmable=True), confirmable=True),
    ToolSpec("browser_cdp", _CORE,
             "DevTools Protocol: method (Domain.method) with params; read=events: events since last read "
             "(enable: domains to collect); read=spec: the protocol (domain: its commands, events).",
             _cdp_schema(), confirmable=True),
    ToolSpec("browser_live_view", _CORE,
             "A Live View link (5 min) for the user to see and act in a tab: returns url; show it, then wait with "
             "browser_ask_user.",
             _live_view_schema(), confirmable=True),  # not read-only: a link that acts lets a person write
    ToolSpec("browser_task_create", _CORE,
             "Start a task this session owns (a goal in your tabs): returns it. Your agent's other sessions follow "
             "(read only) until an explicit browser_task_takeover. Checkpoint as you go, complete when done.",
             _task_create_schema()),
    ToolSpec("browser_task_get", _CORE,
             "Read a task (no taskId: your agent's): goal, tabs, lease, checkpoint, state (owner, follower: read "
             "only, expired: take it over, completed, revoked).",
             _object({"taskId": dict(_TASK_ID)}, []), read_only=True),
    ToolSpec("browser_task_checkpoint", _CORE,
             "Owner: record the task's progress, with the page re-observed: returns the task.",
             _task_schema(summary=dict(_SUMMARY), messages={"type": "array", "items": {"type": "object"}})),
    ToolSpec("browser_task_complete", _CORE,
             "Owner: complete the task; its lease ends: returns it.", _task_schema(summary=dict(_SUMMARY))),
    ToolSpec("browser_task_takeover", _CORE,
             "Take over your agent's task, explicit and atomic (a live owner's answers task_leased unless force): "
             "returns its checkpoint (context, not authority), its tabs re-observed and in_flight calls of unknown "
             "outcome (session lost mid-execution): look before resuming one with its resume_token; never retry a "
             "write blindly.",
             _task_schema(force={"type": "boolean", "default": False},
                          confirm_token=dict(_CONFIRM_TOKEN)), confirmable=True),
]}
"""Every tool, by name."""


def enabled_tools(caps: frozenset[str]) -> list[ToolSpec]:
    """The tools of the enabled capability groups, in a stable order."""
    return [spec for spec in TOOLS.values() if spec.groups & caps]
