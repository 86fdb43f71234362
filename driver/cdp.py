"""The CDP actions: ``cdp`` sends one method on the tab's own CDP session, ``cdpEvents`` collects and reads the
tab's events, ``cdpSpec`` describes the protocol (:mod:`driver.cdp_protocol`); the sessions: :mod:`driver.cdp_tabs`.
"""

from __future__ import annotations

import time
from typing import cast

import orjson
from playwright.async_api import Error as PlaywrightError

from driver.cdp_tabs import CdpTabs
from driver.errors import Stop, first_line, is_closed_error
from driver.run import Result, Run
from messages.cdp_methods import EVENT_DOMAINS
from messages.commands import Cdp, CdpEvents, CdpSpec, secret_values

__all__ = ["MAX_CDP_RESULT", "cdp", "cdp_events", "cdp_spec"]

MAX_CDP_RESULT = 800 * 1024
"""Bytes of JSON a ``cdp`` answer may have (under NATS's 1 MB message): past it the answer is not returned."""


def _tabs(run: Run) -> CdpTabs:
    assert run.cdp is not None
    return run.cdp


async def cdp(run: Run) -> Result:
    command = cast(Cdp, run.command)
    tab = await run.within(_tabs(run).of(run.tab, run.page))
    run.sent = run.write
    started, outcome = time.monotonic(), "timeout"  # until it answers: cut by its time, or cancelled
    try:
        answer = await run.within(_tabs(run).send(tab, command.method, command.params or {}))
        outcome = "ok"
    except PlaywrightError as e:
        refusal = _refusal(command, e)
        outcome = refusal.code if isinstance(refusal, Stop) else "failed"
        raise refusal from None
    finally:
        if (log := _tabs(run).debug_log_of(run.page)) is not None:
            log.add(command, run.tab, time.monotonic() - started, outcome)
    size = len(orjson.dumps(answer))
    if size > MAX_CDP_RESULT:
        return {"result": None, "resultBytes": size}, (f"the answer of {command.method} is {size} bytes, over "
                                                       f"{MAX_CDP_RESULT}: not returned (ask for less)")
    return {"result": answer}, None


def _refusal(command: Cdp, error: PlaywrightError) -> Exception:
    """The browser's error answer to a method as a stop (nothing took effect), or the error itself (a closed tab)."""
    message = error.message or str(error)
    if is_closed_error(error) or "Protocol error" not in message:
        return error
    if "wasn't found" in message:
        return Stop("invalid_parameter", f"cdp: the browser has no method {command.method}; nothing was sent",
                    took_effect=False, state={"param": "method"})
    detail = first_line(message).partition("): ")[2][:200]
    if not detail or any(secret in detail for secret in secret_values(command)):
        detail = "its parameters or the page's state"
    return Stop("cdp_error", f"cdp: the browser refused {command.method}: {detail}", took_effect=False,
                state={"method": command.method})


async def cdp_events(run: Run) -> Result:
    command = cast(CdpEvents, run.command)
    tab = await run.within(_tabs(run).of(run.tab, run.page))
    collected = tab.events_of(run.caller.agent)
    for domain in command.enable:
        if domain in tab.enabled:
            continue
        source = EVENT_DOMAINS[domain]
        for event in source.events:
            tab.session.on(event, lambda params, name=event: tab.events.add(name, params))
        for method, params in source.enable:
            await run.within(_tabs(run).send(tab, method, params))
        tab.enabled.append(domain)
    if command.enable:
        return {"enabled": list(tab.enabled)}, None
    events, dropped = collected.take()
    return {"events": events, "dropped": dropped, "enabled": list(tab.enabled)}, None


async def cdp_spec(run: Run) -> Result:
    command = cast(CdpSpec, run.command)
    browser = run.page.context.browser
    assert browser is not None  # every context is made by Browser.new_context
    version = browser.version
    protocol = await run.within(_tabs(run).protocols.of(version))
    if command.domain is None:
        return {"browser": version, "domains": [domain["name"] for domain in protocol]}, None
    found = next((domain for domain in protocol if domain["name"] == command.domain), None)
    if found is None:
        raise Stop("invalid_parameter", f"cdpSpec: the browser has no domain {command.domain}",
                   state={"param": "domain"})
    return {"browser": version, "domain": found}, None
