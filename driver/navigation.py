"""Actions that move a tab: navigate, and the tab actions closeTab and switchTab.

A navigation that fails has settled (its error page committed) before it answers, and says
whether anything reached the server: a refusal by the URL hooks or the node's proxy, or a network
error raised before the request left the browser, sent nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast
from urllib.parse import urlsplit

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from driver.errors import ERROR_PAGE, Stop, is_closed_error, navigation_stop, net_error, unresolved
from driver.run import Result, Run
from messages.commands import Navigate

__all__ = ["close_tab", "goto", "navigate", "switch_tab"]

_SETTLE_TIMEOUT = 5.0
"""Seconds a failed navigation waits for the error page Chromium commits after it."""


async def _settle(run: Run, error_page: asyncio.Event) -> None:
    """Wait for the error page a failed navigation commits, and its load: a navigation sent before
    that commit would be reported interrupted by it, although it goes on and takes effect."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(min(run.remaining(), _SETTLE_TIMEOUT)):
            await error_page.wait()
    with contextlib.suppress(PlaywrightError):
        await run.page.wait_for_load_state("load", timeout=run.ms())


def _host_of(url: str) -> str | None:
    """The host name of a URL, for a message; None when it has none."""
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None


async def goto(run: Run, url: str, wait_until: str) -> Result:
    """Navigate; a navigation that fails has settled (its error page committed) before this answers."""
    page, refusals, unresolved_before = run.page, run.guard.refusals, run.guard.unresolved
    host = _host_of(url)
    error_page = asyncio.Event()

    def on_navigated(frame: Any) -> None:
        if frame == page.main_frame and frame.url.startswith(ERROR_PAGE):
            error_page.set()

    run.sent = True
    page.on("framenavigated", on_navigated)
    try:
        response = await page.goto(url, wait_until=wait_until,  # type: ignore[arg-type]
                                   timeout=run.ms())
    except PlaywrightError as e:
        if is_closed_error(e) or isinstance(e, PlaywrightTimeoutError):
            raise
        message = e.message or str(e)
        if net_error(message) not in (None, "ERR_ABORTED"):
            await _settle(run, error_page)
        stop = navigation_stop(run.action, message, run.guard.refusals > refusals,
                               unresolved_by_proxy=run.guard.unresolved > unresolved_before, host=host)
        if stop is None:
            raise
        raise stop from None
    finally:
        page.remove_listener("framenavigated", on_navigated)
    refused = run.guard.proxy_answer(response)
    if refused == "unresolved":
        raise unresolved(run.action, host)
    if refused == "unreachable":
        raise Stop("navigation_failed", f"{run.action}: the server did not answer; nothing reached it",
                   retryable=True, took_effect=False)
    if refused is not None:
        raise Stop("url_denied", f"{run.action}: the URL policy stopped this navigation on its way "
                                 f"({refused})", took_effect=False, state={"reason": refused})
    status = response.status if response is not None else None
    warning = f"HTTP status {status}" if status is not None and status >= 400 else None
    return {"url": run.page.url, "status": status}, warning


async def navigate(run: Run) -> Result:
    command = cast(Navigate, run.command)
    assert isinstance(command.url, str)
    return await goto(run, command.url, command.wait_until)


async def close_tab(run: Run) -> Result:
    run.sent = True
    await run.within(run.page.close())
    run.tabs.forget(run.tab)
    return {"tabId": run.tab}, None


async def switch_tab(run: Run) -> Result:
    run.sent = True
    await run.within(run.page.bring_to_front())
    return {"tabId": run.tab}, None
