"""A command's other forms: its JSON, its audit entry, its references and their values."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from messages.commands._actions import Command
from messages.commands._coerce import checked, without_references
from messages.commands._params import parameters
from messages.errors import KitsuneError
from messages.references import Ref, Template, references_in, resolve


def command_to_json(command: Command) -> dict[str, Any]:
    """The command in the command language; ``parse_command`` of it gives ``command`` back."""
    out: dict[str, Any] = {"action": command.action}
    for param in parameters(type(command)):
        value = getattr(command, param.name)
        if not param.required and value == param.default:
            continue
        out[param.json_name] = _value_to_json(value)
    return out


def _value_to_json(value: Any) -> Any:
    if isinstance(value, Command):
        return command_to_json(value)
    if isinstance(value, Ref | Template):
        return str(value)
    if isinstance(value, tuple):
        return [_value_to_json(item) for item in value]
    return value


def resolve_command(command: Command, result_of: Callable[[int], Any]) -> Command:
    """``command`` with the references of its own parameters replaced by their values.

    Commands inside a block are left as they are: they resolve when they run. Raises
    :class:`KitsuneError` (``reference_unresolved``, ``invalid_parameter``) when a reference
    cannot be followed or gives a value of the wrong type.
    """
    changes: dict[str, Any] = {}
    for param in parameters(type(command)):
        value = getattr(command, param.name)
        if not any(True for _ in references_in(value)):
            continue
        resolved = resolve(value, result_of)
        try:
            changes[param.name] = checked(param, without_references(param.type), _plain(resolved))
        except ValueError as e:
            raise KitsuneError(
                "invalid_parameter", f"{param.json_name}: the referenced value is not valid: {e}",
                state={"param": param.json_name},
            ) from None
    return dataclasses.replace(command, **changes) if changes else command


def own_references(command: Command) -> list[tuple[str, Ref]]:
    """(parameter, reference) for the references in ``command``'s own parameters, not its children's."""
    return [(param.json_name, ref) for param in parameters(type(command))
            for ref in references_in(getattr(command, param.name))]


def _plain(value: Any) -> Any:
    """Resolved values as JSON would give them (tuples back to lists) to be checked again."""
    return [_plain(v) for v in value] if isinstance(value, tuple) else value


def audit_params(command: Command) -> dict[str, Any]:
    """The command's parameters as the audit log keeps them: typed values redacted, JavaScript (and a CDP method's
    parameters) dropped."""
    out: dict[str, Any] = {}
    for param in parameters(type(command)):
        value = getattr(command, param.name)
        if param.dropped or (value == param.default and not param.required):
            continue
        if param.secret and isinstance(value, dict):  # an object's keys are names, its values typed values
            out[param.json_name] = dict.fromkeys(value, "[redacted]")
        elif param.secret:
            out[param.json_name] = "[redacted]"
        elif isinstance(value, Command):
            out[param.json_name] = {"action": value.action, **audit_params(value)}
        elif isinstance(value, tuple) and value and isinstance(value[0], Command | tuple):
            out[param.json_name] = _audit_nested(value)
        else:
            out[param.json_name] = _value_to_json(value)
    return out


def _audit_nested(value: tuple[Any, ...]) -> list[Any]:
    return [_audit_nested(item) if isinstance(item, tuple) else {"action": item.action, **audit_params(item)}
            for item in value]
