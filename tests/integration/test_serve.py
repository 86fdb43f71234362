"""``kitsune serve`` as a process: it starts (embedded NATS or a given one), answers, and leaves nothing behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.nats_access import PASSWORD_ENV, NatsAccess

KITSUNE = Path(sys.executable).parent / "kitsune"
_AGENT = "tester=tester-token-0123456789"


def _descendants(pid: int) -> dict[int, str]:
    """Every live process below ``pid``, with its command name."""
    parents: dict[int, int] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name_end = stat.rindex(")")
        fields = stat[name_end + 2:].split()
        if fields[0] == "Z":
            continue
        parents[int(entry.name)] = int(fields[1])
        names[int(entry.name)] = stat[stat.index("(") + 1:name_end]
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in found:
                found[child] = names[child]
                frontier.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def _serve(*args: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen([str(KITSUNE), "serve", "--port", "0", *args], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               env={**(env or os.environ), "KITSUNE_AGENTS": _AGENT})
    assert process.stdout is not None
    line = process.stdout.readline()  # the one line it prints once ready
    if not line:
        process.kill()
        pytest.fail(f"kitsune serve did not start: {process.stderr.read() if process.stderr else ''}")
    return process, line


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_serve_starts_embedded_nats_and_chromium_and_stops_them_on_a_signal(signum: int) -> None:
    process, line = _serve()
    try:
        assert line.startswith("kitsune serving http://127.0.0.1:")
        assert " (nats nats://127.0.0.1:" in line
        children = _descendants(process.pid)
        assert "nats-server" in children.values()
        assert any("chrom" in name for name in children.values()), children
    finally:
        process.send_signal(signum)
        assert process.wait(timeout=60) == 0
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert [name for pid, name in children.items() if _alive(pid)] == []


def test_serve_with_nats_url_joins_that_server_instead_with_credentials_from_the_environment(
        nats_access: NatsAccess) -> None:
    assert nats_access.auth.user is not None and nats_access.auth.password is not None
    env = {**nats_access.serve_env(), "KITSUNE_NATS__USER": nats_access.auth.user,
           "KITSUNE_NATS__PASSWORD_ENV": PASSWORD_ENV}
    process, line = _serve("--nats-url", nats_access.url, env=env)
    try:
        assert f"(nats {nats_access.url}," in line
        assert "nats-server" not in _descendants(process.pid).values()
    finally:
        process.terminate()
        assert process.wait(timeout=60) == 0
    assert process.stderr is not None
    assert nats_access.auth.password not in line + process.stderr.read()


def test_serve_with_an_unreachable_nats_url_fails_clearly() -> None:
    result = subprocess.run([str(KITSUNE), "serve", "--port", "0", "--nats-url", "nats://127.0.0.1:1"],
                            capture_output=True, text=True, timeout=60, check=False,
                            env={**os.environ, "KITSUNE_AGENTS": _AGENT})
    assert result.returncode == 1
    assert "kitsune: cannot start: " in result.stderr and "nats://127.0.0.1:1" in result.stderr


def test_serve_with_a_bad_configuration_exits_2_with_one_line_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("agents: [{name: a, token: aaaaaaaaaaaaaaaa},\n"
                                       "         {name: b, token: bbbbbbbbbbbbbbbb, read_only: perhaps}]\n")
    result = subprocess.run([str(KITSUNE), "serve", "--port", "0", "--config", str(tmp_path / "bad.yaml")],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert result.stderr == "kitsune: cannot start: agents.1.read_only: Input should be a valid boolean\n"
    assert result.stdout == ""


def test_serve_that_fails_part_way_exits_1_although_threads_it_started_still_run() -> None:
    # A start or stop that raised leaves actors' threads (not daemons) running: the process must not wait for them.
    script = ("import argparse, asyncio, threading, kitsune.serve as serve\n"
              "async def failing(args):\n"
              "    threading.Thread(target=threading.Event().wait, name='left-behind').start()\n"
              "    raise RuntimeError('a part did not stop')\n"
              "serve._launched_first = failing\n"
              "serve.serve(argparse.Namespace())\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1, result.stderr
    assert "node stopped on an error (RuntimeError)" in result.stderr
    assert "a part did not stop" not in result.stderr  # the exception's text is not logged (it may name anything)
