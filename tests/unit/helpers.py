"""Helpers the unit tests of the core share: command dicts, a batch, and looks into a ``World``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from core.checkpoints import Checkpoint
from core.ports import Recorded
from messages.commands import CallSpec, Command, parse_call
from messages.errors import KitsuneError
from messages.results import Outcome
from tests.unit.fakes import ScriptedDriver, World

DEFAULT_TAB = 3


def click(selector: str, tab: int | str | None = None, **params: Any) -> dict[str, Any]:
    """A click on ``selector``, in tab ``tab`` if given (an id or a reference)."""
    return _on_tab({"action": "click", "selector": selector, **params}, tab)


def find(selector: str, tab: int | str | None = None, **params: Any) -> dict[str, Any]:
    return _on_tab({"action": "find", "selector": selector, **params}, tab)


def read(selector: str, **params: Any) -> dict[str, Any]:
    return {"action": "pageText", "selector": selector, **params}


def sequence(*steps: dict[str, Any], **params: Any) -> dict[str, Any]:
    return {"action": "sequence", "steps": list(steps), **params}


def parallel(*sequences: list[dict[str, Any]]) -> dict[str, Any]:
    return {"action": "parallel", "sequences": list(sequences)}


def _on_tab(command: dict[str, Any], tab: int | str | None) -> dict[str, Any]:
    return command if tab is None else {**command, "tabId": tab}


def batch(*commands: dict[str, Any], default_tab: int | None = DEFAULT_TAB, **options: Any) -> CallSpec:
    """A parsed batch call of ``commands``."""
    return parse_call("batch", list(commands), default_tab=default_tab, **options)


def snapshot(world: World, body: dict[str, Any], agent: str | None = None) -> Checkpoint:
    """The checkpoint of ``agent``'s call that answered ``body``, taken out and put back unchanged."""
    checkpoint = world.store.take(body["call"], body["resume_token"], agent)
    world.store.put_back(body["call"])
    return checkpoint


def resume_error(world: World, call: Any, token: Any, observed: Any = None) -> KitsuneError:
    """The error a resume of ``call`` with ``token`` raises (it must raise one)."""
    with pytest.raises(KitsuneError) as raised:
        world.calls.resume(call, token, observed)
    return raised.value


def refused(world: World, body: dict[str, Any], observed: Any = None) -> KitsuneError:
    """The error a resume with the call and token of ``body`` raises."""
    return resume_error(world, body["call"], body["resume_token"], observed)


def intercept(world: World, key: str, action: Callable[[], None]) -> None:
    """Run ``action`` each time the driver receives the command ``key``, before answering it."""
    original = world.driver.execute

    def execute(command: Command, tab_id: int | None, timeout: float, recorded: Sequence[Recorded] = (), *,
                as_read: bool = False) -> Outcome:
        if ScriptedDriver.key_of(command) == key:
            action()
        return original(command, tab_id, timeout, recorded, as_read=as_read)

    world.driver.execute = execute  # type: ignore[method-assign]
