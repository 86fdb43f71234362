"""The API's JSON answers (orjson), for the app's routes and the routes of its parts."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

__all__ = ["json_response"]


def json_response(body: Any, status: int = 200) -> Response:
    """``body`` as ``application/json`` with ``status``."""
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")
