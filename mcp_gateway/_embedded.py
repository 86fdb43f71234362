"""The embedded bridge of ``kitsune mcp``: a ``kitsune serve`` child for the gateway's lifetime.

It listens on a free loopback port, with its own embedded NATS and Chromium, reachable only with a
token generated for this run. It is in its own session and gets SIGTERM if the gateway dies, so it
always shuts down gracefully (NATS and Chromium with it); its state directory is temporary and
removed. Standard library only: it is launched before the MCP SDK loads, so that Chromium and NATS
start while the gateway answers its client's first requests.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from messages.tokens import new_token

__all__ = ["BridgeNotStarted", "EmbeddedBridge", "leave"]


class BridgeNotStarted(Exception):
    """The bridge the gateway runs (embedded) did not start; its message says why."""


_PR_SET_PDEATHSIG = 1
_START_TIMEOUT = 120.0
"""Seconds the embedded bridge gets to serve."""
_STOP_TIMEOUT = 10.0
"""Seconds the embedded bridge gets to stop before it is killed."""


def _die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to SIGTERM the child when the gateway dies; None elsewhere (``prctl`` among
    the symbols of the running process: ``ctypes.util.find_library`` runs ``ldconfig``, 20 ms and more before the
    bridge could start)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
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
        self._stopping = threading.Lock()
        """Held while the child stops: a second :meth:`stop` (another thread's) returns once it stopped."""
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
                   "--state-dir", str(self._directory / "state"), "--no-mcp"]
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
        with self._stopping:
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


def leave(embedded: EmbeddedBridge | None) -> NoReturn:
    """Stop the embedded bridge (if any) and exit at once, whatever the other threads are doing."""
    if embedded is not None:
        embedded.stop()
    sys.stderr.flush()
    os._exit(0)


def _names_audit_file(config: str | None) -> bool:
    """Whether the configuration file sets ``audit_file`` (an unreadable one is the bridge's to refuse)."""
    if not config:
        return False
    import yaml  # noqa: PLC0415 (only for a configuration file: the bridge is launched before anything loads)
    try:
        document = yaml.safe_load(Path(config).read_bytes())
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(document, dict) and "audit_file" in document
