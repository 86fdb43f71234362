"""``kitsune mcp --bridge`` says at start, on standard error, what is wrong with its bridge (issue 29, section 7).

A token the bridge refuses can never work: the gateway says so and exits 1. A bridge that cannot
be reached may start later: the gateway says so and serves, its tools answering ``bridge_unavailable``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from actors.nats_server import free_port

KITSUNE = Path(sys.executable).parent / "kitsune"


class _Refusing(BaseHTTPRequestHandler):
    """A bridge that refuses every token, as the real one does."""

    def do_GET(self) -> None:
        body = b'{"error":"A valid bearer token is needed","code":"unauthorized","retryable":false}'
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def refusing() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def _gateway(bridge: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(KITSUNE), "mcp", "--bridge", bridge], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "KITSUNE_TOKEN": "wrong-token-0123456789abcdef"})


def test_a_refused_token_is_said_on_stderr_and_the_gateway_exits_1(refusing: str) -> None:
    gateway = _gateway(refusing)
    _, stderr = gateway.communicate(timeout=60)
    assert gateway.returncode == 1
    assert stderr.decode() == (f"kitsune mcp: the bridge at {refusing} refused the agent's token (401 unauthorized): "
                               "check --token-file, KITSUNE_TOKEN or ~/.kitsune/token\n")


def test_an_unreachable_bridge_is_said_on_stderr_and_the_gateway_serves_on() -> None:
    bridge = f"http://127.0.0.1:{free_port()}"
    gateway = _gateway(bridge)
    assert gateway.stdin is not None and gateway.stdout is not None and gateway.stderr is not None
    try:
        line = gateway.stderr.readline().decode()
        assert line.startswith(f"kitsune mcp: the bridge at {bridge} cannot be reached (")
        assert line.endswith("; tools answer bridge_unavailable until it does\n")
        gateway.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}}).encode() + b"\n")
        gateway.stdin.flush()
        assert json.loads(gateway.stdout.readline())["id"] == 1  # it serves
    finally:
        gateway.stdin.close()
        gateway.wait(timeout=60)
