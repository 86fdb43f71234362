"""An action's Playwright calls as one API call of Playwright's client.

Playwright's Python client wraps every API call: it captures the caller's stack (walking the frames of the await
chain and reading the locals of each, to name the call in its errors and traces), opens an API zone for it, logs it
and reports its end to the client's instrumentation. A call made inside a zone already open runs directly, as the
calls a composite API makes (``locator.click`` and its waits) do. The driver opens one zone for each action it runs,
named by the action: the action's calls pay none of that wrapping, and a read costs the loop about what raw
Playwright's own call costs (``bench/read_driver.py``: +0.06-0.08 ms of the loop's CPU a read before, +0.01 after).

What it gives up: Playwright's ``Locator.click:`` prefix on an error's message (the driver words its own,
:func:`driver.errors.translate`) and the client's trace of each call (the node traces nothing through the client).
It uses Playwright's client's zone (``playwright._impl``), pinned in constraints.txt;
``test_an_action_makes_its_playwright_calls_as_one_call_of_the_client`` (``tests/integration/test_browser.py``)
fails if a Playwright upgrade changes it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from playwright._impl.channel_owner import ApiZone
from playwright._impl.utils.zones import current_zone

__all__ = ["as_one_call"]

R = TypeVar("R")


def as_one_call(name: str, work: Callable[[], Awaitable[R]]) -> Awaitable[R]:
    """``work()`` awaited inside one API zone of Playwright's client named ``name``: its calls run unwrapped."""
    return current_zone().with_("apiZone", ApiZone(name, [], None, False)).run_async(work)
