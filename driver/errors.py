"""Error classification: Playwright's errors and the driver's own stops as outcomes of the step engine.

Plain functions over the text of an error and the state of a step (what it is, whether something
was sent): they need no Chromium (``tests/unit/test_browser_errors.py``). An outcome is ``Failed``
when nothing reached the page, ``Unknown`` when a write was sent and its effect is not known.

Messages are built here from the action, the selector and a code; they never carry typed values
or JavaScript bodies, and Playwright's own messages (which can echo a filled value) are passed on
only in part, and only for actions without typed values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from driver.process import first_line
from messages.commands import Clipboard, Command, Cookies, Fill, Js, Storage, Type, WaitForResult, secret_values
from messages.results import Failed, Failure, Unknown

__all__ = [
    "ERROR_PAGE", "Step", "Stop", "absent", "agent_js_stop", "closed", "closed_message", "fill_unmet_state",
    "first_line", "is_closed_error", "is_navigation_error", "navigation_stop", "net_error", "not_editable",
    "pointer_sent", "stopped", "timed_out", "translate", "unanswered", "unchecked", "unresolved",
]

ERROR_PAGE = "chrome-error://"
"""Where Chromium's error pages live: a failed navigation commits one."""

_SECRET_ACTIONS = (Type, Fill, Storage, Clipboard, Cookies, Js, WaitForResult)
"""Actions with typed values or JavaScript: Playwright's messages about them are never passed on."""

# Network errors that happen before a request leaves the browser: nothing reached the server.
_UNSENT_NET_ERRORS = frozenset({
    "ERR_NAME_NOT_RESOLVED", "ERR_NAME_RESOLUTION_FAILED", "ERR_CONNECTION_REFUSED", "ERR_ADDRESS_UNREACHABLE",
    "ERR_ADDRESS_INVALID", "ERR_INTERNET_DISCONNECTED", "ERR_BLOCKED_BY_CLIENT", "ERR_BLOCKED_BY_ADMINISTRATOR",
    "ERR_UNSAFE_PORT", "ERR_INVALID_URL", "ERR_DISALLOWED_URL_SCHEME", "ERR_UNKNOWN_URL_SCHEME",
    "ERR_NETWORK_ACCESS_DENIED", "ERR_PROXY_CONNECTION_FAILED", "ERR_SSL_PROTOCOL_ERROR",
    "ERR_CERT_AUTHORITY_INVALID", "ERR_CERT_COMMON_NAME_INVALID", "ERR_CERT_DATE_INVALID", "ERR_CERT_INVALID",
    "ERR_SSL_VERSION_OR_CIPHER_MISMATCH", "ERR_CONNECTION_TIMED_OUT", "ERR_TUNNEL_CONNECTION_FAILED",
})

_WRONG_ELEMENT = ("is not an <input>", "Not a checkbox or radio button", "not a <select>", "cannot be filled",
                  "Cannot uncheck radio button", "Malformed value", "Cannot type text into input[type=number]")
"""Playwright's errors about the kind of element, raised before anything is sent to it."""


class Stop(Exception):
    """Ends an action with a failure built here (never from a page's or Playwright's text)."""

    def __init__(self, code: str, message: str, *, retryable: bool = False, took_effect: bool | None = None,
                 state: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.took_effect = took_effect
        """False when it is known that nothing took effect, even after the write was sent."""
        self.state = state


@dataclass(slots=True)
class Step:
    """What classification needs of one execution of one action on one tab."""

    command: Command
    tab: int
    timeout: float
    """The command's timeout, in seconds (for messages)."""
    write: bool
    sent: bool = False
    """Whether something has been sent that may change the page (from here on, failures are Unknown)."""

    @property
    def action(self) -> str:
        return self.command.action

    target: str | None = None
    """The Playwright selector of the command's ``ref``, once resolved (``snapshots.resolve_ref``)."""

    @property
    def selector(self) -> str | None:
        if self.target is not None:
            return self.target
        selector = getattr(self.command, "selector", None)
        if selector is None and self.action == "submitForm" and getattr(self.command, "ref", None) is None:
            return "form"
        return selector if isinstance(selector, str) else None


# --- reading Playwright's messages ---------------------------------------------------------


def net_error(message: str) -> str | None:
    """The ``net::ERR_*`` name in a message (``ERR_CONNECTION_REFUSED``), or None."""
    match = re.search(r"net::(ERR_[A-Z0-9_]+)", message)
    return match.group(1) if match else None


def _js_error_name(message: str) -> str:
    """The JavaScript error class a page threw (``TypeError``...), from Playwright's message."""
    match = re.match(r"([A-Z][A-Za-z]*(?:Error|Exception))\b", first_line(message))
    return match.group(1) if match else "an exception"


def is_closed_error(error: BaseException) -> bool:
    """Whether an error says the tab, its context or the browser closed (or crashed)."""
    if type(error).__name__ == "TargetClosedError":
        return True
    message = str(error)
    return any(s in message for s in ("has been closed", "Target closed", "Target crashed", "Browser closed",
                                       "Browser has been closed", "Connection closed"))


def is_navigation_error(message: str) -> bool:
    """Whether a message says the page navigated away under the call (its frame or context went)."""
    return any(s in message for s in ("Execution context was destroyed", "Frame was detached", "frame was detached",
                                      "Navigation interrupted", "interrupted by another navigation",
                                      "Cannot find context with specified id"))


def _is_selector_error(message: str) -> bool:
    return any(s in message for s in ("while parsing", "Unknown engine", "is not a valid selector",
                                      "Invalid selector"))


_CALL_LOG = "\nCall log:\n"
_LOG_LINE = r"^\s*(?:-|\d+ \u00d7)\s+"
"""How a call-log line starts: ``- `` or, for a repeated block, ``N \u00d7 ``."""
_POINTER_SENT_LINE = re.compile(
    _LOG_LINE + r"(?:performing [\w ]+ action|[\w ]+ action done"
    r"|forcing action|waiting for scheduled navigations to finish|navigations have finished)\s*$",
    re.MULTILINE)
"""A call-log line Playwright writes once it dispatches (or is about to dispatch) a pointer action's input."""
_FILL_CHECK_LINE = re.compile(
    _LOG_LINE + r"(?:(?P<check>waiting for element to be visible, enabled and editable)"
    r"|element is (?:not (?P<state>\w+)|(?P<other>inert|outside of the viewport)))\s*$",
    re.MULTILINE)
"""A fill's check of the element, and the line it writes when the check fails."""


def pointer_sent(message: str) -> bool:
    """Whether a failed Playwright pointer action (click, setChecked) may have sent input to the page.

    Playwright logs ``performing click action`` just before it dispatches the mouse events, in the
    same synchronous run as the dispatch (its timeout, a timer, cannot fall between the two), and
    every later line (``click action done``, ``waiting for scheduled navigations to finish``...)
    follows it. A call log without any of them shows the action stopped while it was still waiting
    for the element (missing, hidden, disabled, covered, moving): nothing was sent. An error with no
    call log at all tells nothing, and counts as sent.
    """
    _head, found, log = message.partition(_CALL_LOG)
    return not found or _POINTER_SENT_LINE.search(log) is not None


_RESOLVED_LINE = re.compile(_LOG_LINE + r"locator resolved to ", re.MULTILINE)
"""The call-log line Playwright writes each time the selector matched an element."""


def never_matched(message: str) -> bool:
    """Whether a Playwright timeout's call log shows its selector matched no element the whole time.

    Playwright logs ``locator resolved to <element>`` whenever its wait finds the element; a log
    without that line means none appeared. An error without a call log tells nothing (False).
    """
    _head, found, log = message.partition(_CALL_LOG)
    return bool(found) and _RESOLVED_LINE.search(log) is None


def fill_unmet_state(message: str) -> str | None:
    """What a failed Playwright ``fill`` was still waiting for, when it shows that nothing was sent; else None.

    Playwright checks the element (visible, enabled, editable, not inert) and fills it in one page
    evaluation, after logging ``waiting for element to be visible, enabled and editable``; a check
    that fails logs ``element is not <state>`` and is retried. So the fill may have reached the page
    only when the last of these lines is a check without its failure. Answers the state the element
    lacked at the last check (``editable``, ``enabled``, ``visible``, ``inert``...), ``""`` when the
    element was never checked (it never appeared, or the selector failed), or None when input may
    have been sent, or the error has no call log (which tells nothing). The log's ``fill("...")``
    line, which echoes the value, comes before every check, so a value cannot pass for a later line.
    """
    _head, found, log = message.partition(_CALL_LOG)
    if not found:
        return None
    lines = list(_FILL_CHECK_LINE.finditer(log))
    if not lines:
        return ""
    last = lines[-1]
    if last.group("check"):
        return None
    return last.group("state") or last.group("other")


# --- outcomes ------------------------------------------------------------------------------


def closed(tab: int) -> Failure:
    """The failure of a command for a tab that is closed before it starts."""
    return Failure(f"Tab {tab} is closed", "tab_closed", False, {"tabId": tab})


def closed_message(step: Step) -> str:
    if step.write and step.sent:
        return f"{step.action}: tab {step.tab} closed while the command ran"
    return f"{step.action}: tab {step.tab} is closed" + ("; nothing was sent" if step.write else "")


def _nothing_sent(step: Step) -> str:
    return "; nothing was sent" if step.write else ""


def stopped(step: Step, stop: Stop) -> Failed | Unknown:
    """A stop as an outcome: Unknown for a write that was sent unless nothing took effect, else Failed."""
    state = dict(stop.state) if stop.state is not None else None
    if step.write and step.sent and stop.took_effect is not False:
        return Unknown(Failure(stop.message, stop.code, False, state))
    retryable = stop.retryable if stop.code != "tab_closed" else False
    return Failed(Failure(stop.message, stop.code, retryable, state))


def timed_out(step: Step, gone: bool) -> Failed | Unknown:
    """A command that ran out of time (``gone``: its tab closed meanwhile)."""
    if gone:
        return stopped(step, Stop("tab_closed", closed_message(step), state={"tabId": step.tab}))
    message = f"Command timed out after {step.timeout:g}s"
    if not (step.write and step.sent):
        message += _nothing_sent(step)
    return stopped(step, Stop("timeout", message, retryable=True))


def translate(step: Step, error: PlaywrightError, gone: bool) -> Failed | Unknown:
    """A Playwright error as an outcome, with a message built here (``gone``: the tab closed meanwhile)."""
    message = error.message or str(error)
    action, selector = step.action, step.selector
    if is_closed_error(error) or gone:
        return stopped(step, Stop("tab_closed", closed_message(step), state={"tabId": step.tab}))
    if isinstance(error, PlaywrightTimeoutError):
        return timed_out(step, gone)
    if is_navigation_error(message):
        text = (f"{action}: the page navigated away while the command ran" if step.sent
                else f"{action}: the page navigated away before the command could run; nothing was sent")
        return stopped(step, Stop("navigated", text, retryable=True))
    if "strict mode violation" in message:
        count = re.search(r"resolved to (\d+) elements", message)
        many = f"{count.group(1)} elements" if count else "several elements"
        return stopped(step, Stop("ambiguous_selector", f"{action}: selector {selector!r} matches {many}; "
                                                        "it must match one", took_effect=False))
    if _is_selector_error(message):  # Playwright parses and resolves selectors before it acts
        return stopped(step, Stop("invalid_selector", f"{action}: invalid selector {selector!r}", took_effect=False))
    if any(s in message for s in _WRONG_ELEMENT):  # Playwright checks these before it acts
        return stopped(step, Stop("wrong_element", f"{action}: {selector!r} is not an element "
                                                   f"{action} can act on; nothing was sent", took_effect=False))
    detail = ""
    if not isinstance(step.command, _SECRET_ACTIONS):
        line = first_line(message)[:160]
        if line and not any(secret in line for secret in secret_values(step.command)):
            detail = f" ({line})"
    text = f"{action}: the browser reported an error{detail}"
    return stopped(step, Stop("browser_error", text, retryable=not step.write))


def absent(step: Step, count: int, what: str) -> Stop:
    """Why an element wait timed out, given how many elements match (-1: unknown): none, or not ``what``."""
    timeout = f"{step.timeout:g}s"
    if count == 0:
        return Stop("not_found", f"{step.action}: no element matches {step.selector!r} after {timeout}"
                                 + _nothing_sent(step), retryable=True)
    return Stop("not_actionable", f"{step.action}: {step.selector!r} was not {what} within {timeout}"
                                  + _nothing_sent(step), retryable=True)


def unchecked(step: Step) -> Stop:
    """An element wait whose time ran out before its selector resolved, although the element is there."""
    return Stop("timeout", f"{step.action}: {step.selector!r} is there, but the page did not let it be checked "
                           f"within {step.timeout:g}s" + _nothing_sent(step), retryable=True)


def unanswered(step: Step) -> Stop:
    """An element wait whose time ran out with no element in its call log, on a page that then did not answer
    whether one matches (a stalled machine or page): missing and never checked cannot be told apart."""
    return Stop("timeout", f"{step.action}: no element matching {step.selector!r} was seen within {step.timeout:g}s, "
                           "and the page did not answer whether one is there" + _nothing_sent(step), retryable=True)


def not_editable(step: Step) -> Stop:
    """The element is readonly or disabled: nothing was typed into it."""
    return Stop("not_editable", f"{step.action}: {step.selector!r} is not editable" + _nothing_sent(step),
                retryable=True)


def unresolved(action: str, host: str | None) -> Stop:
    """A navigation whose host name did not resolve (DNS): nothing was sent, and it may resolve later."""
    name = f"the name {host}" if host else "the host's name"
    return Stop("navigation_failed", f"{action}: {name} did not resolve (DNS); nothing reached a server",
                retryable=True, took_effect=False, state={"reason": "name_not_resolved"})


def navigation_stop(action: str, message: str, refused_by_proxy: bool, *, unresolved_by_proxy: bool = False,
                    host: str | None = None) -> Stop | None:
    """A failed navigation's error (after it settled) as a stop, or None for one to translate as any error.

    ``refused_by_proxy``: the node's proxy refused a connection while it ran; ``unresolved_by_proxy``:
    a name the proxy resolved (``host``, the navigation's) did not resolve meanwhile.
    """
    net = net_error(message)
    if net == "ERR_BLOCKED_BY_CLIENT" or (net == "ERR_TUNNEL_CONNECTION_FAILED" and refused_by_proxy):
        return Stop("url_denied", f"{action}: the URL policy stopped this navigation on its way", took_effect=False)
    if net in ("ERR_NAME_NOT_RESOLVED", "ERR_NAME_RESOLUTION_FAILED") or (
            net == "ERR_TUNNEL_CONNECTION_FAILED" and unresolved_by_proxy):
        return unresolved(action, host)
    if net in _UNSENT_NET_ERRORS:
        return Stop("navigation_failed", f"{action}: net::{net}; nothing reached the server",
                    retryable=True, took_effect=False)
    if "invalid URL" in message or "Invalid url" in message or "Cannot navigate to" in message:
        return Stop("invalid_parameter", f"{action}: the URL is not one the browser can load", took_effect=False)
    if net == "ERR_ABORTED" or is_navigation_error(message):
        return Stop("navigated", f"{action}: the navigation was interrupted")
    if net is not None:
        return Stop("navigation_failed", f"{action}: net::{net}")
    return None


def agent_js_stop(action: str, message: str) -> Stop:
    """Agent JavaScript that failed in the page (not by a closed tab or a timeout) as a stop."""
    if is_navigation_error(message):
        return Stop("navigated", f"{action}: the page navigated away while the code ran")
    name = _js_error_name(message)
    if name == "SyntaxError":
        return Stop("js_syntax_error", f"{action}: the code is not valid JavaScript (SyntaxError); nothing ran",
                    took_effect=False)
    return Stop("js_error", f"{action}: the code threw {name}")
