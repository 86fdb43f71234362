"""The command language: typed, immutable commands parsed and validated from JSON.

A command is ``{"action": ..., params}``; every action and block of the contract has its own
frozen dataclass (``_actions``, ``_blocks``). :func:`parse_call` validates a whole call before
anything runs and rejects it whole, naming the path of the bad command (``"0.1.3"``) and what is
wrong (``_parse``, ``_coerce``). :func:`children` is the one walk over the commands inside a
block (``_tree``); each command knows whether it writes (:func:`is_write`), exactly as the spec
lists writes.
"""

from messages.commands._actions import (
    MAX_JS,
    MAX_KEY,
    MAX_NAME,
    MAX_NODE_NAME,
    MAX_REF,
    MAX_REFERENCE,
    MAX_SELECTOR,
    MAX_SESSION_NAME,
    MAX_SNAPSHOT_CHARS,
    MAX_TAB_ID,
    MAX_TEXT,
    MAX_URL,
    NODE_NAME,
    REF,
    SESSION_NAME,
    SITE_TOOL_NAME,
    CallSiteTool,
    Check,
    Click,
    Clipboard,
    ClipboardOp,
    Command,
    Cookie,
    Cookies,
    Download,
    Fill,
    Find,
    Flag,
    Integer,
    Js,
    Navigate,
    Number,
    PageText,
    Press,
    Screenshot,
    Select,
    SiteTools,
    Snapshot,
    Storage,
    SubmitForm,
    SyncBarrier,
    Text,
    Title,
    Type,
    Url,
    WaitFor,
    WaitForResult,
)
from messages.commands._blocks import (
    ACTIONS,
    BLOCKS,
    ENGINE_STEPS,
    Broadcast,
    If,
    Parallel,
    Retry,
    Sequence,
    Try,
    While,
)
from messages.commands._cdp import Cdp, CdpEvents, CdpSpec
from messages.commands._forms import audit_params, command_to_json, own_references, resolve_command
from messages.commands._params import Param, parameters
from messages.commands._parse import CallKind, CallSpec, Limits, parse_body, parse_call, parse_command, whole_param
from messages.commands._tabs import CloseTab, GetTabs, KeepSession, NewTab, ResetSession, SwitchTab
from messages.commands._tree import Child, children, is_write, leaf_paths, secret_values, tabs_named

__all__ = [
    "ACTIONS", "BLOCKS", "ENGINE_STEPS", "MAX_JS", "MAX_KEY", "MAX_NAME", "MAX_NODE_NAME", "MAX_REF", "MAX_REFERENCE",
    "MAX_SELECTOR", "MAX_SNAPSHOT_CHARS",
    "MAX_SESSION_NAME", "MAX_TAB_ID", "MAX_TEXT", "MAX_URL", "NODE_NAME", "REF", "SESSION_NAME",
    "SITE_TOOL_NAME", "Broadcast", "CallKind", "CallSiteTool", "CallSpec", "Cdp", "CdpEvents", "CdpSpec", "Check",
    "Child", "Click", "Clipboard",
    "ClipboardOp", "CloseTab", "Command", "Cookie", "Cookies", "Download", "Fill", "Find", "Flag", "GetTabs",
    "If", "Integer", "Js", "KeepSession", "Limits", "Navigate", "NewTab", "Number", "PageText", "Parallel", "Param",
    "Press", "ResetSession", "Retry", "Screenshot", "Select", "Sequence", "Snapshot", "SiteTools", "Storage",
    "SubmitForm", "SwitchTab",
    "SyncBarrier", "Text", "Title", "Try", "Type", "Url", "WaitFor", "WaitForResult", "While",
    "audit_params", "children", "command_to_json", "is_write", "leaf_paths", "own_references", "parameters",
    "parse_body", "parse_call", "parse_command", "resolve_command", "secret_values", "tabs_named", "whole_param",
]
