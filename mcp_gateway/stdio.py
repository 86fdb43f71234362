"""``kitsune mcp``: MCP over stdio, against a running bridge or an embedded one.

With ``--bridge URL`` the gateway talks to that bridge's HTTP API as one agent (its token from
``--token-file``, ``KITSUNE_TOKEN`` or ``~/.kitsune/token``). Without it, the gateway starts an
embedded bridge for its own lifetime: a ``kitsune serve`` child on a free loopback port (with its
own embedded NATS and Chromium), reachable only with a token generated for this run, and stops
it on exit. The child is in its own session and gets SIGTERM if the gateway dies, so it always
shuts down gracefully (NATS and Chromium with it); its state directory is temporary and removed.

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
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx
import yaml
from mcp.server.stdio import stdio_server

from mcp_gateway._bridge import Bridge
from mcp_gateway.server import Caller, Gateway, approval_wait_from_env
from messages.tokens import new_token

__all__ = ["EmbeddedBridge", "caps_from_env", "run"]

_GROUPS = frozenset({"core", "automation"})
_PR_SET_PDEATHSIG = 1
_START_TIMEOUT = 120.0


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
        self.token = new_token(32)
        self.url = ""

    def start(self) -> str:
        """Start the child and wait until it serves; its base URL."""
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
        found: list[str] = []
        reader = threading.Thread(target=self._read, args=(found,), name="kitsune-bridge-out", daemon=True)
        reader.start()
        reader.join(_START_TIMEOUT)
        if not found:
            self.stop()
            raise RuntimeError("the embedded bridge did not start (its log is on standard error)")
        self.url = found[0]
        return self.url

    def _read(self, found: list[str]) -> None:
        """Find the 'kitsune serving URL' line, then keep draining the child's output (to standard error)."""
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            if not found and line.startswith("kitsune serving "):
                found.append(line.split()[2])
                threading.Thread(target=self._drain, name="kitsune-bridge-drain", daemon=True).start()
                return
            sys.stderr.write(line)

    def _drain(self) -> None:
        assert self._process is not None and self._process.stdout is not None
        for line in self._process.stdout:
            sys.stderr.write(line)

    def stop(self) -> None:
        """Stop the child gracefully (SIGTERM, then SIGKILL after 30 s) and remove its directory."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
            try:
                process.wait(30)
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


async def _serve(url: str, token: str, caps: frozenset[str]) -> None:
    async with httpx.AsyncClient(base_url=url) as http:
        gateway = Gateway(caps, approval_wait=approval_wait_from_env())
        bridge = Bridge(http, token)
        server = gateway.server(lambda ctx: Caller("stdio", bridge, ctx))
        async with anyio.create_task_group() as group:

            async def stop_on_signal() -> None:
                with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGHUP) as signals:
                    async for _ in signals:
                        group.cancel_scope.cancel()
                        return

            group.start_soon(stop_on_signal)
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
            group.cancel_scope.cancel()


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
    """Serve MCP over stdio until the client closes it (or SIGTERM); the exit status."""
    try:
        if bridge:
            caps = caps_from_env(frozenset({"core"}))
            token = _read_token(token_file)
        else:
            caps = caps_from_env(_GROUPS)  # the embedded bridge's own groups decide
    except (OSError, ValueError) as e:
        print(f"kitsune mcp: {e}", file=sys.stderr)
        return 1
    embedded = None
    if not bridge:
        embedded = EmbeddedBridge(config=config, nats_url=nats_url)
        try:
            bridge = embedded.start()
        except (OSError, RuntimeError) as e:
            print(f"kitsune mcp: {e}", file=sys.stderr)
            return 1
        token = embedded.token
    try:
        anyio.run(_serve, bridge.rstrip("/"), token, caps)
    except KeyboardInterrupt:
        pass
    finally:
        if embedded is not None:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stopping the bridge is not to be cut short
            embedded.stop()
    return 0
