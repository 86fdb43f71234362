"""The parameters of each command, read once from its dataclass fields."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from messages.commands._actions import Command
from messages.commands._blocks import ACTIONS


@dataclass(frozen=True, slots=True)
class Param:
    """One parameter of a command: its Python and JSON names, type, default and metadata."""

    name: str
    json_name: str
    type: Any
    required: bool
    default: Any
    meta: Mapping[str, Any]

    @property
    def secret(self) -> bool:
        return bool(self.meta.get("secret"))

    @property
    def javascript(self) -> bool:
        return bool(self.meta.get("javascript"))

    @property
    def dropped(self) -> bool:
        """Whether it never enters a log: a JavaScript body, or what may hold one (a CDP method's parameters)."""
        return self.javascript or bool(self.meta.get("dropped"))


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _params_of(cls: type[Command]) -> tuple[Param, ...]:
    hints = typing.get_type_hints(cls)
    return tuple(
        Param(
            name=f.name,
            json_name=f.metadata.get("json_name", _camel(f.name)),
            type=hints[f.name],
            required=f.default is dataclasses.MISSING,
            default=None if f.default is dataclasses.MISSING else f.default,
            meta=f.metadata,
        )
        for f in dataclasses.fields(cls)
    )


_PARAMS: dict[type[Command], tuple[Param, ...]] = {cls: _params_of(cls) for cls in ACTIONS.values()}


def parameters(cls: type[Command]) -> tuple[Param, ...]:
    """The parameters an action or block takes, as the parser and the JSON Schema see them."""
    return _PARAMS[cls]
