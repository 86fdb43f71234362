"""The driver's error classification on Playwright's own error texts, without Chromium.

The messages are copied from Playwright 1.65 driving Debian's Chromium (call logs included); what
is asserted is the outcome a step would get: its code, whether it is retryable, and whether it is
``Failed`` (nothing was sent) or ``Unknown`` (a write was sent, its effect is not known).
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright._impl._errors import TargetClosedError
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from driver.errors import (
    Step,
    Stop,
    absent,
    agent_js_stop,
    fill_unmet_state,
    navigation_stop,
    never_matched,
    not_editable,
    pointer_sent,
    stopped,
    timed_out,
    translate,
)
from messages.commands import parse_command
from messages.results import Failed, Outcome, Unknown

SECRET = "hunter2-correct-horse"


def step(command: dict[str, Any], *, sent: bool, write: bool = True) -> Step:
    return Step(parse_command(command), tab=7, timeout=5.0, write=write, sent=sent)


def fill_step(*, sent: bool = True) -> Step:
    return step({"action": "fill", "selector": "#name", "value": SECRET}, sent=sent)


def click_step(*, sent: bool = True) -> Step:
    return step({"action": "click", "selector": "#hit"}, sent=sent)


def read_step() -> Step:
    return step({"action": "pageText", "selector": "#text"}, sent=False, write=False)


def summary(outcome: Outcome) -> tuple[str, str, bool]:
    """(kind, code, retryable) of a failed or unknown outcome."""
    assert isinstance(outcome, Failed | Unknown), outcome
    return type(outcome).__name__, outcome.failure.code, outcome.failure.retryable


def fill_log(*lines: str) -> str:
    head = ['  - waiting for locator("#ro")', '    - locator resolved to <input id="ro" readonly value="keep"/>',
            f'    - fill("{SECRET}")', "  - attempting fill action"]
    return "Locator.fill: Timeout 400ms exceeded.\nCall log:\n" + "\n".join([*head, *lines]) + "\n"


def failed_checks(state: str) -> list[str]:
    """What Playwright's call log shows for a fill whose every check found the element not ``state``."""
    return [
        "    2 \u00d7 waiting for element to be visible, enabled and editable", f"      - element is {state}",
        "    - retrying fill action", "    - waiting 20ms",
        "    - waiting for element to be visible, enabled and editable", f"    - element is {state}",
        "  - retrying fill action", "    - waiting 500ms",
    ]


READONLY = fill_log(*failed_checks("not editable"))
DISABLED = fill_log(*failed_checks("not enabled"))
HIDDEN = fill_log(*failed_checks("not visible"))
INERT = fill_log(*failed_checks("inert"))
NEVER_APPEARED = 'Locator.fill: Timeout 400ms exceeded.\nCall log:\n  - waiting for locator("#missing")\n'
CHECKING = "    - waiting for element to be visible, enabled and editable"
PASSED_ITS_CHECK = fill_log(*failed_checks("not editable"), CHECKING)
NUMBER_FIELD = ("Locator.fill: Error: Cannot type text into input[type=number]\nCall log:\n"
                '  - waiting for locator("#num")\n    - locator resolved to <input id="num" type="number"/>\n'
                f'    - fill("{SECRET}")\n  - attempting fill action\n'
                "    - waiting for element to be visible, enabled and editable\n")
NOT_AN_INPUT = ("Locator.fill: Error: Element is not an <input>, <textarea>, <select> or [contenteditable] and does "
                'not have a role allowing [aria-readonly]\nCall log:\n  - waiting for locator("#h")\n'
                '    - locator resolved to <h1 id="h">x</h1>\n'
                f'    - fill("{SECRET}")\n  - attempting fill action\n'
                "    - waiting for element to be visible, enabled and editable\n")
STRICT = ('Locator.click: Error: strict mode violation: locator("button.m") resolved to 2 elements:\n'
          '    1) <button class="m">a</button> aka get_by_role("button", name="a")\n'
          '    2) <button class="m">b</button> aka get_by_role("button", name="b")\n\n'
          'Call log:\n  - waiting for locator("button.m")\n')
BAD_SELECTOR = ('Locator.fill: Unexpected token "" while parsing css selector "p[". Did you mean to CSS.escape it?\n'
                "Call log:\n  - waiting for p[\n")
CLOSED = "Page.title: Target page, context or browser has been closed"
NAVIGATED = ("Locator.evaluate: Execution context was destroyed, most likely because of a navigation\n"
             "Call log:\n  - waiting for locator(\"#form\")\n")
CLICK_WAITING = 'Locator.click: Timeout 300ms exceeded.\nCall log:\n  - waiting for locator("#x")\n'
CLICK_COVERED = ("Locator.click: Timeout 300ms exceeded.\nCall log:\n  - waiting for locator(\"#cov\")\n"
                 "    - locator resolved to <button id=\"cov\">performing click action</button>\n"
                 "  - attempting click action\n    2 \u00d7 waiting for element to be visible, enabled and stable\n"
                 "      - element is visible, enabled and stable\n      - <span></span> intercepts pointer events\n"
                 "    - retrying click action\n      - waiting 100ms\n")
CLICK_PERFORMED = ("Locator.click: Timeout 300ms exceeded.\nCall log:\n  - attempting click action\n"
                   "    - done scrolling\n    - performing click action\n")
CLICK_NAVIGATING = ("Locator.click: Timeout 3000ms exceeded.\nCall log:\n    - click action done\n"
                    "    - waiting for scheduled navigations to finish\n")


# --- what a fill's call log says it reached -------------------------------------------------


@pytest.mark.parametrize(("message", "unmet"), [
    (READONLY, "editable"), (DISABLED, "enabled"), (HIDDEN, "visible"), (INERT, "inert"), (NEVER_APPEARED, ""),
    (STRICT, ""), (BAD_SELECTOR, ""),
    (PASSED_ITS_CHECK, None), (NUMBER_FIELD, None), (NOT_AN_INPUT, None), (CLOSED, None),
])
def test_a_fill_call_log_tells_what_the_element_lacked_or_that_input_may_have_been_sent(
        message: str, unmet: str | None) -> None:
    assert fill_unmet_state(message) == unmet


def test_a_filled_value_cannot_pass_for_a_later_line_of_the_call_log() -> None:
    forged = "x\n    - element is not editable"
    message = READONLY.replace(SECRET, forged) + CHECKING + "\n"
    assert fill_unmet_state(message) is None  # the real last check had no failure: it may have filled


def test_pointer_call_logs_tell_whether_input_was_sent() -> None:
    assert not pointer_sent(CLICK_WAITING) and not pointer_sent(CLICK_COVERED)
    assert pointer_sent(CLICK_PERFORMED) and pointer_sent(CLICK_NAVIGATING)
    assert pointer_sent(CLOSED)  # no call log: cannot tell


def test_a_call_log_tells_when_the_selector_never_matched_without_asking_the_page() -> None:
    hidden = ('Locator.wait_for: Timeout 500ms exceeded.\nCall log:\n  - waiting for locator("#h") to be visible\n'
              '    6 \u00d7 locator resolved to hidden <input id="h"/>\n')
    assert never_matched(CLICK_WAITING) and never_matched(NEVER_APPEARED)
    assert not never_matched(CLICK_COVERED) and not never_matched(hidden) and not never_matched(READONLY)
    assert not never_matched(CLOSED)  # no call log: cannot tell


# --- Playwright errors as outcomes ---------------------------------------------------------


def test_a_timeout_after_a_write_was_sent_is_unknown_and_before_it_failed() -> None:
    sent = translate(click_step(), PlaywrightTimeoutError(CLICK_PERFORMED), gone=False)
    assert summary(sent) == ("Unknown", "timeout", False)
    unsent = translate(click_step(sent=False), PlaywrightTimeoutError(CLICK_WAITING), gone=False)
    assert summary(unsent) == ("Failed", "timeout", True)
    assert isinstance(unsent, Failed) and unsent.failure.error == "Command timed out after 5s; nothing was sent"
    assert summary(timed_out(read_step(), gone=False)) == ("Failed", "timeout", True)


def test_a_closed_tab_is_tab_closed_never_retryable() -> None:
    for error in (TargetClosedError(), PlaywrightError(CLOSED)):
        assert summary(translate(click_step(), error, gone=False)) == ("Unknown", "tab_closed", False)
        assert summary(translate(click_step(sent=False), error, gone=False)) == ("Failed", "tab_closed", False)
    gone = translate(click_step(sent=False), PlaywrightTimeoutError(CLICK_WAITING), gone=True)
    assert isinstance(gone, Failed) and gone.failure.code == "tab_closed"
    assert gone.failure.error == "click: tab 7 is closed; nothing was sent" and gone.failure.state == {"tabId": 7}


@pytest.mark.parametrize(("message", "code"), [
    (STRICT, "ambiguous_selector"), (BAD_SELECTOR, "invalid_selector"), (NUMBER_FIELD, "wrong_element"),
    (NOT_AN_INPUT, "wrong_element"),
    ("Locator.select_option: Error: Element is not a <select> element\nCall log:\n", "wrong_element"),
    ("Locator.set_checked: Error: Not a checkbox or radio button\nCall log:\n", "wrong_element"),
    ('Locator.fill: Error: Input of type "checkbox" cannot be filled\nCall log:\n', "wrong_element"),
])
def test_errors_raised_before_playwright_acts_failed_with_nothing_sent_even_once_sending_began(
        message: str, code: str) -> None:
    outcome = translate(fill_step(sent=True), PlaywrightError(message), gone=False)
    assert summary(outcome) == ("Failed", code, False)
    assert SECRET not in outcome.failure.error


def test_an_ambiguous_selector_says_how_many_elements_it_matched() -> None:
    outcome = translate(click_step(sent=False), PlaywrightError(STRICT), gone=False)
    assert outcome.failure.error == "click: selector '#hit' matches 2 elements; it must match one"


def test_a_navigation_under_a_command_is_unknown_once_sent_and_failed_before() -> None:
    assert summary(translate(click_step(), PlaywrightError(NAVIGATED), gone=False)) == ("Unknown", "navigated", False)
    unsent = translate(click_step(sent=False), PlaywrightError(NAVIGATED), gone=False)
    assert summary(unsent) == ("Failed", "navigated", True) and "nothing was sent" in unsent.failure.error


def test_other_errors_pass_on_their_first_line_only_for_actions_without_typed_values() -> None:
    message = f'Locator.fill: Error: something odd about "{SECRET}"\nCall log:\n  - fill("{SECRET}")\n'
    filled = translate(fill_step(), PlaywrightError(message), gone=False)
    assert summary(filled) == ("Unknown", "browser_error", False)
    assert filled.failure.error == "fill: the browser reported an error"
    read = translate(read_step(), PlaywrightError("Locator.inner_text: Error: something odd\nCall log:\n"),
                     gone=False)
    assert summary(read) == ("Failed", "browser_error", True)
    assert read.failure.error == "pageText: the browser reported an error (Error: something odd)"


# --- stops built by the driver -------------------------------------------------------------


def test_a_field_that_is_not_editable_fails_retryably_with_nothing_sent() -> None:
    outcome = stopped(fill_step(sent=False), not_editable(fill_step(sent=False)))
    assert summary(outcome) == ("Failed", "not_editable", True)
    assert outcome.failure.error == "fill: '#name' is not editable; nothing was sent"


def test_an_element_wait_that_timed_out_is_not_found_or_not_actionable() -> None:
    unsent = fill_step(sent=False)
    assert summary(stopped(unsent, absent(unsent, 0, "visible"))) == ("Failed", "not_found", True)
    hidden = stopped(unsent, absent(unsent, 1, "visible"))
    assert summary(hidden) == ("Failed", "not_actionable", True)
    assert hidden.failure.error == "fill: '#name' was not visible within 5s; nothing was sent"
    assert absent(read_step(), -1, "attached").message == "pageText: '#text' was not attached within 5s"


@pytest.mark.parametrize(("message", "refused", "expected"), [
    ("Page.goto: net::ERR_UNSAFE_PORT at http://127.0.0.1:9/\nCall log:\n  - navigating to \"http://127.0.0.1:9/\", "
     "waiting until \"load\"\n", False, ("Failed", "navigation_failed", True)),
    ("Page.goto: net::ERR_CONNECTION_REFUSED at http://127.0.0.1:1/\n", False, ("Failed", "navigation_failed", True)),
    ("Page.goto: net::ERR_NAME_NOT_RESOLVED at http://no.such.test/\n", False, ("Failed", "navigation_failed", True)),
    ("Page.goto: net::ERR_BLOCKED_BY_CLIENT at http://denied.test/\n", False, ("Failed", "url_denied", False)),
    ("Page.goto: net::ERR_TUNNEL_CONNECTION_FAILED at https://x.test/\n", True, ("Failed", "url_denied", False)),
    ("Page.goto: net::ERR_TUNNEL_CONNECTION_FAILED at https://x.test/\n", False,
     ("Failed", "navigation_failed", True)),
    ("Page.goto: Protocol error (Page.navigate): Cannot navigate to invalid URL\n", False,
     ("Failed", "invalid_parameter", False)),
    ("Page.goto: net::ERR_ABORTED at http://127.0.0.1:8000/download\n", False, ("Unknown", "navigated", False)),
    ("Page.goto: net::ERR_EMPTY_RESPONSE at http://127.0.0.1:8000/\n", False,
     ("Unknown", "navigation_failed", False)),
])
def test_a_failed_navigation_says_whether_anything_reached_the_server(
        message: str, refused: bool, expected: tuple[str, str, bool]) -> None:
    stop = navigation_stop("navigate", message, refused)
    assert stop is not None
    assert summary(stopped(step({"action": "navigate", "url": "http://x.test/"}, sent=True), stop)) == expected


def test_a_navigation_error_with_no_known_cause_is_left_to_translate() -> None:
    assert navigation_stop("navigate", "Page.goto: Error: something else\n", False) is None


@pytest.mark.parametrize(("message", "expected", "error"), [
    ("Page.evaluate: SyntaxError: Unexpected token ')'\n    at eval (<anonymous>)",
     ("Failed", "js_syntax_error", False), "js: the code is not valid JavaScript (SyntaxError); nothing ran"),
    ("Page.evaluate: TypeError: Cannot read properties of null (reading 'x')\n    at eval (eval at evaluate "
     "(:370:30), <anonymous>:1:6)", ("Unknown", "js_error", False), "js: the code threw TypeError"),
    ("Page.evaluate: oops", ("Unknown", "js_error", False), "js: the code threw an exception"),
    (NAVIGATED, ("Unknown", "navigated", False), "js: the page navigated away while the code ran"),
])
def test_agent_javascript_that_failed_names_only_its_error_class(
        message: str, expected: tuple[str, str, bool], error: str) -> None:
    outcome = stopped(step({"action": "js", "code": f"'{SECRET}'"}, sent=True), agent_js_stop("js", message))
    assert summary(outcome) == expected and outcome.failure.error == error


def test_a_stop_known_to_have_taken_no_effect_fails_although_it_was_sent() -> None:
    sent = click_step()
    assert summary(stopped(sent, Stop("x", "m", retryable=True, took_effect=False))) == ("Failed", "x", True)
    assert summary(stopped(sent, Stop("x", "m", retryable=True))) == ("Unknown", "x", False)
    closed = stopped(click_step(sent=False), Stop("tab_closed", "m", retryable=True, state={"tabId": 7}))
    assert summary(closed) == ("Failed", "tab_closed", False) and closed.failure.state == {"tabId": 7}
