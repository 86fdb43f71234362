"""The actions of the command language: one frozen dataclass each, with its parameters' bounds."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypedDict

from messages.contract import MAX_STEP_TIMEOUT
from messages.errors import invalid_call
from messages.references import Ref, Template

Text = str | Template | Ref
"""A string parameter; may hold references."""
Integer = int | Ref
"""An integer parameter, or one whole reference."""
Number = float | Ref
"""A number of seconds or similar, or one whole reference."""
Flag = bool | Ref
"""A boolean parameter, or one whole reference."""
JsonObject = dict[str, Any]
"""A JSON object taken as it is (no references inside)."""

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
MAX_TAB_ID = 2**53 - 1
"""The largest tab id (JSON's largest exact integer): a tab id is a JSON integer from 0 to this."""
MAX_SESSION_NAME = 64
SESSION_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
MAX_NODE_NAME = 64
NODE_NAME = r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}"
"""A session's name (``call`` asks for a one-shot session)."""
SITE_TOOL_NAME = r"[A-Za-z0-9_.-]{1,128}"
REF = r"t[0-9]{1,16}d[0-9]{1,12}(?:f[0-9]{1,9})?e[0-9]{1,9}"
"""An element's ref, as a ``snapshot`` gives it (``t3d2e13``: tab 3, its ref document 2, Playwright's ``e13``)."""
MAX_REF = 64
MAX_SNAPSHOT_CHARS = 200_000
"""The most characters one snapshot answers (``maxChars``' bound)."""
"""The name of a tool a page declares (``navigator.modelContext.registerTool``)."""


def _param(doc: str, default: Any = dataclasses.MISSING, **meta: Any) -> Any:
    """A parameter field: ``doc`` for the schema, ``secret``/``javascript`` for redaction."""
    return field(default=default, metadata={"doc": doc, **meta})


def _ref(what: str = "The element") -> Any:
    return _param(f"{what}, by a snapshot's ref (instead of selector).", None, max_length=MAX_REF,
                  pattern=REF)


def _one_target(command: Any, path: str, *, required: bool) -> None:
    """``selector`` and ``ref`` are not both given (``invalid_parameter``); with ``required``, one of them is
    (``missing_parameter``, as for any parameter a command needs)."""
    if command.selector is not None and command.ref is not None:
        raise invalid_call("invalid_parameter", path, f"{command.action} takes selector or ref, not both",
                           param="ref")
    if required and command.selector is None and command.ref is None:
        raise invalid_call("missing_parameter", path, f"{command.action} needs selector or ref", param="selector")


@dataclass(frozen=True, kw_only=True, slots=True)
class Command:
    """Base of every command: the parameters any action takes."""

    action: ClassVar[str]
    writes: ClassVar[bool] = True
    acts_on_tab: ClassVar[bool] = True

    tab_id: Integer | None = _param("Tab to act on; the call's default tab when absent.", None, minimum=0,
                                    maximum=MAX_TAB_ID)
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
    selector: Text | None = _param("CSS or Playwright selector of the element (or ref).", None, max_length=MAX_SELECTOR)
    ref: Text | None = _ref()
    button: Literal["left", "right", "middle"] = _param("Mouse button.", "left")
    click_count: int = _param("Number of clicks (2 for a double click).", 1, minimum=1, maximum=3)

    def check(self, path: str) -> None:
        _one_target(self, path, required=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class Type(Command):
    """Type text into an element key by key, optionally pressing Enter after."""

    action = "type"
    selector: Text | None = _param("Element to type into (or ref).", None, max_length=MAX_SELECTOR)
    ref: Text | None = _ref()
    text: Text = _param("The text to type (a typed value: redacted everywhere).", secret=True, max_length=MAX_TEXT)
    submit: Flag = _param("Press Enter after typing.", False)

    def check(self, path: str) -> None:
        _one_target(self, path, required=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class Fill(Command):
    """Replace the value of an input, textarea or contenteditable."""

    action = "fill"
    selector: Text | None = _param("Element to fill (or ref).", None, max_length=MAX_SELECTOR)
    ref: Text | None = _ref()
    value: Text = _param("The value (a typed value: redacted everywhere).", secret=True, max_length=MAX_TEXT)

    def check(self, path: str) -> None:
        _one_target(self, path, required=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class Select(Command):
    """Choose options of a <select> by value or label."""

    action = "select"
    selector: Text | None = _param("The <select> element (or ref).", None, max_length=MAX_SELECTOR)
    ref: Text | None = _ref()
    values: tuple[Text, ...] = _param("Option values or labels to select.", min_items=1,
                                        max_length=MAX_SELECTOR)

    def check(self, path: str) -> None:
        _one_target(self, path, required=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class Press(Command):
    """Press a key or chord (``Enter``, ``Control+A``), on an element or the page."""

    action = "press"
    key: Text = _param("Key name as Playwright spells it.", max_length=MAX_KEY)
    selector: Text | None = _param("Element to focus first; the focused element when absent.", None,
                                   max_length=MAX_SELECTOR)
    ref: Text | None = _ref()

    def check(self, path: str) -> None:
        _one_target(self, path, required=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class Check(Command):
    """Check or uncheck a checkbox or radio button."""

    action = "check"
    selector: Text | None = _param("The checkbox or radio button (or ref).", None, max_length=MAX_SELECTOR)
    ref: Text | None = _ref()
    checked: Flag = _param("True to check, false to uncheck.", True)

    def check(self, path: str) -> None:
        _one_target(self, path, required=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class SubmitForm(Command):
    """Submit a form (as its submit button would)."""

    action = "submitForm"
    selector: Text | None = _param("The form, or an element inside it (the page's first form when neither this "
                                   "nor ref is given).", None, max_length=MAX_SELECTOR)
    ref: Text | None = _ref("The form or an element inside it")

    def check(self, path: str) -> None:
        _one_target(self, path, required=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class PageText(Command):
    """Read the visible text of the page or of one element."""

    action = "pageText"
    writes = False
    selector: Text | None = _param("Element to read; the whole page when absent.", None, max_length=MAX_SELECTOR)
    ref: Text | None = _ref("The element to read")
    max_chars: int = _param("Longest text returned.", 20000, minimum=1, maximum=1_000_000)

    def check(self, path: str) -> None:
        _one_target(self, path, required=False)

@dataclass(frozen=True, kw_only=True, slots=True)
class Snapshot(Command):
    """Read the tab's accessibility tree as text, frames included; each element one can act on carries a ref
    (``[ref=t3d2e13]``) that every command taking ``selector`` takes as ``ref``."""

    action = "snapshot"
    writes = False
    selector: Text | None = _param("Element whose subtree to read; the whole page when absent.", None,
                                   max_length=MAX_SELECTOR)
    ref: Text | None = _ref("The element whose subtree to read")
    depth: int | None = _param("Deepest level of the tree shown.", None, minimum=1, maximum=1000)
    max_chars: int = _param("Longest text returned, cut at an element boundary.", 20000, minimum=200,
                            maximum=MAX_SNAPSHOT_CHARS)
    offset: int = _param("Lines to skip (a cut snapshot says where to go on).", 0, minimum=0,
                         maximum=10_000_000)
    interactive: Flag = _param("Only elements to act on, with their headings and landmarks.", False)
    boxes: Flag = _param("Add each element's [box=x,y,width,height] (CSS pixels).", False)
    since: Literal["last"] | None = _param('"last": only what changed since this session\'s last snapshot of this '
                                           "tab.", None)

    def check(self, path: str) -> None:
        _one_target(self, path, required=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class Find(Command):
    """Find elements by selector or visible text."""

    action = "find"
    writes = False
    selector: Text | None = _param("CSS or Playwright selector.", None, max_length=MAX_SELECTOR)
    ref: Text | None = _ref("The element to look in")
    text: Text | None = _param("Visible text to look for.", None, max_length=MAX_SELECTOR)
    limit: int = _param("Most matches returned.", 20, minimum=1, maximum=500)

    def check(self, path: str) -> None:
        _one_target(self, path, required=False)
        if self.selector is None and self.text is None and self.ref is None:
            raise invalid_call("missing_parameter", path, "find needs selector, ref or text", param="selector")


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
    ref: Text | None = _ref("The element to capture")
    full_page: Flag = _param("Capture the whole scrollable page.", False)

    def check(self, path: str) -> None:
        _one_target(self, path, required=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class WaitFor(Command):
    """Wait for an element state, a URL or a load state."""

    action = "waitFor"
    writes = False
    selector: Text | None = _param("Element to wait for.", None, max_length=MAX_SELECTOR)
    ref: Text | None = _ref("The element to wait for")
    state: Literal["attached", "detached", "visible", "hidden"] = _param("Element state.", "visible")
    url: Text | None = _param("URL (glob) to wait for.", None, max_length=MAX_URL)
    load_state: Literal["load", "domcontentloaded", "networkidle"] | None = _param("Load state.", None)

    def check(self, path: str) -> None:
        _one_target(self, path, required=False)
        if self.selector is None and self.ref is None and self.url is None and self.load_state is None:
            raise invalid_call(
                "missing_parameter", path, "waitFor needs selector, ref, url or loadState", param="selector"
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
    selector: Text | None = _param("Element whose click starts the download (or ref).", None, max_length=MAX_SELECTOR)
    ref: Text | None = _ref()

    def check(self, path: str) -> None:
        _one_target(self, path, required=True)


@dataclass(frozen=True, kw_only=True, slots=True)
class SiteTools(Command):
    """List the tools the tab's page declares (WebMCP), in its document and its same-origin frames."""

    action = "siteTools"
    writes = False


@dataclass(frozen=True, kw_only=True, slots=True)
class CallSiteTool(Command):
    """Call a tool the tab's page declares; the answer is the final output of its whole chain.

    ``input`` is checked against the tool's input schema before anything runs; a tool whose work
    crosses documents or frames carries on through continuation tokens, and only its last output counts.
    A write, except where the policy would stop it as one and the page declares the tool ``readOnlyHint``:
    then the tab's node runs it as a read (``core.policy.PolicyDriver``).
    """

    action = "callSiteTool"
    name: str = _param("The tool's name, as siteTools lists it.", max_length=MAX_NAME, pattern=SITE_TOOL_NAME)
    input: JsonObject | None = _param("An object the tool's input schema accepts ({} when absent; a typed "
                                      "value: redacted everywhere).", None, secret=True, max_length=MAX_TEXT)


PAGE_ACTIONS: tuple[type[Command], ...] = (
    Navigate, Click, Type, Fill, Select, Press, Check, SubmitForm, PageText, Find, Url, Title,
    Screenshot, WaitFor, Snapshot, Js, WaitForResult, SyncBarrier,
)
"""The actions on a page, in the order of the contract (the tabs' actions follow: ``_tabs``)."""
DATA_ACTIONS: tuple[type[Command], ...] = (Cookies, Storage, Clipboard, Download, SiteTools, CallSiteTool)
"""The actions on a page's data and tools, last in the order of the contract."""
