"""The URL policy as a network boundary: each escape the adversarial review found, against real Chromium.

The allowed site is served on 127.0.0.3. The forbidden host is a listener on 127.0.0.1 that counts
every TCP connection and UDP packet (``tests/site/forbidden.py``), and the rules deny it: each test
asserts it got nothing at all, not even a connection. Every page request goes through the node's
proxy (``driver/proxy.py``); the proxy is also attacked directly, with raw sockets.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from core.url_policy import UrlPolicy
from driver import ChromiumBrowser
from driver.proxy import PolicyProxy
from messages.commands import Navigate
from messages.results import Done, Failed, Outcome
from tests.integration.browser_fixtures import Act, LoopThread, Run, act, loop_thread, run
from tests.integration.serving import serve
from tests.nats_access import NatsAccess
from tests.site import ANY, TestSite
from tests.site.forbidden import Forbidden

__all__ = ["act", "loop_thread", "run"]

DENY_FORBIDDEN = UrlPolicy.from_config(deny=["127.0.0.1"])
QUIET = 1.0
"""Seconds a test leaves the page to try before it counts what reached the forbidden host."""
SETTLED = 0.3
"""The same after a navigation that has answered."""


@dataclass
class Rules:
    policy: UrlPolicy = DENY_FORBIDDEN


@pytest.fixture(scope="module")
def rules() -> Rules:
    return Rules()


@pytest.fixture(scope="module")
def site() -> Iterator[TestSite]:
    with TestSite(host="127.0.0.3") as served:
        yield served


@pytest.fixture(scope="module")
def chromium(run: Run[Any], rules: Rules) -> Iterator[ChromiumBrowser]:
    """One real Chromium for the module, under the module's current rules (read for every request)."""
    browser = ChromiumBrowser()
    browser.url_policy = lambda agent: rules.policy
    run(browser.start())
    yield browser
    run(browser.stop())


@pytest.fixture
def forbidden() -> Iterator[Forbidden]:
    with Forbidden("127.0.0.1") as listener:
        yield listener


@pytest.fixture
def tab(chromium: ChromiumBrowser, run: Run[Any], rules: Rules, site: TestSite) -> Iterator[int]:
    """A fresh tab under ``DENY_FORBIDDEN``; every tab opened meanwhile (popups) is closed afterwards."""
    rules.policy = DENY_FORBIDDEN
    site.reset()
    before = chromium.tab_ids()
    tab_id = run(chromium.new_tab())
    yield tab_id
    for opened in chromium.tab_ids() - before:
        run(chromium.close_tab(opened))


def _chain(site: TestSite, target: str, hops: int, status: int) -> str:
    """A URL of the site that redirects ``hops`` times (the last hop to ``target``)."""
    url = target
    for _ in range(hops):
        url = site.url("/redirect?" + urlencode({"to": url, "status": status}))
    return url


def _failed(outcome: Outcome, code: str) -> Failed:
    assert isinstance(outcome, Failed) and outcome.failure.code == code, outcome
    return outcome


def _reached_nothing(forbidden: Forbidden, wait: float = QUIET) -> None:
    time.sleep(wait)
    assert forbidden.contacts == (0, 0)


def _open_page(act: Act, tab: int, url: str, button: str | None = None) -> None:
    assert isinstance(act({"action": "navigate", "url": url}, tab), Done)
    if button is not None:
        assert isinstance(act({"action": "click", "selector": button}, tab), Done)


# --- redirect chains ----------------------------------------------------------------------------


@pytest.mark.parametrize(("hops", "status", "scheme"), [
    (1, 302, "http"), (2, 302, "http"), (2, 307, "http"), (3, 302, "http"), (3, 307, "http"),
    (2, 307, "https"), (3, 302, "https"),
])
def test_a_navigation_through_a_redirect_chain_never_reaches_the_denied_host(
        act: Act, tab: int, site: TestSite, forbidden: Forbidden, hops: int, status: int, scheme: str) -> None:
    chain = _chain(site, forbidden.url("/policy/target", scheme), hops, status)
    _failed(act({"action": "navigate", "url": chain}, tab), "url_denied")
    _reached_nothing(forbidden, SETTLED)


@pytest.mark.parametrize(("hops", "status"), [(2, 302), (3, 307)])
@pytest.mark.parametrize(("page", "button"), [("/policy/open", "#open"), ("/policy/frame", None)])
def test_a_popup_or_frame_through_a_redirect_chain_never_reaches_the_denied_host(
        act: Act, tab: int, site: TestSite, forbidden: Forbidden, page: str, button: str | None, hops: int,
        status: int) -> None:
    chain = _chain(site, forbidden.url("/policy/target"), hops, status)
    _open_page(act, tab, site.url(f"{page}?{urlencode({'to': chain})}"), button)
    _reached_nothing(forbidden)


@pytest.mark.parametrize("blocked", ["first hop", "third hop", "https hop"])
def test_the_navigate_after_a_refused_one_answers_ok(act: Act, tab: int, site: TestSite, forbidden: Forbidden,
                                                     blocked: str) -> None:
    target = forbidden.url("/policy/target", "https" if blocked == "https hop" else "http")
    refused = target if blocked == "first hop" else _chain(site, target, 3 if blocked == "third hop" else 1, 302)
    for _ in range(3):
        _failed(act({"action": "navigate", "url": refused}, tab), "url_denied")
        after = act({"action": "navigate", "url": site.url("/text")}, tab)
        assert isinstance(after, Done) and after.value["url"] == site.url("/text"), after
    assert forbidden.contacts == (0, 0)


# --- what the page itself does -------------------------------------------------------------------


@pytest.mark.parametrize(("page", "button"), [
    ("/policy/frame", None), ("/policy/object", None), ("/policy/open", "#open"), ("/policy/open", "#blank"),
    ("/policy/form", "#submit"), ("/policy/location", "#go"), ("/policy/meta", None), ("/policy/refresh", None),
])
def test_a_navigation_the_page_starts_never_connects_to_the_denied_port(
        act: Act, tab: int, site: TestSite, forbidden: Forbidden, page: str, button: str | None) -> None:
    _open_page(act, tab, site.url(f"{page}?{urlencode({'to': forbidden.url('/policy/target')})}"), button)
    _reached_nothing(forbidden)


@pytest.mark.parametrize("kind", ["prefetch", "prerender"])
def test_speculation_rules_fetch_nothing(act: Act, tab: int, site: TestSite, forbidden: Forbidden,
                                         kind: str) -> None:
    with TestSite(host="127.0.0.4") as allowed_other:
        for target in (forbidden.url("/policy/target"), allowed_other.url("/policy/target")):
            _open_page(act, tab, site.url(f"/policy/{kind}?{urlencode({'to': target})}"))
        time.sleep(QUIET)
        assert allowed_other.count(ANY) == 0  # off, even where the lists allow it
    assert forbidden.contacts == (0, 0)


@pytest.mark.parametrize("server", ["stun:{host}:{udp}", "turn:{host}:{udp}?transport=udp",
                                    "turn:{host}:{tcp}?transport=tcp", "stun:{host}:{tcp}"])
def test_webrtc_sends_nothing_to_a_stun_or_turn_server(act: Act, tab: int, site: TestSite, forbidden: Forbidden,
                                                       server: str) -> None:
    to = server.format(host=forbidden.host, udp=forbidden.udp_port, tcp=forbidden.port)
    _open_page(act, tab, site.url(f"/policy/webrtc?{urlencode({'to': to})}"))
    assert isinstance(act({"action": "waitFor", "selector": "#result:not(:text('pending'))"}, tab, 15), Done)
    _reached_nothing(forbidden)


# --- names, addresses and ports ------------------------------------------------------------------


@pytest.mark.parametrize("host", ["localhost", "0.0.0.0", "x.localhost", "[::ffff:127.0.0.1]", "0"])
def test_a_name_or_address_that_reaches_loopback_is_refused_by_a_loopback_deny(
        act: Act, tab: int, rules: Rules, forbidden: Forbidden, host: str) -> None:
    rules.policy = UrlPolicy.from_config(deny=["127.0.0.0/8", "::1"])
    _failed(act({"action": "navigate", "url": f"http://{host}:{forbidden.port}/"}, tab), "url_denied")
    _reached_nothing(forbidden, SETTLED)


def test_a_port_rule_allows_the_site_on_its_port_only(act: Act, tab: int, rules: Rules, site: TestSite) -> None:
    rules.policy = UrlPolicy.from_config(allow=[f"127.0.0.3:{site.base.rsplit(':', 1)[1]}"])
    with Forbidden("127.0.0.3") as other_port:
        _open_page(act, tab, site.url(f"/policy/frame?{urlencode({'to': other_port.url('/policy/target')})}"))
        _failed(act({"action": "navigate", "url": other_port.url("/")}, tab), "url_denied")
        _reached_nothing(other_port)
    assert isinstance(act({"action": "navigate", "url": site.url("/text")}, tab), Done)


# --- the proxy itself, with raw sockets ------------------------------------------------------------


async def _through(proxy: PolicyProxy, head: str) -> bytes:
    """Send one request head to the proxy; its whole answer."""
    reader, writer = await asyncio.open_connection(*proxy.endpoint)
    writer.write(head.encode("ascii"))
    answer = await asyncio.wait_for(reader.read(65536), 5)
    writer.close()
    return answer


async def _proxied(policy: UrlPolicy, own: set[tuple[str, int]], heads: list[str]) -> list[bytes]:
    proxy = PolicyProxy(lambda: policy, lambda: own)
    await proxy.start()
    try:
        return [await _through(proxy, head) for head in heads]
    finally:
        await proxy.stop()


def _heads(target: str) -> list[str]:
    """A CONNECT and a plain GET to ``host:port``."""
    return [f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n",
            f"GET http://{target}/ HTTP/1.1\r\nHost: {target}\r\n\r\n"]


@pytest.mark.parametrize("name", ["localhost", "x.localhost", "0.0.0.0", "127.0.0.1"])
def test_the_proxy_resolves_a_name_and_refuses_it_when_an_address_is_denied(run: Run[Any], forbidden: Forbidden,
                                                                             name: str) -> None:
    policy = UrlPolicy.from_config(deny=["127.0.0.0/8", "::1"])
    for answer in run(_proxied(policy, set(), _heads(f"{name}:{forbidden.port}"))):
        assert answer.startswith(b"HTTP/1.1 403 ") and b"denied" in answer, answer
    _reached_nothing(forbidden)


@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.0.2", "0.0.0.0", "localhost"])
def test_the_proxy_refuses_the_nodes_own_endpoints_on_every_local_address(run: Run[Any], forbidden: Forbidden,
                                                                            address: str) -> None:
    own = {("127.0.0.1", forbidden.port)}
    for answer in run(_proxied(UrlPolicy(), own, _heads(f"{address}:{forbidden.port}"))):
        assert answer.startswith(b"HTTP/1.1 403 ") and b"own_endpoint" in answer, answer
    _reached_nothing(forbidden)


def test_the_proxy_refuses_its_own_port_other_schemes_and_origin_form(run: Run[Any]) -> None:
    async def attempts() -> list[bytes]:
        proxy = PolicyProxy(UrlPolicy, set)
        await proxy.start()
        try:
            own = "{}:{}".format(*proxy.endpoint)
            heads = [*_heads(own), "GET ftp://127.0.0.5/ HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nHost: x\r\n\r\n"]
            return [await _through(proxy, head) for head in heads]
        finally:
            await proxy.stop()

    for answer in run(attempts()):
        assert answer.startswith(b"HTTP/1.1 403 "), answer


def test_the_proxy_carries_what_the_rules_allow(run: Run[Any], forbidden: Forbidden) -> None:
    tunnel, plain = run(_proxied(UrlPolicy(), set(), _heads(f"127.0.0.1:{forbidden.port}")))
    assert tunnel.startswith(b"HTTP/1.1 200 ")
    assert plain.startswith(b"HTTP/1.0 200 OK") and b"reached" in plain and b"Connection: close" in plain
    assert forbidden.contacts == (2, 0)


# --- a live node: its own ports ----------------------------------------------------------------------


def test_a_live_node_refuses_its_own_api_and_nats_ports_even_on_an_allowed_host(
        tmp_path: Path, nats_access: NatsAccess, site: TestSite) -> None:
    served = serve(tmp_path, nats_access, {"caps": ["core"], "urls": {"allow": ["127.0.0.1", "127.0.0.3"]}})
    try:
        with served.client() as client:
            opened = client.post("/api/tabs", json={"op": "open", "url": site.url("/text")}).json()
            assert opened["status"] == "ok", opened
            for url in (served.base + "/healthz", nats_access.url.replace("nats://", "http://")):
                answer = client.post("/api/act", json={"command": {"action": "navigate", "tabId": opened["tabId"],
                                                                   "url": url}}).json()
                assert (answer["status"], answer["code"]) == ("failed", "url_denied"), answer
                assert answer["state"]["reason"] == "own_endpoint"
            assert httpx.get(served.base + "/healthz").status_code == 200  # the node itself is up
    finally:
        assert served.stop() == 0


def test_the_browser_uses_the_proxy_even_without_url_lists(loop_thread: LoopThread) -> None:
    async def visit() -> tuple[Outcome, tuple[int, int]]:
        browser = ChromiumBrowser()
        with Forbidden("127.0.0.1") as own:
            browser.own_endpoints.add((own.host, own.port))
            await browser.start()
            try:
                tab = await browser.new_tab()
                return await browser.execute(Navigate(url=own.url("/")), tab, 10), own.contacts
            finally:
                await browser.stop()

    outcome, contacts = loop_thread.run(visit())
    _failed(outcome, "url_denied")
    assert contacts == (0, 0)
