"""Parsing a call: every command validated, and every reference checked, before anything runs.

A call is rejected whole, with the path of the bad command (``"0.1.3"``, ``"2.then.0"``) and what
is wrong with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from messages.commands._actions import MAX_TAB_ID, Command
from messages.commands._blocks import ACTIONS, Parallel
from messages.commands._coerce import checked, json_type, whole_number
from messages.commands._forms import own_references
from messages.commands._params import Param, parameters
from messages.commands._tree import children
from messages.contract import CALL_TIMEOUT, MAX_CALL_TIMEOUT
from messages.errors import invalid_call
from messages.paths import ROOT, StepPath

CallKind = Literal["batch", "parallel", "workflow"]


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on a call, checked before anything runs."""

    max_commands: int = 1000
    """Commands in a call, blocks and their steps included."""
    max_depth: int = 8
    """Nesting of blocks; a top-level command is depth 1."""


class _Counter:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.seen = 0

    def add(self, path: StepPath, depth: int) -> None:
        self.seen += 1
        if self.seen > self.limits.max_commands:
            raise invalid_call(
                "too_many_commands", path, f"a call may hold at most {self.limits.max_commands} commands"
            )
        if depth > self.limits.max_depth:
            raise invalid_call("too_deep", path, f"blocks nest at most {self.limits.max_depth} deep")


def parse_command(raw: Any, path: str = "0", limits: Limits = Limits()) -> Command:
    """Parse and validate one command (references are checked by :func:`parse_call`)."""
    return _parse_command(raw, StepPath(path), 1, _Counter(limits))


def _parse_command(raw: Any, path: StepPath, depth: int, counter: _Counter) -> Command:
    counter.add(path, depth)
    if not isinstance(raw, dict):
        raise invalid_call("invalid_call", path, f"a command is a JSON object, not {json_type(raw)}")
    action = raw.get("action")
    if not isinstance(action, str):
        raise invalid_call("missing_parameter", path, "the command has no action", param="action")
    cls = ACTIONS.get(action)
    if cls is None:
        raise invalid_call("unknown_action", path, f"unknown action {action!r}", action=action)
    if cls is Parallel and depth > 1:
        raise invalid_call("invalid_call", path, "a parallel runs only as a top-level command")
    params = parameters(cls)
    known = {p.json_name for p in params}
    for key in raw:
        if key != "action" and key not in known:
            raise invalid_call("unknown_parameter", path, f"{action} takes no parameter {key!r}", param=key)
    values: dict[str, Any] = {}
    for param in params:
        if param.json_name not in raw or (raw[param.json_name] is None and not param.required):
            if param.required:
                raise invalid_call(
                    "missing_parameter", path, f"{action} needs {param.json_name}", param=param.json_name
                )
            continue
        values[param.name] = _parse_param(param, raw[param.json_name], path, depth, counter)
    command = cls(**values)
    check = getattr(command, "check", None)
    if check is not None:
        check(path)
    return command


def _parse_param(param: Param, raw: Any, path: StepPath, depth: int, counter: _Counter) -> Any:
    if param.type == tuple[Command, ...]:
        return _parse_steps(raw, param, path, depth, counter)
    if param.type == tuple[tuple[Command, ...], ...]:
        if not isinstance(raw, list) or not raw:
            raise invalid_call("empty_parallel", path, "a parallel needs at least one sequence", param=param.json_name)
        sequences = []
        for s, seq in enumerate(raw):
            if not isinstance(seq, list) or not seq:
                raise invalid_call("empty_parallel", path.child(s), "each sequence of a parallel needs a step")
            sequences.append(
                tuple(_parse_command(c, path.child(s, i), depth + 1, counter) for i, c in enumerate(seq))
            )
        return tuple(sequences)
    if param.type is Command:
        return _parse_command(raw, path.child(param.json_name), depth + 1, counter)
    try:
        value = checked(param, param.type, raw)
    except ValueError as e:
        code = "bad_reference" if "reference" in str(e) else "invalid_parameter"
        raise invalid_call(code, path, f"{param.json_name}: {e}", param=param.json_name) from None
    return value


def _parse_steps(raw: Any, param: Param, path: StepPath, depth: int, counter: _Counter) -> Any:
    """A sequence's steps (at ``path.i``), or a block's list of commands (at ``path.then.i`` and so on)."""
    if not isinstance(raw, list):
        raise invalid_call("invalid_parameter", path, f"{param.json_name}: expected a list of commands",
                           param=param.json_name)
    if not raw and param.meta.get("min_items"):
        raise invalid_call("invalid_parameter", path, f"{param.json_name}: needs at least one command",
                           param=param.json_name)
    within = path if param.json_name == "steps" else path.child(param.json_name)
    return tuple(_parse_command(c, within.child(i), depth + 1, counter) for i, c in enumerate(raw))

def _check_references(commands: tuple[Command, ...]) -> None:
    """Every ``${$N...}`` names an earlier step of its own list (a batch or a sequence)."""
    for index, command in enumerate(commands):
        _check_command_references(command, index, ROOT.child(index))


def _check_command_references(command: Command, index: int, path: StepPath) -> None:
    """A block's children name steps of the list the block is in; paths as the parser gives them."""
    for name, ref in own_references(command):
        if ref.step >= index:
            raise invalid_call(
                "bad_reference", path,
                f"{name}: {ref} must name an earlier step (0..{index - 1})" if index
                else f"{name}: {ref} names no earlier step",
                param=name,
            )
    for child in children(command, path):
        _check_command_references(child.command, child.index if child.step else index, child.path)

@dataclass(frozen=True, slots=True)
class CallSpec:
    """A validated container call: what to run and how."""

    kind: CallKind
    """batch, parallel (one parallel command) or workflow."""
    commands: tuple[Command, ...]
    """The top-level commands."""
    default_tab: int | None = None
    """Tab for steps that name none (the caller's current tab)."""
    stop_on_warning: bool = False
    """Stop at a step that succeeded with a warning."""
    timeout: float = CALL_TIMEOUT
    """The container deadline in seconds (``container_timeout``)."""


def parse_call(
    kind: CallKind,
    commands: Any,
    *,
    default_tab: Any = None,
    stop_on_warning: Any = False,
    timeout: Any = CALL_TIMEOUT,
    limits: Limits = Limits(),
    max_timeout: float = MAX_CALL_TIMEOUT,
) -> CallSpec:
    """Parse and validate a whole call; raise :class:`KitsuneError` naming the bad path."""
    if not isinstance(commands, list) or not commands:
        raise invalid_call("invalid_call", "", "commands must be a non-empty list")
    if default_tab is not None:
        default_tab = whole_param(default_tab, "tabId")
    if not isinstance(stop_on_warning, bool):
        raise invalid_call("invalid_parameter", "", "stopOnWarning must be a boolean", param="stopOnWarning")
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= max_timeout:
        raise invalid_call("invalid_parameter", "", f"timeout must be a number in (0, {max_timeout}]",
                           param="timeout")
    counter = _Counter(limits)
    parsed = tuple(_parse_command(raw, ROOT.child(i), 1, counter) for i, raw in enumerate(commands))
    _check_references(parsed)
    return CallSpec(kind, parsed, default_tab, stop_on_warning, float(timeout))


def whole_param(raw: Any, name: str, low: int = 0, high: int = MAX_TAB_ID, path: str = "") -> int:
    """A body's or a query's whole-number parameter ``name`` (a tab id by default: 0 to 2**53 - 1), read as a
    command's are; else 400 ``invalid_parameter`` naming it (``state.path``, ``state.param``)."""
    try:
        return whole_number(raw, low, high)
    except ValueError as e:
        raise invalid_call("invalid_parameter", path, f"{name}: {e}", param=name) from None


_BODY_KEYS = {"batch": {"commands", "tabId", "stopOnWarning", "timeout"},
              "parallel": {"sequences", "tabId", "stopOnWarning", "timeout"}}


def parse_body(kind: Literal["batch", "parallel"], body: Any, limits: Limits = Limits()) -> CallSpec:
    """Parse a batch (``{"commands", ...}``) or parallel (``{"sequences", ...}``) call body."""
    if not isinstance(body, dict):
        raise invalid_call("invalid_call", "", f"a {kind} body is a JSON object, not {json_type(body)}")
    unknown = sorted(set(body) - _BODY_KEYS[kind])
    if unknown:
        raise invalid_call("unknown_parameter", "", f"a {kind} body takes no {unknown[0]!r}", param=unknown[0])
    options = {"default_tab": body.get("tabId"), "stop_on_warning": body.get("stopOnWarning", False),
               "timeout": body.get("timeout", CALL_TIMEOUT), "limits": limits}
    if kind == "batch":
        return parse_call("batch", body.get("commands"), **options)
    sequences = body.get("sequences")
    if not isinstance(sequences, list) or not sequences:
        raise invalid_call("empty_parallel", "", "a parallel needs at least one sequence", param="sequences")
    return parse_call("parallel", [{"action": "parallel", "sequences": sequences}], **options)
