"""The embedded nats-server: starts, answers, stops without leaving a process, dies with its parent."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from actors.nats_server import EmbeddedNats
from messages.errors import KitsuneError

ROOT = Path(__file__).resolve().parents[2]


def _info(url: str) -> dict[str, object]:
    host, port = url.removeprefix("nats://").split(":")
    with socket.create_connection((host, int(port)), timeout=2) as sock:
        line = sock.makefile("rb").readline()
    assert line.startswith(b"INFO ")
    info: dict[str, object] = json.loads(line[5:])
    return info


def _gone(pid: int) -> bool:
    """No such process, or only its zombie (a dead child of an init that reaps late)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def test_it_starts_on_loopback_with_jetstream_and_answers() -> None:
    with EmbeddedNats() as server:
        assert server.url.startswith("nats://127.0.0.1:")
        assert server.url == f"nats://127.0.0.1:{server.port}"
        info = _info(server.url)
        assert info["jetstream"] is True
        assert info["host"] == "127.0.0.1"


def test_stop_leaves_no_process_and_is_idempotent() -> None:
    server = EmbeddedNats()
    server.start()
    pid = server.pid
    assert pid is not None
    os.kill(pid, 0)  # running
    server.stop()
    with pytest.raises(ProcessLookupError):  # waited for: not even a zombie
        os.kill(pid, 0)
    server.stop()
    assert server.pid is None
    with pytest.raises(KitsuneError) as caught:
        _ = server.url
    assert caught.value.code == "nats_unavailable"


def test_a_given_store_dir_is_used_and_kept(tmp_path: Path) -> None:
    with EmbeddedNats(store_dir=tmp_path / "store"):
        pass
    assert (tmp_path / "store" / "jetstream").is_dir()


def test_a_missing_binary_gives_nats_unavailable(tmp_path: Path) -> None:
    server = EmbeddedNats(binary=tmp_path / "no-such-nats-server")
    with pytest.raises(KitsuneError) as caught:
        server.start()
    assert caught.value.code == "nats_unavailable"
    assert "nats-server not found" in caught.value.message
    assert server.pid is None


def test_a_server_that_does_not_come_up_gives_nats_unavailable_with_its_output(tmp_path: Path) -> None:
    fake = tmp_path / "nats-server"
    fake.write_text("#!/bin/sh\necho 'listen: address already in use' >&2\nexit 1\n")
    fake.chmod(0o755)
    failed: list[KitsuneError] = []

    def start() -> None:
        with pytest.raises(KitsuneError) as caught:
            EmbeddedNats(binary=fake).start(timeout=3600)
        failed.append(caught.value)

    starting = threading.Thread(target=start, daemon=True)
    starting.start()
    starting.join(60)  # it sees the server exit: it does not wait out its hour
    assert not starting.is_alive() and failed
    assert failed[0].code == "nats_unavailable"
    assert "address already in use" in failed[0].message


def test_a_taken_fixed_port_gives_nats_unavailable() -> None:
    with EmbeddedNats() as first:
        with pytest.raises(KitsuneError) as caught:
            EmbeddedNats(port=first.port).start(timeout=5)
        assert caught.value.code == "nats_unavailable"
        _info(first.url)  # the first one is untouched


def test_a_server_started_from_a_thread_outlives_that_thread() -> None:
    server = EmbeddedNats()
    starter = threading.Thread(target=server.start)
    starter.start()
    starter.join()
    try:
        time.sleep(0.3)  # PR_SET_PDEATHSIG would have fired by now had this thread forked it
        assert server.pid is not None and not _gone(server.pid)
        _info(server.url)
    finally:
        server.stop()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux only")
def test_the_server_dies_with_its_parent() -> None:
    parent = textwrap.dedent("""
        import os, signal
        from actors.nats_server import EmbeddedNats
        server = EmbeddedNats()
        server.start()
        print(server.pid, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no stop, no atexit: only the kernel can tell the child
    """)
    result = subprocess.run([sys.executable, "-c", parent], cwd=ROOT, capture_output=True, text=True, timeout=20,
                            check=False)
    assert result.returncode == -signal.SIGKILL, result.stderr
    pid = int(result.stdout.strip())
    deadline = time.monotonic() + 5
    while not _gone(pid):
        assert time.monotonic() < deadline, f"nats-server {pid} outlived its parent"
        time.sleep(0.02)
