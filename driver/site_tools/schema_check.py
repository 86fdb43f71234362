"""A site tool's input checked against its page's input schema, in the checker process (never on the node's loop).

The schema is the page's, data from the web: it is checked with no retrieval at all (a registry that refuses
every resource, so a ``$ref`` naming anything but a place in the schema itself resolves nowhere), and the check
runs in a process of its own that the node kills when it takes too long (a ``pattern`` that backtracks
catastrophically). :func:`check` is pure; :func:`main` is the process: length-prefixed JSON requests on stdin,
answers on stdout, until stdin closes. A failure names the JSON pointer of the bad value and the rule it
breaks, never the value itself: a tool's input is a typed value, redacted everywhere.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, BinaryIO

import jsonschema  # type: ignore[import-untyped]
import orjson
import referencing
import referencing.exceptions

from driver.site_tools.frames import FRAME
from messages.schema_errors import without_value

__all__ = ["VALIDATORS", "check", "main"]

VALIDATORS = 64
"""Schemas whose validators the checker keeps, the most recently used (at most 64 KB of schema each)."""


def _refuse(uri: str) -> referencing.Resource[Any]:
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


_NOTHING: referencing.Registry[Any] = referencing.Registry(retrieve=_refuse)  # type: ignore[call-arg]
"""A registry that retrieves nothing: only the schema itself (and the dialects' metaschemas) can be referred to."""


def check(schema: Any, value: Any) -> dict[str, Any]:
    """``{"ok": true}``; ``{"invalid_schema": why}`` when the schema is no JSON Schema or refers to a resource
    of its own; ``{"invalid_input": {"path", "broken", "rule"}}`` when ``value`` breaks it."""
    if not isinstance(schema, dict):
        return {"invalid_schema": "it is not a JSON object"}
    validator = _validator(orjson.dumps(schema))
    if isinstance(validator, dict):
        return validator
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    except referencing.exceptions.Unresolvable as e:
        return {"invalid_schema": f"it refers to {str(getattr(e, 'ref', '?'))[:200]!r}, which is not in the schema "
                                  "(no schema is ever retrieved)"}
    if error is None:
        return {"ok": True}
    path, broken = without_value(error)
    return {"invalid_input": {"path": path, "broken": broken, "rule": str(error.validator)}}


@functools.lru_cache(maxsize=VALIDATORS)
def _validator(text: bytes) -> Any:
    """The validator of the schema of JSON ``text``, checked against its metaschema once (a tool's calls check their
    inputs against the same schema); or the ``{"invalid_schema": why}`` answer when it is no JSON Schema."""
    schema = orjson.loads(text)
    validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as e:
        return {"invalid_schema": f"it is not a valid JSON Schema ({_where(e)} breaks the metaschema's "
                                  f"{e.validator})"}
    return validator_class(schema, registry=_NOTHING)


def _where(error: Any) -> str:
    return "the schema at " + ("/" + "/".join(str(part) for part in error.absolute_path) if error.absolute_path
                               else "its root")


def main(stdin: BinaryIO = sys.stdin.buffer, stdout: BinaryIO = sys.stdout.buffer) -> None:
    """Answer requests ``{"schema", "value"}`` until stdin closes."""
    while len(header := stdin.read(FRAME.size)) == FRAME.size:
        request = orjson.loads(stdin.read(FRAME.unpack(header)[0]))
        try:
            answer = check(request.get("schema"), request.get("value"))
        except (RecursionError, ValueError, TypeError) as e:  # a schema jsonschema cannot walk
            answer = {"invalid_schema": f"it cannot be checked ({type(e).__name__})"}
        body = orjson.dumps(answer)
        stdout.write(FRAME.pack(len(body)) + body)
        stdout.flush()


if __name__ == "__main__":
    main()
