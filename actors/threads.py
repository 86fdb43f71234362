"""The step engine's clock and sequences on the real runtime: the monotonic clock, and a
parallel's sequences on plain threads of this process (a node runs them on sequence actors,
``actors/sequence_actor.py``; tests and benchmarks use these)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["SystemClock", "ThreadedSequences"]


class SystemClock:
    """The real monotonic clock."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class ThreadedSequences:
    """Sequences on threads of this process; the actor runtime uses sequence actors instead."""

    def __init__(self) -> None:
        self._barriers: dict[str, threading.Barrier] = {}
        self._lock = threading.Lock()

    def run_all(self, jobs: list[Callable[[], None]]) -> None:
        errors: list[BaseException] = []

        def run(job: Callable[[], None]) -> None:
            try:
                job()
            except BaseException as e:  # re-raised on the caller's thread below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(job,), name="kitsune-sequence") for job in jobs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    def _get(self, key: str, parties: int) -> threading.Barrier:
        with self._lock:
            return self._barriers.setdefault(key, threading.Barrier(parties))

    def barrier(self, key: str, parties: int, timeout: float) -> bool:
        try:
            self._get(key, parties).wait(timeout)
        except threading.BrokenBarrierError:
            return False
        return True

    def abort(self, key: str) -> None:
        self._get(key, 1).abort()

    def discard(self, key: str) -> None:
        with self._lock:
            self._barriers.pop(key, None)
