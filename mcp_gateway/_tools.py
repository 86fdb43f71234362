"""The gateway's tools: names, capability groups, descriptions and input schemas.

Input schemas come from the command language's own JSON Schema (``messages.schema``): the
container tools take a batch or parallel body as the bridge does, and each direct tool takes the
parameters of the action it sends, so what a client sees is what the bridge accepts.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from messages.schema import batch_schema, command_schema, parallel_schema

__all__ = ["TOOLS", "ToolSpec", "enabled_tools"]

_REFERENCE = {"$ref": "#/$defs/reference"}

_CONFIRM_TOKEN = {
    "type": "string",
    "description": "The confirm token of a hold (state.confirm_token of a needs_user result), after the "
                   "user approved exactly this call. Only clients without elicitation see one.",
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


def _fill_form_schema() -> dict[str, Any]:
    fill, _ = _action_properties("fill")
    field = _object({"selector": fill["selector"], "ref": fill["ref"], "value": fill["value"]}, ["value"])
    field["allOf"] = copy.deepcopy(command_schema()["$defs"]["fill"]["allOf"])
    return _object({
        "fields": {"type": "array", "minItems": 1, "items": field,
                   "description": "The fields in order; each is one fill request, so a hold stops at its field."},
        "tabId": dict(_TAB),
        "timeout": {"type": "number", "minimum": 0, "description": "Seconds each field may take (default 30)."},
        "confirm_token": dict(_CONFIRM_TOKEN), **copy.deepcopy(_SNAPSHOT_AFTER),
    }, ["fields"])


def _resume_schema() -> dict[str, Any]:
    return _object({
        "call": {"type": "integer", "description": "The call id of the result that stopped (its `call`)."},
        "resume_token": {"type": "string", "description": "Its latest `resume_token`."},
        "observed": {
            "type": ["object", "null"], "additionalProperties": {"enum": ["applied", "not_applied"]},
            "description": "Container calls only: step paths (\"2\", \"0.1.3\") of unknown, held or failed steps "
                           "mapped to what you saw on the page. A direct call has no steps to observe."},
        "wait": {"type": "number", "minimum": 0, "default": 120,
                 "description": "Direct calls only: seconds to wait for the user or the page (0 to 300; larger "
                                "values are capped at 300; an approval prompt stays open at most 115)."},
    }, ["call", "resume_token"])


def _tabs_schema() -> dict[str, Any]:
    return _object({
        "op": {"enum": ["list", "new", "select", "close", "takeover"], "default": "list",
               "description": "list the tabs; open a new one (it becomes current); make one current; close one; "
                              "take one over (a user's or another agent's tab becomes yours)."},
        "tabId": {"type": "integer", "description": "The tab to select, close or take over."},
        "url": {"type": "string", "description": "For new: the URL to open (about:blank when absent)."},
        "session": _described(
            "newTab", "session", "For new: the browser session (cookies, storage) to open it in, one of your reuse "
            "sessions by name, made on first use; your \"default\" session when absent. (\"call\", a one-shot "
            "session, is for a newTab inside browser_batch or browser_parallel: a direct call refuses it, except "
            "with the confirm_token of such a newTab's hold, which opens it in that call's session.)"),
        "confirm_token": dict(_CONFIRM_TOKEN),
    }, [])


def _described(action: str, parameter: str, description: str) -> dict[str, Any]:
    """The command language's schema of ``action``'s ``parameter``, described anew for a tool."""
    properties, _ = _action_properties(action)
    return {**properties[parameter], "description": description}


def _sessions_schema() -> dict[str, Any]:
    schema = _object({
        "op": {"enum": ["list", "close"], "default": "list",
               "description": "list your sessions (name, mode, tabs, created, last used) and the tombstones of "
                              "closed ones (closed at, reason); close one: its tabs close, and a later request "
                              "naming it answers session_expired. Closing a tombstone forgets it (the name is free)."},
        "name": _described("keepSession", "name", "For close: the session's name."),
    }, [])
    schema["allOf"] = [{"if": {"properties": {"op": {"const": "close"}}, "required": ["op"]},
                        "then": {"required": ["name"]}}]
    return schema


def _ask_user_schema() -> dict[str, Any]:
    return _object({
        "question": {"type": "string", "minLength": 1, "description": "What to ask the user, in one or two sentences."},
        "reason": {"enum": ["sign_in", "human_check", "other"], "default": "other",
                   "description": "sign_in or human_check when the user must do it in the tab: without a prompt "
                                  "the gateway then watches the tab for the hint to go away."},
        "tabId": {"type": "integer", "description": "The tab it is about; the current tab when absent."},
        "wait": {"type": "number", "minimum": 0, "default": 120,
                 "description": "Seconds the prompt stays open (larger values are capped at 120)."},
    }, ["question"])


def _live_view_schema() -> dict[str, Any]:
    return _object({
        "tabId": {"type": "integer", "description": "The tab to show; the current tab when absent."},
        "control": {"type": "boolean", "description": (
            "Whether the person who opens the link may act in the tab. Absent: what your policy gives (view-only "
            "under ask_before_act or read_only). true under ask_before_act asks the user's approval first (as a "
            "write does); under read_only it is refused. false: a view-only link.")},
        "confirm_token": dict(_CONFIRM_TOKEN),
    }, [])


_TASK_ID = {"type": "string", "minLength": 1, "description": "The task's id (t-...), as browser_task_create or "
                                                          "browser_task_get gave it."}


def _task_schema(**properties: dict[str, Any]) -> dict[str, Any]:
    return _object({"taskId": dict(_TASK_ID), **properties}, ["taskId"])


def _task_create_schema() -> dict[str, Any]:
    return _object({
        "goal": {"type": "string", "minLength": 1, "description": "What the task is to achieve, in a sentence."},
        "tabs": {"type": "array", "items": {"type": "integer"}, "uniqueItems": True,
                 "description": "Your open tabs the task works in (a tab is in one open task at most)."},
        "resume": {"enum": ["ask", "auto", "off"], "default": "ask",
                   "description": "What a takeover does with a call left in flight: ask returns its resume token "
                                  "for you to choose; auto resumes it where the resume rules allow (never past an "
                                  "approval); off gives the context alone."},
        "scope": {"enum": ["tab", "browser", "remote"], "default": "browser",
                  "description": "Where the task is shared: tab (one tab), browser (across your tabs) or remote."},
    }, ["goal"])


_SUMMARY = {"type": "string", "description": "Your summary of where the task stands (kept to 4 KiB). No secrets: "
                                            "token-shaped strings and values typed in the task become [redacted]."}

_TAKEOVER_DESCRIPTION = (
    "Take over a task of your agent: this session becomes its owner. Explicit and atomic (one attempt: a race lost "
    "answers task_takeover_conflict; read the task again, never retry blindly). A task whose owner is alive answers "
    "task_leased unless force is true (use it only when you know that session is gone); an expired one is taken "
    "without force; a completed or revoked one answers task_closed. The answer carries the checkpoint (context, "
    "not authority: what the old session saw and did), tabs (re-observed now: url, title, needs_user) and "
    "in_flight: the old session's calls whose outcome is unknown (session lost mid-execution). Look at the tabs "
    "before anything else: a call in flight may have taken effect or not. Resume one with browser_resume(call, "
    "resume_token, observed) only after you saw on the page whether it did; never retry a write blindly. With "
    "resume auto, a call that needed no observation was resumed (resumed); one that could not be carries "
    "not_resumed (why: observed_required lists its steps) and its resume_token. It may "
    "be held for approval like a write (confirm_token).")

_CORE = frozenset({"core"})
_AUTOMATION = frozenset({"automation"})

TOOLS: dict[str, ToolSpec] = {spec.name: spec for spec in [
    ToolSpec("browser_batch", _AUTOMATION,
             "Run browser commands in order on real Chromium tabs (see the command schema). A call that does not "
             "finish ok returns call and resume_token: continue it with browser_resume.",
             _container(batch_schema())),
    ToolSpec("browser_parallel", _AUTOMATION,
             "Run sequences of browser commands concurrently, each on its own tabs. A call that does not finish ok "
             "returns call and resume_token: continue it with browser_resume.",
             _container(parallel_schema())),
    ToolSpec("browser_workflow", _AUTOMATION,
             "Run a named workflow file of the bridge with variables. A call that does not finish ok returns call "
             "and resume_token: continue it with browser_resume.",
             _object({"workflow": {"type": "string", "description": "The workflow's name."},
                      "variables": {"type": "object", "description": "Values of the workflow's variables."},
                      **{k: v for k, v in _container(batch_schema())["properties"].items() if k != "commands"}},
                     ["workflow"])),
    ToolSpec("browser_resume", _CORE | _AUTOMATION,
             "Continue a call that stopped: a container call (browser_batch, browser_parallel, browser_workflow) "
             "from its checkpoint, or a direct call that stopped on needs_user from its held request. Nothing that "
             "ran ok is sent again.",
             _resume_schema()),
    ToolSpec("browser_navigate", _CORE, "Load a URL in a tab.", _direct("navigate", confirmable=True),
             confirmable=True),
    ToolSpec("browser_snapshot", _CORE,
             "The tab's accessibility tree as text; each element you can act on carries a ref (pass it as ref to "
             "the other tools instead of a selector). since=last answers only what changed. Bounded by maxChars.",
             _direct("snapshot", confirmable=False), read_only=True),
    ToolSpec("browser_click", _CORE, "Click the element a selector or ref names.",
             _direct("click", confirmable=True, extra=_SNAPSHOT_AFTER), confirmable=True),
    ToolSpec("browser_type", _CORE,
             "Type text into an element key by key; with submit, press Enter after it (a second request: a hold "
             "at the Enter resumes without typing again).",
             _direct("type", confirmable=True, extra=_SNAPSHOT_AFTER), confirmable=True),
    ToolSpec("browser_fill_form", _CORE,
             "Fill form fields in order, one request per field (a hold stops at its field and a resume restarts "
             "there).", _fill_form_schema(), confirmable=True),
    ToolSpec("browser_select", _CORE, "Choose options of a <select> by value or label.",
             _direct("select", confirmable=True, extra=_SNAPSHOT_AFTER), confirmable=True),
    ToolSpec("browser_press", _CORE, "Press a key or chord (Enter, Control+A) on an element or the page.",
             _direct("press", confirmable=True, extra=_SNAPSHOT_AFTER), confirmable=True),
    ToolSpec("browser_page_text", _CORE, "Read the visible text of the page or of one element.",
             _direct("pageText", confirmable=False), read_only=True),
    ToolSpec("browser_find", _CORE, "Find elements by selector or visible text.",
             _direct("find", confirmable=False), read_only=True),
    ToolSpec("browser_screenshot", _CORE, "Take a PNG screenshot of the viewport, the full page or one element.",
             _direct("screenshot", confirmable=False), read_only=True),
    ToolSpec("browser_tabs", _CORE,
             "List, open, select, close or take over tabs. A tab you open is yours and becomes current; writing "
             "to a user's tab needs a takeover first. A tab opens in one of your browser sessions (session).",
             _tabs_schema(), confirmable=True),
    ToolSpec("browser_sessions", _CORE,
             "List or close your browser sessions: each has its own cookies and storage, and its tabs. Closing one "
             "closes its tabs.", _sessions_schema()),
    ToolSpec("browser_ask_user", _CORE,
             "Ask the user something only a person can do or decide (sign in, solve a human check, choose). With a "
             "client prompt the user answers there; otherwise ask in your reply.", _ask_user_schema(),
             read_only=True),
    ToolSpec("browser_site_tools", _CORE,
             "List the tools the page in a tab declares itself (WebMCP, navigator.modelContext): name, description, "
             "input schema, and frame (\"main\", or \"iframe\" for a same-origin frame). They are the page's, "
             "not MCP tools: call one by its name with browser_call_site_tool.",
             _direct("siteTools", confirmable=False), read_only=True),
    ToolSpec("browser_call_site_tool", _CORE,
             "Call a tool the page declares (see browser_site_tools) by its name, with input its input schema "
             "accepts: a mismatch answers invalid_input with state.path and runs nothing. A tool that goes on "
             "across pages or frames is followed by the node to its end: you get the last output and the "
             "documents it crossed. An unknown outcome (status unknown: the page navigated mid-execution, a "
             "continuation expired, the tool threw or timed out) may have taken effect: observe the page or site "
             "first and call it again only if it did not, never blindly.",
             _direct("callSiteTool", confirmable=True, extra={"name": _described(
                 "callSiteTool", "name", "The tool's name, as browser_site_tools lists it.")}), confirmable=True),
    ToolSpec("browser_live_view", _CORE,
             "A Live View link to one of your tabs: a person opens it in their browser to see the tab live and act "
             "in it (sign in, pass a human check, fix a form). Show it to the user, then stop on an approval or "
             "browser_ask_user (or a browser_resume of a stop), and go on when they are done: their \"Done — hand "
             "back\" ends a waiting browser_ask_user or resume at once. The link works for 5 minutes, one person "
             "at a time; while they hold the tab, your writes to it answer tab_claimed. needs_user answers carry "
             "such a link already (live_view). The answer's control says whether the link acts or only shows the "
             "tab; under ask_before_act ask for control: true when the person must act (the user approves it).",
             _live_view_schema(), confirmable=True),  # not read-only: a link that acts lets a person write
    ToolSpec("browser_task_create", _CORE,
             "Start a task: a goal you work on in some of your tabs. This MCP session owns it: only the owner's writes "
             "reach its tabs, and its lease is renewed while this client runs. Other sessions of your agent follow: "
             "they read its tabs and state, their writes to its tabs answer task_leased. If this client is lost, a "
             "new session continues the task with an explicit browser_task_takeover. Checkpoint it as you go "
             "(browser_task_checkpoint) and complete it when done.", _task_create_schema()),
    ToolSpec("browser_task_get", _CORE,
             "Read a task: goal, tabs, lease, checkpoint, and its state for this session: owner (yours), follower "
             "(another live session owns it: read, do not write), expired (its owner is gone: take it over to go on), "
             "completed or revoked. Without taskId: your agent's tasks; after a reconnect, look here for the task you "
             "were doing.", _object({"taskId": dict(_TASK_ID)}, []), read_only=True),
    ToolSpec("browser_task_checkpoint", _CORE,
             "Owner only: record the task's progress. The node re-observes its first tab (URL, title, headings) and "
             "keeps its last steps and events with your summary: what a session taking the task over will read.",
             _task_schema(summary=dict(_SUMMARY))),
    ToolSpec("browser_task_complete", _CORE,
             "Owner only: mark the task completed, with a final summary. Its lease ends and its tabs are free.",
             _task_schema(summary=dict(_SUMMARY))),
    ToolSpec("browser_task_takeover", _CORE, _TAKEOVER_DESCRIPTION,
             _task_schema(force={"type": "boolean", "default": False,
                                 "description": "Take it even though its owner's lease is live (that session "
                                                "loses it)."},
                          confirm_token=dict(_CONFIRM_TOKEN)), confirmable=True),
]}
"""Every tool, by name."""


def enabled_tools(caps: frozenset[str]) -> list[ToolSpec]:
    """The tools of the enabled capability groups, in a stable order."""
    return [spec for spec in TOOLS.values() if spec.groups & caps]
