"""A live ``kitsune serve`` for HTTP tests: a process with its own config, log and audit file."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
import yaml
from starlette.types import ASGIApp

from actors.nats_server import free_port
from bridge.node import Node
from bridge.wiring import run_node
from core.settings import Settings
from driver import ChromiumBrowser
from kitsune.app import create_app
from kitsune.config import load_config
from kitsune.node_server import proxy_options
from tests.nats_access import NatsAccess

KITSUNE = Path(sys.executable).parent / "kitsune"
TOKENS = {"alice": "alice-token-0123456789abcdef", "bob": "bob-token-0123456789abcdef0"}
TENANT_TOKENS = {**TOKENS, "carol": "carol-token-0123456789abcdef", "dave": "dave-token-0123456789abcdef0",
                 "erin": "erin-token-0123456789abcdef0"}
TENANTS = [
    {"name": "alice", "token": TENANT_TOKENS["alice"], "read_only": True},
    {"name": "bob", "token": TENANT_TOKENS["bob"], "caps": ["core"]},
    {"name": "carol", "token": TENANT_TOKENS["carol"], "ask_before_act": True},
    {"name": "dave", "token": TENANT_TOKENS["dave"], "urls": {"allow": ["127.0.0.3"]}},
    {"name": "erin", "token": TENANT_TOKENS["erin"]},
]
"""The agents of the session's ``tenants`` node, each with a policy of its own: alice is read-only, bob has the core
group alone, carol asks before acting, dave may go to 127.0.0.3 alone; erin has the node's (both groups, no lists)."""



def open_tab(client: httpx.Client, url: str) -> int:
    """Open a tab at ``url`` through the API of a served node; its id."""
    answer = client.post("/api/tabs", json={"op": "open", "url": url})
    assert answer.status_code == 200 and answer.json()["status"] == "ok", answer.text
    tab: int = answer.json()["tabId"]
    return tab

@dataclass
class Served:
    """A running ``kitsune serve``."""

    process: subprocess.Popen[str]
    base: str
    directory: Path

    @property
    def audit_file(self) -> Path:
        return self.directory / "audit.jsonl"

    @property
    def log_file(self) -> Path:
        return self.directory / "server.log"

    def client(self, agent: str = "alice") -> httpx.Client:
        return httpx.Client(base_url=self.base, headers={"Authorization": f"Bearer {TENANT_TOKENS[agent]}"},
                            timeout=90)

    def audit(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.audit_file.read_text().splitlines() if line]

    def stop(self) -> int:
        self.process.terminate()
        return self.process.wait(timeout=60)


def serve(directory: Path, nats: NatsAccess, config: dict[str, Any], *args: str) -> Served:
    """Start ``kitsune serve`` on a free port, joining ``nats``, with ``config`` (agents alice and bob unless given)."""
    settings = {"agents": [{"name": name, "token": token} for name, token in TOKENS.items()],
                "fleet": directory.name, "nats": nats.serve_settings(),
                "audit_file": str(directory / "audit.jsonl"), **config}
    (directory / "kitsune.yaml").write_text(yaml.safe_dump(settings))
    log = (directory / "server.log").open("w")
    process = subprocess.Popen(
        [str(KITSUNE), "serve", "--port", "0", "--config", str(directory / "kitsune.yaml"),
         "--state-dir", str(directory / "state"), *args],
        stdout=subprocess.PIPE, stderr=log, text=True, env=nats.serve_env())
    assert process.stdout is not None
    for line in _lines(process):
        if line.startswith("kitsune serving "):
            return Served(process, line.split()[2], directory)
    process.kill()
    raise AssertionError(f"kitsune serve did not start:\n{(directory / 'server.log').read_text()}")


def _lines(process: subprocess.Popen[str]) -> Iterator[str]:
    assert process.stdout is not None
    for line in process.stdout:
        yield line
        if line.startswith("kitsune serving "):
            return


@contextlib.contextmanager
def app_over(node: Node, config: Settings, app: ASGIApp | None = None) -> Iterator[str]:
    """The real app over a started in-process node (or ``app``), served by uvicorn on the node's own loop;
    its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app or create_app(node, config), host="127.0.0.1", port=port,
                                           log_config=None, lifespan="off",
                                           **proxy_options(config.http)))
    running = asyncio.run_coroutine_threadsafe(server.serve(), node.io.loop)
    try:
        while not server.started:
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        running.result(timeout=30)


@contextlib.contextmanager
def audited_node(nats_access: NatsAccess, audit_dir: Path, fleet: str) -> Iterator[Node]:
    """A started node of a fleet of its own (``fleet`` and a random suffix), its audit log in ``audit_dir``."""
    config = nats_access.node_config(step_timeout=10.0, fleet=f"{fleet}-{secrets.token_hex(4)}",
                                     audit_file=audit_dir / "audit.jsonl")
    started = run_node(ChromiumBrowser(), config)
    try:
        yield started
    finally:
        started.stop()


@contextlib.contextmanager
def served_to(node: Node, tokens: dict[str, str]) -> Iterator[str]:
    """``node``'s API served to the agents of ``tokens`` (groups core and automation); its base URL."""
    config = load_config(None, {"KITSUNE_AGENTS": ",".join(f"{a}={t}" for a, t in tokens.items()),
                                "KITSUNE_CAPS": "core,automation"})
    with app_over(node, config) as base:
        yield base
