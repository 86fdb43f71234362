"""A scripted agent that never writes a selector (issue 30, Must show #1): over MCP with the SDK's own client
(streamable HTTP to a node's ``/mcp``), it opens a tab whose answer is the page's snapshot, picks elements by
role and name from the text, acts by ref (one ``browser_fill_form`` with text, a select and a checkbox, then
``browser_click``) and reads what changed in each write's answer. It completes the test site's 20-field sign-up
form and its three-page checkout (shipping, billing, confirmation), each write counted once at the site."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from mcp import ClientSession

from tests.e2e.clients import call, over_http
from tests.integration.serving import Served
from tests.site import TestSite
from tests.site.pages import LONG_FORM_FIELDS, LONG_FORM_SIZE

pytestmark = pytest.mark.anyio

_ELEMENT = re.compile(r'^\s*(?:[+~-] )?(?:- )?(?P<role>[a-z]+) "(?P<name>(?:[^"\\]|\\.)*)"'
                      r"[^\n]*?\[ref=(?P<ref>[a-z0-9]+)\]")
"""An element's line in a snapshot (``- textbox "Email" [ref=t3d2e5]``) or a diff (``~ - textbox ...``)."""


@dataclass(frozen=True)
class Element:
    role: str
    name: str
    ref: str


def elements_in(text: str) -> list[Element]:
    """The elements with a ref a snapshot's (or a diff's) text names, each with its role and name."""
    found = []
    for line in text.splitlines():
        match = _ELEMENT.match(line)
        if match is not None:
            found.append(Element(match["role"], json.loads(f'"{match["name"]}"'), match["ref"]))
    return found


def pick(text: str, role: str, name: str) -> str:
    """The ref of the one element of ``role`` named ``name`` in ``text``, as a model finds ``textbox "Email"``."""
    hits = [e.ref for e in elements_in(text) if (e.role, e.name) == (role, name)]
    if len(hits) != 1:
        raise LookupError(f'{len(hits)} elements are {role} "{name}" in:\n{text}')
    return hits[0]


def test_pick_finds_an_element_by_role_and_name() -> None:
    text = ('- generic [active] [ref=t1d1e1]:\n  - heading "Sign \\"in\\"" [level=1] [ref=t1d1e2]\n'
            '  - textbox "Email" [ref=t1d1e5]: ada@example.test\n  - textbox "Email again" [ref=t1d1e6]\n'
            '  - checkbox "Terms" [checked] [ref=t1d1e7]\n  - button "Go" [ref=t1d1e8]\n  - text: Email')
    assert pick(text, "textbox", "Email") == "t1d1e5"
    assert pick(text, "checkbox", "Terms") == "t1d1e7"
    assert pick(text, "heading", 'Sign "in"') == "t1d1e2"
    assert pick('~ - button "Go" [ref=t1d2e8]\n+ - link "More" [ref=t1d2e9]', "link", "More") == "t1d2e9"
    with pytest.raises(LookupError):
        pick(text, "button", "Email")
    with pytest.raises(LookupError):
        pick(text + '\n  - button "Go" [ref=t1d1e9]', "button", "Go")


@dataclass
class Agent:
    """What a model does with the tools: it knows the page only from the snapshots and diffs it was given."""

    session: ClientSession
    tab: int = 0
    page: str = ""
    """The text of the last whole snapshot it read (its refs are the ones it acts with)."""
    sent: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def use(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        self.sent.append((tool, arguments))
        result = await call(self.session, tool, arguments)
        assert result.get("status", "ok") == "ok" and "error" not in result, result
        return result

    async def open(self, url: str) -> str:
        """A new tab at ``url``: its answer is the page it arrived on (no snapshot call of its own)."""
        opened = await self.use("browser_tabs", {"op": "new", "url": url})
        self.tab = opened["tabId"]
        return self.seen(opened["page"])

    def ref(self, role: str, name: str) -> str:
        return pick(self.page, role, name)

    def seen(self, page: dict[str, Any]) -> str:
        """What changed as a write's answer says it: a diff, or the new document's whole snapshot."""
        if "snapshot" in page:
            assert page["documentChanged"] is True and "truncated" not in page  # not cut
            self.page = page["snapshot"]
            return str(page["snapshot"])
        return str(page["diff"])

    async def fill(self, values: dict[str, str | list[str] | bool]) -> str:
        """One ``browser_fill_form``: text into a textbox, options of a combobox, a checkbox (un)checked."""
        role = {str: ("textbox", "value"), list: ("combobox", "values"), bool: ("checkbox", "checked")}
        fields = [{"ref": self.ref(role[type(value)][0], label), role[type(value)][1]: value}
                  for label, value in values.items()]
        filled = await self.use("browser_fill_form", {"tabId": self.tab, "fields": fields})
        return self.seen(filled["page"])

    async def click(self, role: str, name: str) -> str:
        clicked = await self.use("browser_click", {"tabId": self.tab, "ref": self.ref(role, name)})
        return self.seen(clicked["page"])

    def never_wrote_a_selector(self) -> None:
        assert "selector" not in json.dumps([arguments for _, arguments in self.sent])


def changed(diff: str, role: str, name: str) -> list[str]:
    """The ``~`` lines (with their properties) of the element ``role "name"`` in a diff."""
    blocks = re.split(r"\n(?=[+~-] )", diff)
    head = re.compile(rf'~ (?:- )?{role} {re.escape(json.dumps(name))}')
    return [block for block in blocks if head.match(block)]


SIGN_UP = {label: f"{label.split()[0].lower()}-value" for _, label in LONG_FORM_FIELDS} | {
    "Email": "ada@example.test", "Website": "https://ada.example.test", "Phone": "+33 1 23 45 67 89"}


async def test_the_agent_fills_the_20_field_form_by_ref_and_it_is_sent_once(plain: Served, site: TestSite) -> None:
    async with over_http(plain) as session:
        agent = Agent(session)
        await agent.open(site.url("/form20"))
        assert agent.ref("heading", "Create your account")
        diff = await agent.fill({**SIGN_UP, "Country": ["Japan"], "I accept the terms": True})
        for label, value in SIGN_UP.items():  # each field's new value, read from the diff alone
            assert changed(diff, "textbox", label) and changed(diff, "textbox", label)[0].endswith(
                f": {value}"), (label, diff)
        assert changed(diff, "combobox", "Country")
        ticked = changed(diff, "checkbox", "I accept the terms")
        assert ticked and "[checked]" in ticked[0]
        assert "Create account" not in diff and site.counts() == {}
        welcome = await agent.click("button", "Create account")
        assert agent.ref("heading", "Welcome aboard") and agent.page == welcome
        assert f"{LONG_FORM_SIZE} of {LONG_FORM_SIZE} fields received, submission number 1." in welcome
        agent.never_wrote_a_selector()
        assert [tool for tool, _ in agent.sent] == ["browser_tabs", "browser_fill_form", "browser_click"]
    assert site.wait_for_count("POST /form20") == 1
    by_label = {label: name for name, label in LONG_FORM_FIELDS}
    assert site.last_form == {**{by_label[label]: [value] for label, value in SIGN_UP.items()},
                              "country": ["jp"], "terms": ["accepted"]}
    time.sleep(0.3)
    assert site.counts() == {"POST /form20": 1}


async def test_the_agent_checks_out_over_three_pages_by_ref_each_write_once(plain: Served, site: TestSite) -> None:
    async with over_http(plain) as session:
        agent = Agent(session)
        await agent.open(site.url("/checkout/shipping"))
        assert agent.ref("heading", "Shipping")
        assert changed(await agent.fill({"Address": "1 Fox Lane"}), "textbox", "Address")
        billing = await agent.click("button", "Continue to billing")
        assert agent.ref("heading", "Billing") and "Shipping to 1 Fox Lane" in billing
        assert site.counts() == {"POST /checkout/shipping": 1}
        assert changed(await agent.fill({"Card": "4242424242424242"}), "textbox", "Card")
        confirmed = await agent.click("button", "Place order")
        assert agent.ref("heading", "Order confirmed")
        assert "ORDER-0001" in confirmed and "4242" in confirmed and "1 Fox Lane" in confirmed
        agent.never_wrote_a_selector()
        assert [tool for tool, _ in agent.sent] == ["browser_tabs", "browser_fill_form", "browser_click",
                                                    "browser_fill_form", "browser_click"]
    time.sleep(0.3)
    assert site.counts() == {"POST /checkout/shipping": 1, "POST /checkout/billing": 1}
    assert site.last_form == {"card": ["4242424242424242"]}
