"""The ``kitsune`` command line."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import socket
import sys
from importlib.metadata import version
from pathlib import Path
from types import FrameType

import uvicorn

from actors.bus import display_url
from bridge.browser import ChromiumBrowser, find_chromium
from bridge.config import BridgeConfig, load_config, write_token_file
from bridge.logs import configure_logging
from bridge.node import Node, NodeConfig
from bridge.policy import Policy
from bridge.url_policy import UrlPolicy
from bridge.workflows import WorkflowLibrary
from kitsune.app import create_app
from mcp_gateway.stdio import run as run_mcp
from messages import strict_json
from messages.commands import parse_body
from messages.errors import KitsuneError
from messages.schema import batch_schema, command_schema, parallel_schema

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kitsune",
        description="Kitsune runs AI agents' browser commands on real Chromium tabs, "
                    "with checkpoints and safe resume.",
    )
    parser.add_argument("--version", action="version", version=f"kitsune {version('kitsune')}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    schema = commands.add_parser("schema", help="print the JSON Schema of the command language")
    schema.add_argument("--of", choices=("command", "batch", "parallel"), default="command",
                        help="a single command (default), a batch body or a parallel body")
    serve = commands.add_parser("serve", help="run a Kitsune node: embedded NATS, local Chromium, the HTTP API")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    serve.add_argument("--port", type=int, default=8765, help="port to listen on (default 8765; 0 picks one)")
    serve.add_argument("--config", help="configuration file (YAML or JSON): agents, policy, limits, NATS; "
                                        "KITSUNE_<KEY> variables override it (see README)")
    serve.add_argument("--state-dir", default=str(Path.home() / ".kitsune"),
                       help="where a generated agent token is written (default ~/.kitsune)")
    serve.add_argument("--nats-url", help="join this NATS server or cluster (comma-separated URLs) "
                                          "instead of starting an embedded nats-server")
    check = commands.add_parser("validate", help="validate a batch or parallel body (JSON file, - for stdin)")
    check.add_argument("file", help="the call body: {\"commands\": [...]} or {\"sequences\": [...]}")
    mcp = commands.add_parser("mcp", help="serve MCP over stdio: against --bridge URL, or an embedded bridge")
    mcp.add_argument("--bridge", help="a running bridge's base URL; without it an embedded bridge runs for the "
                                      "gateway's lifetime")
    mcp.add_argument("--token-file", help="file holding the agent's bearer token for --bridge (or KITSUNE_TOKEN)")
    mcp.add_argument("--config", help="configuration file of the embedded bridge")
    mcp.add_argument("--nats-url", help="NATS server or cluster the embedded bridge joins")
    return parser


def _validate(file: str) -> int:
    text = sys.stdin.read() if file == "-" else Path(file).read_text()
    try:
        body = strict_json.loads(text)
        spec = parse_body("parallel" if isinstance(body, dict) and "sequences" in body else "batch", body)
    except KitsuneError as e:
        print(json.dumps(e.to_json()))
        return 1
    print(json.dumps({"ok": True, "kind": spec.kind, "commands": len(spec.commands)}))
    return 0


def _serve(args: argparse.Namespace) -> int:
    configure_logging(logging.INFO)  # JSON lines on standard error
    try:
        config = load_config(Path(args.config) if args.config else None)
        policy = Policy(read_only=config.read_only, ask_before_act=config.ask_before_act,
                        urls=UrlPolicy.from_config(config.allow, config.deny),
                        user_tabs_writable=config.user_tabs_writable)
    except KitsuneError as e:  # the configuration is wrong: a usage error
        print(f"kitsune: cannot start: {e.message}", file=sys.stderr)
        return 2
    if config.generated_token is not None:
        token_file = write_token_file(config.generated_token, Path(args.state_dir))
        print(f"kitsune: no agent configured; the token of agent 'default' is in {token_file}", flush=True)
    return asyncio.run(_serve_http(args, config, policy))


_SHUTDOWN_GRACE = 3
"""Seconds open connections get to finish after a stop, once the node's tabs were interrupted."""


class _Server(uvicorn.Server):
    """uvicorn's server, exiting with status 0 after a stop on SIGINT or SIGTERM that takes seconds,
    whatever is in flight: the node's tabs are interrupted first (running writes end unknown)."""

    def __init__(self, config: uvicorn.Config, node: Node) -> None:
        super().__init__(config)
        self._node = node

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True
        else:
            self.should_exit = True

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await self._node.interrupt()
        await super().shutdown(sockets)


async def _serve_http(args: argparse.Namespace, config: BridgeConfig, policy: Policy) -> int:
    settings = NodeConfig(nats_url=args.nats_url or config.nats_url, nats_auth=config.nats_auth, fleet=config.fleet,
                          audit_file=config.audit_file)
    node = Node(ChromiumBrowser(), settings, policy=policy,
                workflows=WorkflowLibrary(config.workflows) if config.workflows else None,
                loop=asyncio.get_running_loop())
    try:
        await node.astart()
    except KitsuneError as e:
        print(f"kitsune: cannot start: {e.message}", file=sys.stderr)
        return 1
    server = _Server(uvicorn.Config(create_app(node, config), host=args.host, port=args.port, log_config=None,
                                    access_log=False, lifespan="off", timeout_graceful_shutdown=_SHUTDOWN_GRACE),
                     node)

    async def announce() -> None:
        while not server.started:
            if server.should_exit:
                return
            await asyncio.sleep(0.05)
        host, port = server.servers[0].sockets[0].getsockname()[:2]
        node.browser.own_endpoints.add((host, port))
        nats = display_url(settings.nats_url) if settings.nats_url else (node.nats.url if node.nats else "")
        print(f"kitsune serving http://{host}:{port} (nats {nats}, chromium {find_chromium()})", flush=True)

    announcer = asyncio.create_task(announce())
    try:
        await server.serve()
    finally:
        announcer.cancel()
        await node.astop()
    return 0 if server.started else 1


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``kitsune`` console script."""
    args = _parser().parse_args(argv)
    if args.command == "schema":
        schema = {"command": command_schema, "batch": batch_schema, "parallel": parallel_schema}[args.of]()
        print(json.dumps(schema, indent=2))
        return 0
    if args.command == "validate":
        return _validate(args.file)
    if args.command == "serve":
        return _serve(args)
    if args.command == "mcp":
        return run_mcp(bridge=args.bridge, token_file=args.token_file, config=args.config, nats_url=args.nats_url)
    _parser().print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
