"""The URL guard: what the browser may reach, enforced where it goes.

Chromium reaches the network only through the node's own forward proxy (:mod:`bridge.proxy`),
which judges scheme, host, port and every resolved address of each connection against the URL
lists (:mod:`bridge.url_policy`) and refuses the node's own endpoints: the proxy is the boundary.
In front of it, the browser context's route and WebSocket hooks refuse what the lists refuse
before Chromium connects, with clearer errors; service workers, which could answer requests no
list sees, are blocked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from playwright.async_api import BrowserContext, Route, WebSocketRoute

from bridge.browser.page_js import NO_SERVICE_WORKERS
from bridge.proxy import PROXY_HEADER, Endpoint, PolicyProxy
from bridge.url_policy import UrlPolicy

__all__ = ["UrlGuard"]


class UrlGuard:
    """The node's forward proxy for one Chromium, and the hooks of its browser context."""

    def __init__(self) -> None:
        self.url_policy: Callable[[], UrlPolicy] | None = None
        """The URL lists every request of every page must pass (navigations, redirects, popups,
        frames, subresources, fetch, WebSocket); None lets everything through."""
        self.own_endpoints: set[Endpoint] = set()
        """The node's listening endpoints (its HTTP API, NATS): the proxy refuses them, and its own
        port, on every address of this machine, whatever the URL lists say."""
        self._proxy = PolicyProxy(lambda: self.url_policy() if self.url_policy is not None else UrlPolicy(),
                                  lambda: self.own_endpoints)

    async def start(self) -> None:
        await self._proxy.start()

    async def stop(self) -> None:
        await self._proxy.stop()

    def proxy_flag(self) -> str:
        """The Chromium flag that sends every connection through the proxy."""
        return f"--proxy-server=http://{':'.join(map(str, self._proxy.endpoint))}"

    @property
    def refusals(self) -> int:
        """How many connections the proxy has refused so far."""
        return self._proxy.refusals

    async def install(self, context: BrowserContext) -> None:
        """Block service workers in a new browser context and, with URL lists, hook its requests."""
        await context.add_init_script(NO_SERVICE_WORKERS)
        if self.url_policy is not None:
            await context.route("**/*", self._guard_request)
            await context.route_web_socket(re.compile(".*"), self._guard_websocket)

    def proxy_answer(self, response: Any) -> str | None:
        """The reason the node's proxy answered a navigation itself (a refusal, ``unreachable``), or None."""
        if response is None:
            return None
        marker, _, reason = response.headers.get(PROXY_HEADER, "").partition(" ")
        return reason if marker == self._proxy.marker and reason else None

    async def _guard_request(self, route: Route) -> None:
        """Abort a request to a URL the lists refuse before Chromium connects (``ERR_BLOCKED_BY_CLIENT``).

        A clearer refusal than the proxy's, which stays the boundary for what a route never sees:
        redirect hops, names that resolve to denied addresses, the node's own endpoints.
        """
        assert self.url_policy is not None
        if self.url_policy().check(route.request.url) is not None:
            await route.abort("blockedbyclient")
        else:
            await route.fallback()

    async def _guard_websocket(self, socket: WebSocketRoute) -> None:
        """A WebSocket to a refused URL is closed before anything reaches its server."""
        assert self.url_policy is not None
        if self.url_policy().check(socket.url) is not None:
            await socket.close(code=1008, reason="refused by the URL policy")
        else:
            socket.connect_to_server()
