"""A site tool's input checked against the input schema its page declared, before anything runs.

The failure names the JSON pointer of the bad value and the rule it breaks, never the value
itself: a tool's input is a typed value, redacted everywhere.
"""

from __future__ import annotations

import functools
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import orjson

from messages.errors import KitsuneError
from messages.schema_errors import without_value

__all__ = ["check_input"]


def check_input(tool: str, schema: dict[str, Any], value: dict[str, Any]) -> None:
    """Raise :class:`KitsuneError` (``invalid_input``, ``state.path``) when ``value`` breaks ``schema``;
    ``site_tool_error`` when the page's schema is no JSON Schema at all."""
    validator = _validator(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS))
    if validator is None:
        raise KitsuneError("site_tool_error", f"callSiteTool {tool}: the page's input schema is not a valid JSON "
                           "Schema; nothing was sent", state={"tool": tool})
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return
    path, broken = without_value(error)
    raise KitsuneError("invalid_input", f"callSiteTool {tool}: input {path} {broken}; nothing was sent",
                       state={"tool": tool, "path": path, "rule": str(error.validator)})



@functools.lru_cache(maxsize=256)
def _validator(schema: bytes) -> Any:
    """The validator of a schema (checked against its metaschema once, not at every call), or None when it is
    not a JSON Schema; keyed by the schema's canonical JSON."""
    parsed = orjson.loads(schema)
    validator_class = jsonschema.validators.validator_for(parsed, default=jsonschema.Draft202012Validator)
    try:
        validator_class.check_schema(parsed)
    except jsonschema.SchemaError:
        return None
    return validator_class(parsed)
