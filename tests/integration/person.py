"""A person's own browser, for tests of the pages people open (Live View, the console): a real Chromium
apart from the node's, driven by Playwright's sync API from the test's thread."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = os.environ.get("KITSUNE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module")
def person() -> Iterator[Browser]:
    """The person's browser, one per module (Playwright's sync API keeps an event loop running in the
    test's thread while it lives: the anyio tests of other modules need it gone); a missing Chromium
    fails the test, never skips it."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox", "--disable-dev-shm-usage"])
        try:
            yield browser
        finally:
            browser.close()


def frames_shown(page: Page) -> int:
    """How many frames the Live View page has shown so far."""
    return int(page.locator("#screen").get_attribute("data-frames") or 0)


def wait_for_frames(page: Page, more_than: int, timeout: float = 15.0) -> int:
    """Wait until the Live View page showed more than ``more_than`` frames; how many it showed."""
    deadline = time.monotonic() + timeout
    while (shown := frames_shown(page)) <= more_than:
        if time.monotonic() > deadline:
            pytest.fail(f"the Live View page showed {shown} frames, not more than {more_than}, in {timeout:g} s")
        page.wait_for_timeout(50)
    return shown
