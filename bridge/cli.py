"""The ``kitsune`` command line."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from importlib.metadata import version
from pathlib import Path

from bridge.browser import ChromiumBrowser, find_chromium
from bridge.node import Node, NodeConfig
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
    serve = commands.add_parser("serve", help="run a Kitsune node (embedded NATS, local Chromium, the actors)")
    serve.add_argument("--nats-url", help="join this NATS server or cluster (comma-separated URLs) "
                                          "instead of starting an embedded nats-server")
    check = commands.add_parser("validate", help="validate a batch or parallel body (JSON file, - for stdin)")
    check.add_argument("file", help="the call body: {\"commands\": [...]} or {\"sequences\": [...]}")
    return parser


def _validate(file: str) -> int:
    text = sys.stdin.read() if file == "-" else Path(file).read_text()
    try:
        body = json.loads(text)
    except json.JSONDecodeError as e:
        print(json.dumps({"error": f"not JSON: {e.msg} at line {e.lineno}", "code": "invalid_json"}))
        return 1
    try:
        spec = parse_body("parallel" if isinstance(body, dict) and "sequences" in body else "batch", body)
    except KitsuneError as e:
        print(json.dumps(e.to_json()))
        return 1
    print(json.dumps({"ok": True, "kind": spec.kind, "commands": len(spec.commands)}))
    return 0


def _serve(nats_url: str | None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    try:
        node = Node(ChromiumBrowser(), NodeConfig(nats_url=nats_url)).start()
    except KitsuneError as e:
        print(f"kitsune: cannot start: {e.message}", file=sys.stderr)
        return 1
    where = nats_url or (node.nats.url if node.nats else "")
    print(f"kitsune node ready: nats {where}, chromium {find_chromium()}", flush=True)
    try:
        stop.wait()
    finally:
        node.stop()
    return 0


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
        return _serve(args.nats_url)
    _parser().print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
