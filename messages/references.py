"""``${$N.path}`` references to the results of earlier steps.

``N`` is a top-level index, or a step index inside a sequence; ``path`` walks the result
(``${$0.tabId}``, ``${$2.items.0.text}``). A value that is exactly one reference takes the
referenced value with its type (a :class:`Ref`); a string with references inside is a
:class:`Template` and resolves to a string.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from messages.errors import KitsuneError

__all__ = ["Ref", "Template", "parse_references", "references_in", "resolve"]

_REFERENCE = re.compile(r"\$\{\$([0-9]+)((?:\.[A-Za-z0-9_\-]+)*)\}")  # ASCII digits, as the schema
_OPENING = "${$"


@dataclass(frozen=True, slots=True)
class Ref:
    """A whole value taken from an earlier step's result."""

    step: int
    """Index of the referenced step in the enclosing list (batch or sequence)."""
    path: tuple[str, ...] = ()
    """Keys (or list indexes, as digits) walked from the result's top level."""

    def __str__(self) -> str:
        return "${$" + str(self.step) + "".join("." + part for part in self.path) + "}"


@dataclass(frozen=True, slots=True)
class Template:
    """A string with references inside; resolves to a string."""

    parts: tuple[str | Ref, ...]
    """Literal text and references, in order."""

    def __str__(self) -> str:
        return "".join(str(part) for part in self.parts)


def parse_references(text: str) -> str | Ref | Template:
    """Parse a string value: plain text, one whole reference, or a template.

    Raises ``ValueError`` naming the bad reference when ``${$`` opens something that is
    not a well-formed reference.
    """
    if _OPENING not in text:
        return text
    parts: list[str | Ref] = []
    position = 0
    for match in _REFERENCE.finditer(text):
        literal = text[position : match.start()]
        if _OPENING in literal:
            raise ValueError(f"malformed reference at character {position + literal.index(_OPENING)}")
        if literal:
            parts.append(literal)
        path = tuple(match.group(2).split(".")[1:]) if match.group(2) else ()
        parts.append(Ref(int(match.group(1)), path))
        position = match.end()
    tail = text[position:]
    if _OPENING in tail:
        raise ValueError(f"malformed reference at character {position + tail.index(_OPENING)}")
    if tail:
        parts.append(tail)
    if len(parts) == 1 and isinstance(parts[0], Ref):
        return parts[0]
    return Template(tuple(parts))


def references_in(value: Any) -> Iterator[Ref]:
    """Every reference inside a parameter value (lists and templates included)."""
    if isinstance(value, Ref):
        yield value
    elif isinstance(value, Template):
        yield from (part for part in value.parts if isinstance(part, Ref))
    elif isinstance(value, tuple):
        for item in value:
            yield from references_in(item)


def resolve(value: Any, result_of: Callable[[int], Any]) -> Any:
    """Replace references in ``value`` with what they point at.

    ``result_of(N)`` answers step N's result as JSON. Raises :class:`KitsuneError`
    ``reference_unresolved`` when a step has no result or the path does not exist.
    """
    if isinstance(value, Ref):
        return _walk(value, result_of(value.step))
    if isinstance(value, Template):
        return "".join(
            part if isinstance(part, str) else _as_text(_walk(part, result_of(part.step)))
            for part in value.parts
        )
    if isinstance(value, tuple):
        return tuple(resolve(item, result_of) for item in value)
    return value


def _walk(ref: Ref, result: Any) -> Any:
    if result is None:
        raise KitsuneError("reference_unresolved", f"{ref} names step {ref.step}, which has no result")
    current = result
    for depth, part in enumerate(ref.path):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            walked = ".".join(ref.path[: depth + 1])
            raise KitsuneError("reference_unresolved", f"{ref}: step {ref.step}'s result has no {walked}")
    return current


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict | list):  # as JSON (JSON.stringify's form), not as a Python repr
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)
