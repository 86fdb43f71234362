"""A JSON Schema validation error told without the value that broke it (it may be a typed value).

``jsonschema``'s own messages quote the offending instance; these name the JSON pointer of the bad
value and the rule it breaks, with the rule's schema value where that holds no input.
"""

from __future__ import annotations

from typing import Any

__all__ = ["pointer", "without_value"]

_SHOWN_RULES = frozenset({"type", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
                          "exclusiveMaximum", "minItems", "maxItems", "minProperties", "maxProperties",
                          "pattern", "format", "multipleOf", "enum", "const"})
"""Rules whose schema value is shown beside the rule's name (the schema's, never the input's)."""


def pointer(parts: Any) -> str:
    """The JSON pointer (RFC 6901) of a path of keys and indexes; ``/`` for the whole value."""
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in parts) or "/"


def without_value(error: Any) -> tuple[str, str]:
    """(pointer, what is wrong) of a ``jsonschema.ValidationError``; a missing property's pointer names it."""
    path = pointer(error.absolute_path)
    rule = str(error.validator)
    if rule == "required" and isinstance(error.instance, dict):
        missing = next((name for name in error.validator_value if name not in error.instance), None)
        if missing is not None:
            return pointer([*error.absolute_path, missing]), "is required"
    shown = f" {error.validator_value}" if rule in _SHOWN_RULES else ""
    return path, f"breaks the schema's {rule}{shown}"
