"""Actions that run agent JavaScript (js, waitForResult) or touch the context's state (cookies,
storage, clipboard). All are writes: they can change anything the page can.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping
from typing import Any, cast

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from driver.errors import Stop, agent_js_stop, first_line, is_closed_error
from driver.page_js import CLIPBOARD_READ, CLIPBOARD_WRITE, SCRATCH_CLOSE, SCRATCH_OPEN, STORAGE
from driver.run import Result, Run
from messages.commands import Clipboard, Cookies, Js, Storage, WaitForResult

__all__ = ["clipboard", "cookies", "js", "storage", "wait_for_result"]


def _jsonable(value: Any) -> Any:
    """A value from the page as JSON can carry it."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _truthy(value: Any) -> bool:
    """JavaScript truthiness of a value that came back from the page."""
    if value is None or value is False:
        return False
    if isinstance(value, int | float):
        return value != 0 and not (isinstance(value, float) and math.isnan(value))
    if isinstance(value, str):
        return value != ""
    return True  # objects and arrays, even empty ones


async def _evaluate_agent(run: Run, code: str) -> Any:
    """Evaluate agent code: an expression (a function is called), or a function body."""
    run.sent = True
    try:
        try:
            return await run.within(run.page.evaluate(code))
        except PlaywrightError as e:
            message = e.message or ""
            if "SyntaxError" not in first_line(message) or not any(
                    s in message for s in ("Illegal return statement", "await is only valid")):
                raise
        # A function body (a bare `return` or `await` does not parse as a script); a SyntaxError is
        # raised before any of it runs, so evaluating it again as a function sends nothing twice.
        return await run.within(run.page.evaluate(f"async () => {{\n{code}\n}}"))
    except PlaywrightError as e:
        if is_closed_error(e) or isinstance(e, PlaywrightTimeoutError) or run.gone():
            raise
        raise agent_js_stop(run.action, e.message or "") from None


async def js(run: Run) -> Result:
    command = cast(Js, run.command)
    assert isinstance(command.code, str)
    return {"value": _jsonable(await _evaluate_agent(run, command.code))}, None


async def wait_for_result(run: Run) -> Result:
    command = cast(WaitForResult, run.command)
    assert isinstance(command.code, str) and isinstance(command.interval, float | int)
    while True:
        value = await _evaluate_agent(run, command.code)
        if _truthy(value):
            return {"value": _jsonable(value)}, None
        if run.remaining() <= 0:
            raise TimeoutError
        await run.pause(min(float(command.interval), run.remaining()))


def _cookies_to_set(run: Run, command: Cookies) -> list[dict[str, Any]]:
    """The command's cookies, each with the url or the path Playwright needs."""
    cookies: list[dict[str, Any]] = []
    page_url = run.page.url if run.page.url.startswith(("http://", "https://")) else None
    for i, raw in enumerate(command.cookies):
        cookie = dict(raw)  # its fields and their types were checked when the command was parsed
        if "url" not in cookie and "domain" not in cookie:
            if page_url is None:
                raise Stop("invalid_parameter", f"cookies: cookie {i} needs url or domain (the tab shows "
                                                "no http(s) page)")
            cookie["url"] = page_url
        if "domain" in cookie and "path" not in cookie:
            cookie["path"] = "/"
        cookies.append(cookie)
    return cookies


async def cookies(run: Run) -> Result:
    command = cast(Cookies, run.command)
    context = run.page.context
    if command.op == "get":
        found = await run.within(context.cookies())
        return {"cookies": [dict(c) for c in found]}, None
    if command.op == "clear":
        count = len(await run.within(context.cookies()))
        run.sent = True
        await run.within(context.clear_cookies())
        return {"cleared": count}, None
    to_set = _cookies_to_set(run, command)
    run.sent = True
    try:
        await run.within(context.add_cookies(to_set))  # type: ignore[arg-type]
    except PlaywrightError as e:
        if is_closed_error(e):
            raise
        raise Stop("invalid_parameter", "cookies: the browser refused the cookies", took_effect=False) from None
    return {"set": len(to_set)}, None


async def storage(run: Run) -> Result:
    command = cast(Storage, run.command)
    key = command.key if isinstance(command.key, str) else None
    value = command.value if isinstance(command.value, str) else None
    if command.op != "get":
        run.sent = True
    result = await run.within(run.page.evaluate(STORAGE, [command.area, command.op, key, value]))
    error = result.get("error")
    if error == "unavailable":
        raise Stop("storage_unavailable", f"storage: the page has no {command.area}Storage (its URL has "
                                          "no origin that may store)", took_effect=False)
    if error == "quota":
        raise Stop("storage_full", f"storage: {command.area}Storage is full", took_effect=False)
    if error is not None:
        raise Stop("storage_failed", f"storage: {command.op} failed in the page", took_effect=False)
    return dict(result), None


async def _scratch_keys(run: Run, text: str | None, keys: str) -> str | None:
    """Press copy or paste keys in a scratch field of the page (the clipboard API's fallback)."""
    page = run.page
    await run.within(page.evaluate(SCRATCH_OPEN, [text]))
    try:
        await run.within(page.keyboard.press(keys))
    finally:
        result = await run.within(page.evaluate(SCRATCH_CLOSE))
    return cast(str | None, result)


async def clipboard(run: Run) -> Result:
    command = cast(Clipboard, run.command)
    page = run.page
    run.sent = True
    if command.op == "write":
        assert isinstance(command.text, str)
        how = await run.within(page.evaluate(CLIPBOARD_WRITE, command.text))
        if how != "ok":  # headless or an insecure origin blocked the API: copy from a scratch field
            await _scratch_keys(run, command.text, "ControlOrMeta+C")
        return {"written": True}, None
    read = await run.within(page.evaluate(CLIPBOARD_READ))
    if "text" in read:
        return {"text": read["text"]}, None
    return {"text": await _scratch_keys(run, None, "ControlOrMeta+V") or ""}, None
