"""Thumbnails of a node's tabs: a small JPEG of what each tab shows, taken through CDP, kept a moment.

``Page.captureScreenshot`` of the tab's visible viewport at a quarter of its size (JPEG, quality
50), on a CDP session of its own that is detached at once. One capture per tab at a time: those
asking meanwhile, or within :data:`THUMB_SECONDS` of it, get the same picture.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import Callable
from typing import Protocol

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page

from messages.errors import KitsuneError

__all__ = ["QUALITY", "SCALE", "THUMB_SECONDS", "Thumbnails"]

THUMB_SECONDS = 3.0
"""How long a thumbnail is served again before a new one is taken."""
SCALE = 0.25
QUALITY = 50
_CAPTURE_TIMEOUT = 5.0


class Pages(Protocol):
    """What thumbnails need of the browser."""

    def tab_ids(self) -> frozenset[int]: ...

    def page(self, tab_id: int) -> Page: ...


class Thumbnails:
    """Thumbnails of the tabs of one browser (on the node's loop)."""

    def __init__(self, browser: Pages, clock: Callable[[], float] = time.monotonic) -> None:
        self._browser = browser
        self._clock = clock
        self._taken: dict[int, tuple[float, asyncio.Task[bytes]]] = {}

    async def of(self, tab: int) -> bytes:
        """The JPEG of ``tab``; ``tab_closed`` when it is not open here, ``browser_error`` when it cannot be taken."""
        open_tabs = self._browser.tab_ids()
        for gone in [t for t in self._taken if t not in open_tabs]:
            del self._taken[gone]
        page = self._browser.page(tab)  # tab_closed when it is not open
        now = self._clock()
        taken = self._taken.get(tab)
        if taken is None or (taken[1].done() and now - taken[0] > THUMB_SECONDS):
            taken = (now, asyncio.get_running_loop().create_task(_capture(page, tab)))
            self._taken[tab] = taken
        return await asyncio.shield(taken[1])


async def _capture(page: Page, tab: int) -> bytes:
    try:
        return await asyncio.wait_for(_screenshot(page), _CAPTURE_TIMEOUT)
    except (PlaywrightError, TimeoutError, KeyError) as e:
        raise KitsuneError("browser_error", f"Tab {tab} could not be captured ({type(e).__name__})",
                           state={"tabId": tab}) from e


async def _screenshot(page: Page) -> bytes:
    cdp = await page.context.new_cdp_session(page)
    try:
        view = (await cdp.send("Page.getLayoutMetrics"))["cssVisualViewport"]
        shot = await cdp.send("Page.captureScreenshot", {"format": "jpeg", "quality": QUALITY, "clip": {
            "x": view["pageX"], "y": view["pageY"], "width": view["clientWidth"], "height": view["clientHeight"],
            "scale": SCALE}})
    finally:
        with contextlib.suppress(PlaywrightError):
            await cdp.detach()
    return base64.b64decode(shot["data"])
