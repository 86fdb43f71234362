"""The action table: which plain function runs each action class (blocks, barriers, newTab and
getTabs are not in it: the engine runs blocks, and the driver itself opens and lists tabs)."""

from __future__ import annotations

from driver import elements, navigation, reads, scripts
from driver.cdp import cdp, cdp_events, cdp_spec
from driver.run import Action
from driver.site_tools.actions import call_site_tool, site_tools
from driver.snapshots import snapshot
from messages.commands import (
    CallSiteTool,
    Cdp,
    CdpEvents,
    CdpSpec,
    Check,
    Click,
    Clipboard,
    CloseTab,
    Command,
    Cookies,
    Download,
    Fill,
    Find,
    Js,
    Navigate,
    PageText,
    Press,
    Screenshot,
    Select,
    SiteTools,
    Snapshot,
    Storage,
    SubmitForm,
    SwitchTab,
    Title,
    Type,
    Url,
    WaitFor,
    WaitForResult,
)

__all__ = ["ACTIONS", "DEADLINE_BOUND"]

ACTIONS: dict[type[Command], Action] = {
    Navigate: navigation.navigate, CloseTab: navigation.close_tab, SwitchTab: navigation.switch_tab,
    Click: elements.click, Type: elements.type_text, Fill: elements.fill, Select: elements.select,
    Press: elements.press, Check: elements.check, SubmitForm: elements.submit_form, Download: elements.download,
    PageText: reads.page_text, Find: reads.find, Url: reads.url, Title: reads.title, Screenshot: reads.screenshot,
    WaitFor: reads.wait_for, Snapshot: snapshot,
    Js: scripts.js, WaitForResult: scripts.wait_for_result, Cookies: scripts.cookies, Storage: scripts.storage,
    Clipboard: scripts.clipboard, SiteTools: site_tools, CallSiteTool: call_site_tool,
    Cdp: cdp, CdpEvents: cdp_events, CdpSpec: cdp_spec,
}
"""Action class -> the function that runs it."""

DEADLINE_BOUND: frozenset[type[Command]] = frozenset({Title, Url})
"""Actions that await nothing with a timeout of Playwright's own (``title`` evaluates ``document.title``): the
driver's backstop is their deadline itself, with no grace past it for a Playwright timeout to fire first, as
:meth:`~driver.run.Run.within` bounds an evaluation of the others."""
