"""Structured logs: one JSON object per line, with the call and agent a line is about, never more."""

from __future__ import annotations

import contextvars
import io
import json
import logging

from bridge.logs import JsonFormatter, configure_logging
from core.log_context import AGENT, CALL


def _record(message: str, *args: object, exc: BaseException | None = None) -> logging.LogRecord:
    info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    return logging.LogRecord("core.engine", logging.ERROR, __file__, 1, message, args, info)


def test_a_line_is_one_json_object_with_time_level_logger_message() -> None:
    line = JsonFormatter().format(_record("call %s stopped (%s)", 7, "KeyError"))
    assert "\n" not in line
    parsed = json.loads(line)
    assert set(parsed) == {"time", "level", "logger", "message"}
    assert (parsed["level"], parsed["logger"], parsed["message"]) == ("ERROR", "core.engine",
                                                                      "call 7 stopped (KeyError)")
    assert parsed["time"].endswith("+00:00")


def test_call_and_agent_come_from_the_context_of_the_thread_or_task() -> None:
    def inside() -> dict[str, object]:
        CALL.set(42)
        AGENT.set("planner")
        return json.loads(JsonFormatter().format(_record("batch call ended ok")))  # type: ignore[no-any-return]

    parsed = contextvars.copy_context().run(inside)
    assert (parsed["call"], parsed["agent"]) == (42, "planner")
    assert "call" not in json.loads(JsonFormatter().format(_record("outside")))


def test_an_exception_adds_its_type_never_its_text_or_traceback() -> None:
    try:
        raise ValueError("typed-secret-hunter2 from the page")
    except ValueError as e:
        line = JsonFormatter().format(_record("driver failed", exc=e))
    assert json.loads(line)["exception"] == "ValueError"
    assert "hunter2" not in line and "Traceback" not in line


def test_configure_logging_sends_every_logger_to_one_json_handler() -> None:
    stream = io.StringIO()
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure_logging(logging.INFO, stream)
        logging.getLogger("uvicorn.error").info("Started server process [%d]", 1)
        logging.getLogger("actors.bus").debug("not at INFO")
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
    lines = stream.getvalue().splitlines()
    assert [json.loads(line)["message"] for line in lines] == ["Started server process [1]"]
