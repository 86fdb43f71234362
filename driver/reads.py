"""Reads: pageText, find, url, title, screenshot, waitFor. They look at the page and change nothing."""

from __future__ import annotations

import base64
from typing import Any, cast

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Page
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from driver.errors import Stop, is_navigation_error
from driver.page_js import BODY_TEXT, FIND
from driver.run import Result, Run
from messages.commands import Find, PageText, Screenshot, WaitFor

__all__ = ["evaluate_settled", "find", "page_text", "screenshot", "title", "url", "wait_for"]

_PENDING_TITLE = "Loading "
"""How Playwright's ``title()`` begins its answer while a navigation replaces the document (``Loading <url>``)."""


async def page_text(run: Run) -> Result:
    command = cast(PageText, run.command)
    if run.selector is not None:
        locator = run.locator()
        try:  # one element (the usual case): one round trip, that waits for it to be attached
            text = await locator.inner_text(timeout=run.ms())
        except PlaywrightTimeoutError as e:
            raise await run.missing(locator, "attached", e) from None
        except PlaywrightError as e:
            if "strict mode violation" not in (e.message or ""):
                raise
            text = "\n".join(await run.within(locator.all_inner_texts()))  # several: all of them
    else:
        text = await run.within(run.page.evaluate(BODY_TEXT))
    truncated = len(text) > command.max_chars
    return {"text": text[: command.max_chars], "truncated": truncated}, None


async def find(run: Run) -> Result:
    command = cast(Find, run.command)
    text = command.text if isinstance(command.text, str) else None
    if run.selector is not None:
        locator = run.locator()
        if text is not None:
            locator = locator.filter(has_text=text)
    else:
        assert text is not None
        locator = run.page.get_by_text(text)
    count = await run.within(locator.count())
    matches = await run.within(locator.evaluate_all(FIND, command.limit))
    count = max(count, len(matches))
    return {"count": count, "matches": matches}, None if count else "find matched nothing"


async def url(run: Run) -> Result:
    return {"url": run.page.url}, None


async def title(run: Run) -> Result:
    """Playwright's ``title()``: ``document.title`` read in its utility world, where the page's own script cannot
    stand in for it, with no serialized value for its client to walk. Mid-navigation it answers ``Loading <url>``
    (and ``""`` when the document is gone): such a title, or an empty one, is read again in the document that
    stays (:func:`evaluate_settled`). Bounded by the driver's backstop at the command's deadline
    (``driver.actions.DEADLINE_BOUND``): no timer of its own."""
    page = run.page
    text = await page.title()
    if not text or text.startswith(_PENDING_TITLE):
        text = await evaluate_settled(page, "document.title")
    return {"title": text}, None


async def evaluate_settled(page: Page, script: str, *, loaded: bool = False) -> Any:
    """``script``'s value in the page's document; when a navigation replaces the document under the
    read, read again in the next one once it has loaded (DOMContentLoaded). With ``loaded``, the first
    read waits for that too. Never a placeholder (Playwright's ``title()`` answers ``Loading <url>``
    mid-navigation); unbounded: the caller bounds it."""
    if loaded:
        await page.wait_for_load_state("domcontentloaded", timeout=0)
    while True:
        try:
            return await page.evaluate(script)
        except PlaywrightError as e:
            if not is_navigation_error(str(e)):
                raise
        await page.wait_for_load_state("domcontentloaded", timeout=0)


async def screenshot(run: Run) -> Result:
    command = cast(Screenshot, run.command)
    if run.selector is not None:
        locator = run.locator()
        await run.ready_element(locator, "visible")
        image = await locator.screenshot(type="png", timeout=run.ms())
    else:
        image = await run.page.screenshot(type="png", full_page=command.full_page is True, timeout=run.ms())
    return {"image": base64.b64encode(image).decode("ascii"), "mimeType": "image/png"}, None


async def wait_for(run: Run) -> Result:
    command = cast(WaitFor, run.command)
    page = run.page
    if run.selector is not None:
        try:
            await run.locator().first.wait_for(state=command.state, timeout=run.ms())
        except PlaywrightTimeoutError:
            raise Stop("timeout", f"waitFor: {run.selector!r} was not {command.state} within "
                                  f"{run.timeout:g}s", retryable=True) from None
    if isinstance(command.url, str):
        try:
            await page.wait_for_url(command.url, wait_until=command.load_state or "load", timeout=run.ms())
        except PlaywrightTimeoutError:
            raise Stop("timeout", f"waitFor: the URL did not match {command.url!r} within "
                                  f"{run.timeout:g}s", retryable=True) from None
    elif command.load_state is not None:
        try:
            await page.wait_for_load_state(command.load_state, timeout=run.ms())
        except PlaywrightTimeoutError:
            raise Stop("timeout", f"waitFor: the page did not reach {command.load_state} within "
                                  f"{run.timeout:g}s", retryable=True) from None
    return {"url": page.url}, None
