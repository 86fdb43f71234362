"""The context made ahead for an agent's next session, on a real Chromium (issue 34's restore): the next session
of that agent (a restore too) is that context, fresh; no other agent's session, and no closed session's context,
is ever used; one made without the URL guard's hooks is given up once the agent's lists hold a rule. An agent new
to the node (none made ahead) gets its context made as its state is fetched, with its hooks and the state; a state
refused (another agent's) leaves no context behind, made ahead or not."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from actors.buckets import SESSIONS_BUCKET
from actors.session_vault import SessionVault, seal
from core.session_state import SavedState
from core.url_policy import UrlPolicy
from driver import ChromiumBrowser
from driver.sessions import Session
from messages.commands import NewTab
from messages.results import Done, Failed
from tests.integration.browser_fixtures import Run, loop_thread, run, site
from tests.integration.fleet_nodes import until
from tests.integration.persist_sessions import KEY
from tests.nats_access import NatsAccess
from tests.site import TestSite

__all__ = ["loop_thread", "run", "site"]  # the fixtures, used by name


@dataclass
class Rules:
    policy: UrlPolicy = UrlPolicy()


@pytest.fixture(scope="module")
def rules() -> Rules:
    return Rules()


@pytest.fixture(scope="module")
def chromium(run: Run[Any], rules: Rules, nats_access: NatsAccess) -> Iterator[ChromiumBrowser]:
    """One real Chromium under the module's current URL lists, its persistent sessions kept in the shared NATS."""
    browser = ChromiumBrowser()
    browser.url_policy = lambda agent: rules.policy
    client = run(nats_access.client())
    browser.sessions.persistence.store = SessionVault(client, "ahead-tests", KEY)
    run(browser.start())
    yield browser
    run(browser.stop())
    run(client.close())


def _open(chromium: ChromiumBrowser, run: Run[Any], url: str, agent: str, session: str,
          persist: bool | None = None) -> tuple[int, Session]:
    outcome = run(chromium.execute(NewTab(url=url, session=session, persist=persist), None, 10.0, agent=agent,
                                   call=1))
    assert isinstance(outcome, Done), outcome
    found = chromium.sessions.table.find(agent, session)
    assert found is not None
    return int(outcome.value["tabId"]), found


def _contexts(chromium: ChromiumBrowser, run: Run[Any], session: Session) -> set[str]:
    """The CDP ids of the browser's contexts now (reached through ``session``'s)."""
    async def listed() -> set[str]:
        browser = session.context.browser
        assert browser is not None
        cdp = await browser.new_browser_cdp_session()
        try:
            return set((await cdp.send("Target.getBrowserContexts"))["browserContextIds"])
        finally:
            await cdp.detach()
    ids: set[str] = run(listed())
    return ids


def _made_ahead(chromium: ChromiumBrowser, run: Run[Any], agent: str, session: Session) -> set[str]:
    """Once the context made ahead for ``agent`` is ready: the browser's contexts then."""
    assert run(chromium.ahead_made(agent)) is True
    return _contexts(chromium, run, session)


def _signed_in(chromium: ChromiumBrowser, run: Run[Any], tab: int) -> str:
    """What the site's page in ``tab`` says of the request that loaded it: ``signed in`` or ``signed out``."""
    text: str = run(chromium.page(tab).inner_text("#session"))
    return text


def test_an_agent_s_next_session_is_the_context_made_ahead_fresh_and_never_another_agent_s(
        chromium: ChromiumBrowser, run: Run[Any], rules: Rules, site: TestSite) -> None:
    rules.policy = UrlPolicy()
    _, first = _open(chromium, run, site.url("/session/start"), "ann", "one")  # signed in: a cookie
    assert run(first.context.cookies())
    before = _made_ahead(chromium, run, "ann", first)
    _, second = _open(chromium, run, site.url("/session"), "ann", "two")
    assert second.context_id in before and second.context_id != first.context_id  # made ahead, before the open
    assert run(second.context.cookies()) == [] and second.context.pages[-1].url == site.url("/session")

    before = _made_ahead(chromium, run, "ann", first)
    _, other = _open(chromium, run, site.url("/session"), "bob", "one")
    assert other.context_id not in before  # another agent's: made for it, through its own proxy
    assert run(chromium.ahead_made("ann")) is True  # ann's next context stays hers

    run(chromium.sessions.close(second, "closed"))
    before = _made_ahead(chromium, run, "ann", first)
    _, third = _open(chromium, run, site.url("/session"), "ann", "three")
    assert third.context_id in before and third.context_id not in {first.context_id, second.context_id}
    assert run(third.context.cookies()) == []
    for session in (first, third, other):
        run(chromium.sessions.close(session, "closed"))


@pytest.mark.parametrize("stored", ["cookies", "cookies and local storage"])
def test_a_persistent_session_is_restored_in_the_context_made_ahead_and_the_site_sees_its_sign_in(
        chromium: ChromiumBrowser, run: Run[Any], rules: Rules, site: TestSite, stored: str) -> None:
    rules.policy = UrlPolicy()
    agent = f"cid-{len(stored)}"
    tab, session = _open(chromium, run, site.url("/session/start"), agent, "shop", persist=True)
    assert _signed_in(chromium, run, tab) == "signed in"
    if stored != "cookies":
        run(chromium.page(tab).evaluate("localStorage.setItem('cart', '3 items')"))
    keep, _ = _open(chromium, run, site.url("/session"), agent, "keep")  # reaches the browser meanwhile
    run(chromium.close_tab(tab))  # its last tab: saved, its context freed
    until(lambda: chromium.sessions.table.find(agent, "shop") is None, 30, "the session saved and freed")
    before = _made_ahead(chromium, run, agent, chromium.sessions.of_tab(keep) or session)
    again, restored = _open(chromium, run, site.url("/session"), agent, "shop")
    assert restored.context_id in before and restored.context_id != session.context_id
    assert _signed_in(chromium, run, again) == "signed in"
    cart = run(chromium.page(again).evaluate("localStorage.getItem('cart')"))
    assert cart == (None if stored == "cookies" else "3 items")
    run(chromium.sessions.close_named(agent, "shop"))
    run(chromium.close_tab(keep))


def test_a_context_made_ahead_without_hooks_is_given_up_once_the_agent_s_lists_hold_a_rule(
        chromium: ChromiumBrowser, run: Run[Any], rules: Rules, site: TestSite) -> None:
    rules.policy = UrlPolicy()  # no rule: a session gets no hooks (its proxy judges every connection)
    _, first = _open(chromium, run, site.url("/session"), "dee", "one")
    before = _made_ahead(chromium, run, "dee", first)
    rules.policy = UrlPolicy.from_config(deny=["denied.example.test"])
    _, second = _open(chromium, run, site.url("/session"), "dee", "two")
    assert second.context_id not in before  # made now, with the hooks
    outcome = run(chromium.execute(NewTab(url="http://denied.example.test/", session="two"), None, 10.0,
                                   agent="dee", call=1))
    assert isinstance(outcome, Failed) and outcome.failure.code == "url_denied", outcome
    assert "(denied)" not in outcome.failure.error, outcome  # its hook refused it, not its proxy
    for session in (first, second):
        run(chromium.sessions.close(session, "closed"))


def test_a_cold_restore_makes_the_context_as_the_state_is_fetched_with_its_hooks_and_the_state(
        chromium: ChromiumBrowser, run: Run[Any], rules: Rules, site: TestSite) -> None:
    rules.policy = UrlPolicy.from_config(deny=["denied.example.test"])
    tab, signed = _open(chromium, run, site.url("/session/start"), "eve", "signed")
    run(chromium.page(tab).evaluate("localStorage.setItem('cart', '3 items')"))
    store = chromium.sessions.persistence.store
    assert store is not None
    run(store.save("newcomer", "moved", SavedState(dict(run(signed.context.storage_state())), (), time.time())))
    before = _contexts(chromium, run, signed)  # an agent new to the node: no context made ahead for it
    again, restored = _open(chromium, run, site.url("/session"), "newcomer", "moved")
    assert restored.context_id not in before and restored.persist is True
    assert _signed_in(chromium, run, again) == "signed in"
    assert run(chromium.page(again).evaluate("localStorage.getItem('cart')")) == "3 items"
    assert run(chromium.page(again).evaluate("typeof navigator.modelContext")) == "object"  # the site tools' script
    outcome = run(chromium.execute(NewTab(url="http://denied.example.test/", session="moved"), None, 10.0,
                                   agent="newcomer", call=1))
    assert isinstance(outcome, Failed) and outcome.failure.code == "url_denied", outcome
    assert "(denied)" not in outcome.failure.error, outcome  # its hook refused it, on the context before any page
    run(chromium.sessions.close_named("newcomer", "moved"))
    run(chromium.sessions.close(signed, "closed"))


@pytest.mark.parametrize("ahead", [False, True], ids=["cold", "made ahead"])
def test_a_state_refused_under_another_agent_s_name_leaves_no_context_behind(
        chromium: ChromiumBrowser, run: Run[Any], rules: Rules, site: TestSite, nats_access: NatsAccess,
        ahead: bool) -> None:
    rules.policy = UrlPolicy()
    agent = f"mallory-{int(ahead)}"
    _, keep = _open(chromium, run, site.url("/session"), "keeper", f"keep-{ahead}")
    store = chromium.sessions.persistence.store
    assert isinstance(store, SessionVault)
    blob = seal(KEY, "ahead-tests", "alice", "shop", SavedState({"cookies": []}, (), time.time()).to_bytes())

    async def put() -> None:  # alice's blob under the agent's name: refused, never opened
        client = await nats_access.client()
        try:
            kv = await client.jetstream().key_value(SESSIONS_BUCKET)
            await kv.put(store.key_of(agent, "shop"), blob)
        finally:
            await client.close()
    assert run(store.load(agent, "shop")) is None  # the bucket made
    run(put())
    mine: frozenset[str] = frozenset()
    if ahead:
        _, first = _open(chromium, run, site.url("/session"), agent, "first")  # its next context is made ahead
        assert run(chromium.ahead_made(agent)) is True
        mine = chromium.ahead_ids(agent)
    before = _contexts(chromium, run, keep)
    outcome = run(chromium.execute(NewTab(url=site.url("/session"), session="shop", persist=True), None, 10.0,
                                   agent=agent, call=1))
    assert isinstance(outcome, Failed) and outcome.failure.code == "session_state_refused", outcome
    assert chromium.sessions.table.find(agent, "shop") is None
    # the context the refused restore took (made ahead) or made (cold) is closed; the only new ones are contexts
    # made ahead since, for any agent's next session (fresh: the launcher's own, holding no state)
    until(lambda: not ((ids := _contexts(chromium, run, keep)) & mine) and ids - chromium.ahead_ids() <= before, 30,
          "the context made for the refused state closed")
    if ahead:
        run(chromium.sessions.close(first, "closed"))
    run(chromium.sessions.close(keep, "closed"))


def test_a_context_asked_ahead_before_the_browser_started_is_made_as_it_starts_and_is_the_first_session(
        run: Run[Any], site: TestSite) -> None:
    browser = ChromiumBrowser()
    browser.context_ahead("first")  # as `kitsune serve` asks it for its one agent, before the node opens
    run(browser.start())
    try:
        assert run(browser.ahead_made("first")) is True
        [ahead] = browser.ahead_ids("first")
        tab, session = _open(browser, run, site.url("/text"), "first", "default")
        assert session.context_id == ahead and browser.page(tab).url == site.url("/text")
    finally:
        run(browser.stop())
