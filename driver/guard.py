"""The URL guard: what the browser may reach, enforced where it goes.

Chromium reaches the network only through the node's own forward proxies (:mod:`driver.proxy`),
which judge scheme, host, port and every resolved address of each connection against the URL
lists (:mod:`core.url_policy`) and refuse the node's own endpoints: the proxy is the boundary.
The user context goes through the node's proxy, with the node's lists; the contexts of an agent's
sessions through that agent's, with its lists (each agent may have its own).
In front of them, each browser context's route and WebSocket hooks refuse what its lists refuse
before Chromium connects, with clearer errors; service workers, which could answer requests no
list sees, are blocked.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from typing import Any

from playwright.async_api import BrowserContext, Route, WebSocketRoute

from core.url_policy import UrlPolicy
from driver.page_js import NO_SERVICE_WORKERS
from driver.proxy import PROXY_HEADER, Endpoint, PolicyProxy

__all__ = ["UrlGuard"]


class UrlGuard:
    """The node's forward proxies for one Chromium (one for the user context, one per agent with a
    session: each judges with its agent's URL lists), and the hooks of its browser contexts."""

    def __init__(self) -> None:
        self.url_policy: Callable[[str | None], UrlPolicy] | None = None
        """The URL lists of an agent (None: of the node, for user tabs) that every request of every page of
        its sessions must pass (navigations, redirects, popups, frames, subresources, fetch, WebSocket);
        None lets everything through."""
        self.own_endpoints: set[Endpoint] = set()
        """The node's listening endpoints (its HTTP API, NATS): every proxy refuses them, and the proxies'
        own ports, on every address of this machine, whatever the URL lists say."""
        self._proxy = self._make_proxy(None)
        self._agents_proxies: dict[str, PolicyProxy] = {}

    def _make_proxy(self, agent: str | None) -> PolicyProxy:
        marker = self._proxy.marker if agent is not None else None
        return PolicyProxy(lambda: self.url_policy(agent) if self.url_policy is not None else UrlPolicy(),
                           lambda: {*self.own_endpoints, *(p.endpoint for p in self._agents_proxies.values()),
                                    self._proxy.endpoint}, marker=marker)

    async def start(self) -> None:
        await self._proxy.start()

    async def stop(self) -> None:
        proxies, self._agents_proxies = [self._proxy, *self._agents_proxies.values()], {}
        for proxy in proxies:
            await proxy.stop()

    def proxy_flag(self) -> str:
        """The Chromium flag that sends every connection (of the user context) through the proxy."""
        return f"--proxy-server=http://{':'.join(map(str, self._proxy.endpoint))}"

    async def proxy_server(self, agent: str) -> str:
        """The proxy the contexts of ``agent``'s sessions go through (started on first use)."""
        proxy = self._agents_proxies.get(agent)
        if proxy is None:
            proxy = self._make_proxy(agent)
            await proxy.start()
            self._agents_proxies[agent] = proxy
        return "http://{}:{}".format(*proxy.endpoint)

    @property
    def refusals(self) -> int:
        """How many connections the proxies have refused so far."""
        return self._proxy.refusals + sum(p.refusals for p in self._agents_proxies.values())

    @property
    def unresolved(self) -> int:
        """How many connections the proxies could not open so far because a name did not resolve."""
        return self._proxy.unresolved + sum(p.unresolved for p in self._agents_proxies.values())

    def hooks(self, agent: str | None) -> bool:
        """Whether a browser context opened now for ``agent`` (the user context when None) gets the route and
        WebSocket hooks: when its URL lists (the node's for the user context) hold a rule."""
        lists = self.url_policy
        return lists is not None and bool(lists(agent).allow or lists(agent).deny)

    async def install(self, context: BrowserContext, agent: str | None, hooks: bool) -> None:
        """Block service workers in a new browser context and, with ``hooks`` (:meth:`hooks`, as it opens), hook
        its requests by the lists of ``agent``, whose session it is (the node's for the user context). A context
        whose lists hold no rule as it opens gets no hooks, which would only slow each request: its proxy still
        judges every connection, with the lists as they are then. The steps are sent at once."""
        steps: list[Awaitable[Any]] = [context.add_init_script(NO_SERVICE_WORKERS)]
        lists = self.url_policy
        if hooks and lists is not None:

            async def guard_request(route: Route) -> None:
                await _guard_request(lists(agent), route)

            async def guard_websocket(socket: WebSocketRoute) -> None:
                await _guard_websocket(lists(agent), socket)
            steps += [context.route("**/*", guard_request), context.route_web_socket(re.compile(".*"), guard_websocket)]
        await asyncio.gather(*steps)

    def proxy_answer(self, response: Any) -> str | None:
        """The reason a node's proxy answered a navigation itself (a refusal, ``unreachable``), or None."""
        if response is None:
            return None
        marker, _, reason = response.headers.get(PROXY_HEADER, "").partition(" ")
        return reason if marker == self._proxy.marker and reason else None


async def _guard_request(lists: UrlPolicy, route: Route) -> None:
    """Abort a request to a URL the lists refuse before Chromium connects (``ERR_BLOCKED_BY_CLIENT``).

    A clearer refusal than the proxy's, which stays the boundary for what a route never sees:
    redirect hops, names that resolve to denied addresses, the node's own endpoints.
    """
    if lists.check(route.request.url) is not None:
        await route.abort("blockedbyclient")
    else:
        await route.fallback()


async def _guard_websocket(lists: UrlPolicy, socket: WebSocketRoute) -> None:
    """A WebSocket to a refused URL is closed before anything reaches its server."""
    if lists.check(socket.url) is not None:
        await socket.close(code=1008, reason="refused by the URL policy")
    else:
        socket.connect_to_server()
