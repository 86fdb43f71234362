"""Strict mypy over the project, started in the background as the test session begins and read by its test.

A cold mypy (a fresh clone has no ``.mypy_cache``) is minutes of one core: run in a test, it held a worker that
long with nothing else to do. Started with the session instead, it runs beside the tests that mostly wait on
browsers and servers, and its test (collected last, see tests/conftest.py) reads the result. Under pytest-xdist
every worker collects it: the first to take the lock in the run's shared temporary folder starts the one mypy,
and whichever worker runs the test reads its exit status and output there.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

__all__ = ["TEST", "Typecheck"]

ROOT = Path(__file__).resolve().parents[2]
MYPY = Path(sys.executable).parent / "mypy"
TEST = "tests/static/test_types.py::test_the_project_type_checks_strictly"
"""The test that reads the result: mypy starts only in a session that runs it."""


class Typecheck:
    """One mypy run of the test session, kept in ``folder`` (shared by the run's workers)."""

    def __init__(self, folder: Path) -> None:
        self._output = folder / "mypy.out"
        self._status = folder / "mypy.status"
        self._lock = folder / "mypy.lock"
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start mypy in the background, unless another worker of the run did."""
        try:
            os.close(os.open(self._lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return
        self._thread = threading.Thread(target=self._run, name="mypy", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        result = subprocess.run([str(MYPY)], cwd=ROOT, capture_output=True, text=True, check=False)
        self._output.write_text(result.stdout + result.stderr)
        written = self._status.with_suffix(".tmp")
        written.write_text(str(result.returncode))
        written.replace(self._status)  # whole, at once: a reader sees no status or the whole of it

    def finish(self) -> None:
        """Wait for the mypy this worker started (the test may run on another worker, later)."""
        if self._thread is not None:
            self._thread.join()

    def result(self, timeout: float) -> tuple[int, str]:
        """mypy's exit status and output, waiting for them; mypy runs here and now if nobody started it."""
        if not self._lock.exists():
            self.start()
        deadline = time.monotonic() + timeout
        while not self._status.exists():
            assert time.monotonic() < deadline, f"mypy gave no result within {timeout:g} s"
            time.sleep(0.2)
        return int(self._status.read_text()), self._output.read_text()
