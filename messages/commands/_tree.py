"""The command tree: the one walk over the commands inside a block, and what is read through it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from messages.cdp_methods import method_class
from messages.commands._actions import Command
from messages.commands._blocks import ACTIONS, BLOCKS, Broadcast, Parallel, Retry, Sequence, Try
from messages.commands._cdp import Cdp
from messages.commands._params import parameters
from messages.paths import ROOT, StepPath
from messages.references import Template


@dataclass(frozen=True, slots=True)
class Child:
    """A command directly inside a block, and where it is."""

    command: Command
    path: StepPath
    """Where it is in the call, as the parser names it: ``"1.2"`` in a sequence, ``"0.1.3"`` in a
    parallel, ``"4.then.0"`` or ``"4.command"`` inside a one-step block."""
    index: int
    """Its index in its own list: what a later step of that list names as ``${$N}``."""
    step: bool
    """A step of its own (in a sequence or parallel), run, reported and resumed at its path; else a
    part of its block's one step, whose references name steps of the block's list."""


_NESTED: dict[type[Command], tuple[tuple[str, str, bool], ...]] = {
    cls: tuple((p.name, p.json_name, p.type is Command) for p in parameters(cls)
               if p.type is Command or p.type == tuple[Command, ...])
    for cls in BLOCKS
}
"""(field, JSON name, holds one command) of each parameter of a one-step block that holds commands."""


def children(command: Command, path: StepPath = ROOT) -> tuple[Child, ...]:
    """The commands directly inside ``command`` (at ``path``), in order; none for an action."""
    if isinstance(command, Sequence):
        return tuple(Child(c, path.child(i), i, True) for i, c in enumerate(command.steps))
    if isinstance(command, Parallel):
        return tuple(Child(c, path.child(q, i), i, True)
                     for q, seq in enumerate(command.sequences) for i, c in enumerate(seq))
    found: list[Child] = []
    for name, json_name, single in _NESTED.get(type(command), ()):
        value = getattr(command, name)
        if single:
            found.append(Child(value, path.child(json_name), 0, False))
        else:
            found += (Child(c, path.child(json_name, i), i, False) for i, c in enumerate(value))
    return tuple(found)


def tabs_named(command: Command, path: StepPath = ROOT) -> Iterator[tuple[StepPath, Any]]:
    """(path, tab) of every tab ``command`` and the commands inside it name: an id, or a reference to one.
    A tab named inside a one-step block is at the block's path."""
    if command.tab_id is not None:
        yield path, command.tab_id
    if isinstance(command, Broadcast):
        yield from ((path, tab) for tab in command.tab_ids)
    for child in children(command, path):
        yield from ((found if child.step else path, tab) for found, tab in tabs_named(child.command, child.path))


def leaf_paths(command: Command, path: StepPath) -> list[tuple[StepPath, Command]]:
    """The steps resumed one by one under ``command``: itself, or a sequence's or parallel's steps."""
    if not isinstance(command, Sequence | Parallel):
        return [(path, command)]
    return [leaf for child in children(command, path) for leaf in leaf_paths(child.command, child.path)]


def is_write(command: Command) -> bool:
    """Whether sending ``command`` again could change something (spec: What each step does); a ``cdp`` step's
    method says (:mod:`messages.cdp_methods`)."""
    if isinstance(command, Sequence | Parallel | Try | Retry):
        return any(is_write(child.command) for child in children(command))
    if isinstance(command, Cdp):
        return method_class(command.method) != "read"
    return command.writes


def secret_values(command: Command) -> list[str]:
    """The literal typed values and JavaScript bodies in ``command`` and its children."""
    found: list[str] = []
    for name in _SECRET_PARAMS[type(command)]:
        found.extend(_strings(getattr(command, name)))
    for child in children(command):
        found.extend(secret_values(child.command))
    return [value for value in found if value]


_SECRET_PARAMS: dict[type[Command], tuple[str, ...]] = {
    cls: tuple(param.name for param in parameters(cls) if param.secret or param.dropped) for cls in ACTIONS.values()}
"""Each command's parameters that hold typed values or JavaScript (read on every step: made once)."""


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Template):
        yield from (part for part in value.parts if isinstance(part, str))
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield str(value)
