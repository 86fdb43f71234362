"""Fixtures for the browser driver's integration tests: one asyncio loop in a background thread,
one real Chromium and the test site for the whole module.

Import them into a test module (``from tests.integration.browser_fixtures import *``). There is
no pytest-asyncio: tests are plain functions that hand coroutines to the loop with ``run``.
A missing Chromium fails these fixtures (``browser_unavailable``); nothing is ever skipped.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterator, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

import pytest

from driver import ChromiumBrowser
from messages.commands import Command, parse_command
from messages.results import Outcome
from tests.site import TestSite

__all__ = ["Act", "LoopThread", "Run", "act", "chromium", "loop_thread", "run", "site", "tab"]

T = TypeVar("T")
Run = Callable[[Coroutine[Any, Any, T]], T]
Act = Callable[..., Outcome]


class LoopThread:
    """An asyncio loop running forever in a daemon thread; ``run(coro)`` waits for a coroutine on it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="browser-test-loop", daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        """Start ``coro`` on the loop; the future answers from this (the test's) thread."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        """Run ``coro`` on the loop and wait for its result."""
        return self.submit(coro).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


@pytest.fixture(scope="module")
def loop_thread() -> Iterator[LoopThread]:
    loop = LoopThread()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def run(loop_thread: LoopThread) -> Run[Any]:
    """``run(coro)``: run a coroutine on the module's loop and return its result."""
    return loop_thread.run


@pytest.fixture(scope="module")
def site() -> Iterator[TestSite]:
    test_site = TestSite(slow_seconds=3.0)
    test_site.start()
    yield test_site
    test_site.stop()


@pytest.fixture(scope="module")
def chromium(run: Run[Any]) -> Iterator[ChromiumBrowser]:
    """One real Chromium for the whole module (a missing one fails here, it never skips)."""
    browser = ChromiumBrowser()
    run(browser.start())
    yield browser
    run(browser.stop())


@pytest.fixture
def tab(chromium: ChromiumBrowser, run: Run[Any], site: TestSite) -> Iterator[int]:
    """A fresh tab (in its own window, made current) and zeroed server counters; closed afterwards."""
    site.reset()
    tab_id = run(chromium.new_tab())
    yield tab_id
    run(chromium.close_tab(tab_id))


@pytest.fixture
def act(chromium: ChromiumBrowser, run: Run[Any]) -> Act:
    """``act({"action": ...}, tab, timeout=10)``: parse a command as the API would and execute it."""

    def execute(command: Mapping[str, Any] | Command, tab_id: int | None, timeout: float = 10.0) -> Outcome:
        parsed = command if isinstance(command, Command) else parse_command(dict(command))
        outcome: Outcome = run(chromium.execute(parsed, tab_id, timeout))
        return outcome

    return execute
