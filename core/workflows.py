"""Stored workflows: named command lists with variables, in YAML or JSON files (read by ``bridge.workflows``).

A workflow file::

    name: checkout            # optional; the file name is the workflow's name
    description: Buy what is in the cart
    variables:
      email: {required: true, description: Where the receipt goes}
      quantity: {default: 1}
    commands:
      - {action: navigate, url: "{{base}}/cart"}
      - {action: fill, selector: "#email", value: "{{email}}"}

``{{name}}`` as a whole string takes the variable's value with its type; inside a longer
string it is replaced by its text. A call keeps the SHA-256 of the file it ran; a resume of a
workflow whose file changed or is gone answers ``workflow_changed`` (spec: Workflows).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core.checkpoints import WorkflowSource
from messages.commands import CallSpec, Limits, parse_call
from messages.contract import CALL_TIMEOUT
from messages.errors import KitsuneError

__all__ = ["NAME", "SUFFIXES", "Workflow", "parse_workflow"]

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
"""What a workflow's name may be (its file's, without the suffix)."""
_VARIABLE = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
SUFFIXES = (".yaml", ".yml", ".json")
"""The suffixes of workflow files."""


@dataclass(frozen=True, slots=True)
class Workflow:
    """A parsed workflow file."""

    name: str
    description: str
    variables: Mapping[str, Mapping[str, Any]]
    """Each variable's ``required``, ``default`` and ``description``."""
    commands: list[Any]
    """The commands as written, with ``{{variables}}`` in place."""
    sha256: str
    """SHA-256 (hex) of the file's bytes."""

    def instantiate(self, given: Any) -> list[Any]:
        """The commands with the variables filled in; ``invalid_parameter`` names a bad variable."""
        if given is None:
            given = {}
        if not isinstance(given, dict):
            raise KitsuneError("invalid_parameter", "variables must be an object", state={"param": "variables"})
        unknown = sorted(set(given) - set(self.variables))
        if unknown:
            raise KitsuneError("invalid_parameter", f"workflow {self.name} has no variable {unknown[0]!r}",
                               state={"param": "variables", "variable": unknown[0]})
        values: dict[str, Any] = {}
        for name, spec in self.variables.items():
            if name in given:
                values[name] = given[name]
            elif "default" in spec:
                values[name] = spec["default"]
            else:
                raise KitsuneError("missing_parameter", f"workflow {self.name} needs variable {name!r}",
                                   state={"param": "variables", "variable": name})
        return [_substitute(command, values) for command in self.commands]


    def call_spec(self, variables: Any, *, default_tab: Any = None, stop_on_warning: Any = False,
                  timeout: Any = CALL_TIMEOUT, limits: Limits = Limits()) -> tuple[CallSpec, WorkflowSource]:
        """The validated call this workflow makes with ``variables``, and the source a checkpoint keeps."""
        spec = parse_call("workflow", self.instantiate(variables), default_tab=default_tab,
                          stop_on_warning=stop_on_warning, timeout=timeout, limits=limits)
        return spec, WorkflowSource(self.name, self.sha256)


def _substitute(value: Any, values: Mapping[str, Any]) -> Any:
    if isinstance(value, str):
        whole = _VARIABLE.fullmatch(value)
        if whole:
            return values[whole.group(1)]
        return _VARIABLE.sub(lambda m: _text(values[m.group(1)]), value)
    if isinstance(value, list):
        return [_substitute(item, values) for item in value]
    if isinstance(value, dict):
        return {key: _substitute(item, values) for key, item in value.items()}
    return value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _variables_used(value: Any) -> set[str]:
    if isinstance(value, str):
        return set(_VARIABLE.findall(value))
    if isinstance(value, list):
        return set().union(*(_variables_used(item) for item in value)) if value else set()
    if isinstance(value, dict):
        return set().union(*(_variables_used(item) for item in value.values())) if value else set()
    return set()


def parse_workflow(name: str, data: bytes) -> Workflow:
    """Parse a workflow file's bytes; ``invalid_workflow`` says what is wrong with it."""
    def bad(why: str) -> KitsuneError:
        return KitsuneError("invalid_workflow", f"workflow {name}: {why}", state={"workflow": name})

    import yaml  # noqa: PLC0415 (a workflow file's reader: a node with no workflow library loads none)
    try:
        document = yaml.safe_load(data)
    except yaml.YAMLError as e:
        raise bad(f"not valid YAML or JSON ({type(e).__name__})") from None
    if not isinstance(document, dict):
        raise bad("the file must hold an object with commands")
    commands = document.get("commands")
    if not isinstance(commands, list) or not commands:
        raise bad("commands must be a non-empty list")
    raw_variables = document.get("variables") or {}
    if not isinstance(raw_variables, dict):
        raise bad("variables must be an object")
    variables: dict[str, Mapping[str, Any]] = {}
    for variable, declared in raw_variables.items():
        if not isinstance(variable, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", variable):
            raise bad(f"bad variable name {variable!r}")
        variables[variable] = declared if isinstance(declared, dict) else {"default": declared}
    undeclared = sorted(_variables_used(commands) - set(variables))
    if undeclared:
        raise bad(f"commands use undeclared variable {undeclared[0]!r}")
    description = document.get("description", "")
    return Workflow(name, description if isinstance(description, str) else "", variables, commands,
                    hashlib.sha256(data).hexdigest())
