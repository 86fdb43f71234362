"""The Playwright driver against a real Chromium and the test site.

What a command did is checked where it shows: in the page, and at the server, which counts
every write it receives (a write that must not have happened is a count that stayed 0).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from playwright._impl import channel_owner
from playwright.async_api import Locator
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from actors.loop import IoLoop
from actors.tab_actor import TabActor, Ticket
from driver import ChromiumBrowser, find_chromium, spares
from driver.reads import evaluate_settled
from messages.commands import Click, Js, NewTab, Url, parse_command
from messages.errors import KitsuneError
from messages.requests import TabRequest
from messages.results import Done, Failed, Outcome, Unknown
from tests.integration.browser_fixtures import *  # noqa: F403 - the fixtures, used by name
from tests.integration.browser_fixtures import Act, LoopThread, Run
from tests.integration.fleet_nodes import until
from tests.nodes import chromium_pid
from tests.site import HIDDEN_TEXT, REPORT_CONTENT, REPORT_NAME, TEXT_ITEMS, TEXT_PARAGRAPHS, TestSite

SECRET = "hunter2-correct-horse"


def done(outcome: Outcome) -> dict[str, Any]:
    assert isinstance(outcome, Done), outcome
    return dict(outcome.value)


def value_of(act: Act, tab: int, code: str) -> Any:
    return done(act({"action": "js", "code": code}, tab))["value"]


def text_of(act: Act, tab: int, selector: str) -> str:
    return str(done(act({"action": "pageText", "selector": selector}, tab))["text"])


def goto(act: Act, tab: int, url: str) -> None:
    done(act({"action": "navigate", "url": url}, tab))


# --- the browser itself ----------------------------------------------------------------------


def test_find_chromium_honours_the_override_and_fails_when_it_names_nothing(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("KITSUNE_CHROMIUM", raising=False)
    found = find_chromium()
    assert found.is_file() and os.access(found, os.X_OK)
    monkeypatch.setenv("KITSUNE_CHROMIUM", str(found))
    assert find_chromium() == found
    monkeypatch.setenv("KITSUNE_CHROMIUM", str(tmp_path / "no-such-chromium"))
    with pytest.raises(KitsuneError) as raised:
        find_chromium()
    assert raised.value.code == "browser_unavailable"


def test_every_tab_has_a_window_of_its_own_and_ids_are_never_reused(
        chromium: ChromiumBrowser, run: Run[Any]) -> None:
    first, second = run(chromium.new_tab()), run(chromium.new_tab())
    assert second > first >= 1

    async def window(tab_id: int) -> int:
        session = await chromium.page(tab_id).context.new_cdp_session(chromium.page(tab_id))
        return int((await session.send("Browser.getWindowForTarget"))["windowId"])

    assert run(window(first)) != run(window(second))
    run(chromium.close_tab(second))
    assert second not in chromium.tab_ids() and first in chromium.tab_ids()
    third = run(chromium.new_tab())
    assert third > second
    run(chromium.close_tab(first))
    run(chromium.close_tab(third))


def test_blocks_and_barriers_are_not_run_by_the_driver(act: Act, tab: int) -> None:
    for command in ({"action": "sequence", "steps": [{"action": "url"}]},
                    {"action": "try", "body": [{"action": "url"}]},
                    {"action": "broadcast", "tabIds": [tab], "command": {"action": "url"}},
                    {"action": "syncBarrier", "barrier": "b"}):
        outcome = act(command, tab)
        assert isinstance(outcome, Failed) and outcome.failure.code == "invalid_call", command


# --- navigation and reads --------------------------------------------------------------------


def test_navigate_reports_the_final_url_and_status_and_warns_on_errors(act: Act, tab: int, site: TestSite) -> None:
    value = done(act({"action": "navigate", "url": site.url("/cookies/set?name=a&value=b")}, tab))
    assert value == {"url": site.url("/cookies"), "status": 200}  # followed the redirect
    outcome = act({"action": "navigate", "url": site.url("/no/such/page")}, tab)
    assert isinstance(outcome, Done) and outcome.value["status"] == 404 and outcome.warning
    assert done(act({"action": "title"}, tab)) == {"title": "Not found"}
    assert done(act({"action": "url"}, tab)) == {"url": site.url("/no/such/page")}


def test_navigate_to_a_closed_port_fails_with_nothing_sent(act: Act, tab: int) -> None:
    outcome = act({"action": "navigate", "url": "http://127.0.0.1:9/"}, tab)
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.code == "navigation_failed" and outcome.failure.retryable


@pytest.mark.parametrize("url", ["http://no-such-host.invalid/", "https://no-such-host.invalid/path"])
def test_navigate_to_a_name_that_does_not_resolve_says_so(act: Act, tab: int, url: str) -> None:
    outcome = act({"action": "navigate", "url": url}, tab)
    assert isinstance(outcome, Failed), outcome
    assert (outcome.failure.code, outcome.failure.retryable) == ("navigation_failed", True)
    assert outcome.failure.error == ("navigate: the name no-such-host.invalid did not resolve (DNS); "
                                     "nothing reached a server")
    assert outcome.failure.state == {"reason": "name_not_resolved"}


def test_page_text_find_and_screenshot(act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/text"))
    page = done(act({"action": "pageText"}, tab))
    assert all(p in page["text"] for p in TEXT_PARAGRAPHS) and HIDDEN_TEXT not in page["text"]
    assert page["truncated"] is False
    short = done(act({"action": "pageText", "maxChars": 10}, tab))
    assert len(short["text"]) == 10 and short["truncated"] is True
    assert text_of(act, tab, "li.item").split("\n") == list(TEXT_ITEMS)

    items = done(act({"action": "find", "selector": "li.item", "limit": 2}, tab))
    assert items["count"] == len(TEXT_ITEMS)
    assert items["matches"] == [{"tag": "li", "text": "Apple", "visible": True},
                                {"tag": "li", "text": "Banana", "visible": True}]
    by_text = done(act({"action": "find", "text": "Cherry"}, tab))
    assert by_text["count"] == 1 and by_text["matches"][0]["tag"] == "li"
    both = done(act({"action": "find", "selector": "p", "text": "Chromium"}, tab))
    assert both["count"] == 1 and both["matches"][0]["text"] == TEXT_PARAGRAPHS[1]
    hidden = done(act({"action": "find", "selector": "#hidden"}, tab))
    assert hidden["matches"] == [{"tag": "p", "text": HIDDEN_TEXT, "visible": False}]
    nothing = act({"action": "find", "selector": ".nothing-here"}, tab)
    assert isinstance(nothing, Done) and nothing.value["count"] == 0 and nothing.warning

    for command in ({"action": "screenshot"}, {"action": "screenshot", "fullPage": True},
                    {"action": "screenshot", "selector": "#items"}):
        shot = done(act(command, tab))
        assert shot["mimeType"] == "image/png"
        assert base64.b64decode(shot["image"]).startswith(b"\x89PNG\r\n\x1a\n")


def test_reads_fail_retryably_and_never_unknown(act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/text"))
    missing = act({"action": "pageText", "selector": "#not-there"}, tab, timeout=0.5)
    assert isinstance(missing, Failed) and missing.failure.retryable and missing.failure.code == "not_found"
    shot = act({"action": "screenshot", "selector": "#hidden"}, tab, timeout=0.5)
    assert isinstance(shot, Failed) and shot.failure.retryable
    invalid = act({"action": "find", "selector": "p[", "limit": 1}, tab)
    assert isinstance(invalid, Failed) and invalid.failure.code == "invalid_selector"


def test_a_title_the_page_cannot_answer_in_time_fails_as_a_read_timeout(act: Act, tab: int, site: TestSite) -> None:
    """``title`` has no timer of its own (``DEADLINE_BOUND``): the driver's backstop ends it at its deadline."""
    goto(act, tab, site.url("/text"))
    busy = "setTimeout(() => { const t = Date.now(); while (Date.now() - t < 3000) {} }, 0); return 1"
    assert value_of(act, tab, busy) == 1
    late = act({"action": "title"}, tab, timeout=0.5)
    assert isinstance(late, Failed) and late.failure.code == "timeout" and late.failure.retryable, late
    assert done(act({"action": "title"}, tab, timeout=10)) == {"title": "Text"}


def test_a_title_like_playwrights_placeholder_or_empty_is_the_documents_own(act: Act, tab: int, site: TestSite) -> None:
    """Playwright's ``title()`` answers ``Loading <url>`` mid-navigation and ``""`` when the document is gone: a
    title of that form is read again from the document, so a page's own such title is answered as it is."""
    goto(act, tab, site.url("/text"))
    for own in ("Loading https://example.test/next", ""):
        value_of(act, tab, f"document.title = {own!r}; return 1")
        assert done(act({"action": "title"}, tab)) == {"title": own}


def test_a_read_a_navigation_cuts_short_is_read_again_in_the_next_document(
        chromium: ChromiumBrowser, run: Run[Any], tab: int, site: TestSite) -> None:
    """A plain evaluation fails when a navigation replaces its document, and Playwright's ``title()``
    answers ``Loading <url>`` there: ``evaluate_settled`` reads again in the next document."""
    page = chromium.page(tab)
    run(page.goto(site.url("/text")))
    title_on_links = "location.pathname === '/links' ? document.title : new Promise(() => {})"

    async def read_while_navigating() -> Any:
        read = asyncio.ensure_future(evaluate_settled(page, title_on_links))
        await asyncio.sleep(0.2)
        assert not read.done()
        await page.goto(site.url("/links"))
        return await asyncio.wait_for(read, 10)

    assert run(read_while_navigating()) == "Links"


def test_wait_for_elements_urls_and_load_states(act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/wait"))
    done(act({"action": "waitFor", "selector": "#late"}, tab, timeout=5))
    assert text_of(act, tab, "#late") == "I arrived late."
    done(act({"action": "waitFor", "selector": "#vanish", "state": "detached"}, tab, timeout=5))
    done(act({"action": "waitFor", "loadState": "load"}, tab))
    late = act({"action": "waitFor", "selector": "#never"}, tab, timeout=0.5)
    assert isinstance(late, Failed) and late.failure.code == "timeout" and late.failure.retryable

    goto(act, tab, site.url("/links"))
    done(act({"action": "click", "selector": "#next"}, tab))
    assert done(act({"action": "waitFor", "url": "**/links/next"}, tab)) == {"url": site.url("/links/next")}
    assert done(act({"action": "title"}, tab)) == {"title": "Next"}
    wrong = act({"action": "waitFor", "url": "**/elsewhere"}, tab, timeout=0.5)
    assert isinstance(wrong, Failed) and wrong.failure.retryable


# --- writes on elements ----------------------------------------------------------------------


def test_fill_select_check_and_submit_form_reach_the_server_once(act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/form"))
    done(act({"action": "fill", "selector": "#name", "value": "Ada"}, tab))
    done(act({"action": "fill", "selector": "#email", "value": "ada@example.test"}, tab))
    done(act({"action": "fill", "selector": "#message", "value": "Hello\nthere"}, tab))
    assert done(act({"action": "select", "selector": "#color", "values": ["Green"]}, tab)) == {"selected": ["green"]}
    assert done(act({"action": "select", "selector": "#sizes", "values": ["s", "L"]}, tab)) == {"selected": ["s", "l"]}
    assert done(act({"action": "check", "selector": "#agree"}, tab)) == {"checked": True}
    done(act({"action": "check", "selector": "#plan-pro"}, tab))
    assert value_of(act, tab, "document.querySelector('#plan-pro').checked") is True
    assert site.count("POST /form") == 0

    assert done(act({"action": "submitForm", "selector": "#form"}, tab)) == {"url": site.url("/form")}
    assert site.count("POST /form") == 1
    assert site.last_form == {"name": ["Ada"], "email": ["ada@example.test"], "message": ["Hello\r\nthere"],
                              "color": ["green"], "sizes": ["s", "l"], "agree": ["yes"], "plan": ["pro"]}
    assert done(act({"action": "title"}, tab)) == {"title": "Thanks"}
    assert text_of(act, tab, "#thanks-name") == "Ada"


def test_submit_form_from_an_element_inside_and_uncheck(act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/form"))
    done(act({"action": "check", "selector": "#agree"}, tab))
    assert done(act({"action": "check", "selector": "#agree", "checked": False}, tab)) == {"checked": False}
    done(act({"action": "fill", "selector": "#name", "value": "Grace"}, tab))
    done(act({"action": "submitForm", "selector": "#name"}, tab))
    assert site.count("POST /form") == 1 and site.last_form["name"] == ["Grace"]
    assert "agree" not in site.last_form


def test_type_and_press_go_key_by_key_through_the_page(act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/form"))
    done(act({"action": "type", "selector": "#name", "text": "Lin"}, tab))
    done(act({"action": "press", "selector": "#name", "key": "u"}, tab))
    done(act({"action": "press", "key": "s"}, tab))  # the focused element
    assert value_of(act, tab, "document.querySelector('#name').value") == "Linus"
    assert site.count("POST /form") == 0
    done(act({"action": "type", "selector": "#email", "text": "l@example.test", "submit": True}, tab))
    assert site.wait_for_count("POST /form", 1) == 1
    assert site.last_form["name"] == ["Linus"] and site.last_form["email"] == ["l@example.test"]
    done(act({"action": "waitFor", "url": "**/form", "loadState": "load"}, tab))
    assert done(act({"action": "title"}, tab)) == {"title": "Thanks"}


def test_click_reaches_the_server_and_navigates(act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/clicks"))
    done(act({"action": "click", "selector": "#hit"}, tab))
    assert site.wait_for_count("POST /clicks/hit", 1) == 1
    done(act({"action": "waitFor", "selector": "#total:text('1')"}, tab))
    done(act({"action": "click", "selector": "#local", "clickCount": 2}, tab))
    assert text_of(act, tab, "#local-count") == "2"
    assert site.count("POST /clicks/hit") == 1

    goto(act, tab, site.url("/navigate-on-click"))
    done(act({"action": "click", "selector": "#go"}, tab))
    done(act({"action": "waitFor", "url": "**/links/next"}, tab))


def test_an_action_makes_its_playwright_calls_as_one_call_of_the_client(
        chromium: ChromiumBrowser, run: Run[Any], act: Act, tab: int, site: TestSite,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Playwright's client captures its caller's stack for each API call of its own (one for a plain
    ``page.title()`` below); an action's calls run inside one zone of the client (``driver.client_zone``) and
    capture none, and its errors still read as the driver words them. Fails if a Playwright upgrade changes it."""
    stacks: list[int] = []
    capture = channel_owner.capture_library_stack_trace  # type: ignore[attr-defined]

    def counted() -> Any:
        stacks.append(1)
        return capture()

    monkeypatch.setattr(channel_owner, "capture_library_stack_trace", counted)
    goto(act, tab, site.url("/clicks"))
    done(act({"action": "click", "selector": "#local"}, tab))
    assert text_of(act, tab, "#local-count") == "1"
    assert done(act({"action": "title"}, tab)) == {"title": "Clicks"}
    missing = act({"action": "click", "selector": "#hit-me-not"}, tab, timeout=0.3)
    assert isinstance(missing, Failed) and missing.failure.code == "not_found", missing
    assert stacks == []
    assert run(chromium.page(tab).title()) == "Clicks"
    assert stacks == [1]


def test_click_on_a_missing_element_fails_retryably_and_sends_nothing(act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/clicks"))
    outcome = act({"action": "click", "selector": "#no-such-button"}, tab, timeout=1)
    assert isinstance(outcome, Failed), outcome
    assert outcome.failure.code == "not_found" and outcome.failure.retryable
    assert "#no-such-button" in outcome.failure.error
    hidden = act({"action": "click", "selector": "#hit", "timeout": 1}, tab, timeout=0.001)
    assert isinstance(hidden, Failed) and hidden.failure.retryable
    invalid = act({"action": "click", "selector": "button[["}, tab)
    assert isinstance(invalid, Failed) and invalid.failure.code == "invalid_selector"
    assert not invalid.failure.retryable
    ambiguous = act({"action": "click", "selector": "button.many"}, tab, timeout=1)
    assert isinstance(ambiguous, Failed) and ambiguous.failure.code == "ambiguous_selector"
    time.sleep(0.2)
    assert site.count("POST /clicks/hit") == 0
    assert text_of(act, tab, "#local-count") == "0"


def test_a_click_that_never_reaches_its_element_is_failed_and_counted_nowhere(
        act: Act, tab: int, site: TestSite) -> None:
    # One Playwright call per click: what it sent is read from its call log, never guessed.
    goto(act, tab, site.url("/clicks"))
    missing = act({"action": "click", "selector": "#hit-me-not"}, tab, timeout=0.5)
    assert isinstance(missing, Failed), missing
    assert missing.failure.code == "not_found" and missing.failure.retryable
    assert "nothing was sent" in missing.failure.error
    done(act({"action": "js", "code": "const o = document.createElement('div'); o.id = 'cover'; "
                                      "o.style.cssText = 'position:fixed;inset:0;background:#000'; "
                                      "document.body.append(o); return 1"}, tab))
    covered = act({"action": "click", "selector": "#hit"}, tab, timeout=0.5)
    assert isinstance(covered, Failed), covered
    assert covered.failure.code == "not_actionable" and covered.failure.retryable
    done(act({"action": "js", "code": "document.getElementById('cover').remove(); "
                                      "document.getElementById('hit').disabled = true; return 1"}, tab))
    disabled = act({"action": "click", "selector": "#hit"}, tab, timeout=0.5)
    assert isinstance(disabled, Failed) and disabled.failure.code == "not_actionable", disabled
    time.sleep(0.2)
    assert site.count("POST /clicks/hit") == 0
    assert text_of(act, tab, "#local-count") == "0"


def test_a_click_stuck_in_its_handler_was_sent_and_is_unknown(act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/clicks"))
    done(act({"action": "js", "code": "document.getElementById('local').addEventListener('mousedown', () => { "
                                      "const t = Date.now(); while (Date.now() - t < 1500) {} }); return 1"}, tab))
    outcome = act({"action": "click", "selector": "#local"}, tab, timeout=0.5)
    assert isinstance(outcome, Unknown) and outcome.failure.code == "timeout", outcome
    done(act({"action": "waitFor", "selector": "#local-count:text('1')"}, tab))  # it did reach the page


def test_failure_messages_never_carry_typed_values(act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/form"))
    done(act({"action": "js", "code": "const n = document.createElement('input'); n.type = 'number'; "
                                      "n.id = 'num'; document.body.append(n); return true"}, tab))
    failures = [
        act({"action": "fill", "selector": "#num", "value": SECRET}, tab, timeout=0.5),
        act({"action": "fill", "selector": "#nope", "value": SECRET}, tab, timeout=0.5),
        act({"action": "fill", "selector": "h1", "value": SECRET}, tab, timeout=0.5),
        act({"action": "fill", "selector": "select#color", "value": SECRET}, tab, timeout=0.5),
        act({"action": "type", "selector": "#nope", "text": SECRET}, tab, timeout=0.5),
        act({"action": "storage", "op": "set", "key": "k", "value": SECRET, "area": "local"}, tab, timeout=0.0),
        act({"action": "select", "selector": "#color", "values": ["purple"]}, tab, timeout=0.5),
    ]
    for outcome in failures:
        assert isinstance(outcome, Failed | Unknown), outcome
        assert SECRET not in outcome.failure.error and SECRET not in str(outcome.failure.state)
    for outcome, code in zip(failures, ["wrong_element", "not_found", "wrong_element", "wrong_element"], strict=False):
        # on a loaded machine a fill may run out of its 0.5 s first: unknown if it reached its element, as it may have
        # typed (never ok), and a failed timeout (nothing sent) if the element was not even resolved in time
        assert isinstance(outcome, Failed | Unknown), outcome
        assert outcome.failure.code in (code, "timeout"), outcome
    assert value_of(act, tab, "document.querySelector('#name').value") == ""
    assert site.count("POST /form") == 0


UNANSWERED = "the page did not answer whether one is there"
"""What an element wait's failure says when the page did not answer the probe after it."""


async def _stalled_fill(locator: Locator, value: str, **_: Any) -> None:
    """Playwright's fill as a stalled machine ends it: its wait ran out before its selector resolved."""
    selector = locator._impl_obj._selector
    raise PlaywrightTimeoutError(f"Locator.fill: Timeout 500ms exceeded.\nCall log:\n  - waiting for {selector}\n")


_WATCHED_FIELDS = """const form = document.getElementById('form');
const touched = Object.assign(document.createElement('input'), {type: 'hidden', name: 'touched', value: ''});
form.append(touched);
for (const [id, attribute] of [['ro', 'readonly'], ['off', 'disabled']]) {
  const field = Object.assign(document.createElement('input'), {id, name: id, value: 'kept'});
  field.setAttribute(attribute, '');
  form.append(field);
}
for (const field of form.querySelectorAll('input:not([type=hidden]), textarea'))
  for (const type of ['focus', 'keydown', 'beforeinput', 'input', 'change'])
    field.addEventListener(type, () => { if (!touched.value.includes(field.id)) touched.value += field.id + ' '; });
return 1"""
"""Adds a readonly field #ro and a disabled one #off to the form, and a hidden field that names every
field anything reached (focus, keys, input), so that the server sees what each fill touched."""


def test_a_fill_that_timed_out_before_its_element_resolved_says_so_and_not_that_it_is_missing(
        act: Act, tab: int, site: TestSite, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a stalled machine a short wait can end before Playwright's selector resolves: its call log then shows no
    element, whether there is one or not. The page is asked: a field that is there is a timeout, one that is not is
    ``not_found``; nothing is sent either way. (Playwright's fill raises the stalled wait's error here.)"""
    goto(act, tab, site.url("/form"))
    monkeypatch.setattr(Locator, "fill", _stalled_fill)
    there = act({"action": "fill", "selector": "#name", "value": SECRET}, tab, timeout=0.5)
    missing = act({"action": "fill", "selector": "#nope", "value": SECRET}, tab, timeout=0.5)
    assert isinstance(there, Failed) and (there.failure.code, there.failure.retryable) == ("timeout", True), there
    assert "nothing was sent" in there.failure.error
    assert isinstance(missing, Failed) and missing.failure.retryable, missing
    # the page's answer to the probe (0.5 s): a loaded machine may not give it, and then nothing is claimed either way
    for outcome, said in ((there, "'#name' is there"), (missing, "no element matches '#nope'")):
        assert said in outcome.failure.error or UNANSWERED in outcome.failure.error, outcome
    assert missing.failure.code == ("timeout" if UNANSWERED in missing.failure.error else "not_found"), missing
    monkeypatch.undo()


def test_an_element_wait_the_page_does_not_answer_about_is_a_timeout_that_claims_nothing(
        act: Act, tab: int, site: TestSite, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fill whose wait saw no element, on a page that then does not answer how many match (its probe stalls past
    its 0.5 s): a retryable timeout that says the page could not tell, whether the element is there or not; never
    ``not_found``, and nothing sent."""
    goto(act, tab, site.url("/form"))

    async def silent(_locator: Locator) -> int:
        await asyncio.sleep(5)
        return 0
    monkeypatch.setattr(Locator, "fill", _stalled_fill)
    monkeypatch.setattr(Locator, "count", silent)
    for selector in ("#name", "#nope"):
        outcome = act({"action": "fill", "selector": selector, "value": SECRET}, tab, timeout=0.5)
        assert isinstance(outcome, Failed) and (outcome.failure.code, outcome.failure.retryable) == ("timeout", True)
        assert UNANSWERED in outcome.failure.error and "nothing was sent" in outcome.failure.error, outcome
        assert SECRET not in outcome.failure.error
    monkeypatch.undo()
    assert value_of(act, tab, "document.querySelector('#name').value") == ""
    assert value_of(act, tab, "document.querySelector('#name').value") == ""


def _refused_fill(act: Act, tab: int, selector: str) -> Outcome:
    """A fill of ``selector`` (a field no fill can take) with a timeout that ends between two of its checks.

    Each fill retries its check until its timeout. Playwright checks at 0, 20, 120 and 220 ms (each check taking
    d ms), then every 500 ms: a timeout that ends during a check is rightly unknown (the check and the fill are one
    evaluation). 0.7 s ends in the first long wait (from 220 + 4d to 720 + 4d ms) for checks of up to 120 ms; on a
    machine slower than that, the next timeouts end in later waits (and one so stalled that the field was not even
    resolved in time fails ``timeout``, nothing sent)."""
    for timeout in (0.7, 1.3, 2.9):
        outcome = act({"action": "fill", "selector": selector, "value": SECRET}, tab, timeout=timeout)
        if not (isinstance(outcome, Failed | Unknown) and outcome.failure.code == "timeout"):
            return outcome
    return outcome


def test_fill_on_a_readonly_disabled_or_missing_field_fails_with_nothing_sent(
        act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/form"))
    done(act({"action": "js", "code": _WATCHED_FIELDS}, tab))
    outcomes = {selector: _refused_fill(act, tab, selector) for selector in ("#ro", "#off", "#nope")}
    codes = {}
    for selector, outcome in outcomes.items():
        assert isinstance(outcome, Failed), (selector, outcome)
        assert outcome.failure.retryable and "nothing was sent" in outcome.failure.error
        assert SECRET not in outcome.failure.error
        codes[selector] = outcome.failure.code
    assert codes == {"#ro": "not_editable", "#off": "not_editable", "#nope": "not_found"}
    done(act({"action": "fill", "selector": "#name", "value": "Ada"}, tab))  # the watch sees a fill that happens
    done(act({"action": "submitForm", "selector": "#form"}, tab))
    assert site.count("POST /form") == 1
    assert site.last_form["touched"] == ["name "] and site.last_form["ro"] == ["kept"] and "off" not in site.last_form


def test_fill_waits_for_a_readonly_field_to_become_editable(act: Act, tab: int, site: TestSite) -> None:
    # One Playwright call per fill: it waits, as a click does, for the field to be editable.
    goto(act, tab, site.url("/form"))
    done(act({"action": "js", "code": "document.getElementById('name').readOnly = true; "
                                      "setTimeout(() => { document.getElementById('name').readOnly = false; }, 50); "
                                      "return 1"}, tab))
    done(act({"action": "fill", "selector": "#name", "value": "Ada"}, tab))
    assert value_of(act, tab, "document.querySelector('#name').value") == "Ada"


def test_submit_form_that_times_out_after_sending_is_unknown_and_counted_once(
        act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/slow"))
    done(act({"action": "fill", "selector": "#item", "value": "teapot"}, tab))
    started = time.monotonic()
    outcome = act({"action": "submitForm", "selector": "#slow-form"}, tab, timeout=1)
    elapsed = time.monotonic() - started
    assert isinstance(outcome, Unknown), outcome
    assert outcome.failure.code == "timeout" and outcome.failure.error == "Command timed out after 1s"
    assert elapsed < 2.5
    assert site.count("POST /slow") == 1
    assert site.last_form == {"item": ["teapot"]}


def test_writes_refused_before_sending_fail(act: Act, chromium: ChromiumBrowser, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/text"))
    outcome = act({"action": "submitForm", "selector": "#heading"}, tab)
    assert isinstance(outcome, Failed) and outcome.failure.code == "not_found"
    key = act({"action": "press", "key": "NoSuchKey"}, tab)
    assert isinstance(key, Failed) and key.failure.code == "invalid_parameter"
    unresolved = parse_command({"action": "click", "selector": "${$0.selector}"})
    outcome = act(unresolved, tab)
    assert isinstance(outcome, Failed) and outcome.failure.code == "invalid_call"
    goto(act, tab, site.url("/form"))
    two_forms = act({"action": "js", "code": "document.body.append(document.createElement('form')); return 1"}, tab)
    assert done(two_forms) == {"value": 1}
    ambiguous = act({"action": "submitForm"}, tab)  # the default selector "form" now matches two
    assert isinstance(ambiguous, Failed) and ambiguous.failure.code == "ambiguous_selector"
    assert site.count("POST /form") == 0


# --- agent JavaScript ------------------------------------------------------------------------


def test_js_runs_expressions_and_function_bodies(act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/text"))
    assert value_of(act, tab, "document.title") == "Text"
    assert value_of(act, tab, "[1, 2].map(x => { return x * 2 })") == [2, 4]
    assert value_of(act, tab, "() => document.querySelectorAll('li.item').length") == len(TEXT_ITEMS)
    assert value_of(act, tab, "const n = 20; return n + 1;") == 21
    assert value_of(act, tab, "await new Promise(r => setTimeout(r, 10)); return {a: [1, null]};") == \
        {"a": [1, None]}
    assert value_of(act, tab, "window.__kitsune = 5") == 5
    assert value_of(act, tab, "window.__kitsune") == 5


def test_js_that_throws_is_unknown_and_its_message_is_ours(act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/text"))
    code = f"window.__before = 1; throw new TypeError('{SECRET}')"
    outcome = act({"action": "js", "code": code}, tab)
    assert isinstance(outcome, Unknown), outcome  # it ran until it threw: what it did is not known
    assert outcome.failure.code == "js_error" and "TypeError" in outcome.failure.error
    assert SECRET not in outcome.failure.error and "__before" not in outcome.failure.error
    assert value_of(act, tab, "window.__before") == 1

    syntax = act({"action": "js", "code": "window.__after = 1; }{"}, tab)
    assert isinstance(syntax, Failed) and syntax.failure.code == "js_syntax_error"  # nothing of it ran
    assert value_of(act, tab, "window.__after === undefined") is True


def test_js_cut_short_by_a_navigation_or_its_timeout_is_unknown(act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/navigate-on-click"))
    gone = act({"action": "js", "code": "location.href = '/links/next'; await new Promise(() => {});"}, tab)
    assert isinstance(gone, Unknown) and gone.failure.code == "navigated", gone
    done(act({"action": "waitFor", "url": "**/links/next"}, tab))

    hang = act({"action": "js", "code": "new Promise(() => {})"}, tab, timeout=0.5)
    assert isinstance(hang, Unknown) and hang.failure.code == "timeout"
    assert hang.failure.error == "Command timed out after 0.5s"


def test_wait_for_result_polls_until_truthy(act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/wait"))
    value = done(act({"action": "waitForResult", "code": "document.querySelector('#late')?.textContent",
                      "interval": 0.05}, tab, timeout=5))
    assert value == {"value": "I arrived late."}
    counted = done(act({"action": "waitForResult", "interval": 0.01,
                        "code": "window.__polls = (window.__polls || 0) + 1; return window.__polls >= 3 && []"},
                       tab))
    assert counted == {"value": []}  # an empty array is truthy in JavaScript
    never = act({"action": "waitForResult", "code": "false", "interval": 0.05}, tab, timeout=0.5)
    assert isinstance(never, Unknown) and never.failure.code == "timeout"


# --- tabs ------------------------------------------------------------------------------------


def test_tab_actions_new_switch_list_and_close(act: Act, chromium: ChromiumBrowser, site: TestSite, tab: int) -> None:
    opened = done(act({"action": "newTab", "url": site.url("/links")}, None))
    other = opened["tabId"]
    assert opened == {"tabId": other, "url": site.url("/links")}
    assert done(act({"action": "title"}, other)) == {"title": "Links"}
    assert done(act({"action": "switchTab"}, tab)) == {"tabId": tab}
    listed = {t["tabId"]: t for t in done(act({"action": "getTabs"}, None))["tabs"]}
    assert listed[other] == {"tabId": other, "url": site.url("/links"), "title": "Links",
                             "session": None}  # a user tab: in no agent's session; the current tab is an agent's

    assert done(act({"action": "closeTab"}, other)) == {"tabId": other}
    assert other not in chromium.tab_ids()
    closed = act({"action": "url"}, other)
    assert isinstance(closed, Failed) and closed.failure.code == "tab_closed" and not closed.failure.retryable
    write = act({"action": "click", "selector": "a"}, other)
    assert isinstance(write, Failed) and write.failure.code == "tab_closed"

    none = act({"action": "url"}, None)  # the driver keeps no current tab: the node keeps each agent's
    assert isinstance(none, Failed) and none.failure.code == "no_tab"


def test_pages_the_site_opens_get_tab_ids(act: Act, chromium: ChromiumBrowser, tab: int, site: TestSite,
                                          run: Run[Any]) -> None:
    goto(act, tab, site.url("/popups"))
    for selector in ("#open-popup", "#blank-link"):
        before = chromium.tab_ids()
        done(act({"action": "click", "selector": selector}, tab))
        deadline = time.monotonic() + 5
        while chromium.tab_ids() == before and time.monotonic() < deadline:
            time.sleep(0.02)
        (popup,) = chromium.tab_ids() - before
        assert popup > tab
        done(act({"action": "waitFor", "loadState": "load"}, popup))
        assert done(act({"action": "title"}, popup)) == {"title": "Popup child"}
        assert text_of(act, popup, "#child") == "I am the popup child."
        run(chromium.close_tab(popup))


def test_through_its_tab_actor_a_tabs_writes_run_one_at_a_time_and_its_reads_beside_them(
        chromium: ChromiumBrowser, loop_thread: LoopThread, tab: int, act: Act, site: TestSite) -> None:
    goto(act, tab, site.url("/text"))
    actor = TabActor.start(tab, chromium, IoLoop(loop_thread.loop))
    try:
        slow = Js(code="window.__busy = true; await new Promise(r => setTimeout(r, 1000)); window.__busy = false; "
                       "return 1")
        first = actor.ask(Ticket(TabRequest(slow, 10), 10), block=False)
        time.sleep(0.1)
        second = actor.ask(Ticket(TabRequest(Js(code="window.__busy"), 10), 10), block=False)
        read = actor.ask(Ticket(TabRequest(Url(), 10), 10), block=False).get(timeout=0.8)  # while the first write runs
        assert done(read) == {"url": site.url("/text")}
        assert done(first.get(timeout=10)) == {"value": 1}
        assert done(second.get(timeout=10)) == {"value": False}  # it waited for the first write to end
    finally:
        actor.stop()


def test_eight_tabs_click_concurrently(chromium: ChromiumBrowser, run: Run[Any], site: TestSite) -> None:
    clicks = 10

    async def open_tabs(n: int) -> list[int]:
        tabs = [await chromium.new_tab() for _ in range(n)]
        for t in tabs:
            assert isinstance(await chromium.execute(parse_command(
                {"action": "navigate", "url": site.url("/clicks")}), t, 10), Done)
        return tabs

    async def click_many(t: int) -> list[float]:
        timings = []
        for i in range(clicks):
            started = time.perf_counter()
            outcome = await chromium.execute(Click(selector=f"#b{i}"), t, 10)
            timings.append(time.perf_counter() - started)
            assert isinstance(outcome, Done), outcome
        return timings

    async def measure(tabs: list[int]) -> tuple[float, list[list[float]]]:
        started = time.perf_counter()
        timings = await asyncio.gather(*(click_many(t) for t in tabs))
        return time.perf_counter() - started, timings

    (alone,) = run(open_tabs(1))
    one_elapsed, one_timings = run(measure([alone]))
    eight = run(open_tabs(8))
    eight_elapsed, eight_timings = run(measure(eight))
    for t in [alone, *eight]:
        outcome = run(chromium.execute(parse_command({"action": "pageText", "selector": "#local-count"}), t, 10))
        assert done(outcome) == {"text": str(clicks), "truncated": False}
        run(chromium.close_tab(t))
    flat = [x for timings in eight_timings for x in timings]
    print(f"\n1 tab: {clicks} clicks in {one_elapsed * 1000:.0f} ms "
          f"({clicks / one_elapsed:.1f}/s, median {sorted(one_timings[0])[clicks // 2] * 1000:.0f} ms); "
          f"8 tabs: {8 * clicks} clicks in {eight_elapsed * 1000:.0f} ms ({8 * clicks / eight_elapsed:.1f}/s, "
          f"median {sorted(flat)[len(flat) // 2] * 1000:.0f} ms, slowest {max(flat) * 1000:.0f} ms)")


# --- context state ---------------------------------------------------------------------------


def test_cookies_get_set_and_clear(act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/cookies/set?name=flavor&value=ginger"))
    assert site.count("GET /cookies/set") == 1
    cookies = done(act({"action": "cookies"}, tab))["cookies"]
    assert {(c["name"], c["value"]) for c in cookies} >= {("flavor", "ginger")}
    assert done(act({"action": "cookies", "op": "set", "cookies": [{"name": "mood", "value": "calm"}]}, tab)) == \
        {"set": 1}
    goto(act, tab, site.url("/cookies"))
    server = text_of(act, tab, "#server-cookies")
    assert "mood=calm" in server and "flavor=ginger" in server
    cleared = done(act({"action": "cookies", "op": "clear"}, tab))
    assert cleared["cleared"] >= 2
    assert done(act({"action": "cookies"}, tab)) == {"cookies": []}
    goto(act, tab, site.url("/cookies"))
    assert text_of(act, tab, "#server-cookies") == ""
    with pytest.raises(KitsuneError) as bad:  # refused when the command is parsed, before anything is sent
        parse_command({"action": "cookies", "op": "set", "cookies": [{"name": "x", "value": SECRET, "color": 1}]})
    assert bad.value.code == "invalid_parameter" and SECRET not in bad.value.message


def test_storage_reads_and_changes_what_the_page_sees(act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/storage"))
    done(act({"action": "storage", "op": "clear"}, tab))
    assert done(act({"action": "storage", "op": "set", "key": "fruit", "value": "plum"}, tab)) == {"set": "fruit"}
    done(act({"action": "storage", "op": "set", "key": "veg", "value": "leek"}, tab))
    assert done(act({"action": "storage", "key": "fruit"}, tab)) == {"value": "plum"}
    assert done(act({"action": "storage"}, tab)) == {"items": {"fruit": "plum", "veg": "leek"}}
    done(act({"action": "click", "selector": "#show"}, tab))
    assert text_of(act, tab, "#dump") == '{"fruit":"plum","veg":"leek"}'  # what the page itself reads
    assert done(act({"action": "storage", "op": "remove", "key": "veg"}, tab)) == {"removed": "veg", "existed": True}
    done(act({"action": "storage", "op": "set", "area": "session", "key": "s", "value": "1"}, tab))
    assert done(act({"action": "storage", "area": "session"}, tab)) == {"items": {"s": "1"}}
    assert done(act({"action": "storage", "op": "clear"}, tab)) == {"cleared": 1}
    done(act({"action": "click", "selector": "#show"}, tab))
    assert text_of(act, tab, "#dump") == "{}"

    goto(act, tab, "about:blank")
    blank = act({"action": "storage", "op": "set", "key": "k", "value": SECRET}, tab)
    assert isinstance(blank, Failed) and blank.failure.code == "storage_unavailable"
    assert SECRET not in blank.failure.error


def test_clipboard_goes_through_the_page(act: Act, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/form"))
    assert done(act({"action": "clipboard", "op": "write", "text": "copied words"}, tab)) == {"written": True}
    assert done(act({"action": "clipboard"}, tab)) == {"text": "copied words"}
    done(act({"action": "press", "selector": "#name", "key": "ControlOrMeta+V"}, tab))  # the page pastes it
    assert value_of(act, tab, "document.querySelector('#name').value") == "copied words"
    goto(act, tab, "about:blank")  # no clipboard API here: the in-page fallback (copy and paste keys)
    done(act({"action": "clipboard", "op": "write", "text": "fallback words"}, tab))
    assert done(act({"action": "clipboard"}, tab)) == {"text": "fallback words"}


def test_download_saves_the_file_once(act: Act, chromium: ChromiumBrowser, tab: int, site: TestSite) -> None:
    goto(act, tab, site.url("/download"))
    value = done(act({"action": "download", "selector": "#download"}, tab))
    assert value == {"filename": REPORT_NAME, "size": len(REPORT_CONTENT),
                     "sha256": hashlib.sha256(REPORT_CONTENT).hexdigest()}
    assert chromium.downloads_dir is not None
    assert (chromium.downloads_dir / REPORT_NAME).read_bytes() == REPORT_CONTENT
    assert site.count(f"GET /download/{REPORT_NAME}") == 1
    again = done(act({"action": "download", "selector": "#download"}, tab))
    assert again["filename"] == "report (1).txt"
    missing = act({"action": "download", "selector": "#nothing"}, tab, timeout=0.5)
    assert isinstance(missing, Failed) and missing.failure.retryable
    assert site.count(f"GET /download/{REPORT_NAME}") == 2


# --- crashes ---------------------------------------------------------------------------------


def test_a_tab_that_crashes_mid_command_is_unknown_then_closed(chromium: ChromiumBrowser, loop_thread: LoopThread,
                                                               run: Run[Any], site: TestSite) -> None:
    crashing = run(chromium.new_tab(site.url("/text")))
    in_flight = loop_thread.submit(chromium.execute(Js(code="new Promise(() => {})"), crashing, 10))
    time.sleep(0.3)

    async def crash() -> None:
        page = chromium.page(crashing)
        session = await page.context.new_cdp_session(page)
        with contextlib.suppress(Exception):  # the session dies with the renderer
            await asyncio.wait_for(session.send("Page.crash"), 2)

    run(crash())
    outcome = in_flight.result(10)
    assert isinstance(outcome, Unknown) and outcome.failure.code == "tab_closed", outcome
    assert crashing not in chromium.tab_ids()
    after = run(chromium.execute(Url(), crashing, 5))
    assert isinstance(after, Failed) and after.failure.code == "tab_closed"


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return True
    return state in ("Z", "X")


def test_a_killed_browser_restarts_and_its_tabs_end_closed(loop_thread: LoopThread, run: Run[Any],
                                                            site: TestSite) -> None:
    browser = ChromiumBrowser()
    run(browser.start())
    try:
        first = run(browser.new_tab(site.url("/text")))
        pid = run(chromium_pid(browser, first))
        assert not _gone(pid)
        in_flight = loop_thread.submit(browser.execute(Js(code="new Promise(() => {})"), first, 20))
        read = loop_thread.submit(browser.execute(Url(), first, 20))
        time.sleep(0.3)
        os.kill(pid, signal.SIGKILL)
        outcome = in_flight.result(20)
        assert isinstance(outcome, Unknown) and outcome.failure.code == "tab_closed", outcome
        assert isinstance(read.result(20), Done | Failed)  # a read never ends unknown
        deadline = time.monotonic() + 20
        while browser.restarts < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert browser.restarts == 1
        assert first not in browser.tab_ids()
        closed = run(browser.execute(Url(), first, 5))
        assert isinstance(closed, Failed) and closed.failure.code == "tab_closed"
        opened = done(run(browser.execute(NewTab(url=site.url("/links")), None, 10)))
        assert opened["tabId"] > first
        assert done(run(browser.execute(parse_command({"action": "title"}), opened["tabId"], 5))) == {"title": "Links"}
        new_pid = run(chromium_pid(browser, opened["tabId"]))
        assert new_pid != pid
    finally:
        run(browser.stop())
    assert _gone(pid)
    assert _gone(new_pid)


# --- spare windows ----------------------------------------------------------------------------


def _page_targets(chromium: ChromiumBrowser, run: Run[Any], any_tab: int) -> list[dict[str, Any]]:
    """Chromium's page targets, spare windows included: ``{targetId, url, browserContextId, ...}``."""
    async def targets() -> list[dict[str, Any]]:
        browser = chromium.page(any_tab).context.browser
        assert browser is not None
        cdp = await browser.new_browser_cdp_session()
        try:
            return [t for t in (await cdp.send("Target.getTargets"))["targetInfos"] if t["type"] == "page"]
        finally:
            await cdp.detach()
    found: list[dict[str, Any]] = run(targets())
    return found


def _target_of(chromium: ChromiumBrowser, run: Run[Any], tab: int) -> dict[str, Any]:
    async def info() -> dict[str, Any]:
        page = chromium.page(tab)
        found: dict[str, Any] = (await (await page.context.new_cdp_session(page)).send("Target.getTargetInfo"))
        return dict(found["targetInfo"])
    target: dict[str, Any] = run(info())
    return target


def _spares(chromium: ChromiumBrowser, run: Run[Any], any_tab: int, context: str) -> list[dict[str, Any]]:
    return [t for t in _page_targets(chromium, run, any_tab)
            if t["browserContextId"] == context and t["url"].startswith("about:blank#kitsune-spare-")]


def test_a_new_tab_with_a_url_takes_the_spare_window_made_once_the_last_one_loaded_and_a_spare_is_no_tab(
        chromium: ChromiumBrowser, run: Run[Any], act: Act, site: TestSite) -> None:
    first = run(chromium.new_tab(site.url("/form")))
    context = _target_of(chromium, run, first)["browserContextId"]
    until(lambda: chromium.spares.ready(context), 10, "a spare window once the browser is idle")
    spare = _spares(chromium, run, first, context)
    assert len(spare) == 1
    listed = run(chromium.tabs())
    assert [t["tabId"] for t in listed] == sorted(chromium.tab_ids())  # no listing shows it
    assert not [t for t in listed if "kitsune-spare" in t["url"]]

    second = run(chromium.new_tab(site.url("/links")))
    assert second == first + 1  # the spare took no id of its own
    assert _target_of(chromium, run, second)["targetId"] == spare[0]["targetId"]
    assert done(act({"action": "title"}, second)) == {"title": "Links"}
    assert done(act({"action": "fill", "selector": "#name", "value": "Ada"}, first)) == {}

    async def window(tab_id: int) -> int:
        session = await chromium.page(tab_id).context.new_cdp_session(chromium.page(tab_id))
        return int((await session.send("Browser.getWindowForTarget"))["windowId"])
    assert run(window(first)) != run(window(second))  # a window of its own, as every tab
    until(lambda: chromium.spares.ready(context), 10, "the next spare window")
    again = _spares(chromium, run, first, context)
    assert len(again) == 1 and again[0]["targetId"] != spare[0]["targetId"]
    run(chromium.close_tab(second))
    run(chromium.close_tab(first))


def test_a_one_shot_session_gets_no_spare_window_and_a_sessions_spare_ends_with_it(
        chromium: ChromiumBrowser, run: Run[Any], site: TestSite) -> None:
    def open_in(session: str, call: int) -> int:
        outcome = run(chromium.execute(NewTab(url=site.url("/form"), session=session), None, 10.0,
                                       agent="alice", call=call))
        assert isinstance(outcome, Done), outcome
        return int(outcome.value["tabId"])
    handle = run(chromium.new_tab())  # a user tab to reach the browser through, while the others close
    kept = open_in("spares", 1)
    kept_context = _target_of(chromium, run, kept)["browserContextId"]
    until(lambda: chromium.spares.ready(kept_context), 10, "the reuse session's spare window")

    one_shot = open_in("call", 2)
    one_shot_context = _target_of(chromium, run, one_shot)["browserContextId"]
    deadline = time.monotonic() + 1.5  # long enough for a spare to open (about 0.1 s here)
    while time.monotonic() < deadline:
        assert not _spares(chromium, run, kept, one_shot_context)
        time.sleep(0.1)
    run(chromium.close_tab(one_shot))

    session = chromium.sessions.table.find("alice", "spares")
    assert session is not None
    run(chromium.sessions.close(session, "closed"))
    until(lambda: not [t for t in _page_targets(chromium, run, handle) if t["browserContextId"] == kept_context],
          10, "the session's windows closing, its spare too")
    run(chromium.close_tab(handle))


def test_at_most_two_spare_windows_are_kept_and_one_replaces_another_only_once_that_one_went_unused(
        chromium: ChromiumBrowser, run: Run[Any], site: TestSite, monkeypatch: pytest.MonkeyPatch) -> None:
    handle = run(chromium.new_tab())
    contexts: dict[str, str] = {}

    def open_in(name: str) -> None:
        outcome = run(chromium.execute(NewTab(url=site.url("/form"), session=name), None, 10.0, agent="alice",
                                       call=10))
        assert isinstance(outcome, Done), outcome
        contexts[name] = _target_of(chromium, run, int(outcome.value["tabId"]))["browserContextId"]

    def spare_contexts() -> set[str]:
        return {t["browserContextId"] for t in _page_targets(chromium, run, handle)
                if t["url"].startswith("about:blank#kitsune-spare-")}

    monkeypatch.setattr(spares, "SPARE_STALE", 0.0)  # any spare earlier tests left gives way
    def spare_of(name: str) -> None:
        open_in(name)
        until(lambda: chromium.spares.ready(contexts[name]), 10, f"{name}'s spare window")
    spare_of("limit-a")
    spare_of("limit-b")
    until(lambda: spare_contexts() == {contexts["limit-a"], contexts["limit-b"]}, 10, "the two spares kept")

    monkeypatch.setattr(spares, "SPARE_STALE", 3600.0)
    open_in("limit-c")  # two fresh spares: none for it, and none closed for it
    deadline = time.monotonic() + 1.0  # long enough for a spare to open (about 0.1 s here)
    while time.monotonic() < deadline:
        assert spare_contexts() == {contexts["limit-a"], contexts["limit-b"]}
        time.sleep(0.1)

    monkeypatch.setattr(spares, "SPARE_STALE", 0.0)
    open_in("limit-c")  # now the oldest unused one gives way
    until(lambda: spare_contexts() == {contexts["limit-b"], contexts["limit-c"]}, 10, "limit-a's spare replaced")
    for name in contexts:
        session = chromium.sessions.table.find("alice", name)
        assert session is not None
        run(chromium.sessions.close(session, "closed"))
    until(lambda: spare_contexts() == set(), 10, "the sessions' spares closing with them")
    run(chromium.close_tab(handle))


def test_a_spare_window_is_made_only_while_the_browser_is_idle(
        chromium: ChromiumBrowser, run: Run[Any], loop_thread: LoopThread, site: TestSite) -> None:
    async def open_then_wait() -> tuple[Outcome, asyncio.Task[Outcome]]:
        opened = await chromium.execute(NewTab(url=site.url("/form"), session="idle"), None, 10.0, agent="bob", call=20)
        assert isinstance(opened, Done), opened
        waiting = parse_command({"action": "waitFor", "selector": "#never", "timeout": 4})  # the browser stays busy
        return opened, asyncio.get_running_loop().create_task(
            chromium.execute(waiting, int(opened.value["tabId"]), 4.0))
    opened, waiting = run(open_then_wait())
    assert isinstance(opened, Done)
    tab = int(opened.value["tabId"])
    context = _target_of(chromium, run, tab)["browserContextId"]
    busy_until = time.monotonic() + 1.0
    while time.monotonic() < busy_until:
        assert not chromium.spares.ready(context) and not _spares(chromium, run, tab, context)
        time.sleep(0.1)
    assert isinstance(loop_thread.submit(_finished(waiting)).result(10), Failed)
    until(lambda: chromium.spares.ready(context), 10, "the spare window once the command ended")
    session = chromium.sessions.table.find("bob", "idle")
    assert session is not None
    run(chromium.sessions.close(session, "closed"))


async def _finished(task: asyncio.Task[Outcome]) -> Outcome:
    return await task
