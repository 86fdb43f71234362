"""The ``kitsune`` command line."""

from __future__ import annotations

import argparse
import gc
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["main"]

# each command loads only what it runs: `kitsune mcp` launches its bridge, and `kitsune serve` its
# Chromium, before the command language and the rest load

# httpx's import loads its own command line client, with click, rich and pygments where they are installed (0.06 s of
# CPU of the 0.16 s `import httpx` took, on the way to `kitsune mcp`'s first answer); no kitsune process runs it, and
# a module set to None in sys.modules is one Python does not import (httpx then defines a stub for it)
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


class _Version(argparse.Action):
    """``--version``: the installed package's version, read only when asked for."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from importlib.metadata import version  # noqa: PLC0415 (a tenth of a second, for this option alone)
        parser.exit(message=f"kitsune {version('kitsune')}\n")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kitsune",
        description="Kitsune runs AI agents' browser commands on real Chromium tabs, "
                    "with checkpoints and safe resume.",
    )
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    schema = commands.add_parser("schema", help="print the JSON Schema of the command language")
    schema.add_argument("--of", choices=("command", "batch", "parallel"), default="command",
                        help="a single command (default), a batch body or a parallel body")
    serve = commands.add_parser("serve", help="run a Kitsune node: embedded NATS, local Chromium, the HTTP API")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    serve.add_argument("--port", type=int, default=8765, help="port to listen on (default 8765; 0 picks one)")
    serve.add_argument("--config", help="configuration file (YAML or JSON): agents, policy, limits, NATS; "
                                        "KITSUNE_<KEY> variables override it (see docs/guides/running.md)")
    serve.add_argument("--state-dir", default=str(Path.home() / ".kitsune"),
                       help="where a generated agent token is written (default ~/.kitsune)")
    serve.add_argument("--nats-url", help="join this NATS server or cluster (comma-separated URLs) "
                                          "instead of starting an embedded nats-server")
    serve.add_argument("--no-mcp", action="store_true", help="serve no MCP at /mcp (kitsune mcp's embedded bridge, "
                                                             "whose gateway speaks stdio, has none)")
    fleet = commands.add_parser("fleet", help="try a fleet on this machine: a 3-server NATS cluster "
                                              "(deploy/nats) and N nodes joining it, until Ctrl-C")
    fleet.add_argument("--nodes", type=int, default=2, help="how many nodes (default 2)")
    fleet.add_argument("--config", help="configuration file every node reads (agent 'default' is added)")
    fleet.add_argument("--dir", help="where logs, JetStream and tokens go, kept after (default: a temporary one)")
    provision = commands.add_parser("provision", help="make or update a joined cluster's streams and buckets "
                                                      "as its NATS administrator (nodes may not change them)")
    provision.add_argument("--nats-url", help="the NATS server or cluster (default: --config's nats.url)")
    provision.add_argument("--config", help="a node's configuration file: its nats section's URL and TLS options")
    provision.add_argument("--user", help="the administrator user (default kitsune-admin)")
    provision.add_argument("--password-env", default="NATS_ADMIN_PASSWORD",
                           help="the variable holding its password (default NATS_ADMIN_PASSWORD)")
    provision.add_argument("--creds-file", help="the administrator's NATS .creds file, instead of a password")
    drain = commands.add_parser("drain", help="have a node leave its fleet gracefully: no new calls, its calls "
                                              "in flight finish (operator token in KITSUNE_OPERATOR_TOKEN)")
    drain.add_argument("--url", default="http://127.0.0.1:8765", help="a node's HTTP API (default "
                                                                      "http://127.0.0.1:8765)")
    drain.add_argument("--node", help="the node to drain (default: the node at --url)")
    drain.add_argument("--deadline", type=float, help="seconds its calls in flight get (default: its drain_deadline)")
    drain.add_argument("--wait", action="store_true", help="return once the node left the fleet")
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
    from messages import strict_json  # noqa: PLC0415 (loaded by the command that runs it)
    from messages.commands import parse_body  # noqa: PLC0415
    from messages.errors import KitsuneError  # noqa: PLC0415
    text = sys.stdin.read() if file == "-" else Path(file).read_text()
    try:
        body = strict_json.loads(text)
        spec = parse_body("parallel" if isinstance(body, dict) and "sequences" in body else "batch", body)
    except KitsuneError as e:
        print(json.dumps(e.to_json()))
        return 1
    print(json.dumps({"ok": True, "kind": spec.kind, "commands": len(spec.commands)}))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``kitsune`` console script."""
    args = _parser().parse_args(argv)
    if args.command in ("serve", "mcp"):
        # a start makes a few hundred thousand objects that live as long as the process, and the collector's passes
        # over them took a tenth of its CPU (0.04 s of kitsune mcp's, 0.08 s of its bridge's, on the way to the first
        # answer): it is off until the command has started (kitsune.node_server, mcp_gateway.command), which then
        # turns it on with what the start made frozen (gc.freeze: kept out of its passes)
        gc.disable()
    if args.command == "schema":
        from messages.schema import batch_schema, command_schema, parallel_schema  # noqa: PLC0415
        schema = {"command": command_schema, "batch": batch_schema, "parallel": parallel_schema}[args.of]()
        print(json.dumps(schema, indent=2))
        return 0
    if args.command == "validate":
        return _validate(args.file)
    if args.command == "serve":
        from kitsune.serve import serve  # noqa: PLC0415 (loaded by the command that runs it)
        return serve(args)
    if args.command == "fleet":
        from kitsune.fleet import run as run_fleet  # noqa: PLC0415 (loaded by the command that runs it)
        return run_fleet(args)
    if args.command == "provision":
        from kitsune.provision import run as run_provision  # noqa: PLC0415 (loaded by the command that runs it)
        return run_provision(args)
    if args.command == "drain":
        from kitsune.drain import run as run_drain  # noqa: PLC0415 (loaded by the command that runs it)
        return run_drain(args)
    if args.command == "mcp":
        from mcp_gateway.command import run  # noqa: PLC0415 (loaded by the command that runs it)
        return run(bridge=args.bridge, token_file=args.token_file, config=args.config, nats_url=args.nats_url,
                   configured_caps=_configured_caps)
    _parser().print_help()
    return 0


def _configured_caps(config: str | None) -> frozenset[str]:
    """The capability groups a configuration file (None: the environment alone) gives the node's agents."""
    from kitsune.config import load_config  # noqa: PLC0415 (after the MCP front started: it takes 0.4 s)
    return load_config(Path(config) if config else None).policy.caps


if __name__ == "__main__":
    sys.exit(main())
