"""The API's JSON answers (orjson), for the app's routes and the routes of its parts.

One rule for every direct route (``POST /api/act``, ``POST /api/tabs`` open and close, a task's takeover
held for approval): an answer that is an error has its code's HTTP status (``messages.errors.ERROR_CODES``),
whether the error was raised or is the outcome of the action (:func:`outcome_response`).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from messages.errors import KitsuneError
from messages.results import Done, Outcome, status_of

__all__ = ["error_response", "error_status", "json_response", "outcome_body", "outcome_response"]


def json_response(body: Any, status: int = 200) -> Response:
    """``body`` as ``application/json`` with ``status``."""
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def error_response(error: KitsuneError) -> Response:
    """A refusal as its JSON with its code's HTTP status."""
    return json_response(error.to_json(), error.http_status)


def error_status(code: str) -> int:
    """The HTTP status of an error ``code``: its registered one, or 500 (logged) for a code not registered."""
    return KitsuneError(code, "").http_status


def outcome_body(outcome: Outcome, call: int | None = None) -> dict[str, Any]:
    """A direct action's answer: its result (``ok`` and value, or the error), its ``status`` and ``call``."""
    if isinstance(outcome, Done):
        body: dict[str, Any] = {"ok": True, **outcome.value}
        if outcome.warning is not None:
            body["warning"] = outcome.warning
    else:
        body = outcome.failure.to_json()
    body["status"] = status_of(outcome)
    if call is not None:
        body["call"] = call
    return body


def outcome_response(outcome: Outcome, call: int | None = None) -> Response:
    """A direct action's answer (:func:`outcome_body`) with its status: 200 when it was done, else its
    error's (a hold 403 ``needs_user``, ``tab_owned`` 409, ``session_expired`` 410, an unknown outcome's
    ``timeout`` 504...)."""
    status = 200 if isinstance(outcome, Done) else error_status(outcome.failure.code)
    return json_response(outcome_body(outcome, call), status)
