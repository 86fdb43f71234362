"""The command language: typed, immutable commands parsed and validated from JSON.

A command is ``{"action": ..., params}``; every action and block of the contract has its own
frozen dataclass here. :func:`parse_call` validates a whole call before anything runs and
rejects it whole, naming the path of the bad command (``"0.1.3"``) and what is wrong.
Each command knows whether it writes (:func:`is_write`), exactly as the spec lists writes.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypedDict, Union

from messages.contract import CALL_TIMEOUT, MAX_CALL_TIMEOUT, MAX_STEP_TIMEOUT
from messages.errors import KitsuneError, invalid_call
from messages.references import Ref, Template, parse_references, references_in, resolve

__all__ = [
    "ACTIONS", "BLOCKS", "MAX_JS", "MAX_KEY", "MAX_NAME", "MAX_REFERENCE", "MAX_SELECTOR",
    "MAX_TEXT", "MAX_URL", "Broadcast", "CallKind", "CallSpec", "Check", "Click", "ClipboardOp",
    "CloseTab", "Command", "Cookie", "Cookies", "Download", "Fill", "Find", "Flag", "GetTabs", "If",
    "Integer", "Js", "Limits", "Navigate", "NewTab", "Number", "PageText", "Parallel", "Press",
    "Retry", "Screenshot", "Select", "Sequence", "Storage", "SubmitForm", "SwitchTab",
    "SyncBarrier", "Text", "Title", "Try", "Type", "Url", "WaitFor", "WaitForResult", "While",
    "Param", "audit_params", "children_of", "command_to_json", "is_write", "own_references", "parameters", "parse_body",
    "parse_call", "parse_command", "resolve_command", "secret_values",
]

Text = str | Template | Ref
"""A string parameter; may hold references."""
Integer = int | Ref
"""An integer parameter, or one whole reference."""
Number = float | Ref
"""A number of seconds or similar, or one whole reference."""
Flag = bool | Ref
"""A boolean parameter, or one whole reference."""
CallKind = Literal["batch", "parallel", "workflow"]

# Bounds of every parameter, checked before anything runs (a string's in characters).
MAX_SELECTOR = 4096
"""Selectors, a ``find``'s text and ``select`` option values."""
MAX_URL = 8192
"""URLs and URL globs, and each string of a cookie."""
MAX_TEXT = 262_144
"""Typed text and values: ``type``, ``fill``, storage and clipboard values."""
MAX_JS = 65_536
"""JavaScript bodies: ``js``, ``waitForResult``, the conditions of ``if`` and ``while``."""
MAX_KEY = 1024
"""Key names: ``press`` keys and storage keys."""
MAX_NAME = 256
"""Labels and barrier names."""
MAX_REFERENCE = 256
"""A whole ``${$N...}`` reference given where a number, a boolean or a tab id goes."""


def _param(doc: str, default: Any = dataclasses.MISSING, **meta: Any) -> Any:
    """A parameter field: ``doc`` for the schema, ``secret``/``javascript`` for redaction."""
    return field(default=default, metadata={"doc": doc, **meta})


@dataclass(frozen=True, kw_only=True, slots=True)
class Command:
    """Base of every command: the parameters any action takes."""

    action: ClassVar[str]
    writes: ClassVar[bool] = True
    acts_on_tab: ClassVar[bool] = True

    tab_id: Integer | None = _param("Tab to act on; the call's default tab when absent.", None)
    timeout: Number | None = _param("Seconds this command may take (default 30).", None, minimum=0,
                                    maximum=MAX_STEP_TIMEOUT)
    label: str | None = _param("A name for this step, shown in a workflow's steps.", None, max_length=MAX_NAME)


# --- actions -------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Navigate(Command):
    """Go to a URL in the tab."""

    action = "navigate"
    url: Text = _param("The http(s) URL or about:blank to load.", max_length=MAX_URL)
    wait_until: Literal["load", "domcontentloaded", "networkidle", "commit"] = _param(
        "When navigation counts as done.", "load"
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Click(Command):
    """Click the element a selector finds."""

    action = "click"
    selector: Text = _param("CSS or Playwright selector of the element.", max_length=MAX_SELECTOR)
    button: Literal["left", "right", "middle"] = _param("Mouse button.", "left")
    click_count: int = _param("Number of clicks (2 for a double click).", 1, minimum=1, maximum=3)


@dataclass(frozen=True, kw_only=True, slots=True)
class Type(Command):
    """Type text into an element key by key, optionally pressing Enter after."""

    action = "type"
    selector: Text = _param("Element to type into.", max_length=MAX_SELECTOR)
    text: Text = _param("The text to type (a typed value: redacted everywhere).", secret=True, max_length=MAX_TEXT)
    submit: Flag = _param("Press Enter after typing.", False)


@dataclass(frozen=True, kw_only=True, slots=True)
class Fill(Command):
    """Replace the value of an input, textarea or contenteditable."""

    action = "fill"
    selector: Text = _param("Element to fill.", max_length=MAX_SELECTOR)
    value: Text = _param("The value (a typed value: redacted everywhere).", secret=True, max_length=MAX_TEXT)


@dataclass(frozen=True, kw_only=True, slots=True)
class Select(Command):
    """Choose options of a <select> by value or label."""

    action = "select"
    selector: Text = _param("The <select> element.", max_length=MAX_SELECTOR)
    values: tuple[Text, ...] = _param("Option values or labels to select.", min_items=1,
                                        max_length=MAX_SELECTOR)


@dataclass(frozen=True, kw_only=True, slots=True)
class Press(Command):
    """Press a key or chord (``Enter``, ``Control+A``), on an element or the page."""

    action = "press"
    key: Text = _param("Key name as Playwright spells it.", max_length=MAX_KEY)
    selector: Text | None = _param("Element to focus first; the focused element when absent.", None,
                                   max_length=MAX_SELECTOR)


@dataclass(frozen=True, kw_only=True, slots=True)
class Check(Command):
    """Check or uncheck a checkbox or radio button."""

    action = "check"
    selector: Text = _param("The checkbox or radio button.", max_length=MAX_SELECTOR)
    checked: Flag = _param("True to check, false to uncheck.", True)


@dataclass(frozen=True, kw_only=True, slots=True)
class SubmitForm(Command):
    """Submit a form (as its submit button would)."""

    action = "submitForm"
    selector: Text = _param("The form, or an element inside it.", "form", max_length=MAX_SELECTOR)


@dataclass(frozen=True, kw_only=True, slots=True)
class PageText(Command):
    """Read the visible text of the page or of one element."""

    action = "pageText"
    writes = False
    selector: Text | None = _param("Element to read; the whole page when absent.", None, max_length=MAX_SELECTOR)
    max_chars: int = _param("Longest text returned.", 20000, minimum=1, maximum=1_000_000)


@dataclass(frozen=True, kw_only=True, slots=True)
class Find(Command):
    """Find elements by selector or visible text."""

    action = "find"
    writes = False
    selector: Text | None = _param("CSS or Playwright selector.", None, max_length=MAX_SELECTOR)
    text: Text | None = _param("Visible text to look for.", None, max_length=MAX_SELECTOR)
    limit: int = _param("Most matches returned.", 20, minimum=1, maximum=500)

    def check(self, path: str) -> None:
        if self.selector is None and self.text is None:
            raise invalid_call("missing_parameter", path, "find needs selector or text", param="selector")


@dataclass(frozen=True, kw_only=True, slots=True)
class Url(Command):
    """Read the tab's current URL."""

    action = "url"
    writes = False


@dataclass(frozen=True, kw_only=True, slots=True)
class Title(Command):
    """Read the page title."""

    action = "title"
    writes = False


@dataclass(frozen=True, kw_only=True, slots=True)
class Screenshot(Command):
    """Take a PNG screenshot of the viewport, the full page or one element."""

    action = "screenshot"
    writes = False
    selector: Text | None = _param("Element to capture.", None, max_length=MAX_SELECTOR)
    full_page: Flag = _param("Capture the whole scrollable page.", False)


@dataclass(frozen=True, kw_only=True, slots=True)
class WaitFor(Command):
    """Wait for an element state, a URL or a load state."""

    action = "waitFor"
    writes = False
    selector: Text | None = _param("Element to wait for.", None, max_length=MAX_SELECTOR)
    state: Literal["attached", "detached", "visible", "hidden"] = _param("Element state.", "visible")
    url: Text | None = _param("URL (glob) to wait for.", None, max_length=MAX_URL)
    load_state: Literal["load", "domcontentloaded", "networkidle"] | None = _param("Load state.", None)

    def check(self, path: str) -> None:
        if self.selector is None and self.url is None and self.load_state is None:
            raise invalid_call(
                "missing_parameter", path, "waitFor needs selector, url or loadState", param="selector"
            )


@dataclass(frozen=True, kw_only=True, slots=True)
class Js(Command):
    """Run agent JavaScript in the page and return its (JSON) value."""

    action = "js"
    code: Text = _param("A JavaScript expression or function body (dropped from every log).", javascript=True,
                        max_length=MAX_JS)


@dataclass(frozen=True, kw_only=True, slots=True)
class WaitForResult(Command):
    """Evaluate agent JavaScript until it returns a truthy value."""

    action = "waitForResult"
    code: Text = _param("A JavaScript expression (dropped from every log).", javascript=True, max_length=MAX_JS)
    interval: Number = _param("Seconds between evaluations.", 0.25, minimum=0.01, maximum=60)


@dataclass(frozen=True, kw_only=True, slots=True)
class SyncBarrier(Command):
    """Wait until every sequence of the parallel that names this barrier reaches it."""

    action = "syncBarrier"
    acts_on_tab = False
    barrier: str = _param("Barrier name; sequences meet at barriers of the same name.",
                                 max_length=MAX_NAME)


@dataclass(frozen=True, kw_only=True, slots=True)
class NewTab(Command):
    """Open a tab (in its own window); its result carries ``tabId``."""

    action = "newTab"
    acts_on_tab = False
    url: Text | None = _param("URL to open; about:blank when absent.", None, max_length=MAX_URL)


@dataclass(frozen=True, kw_only=True, slots=True)
class CloseTab(Command):
    """Close the tab ``tabId`` (the default tab when absent)."""

    action = "closeTab"


@dataclass(frozen=True, kw_only=True, slots=True)
class SwitchTab(Command):
    """Make ``tabId`` the current tab and bring its window to the front."""

    action = "switchTab"


@dataclass(frozen=True, kw_only=True, slots=True)
class GetTabs(Command):
    """List the open tabs with their ids, URLs and titles."""

    action = "getTabs"
    writes = False
    acts_on_tab = False


class _CookieName(TypedDict):
    name: str
    value: str


class Cookie(_CookieName, total=False):
    """A cookie to set, with the fields Playwright takes; each string at most :data:`MAX_URL`."""

    url: str
    domain: str
    path: str
    expires: float
    httpOnly: bool
    secure: bool
    sameSite: Literal["Lax", "None", "Strict"]
    partitionKey: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Cookies(Command):
    """Read, set or clear the cookies of the tab's context."""

    action = "cookies"
    op: Literal["get", "set", "clear"] = _param("What to do.", "get")
    cookies: tuple[Cookie, ...] = _param(
        "Cookies to set ({name, value, url|domain, path, ...}; values are redacted).", (), secret=True,
        max_length=MAX_URL,
    )

    def check(self, path: str) -> None:
        if self.op == "set" and not self.cookies:
            raise invalid_call("missing_parameter", path, "cookies op=set needs cookies", param="cookies")


@dataclass(frozen=True, kw_only=True, slots=True)
class Storage(Command):
    """Read or change the page's localStorage or sessionStorage."""

    action = "storage"
    op: Literal["get", "set", "remove", "clear"] = _param("What to do.", "get")
    area: Literal["local", "session"] = _param("Which storage.", "local")
    key: Text | None = _param("The key; all keys for get when absent.", None, max_length=MAX_KEY)
    value: Text | None = _param("Value to set (redacted everywhere).", None, secret=True, max_length=MAX_TEXT)

    def check(self, path: str) -> None:
        if self.op in ("set", "remove") and self.key is None:
            raise invalid_call("missing_parameter", path, f"storage op={self.op} needs key", param="key")
        if self.op == "set" and self.value is None:
            raise invalid_call("missing_parameter", path, "storage op=set needs value", param="value")


ClipboardOp = Literal["read", "write"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Clipboard(Command):
    """Read or write the clipboard of the tab's page."""

    action = "clipboard"
    op: ClipboardOp = _param("What to do.", "read")
    text: Text | None = _param("Text to write (redacted everywhere).", None, secret=True, max_length=MAX_TEXT)

    def check(self, path: str) -> None:
        if self.op == "write" and self.text is None:
            raise invalid_call("missing_parameter", path, "clipboard op=write needs text", param="text")


@dataclass(frozen=True, kw_only=True, slots=True)
class Download(Command):
    """Click an element that starts a download and save the file; returns name, size, SHA-256."""

    action = "download"
    selector: Text = _param("Element whose click starts the download.", max_length=MAX_SELECTOR)


# --- blocks --------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Sequence(Command):
    """Steps run in order, stopping at the first that is not ok; resumed step by step."""

    action = "sequence"
    acts_on_tab = False
    steps: tuple[Command, ...] = _param("The steps.", min_items=1)


@dataclass(frozen=True, kw_only=True, slots=True)
class Parallel(Command):
    """Sequences run concurrently, each on its own tabs; resumed sequence by sequence."""

    action = "parallel"
    acts_on_tab = False
    sequences: tuple[tuple[Command, ...], ...] = _param("The sequences, each a list of steps.")


@dataclass(frozen=True, kw_only=True, slots=True)
class If(Command):
    """Run ``then`` when a JavaScript condition is truthy, else ``else``."""

    action = "if"
    condition: Text = _param("JavaScript expression evaluated in the tab.", javascript=True, max_length=MAX_JS)
    then: tuple[Command, ...] = _param("Steps when the condition holds.", min_items=1)
    otherwise: tuple[Command, ...] = _param("Steps when it does not.", (), json_name="else")


@dataclass(frozen=True, kw_only=True, slots=True)
class While(Command):
    """Repeat ``body`` while a JavaScript condition is truthy, at most ``maxIterations`` times."""

    action = "while"
    condition: Text = _param("JavaScript expression evaluated before each iteration.", javascript=True,
                             max_length=MAX_JS)
    body: tuple[Command, ...] = _param("Steps of one iteration.", min_items=1)
    max_iterations: int = _param("Iteration bound; reaching it fails the block.", 100, minimum=1, maximum=1000)


@dataclass(frozen=True, kw_only=True, slots=True)
class Try(Command):
    """Run ``body``; when one of its steps fails, run ``catch`` instead of failing."""

    action = "try"
    body: tuple[Command, ...] = _param("Steps to try.", min_items=1)
    catch: tuple[Command, ...] = _param("Steps run when a body step fails; none means the try fails.", ())


@dataclass(frozen=True, kw_only=True, slots=True)
class Retry(Command):
    """Run ``body`` again after a failure that sent nothing or is retryable."""

    action = "retry"
    body: tuple[Command, ...] = _param("Steps to run.", min_items=1)
    attempts: int = _param("Attempts in all.", 3, minimum=1, maximum=10)
    delay: Number = _param("Seconds between attempts.", 1.0, minimum=0, maximum=60)


@dataclass(frozen=True, kw_only=True, slots=True)
class Broadcast(Command):
    """Run one command on several tabs."""

    action = "broadcast"
    acts_on_tab = False
    tab_ids: tuple[Integer, ...] = _param("Tabs to run the command on.", min_items=1)
    command: Command = _param("The command; it names no tabId of its own.")

    def check(self, path: str) -> None:
        if self.command.tab_id is not None:
            raise invalid_call("invalid_parameter", path, "a broadcast command names no tabId", param="command")
        if isinstance(self.command, BLOCKS):
            raise invalid_call("invalid_parameter", path, "broadcast runs one action, not a block", param="command")


BLOCKS = (Sequence, Parallel, If, While, Try, Retry, Broadcast)
ACTIONS: Mapping[str, type[Command]] = {
    cls.action: cls
    for cls in (
        Navigate, Click, Type, Fill, Select, Press, Check, SubmitForm, PageText, Find, Url, Title,
        Screenshot, WaitFor, Js, WaitForResult, SyncBarrier, NewTab, CloseTab, SwitchTab, GetTabs,
        Cookies, Storage, Clipboard, Download, *BLOCKS,
    )
}


def is_write(command: Command) -> bool:
    """Whether sending ``command`` again could change something (spec: What each step does)."""
    if isinstance(command, Sequence | Try | Retry):
        return any(is_write(child) for child in children_of(command))
    if isinstance(command, Parallel):
        return any(is_write(child) for seq in command.sequences for child in seq)
    return command.writes


def children_of(command: Command) -> tuple[Command, ...]:
    """The commands directly inside a block, in order (none for an action)."""
    if isinstance(command, Sequence):
        return command.steps
    if isinstance(command, Parallel):
        return tuple(step for seq in command.sequences for step in seq)
    if isinstance(command, If):
        return (*command.then, *command.otherwise)
    if isinstance(command, While | Try | Retry):
        return (*command.body, *(command.catch if isinstance(command, Try) else ()))
    if isinstance(command, Broadcast):
        return (command.command,)
    return ()


def secret_values(command: Command) -> list[str]:
    """The literal typed values and JavaScript bodies in ``command`` and its children."""
    found: list[str] = []
    for param in _PARAMS[type(command)]:
        if param.secret or param.javascript:
            found.extend(_strings(getattr(command, param.name)))
    for child in children_of(command):
        found.extend(secret_values(child))
    return [value for value in found if value]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Template):
        yield from (part for part in value.parts if isinstance(part, str))
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield str(value)


# --- parameters ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter of a command: its Python and JSON names, type, default and metadata."""

    name: str
    json_name: str
    type: Any
    required: bool
    default: Any
    meta: Mapping[str, Any]

    @property
    def secret(self) -> bool:
        return bool(self.meta.get("secret"))

    @property
    def javascript(self) -> bool:
        return bool(self.meta.get("javascript"))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _params_of(cls: type[Command]) -> tuple[Param, ...]:
    hints = typing.get_type_hints(cls)
    return tuple(
        Param(
            name=f.name,
            json_name=f.metadata.get("json_name", _camel(f.name)),
            type=hints[f.name],
            required=f.default is dataclasses.MISSING,
            default=None if f.default is dataclasses.MISSING else f.default,
            meta=f.metadata,
        )
        for f in dataclasses.fields(cls)
    )


_PARAMS: dict[type[Command], tuple[Param, ...]] = {cls: _params_of(cls) for cls in ACTIONS.values()}


def parameters(cls: type[Command]) -> tuple[Param, ...]:
    """The parameters an action or block takes, as the parser and the JSON Schema see them."""
    return _PARAMS[cls]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on a call, checked before anything runs."""

    max_commands: int = 1000
    """Commands in a call, blocks and their steps included."""
    max_depth: int = 8
    """Nesting of blocks; a top-level command is depth 1."""


# --- parsing -------------------------------------------------------------------------------


class _Counter:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.seen = 0

    def add(self, path: str, depth: int) -> None:
        self.seen += 1
        if self.seen > self.limits.max_commands:
            raise invalid_call(
                "too_many_commands", path, f"a call may hold at most {self.limits.max_commands} commands"
            )
        if depth > self.limits.max_depth:
            raise invalid_call("too_deep", path, f"blocks nest at most {self.limits.max_depth} deep")


def parse_command(raw: Any, path: str = "0", limits: Limits = Limits()) -> Command:
    """Parse and validate one command (references are checked by :func:`parse_call`)."""
    return _parse_command(raw, path, 1, _Counter(limits))


def _parse_command(raw: Any, path: str, depth: int, counter: _Counter) -> Command:
    counter.add(path, depth)
    if not isinstance(raw, dict):
        raise invalid_call("invalid_call", path, f"a command is a JSON object, not {_json_type(raw)}")
    action = raw.get("action")
    if not isinstance(action, str):
        raise invalid_call("missing_parameter", path, "the command has no action", param="action")
    cls = ACTIONS.get(action)
    if cls is None:
        raise invalid_call("unknown_action", path, f"unknown action {action!r}", action=action)
    if cls is Parallel and depth > 1:
        raise invalid_call("invalid_call", path, "a parallel runs only as a top-level command")
    params = _PARAMS[cls]
    known = {p.json_name for p in params}
    for key in raw:
        if key != "action" and key not in known:
            raise invalid_call("unknown_parameter", path, f"{action} takes no parameter {key!r}", param=key)
    values: dict[str, Any] = {}
    for param in params:
        if param.json_name not in raw or (raw[param.json_name] is None and not param.required):
            if param.required:
                raise invalid_call(
                    "missing_parameter", path, f"{action} needs {param.json_name}", param=param.json_name
                )
            continue
        values[param.name] = _parse_param(param, raw[param.json_name], path, depth, counter)
    command = cls(**values)
    check = getattr(command, "check", None)
    if check is not None:
        check(path)
    return command


def _parse_param(param: Param, raw: Any, path: str, depth: int, counter: _Counter) -> Any:
    if param.type == tuple[Command, ...]:
        return _parse_steps(raw, param, path, f"{path}.{param.json_name}", depth, counter)
    if param.type == tuple[tuple[Command, ...], ...]:
        if not isinstance(raw, list) or not raw:
            raise invalid_call("empty_parallel", path, "a parallel needs at least one sequence", param=param.json_name)
        sequences = []
        for s, seq in enumerate(raw):
            if not isinstance(seq, list) or not seq:
                raise invalid_call("empty_parallel", f"{path}.{s}", "each sequence of a parallel needs a step")
            sequences.append(
                tuple(_parse_command(c, f"{path}.{s}.{i}", depth + 1, counter) for i, c in enumerate(seq))
            )
        return tuple(sequences)
    if param.type is Command:
        return _parse_command(raw, f"{path}.{param.json_name}", depth + 1, counter)
    try:
        value = _checked(param, param.type, raw)
    except ValueError as e:
        code = "bad_reference" if "reference" in str(e) else "invalid_parameter"
        raise invalid_call(code, path, f"{param.json_name}: {e}", param=param.json_name) from None
    return value


def _parse_steps(raw: Any, param: Param, path: str, prefix: str, depth: int, counter: _Counter) -> Any:
    if not isinstance(raw, list):
        raise invalid_call("invalid_parameter", path, f"{param.json_name}: expected a list of commands",
                           param=param.json_name)
    if not raw and param.meta.get("min_items"):
        raise invalid_call("invalid_parameter", path, f"{param.json_name}: needs at least one command",
                           param=param.json_name)
    step_prefix = path if param.json_name == "steps" else prefix
    return tuple(_parse_command(c, f"{step_prefix}.{i}", depth + 1, counter) for i, c in enumerate(raw))


def _checked(param: Param, tp: Any, raw: Any) -> Any:
    """``raw`` as a value of ``tp`` within the parameter's bounds; ``ValueError`` saying what is wrong."""
    limit = param.meta.get("max_length", MAX_REFERENCE)
    if any(len(text) > limit for text in _raw_strings(raw)):
        raise ValueError(f"longer than {limit} characters")
    value = _coerce(tp, raw)
    if isinstance(value, int | float) and not isinstance(value, bool):
        low, high = param.meta.get("minimum"), param.meta.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            raise ValueError(f"{value} is outside {low}..{high}")
    if isinstance(value, tuple) and len(value) < param.meta.get("min_items", 0):
        raise ValueError("needs at least one item")
    return value


def _raw_strings(raw: Any) -> Iterator[str]:
    """The strings of a JSON value: itself, its items, an object's values."""
    if isinstance(raw, str):
        yield raw
    elif isinstance(raw, list | dict):
        for item in raw.values() if isinstance(raw, dict) else raw:
            yield from _raw_strings(item)


def _coerce(tp: Any, raw: Any) -> Any:
    """Check ``raw`` against a parameter type; raise ``ValueError`` saying what was expected."""
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        members = typing.get_args(tp)
        if isinstance(raw, str) and "${$" in raw and (Ref in members or Template in members):
            return _reference(raw, allow_template=Template in members)
        errors = []
        for member in members:
            if member in (Ref, Template):
                continue
            try:
                return _coerce(member, raw)
            except ValueError as e:
                errors.append(str(e))
        raise ValueError(" or ".join(dict.fromkeys(errors)))
    if origin is Literal:
        if raw in typing.get_args(tp):
            return raw
        raise ValueError("expected one of " + ", ".join(repr(a) for a in typing.get_args(tp)))
    if origin is tuple:
        if not isinstance(raw, list):
            raise ValueError(f"expected a list, got {_json_type(raw)}")
        return tuple(_coerce(typing.get_args(tp)[0], item) for item in raw)
    if typing.is_typeddict(tp):
        return _typed_dict(tp, raw)
    if tp is type(None):
        if raw is not None:
            raise ValueError(f"expected null, got {_json_type(raw)}")
        return None
    if tp is str:
        if not isinstance(raw, str):
            raise ValueError(f"expected a string, got {_json_type(raw)}")
        if "${$" in raw:
            raise ValueError("references are not allowed in this parameter")
        return raw
    if tp is bool:
        if not isinstance(raw, bool):
            raise ValueError(f"expected a boolean, got {_json_type(raw)}")
        return raw
    if tp is int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise ValueError(f"expected an integer, got {_json_type(raw)}")
        return raw
    if tp is float:
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise ValueError(f"expected a number, got {_json_type(raw)}")
        if not math.isfinite(raw):
            raise ValueError("expected a finite number")
        return float(raw)
    raise TypeError(f"no parser for parameter type {tp!r}")  # pragma: no cover - a bug in this module


def _typed_dict(tp: Any, raw: Any) -> dict[str, Any]:
    """An object with exactly the fields of the TypedDict ``tp``, each of its type."""
    if not isinstance(raw, dict):
        raise ValueError(f"expected an object, got {_json_type(raw)}")
    fields = typing.get_type_hints(tp)
    if not set(raw) <= set(fields):
        raise ValueError("an object takes only " + ", ".join(fields))
    missing = [name for name in fields if name in tp.__required_keys__ and name not in raw]
    if missing:
        raise ValueError(f"an object needs {missing[0]}")
    out = {}
    for name, item in raw.items():
        try:
            out[name] = _coerce(fields[name], item)
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from None
    return out


def _reference(raw: str, *, allow_template: bool) -> Ref | Template:
    try:
        parsed = parse_references(raw)
    except ValueError as e:
        raise ValueError(f"bad reference: {e}") from None
    if isinstance(parsed, Template) and not allow_template:
        raise ValueError("bad reference: this parameter takes one whole ${$N...} reference")
    assert not isinstance(parsed, str)
    return parsed


def _json_type(raw: Any) -> str:
    if raw is None:
        return "null"
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "an object"}.get(type(raw), type(raw).__name__)


# --- references ----------------------------------------------------------------------------


def _check_references(commands: tuple[Command, ...], prefix: str) -> None:
    """Every ``${$N...}`` names an earlier step of its own list (a batch or a sequence)."""
    for index, command in enumerate(commands):
        path = f"{prefix}{index}"
        _check_command_references(command, index, path)


def own_references(command: Command) -> list[tuple[str, Ref]]:
    """(parameter, reference) for the references in ``command``'s own parameters, not its children's."""
    return [(param.json_name, ref) for param in _PARAMS[type(command)]
            for ref in references_in(getattr(command, param.name))]


def _check_command_references(command: Command, index: int, path: str) -> None:
    for name, ref in own_references(command):
        if ref.step >= index:
            raise invalid_call(
                "bad_reference", path,
                f"{name}: {ref} must name an earlier step (0..{index - 1})" if index
                else f"{name}: {ref} names no earlier step",
                param=name,
            )
    if isinstance(command, Sequence):
        _check_references(command.steps, f"{path}.")
    elif isinstance(command, Parallel):
        for s, seq in enumerate(command.sequences):
            _check_references(seq, f"{path}.{s}.")
    else:  # a block's children name steps of the list the block is in; paths as the parser gives them
        for param in _PARAMS[type(command)]:
            value = getattr(command, param.name)
            if isinstance(value, Command):
                _check_command_references(value, index, f"{path}.{param.json_name}")
            elif param.type == tuple[Command, ...]:
                for i, child in enumerate(value):
                    _check_command_references(child, index, f"{path}.{param.json_name}.{i}")


# --- calls ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CallSpec:
    """A validated container call: what to run and how."""

    kind: CallKind
    """batch, parallel (one parallel command) or workflow."""
    commands: tuple[Command, ...]
    """The top-level commands."""
    default_tab: int | None = None
    """Tab for steps that name none (the caller's current tab)."""
    stop_on_warning: bool = False
    """Stop at a step that succeeded with a warning."""
    timeout: float = CALL_TIMEOUT
    """The container deadline in seconds (``container_timeout``)."""


def parse_call(
    kind: CallKind,
    commands: Any,
    *,
    default_tab: Any = None,
    stop_on_warning: Any = False,
    timeout: Any = CALL_TIMEOUT,
    limits: Limits = Limits(),
    max_timeout: float = MAX_CALL_TIMEOUT,
) -> CallSpec:
    """Parse and validate a whole call; raise :class:`KitsuneError` naming the bad path."""
    if not isinstance(commands, list) or not commands:
        raise invalid_call("invalid_call", "", "commands must be a non-empty list")
    if default_tab is not None and (isinstance(default_tab, bool) or not isinstance(default_tab, int)):
        raise invalid_call("invalid_parameter", "", "tabId must be an integer", param="tabId")
    if not isinstance(stop_on_warning, bool):
        raise invalid_call("invalid_parameter", "", "stopOnWarning must be a boolean", param="stopOnWarning")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= max_timeout:
        raise invalid_call("invalid_parameter", "", f"timeout must be a number in (0, {max_timeout}]",
                           param="timeout")
    counter = _Counter(limits)
    parsed = tuple(_parse_command(raw, str(i), 1, counter) for i, raw in enumerate(commands))
    _check_references(parsed, "")
    return CallSpec(kind, parsed, default_tab, stop_on_warning, float(timeout))


def command_to_json(command: Command) -> dict[str, Any]:
    """The command in the command language; ``parse_command`` of it gives ``command`` back."""
    out: dict[str, Any] = {"action": command.action}
    for param in _PARAMS[type(command)]:
        value = getattr(command, param.name)
        if not param.required and value == param.default:
            continue
        out[param.json_name] = _value_to_json(value)
    return out


def _value_to_json(value: Any) -> Any:
    if isinstance(value, Command):
        return command_to_json(value)
    if isinstance(value, Ref | Template):
        return str(value)
    if isinstance(value, tuple):
        return [_value_to_json(item) for item in value]
    return value


def resolve_command(command: Command, result_of: Callable[[int], Any]) -> Command:
    """``command`` with the references of its own parameters replaced by their values.

    Commands inside a block are left as they are: they resolve when they run. Raises
    :class:`KitsuneError` (``reference_unresolved``, ``invalid_parameter``) when a reference
    cannot be followed or gives a value of the wrong type.
    """
    changes: dict[str, Any] = {}
    for param in _PARAMS[type(command)]:
        value = getattr(command, param.name)
        if not any(True for _ in references_in(value)):
            continue
        resolved = resolve(value, result_of)
        try:
            changes[param.name] = _checked(param, _without_references(param.type), _plain(resolved))
        except ValueError as e:
            raise KitsuneError(
                "invalid_parameter", f"{param.json_name}: the referenced value is not valid: {e}",
                state={"param": param.json_name},
            ) from None
    return dataclasses.replace(command, **changes) if changes else command


def _without_references(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        members = [_without_references(m) for m in typing.get_args(tp) if m not in (Ref, Template)]
        return Union[tuple(members)] if len(members) > 1 else members[0]  # noqa: UP007
    if origin is tuple:
        return tuple[_without_references(typing.get_args(tp)[0]), ...]  # type: ignore[misc]
    return tp


def _plain(value: Any) -> Any:
    """Resolved values as JSON would give them (tuples back to lists) for :func:`_coerce`."""
    return [_plain(v) for v in value] if isinstance(value, tuple) else value


_BODY_KEYS = {"batch": {"commands", "tabId", "stopOnWarning", "timeout"},
              "parallel": {"sequences", "tabId", "stopOnWarning", "timeout"}}


def parse_body(kind: Literal["batch", "parallel"], body: Any, limits: Limits = Limits()) -> CallSpec:
    """Parse a batch (``{"commands", ...}``) or parallel (``{"sequences", ...}``) call body."""
    if not isinstance(body, dict):
        raise invalid_call("invalid_call", "", f"a {kind} body is a JSON object, not {_json_type(body)}")
    unknown = sorted(set(body) - _BODY_KEYS[kind])
    if unknown:
        raise invalid_call("unknown_parameter", "", f"a {kind} body takes no {unknown[0]!r}", param=unknown[0])
    options = {"default_tab": body.get("tabId"), "stop_on_warning": body.get("stopOnWarning", False),
               "timeout": body.get("timeout", CALL_TIMEOUT), "limits": limits}
    if kind == "batch":
        return parse_call("batch", body.get("commands"), **options)
    sequences = body.get("sequences")
    if not isinstance(sequences, list) or not sequences:
        raise invalid_call("empty_parallel", "", "a parallel needs at least one sequence", param="sequences")
    return parse_call("parallel", [{"action": "parallel", "sequences": sequences}], **options)


def audit_params(command: Command) -> dict[str, Any]:
    """The command's parameters as the audit log keeps them: typed values redacted, JavaScript dropped."""
    out: dict[str, Any] = {}
    for param in _PARAMS[type(command)]:
        value = getattr(command, param.name)
        if param.javascript or (value == param.default and not param.required):
            continue
        if param.secret:
            out[param.json_name] = "[redacted]"
        elif isinstance(value, Command):
            out[param.json_name] = {"action": value.action, **audit_params(value)}
        elif isinstance(value, tuple) and value and isinstance(value[0], Command | tuple):
            out[param.json_name] = _audit_nested(value)
        else:
            out[param.json_name] = _value_to_json(value)
    return out


def _audit_nested(value: tuple[Any, ...]) -> list[Any]:
    return [_audit_nested(item) if isinstance(item, tuple) else {"action": item.action, **audit_params(item)}
            for item in value]
