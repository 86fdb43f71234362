"""Writes on elements: click, type, fill, select, press, check, submitForm, download.

Each says truthfully whether it sent anything: what is checked before sending (the element is
there, visible, editable, the right kind) fails with nothing sent; a failure after sending is
for the driver to classify as unknown.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import re
from pathlib import Path
from typing import Any, cast

from playwright.async_api import Download as PlaywrightDownload
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from driver.errors import Stop, fill_unmet_state, is_closed_error, is_navigation_error, not_editable
from driver.page_js import SELECT_OPTIONS, SUBMIT_FORM
from driver.run import Result, Run
from messages.commands import Check, Click, Fill, Press, Select, Type

__all__ = ["check", "click", "download", "fill", "press", "select", "submit_form", "type_text"]


async def click(run: Run) -> Result:
    command = cast(Click, run.command)
    locator = run.locator()
    await run.pointer_write(locator, lambda ms: locator.click(
        button=command.button, click_count=command.click_count, timeout=ms))
    return {}, None


async def type_text(run: Run) -> Result:
    """Type key by key: Playwright's ``press_sequentially`` checks nothing, so the element is checked first."""
    command = cast(Type, run.command)
    assert isinstance(command.text, str)
    locator = run.locator()
    await run.ready_element(locator, "visible")
    if not await locator.is_editable(timeout=run.ms()):
        raise not_editable(run)
    run.sent = True
    await locator.press_sequentially(command.text, timeout=run.ms())
    if command.submit is True:
        await locator.press("Enter", timeout=run.ms())
    return {}, None


async def fill(run: Run) -> Result:
    """Fill in one Playwright call, which waits for the element to be visible, enabled and editable.

    When it fails, its call log tells whether it got past those checks (see
    :func:`~driver.errors.fill_unmet_state`): a field that stayed readonly or disabled is
    ``not_editable``, one that never appeared or never showed is ``not_found``/``not_actionable``,
    with nothing sent.
    """
    command = cast(Fill, run.command)
    assert isinstance(command.value, str)
    locator = run.locator()
    run.sent = True
    try:
        await locator.fill(command.value, timeout=run.ms())
    except PlaywrightError as e:
        unmet = fill_unmet_state(e.message or "")
        if unmet is None:
            raise
        run.sent = False
        if not isinstance(e, PlaywrightTimeoutError):
            raise
        if unmet in ("editable", "enabled"):
            raise not_editable(run) from None
        raise await run.missing(locator, "visible" if unmet in ("", "visible") else "visible and not inert",
                                e) from None
    return {}, None


async def select(run: Run) -> Result:
    command = cast(Select, run.command)
    wanted = [str(v) for v in command.values]
    locator = run.locator()
    await run.ready_element(locator, "visible")
    found = await locator.evaluate(SELECT_OPTIONS, wanted, timeout=run.ms())
    if found.get("error") == "not_select":
        raise Stop("wrong_element", f"select: {run.selector!r} is not a <select>; nothing was sent")
    if found["missing"]:
        raise Stop("option_not_found", f"select: {run.selector!r} has no option with value or label "
                                       f"{found['missing'][0]!r}; nothing was sent", retryable=True)
    if len(wanted) > 1 and not found["multiple"]:
        raise Stop("invalid_parameter", f"select: {run.selector!r} takes one option, not {len(wanted)}; "
                                        "nothing was sent")
    run.sent = True
    selected = await locator.select_option(wanted, timeout=run.ms())
    return {"selected": list(selected)}, None


async def press(run: Run) -> Result:
    command = cast(Press, run.command)
    assert isinstance(command.key, str)
    key = command.key
    try:
        if run.selector is not None:
            locator = run.locator()
            await run.ready_element(locator, "visible")
            run.sent = True
            await locator.press(key, timeout=run.ms())
        else:
            run.sent = True
            await run.within(run.page.keyboard.press(key))
    except PlaywrightError as e:
        if "Unknown key" in (e.message or ""):
            raise Stop("invalid_parameter", f"press: unknown key {key!r}",
                       took_effect=False if "+" not in key else None) from None
        raise
    return {}, None


async def check(run: Run) -> Result:
    command = cast(Check, run.command)
    checked = bool(command.checked)
    locator = run.locator()
    await run.pointer_write(locator, lambda ms: locator.set_checked(checked, timeout=ms))
    return {"checked": checked}, None


async def _request_submit(run: Run) -> str:
    """Submit the element's form in the page: submitted, prevented, invalid or no_form."""
    try:
        return str(await run.locator().evaluate(SUBMIT_FORM, timeout=run.ms()))
    except PlaywrightError as e:
        if not is_navigation_error(e.message or "") or is_closed_error(e):
            raise
        return "submitted"  # the navigation began before the evaluation answered


async def submit_form(run: Run) -> Result:
    page = run.page
    await run.ready_element(run.locator(), "attached")
    committed = asyncio.Event()
    statuses: list[int] = []

    def on_navigated(frame: Any) -> None:
        if frame == page.main_frame:
            committed.set()

    def on_response(response: Any) -> None:
        with contextlib.suppress(PlaywrightError):
            if response.request.is_navigation_request() and response.frame == page.main_frame:
                statuses.append(response.status)

    page.on("framenavigated", on_navigated)
    page.on("response", on_response)
    try:
        run.sent = True
        result = await _request_submit(run)
        if result == "no_form":
            raise Stop("not_found", f"submitForm: {run.selector!r} is not a form or inside one; nothing was sent",
                       took_effect=False)
        if result == "invalid":
            raise Stop("invalid_form", "submitForm: the form did not pass validation; the browser did not submit it",
                       took_effect=False)
        if result == "prevented":  # the page handles the submit itself
            return {"url": page.url, "navigated": False}, None
        await run.within(committed.wait())
        await page.wait_for_load_state("load", timeout=run.ms())
    finally:
        page.remove_listener("framenavigated", on_navigated)
        page.remove_listener("response", on_response)
    status = statuses[-1] if statuses else None
    warning = f"HTTP status {status}" if status is not None and status >= 400 else None
    return {"url": page.url}, warning


def _safe_filename(name: str) -> str:
    name = Path(name.replace("\\", "/")).name.strip().lstrip(".")
    name = re.sub(r"[\x00-\x1f]", "", name)
    return name or "download"


def _unique_path(directory: Path, name: str) -> Path:
    path = directory / name
    stem, suffix = path.stem, path.suffix
    for n in itertools.count(1):
        if not path.exists():
            return path
        path = directory / f"{stem} ({n}){suffix}"
    raise AssertionError("unreachable")  # pragma: no cover


def _digest(path: Path) -> tuple[int, str]:
    sha = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            sha.update(chunk)
            size += len(chunk)
    return size, sha.hexdigest()


async def download(run: Run) -> Result:
    assert run.downloads is not None
    page = run.page
    locator = run.locator()
    waiter: asyncio.Task[PlaywrightDownload] = asyncio.ensure_future(
        page.wait_for_event("download", timeout=run.ms()))
    try:
        await run.pointer_write(locator, lambda ms: locator.click(timeout=ms))
        saved = await waiter
    finally:
        if not waiter.done():
            waiter.cancel()
            with contextlib.suppress(BaseException):
                await waiter
    path = _unique_path(run.downloads, _safe_filename(saved.suggested_filename))
    await run.within(saved.save_as(path))
    if await run.within(saved.failure()) is not None:
        raise Stop("download_failed", "download: the download started but did not complete")
    size, sha256 = await asyncio.to_thread(_digest, path)
    return {"filename": path.name, "size": size, "sha256": sha256}, None
