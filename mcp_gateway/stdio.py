"""``kitsune mcp``: MCP over stdio, against a running bridge or an embedded one.

With ``--bridge URL`` the gateway talks to that bridge's HTTP API as one agent (its token from
``--token-file``, ``KITSUNE_TOKEN`` or ``~/.kitsune/token``). Without it, the gateway starts an
embedded bridge for its own lifetime: a ``kitsune serve`` child on a free loopback port (with its
own embedded NATS and Chromium), reachable only with a token generated for this run, and stops
it on exit. The child starts in the background: the client's ``initialize`` and ``tools/list``
are answered at once (the tools from the child's configuration), and the first request to the
bridge waits until it serves. The child is in its own session and gets SIGTERM if the gateway
dies, so it always shuts down gracefully (NATS and Chromium with it); its state directory is
temporary and removed.

When the client closes stdin (or sends SIGTERM or SIGHUP), the calls in flight are cancelled at
once, not awaited: the SDKs kill a server 2 to 4 s after closing its stdin, and the embedded
bridge must be stopped and its directory removed by then.

Standard output is the MCP channel: nothing else may write to it, so the child's output is read
through a pipe and its log goes to standard error.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, NoReturn

import anyio
import httpx
import yaml
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from bridge.config import load_config
from mcp_gateway._bridge import Bridge, BridgeNotStarted
from mcp_gateway._caller import Caller
from mcp_gateway.server import Gateway, approval_wait_from_env
from messages.errors import KitsuneError
from messages.tokens import new_token

__all__ = ["EmbeddedBridge", "caps_from_env", "run"]

_GROUPS = frozenset({"core", "automation"})
_PR_SET_PDEATHSIG = 1
_START_TIMEOUT = 120.0
"""Seconds the embedded bridge gets to serve."""
_STOP_TIMEOUT = 10.0
"""Seconds the embedded bridge gets to stop before it is killed."""


def caps_from_env(default: frozenset[str]) -> frozenset[str]:
    """``KITSUNE_CAPS`` (comma-separated groups), or ``default`` when it is not set."""
    raw = os.environ.get("KITSUNE_CAPS", "").strip()
    if not raw:
        return default
    caps = frozenset(c.strip() for c in raw.split(",") if c.strip())
    unknown = caps - _GROUPS
    if unknown:
        raise ValueError(f"unknown capability group(s) in KITSUNE_CAPS: {', '.join(sorted(unknown))}")
    return caps


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to SIGTERM the child when the gateway dies; None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


class EmbeddedBridge:
    """A ``kitsune serve`` child for the gateway's lifetime, on a free loopback port."""

    def __init__(self, *, config: str | None = None, nats_url: str | None = None) -> None:
        self._config = config
        self._nats_url = nats_url
        self._process: subprocess.Popen[str] | None = None
        self._directory: Path | None = None
        self._serving = threading.Event()
        self.token = new_token(32)
        self.url: str | None = None
        """The child's base URL once it serves (None until then, and when it did not start)."""

    def launch(self) -> None:
        """Start the child; :meth:`wait` says when it serves."""
        self._directory = Path(tempfile.mkdtemp(prefix="kitsune-mcp-"))
        env = dict(os.environ)
        agents = env.get("KITSUNE_AGENTS", "").strip()
        env["KITSUNE_AGENTS"] = f"{agents},mcp={self.token}" if agents else f"mcp={self.token}"
        if "KITSUNE_AUDIT_FILE" not in env and not _names_audit_file(self._config):  # the environment would win
            env["KITSUNE_AUDIT_FILE"] = str(self._directory / "audit.jsonl")
        command = [sys.executable, "-m", "kitsune.cli", "serve", "--host", "127.0.0.1", "--port", "0",
                   "--state-dir", str(self._directory / "state")]
        if self._config:
            command += ["--config", self._config]
        if self._nats_url:
            command += ["--nats-url", self._nats_url]
        self._process = subprocess.Popen(
            command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=sys.stderr, text=True,
            start_new_session=True, preexec_fn=_die_with_parent())  # noqa: PLW1509 (it only calls prctl)
        threading.Thread(target=self._read, args=(self._process,), name="kitsune-bridge-out", daemon=True).start()

    def wait(self) -> str:
        """The child's base URL once it serves (from a thread); ``BridgeNotStarted`` when it does not."""
        if not self._serving.wait(_START_TIMEOUT) or self.url is None:
            raise BridgeNotStarted("the embedded bridge did not start (its log is on standard error)")
        return self.url

    def _read(self, process: subprocess.Popen[str]) -> None:
        """Find the 'kitsune serving URL' line, and pass the child's output on to standard error."""
        assert process.stdout is not None
        try:
            for line in process.stdout:
                if self.url is None and line.startswith("kitsune serving "):
                    self.url = line.split()[2]
                    self._serving.set()
                else:
                    sys.stderr.write(line)
        finally:
            self._serving.set()  # the output ended: it serves no more, or never did

    def stop(self) -> None:
        """Stop the child gracefully (SIGTERM, then SIGKILL after 10 s) and remove its directory."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                process.wait(_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                process.wait()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None


def _read_token(token_file: str | None) -> str:
    if token_file:
        return Path(token_file).read_text().strip()
    if os.environ.get("KITSUNE_TOKEN", "").strip():
        return os.environ["KITSUNE_TOKEN"].strip()
    default = Path.home() / ".kitsune" / "token"
    if default.is_file():
        return default.read_text().strip()
    raise ValueError("--bridge needs the agent's token: --token-file FILE or KITSUNE_TOKEN")


async def _serve(gateway: Gateway, bridge: Bridge, starting: Callable[[], Coroutine[Any, Any, None]] | None,
                 embedded: EmbeddedBridge | None) -> None:
    """Serve the client until its stdin ends or SIGTERM/SIGHUP: either way the calls still running
    are cancelled at once (nobody is left to read their answers)."""
    server = gateway.server(lambda ctx: Caller("stdio", bridge, ctx))
    signalled = False
    async with stdio_server() as (stdin, stdout):
        async with anyio.create_task_group() as group:
            forward, incoming = anyio.create_memory_object_stream[SessionMessage | Exception]()

            async def until_end() -> None:
                async with forward:
                    async for message in stdin:
                        await forward.send(message)
                group.cancel_scope.cancel()

            async def until_signal() -> None:
                nonlocal signalled
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                    async for _ in signals:
                        signalled = True
                        group.cancel_scope.cancel()

            group.start_soon(until_end)
            group.start_soon(until_signal)
            if starting is not None:
                group.start_soon(starting)
            await server.run(incoming, stdout, server.create_initialization_options())
            group.cancel_scope.cancel()
        if signalled:  # stdin is still open: its reader, a thread blocked on a read, would hold the exit
            _leave(embedded)


def _leave(embedded: EmbeddedBridge | None) -> NoReturn:
    """Stop the embedded bridge and exit at once."""
    if embedded is not None:
        embedded.stop()
    sys.stderr.flush()
    os._exit(0)


def _names_audit_file(config: str | None) -> bool:
    """Whether the configuration file sets ``audit_file`` (an unreadable one is the bridge's to refuse)."""
    if not config:
        return False
    try:
        document = yaml.safe_load(Path(config).read_bytes())
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(document, dict) and "audit_file" in document


def run(*, bridge: str | None, token_file: str | None, config: str | None, nats_url: str | None) -> int:
    """Serve MCP over stdio until the client closes it (or SIGTERM); the exit status.

    The tool list follows the bridge's groups (``GET /api/caps``; an embedded bridge's configuration),
    narrowed by ``KITSUNE_CAPS``. An embedded bridge starts in the background: ``initialize`` and
    ``tools/list`` are answered at once, and the first request to it waits until it serves.
    """
    try:
        caps = caps_from_env(_GROUPS)
        token = _read_token(token_file) if bridge else ""
        known = None if bridge else load_config(Path(config) if config else None).caps
    except (OSError, ValueError) as e:
        print(f"kitsune mcp: {e}", file=sys.stderr)
        return 1
    except KitsuneError as e:
        print(f"kitsune mcp: {e.message}", file=sys.stderr)
        return 1
    gateway = Gateway(caps, approval_wait=approval_wait_from_env(), bridge_caps=known)
    embedded = None if bridge else EmbeddedBridge(config=config, nats_url=nats_url)
    try:
        if embedded is not None:
            embedded.launch()
        anyio.run(_connected, gateway, bridge, token, embedded)
    except KeyboardInterrupt:
        pass
    except OSError as e:
        print(f"kitsune mcp: {e}", file=sys.stderr)
        return 1
    finally:
        if embedded is not None:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stopping the bridge is not to be cut short
            embedded.stop()
    return 0


async def _connected(gateway: Gateway, url: str | None, token: str, embedded: EmbeddedBridge | None) -> None:
    """Serve over a bridge at ``url``, or over the embedded one once it serves."""
    async with httpx.AsyncClient(base_url=url.rstrip("/") if url else "") as http:
        if embedded is None:
            await _serve(gateway, Bridge(http, token), None, None)
            return
        served = anyio.Event()
        failure: list[BridgeNotStarted] = []

        async def starting() -> None:
            try:
                http.base_url = httpx.URL(await anyio.to_thread.run_sync(embedded.wait, abandon_on_cancel=True))
            except BridgeNotStarted as e:
                print(f"kitsune mcp: {e}", file=sys.stderr)
                failure.append(e)
            served.set()

        async def started() -> None:
            await served.wait()
            if failure:
                raise failure[0]

        await _serve(gateway, Bridge(http, embedded.token, started=started), starting, embedded)
