"""The node of ``kitsune serve`` and its HTTP server (uvicorn), until the node drained (a first SIGTERM, or
``kitsune drain``) or was stopped (SIGINT, a second SIGTERM)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

import uvicorn

from actors.nats_connection import display_url
from actors.nats_server import EmbeddedNats
from bridge.node import Node
from bridge.wiring import start_node
from bridge.workflows import WorkflowLibrary
from core.settings import HttpConfig, Settings
from driver import ChromiumBrowser, find_chromium
from kitsune.app import create_app
from kitsune.token_file import publish_token
from messages.errors import KitsuneError

__all__ = ["proxy_options", "serve_http", "start_configured"]


def proxy_options(http: HttpConfig) -> dict[str, Any]:
    """uvicorn's options for forwarded headers: believed only from the configured proxies. uvicorn
    believes loopback by default, which let any local client pick its own address with
    ``X-Forwarded-For`` (a new one for every guess of a console password)."""
    if not http.forwarded_allow_ips:
        return {"proxy_headers": False, "forwarded_allow_ips": ""}
    return {"proxy_headers": True, "forwarded_allow_ips": ",".join(http.forwarded_allow_ips)}


async def start_configured(config: Settings, nats_url: str | None, browser: ChromiumBrowser,
                           nats: EmbeddedNats | None = None) -> Node:
    """The node the settings describe, started on ``browser``, each part given its section (``nats_url``:
    ``--nats-url``, over ``nats.url``; ``nats``: the embedded server, its start begun, where neither is given)."""
    node = config.node
    if nats_url:
        node = replace(node, nats=replace(node.nats, url=nats_url))
    return await start_node(browser, node, policy=config.policy, agent_policies=config.agent_policies(),
                            workflows=WorkflowLibrary(config.workflows) if config.workflows else None, nats=nats)


_SHUTDOWN_GRACE = 3
"""Seconds open connections get to finish after a stop, once the node's tabs were interrupted."""


class _Server(uvicorn.Server):
    """uvicorn's server: a first SIGTERM drains the node; it exits with status 0 once the node left, or after a
    stop (SIGINT, a second SIGTERM) that takes seconds whatever is in flight: the node's tabs are interrupted
    first (running writes end unknown)."""

    def __init__(self, config: uvicorn.Config, node: Node, loop: asyncio.AbstractEventLoop,
                 on_started: Callable[[], None]) -> None:
        super().__init__(config)
        self._node = node
        self._loop = loop
        self._on_started = on_started

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's start; once it serves, ``on_started`` at once (an embedded bridge's caller waits for it)."""
        await super().startup(sockets)
        if self.started:
            self._on_started()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if sig == signal.SIGTERM and not self._node.drain.draining and not self.should_exit:
            self._loop.call_soon_threadsafe(self._node.drain.start)
        elif self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        else:
            self.should_exit = True

    async def leaving(self) -> None:
        """Stop once the node left its fleet (a drain ended)."""
        await self._node.drain.left.wait()
        self.should_exit = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await self._node.interrupt()
        await super().shutdown(sockets)


async def serve_http(args: argparse.Namespace, config: Settings, browser: ChromiumBrowser,
                     nats: EmbeddedNats | None = None) -> int:
    """Start the node on ``browser`` (and ``nats``, see ``start_configured``) and serve its HTTP API until a stop;
    the exit status."""
    if len(config.agents) == 1:  # its one agent's first tab opens in a session made as soon as Chromium started
        browser.context_ahead(config.agents[0].name)  # (while the node opens and the server starts)
    try:
        node = await start_configured(config, args.nats_url, browser, nats)
    except KitsuneError as e:
        print(f"kitsune: cannot start: {e.message}", file=sys.stderr)
        return 1
    app = create_app(node, config, mcp=not args.no_mcp)

    def announce() -> None:
        host, port = server.servers[0].sockets[0].getsockname()[:2]
        if config.generated_token is not None:
            try:
                token_file = publish_token(config.generated_token, Path(args.state_dir))
            except OSError as e:
                print(f"kitsune: cannot write the token file in {args.state_dir} ({e.strerror})", file=sys.stderr)
                server.should_exit = True
                return
            print(f"kitsune: no agent configured; the token of agent 'default' is in {token_file}", flush=True)
        node.browser.own_endpoints.add((host, port))
        if not gc.isenabled():  # off for the start (kitsune.cli): on, what the start made kept out of its passes
            gc.freeze()
            gc.enable()
        nats = display_url(node.config.nats.url) if node.config.nats.url else (node.nats.url if node.nats else "")
        print(f"kitsune serving http://{host}:{port} (nats {nats}, chromium {find_chromium()})", flush=True)

    server = _Server(uvicorn.Config(app, host=args.host, port=args.port, log_config=None, access_log=False,
                                    lifespan="off", timeout_graceful_shutdown=_SHUTDOWN_GRACE,
                                    **proxy_options(config.http)),
                     node, asyncio.get_running_loop(), announce)
    leaving = asyncio.create_task(server.leaving())
    try:
        await server.serve()
    finally:
        leaving.cancel()
        await node.astop()
    return 0 if server.started else 1
