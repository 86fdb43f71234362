"""Structured logs of ``kitsune serve``: one JSON object per line.

Each line has ``time`` (UTC, ISO 8601), ``level``, ``logger`` and ``message``, and ``call`` and
``agent`` when the line is about one (``core.log_context``). An exception adds its type only:
its text and traceback may hold what a page or a caller sent, so they are never written. Log
messages name codes, paths and types, never a token or a typed value (the callers' rule); this
formatter adds nothing else.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

import orjson

from core.log_context import AGENT, CALL

__all__ = ["JsonFormatter", "configure_logging"]


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, call and agent when known."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        call, agent = CALL.get(), AGENT.get()
        if call is not None:
            line["call"] = call
        if agent is not None:
            line["agent"] = agent
        if record.exc_info and record.exc_info[0] is not None:
            line["exception"] = record.exc_info[0].__name__
        return orjson.dumps(line).decode()


def configure_logging(level: int = logging.INFO, stream: TextIO | None = None) -> None:
    """Send every log record (uvicorn's too) as JSON lines to ``stream`` (standard error)."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
