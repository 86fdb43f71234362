"""The one reading of a number in a request's query (and path): as a command's, strictly.

A whole number is its decimal digits alone (no sign, space, fraction or exponent), within its range: a
tab id is 0 to 2**53 - 1, as in a body. Anything else is 400 ``invalid_parameter`` naming the parameter
(``state.path`` "", ``state.param``), and nothing is done; an absent required one is ``missing_parameter``.
"""

from __future__ import annotations

import math
import re

from starlette.requests import Request

from messages.commands import MAX_TAB_ID, whole_param
from messages.errors import invalid_call

__all__ = ["query_int", "query_number", "whole_text"]

_DIGITS = re.compile(r"[0-9]{1,20}")
"""More digits than any bound here has: longer is out of range without reading it (no huge int)."""
_NUMBER = re.compile(r"[0-9]{1,20}(\.[0-9]{1,20})?")


def whole_text(raw: str, name: str, low: int = 0, high: int = MAX_TAB_ID) -> int:
    """``raw`` (a query's or a path's text) as a whole number from ``low`` to ``high``, else ``invalid_parameter``."""
    if _DIGITS.fullmatch(raw) is None:
        raise invalid_call("invalid_parameter", "", f"{name}: expected a whole number from {low} to {high}",
                           param=name)
    return whole_param(int(raw), name, low, high)


def query_int(request: Request, name: str, *, required: bool = False, low: int = 0,
              high: int = MAX_TAB_ID) -> int | None:
    """The query parameter ``name`` as a whole number (:func:`whole_text`); None when absent and not required."""
    given = request.query_params.getlist(name)
    if not given:
        if required:
            raise invalid_call("missing_parameter", "", f"{name} is required (?{name}=N)", param=name)
        return None
    if len(given) > 1:
        raise invalid_call("invalid_parameter", "", f"{name} is given more than once", param=name)
    return whole_text(given[0], name, low, high)


def query_number(request: Request, name: str, default: float, *, low: float, high: float) -> float:
    """The query parameter ``name`` as a number of seconds from ``low`` to ``high`` (``default`` when absent)."""
    given = request.query_params.getlist(name)
    if not given:
        return default
    value = float(given[0]) if len(given) == 1 and _NUMBER.fullmatch(given[0]) else math.nan
    if not low <= value <= high:  # NaN too
        raise invalid_call("invalid_parameter", "", f"{name} must be {low:g} to {high:g} seconds", param=name)
    return value
