"""Snapshots with refs (issue 30) against a real Chromium and the test site, through the driver.

A ref acts once, where the snapshot said; a ref of another document, tab or session is ``stale_ref``
with nothing sent (the site's counters stay at 0).
"""

from __future__ import annotations

import re
from typing import Any

from driver import ChromiumBrowser
from messages.commands import parse_command
from messages.results import Done, Failed, Outcome
from tests.integration.browser_fixtures import *  # noqa: F403 - the fixtures, used by name
from tests.integration.browser_fixtures import Act, Run
from tests.site import ANY, TestSite

PASSWORD = "hunter2-correct-horse"


def done(outcome: Outcome) -> dict[str, Any]:
    assert isinstance(outcome, Done), outcome
    return dict(outcome.value)


def ref_of(text: str, line: str) -> str:
    """The ref on the first line of ``text`` that holds ``line`` (``textbox "Name"``)."""
    for row in text.splitlines():
        if line in row:
            found = re.search(r"\[ref=(t\d+d\d+(?:f\d+)?e\d+)\]", row)
            assert found is not None, row
            return found.group(1)
    raise AssertionError(f"{line!r} is not in the snapshot:\n{text}")


def snap(act: Act, tab: int, **options: Any) -> dict[str, Any]:
    return done(act({"action": "snapshot", **options}, tab))


def test_a_snapshot_of_the_form_has_refs_that_fill_and_click_once(act: Act, tab: int, site: TestSite) -> None:
    done(act({"action": "navigate", "url": site.url("/form")}, tab))
    shot = snap(act, tab)
    text = shot["snapshot"]
    assert 'heading "Form"' in text and shot["document"].startswith(f"t{tab}d") and shot["truncated"] is False
    name, submit = ref_of(text, 'textbox "Name"'), ref_of(text, 'button "Submit"')
    assert {"ref": name, "role": "textbox", "name": "Name"} in shot["elements"]
    done(act({"action": "fill", "ref": name, "value": "Ada"}, tab))
    done(act({"action": "check", "ref": ref_of(text, 'checkbox "I agree"')}, tab))
    assert site.count("POST /form") == 0
    done(act({"action": "click", "ref": submit}, tab))
    assert site.wait_for_count("POST /form", 1) == 1
    assert site.last_form["name"] == ["Ada"] and site.last_form["agree"] == ["yes"]
    assert site.count("POST /form") == 1


def test_a_ref_after_a_navigation_is_stale_and_sends_nothing(act: Act, tab: int, site: TestSite) -> None:
    done(act({"action": "navigate", "url": site.url("/form")}, tab))
    submit = ref_of(snap(act, tab)["snapshot"], 'button "Submit"')
    done(act({"action": "navigate", "url": site.url("/form")}, tab))  # the same page, another document
    site.reset()
    outcome = act({"action": "click", "ref": submit}, tab)
    assert isinstance(outcome, Failed) and outcome.failure.code == "stale_ref" and outcome.failure.retryable
    fresh = snap(act, tab)  # even once the new document has a snapshot (Playwright's refs start again)
    assert fresh["document"] != submit[: len(fresh["document"])]
    outcome = act({"action": "click", "ref": submit}, tab)
    assert isinstance(outcome, Failed) and outcome.failure.code == "stale_ref"
    assert site.count(ANY) == 0


def test_a_ref_of_another_tab_or_session_is_stale(chromium: ChromiumBrowser, run: Run[Any], act: Act, tab: int,
                                                  site: TestSite) -> None:
    done(act({"action": "navigate", "url": site.url("/form")}, tab))
    submit = ref_of(snap(act, tab)["snapshot"], 'button "Submit"')
    other = run(chromium.new_tab(site.url("/form")))
    try:
        snap(act, other)
        site.reset()
        outcome = act({"action": "click", "ref": submit}, other)
        assert isinstance(outcome, Failed) and outcome.failure.code == "stale_ref"
        command = parse_command({"action": "click", "ref": submit})
        outcome = run(chromium.execute(command, tab, 10.0, agent="someone", session="s1"))
        assert isinstance(outcome, Failed) and outcome.failure.code == "stale_ref"
        assert site.count(ANY) == 0
    finally:
        run(chromium.close_tab(other))


def test_a_diff_since_the_last_snapshot_names_what_changed(act: Act, tab: int, site: TestSite) -> None:
    done(act({"action": "navigate", "url": site.url("/form")}, tab))
    full = snap(act, tab)
    first = snap(act, tab, since="last")
    assert first["diff"] == "(no change)" and first["changes"] == 0
    name = ref_of(full["snapshot"], 'textbox "Name"')
    done(act({"action": "fill", "ref": name, "value": "Grace"}, tab))
    changed = snap(act, tab, since="last")
    assert changed["changes"] == 1 and name in changed["diff"] and "Grace" in changed["diff"]
    assert len(changed["diff"]) <= 0.05 * len(full["snapshot"]) + 80
    done(act({"action": "navigate", "url": site.url("/")}, tab))
    moved = snap(act, tab, since="last")
    assert moved["documentChanged"] is True and "snapshot" in moved


def test_max_chars_cuts_at_an_element_and_says_where_the_rest_is(act: Act, tab: int, site: TestSite) -> None:
    done(act({"action": "navigate", "url": site.url("/form")}, tab))
    whole = snap(act, tab)["snapshot"].splitlines()
    cut = snap(act, tab, maxChars=200)
    shown = cut["snapshot"].splitlines()
    assert cut["truncated"] is True and shown[-1].startswith("# cut at line")
    assert f"offset={cut['nextOffset']}" in shown[-1]
    assert shown[:-1] == whole[: cut["nextOffset"]] and len("\n".join(shown[:-1])) <= 200
    rest = snap(act, tab, offset=cut["nextOffset"])["snapshot"].splitlines()
    assert rest == whole[cut["nextOffset"]:]


def test_interactive_mode_keeps_what_one_acts_on_and_its_headings(act: Act, tab: int, site: TestSite) -> None:
    done(act({"action": "navigate", "url": site.url("/form")}, tab))
    full = snap(act, tab)["snapshot"]
    brief = snap(act, tab, interactive=True)["snapshot"]
    assert 'heading "Form"' in brief and 'button "Submit"' in brief and 'radio "Pro"' in brief
    assert 'textbox "Name"' in full and "text: Name" not in full  # a label that repeats its field's name
    assert "- paragraph" not in brief and len(brief) < len(full)


def test_a_password_field_never_shows_its_value(act: Act, tab: int, site: TestSite) -> None:
    done(act({"action": "navigate", "url": site.url("/form")}, tab))
    done(act({"action": "js", "code": "document.querySelector('#form').insertAdjacentHTML('afterbegin', "
                                      "'<label>Password <input id=pw type=password></label>')"}, tab))
    done(act({"action": "fill", "selector": "#pw", "value": PASSWORD}, tab))
    shot = snap(act, tab)
    assert PASSWORD not in str(shot) and 'textbox "Password"' in shot["snapshot"]
    assert PASSWORD not in str(snap(act, tab, since="last"))


def test_a_password_typed_after_a_snapshot_of_the_same_document_never_shows(act: Act, tab: int,
                                                                          site: TestSite) -> None:
    done(act({"action": "navigate", "url": site.url("/form")}, tab))
    done(act({"action": "js", "code": "document.querySelector('#form').insertAdjacentHTML('afterbegin', "
                                      "'<label>Password <input id=pw type=password></label>')"}, tab))
    first = snap(act, tab)  # the document known, no value typed: the next snapshot may skip the page's state
    done(act({"action": "fill", "selector": "#pw", "value": PASSWORD}, tab))
    again = snap(act, tab)
    assert again["document"] == first["document"] and PASSWORD not in str(again)
    assert 'textbox "Password"' in again["snapshot"] and "••••" in again["snapshot"]


def test_a_frame_s_ref_is_stale_once_its_frame_has_another_document(act: Act, tab: int, site: TestSite) -> None:
    done(act({"action": "navigate", "url": site.url("/form")}, tab))
    done(act({"action": "js", "code": "document.body.insertAdjacentHTML('beforeend', '<iframe id=f srcdoc=\"<button "
                                      "onclick=&quot;parent.hits=(parent.hits||0)+1&quot;>Inside</button>\">"
                                      "</iframe>'); new Promise((r) => document.getElementById('f').onload = r)"}, tab))
    inside = ref_of(snap(act, tab)["snapshot"], 'button "Inside"')
    assert "f" in inside[inside.index("d") + 1:]  # a frame's ref, addressable like the top document's
    done(act({"action": "click", "ref": inside}, tab))
    assert done(act({"action": "js", "code": "window.hits"}, tab))["value"] == 1
    done(act({"action": "js", "code": "const f = document.getElementById('f'); f.srcdoc = f.srcdoc + ' '; "
                                      "new Promise((r) => f.onload = r)"}, tab))
    outcome = act({"action": "click", "ref": inside}, tab)
    assert isinstance(outcome, Failed) and outcome.failure.code == "stale_ref"
    assert done(act({"action": "js", "code": "window.hits"}, tab))["value"] == 1
