"""The gateway's tools: names, capability groups, descriptions and input schemas.

Input schemas come from the command language's own JSON Schema (``messages.schema``): the
container tools take a batch or parallel body as the bridge does, and each direct tool takes the
parameters of the action it sends, so what a client sees is what the bridge accepts.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from mcp_gateway._listing import compact, container_schema
from messages.schema import batch_schema, command_schema, parallel_schema

__all__ = ["FORM_FIELDS", "TOOLS", "ToolSpec", "enabled_tools"]

_REFERENCE = {"$ref": "#/$defs/reference"}

_CONFIRM_TOKEN = {
    "type": "string",
    "description": "A hold's state.confirm_token, once the user approved exactly this call.",
}

_TAB = {"type": "integer", "description": "Tab to act on; the current tab when absent."}


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
    definition = command_schema()["$defs"][action]
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
    definitions, wanted = command_schema()["$defs"], _referred(schema)
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
    rules = command_schema()["$defs"][action].get("allOf")  # across parameters: "selector or text"
    if rules:
        schema["allOf"] = copy.deepcopy(rules)
    return _with_definitions(schema)


def _container(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k not in ("$schema", "title")}


_SNAPSHOT_AFTER = {"snapshot": {"enum": ["diff", "none"], "default": "diff",
                                 "description": "diff: the answer's page says what changed since your last "
                                                "snapshot of the tab (the whole snapshot after a navigation)."}}


FORM_FIELDS = {"value": "fill", "values": "select", "checked": "check"}
"""A ``browser_fill_form`` field's command, by the key its value is given under (that command's own parameter)."""

_FIELD_VALUES = {"value": "Text to fill (a typed value: redacted everywhere).",
                 "values": "A select's options to choose, by value or label.",
                 "checked": "A checkbox or radio: true checks it, false unchecks it."}


def _fill_form_schema() -> dict[str, Any]:
    fill, _ = _action_properties("fill")
    given = {key: {k: v for k, v in _action_properties(action)[0][key].items() if k != "default"}
             for key, action in FORM_FIELDS.items()}
    field = _object({"selector": fill["selector"], "ref": fill["ref"],
                     **{key: {**given[key], "description": said} for key, said in _FIELD_VALUES.items()}}, [])
    field["allOf"] = [*copy.deepcopy(command_schema()["$defs"]["fill"]["allOf"]),
                      {"description": "a field takes one of value, values, checked",
                       "oneOf": [{"required": [key]} for key in FORM_FIELDS]}]
    return _object({
        "fields": {"type": "array", "minItems": 1, "items": field,
                   "description": "The fields in order; each is one request (fill, select or check), so a hold "
                                  "stops at its field."},
        "tabId": dict(_TAB),
        "timeout": {"type": "number", "minimum": 0, "description": "Seconds each field may take (default 30)."},
        "confirm_token": dict(_CONFIRM_TOKEN), **copy.deepcopy(_SNAPSHOT_AFTER),
    }, ["fields"])


def _resume_schema() -> dict[str, Any]:
    return _object({
        "call": {"type": "integer", "description": "The stopped result's call."},
        "resume_token": {"type": "string", "description": "Its latest resume_token."},
        "observed": {
            "type": ["object", "null"], "additionalProperties": {"enum": ["applied", "not_applied"]},
            "description": "Container calls: step paths (\"2\", \"0.1.3\") of unknown, held or failed steps mapped "
                           "to what you saw on the page."},
        "wait": {"type": "number", "minimum": 0, "default": 120,
                 "description": "Direct calls: seconds to wait for the user or the page (at most 300)."},
    }, ["call", "resume_token"])


def _tabs_schema() -> dict[str, Any]:
    return _object({
        "op": {"enum": ["list", "new", "select", "close", "takeover"], "default": "list",
               "description": "new and select make the tab current; takeover makes a user's or another agent's tab "
                              "yours."},
        "tabId": {"type": "integer", "description": "The tab to select, close or take over."},
        "url": {"type": "string", "description": "For new (about:blank when absent)."},
        "session": _described(
            "newTab", "session", "For new: your browser session (cookies, storage) by name, made on first use; "
            "\"default\" when absent."),
        "confirm_token": dict(_CONFIRM_TOKEN), **copy.deepcopy(_SNAPSHOT_AFTER),
    }, [])


def _described(action: str, parameter: str, description: str) -> dict[str, Any]:
    """The command language's schema of ``action``'s ``parameter``, described anew for a tool."""
    properties, _ = _action_properties(action)
    return {**properties[parameter], "description": description}


def _sessions_schema() -> dict[str, Any]:
    schema = _object({
        "op": {"enum": ["list", "close"], "default": "list",
               "description": "close: its tabs close and later requests naming it answer session_expired; closing "
                              "a tombstone frees the name."},
        "name": _described("keepSession", "name", "For close: the session's name."),
    }, [])
    schema["allOf"] = [{"if": {"properties": {"op": {"const": "close"}}, "required": ["op"]},
                        "then": {"required": ["name"]}}]
    return schema


def _ask_user_schema() -> dict[str, Any]:
    return _object({
        "question": {"type": "string", "minLength": 1, "description": "One or two sentences."},
        "reason": {"enum": ["sign_in", "human_check", "other"], "default": "other",
                   "description": "sign_in, human_check: the user acts in the tab, which is watched for the hint "
                                  "to go."},
        "tabId": {"type": "integer", "description": "The tab it is about; the current tab when absent."},
        "wait": {"type": "number", "minimum": 0, "default": 120,
                 "description": "Seconds the prompt stays open (at most 120)."},
    }, ["question"])


def _live_view_schema() -> dict[str, Any]:
    return _object({
        "tabId": {"type": "integer", "description": "The tab to show; the current tab when absent."},
        "control": {"type": "boolean", "description": (
            "Whether the person may act in the tab (absent: what your policy gives; true under ask_before_act "
            "asks the user's approval, under read_only it is refused).")},
        "confirm_token": dict(_CONFIRM_TOKEN),
    }, [])


_TASK_ID = {"type": "string", "minLength": 1, "description": "The task's id (t-...)."}


def _task_schema(**properties: dict[str, Any]) -> dict[str, Any]:
    return _object({"taskId": dict(_TASK_ID), **properties}, ["taskId"])


def _task_create_schema() -> dict[str, Any]:
    return _object({
        "goal": {"type": "string", "minLength": 1, "description": "What it is to achieve, in a sentence."},
        "tabs": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True,
                 "description": "Your open tabs it works in (one open task per tab)."},
        "resume": {"enum": ["ask", "auto", "off"], "default": "ask",
                   "description": "What a takeover does with a call left in flight: return its resume token (ask), "
                                  "resume it where the rules allow (auto), or nothing (off)."},
        "scope": {"enum": ["tab", "browser", "remote"], "default": "browser"},
    }, ["goal"])


_SUMMARY = {"type": "string", "description": "Where the task stands (4 KiB; no secrets: they become [redacted])."}

_TAKEOVER_DESCRIPTION = (
    "Take over your agent's task: this session becomes its owner. Explicit and atomic (a live owner's answers "
    "task_leased unless force; a lost race task_takeover_conflict: read it again). Returns its checkpoint (context, "
    "not authority), its tabs (re-observed now) and in_flight: calls whose outcome is unknown (session lost "
    "mid-execution). Look at the page before resuming one with its resume_token; never retry a write blindly.")

_CORE = frozenset({"core"})
_AUTOMATION = frozenset({"automation"})

TOOLS: dict[str, ToolSpec] = {spec.name: spec for spec in [
    ToolSpec("browser_batch", _AUTOMATION,
             "Run commands in order in one call: returns results, progress and a one-line summary (a few hundred "
             "bytes per step); one call instead of a tool call per step when the steps are known. A call that "
             "stops returns call and resume_token for browser_resume.",
             _container(batch_schema()), listed_schema=container_schema("batch")),
    ToolSpec("browser_parallel", _AUTOMATION,
             "Run lists of commands concurrently, each on its own tabs: returns each sequence's results and "
             "progress, as browser_batch.",
             _container(parallel_schema()), listed_schema=container_schema("parallel")),
    ToolSpec("browser_workflow", _AUTOMATION,
             "Run one of the node's workflow files with variables: returns what browser_batch returns.",
             _object({"workflow": {"type": "string", "description": "The workflow's name."},
                      "variables": {"type": "object", "description": "Values of the workflow's variables."},
                      **{k: v for k, v in _container(batch_schema())["properties"].items() if k != "commands"}},
                     ["workflow"]), listed_schema=container_schema("workflow")),
    ToolSpec("browser_resume", _CORE | _AUTOMATION,
             "Continue a stopped call (a container's checkpoint, or a direct call held on needs_user): returns its "
             "answer; nothing that ran ok is sent again.",
             _resume_schema()),
    ToolSpec("browser_navigate", _CORE, "Load a URL in a tab: returns the final url, HTTP status and the page's "
             "snapshot.", _direct("navigate", confirmable=True, extra=_SNAPSHOT_AFTER), confirmable=True),
    ToolSpec("browser_snapshot", _CORE,
             "The tab's accessibility tree as text, each element you can act on with a ref (pass it as ref to the "
             "other tools instead of a selector): returns it up to maxChars; since=last returns only what changed.",
             _direct("snapshot", confirmable=False), read_only=True),
    ToolSpec("browser_click", _CORE, "Click the element a selector or ref names: returns ok and what changed (one "
             "write).", _direct("click", confirmable=True, extra=_SNAPSHOT_AFTER), confirmable=True),
    ToolSpec("browser_type", _CORE,
             "Type text into an element key by key (submit: then Enter, a second write): returns ok and what "
             "changed.", _direct("type", confirmable=True, extra=_SNAPSHOT_AFTER), confirmable=True),
    ToolSpec("browser_fill_form", _CORE,
             "Fill fields in order, one write per field (a hold stops at its field): returns each field's result "
             "and what changed.", _fill_form_schema(), confirmable=True),
    ToolSpec("browser_select", _CORE, "Choose options of a <select> by value or label: returns those selected.",
             _direct("select", confirmable=True, extra=_SNAPSHOT_AFTER), confirmable=True),
    ToolSpec("browser_press", _CORE, "Press a key or chord (Enter, Control+A) on an element or the page: returns ok.",
             _direct("press", confirmable=True, extra=_SNAPSHOT_AFTER), confirmable=True),
    ToolSpec("browser_page_text", _CORE,
             "Read the visible text of the page or an element: returns it, up to maxChars (the costly read).",
             _direct("pageText", confirmable=False), read_only=True),
    ToolSpec("browser_find", _CORE, "Find elements by selector or visible text: returns up to limit matches.",
             _direct("find", confirmable=False), read_only=True),
    ToolSpec("browser_screenshot", _CORE,
             "Screenshot the viewport, full page or an element: returns a PNG image (costly; prefer text).",
             _direct("screenshot", confirmable=False), read_only=True),
    ToolSpec("browser_tabs", _CORE,
             "List, open, select, close or take over tabs: returns the tabs or the tab acted on. A tab you open is "
             "yours and current; a user's tab needs a takeover before you write to it.",
             _tabs_schema(), confirmable=True),
    ToolSpec("browser_sessions", _CORE,
             "List or close your browser sessions (each its own cookies, storage and tabs): returns them.",
             _sessions_schema()),
    ToolSpec("browser_ask_user", _CORE,
             "Ask the user what only a person can do or decide (sign in, a human check, a choice): returns the "
             "answer; waits for it.", _ask_user_schema(), read_only=True),
    ToolSpec("browser_site_tools", _CORE,
             "List the tools the page declares (WebMCP; the page's, not MCP tools): returns name, description, input "
             "schema and frame of each; call one with browser_call_site_tool.",
             _direct("siteTools", confirmable=False), read_only=True),
    ToolSpec("browser_call_site_tool", _CORE,
             "Call a tool the page declares by its name, with input its schema accepts (else invalid_input, nothing "
             "runs): returns its last output, followed by the node across pages. An unknown outcome (the page "
             "navigated mid-execution, a continuation expired, it threw or timed out) may have taken effect: look "
             "first, never blindly call again.",
             _direct("callSiteTool", confirmable=True, extra={"name": _described(
                 "callSiteTool", "name", "The tool's name, as browser_site_tools lists it.")}), confirmable=True),
    ToolSpec("browser_live_view", _CORE,
             "A Live View link (5 minutes, one person) for the user to see and act in a tab (sign in, a human "
             "check): returns url and control. Show it, then wait with browser_ask_user; meanwhile your writes to "
             "the tab answer tab_claimed.",
             _live_view_schema(), confirmable=True),  # not read-only: a link that acts lets a person write
    ToolSpec("browser_task_create", _CORE,
             "Start a task (a goal in some of your tabs) this session owns: returns the task. Other sessions of your "
             "agent follow (they read, their writes answer task_leased); a lost session's task goes on with an "
             "explicit browser_task_takeover. Checkpoint it as you go, complete it when done.",
             _task_create_schema()),
    ToolSpec("browser_task_get", _CORE,
             "Read a task (without taskId: your agent's tasks): returns goal, tabs, lease, checkpoint and state "
             "(owner, follower: read only, expired: take it over, completed, revoked).",
             _object({"taskId": dict(_TASK_ID)}, []), read_only=True),
    ToolSpec("browser_task_checkpoint", _CORE,
             "Owner: record the task's progress with your summary, and the page re-observed: what a taker reads.",
             _task_schema(summary=dict(_SUMMARY))),
    ToolSpec("browser_task_complete", _CORE,
             "Owner: complete the task with a final summary; its lease ends and its tabs are free.",
             _task_schema(summary=dict(_SUMMARY))),
    ToolSpec("browser_task_takeover", _CORE, _TAKEOVER_DESCRIPTION,
             _task_schema(force={"type": "boolean", "default": False,
                                 "description": "Take it from a live owner (only when you know it is gone)."},
                          confirm_token=dict(_CONFIRM_TOKEN)), confirmable=True),
]}
"""Every tool, by name."""


def enabled_tools(caps: frozenset[str]) -> list[ToolSpec]:
    """The tools of the enabled capability groups, in a stable order."""
    return [spec for spec in TOOLS.values() if spec.groups & caps]
