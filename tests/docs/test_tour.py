"""The README's five-minute tour works when pasted: its blocks marked ``sh tour`` run in order against a
node started as the tour starts it, and each answers as the tour says.

What the test changes, and why: ``./scripts/run`` is ``scripts/setup`` then ``.venv/bin/kitsune``, and
``./scripts/test`` has run the setup already, so the node is the venv's ``kitsune`` (with ``--port 0``:
a free port, put in place of 8765); ``HOME`` is a directory of the test's, so the token file is the
test node's, and the node runs in a directory of the test's, where its audit log goes;
``https://example.com/`` is a page the test serves (the tests never reach the Internet).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
KITSUNE = Path(sys.executable).parent / "kitsune"
EXAMPLE_URL = "https://example.com/"
EXAMPLE_PAGE = b"<!doctype html><title>Example Domain</title><h1>Example Domain</h1>"
DEFAULT_ADDRESS = "127.0.0.1:8765"
ANSWERS = [('"caps":["automation","core"]',), ('"title":"Example Domain"', '"status":"ok"'),
           ("'title': 'Example Domain'", "'status': 'ok'"), ('"status":"failed"', '"resume_token":'),
           ('"resumed":"kept"', '"status":"ok"')]
"""Parts of what each block after the start answers, in order."""


def tour_blocks() -> list[str]:
    """The README's blocks marked ``sh tour``, in order."""
    return re.findall(r"^```sh tour\n(.*?)^```$", (ROOT / "README.md").read_text(), re.S | re.M)


class _Example(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(EXAMPLE_PAGE)

    def log_message(self, format: str, *args: object) -> None:  # quiet
        pass


@pytest.fixture
def example() -> Iterator[str]:
    """The stand-in for example.com: its URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Example)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The environment of a newcomer's shell: no Kitsune setting but the Chromium, a home of its own."""
    home = tmp_path / "home"
    home.mkdir()
    kept = {k: v for k, v in os.environ.items() if not k.startswith("KITSUNE_") or k == "KITSUNE_CHROMIUM"}
    return {**kept, "HOME": str(home)}


def test_the_readme_tour_runs_in_order_against_a_node(example: str, env: dict[str, str], tmp_path: Path) -> None:
    start, *steps = tour_blocks()
    assert len(steps) == len(ANSWERS), "each step of the tour needs its answer in ANSWERS"
    words = shlex.split(start, comments=True)
    run = words.index("./scripts/run")
    node_env = {**env, **dict(word.split("=", 1) for word in words[:run])}
    node = subprocess.Popen([str(KITSUNE), *words[run + 1:], "--port", "0"], cwd=tmp_path, env=node_env,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert node.stdout is not None
        address = next(line.split()[2] for line in node.stdout if line.startswith("kitsune serving "))
        threading.Thread(target=node.stdout.read, daemon=True).start()
        marker = "@@ next step of the tour @@"
        script = "set -euo pipefail\n" + "".join(f"{step}echo; echo '{marker}'\n" for step in steps)
        script = script.replace(DEFAULT_ADDRESS, address.removeprefix("http://")).replace(EXAMPLE_URL, example)
        ran = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240,
                             check=False)
        outputs = ran.stdout.split(marker + "\n")
        assert ran.returncode == 0 and len(outputs) == len(steps) + 1, ran.stdout + ran.stderr
        for step, output, parts in zip(steps, outputs, ANSWERS, strict=False):
            assert all(part in output for part in parts), f"{step}\nanswered:\n{output}\n{ran.stderr}"
        audit = tmp_path / "kitsune-audit.jsonl"  # where the tour says the audit log goes: the node's directory
        assert audit.is_file() and '"agent":"default"' in audit.read_text(), sorted(p.name for p in tmp_path.iterdir())
    finally:
        node.terminate()
        node.wait(timeout=60)
