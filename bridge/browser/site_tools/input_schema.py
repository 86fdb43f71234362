"""A site tool's input checked against the input schema its page declared, before anything runs.

The failure names the JSON pointer of the bad value and the rule it breaks, never the value
itself: a tool's input is a typed value, redacted everywhere.
"""

from __future__ import annotations

from typing import Any

import jsonschema  # type: ignore[import-untyped]

from messages.errors import KitsuneError
from messages.schema_errors import without_value

__all__ = ["check_input"]


def check_input(tool: str, schema: dict[str, Any], value: dict[str, Any]) -> None:
    """Raise :class:`KitsuneError` (``invalid_input``, ``state.path``) when ``value`` breaks ``schema``;
    ``site_tool_error`` when the page's schema is no JSON Schema at all."""
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator_class.check_schema(schema)
    except jsonschema.SchemaError:
        raise KitsuneError("site_tool_error", f"callSiteTool {tool}: the page's input schema is not a valid JSON "
                           "Schema; nothing was sent", state={"tool": tool}) from None
    error = jsonschema.exceptions.best_match(validator_class(schema).iter_errors(value))
    if error is None:
        return
    path, broken = without_value(error)
    raise KitsuneError("invalid_input", f"callSiteTool {tool}: input {path} {broken}; nothing was sent",
                       state={"tool": tool, "path": path, "rule": str(error.validator)})

