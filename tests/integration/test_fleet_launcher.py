"""``kitsune fleet --nodes 2`` for real: its three nats-servers form one cluster with a JetStream
meta leader, both nodes answer, and a SIGINT stops every process it started."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx


def _descendants(root: int) -> set[int]:
    """Every process below ``root`` now (from /proc)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


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
    launcher = subprocess.Popen([sys.executable, "-m", "kitsune.cli", "fleet", "--nodes", "2", "--dir", str(tmp_path)],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        text = "".join(_announced(launcher))
        monitors = re.search(r"\(monitoring ([^)]*)\)", text).group(1).split()  # type: ignore[union-attr]
        nodes = re.findall(r"node \d (http://\S+)", text)
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

        started = _descendants(launcher.pid)
        assert len(started) > 5  # 3 nats-servers, 2 nodes, their Chromium
        launcher.send_signal(signal.SIGINT)
        assert launcher.wait(timeout=60) == 0
        assert {pid for pid in started if _alive(pid)} == set()
    finally:
        if launcher.poll() is None:  # its children get SIGTERM as it dies
            launcher.kill()
            launcher.wait()
