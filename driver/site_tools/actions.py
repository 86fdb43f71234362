"""The actions ``siteTools`` (a read) and ``callSiteTool`` (a write) on a tab's site tools."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, cast

from playwright.async_api import Error as PlaywrightError

from driver.errors import Stop
from driver.run import Result, Run
from driver.site_tools.chains import Document, bare_url
from driver.site_tools.declarations import reads_only
from driver.site_tools.input_schema import invalid_schema
from driver.site_tools.runtime import SiteTools
from messages.commands import CallSiteTool
from messages.errors import KitsuneError
from messages.events import SiteToolCalled

__all__ = ["call_site_tool", "site_tools"]

_LATE_DECLARATION = 2.0
"""Seconds a loaded page has to declare a tool that is not there yet, before it counts as missing."""


_SYNC = 1.0
"""Seconds at most for the node to hear the declarations a page made before it is asked for them."""


_NAMED = 64
"""Declared tools a ``site_tool_not_found`` names at most."""


async def site_tools(run: Run) -> Result:
    tools = _tools_of(run)
    await tools.in_sync(run.page, min(_SYNC, run.remaining()))
    return {**tools.listing(run.page), "url": bare_url(run.page.url)}, None


async def call_site_tool(run: Run) -> Result:
    command = cast(CallSiteTool, run.command)
    tools = _tools_of(run)
    value = command.input if command.input is not None else {}
    try:
        document, declaration = await _declared(run, tools, command.name)
        if "invalid" in declaration:
            raise invalid_schema(command.name, declaration["invalid"])
        if run.caller.as_read and not reads_only(declaration):
            raise KitsuneError("site_tool_writes", f"callSiteTool {command.name}: the page does not declare the tool "
                               "readOnlyHint, so it is a write; nothing was sent", state={"tool": command.name})
        await run.within(tools.checker.check(command.name, declaration["inputSchema"], value))
    except KitsuneError as e:
        tools.hooks.call_ended("failed")
        raise Stop(e.code, e.message, state=e.state) from None
    except (TimeoutError, asyncio.CancelledError):  # the step's own time ran out, or it was cancelled: nothing sent
        tools.hooks.call_ended("failed")
        raise
    chain, invocation = tools.begin(command.name, document, value, call=run.caller.call, path=run.caller.path,
                                    agent=run.caller.agent, form="form" in declaration)
    ending = "failed"
    try:
        if chain.call is not None:
            tools.hooks.event(SiteToolCalled(chain.call, chain.path, chain.tab, chain.tool, chain.origin), chain.agent)
        run.sent = True
        if not await run.within(tools.start(chain, invocation)):
            run.sent = False
            raise Stop("site_tool_not_found", f"callSiteTool {command.name}: the page replaced its document before the "
                       "tool started; nothing was sent", retryable=True)
        result = await run.within(asyncio.shield(chain.result))
        ending = "completed"
        return result
    except Stop as stop:  # the chain's own end: tab_closed, navigated, continuation_expired, site_tool_error
        ending = stop.code
        raise
    except TimeoutError:
        ending = "timeout"
        raise
    except asyncio.CancelledError:
        ending = "cancelled"
        raise
    except PlaywrightError:
        ending = "navigated"
        raise
    finally:
        tools.end(chain, ending)
        tools.hooks.call_ended("ok" if ending == "completed" else "unknown" if run.sent else "failed")


async def _declared(run: Run, tools: SiteTools, name: str) -> tuple[Document, dict[str, Any]]:
    """The document that declares ``name`` and its declaration, waiting while the page loads and a moment after;
    else ``site_tool_not_found`` (nothing sent)."""
    late = None
    while (found := tools.declaring(run.page, name)) is None:
        loop = asyncio.get_running_loop()
        if late is None:
            with contextlib.suppress(PlaywrightError):  # the time is up, or the page went: the next look says which
                await run.page.wait_for_load_state("load", timeout=run.ms())
            await tools.in_sync(run.page, min(_SYNC, run.remaining()))
            if (found := tools.declaring(run.page, name)) is not None:
                break
            late = loop.time() + min(_LATE_DECLARATION, run.remaining())
        if loop.time() >= late or run.remaining() <= 0:
            declared = tools.names(run.page)
            shown = ", ".join(declared[:_NAMED]) + (f" and {len(declared) - _NAMED} more" if declared[_NAMED:] else "")
            raise KitsuneError("site_tool_not_found", f"callSiteTool: the page declares no tool named {name!r} (it "
                               f"declares {shown or 'none'}); nothing was sent",
                               state={"tool": name, "declared": declared[:_NAMED]})
        await tools.changed(late - loop.time())
    return found


def _tools_of(run: Run) -> SiteTools:
    assert run.site_tools is not None, "the driver gives every run its browser's site tools"
    return run.site_tools
