"""Chromium trimmed for agents (issue 35), on a real Chromium: what no agent uses does not run, Playwright's own
choices are kept, and a context made ahead is an agent's first session, its spare window the first tab."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from driver import ChromiumBrowser
from driver.process import AGENT_DISABLED_FEATURES, PLAYWRIGHT_DISABLED_FEATURES
from messages.commands import NewTab
from messages.results import Done
from tests.integration.browser_fixtures import *  # noqa: F403 - the fixtures, used by name
from tests.integration.browser_fixtures import Run
from tests.integration.fleet_nodes import until
from tests.site import TestSite


def _browser_cdp(chromium: ChromiumBrowser, run: Run[Any], any_tab: int, method: str) -> dict[str, Any]:
    """A CDP method's answer on the browser's own session (reached through one of its tabs)."""
    async def send() -> dict[str, Any]:
        browser = chromium.page(any_tab).context.browser
        assert browser is not None
        cdp = await browser.new_browser_cdp_session()
        try:
            return dict(await cdp.send(method))
        finally:
            await cdp.detach()
    answer: dict[str, Any] = run(send())
    return answer


def _command_line(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ").split()


def _open(chromium: ChromiumBrowser, run: Run[Any], url: str, agent: str, session: str | None = None) -> int:
    outcome = run(chromium.execute(NewTab(url=url, session=session), None, 10.0, agent=agent, call=1))
    assert isinstance(outcome, Done), outcome
    return int(outcome.value["tabId"])


def _target(chromium: ChromiumBrowser, run: Run[Any], tab: int) -> dict[str, Any]:
    async def info() -> dict[str, Any]:
        page = chromium.page(tab)
        return dict((await (await page.context.new_cdp_session(page)).send("Target.getTargetInfo"))["targetInfo"])
    target: dict[str, Any] = run(info())
    return target


def test_a_session_runs_no_omnibox_popup_renderer_and_playwright_s_disabled_features_stay_disabled(
        chromium: ChromiumBrowser, run: Run[Any], site: TestSite) -> None:
    tab = _open(chromium, run, site.url("/text"), "alice", "trimmed")
    targets = _browser_cdp(chromium, run, tab, "Target.getTargets")["targetInfos"]
    assert [t["url"] for t in targets if t["type"] == "browser_ui" or "omnibox" in t["url"]] == []
    processes = _browser_cdp(chromium, run, tab, "SystemInfo.getProcessInfo")["processInfo"]
    [browser] = [int(p["id"]) for p in processes if p["type"] == "browser"]
    renderers = [_command_line(int(p["id"])) for p in processes if p["type"] == "renderer"]
    assert renderers and not [line for line in renderers if "--top-chrome-webui" in line]

    line = _command_line(browser)
    playwright_s, *_, ours = [set(flag.split("=", 1)[1].split(",")) for flag in line
                              if flag.startswith("--disable-features=")]  # Chromium keeps the last one only
    assert playwright_s <= ours, "the node's --disable-features must repeat Playwright's own"
    assert set(PLAYWRIGHT_DISABLED_FEATURES) == playwright_s  # the list the node repeats is Playwright's
    assert set(AGENT_DISABLED_FEATURES) <= ours
    assert "--optimization-guide-performance-class=8" in line  # no OnDeviceModelService benchmark
    session = chromium.sessions.table.find("alice", "trimmed")
    assert session is not None
    run(chromium.sessions.close(session, "closed"))


def test_a_context_made_ahead_is_the_agent_s_first_session_and_its_spare_window_the_first_tab(
        chromium: ChromiumBrowser, run: Run[Any], site: TestSite) -> None:
    handle = run(chromium.new_tab())  # a user tab to reach the browser through
    before = set(_browser_cdp(chromium, run, handle, "Target.getBrowserContexts")["browserContextIds"])

    async def make_ahead() -> None:  # on the browser's loop
        chromium.context_ahead("early")
    run(make_ahead())

    def made() -> set[str]:  # (another agent's next context, made ahead after its session opened, has no window)
        ids = set(_browser_cdp(chromium, run, handle, "Target.getBrowserContexts")["browserContextIds"]) - before
        return {context for context in ids if chromium.spares.ready(context)}
    until(lambda: len(made()) == 1, 30, "the context made ahead, and its spare window")
    [ahead] = made()
    [spare] = [t for t in _browser_cdp(chromium, run, handle, "Target.getTargets")["targetInfos"]
               if t["browserContextId"] == ahead]
    assert chromium.sessions.table.find("early", "default") is None  # no session until the agent opens one

    tab = _open(chromium, run, site.url("/text"), "early")
    assert (_target(chromium, run, tab)["browserContextId"], _target(chromium, run, tab)["targetId"]) == (
        ahead, spare["targetId"])
    session = chromium.sessions.table.find("early", "default")
    assert session is not None and session.context_id == ahead
    other = _open(chromium, run, site.url("/text"), "other")  # another agent's session is a context of its own
    assert _target(chromium, run, other)["browserContextId"] not in before | {ahead}
    for agent in ("early", "other"):
        found = chromium.sessions.table.find(agent, "default")
        assert found is not None
        run(chromium.sessions.close(found, "closed"))
    run(chromium.close_tab(handle))
