"""``kitsune mcp --bridge`` says at start, on standard error, what is wrong with its bridge (issue 29, section 7).

A token the bridge refuses can never work: the gateway says so and exits 1. A bridge that cannot
be reached may start later: the gateway says so and serves, its tools answering ``bridge_unavailable``.
A client that leaves before the gateway serves (issue 35) ends it at once: nothing waits for a bridge
that keeps it waiting, nor for the SDK; an embedded bridge is stopped and leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO

import pytest

from actors.nats_server import free_port
from tests.e2e.clients import process_tree, processes

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


@contextlib.contextmanager
def _bridge(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A stand-in bridge on a free loopback port, answering with ``handler``: its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture
def refusing() -> Iterator[str]:
    with _bridge(_Refusing) as url:
        yield url


@pytest.fixture
def silent() -> Iterator[str]:
    """A bridge that takes every request and answers none (until the test ends)."""
    released = threading.Event()

    class _Silent(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            released.wait()

        def log_message(self, *args: object) -> None:
            pass

    with _bridge(_Silent) as url:
        try:
            yield url
        finally:
            released.set()


def _gateway(bridge: str | None) -> subprocess.Popen[bytes]:
    return subprocess.Popen([str(KITSUNE), "mcp", *(["--bridge", bridge] if bridge else [])], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "KITSUNE_TOKEN": "wrong-token-0123456789abcdef"})


def _initialized(gateway: subprocess.Popen[bytes]) -> tuple[IO[bytes], IO[bytes]]:
    """The front's answer to an ``initialize`` read; the gateway's stdin and stderr."""
    assert gateway.stdin is not None and gateway.stdout is not None and gateway.stderr is not None
    gateway.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}}).encode() + b"\n")
    gateway.stdin.flush()
    assert json.loads(gateway.stdout.readline())["id"] == 1  # it serves
    return gateway.stdin, gateway.stderr


def test_a_refused_token_is_said_on_stderr_and_the_gateway_exits_1(refusing: str) -> None:
    gateway = _gateway(refusing)
    assert gateway.stdin is not None and gateway.stderr is not None
    with gateway.stdin:  # open, as a client's: the gateway ends by itself
        assert gateway.wait(timeout=60) == 1
    assert gateway.stderr.read().decode() == (
        f"kitsune mcp: the bridge at {refusing} refused the agent's token (401 unauthorized): "
        "check --token-file, KITSUNE_TOKEN or ~/.kitsune/token\n")


def test_an_unreachable_bridge_is_said_on_stderr_and_the_gateway_serves_on() -> None:
    bridge = f"http://127.0.0.1:{free_port()}"
    gateway = _gateway(bridge)
    assert gateway.stdin is not None and gateway.stdout is not None and gateway.stderr is not None
    try:
        line = gateway.stderr.readline().decode()
        assert line.startswith(f"kitsune mcp: the bridge at {bridge} cannot be reached (")
        assert line.endswith("; tools answer bridge_unavailable until it does\n")
        _initialized(gateway)
    finally:
        gateway.stdin.close()
        gateway.wait(timeout=60)


def test_a_client_that_leaves_while_the_bridge_keeps_the_gateway_waiting_ends_it_at_once(silent: str) -> None:
    gateway = _gateway(silent)
    stdin, stderr = _initialized(gateway)  # the front answers; the bridge's groups are still awaited (10 s at most)
    stdin.close()
    assert gateway.wait(timeout=60) == 0
    assert stderr.read() == b""  # it never said the bridge did not answer GET /api/caps: it did not wait for that


def test_a_client_that_leaves_before_the_embedded_bridge_serves_ends_the_gateway_and_the_bridge() -> None:
    gateway = _gateway(None)
    stdin, _ = _initialized(gateway)  # the embedded bridge was launched before the front answered
    running = processes()
    bridges = [pid for pid in process_tree(gateway.pid, running) if "kitsune.cli serve" in running[pid][1]]
    assert len(bridges) == 1
    state_dir = Path(running[bridges[0]][1].split("--state-dir ")[1].split()[0]).parent
    assert state_dir.is_dir()
    stdin.close()
    assert gateway.wait(timeout=60) == 0
    assert bridges[0] not in processes()  # stopped and waited for before the gateway exited
    assert not state_dir.exists()


def test_sigterm_while_the_front_serves_calls_before_the_sdk_stops_the_embedded_bridge() -> None:
    """The gateway's loop runs before the MCP SDK is wanted: a SIGTERM then stops the embedded bridge (its state
    directory removed) and ends the gateway, as it does once the SDK serves."""
    gateway = _gateway(None)
    stdin, _ = _initialized(gateway)
    assert gateway.stdout is not None
    stdin.write(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                            "params": {"name": "browser_nope", "arguments": {}}}).encode() + b"\n")
    stdin.flush()
    answer = json.loads(gateway.stdout.readline())  # the front's: the gateway's loop serves
    assert answer["id"] == 2 and answer["result"]["structuredContent"]["code"] == "unknown_tool"
    running = processes()
    bridges = [pid for pid in process_tree(gateway.pid, running) if "kitsune.cli serve" in running[pid][1]]
    state_dir = Path(running[bridges[0]][1].split("--state-dir ")[1].split()[0]).parent
    gateway.send_signal(signal.SIGTERM)
    assert gateway.wait(timeout=60) == 0
    assert bridges[0] not in processes() and not state_dir.exists()
    stdin.close()
