"""The console's edges against a local client and another site's page (issue 29, section 6).

The sign-in limit counts the connection's address, not one a client names in ``X-Forwarded-For``
(uvicorn believed loopback's by default), unless ``forwarded_allow_ips`` names the proxy; and a
form another site's page sends may neither sign the operator out nor in. The console is served by
uvicorn as ``kitsune serve`` starts it (:func:`kitsune.node_server.proxy_options`), over no node: these
routes never reach one.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette

from actors.nats_server import free_port
from bridge.routes.console import console_routes
from bridge.routes.console_auth import COOKIE
from bridge.routes.console_limits import MAX_FAILURES
from kitsune.config import load_config
from kitsune.node_server import proxy_options

TOKEN = "edge-operator-token-0123456789"


def _served(config_extra: dict[str, Any]) -> Iterator[str]:
    config = load_config(None, {"KITSUNE_OPERATORS": f'[{{"name": "sre", "token": "{TOKEN}"}}]',
                                "KITSUNE_AGENTS": "a=agent-token-0123456789", **config_extra})
    app = Starlette(routes=console_routes(SimpleNamespace(browser=None), config))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, lifespan="off",
                                           **proxy_options(config.http)))
    thread = threading.Thread(target=asyncio.run, args=(server.serve(),), daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@pytest.fixture
def base() -> Iterator[str]:
    yield from _served({})


def _guess(client: httpx.Client, forwarded: str) -> int:
    return client.post("/console/login", data={"secret": "wrong-guess-123"},
                       headers={"X-Forwarded-For": forwarded}).status_code


def test_a_forwarded_address_from_loopback_neither_dodges_nor_aims_the_sign_in_limit(base: str) -> None:
    with httpx.Client(base_url=base) as client:
        answers = [_guess(client, f"203.0.113.{i}") for i in range(MAX_FAILURES + 1)]
        assert answers == [403] * MAX_FAILURES + [429]  # a new header per guess counts as the same client
        right = client.post("/console/login", data={"secret": TOKEN}, headers={"X-Forwarded-For": "198.51.100.7"})
        assert right.status_code == 429  # and naming another address does not get past it


def test_forwarded_addresses_are_believed_from_a_configured_proxy_only() -> None:
    for served in _served({"KITSUNE_FORWARDED_ALLOW_IPS": "127.0.0.1"}):
        with httpx.Client(base_url=served) as client:
            assert [_guess(client, f"203.0.113.{i}") for i in range(MAX_FAILURES + 1)] == [403] * (MAX_FAILURES + 1)
            assert [_guess(client, "203.0.113.9") for _ in range(MAX_FAILURES + 1)][-1] == 429


@contextlib.contextmanager
def _signed_in(base: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, follow_redirects=False) as client:
        assert client.post("/console/login", data={"secret": TOKEN}).status_code == 303
        assert client.cookies.get(COOKIE)
        yield client


def _session_open(client: httpx.Client) -> bool:
    """Whether the client's console session is open (past the guard: the node-less app fails after it)."""
    with contextlib.suppress(httpx.HTTPError):
        return client.get("/console/state").status_code != 401
    return True


@pytest.mark.parametrize("headers", [{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
                                     {"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "same-site"},
                                     {"Origin": "null"}])
def test_another_sites_form_can_neither_sign_the_operator_out_nor_in(base: str, headers: dict[str, str]) -> None:
    with _signed_in(base) as client:
        session = client.cookies.get(COOKIE)
        out = client.post("/console/logout", headers=headers)
        assert out.status_code == 403 and "set-cookie" not in out.headers
        assert 'data-code="forbidden"' in out.text
        assert _session_open(client)  # still signed in
        login = httpx.post(f"{base}/console/login", data={"secret": TOKEN}, headers=headers)
        assert login.status_code == 403 and "set-cookie" not in login.headers
        assert client.cookies.get(COOKIE) == session


def test_the_consoles_own_page_signs_out(base: str) -> None:
    with _signed_in(base) as client:
        assert client.post("/console/logout", headers={"Origin": base}).status_code == 303  # an older browser
        assert client.post("/console/login", data={"secret": TOKEN}).status_code == 303
        out = client.post("/console/logout", headers={"Origin": "null", "Sec-Fetch-Site": "same-origin"})  # no referrer
        assert out.status_code == 303 and COOKIE in out.headers["set-cookie"]
        assert not _session_open(client)
