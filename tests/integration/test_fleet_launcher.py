"""``kitsune fleet`` for real: with two nodes, its three nats-servers form one cluster with a JetStream
meta leader, both nodes answer, and a SIGINT stops every process it started; a node that cannot start
stops the fleet, which says where its log is."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from kitsune.fleet import NatsCluster


def _processes_of(directory: Path) -> set[int]:
    """The live processes whose environment names ``directory``: every one the fleet in it started
    (nats-servers, nodes, their Chromium: a child inherits the environment)."""
    found = set()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            environ = (proc / "environ").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(directory).encode() in environ and state != "Z":
            found.add(int(proc.name))
    return found


def _fleet(directory: Path, *args: str) -> subprocess.Popen[str]:
    """The launcher, started with SIGINT ignored as a shell's background job is: its Ctrl-C must still stop it."""
    return subprocess.Popen([sys.executable, "-m", "kitsune.cli", "fleet", "--dir", str(directory), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))  # noqa: PLW1509


def _announced(launcher: subprocess.Popen[str]) -> list[str]:
    """The launcher's lines up to the one saying it runs."""
    assert launcher.stdout is not None
    lines = []
    for line in launcher.stdout:
        lines.append(line)
        if " running in " in line:
            return lines
    raise AssertionError(f"kitsune fleet did not start: {''.join(lines)}")


def test_a_local_fleet_forms_a_nats_cluster_serves_two_nodes_and_stops_whole_on_sigint(tmp_path: Path) -> None:
    launcher = _fleet(tmp_path, "--nodes", "2")
    try:
        text = "".join(_announced(launcher))
        monitors = re.search(r"\(monitoring ([^)]*)\)", text).group(1).split()  # type: ignore[union-attr]
        nodes = re.findall(r"node-\d (http://\S+)", text)
        assert len(monitors) == 3 and len(nodes) == 2, text

        names = set()
        for monitor in monitors:
            routes = httpx.get(f"{monitor}/routez").json()
            names.add(routes["server_name"])
            assert len({route["remote_name"] for route in routes["routes"]}) == 2
        meta = httpx.get(f"{monitors[0]}/jsz").json()["meta_cluster"]
        assert meta["leader"] in names and meta["cluster_size"] == 3 and len(names) == 3

        token = (tmp_path / "token").read_text().strip()
        for node in nodes:
            assert httpx.get(f"{node}/healthz").json() == {"ok": True, "nats": True, "browser": True}
            tabs = httpx.get(f"{node}/api/tabs", headers={"Authorization": f"Bearer {token}"})
            assert tabs.status_code == 200, tabs.text
            fleet = httpx.get(f"{node}/api/fleet", headers={"Authorization": f"Bearer {token}"}).json()
            assert {n["name"] for n in fleet["nodes"]} == {"node-1", "node-2"}, fleet  # one fleet

        assert len(_processes_of(tmp_path)) > 5  # 3 nats-servers, 2 nodes, their Chromium
        launcher.send_signal(signal.SIGINT)
        assert launcher.wait(timeout=60) == 0
        assert _processes_of(tmp_path) == set()
    finally:
        if launcher.poll() is None:  # its children get SIGTERM as it dies
            launcher.kill()
            launcher.wait()


def test_a_fleet_whose_node_cannot_start_says_so_and_leaves_no_process(tmp_path: Path) -> None:
    config = tmp_path / "kitsune.yaml"
    config.write_text("no_such_key: 1\n")
    launcher = _fleet(tmp_path / "fleet", "--nodes", "1", "--config", str(config))
    output, _ = launcher.communicate(timeout=60)
    assert launcher.returncode == 1
    assert f"cannot start: node 1 did not start; see {tmp_path}/fleet/node-1/server.log" in output
    assert "no_such_key: unknown key" in (tmp_path / "fleet" / "node-1" / "server.log").read_text()
    assert re.search(r"\(exit code 2, its last line: [^\n]*no_such_key: unknown key", output), output
    assert _processes_of(tmp_path) == set()


def test_a_cluster_whose_port_another_process_took_starts_again_on_new_ports(tmp_path: Path) -> None:
    """The cluster's ports are free when chosen; a process that takes one before its server listens makes that
    server exit ("address already in use"), and the cluster starts again, whole, on new ports."""
    cluster = NatsCluster(tmp_path)
    taken = cluster.members[1].cluster_port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", taken))
        squatter.listen()
        try:
            cluster.start()
            servers = cluster.processes()
            assert taken not in {port for m in cluster.members for port in (m.client_port, m.cluster_port,
                                                                             m.monitor_port)}
            assert b"address already in use" in (tmp_path / "nats-2" / "server.log").read_bytes()
            assert len(servers) == 3 and all(server.poll() is None for server in servers)
        finally:
            cluster.stop()
    assert all(server.poll() is not None for server in servers)
