"""The blocks of the command language, and the table of every action and block by name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from messages.commands._actions import (
    DATA_ACTIONS,
    MAX_JS,
    MAX_TAB_ID,
    PAGE_ACTIONS,
    Command,
    Integer,
    Number,
    SyncBarrier,
    Text,
    _param,
)
from messages.commands._cdp import CDP_ACTIONS
from messages.commands._tabs import TAB_ACTIONS
from messages.errors import invalid_call


@dataclass(frozen=True, kw_only=True, slots=True)
class Sequence(Command):
    """Steps run in order, stopping at the first that is not ok; resumed step by step."""

    action = "sequence"
    acts_on_tab = False
    steps: tuple[Command, ...] = _param("The steps.", min_items=1)


@dataclass(frozen=True, kw_only=True, slots=True)
class Parallel(Command):
    """Sequences run concurrently, each on its own tabs; resumed sequence by sequence."""

    action = "parallel"
    acts_on_tab = False
    sequences: tuple[tuple[Command, ...], ...] = _param("The sequences, each a list of steps.")


@dataclass(frozen=True, kw_only=True, slots=True)
class If(Command):
    """Run ``then`` when a JavaScript condition is truthy, else ``else``."""

    action = "if"
    condition: Text = _param("JavaScript expression evaluated in the tab.", javascript=True, max_length=MAX_JS)
    then: tuple[Command, ...] = _param("Steps when the condition holds.", min_items=1)
    otherwise: tuple[Command, ...] = _param("Steps when it does not.", (), json_name="else")


@dataclass(frozen=True, kw_only=True, slots=True)
class While(Command):
    """Repeat ``body`` while a JavaScript condition is truthy, at most ``maxIterations`` times."""

    action = "while"
    condition: Text = _param("JavaScript expression evaluated before each iteration.", javascript=True,
                             max_length=MAX_JS)
    body: tuple[Command, ...] = _param("Steps of one iteration.", min_items=1)
    max_iterations: int = _param("Iteration bound; reaching it fails the block.", 100, minimum=1, maximum=1000)


@dataclass(frozen=True, kw_only=True, slots=True)
class Try(Command):
    """Run ``body``; when one of its steps fails, run ``catch`` instead of failing."""

    action = "try"
    body: tuple[Command, ...] = _param("Steps to try.", min_items=1)
    catch: tuple[Command, ...] = _param("Steps run when a body step fails; none means the try fails.", ())


@dataclass(frozen=True, kw_only=True, slots=True)
class Retry(Command):
    """Run ``body`` again after a failure that sent nothing or is retryable."""

    action = "retry"
    body: tuple[Command, ...] = _param("Steps to run.", min_items=1)
    attempts: int = _param("Attempts in all.", 3, minimum=1, maximum=10)
    delay: Number = _param("Seconds between attempts.", 1.0, minimum=0, maximum=60)


@dataclass(frozen=True, kw_only=True, slots=True)
class Broadcast(Command):
    """Run one command on several tabs."""

    action = "broadcast"
    acts_on_tab = False
    tab_ids: tuple[Integer, ...] = _param("Tabs to run the command on.", min_items=1, minimum=0, maximum=MAX_TAB_ID)
    command: Command = _param("The command; it names no tabId of its own.")

    def check(self, path: str) -> None:
        if self.command.tab_id is not None:
            raise invalid_call("invalid_parameter", path, "a broadcast command names no tabId", param="command")
        if isinstance(self.command, BLOCKS):
            raise invalid_call("invalid_parameter", path, "broadcast runs one action, not a block", param="command")


BLOCKS = (Sequence, Parallel, If, While, Try, Retry, Broadcast)
ENGINE_STEPS = (*BLOCKS, SyncBarrier)
"""Commands the engine runs itself, on the call's thread, never the browser: blocks, and a barrier between sequences."""
ACTION_CLASSES: tuple[type[Command], ...] = (*PAGE_ACTIONS, *TAB_ACTIONS, *DATA_ACTIONS)
"""Every action (not the blocks), in the order of the contract."""
_EVERY: tuple[type[Command], ...] = (*ACTION_CLASSES, *CDP_ACTIONS, *BLOCKS)
ACTIONS: Mapping[str, type[Command]] = {cls.action: cls for cls in _EVERY}
"""Every action and block by its name."""
