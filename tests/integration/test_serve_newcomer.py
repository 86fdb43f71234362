"""A newcomer's ``kitsune serve`` (issue 29, section 7): agent ``default``'s token file, misspelt variables.

A second node that fails to start (its port in use) leaves the running node's token alone, and a
second node that does start keeps that token rather than locking the first node's clients out.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.test_serve import KITSUNE


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "KITSUNE_AGENTS"}  # no agent: a generated token


def _start(directory: Path, *args: str) -> tuple[subprocess.Popen[str], list[str]]:
    """``kitsune serve`` with the state directory ``directory / 'state'``; it and the lines it printed until it
    served (none when it exited first)."""
    process = subprocess.Popen([str(KITSUNE), "serve", "--state-dir", str(directory / "state"), *args],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(), cwd=directory)
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith("kitsune serving "):
            break
    return process, lines


@pytest.fixture
def first(tmp_path: Path) -> Iterator[tuple[str, str]]:
    """A node serving with a generated token: its base URL and that token."""
    process, lines = _start(tmp_path, "--port", "0")
    try:
        assert lines[-1].startswith("kitsune serving "), process.stderr.read() if process.stderr else ""
        assert lines[0] == f"kitsune: no agent configured; the token of agent 'default' is in {tmp_path}/state/token\n"
        yield lines[-1].split()[2], (tmp_path / "state" / "token").read_text().strip()
    finally:
        process.terminate()
        process.wait(timeout=60)


def _answers(base: str, token: str) -> int:
    return httpx.get(f"{base}/api/caps", headers={"Authorization": f"Bearer {token}"}, timeout=30).status_code


def test_a_node_that_cannot_start_or_a_second_node_leaves_the_running_nodes_token(
        first: tuple[str, str], tmp_path: Path) -> None:
    base, token = first
    assert _answers(base, token) == 200
    port = base.rpartition(":")[2]
    failed, lines = _start(tmp_path, "--port", port)
    assert failed.wait(timeout=60) != 0 and lines == []
    assert (tmp_path / "state" / "token").read_text().strip() == token
    assert _answers(base, token) == 200
    second, lines = _start(tmp_path, "--port", "0")
    try:
        assert lines[0].endswith(f"{tmp_path}/state/token\n") and lines[-1].startswith("kitsune serving ")
        assert (tmp_path / "state" / "token").read_text().strip() == token
        assert (_answers(base, token), _answers(lines[-1].split()[2], token)) == (200, 200)
    finally:
        second.terminate()
        assert second.wait(timeout=60) == 0


def test_a_token_file_others_may_read_is_not_kept(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "token").write_text("x" * 40 + "\n")
    (tmp_path / "state" / "token").chmod(0o644)
    process, lines = _start(tmp_path, "--port", "0")
    try:
        assert lines[-1].startswith("kitsune serving ")
        token = (tmp_path / "state" / "token").read_text().strip()
        assert token != "x" * 40 and (tmp_path / "state" / "token").stat().st_mode & 0o077 == 0
        assert _answers(lines[-1].split()[2], token) == 200
    finally:
        process.terminate()
        process.wait(timeout=60)


def test_a_misspelt_guard_stops_the_node_and_another_stray_variable_is_warned_of(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    refused = subprocess.run([str(KITSUNE), "serve", "--port", "0", "--state-dir", str(tmp_path / "state")],
                             capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
                             env={**_env(), "KITSUNE_READONLY": "1"})
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr == ("kitsune: cannot start: KITSUNE_READONLY: not a setting; did you mean KITSUNE_READ_ONLY? "
                              "(refused: it is close to a setting that guards the node; correct or unset it)\n")
    monkeypatch.setenv("KITSUNE_WORKFLOW", "./flows")
    process, lines = _start(tmp_path, "--port", "0")
    try:
        assert process.stderr is not None and lines[-1].startswith("kitsune serving ")
        assert process.stderr.readline() == ("kitsune: warning: KITSUNE_WORKFLOW is not a setting and is ignored "
                                             "(did you mean KITSUNE_WORKFLOWS?)\n")
    finally:
        process.terminate()
        process.wait(timeout=60)
