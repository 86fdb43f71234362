"""Failed sign-ins counted per key (a client's address), so that no secret can be guessed at speed.

After :data:`MAX_FAILURES` failures of a key within :data:`WINDOW` seconds, its attempts are refused
unchecked until the oldest of those failures is :data:`WINDOW` old; a success forgets the key. Memory
stays bounded: a key whose last failure is older than the window is dropped, and past
:data:`MAX_KEYS` keys the one that failed longest ago goes first. A key is never a secret.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict, deque
from collections.abc import Callable

__all__ = ["MAX_FAILURES", "MAX_KEYS", "WINDOW", "LoginLimiter"]

MAX_FAILURES = 5
"""Failures of one key within :data:`WINDOW` after which its attempts are refused."""
WINDOW = 300.0
"""Seconds a failure counts for."""
MAX_KEYS = 10_000
"""Keys kept at most."""


class LoginLimiter:
    """The recent failures of each key (on the node's loop; ``clock`` is monotonic seconds)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, max_failures: int = MAX_FAILURES,
                 window: float = WINDOW, max_keys: int = MAX_KEYS) -> None:
        self._clock = clock
        self._max_failures = max_failures
        self._window = window
        self._max_keys = max_keys
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        """Each key's latest failures (at most ``max_failures``), the key that failed longest ago first."""

    def __len__(self) -> int:
        return len(self._failures)

    def retry_after(self, key: str) -> int | None:
        """Whole seconds until an attempt of ``key`` may be checked again, or None when it may be now."""
        now = self._clock()
        self._sweep(now)
        times = self._failures.get(key)
        if times is None or len(times) < self._max_failures:
            return None
        wait = times[0] + self._window - now
        return max(1, math.ceil(wait)) if wait > 0 else None

    def failed(self, key: str) -> bool:
        """Count a failure of ``key``; whether its attempts are refused from now on."""
        now = self._clock()
        self._sweep(now)
        times = self._failures.pop(key, None) or deque(maxlen=self._max_failures)
        times.append(now)
        self._failures[key] = times
        while len(self._failures) > self._max_keys:
            self._failures.popitem(last=False)
        return len(times) == self._max_failures

    def succeeded(self, key: str) -> None:
        """``key`` signed in: its failures are forgotten."""
        self._failures.pop(key, None)

    def _sweep(self, now: float) -> None:
        """Drop the keys whose failures all passed (the oldest first: the order is of last failure)."""
        while self._failures:
            key, times = next(iter(self._failures.items()))
            if times[-1] + self._window > now:
                return
            del self._failures[key]
